"""A scripted Strands Agents peer (strands-agents 1.62.0) served over A2A 0.3 by
strands.multiagent.a2a.A2AServer: the model is scripted, everything else is the framework.

Usage: python agent.py [--port 0] [--mode default|compliant] [--parent-pid PID]
Prints "READY <base-url>" on stdout once it is ready to serve on 127.0.0.1 (see
tests/peer_serve.py); logs go to stderr.

--mode default    A2AServer(enable_a2a_compliant_streaming=False): text chunks as
                  `working` status updates, then one whole-text artifact, then `completed`.
--mode compliant  A2AServer(enable_a2a_compliant_streaming=True): text chunks as
                  artifact-update appends on one artifact, then an empty lastChunk, then
                  `completed`.

Scripted by the first word of the latest user text message of the context (case-insensitive):
  hello (default)  "Hello from strands. This reply arrives in chunks." in 3 chunks
  tool             calls get_weather {"city": "Paris"} -> {"forecast": "sunny"},
                   then "It is sunny in Paris." in 2 chunks
  approve          calls send_report, whose tool_context.interrupt("approval", reason=
                   {"question": "Approve sending the report?"}) parks the task in
                   input-required; after the interruptResponse the model says "Done: <answer>."
"""

import argparse
import asyncio
import json
import logging
import os
import re
import sys
import warnings
from typing import Any, AsyncGenerator

from strands import Agent, tool
from strands.models.model import Model
from strands.multiagent.a2a import A2AServer
from strands.types.tools import ToolContext

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from peer_serve import serve  # noqa: E402 (tests/peer_serve.py)

FW = "strands"
APPROVAL_QUESTION = "Approve sending the report?"


@tool
def get_weather(city: str) -> dict:
    """Get the weather forecast for a city.

    Args:
        city: The city name.
    """
    return {"forecast": "sunny"}


@tool(context=True)
def send_report(tool_context: ToolContext) -> str:
    """Send the report, after a human approved it."""
    answer = tool_context.interrupt("approval", reason={"question": APPROVAL_QUESTION})
    return answer if isinstance(answer, str) else json.dumps(answer)


def _texts(message: dict) -> list[str]:
    return [block["text"] for block in message.get("content", []) if "text" in block]


def _tool_results(message: dict) -> list[dict]:
    return [block["toolResult"] for block in message.get("content", []) if "toolResult" in block]


def _result_text(result: dict) -> str:
    return "".join(block.get("text", "") for block in result.get("content", []))


class ScriptedModel(Model):
    """A scripted model provider: streams Bedrock-converse-shaped StreamEvents, like
    strands' own tests/fixtures/mocked_model_provider.py."""

    def __init__(self) -> None:
        self.config: dict[str, Any] = {"model_id": "scripted"}

    def update_config(self, **model_config: Any) -> None:
        self.config.update(model_config)

    def get_config(self) -> Any:
        return self.config

    async def structured_output(self, output_model, prompt, system_prompt=None, **kwargs):  # pragma: no cover
        raise NotImplementedError("the scripted model has no structured output")
        yield  # noqa: unreachable - makes this an async generator

    async def stream(self, messages, tool_specs=None, system_prompt=None, **kwargs) -> AsyncGenerator[dict, None]:
        # The scenario: first word of the latest user message that carries text.
        scenario = "hello"
        for message in reversed(messages):
            if message["role"] == "user" and _texts(message):
                words = re.findall(r"[A-Za-z0-9_-]+", " ".join(_texts(message)))
                scenario = words[0].lower() if words else "hello"
                break
        last = messages[-1] if messages else {}
        results = _tool_results(last) if last.get("role") == "user" else []

        if scenario == "tool" and not results:
            async for event in self._tool_call("get_weather", {"city": "Paris"}):
                yield event
        elif scenario == "tool":
            # The reply is built from the tool's real result: {"forecast": "sunny"}.
            forecast = json.loads(_result_text(results[0]) or "{}").get("forecast", "unknown")
            async for event in self._text([f"It is {forecast}", " in Paris."]):
                yield event
        elif scenario == "approve" and not results:
            async for event in self._tool_call("send_report", {}):
                yield event
        elif scenario == "approve":
            answer = _result_text(results[0])
            async for event in self._text(["Done: ", f"{answer}."]):
                yield event
        else:
            async for event in self._text([f"Hello from {FW}.", " This reply", " arrives in chunks."]):
                yield event

    async def _text(self, chunks: list[str]) -> AsyncGenerator[dict, None]:
        yield {"messageStart": {"role": "assistant"}}
        yield {"contentBlockStart": {"start": {}}}
        for chunk in chunks:
            await asyncio.sleep(0.01)
            yield {"contentBlockDelta": {"delta": {"text": chunk}}}
        yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "end_turn"}}
        yield self._metadata()

    async def _tool_call(self, name: str, args: dict) -> AsyncGenerator[dict, None]:
        yield {"messageStart": {"role": "assistant"}}
        yield {"contentBlockStart": {"start": {"toolUse": {"name": name, "toolUseId": f"call-{name}"}}}}
        yield {"contentBlockDelta": {"delta": {"toolUse": {"input": json.dumps(args)}}}}
        yield {"contentBlockStop": {}}
        yield {"messageStop": {"stopReason": "tool_use"}}
        yield self._metadata()

    @staticmethod
    def _metadata() -> dict:
        return {
            "metadata": {
                "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2},
                "metrics": {"latencyMs": 1},
            }
        }


def make_agent(context_id: str) -> Agent:
    return Agent(
        name="Strands scripted peer",
        description="Scripted strands-agents 1.62.0 agent for gateway tests: hello | tool | approve.",
        model=ScriptedModel(),
        tools=[get_weather, send_report],
        callback_handler=None,
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--mode", choices=["default", "compliant"], default="default")
    parser.add_argument("--parent-pid", type=int, default=0, help="exit when this process is gone")
    parser.add_argument("--verbose", action="store_true", help="strands/a2a logs on stderr")
    args = parser.parse_args()

    logging.basicConfig(stream=sys.stderr, level=logging.INFO if args.verbose else logging.WARNING)
    if not args.verbose:
        # The default mode warns on every request that it is not spec-conformant.
        warnings.simplefilter("ignore")

    def build(base: str, _port: int):
        return A2AServer(
            agent_factory=make_agent,
            http_url=base,
            version="1.62.0",
            enable_a2a_compliant_streaming=args.mode == "compliant",
        ).to_starlette_app()

    serve(build, port=args.port, parent_pid=args.parent_pid)
    return 0


if __name__ == "__main__":
    sys.exit(main())
