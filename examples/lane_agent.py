"""An A2A agent that uses agui-a2a-gateway's forwarding lane (docs/forwarding.md).

Built on the Python a2a-sdk 1.3.0; serves A2A 1.0 JSON-RPC, and 0.3 on the same URL.

    python examples/lane_agent.py --port 9999

What it shows:
1. the card declares the lane's two extensions, so the gateway activates them;
2. it reads what the frontend forwarded from the user message's own metadata: readable
   context, frontend tools and system messages (agui-context), and the app's state
   (shared-state: the whole state, or a patch since the gateway's last run);
3. it replies with a summary and writes back into the app's state with an
   `agui-state-delta` data part (RFC 6902 ops on the app state);
4. if the frontend offered a `confirm_plan` tool, it calls it (`agui-tool-call`, task
   `input-required`) and finishes once the app's result comes back (`agui-tool-result`).

Without the gateway's metadata (a plain A2A client) it still answers: the lane only adds.
"""

import argparse
import json
import logging

import uvicorn
from google.protobuf import json_format
from starlette.applications import Starlette

from a2a.helpers.proto_helpers import new_data_part, new_task_from_user_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events.event_queue_v2 import EventQueue
from a2a.server.request_handlers import DefaultRequestHandlerV2
from a2a.server.routes.agent_card_routes import create_agent_card_routes
from a2a.server.routes.jsonrpc_routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
    TaskState,
)

# The gateway's extensions (docs/forwarding.md).
CONTEXT_EXTENSION = "urn:agui-a2a-gateway:ext:agui-context:v1"
STATE_EXTENSION = "urn:agui-a2a-gateway:ext:shared-state:v1"


def lane(message, uri: str) -> dict:
    """The gateway's entry `uri` in the message's own metadata ({} when absent).

    The SDK keeps metadata as a protobuf Struct: numbers come back as floats."""
    if message is None or not message.HasField("metadata"):
        return {}
    entry = json_format.MessageToDict(message.metadata).get(uri)
    return entry if isinstance(entry, dict) else {}


def data_parts(message) -> list:
    return [json_format.MessageToDict(p.data) for p in message.parts if p.HasField("data")]


def summarize(message, activated: set[str]) -> tuple[str, list[str]]:
    """A human summary of what was forwarded, and the names of the frontend tools."""
    forwarded = lane(message, CONTEXT_EXTENSION)
    shared = lane(message, STATE_EXTENSION)
    lines = []
    for item in forwarded.get("context", []):
        lines.append(f"- context: {item.get('description')}: {item.get('value')}")
    for text in forwarded.get("system", []):
        lines.append(f"- system instruction: {text}")
    tools = [t.get("name") for t in forwarded.get("tools", []) if isinstance(t, dict)]
    if tools:
        lines.append(f"- frontend tools: {', '.join(tools)}")
    if "state" in shared:
        lines.append(f"- app state (whole), keys: {', '.join(sorted(shared['state'])) or 'none'}")
    elif "patch" in shared:
        ops = ", ".join(f"{op['op']} {op['path']}" for op in shared["patch"]) or "nothing changed"
        lines.append(f"- app state changes since last run: {ops}")
    if not lines:
        return "Nothing was forwarded: I only see your message.", tools
    # Activation is the A2A-Extensions header (X-A2A-Extensions for 0.3); the metadata is
    # there either way.
    note = " (extensions activated)" if activated & {CONTEXT_EXTENSION, STATE_EXTENSION} else ""
    return "Here is what your app told me" + note + ":\n" + "\n".join(lines), tools


def plan_for(request: str) -> dict:
    return {
        "request": request,
        "steps": ["gather the facts", "draft an answer", "review it with you"],
        "status": "proposed",
    }


def state_delta(ops: list) -> object:
    """An `agui-state-delta` data part: RFC 6902 ops the gateway applies to the app state
    (ops on the gateway's own /a2a subtree are ignored)."""
    return new_data_part({"type": "agui-state-delta", "patch": ops})


class LaneExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        if task is None:
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
            waiting = False
        else:
            waiting = task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.start_work()

        def say(text: str):
            return updater.new_agent_message([new_text_part(text)])

        if waiting:
            await self.on_tool_result(context, updater, say)
            return

        summary, tools = summarize(context.message, context.requested_extensions)
        await updater.update_status(TaskState.TASK_STATE_WORKING, say(summary + "\n"))

        # Write the proposed plan into the app's state: the app sees a STATE_DELTA.
        plan = plan_for(context.get_user_input())
        await updater.update_status(
            TaskState.TASK_STATE_WORKING,
            updater.new_agent_message([state_delta([{"op": "add", "path": "/plan", "value": plan}])]),
        )

        if "confirm_plan" not in tools:
            await updater.complete(say("Plan written to your app's state (no confirm_plan tool to ask with)."))
            return
        # Call the frontend tool: the gateway shows TOOL_CALL_* and ends the run with the call
        # pending; the app's next run carries the result back to this task.
        call = {
            "type": "agui-tool-call",
            "toolCallId": f"confirm-{task.id}",
            "name": "confirm_plan",
            "args": {"steps": plan["steps"]},
        }
        await updater.requires_input(updater.new_agent_message([new_data_part(call)]))

    async def on_tool_result(self, context: RequestContext, updater: TaskUpdater, say) -> None:
        expected = f"confirm-{context.task_id}"
        results = [
            d for d in data_parts(context.message)
            if isinstance(d, dict) and d.get("type") == "agui-tool-result" and d.get("toolCallId") == expected
        ]
        if not results:
            await updater.requires_input(say("Still waiting for confirm_plan's result."))
            return
        content = results[0].get("content")
        if isinstance(content, str):
            try:
                content = json.loads(content)
            except ValueError:
                pass
        approved = content is True or content in ("yes", "ok", "approved") or (
            isinstance(content, dict) and content.get("approved") is True
        )
        status = "confirmed" if approved else "rejected"
        await updater.update_status(
            TaskState.TASK_STATE_WORKING,
            updater.new_agent_message([state_delta([{"op": "add", "path": "/planStatus", "value": status}])]),
        )
        await updater.complete(say(f"The plan was {status}. " + ("Starting." if approved else "Tell me what to change.")))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        await TaskUpdater(event_queue, task.id, task.context_id).cancel()


def build(base: str) -> Starlette:
    card = AgentCard(
        name="Lane example",
        description="Reads the context and state an AG-UI app forwards, and calls its confirm_plan tool.",
        supported_interfaces=[
            AgentInterface(url=base, protocol_binding="JSONRPC", protocol_version="1.0"),
            AgentInterface(url=base, protocol_binding="JSONRPC", protocol_version="0.3"),
        ],
        version="1.0.0",
        capabilities=AgentCapabilities(
            streaming=True,
            # Declaring the extensions makes the gateway activate them (message.extensions
            # and the A2A-Extensions header); it sends the metadata either way.
            extensions=[
                AgentExtension(uri=CONTEXT_EXTENSION, description="AG-UI context, tools, system messages"),
                AgentExtension(uri=STATE_EXTENSION, description="the AG-UI app's shared state"),
            ],
        ),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="plan", name="Plan", description="Proposes a plan and asks the app to confirm it.", tags=["example"])],
    )
    handler = DefaultRequestHandlerV2(agent_executor=LaneExecutor(), task_store=InMemoryTaskStore(), agent_card=card)
    routes = create_jsonrpc_routes(handler, "/", enable_v0_3_compat=True)
    routes += create_agent_card_routes(card)
    return Starlette(routes=routes)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9999)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO)
    uvicorn.run(build(f"http://{args.host}:{args.port}/"), host=args.host, port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
