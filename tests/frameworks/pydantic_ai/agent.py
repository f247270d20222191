"""A scripted pydantic-ai agent served over A2A by fasta2a: a real-framework test peer.

Usage: python agent.py [--port 0] [--parent-pid PID]
Prints "READY <base-url>" on stdout once it is ready to serve on 127.0.0.1 (see
tests/peer_serve.py); logs go to stderr.

pydantic-ai 2.x has no `Agent.to_a2a()` any more; its replacement is
`fasta2a.pydantic_ai.agent_to_a2a` (fasta2a 2.1.1, in-memory storage and broker by default).
The model is a `FunctionModel` with both a `function` and a `stream_function`: fasta2a's
`AgentWorker` runs the agent streamed and publishes every text delta as an artifact chunk.

Scripted by the first word of the latest user prompt (case-insensitive):
- hello / anything else: "Hello from pydantic_ai. This reply arrives in chunks." in 3 chunks.
- tool: calls the `get_weather` tool with {"city": "Paris"} ({"forecast": "sunny"}), then
  "It is sunny in Paris." in 2 chunks.
- approve: "Approve sending the report?" and a call of `send_report`, a tool registered with
  `requires_approval=True`: pydantic-ai ends the run with a `DeferredToolRequests` output
  (the agent's output_type allows it). fasta2a does not map that to `input-required`: the
  task completes with the DeferredToolRequests as a data artifact (see README.md).
  Were the call ever approved (pydantic-ai `DeferredToolResults`, which fasta2a cannot carry),
  the tool would return and the model would say "Done: <tool result>.". A follow-up message
  in the same context is a new task; pydantic-ai repairs the pending call with an
  "interrupted" return and the model says "Not sent: send_report was interrupted (you said:
  <text>)." (a data-part message fails the task: fasta2a refuses data parts).
"""

import argparse
import asyncio
import json
import logging
import os
import sys

from fasta2a.pydantic_ai import agent_to_a2a
from fasta2a.schema import Skill
from pydantic_ai import Agent, DeferredToolRequests
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, FunctionModel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from peer_serve import serve  # noqa: E402 (tests/peer_serve.py)

FW = "pydantic_ai"
HELLO = [f"Hello from {FW}.", " This reply", " arrives in chunks."]
WEATHER = ["It is sunny", " in Paris."]
QUESTION = "Approve sending the report?"

log = logging.getLogger("pydantic_ai_peer")


def _latest_prompt(messages: list[ModelMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):
                if isinstance(part, UserPromptPart) and isinstance(part.content, str):
                    return part.content
    return ""


def _plan(messages: list[ModelMessage]) -> tuple[str, object]:
    """What the scripted model does next: ("text", [chunks]) or ("call", (text, tool, args, id))."""
    last = messages[-1] if messages else None
    if isinstance(last, ModelRequest):
        returns = [p for p in last.parts if isinstance(p, ToolReturnPart)]
        for ret in returns:
            if ret.tool_name == "get_weather":
                return "text", WEATHER
            if ret.tool_name == "send_report" and ret.outcome == "success":
                return "text", [f"Done: {ret.content}", "."]
            if ret.tool_name == "send_report":
                # pydantic-ai repairs a call left pending in the history with a synthesized
                # return, outcome "interrupted": what a follow-up A2A message produces here.
                said = _latest_prompt(messages)
                return "text", [f"Not sent: send_report was {ret.outcome}", f" (you said: {said})."]
    prompt = _latest_prompt(messages)
    words = prompt.split()
    first = words[0].lower() if words else ""
    if first == "tool":
        return "call", (None, "get_weather", {"city": "Paris"}, "call-get-weather-1")
    if first == "approve":
        return "call", (QUESTION, "send_report", {"report": "weekly"}, "call-send-report-1")
    return "text", HELLO


def scripted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    kind, what = _plan(messages)
    log.info("model (non-streamed): %s %s", kind, what)
    if kind == "text":
        return ModelResponse(parts=[TextPart("".join(what))])
    text, tool, args, call_id = what
    parts = [TextPart(text)] if text else []
    parts.append(ToolCallPart(tool_name=tool, args=args, tool_call_id=call_id))
    return ModelResponse(parts=parts)


async def scripted_stream(messages: list[ModelMessage], info: AgentInfo):
    kind, what = _plan(messages)
    log.info("model (streamed): %s %s", kind, what)
    if kind == "text":
        for chunk in what:
            await asyncio.sleep(0.01)
            yield chunk
        return
    text, tool, args, call_id = what
    if text:
        # pydantic-ai's FunctionStreamedResponse takes text and tool-call deltas in one
        # stream: the text becomes a TextPart, the call a ToolCallPart after it.
        yield text
    await asyncio.sleep(0.01)
    yield {0: DeltaToolCall(name=tool, json_args=json.dumps(args), tool_call_id=call_id)}


def build_agent() -> Agent:
    agent = Agent(
        FunctionModel(scripted, stream_function=scripted_stream, model_name="scripted"),
        name=f"{FW} scripted peer",
        # DeferredToolRequests lets a run that hits an approval-required tool end with the
        # pending calls as its output (pydantic-ai's native human-in-the-loop).
        output_type=[str, DeferredToolRequests],
    )

    @agent.tool_plain
    def get_weather(city: str) -> dict:
        """The weather forecast for a city."""
        return {"forecast": "sunny"}

    @agent.tool_plain(requires_approval=True)
    def send_report(report: str) -> str:
        """Send the report; a human approves every call."""
        return f"sent {report}"

    return agent


def main() -> int:
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--parent-pid", type=int, default=0, help="exit when this process is gone")
    args = parser.parse_args()

    def build(base: str, _port: int):
        return agent_to_a2a(
            build_agent(),
            url=base,
            description="Scripted pydantic-ai agent (FunctionModel) served by fasta2a, for gateway tests.",
            skills=[
                Skill(
                    id="scripted",
                    name="Scripted scenarios",
                    description="hello | tool | approve (first word of the user message)",
                    tags=["test"],
                    input_modes=["text/plain"],
                    output_modes=["text/plain", "application/json"],
                )
            ],
        )

    # READY only once the lifespan (task manager, broker, worker) has started.
    serve(build, port=args.port, parent_pid=args.parent_pid)
    return 0


if __name__ == "__main__":
    sys.exit(main())
