"""A kagent parent agent delegating to a kagent child agent (kagent-adk 0.10.4, A2A 0.3),
both served with kagent's own `KAgentApp(...).build(local=True)` on 127.0.0.1, scripted
models (no key, no network).

Usage: python delegation.py child  [--port 0] [--parent-pid PID]
       python delegation.py parent --child-url URL [--port 0] [--parent-pid PID]
Prints "READY <base-url>" on stdout once it is ready (see tests/peer_serve.py).

The parent's only tool is the child, as kagent's controller wires an `Agent`-typed tool:
`KAgentRemoteA2AToolset(name="kagent__NS__k8s_agent", agent_card_url=<child card>)`. Its model
calls that tool with the user text as `request`, then says "The k8s agent says: <result>".
The child (app `kagent__NS__k8s_agent`) lists pods ("There are 3 pods in default."), fails on a
request containing "fail" (a model error), or on "delete" calls `delete_pod`, which kagent's
`make_approval_callback` holds for approval, then says "Deleted: <result>".
"""

import argparse
import logging
import os
import sys
import warnings

warnings.filterwarnings("ignore", message=r"\[EXPERIMENTAL\]")

import httpx  # noqa: E402
from a2a.types import AgentCapabilities, AgentCard, AgentSkill  # noqa: E402
from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.models.base_llm import BaseLlm  # noqa: E402
from google.adk.models.llm_response import LlmResponse  # noqa: E402
from google.adk.tools import FunctionTool  # noqa: E402
from google.genai import types  # noqa: E402
from kagent.adk import KAgentApp  # noqa: E402
from kagent.adk._approval import make_approval_callback  # noqa: E402
from kagent.adk._remote_a2a_tool import KAgentRemoteA2AToolset  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from peer_serve import serve  # noqa: E402 (tests/peer_serve.py)

CHILD_TOOL = "kagent__NS__k8s_agent"
PODS = "There are 3 pods in default."


def delete_pod(name: str, namespace: str) -> dict:
    """Deletes a pod."""
    return {"deleted": name, "namespace": namespace}


def latest_user_text(contents) -> str:
    for content in reversed(contents):
        if content.role == "user":
            text = " ".join(p.text for p in content.parts or [] if p.text)
            if text:
                return text
    return ""


class ScriptedLlm(BaseLlm):
    """The parent's or the child's script (`who`)."""

    model: str = "scripted-kagent"
    who: str = "parent"

    @classmethod
    def supported_models(cls) -> list[str]:
        return [r"scripted-.*"]

    async def generate_content_async(self, llm_request, stream: bool = False):
        contents = llm_request.contents or []
        last = contents[-1] if contents else None
        responses = [p.function_response for p in (last.parts or []) if p.function_response] if last else []

        def say(text):
            return LlmResponse(content=types.Content(role="model", parts=[types.Part.from_text(text=text)]))

        def call(name, args):
            part = types.Part(function_call=types.FunctionCall(name=name, args=args))
            return LlmResponse(content=types.Content(role="model", parts=[part]))

        if self.who == "child":
            user = latest_user_text(contents)
            if responses:
                yield say(f"Deleted: {responses[-1].response}")
            elif "fail" in user:
                yield LlmResponse(error_code="MODEL_ERROR", error_message="scripted child failure")
            elif "delete" in user:
                yield call("delete_pod", {"name": "nginx-7d9c5", "namespace": "default"})
            else:
                yield say(PODS)
            return
        if responses:
            result = responses[-1].response or {}
            yield say(f"The k8s agent says: {result.get('result', result) if isinstance(result, dict) else result}")
            return
        yield call(CHILD_TOOL, {"request": latest_user_text(contents) or "list pods"})


def card(name: str, url: str) -> AgentCard:
    return AgentCard(
        name=name,
        description=f"Scripted kagent {name} for gateway delegation tests.",
        url=url,
        version="0.10.4",
        protocol_version="0.3.0",
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=["text"],
        default_output_modes=["text"],
        skills=[AgentSkill(id=name, name=name, description=name, tags=["test"])],
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("role", choices=["parent", "child"])
    parser.add_argument("--child-url", default="")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--parent-pid", type=int, default=0, help="exit when this process is gone")
    args = parser.parse_args()
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)

    def build(base, _port):
        if args.role == "child":

            def factory():
                return LlmAgent(
                    name="k8s_agent",
                    model=ScriptedLlm(who="child"),
                    description="k8s agent",
                    instruction="You are a scripted child agent.",
                    tools=[FunctionTool(delete_pod)],
                    before_tool_callback=make_approval_callback({"delete_pod"}),
                )

            app_name = CHILD_TOOL
        else:
            child_card = args.child_url.rstrip("/") + "/.well-known/agent-card.json"

            def factory():
                toolset = KAgentRemoteA2AToolset(
                    name=CHILD_TOOL,
                    description="k8s agent",
                    agent_card_url=child_card,
                    httpx_client=httpx.AsyncClient(timeout=30),
                )
                return LlmAgent(
                    name="parent_agent",
                    model=ScriptedLlm(who="parent"),
                    description="parent agent",
                    instruction="You are a scripted parent agent.",
                    tools=[toolset],
                )

            app_name = "kagent__NS__parent_agent"
        app = KAgentApp(factory, card(app_name, base), kagent_url="http://127.0.0.1:9", app_name=app_name)
        return app.build(local=True)

    serve(build, port=args.port, parent_pid=args.parent_pid, lifespan="on")


if __name__ == "__main__":
    sys.exit(main())
