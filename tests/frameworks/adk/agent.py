"""A scripted Google ADK (google-adk 2.13.0) agent served over A2A with ADK's own `to_a2a`.

Usage: python agent.py [--port 0] [--streaming sse|none] [--executor legacy|v2] [--parent-pid PID]
Prints "READY <base-url>" on stdout once it is ready to serve on 127.0.0.1 (see
tests/peer_serve.py); logs go to stderr.

The model is a custom `BaseLlm` (no network, no key). In streaming mode it feeds scripted
`GenerateContentResponse` chunks through ADK's own `StreamingResponseAggregator`, exactly as
ADK's `Gemini` model does for a real SSE stream: one `partial=True` LlmResponse per chunk, then
one aggregated non-partial LlmResponse. Without streaming it yields one complete response.

Scripted by the first word of the latest user text (case-insensitive):
- hello / anything else: "Hello from adk. This reply arrives in chunks."
- tool: calls FunctionTool get_weather(city="Paris") -> {"forecast": "sunny"}, then
  "It is sunny in Paris."
- think: thinks (thought parts), calls get_weather(city="Paris"), thinks again, then
  "It is sunny in Paris."; every model response reports Gemini-style usage_metadata
  (THINK_USAGE), as ADK's Gemini model passes it on.
- approve: calls LongRunningFunctionTool ask_for_approval(question="Approve sending the
  report?") -> {"status": "pending", ...}; the A2A task ends input-required. Resume with a
  function_response data part (same id/name); the model then replies "Done: <answer>.".

--streaming: ADK's A2A request converter always builds RunConfig() with
streaming_mode=NONE (google/adk/a2a/converters/request_converter.py), whatever the A2A method
(message/send or message/stream). `sse` (default) wraps that converter to set
StreamingMode.SSE, so the model is called with stream=True and partial events reach A2A.
--executor: `legacy` (default) is what ADK runs unless the client activates the extension
https://google.github.io/adk-docs/a2a/a2a-extension/ (header A2A-Extensions); `v2` forces
ADK's new executor (A2aAgentExecutor(force_new_version=True)) for every request.
"""

import argparse
import asyncio
import json
import logging
import os
import sys
import warnings
from typing import AsyncGenerator

# ADK marks all of its A2A support [EXPERIMENTAL] with a UserWarning on every use.
warnings.filterwarnings("ignore", message=r"\[EXPERIMENTAL\]")

from google.adk.a2a.converters.request_converter import convert_a2a_request_to_agent_run_request
from google.adk.a2a.executor.a2a_agent_executor import A2aAgentExecutor
from google.adk.a2a.executor.config import A2aAgentExecutorConfig
from google.adk.a2a.utils.agent_to_a2a import to_a2a
from google.adk.agents import LlmAgent
from google.adk.agents.run_config import StreamingMode
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.tools import FunctionTool, LongRunningFunctionTool
from google.adk.utils.streaming_utils import StreamingResponseAggregator
from google.genai import types

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from peer_serve import serve  # noqa: E402 (tests/peer_serve.py)
from frameworks.gemini_usage import usage_metadata  # noqa: E402

NAME = "adk"
HELLO = ["Hello from adk.", " This reply", " arrives in chunks."]
WEATHER = ["It is sunny", " in Paris."]
QUESTION = "Approve sending the report?"
THINK_FIRST = ["The user wants the weather.", " I should call get_weather."]
THINK_AFTER = ["The tool says sunny."]
# Per model call of the think script: (prompt, candidates, thoughts, cached). Gemini reports
# candidatesTokenCount without the thoughts; totalTokenCount = prompt + candidates + thoughts.
THINK_USAGE = {"call": (120, 8, 15, 100), "answer": (150, 6, 5, 100)}


def get_weather(city: str) -> dict:
    """Returns the weather forecast for a city."""
    return {"forecast": "sunny"}


def ask_for_approval(question: str) -> dict:
    """Asks a human to approve an action. The answer arrives later."""
    return {"status": "pending", "question": question}


def answer_of(response: dict) -> str:
    """The human's answer inside a function_response payload."""
    if not isinstance(response, dict):
        return str(response)
    for key in ("answer", "result", "approved", "status"):
        if key in response:
            value = response[key]
            return value if isinstance(value, str) else json.dumps(value)
    return json.dumps(response, sort_keys=True)


def thinking(contents) -> bool:
    """True if the turn's user text is the think script."""
    for content in reversed(contents):
        if content.role == "user":
            text = " ".join(p.text for p in content.parts or [] if p.text)
            if text:
                return text.split()[0].lower() == "think"
    return False


class ScriptedLlm(BaseLlm):
    """A scripted model: decides from the conversation in llm_request what comes next."""

    model: str = "scripted-adk"

    @classmethod
    def supported_models(cls) -> list[str]:
        return [r"scripted-.*"]

    def plan(self, llm_request: LlmRequest):
        """Returns ("text", [chunks]) or ("call", name, args), and for the think script
        ("think", thoughts, then, usage) with `then` one of those."""
        contents = llm_request.contents or []
        last = contents[-1] if contents else None
        parts = (last.parts or []) if last else []
        responses = [p.function_response for p in parts if p.function_response]
        if responses:
            fr = responses[-1]
            if fr.name == "get_weather":
                if thinking(contents):
                    return ("think", THINK_AFTER, ("text", WEATHER), THINK_USAGE["answer"])
                return ("text", WEATHER)
            if fr.name == "ask_for_approval":
                response = fr.response or {}
                if response.get("status") == "pending":
                    # ADK called the model again with the tool's own pending result.
                    return ("text", ["Waiting for approval."])
                answer = answer_of(response)
                return ("text", ["Done: ", f"{answer}."])
            return ("text", [f"Unexpected function response {fr.name}."])
        text = ""
        for content in reversed(contents):
            if content.role == "user":
                text = " ".join(p.text for p in content.parts or [] if p.text)
                if text:
                    break
        words = text.split()
        command = words[0].lower() if words else ""
        if command == "tool":
            return ("call", "get_weather", {"city": "Paris"})
        if command == "think":
            then = ("call", "get_weather", {"city": "Paris"})
            return ("think", THINK_FIRST, then, THINK_USAGE["call"])
        if command == "approve":
            return ("call", "ask_for_approval", {"question": QUESTION})
        return ("text", HELLO)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        plan = self.plan(llm_request)
        log = logging.getLogger("scripted")
        if log.isEnabledFor(logging.DEBUG):
            for c in llm_request.contents or []:
                log.debug(
                    "  %s: %s", c.role,
                    [p.model_dump(exclude_none=True, mode="json") for p in c.parts or []],
                )
        log.info("stream=%s plan=%s", stream, plan)
        thoughts, usage = [], None
        if plan[0] == "think":
            thoughts = [types.Part(text=t, thought=True) for t in plan[1]]
            usage, plan = plan[3], plan[2]
        if plan[0] == "text":
            chunks = [types.Part.from_text(text=c) for c in plan[1]]
        else:
            chunks = [types.Part(function_call=types.FunctionCall(name=plan[1], args=plan[2]))]
        if not stream:
            if plan[0] == "text":
                chunks = [types.Part.from_text(text="".join(plan[1]))]
            if thoughts:
                thought = "".join(t.text for t in thoughts)
                chunks = [types.Part(text=thought, thought=True), *chunks]
            yield LlmResponse(
                content=types.Content(role="model", parts=chunks),
                finish_reason=types.FinishReason.STOP,
                model_version=self.model,
                usage_metadata=usage_metadata(usage),
            )
            return
        chunks = thoughts + chunks
        # What Gemini's SSE stream looks like to ADK: one GenerateContentResponse per chunk,
        # the last with finish_reason STOP, aggregated by ADK's own aggregator
        # (google/adk/models/google_llm.py does exactly this).
        aggregator = StreamingResponseAggregator()
        for i, part in enumerate(chunks):
            response = types.GenerateContentResponse(
                candidates=[
                    types.Candidate(
                        content=types.Content(role="model", parts=[part]),
                        finish_reason=types.FinishReason.STOP if i == len(chunks) - 1 else None,
                        index=0,
                    )
                ],
                model_version=self.model,
                # Gemini reports the usage so far on every chunk, the call's total on the last.
                usage_metadata=usage_metadata(usage, done=i == len(chunks) - 1),
            )
            async for llm_response in aggregator.process_response(response):
                yield llm_response
            await asyncio.sleep(0.02)
        final = aggregator.close()
        if final is not None:
            yield final


def build_agent() -> LlmAgent:
    return LlmAgent(
        name="adk_scripted",
        model=ScriptedLlm(),
        description="Scripted Google ADK agent for gateway tests: hello | tool | think | approve.",
        instruction="You are a scripted test agent.",
        tools=[FunctionTool(get_weather), LongRunningFunctionTool(ask_for_approval)],
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--streaming", choices=["sse", "none"], default="sse")
    parser.add_argument("--executor", choices=["legacy", "v2"], default="legacy")
    parser.add_argument("--parent-pid", type=int, default=0, help="exit when this process is gone")
    parser.add_argument("--log-level", default="WARNING", help="of the scripted model (DEBUG: its input)")
    args = parser.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    logging.getLogger("scripted").setLevel(args.log_level.upper())

    mode = StreamingMode.SSE if args.streaming == "sse" else StreamingMode.NONE

    def request_converter(context, part_converter):
        run_request = convert_a2a_request_to_agent_run_request(context, part_converter)
        run_request.run_config.streaming_mode = mode
        return run_request

    config = A2aAgentExecutorConfig(request_converter=request_converter)

    def executor_factory(runner):
        return A2aAgentExecutor(runner=runner, config=config, force_new_version=args.executor == "v2")

    def build(_base, port):
        return to_a2a(
            build_agent(),
            host="127.0.0.1",
            port=port,
            protocol="http",
            agent_executor_factory=executor_factory,
        )

    # The card and JSON-RPC routes are attached in the app's lifespan, hence lifespan="on".
    serve(build, port=args.port, parent_pid=args.parent_pid, lifespan="on")


if __name__ == "__main__":
    sys.exit(main())
