"""A scripted kagent agent (kagent-adk 0.10.4, A2A 0.3) served with kagent's own `KAgentApp`.

Usage: python agent.py [--port 0] [--parent-pid PID]
Prints "READY <base-url>" on stdout once it is ready to serve on 127.0.0.1 (see
tests/peer_serve.py); logs go to stderr.

`KAgentApp(...).build(local=True)` is kagent's own app with in-memory sessions and tasks: no
kagent controller, no network. The model is a custom ADK `BaseLlm` (no key); kagent's
default `stream=False` calls it once per step, so every model call is one non-partial ADK
event (`kagent_adk_partial: false`).

Scripted by the first word of the latest user text (case-insensitive):
- hello / anything else: "Hello from kagent."
- think: thinks "The user wants the weather. I should call get_weather." (a thought part),
  calls get_weather(city="Paris") -> {"forecast": "sunny"}, thinks "The tool says sunny." and
  says "It is sunny in Paris."; each model call reports Gemini-style usage_metadata
  (THINK_USAGE), as kagent's model adapters do.
"""

import argparse
import logging
import os
import sys
import warnings
from typing import AsyncGenerator

warnings.filterwarnings("ignore", message=r"\[EXPERIMENTAL\]")

from a2a.types import AgentCapabilities, AgentCard, AgentSkill  # noqa: E402
from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.models.base_llm import BaseLlm  # noqa: E402
from google.adk.models.llm_request import LlmRequest  # noqa: E402
from google.adk.models.llm_response import LlmResponse  # noqa: E402
from google.adk.tools import FunctionTool  # noqa: E402
from google.genai import types  # noqa: E402
from kagent.adk import KAgentApp  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from peer_serve import serve  # noqa: E402 (tests/peer_serve.py)
from frameworks.gemini_usage import usage_metadata  # noqa: E402

NAME = "kagent_scripted"
HELLO = "Hello from kagent."
THOUGHT_CALL = "The user wants the weather. I should call get_weather."
THOUGHT_ANSWER = "The tool says sunny."
WEATHER = "It is sunny in Paris."
# Per model call: (prompt, candidates, thoughts, cached); Gemini counts thoughts beside the
# candidates and totalTokenCount = prompt + candidates + thoughts.
THINK_USAGE = {"call": (120, 8, 15, 100), "answer": (150, 6, 5, 100)}


def get_weather(city: str) -> dict:
    """Returns the weather forecast for a city."""
    return {"forecast": "sunny"}


class ScriptedLlm(BaseLlm):
    """A scripted model: decides from the conversation in llm_request what comes next."""

    model: str = "scripted-kagent"

    @classmethod
    def supported_models(cls) -> list[str]:
        return [r"scripted-.*"]

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        contents = llm_request.contents or []
        last = contents[-1] if contents else None
        parts = (last.parts or []) if last else []
        if any(p.function_response for p in parts):
            reply = [types.Part(text=THOUGHT_ANSWER, thought=True), types.Part.from_text(text=WEATHER)]
            usage = usage_metadata(THINK_USAGE["answer"])
        else:
            text = " ".join(p.text for p in parts if p.text)
            command = (text.split() or [""])[0].lower()
            if command == "think":
                call = types.FunctionCall(name="get_weather", args={"city": "Paris"})
                reply = [types.Part(text=THOUGHT_CALL, thought=True), types.Part(function_call=call)]
                usage = usage_metadata(THINK_USAGE["call"])
            else:
                reply, usage = [types.Part.from_text(text=HELLO)], None
        yield LlmResponse(
            content=types.Content(role="model", parts=reply),
            finish_reason=types.FinishReason.STOP,
            model_version=self.model,
            usage_metadata=usage,
        )


def build_agent() -> LlmAgent:
    return LlmAgent(
        name=NAME,
        model=ScriptedLlm(),
        description="Scripted kagent agent for gateway tests: hello | think.",
        instruction="You are a scripted test agent.",
        tools=[FunctionTool(get_weather)],
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--parent-pid", type=int, default=0, help="exit when this process is gone")
    args = parser.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)

    def build(base, _port):
        card = AgentCard(
            name=NAME,
            description="Scripted kagent agent for gateway tests.",
            url=base,
            version="0.10.4",
            protocol_version="0.3.0",
            capabilities=AgentCapabilities(streaming=True),
            default_input_modes=["text"],
            default_output_modes=["text"],
            skills=[AgentSkill(id="weather", name="weather", description="thinks, then the weather", tags=["test"])],
        )
        app = KAgentApp(build_agent, card, kagent_url="http://127.0.0.1:9", app_name=NAME)
        return app.build(local=True)

    serve(build, port=args.port, parent_pid=args.parent_pid, lifespan="on")


if __name__ == "__main__":
    sys.exit(main())
