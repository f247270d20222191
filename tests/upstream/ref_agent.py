"""A scripted A2A agent built on the Python a2a-sdk 1.3.0: the real upstream of the
gateway's end-to-end tests.

Usage: python ref_agent.py --versions both|1.0|0.3|rest|grpc [--port 0] [--declare-lane]
    [--require-jwt JWKS_URL --audience AUD [--issuer ISS] [--require-scope SCOPE]]
    [--require-bearer FILE] [--require-api-key FILE]
    [--card-security KIND[,KIND...]]... [--oauth-issuer URL] [--extended-card]
    [--tls-cert FILE --tls-key FILE [--tls-client-ca FILE]] [--push]
Prints "READY <base-url>" on stdout once it is ready to serve (see tests/peer_serve.py).

Identity (tests/identity/README.md; not with grpc): any of these flags puts the verifying
front of tests/upstream/auth_guard.py before the agent (with its /_test/ routes):
- --require-jwt JWKS_URL --audience AUD: every request but the card needs a Bearer JWT
  signed by a key of that JWKS, unexpired, for AUD (and from ISS, with SCOPE, if given);
  --require-bearer FILE: a static bearer equal to FILE's current content;
  --require-api-key FILE: header X-API-Key equal to FILE's current content.
- --card-security KINDS: the card declares security schemes and requirements the A2A 1.0 way
  (securitySchemes + securityRequirements; 0.3: securitySchemes + security). KINDS is a
  comma-separated list of oauth2, oidc, bearer, apikey, mtls that must all be met (one
  requirement); repeating the flag adds alternatives. oauth2 and oidc point at
  --oauth-issuer (default: the origin of --require-jwt's URL).
- --extended-card: the card says an extended card exists (capabilities.extendedAgentCard;
  0.3: supportsAuthenticatedExtendedCard) and GetExtendedAgentCard (0.3:
  agent/getAuthenticatedExtendedCard; REST: GET /extendedAgentCard) answers, behind the
  checks above, with the card plus the skill "extended".
- --tls-cert/--tls-key: HTTPS (the card lists https:// URLs); --tls-client-ca: a client
  certificate signed by that CA is required in the handshake (mTLS).

- both: A2A 1.0 JSON-RPC with the SDK's v0.3 compatibility layer on the same URL, and the
  SDK's own HTTP+JSON routes under /rest (the card lists JSONRPC 1.0, JSONRPC 0.3, then
  HTTP+JSON 1.0).
- 1.0: no compatibility layer; the card lists JSONRPC 1.0, then HTTP+JSON 1.0 (/rest).
- rest: HTTP+JSON only, shaped like a Vertex AI Agent Engine card: one interface under a
  path prefix (REST_PREFIX) with a tenant (REST_TENANT); the SDK's REST routes are served
  only under {REST_PREFIX}/{REST_TENANT}, so a client that leaves the tenant out gets a
  404. No JSON-RPC at all.
- grpc: gRPC only: the card lists one GRPC 1.0 interface, and the SDK's own gRPC handler
  (a2a.server.request_handlers.GrpcHandler on grpc.aio, h2c) serves it. The card and the
  gRPC service share one origin, as behind an L7 router: a front socket hands connections
  opening with the HTTP/2 preface to the gRPC server and the rest (HTTP/1.1: the card, and
  nothing else) to uvicorn.
- 0.3: a 0.3-only agent: a 0.3-style card (top-level url/protocolVersion, no
  supportedInterfaces) and every 1.0 method refused with -32601, so a client that does not
  speak 0.3 fails loudly.

Scripted by the first word of the first user message of a task: echo X, artifact, approve,
auth, form, state, slow N, fail, reject, crash, hangup (the stream ends, the task
stays working), msg X, whoami ("you are <sub>": the subject of the request's verified JWT,
"anonymous" without one), and for the forwarding lane
(docs/forwarding.md):
- inspect: completes with an artifact "inspect" holding one data part {"metadata",
  "extensions", "header", "parts"}: the received message's metadata (or null), its
  extensions, the A2A-Extensions header (X-A2A-Extensions for a 0.3 request; null when
  absent) and its parts (1.0 JSON), then the text "inspected". Numbers inside metadata and
  data parts come back as the SDK's protobuf Struct gives them (floats).
- frontend: with a forwarded frontend tool `pick_color`, waits (input-required) on an
  `agui-tool-call` for it and completes with "You picked <content>." once an
  `agui-tool-result` for call-pick-1 comes back; without it, "No frontend tools.".
- statepatch: "state keys: a,b" (whole state), "patch: add /b, remove /c" (a patch) or
  "no state".
--declare-lane: the card declares both lane extensions in capabilities.extensions.

--push (every mode): the card declares capabilities.pushNotifications (0.3 card:
"pushNotifications": true) and the request handler gets the SDK's own push pieces:
InMemoryPushNotificationConfigStore and BasePushNotificationSender (an httpx.AsyncClient with
its default 5 s timeout), so CreateTaskPushNotificationConfig, tasks/pushNotificationConfig/set,
POST {rest}/tasks/{id}/pushNotificationConfigs and the gRPC method all work and every Task,
status and artifact update of a task is POSTed to its registered URLs
(docs/research/push-senders.md). The SDK's URL screening (push_url_validator) is off unless
given; this peer gives it the SDK's own validate_push_notification_url, which refuses private
and loopback hosts, with ONE change for the tests: a URL whose host is 127.0.0.1 is let
through (PUSH_TEST_HOSTS), on registration and on delivery. Without --push nothing changes.
For push tests, "slow N" (N x 0.1 s) keeps working after the client's stream is gone and
completes on its own.
"""

import argparse
import asyncio
import dataclasses
import json
import logging
import os
import socket
import sys
import urllib.parse

import httpx

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from a2a.helpers.proto_helpers import (
    new_data_part,
    new_task_from_user_message,
    new_text_message,
    new_text_part,
)
from google.protobuf import json_format

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events.event_queue_v2 import EventQueue
from a2a.server.request_handlers import DefaultRequestHandlerV2
from a2a.server.routes.agent_card_routes import create_agent_card_routes
from a2a.server.routes.jsonrpc_routes import create_jsonrpc_routes
from a2a.server.routes.rest_routes import create_rest_routes
from a2a.server.tasks import (
    BasePushNotificationSender,
    InMemoryPushNotificationConfigStore,
    InMemoryTaskStore,
    TaskUpdater,
)
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
    APIKeySecurityScheme,
    ClientCredentialsOAuthFlow,
    HTTPAuthSecurityScheme,
    MutualTlsSecurityScheme,
    OAuth2SecurityScheme,
    OAuthFlows,
    OpenIdConnectSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
    TaskState,
)
from a2a.compat.v0_3.conversions import to_compat_security_requirement, to_compat_security_scheme
from a2a.utils.push_url_validator import validate_push_notification_url

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from peer_serve import serve  # noqa: E402 (tests/peer_serve.py)
from auth_guard import API_KEY_HEADER, AuthGuard, Jwks, JwtCheck  # noqa: E402 (beside this file)

INTERRUPTED = (TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED)

# The gateway's forwarding lane (docs/forwarding.md).
CONTEXT_EXTENSION = "urn:agui-a2a-gateway:ext:agui-context:v1"
STATE_EXTENSION = "urn:agui-a2a-gateway:ext:shared-state:v1"
LANE_EXTENSIONS = [CONTEXT_EXTENSION, STATE_EXTENSION]
PICK_CALL_ID = "call-pick-1"

# The HTTP+JSON-only mode: where its interface lives, and its tenant.
REST_PREFIX = "/v1beta1/projects/demo/locations/local/reasoningEngines/ref/a2a"
REST_TENANT = "acme"

# --push: the only hosts let through the SDK's push URL screening (test peer only: the
# receiver of the tests listens on loopback, which the SDK's screening refuses).
PUSH_TEST_HOSTS = ("127.0.0.1",)


async def push_url_allowed(url: str) -> bool:
    """The SDK's validate_push_notification_url, except for PUSH_TEST_HOSTS over http(s)."""
    try:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme in ("http", "https") and parts.hostname in PUSH_TEST_HOSTS:
            return True
    except ValueError:
        return False
    return await validate_push_notification_url(url)


def first_text(task) -> str:
    for part in task.history[0].parts if task.history else []:
        if part.text:
            return part.text
    return ""


def message_metadata(message) -> dict | None:
    """The message's own metadata as JSON, or None when it has none."""
    if message is None or not message.HasField("metadata"):
        return None
    return json_format.MessageToDict(message.metadata)


def lane_entry(message, uri: str) -> dict:
    entry = (message_metadata(message) or {}).get(uri)
    return entry if isinstance(entry, dict) else {}


def data_parts(message) -> list:
    """The JSON values of the message's data parts."""
    if message is None:
        return []
    return [json_format.MessageToDict(p.data) for p in message.parts if p.HasField("data")]


def extensions_header(context: RequestContext) -> str | None:
    """A2A-Extensions (1.0) or X-A2A-Extensions (a 0.3 request, through the SDK's compat
    layer): DefaultServerCallContextBuilder keeps the request headers, lowercased, in the
    call context's state; the JSON-RPC dispatchers record the method there."""
    state = context.call_context.state if context.call_context else {}
    headers = state.get("headers") or {}
    legacy = "/" in str(state.get("method", ""))
    return headers.get("x-a2a-extensions" if legacy else "a2a-extensions")


def frontend_tool_result(message) -> str | None:
    for data in data_parts(message):
        if isinstance(data, dict) and data.get("type") == "agui-tool-result" and data.get("toolCallId") == PICK_CALL_ID:
            content = data.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return None


def describe_state(message) -> str:
    entry = lane_entry(message, STATE_EXTENSION)
    if isinstance(entry.get("state"), dict):
        return "state keys: " + ",".join(sorted(entry["state"]))
    if isinstance(entry.get("patch"), list):
        return "patch: " + ", ".join(f"{op.get('op')} {op.get('path')}" for op in entry["patch"])
    return "no state"


class ScriptedExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        task = context.current_task
        if task is None:
            words = text.split()
            if words and words[0] == "msg":
                await event_queue.enqueue_event(
                    new_text_message(" ".join(words[1:]) or "hi", context_id=context.context_id)
                )
                return
            task = new_task_from_user_message(context.message)
            await event_queue.enqueue_event(task)
            follow_up = None
        else:
            follow_up = task.status.state
        updater = TaskUpdater(event_queue, task.id, task.context_id)

        def say(t: str):
            return updater.new_agent_message([new_text_part(t)])

        await updater.start_work()
        if follow_up in INTERRUPTED:
            scenario = first_text(task).split()[0] if first_text(task) else ""
            if scenario == "auth":
                await updater.complete(say(f"Authenticated, thanks: {text}"))
            elif scenario == "frontend":
                content = frontend_tool_result(context.message)
                if content is None:
                    await updater.complete(say(f"No result for {PICK_CALL_ID}."))
                else:
                    await updater.complete(say(f"You picked {content}."))
            else:
                await updater.complete(say(f"Approved: {text}"))
            return

        words = text.split()
        command, args = (words[0], words[1:]) if words else ("", [])
        if command == "echo":
            for w in args:
                await updater.update_status(TaskState.TASK_STATE_WORKING, say(f"{w} "))
                await asyncio.sleep(0.01)
            await updater.complete(say(" ".join(args)))
        elif command == "artifact":
            chunks = ["Hello ", "from ", "artifact."]
            for i, c in enumerate(chunks):
                await updater.add_artifact(
                    [new_text_part(c)],
                    artifact_id="artifact-1",
                    name="result.txt",
                    append=i > 0,
                    last_chunk=i == len(chunks) - 1,
                )
            await updater.complete(say("Artifact ready."))
        elif command == "approve":
            await updater.requires_input(say("Do you approve? Reply yes or no."))
        elif command == "auth":
            await updater.requires_auth(say("Please authenticate, then reply."))
        elif command == "form":
            schema = {
                "type": "object",
                "properties": {"approved": {"type": "boolean"}, "comment": {"type": "string"}},
                "required": ["approved"],
            }
            request = {"type": "a2a.input.request", "requestId": "r1", "title": "Approval", "schema": schema}
            msg = updater.new_agent_message(
                [new_text_part("Please fill in the approval form."), new_data_part(request)]
            )
            await updater.requires_input(msg)
        elif command == "state":
            patch = {"type": "agui-state-delta", "patch": [{"op": "add", "path": "/progress", "value": 50}]}
            await updater.update_status(
                TaskState.TASK_STATE_WORKING, updater.new_agent_message([new_data_part(patch)])
            )
            await updater.complete(say("State updated: progress 50."))
        elif command == "slow":
            n = int(args[0]) if args else 3
            for i in range(1, n + 1):
                await asyncio.sleep(0.1)
                await updater.update_status(TaskState.TASK_STATE_WORKING, say(f"tick {i}/{n}"))
            await updater.complete(say(f"slow {n} done"))
        elif command == "fail":
            await updater.failed(say("Simulated failure."))
        elif command == "reject":
            await updater.reject(say("I will not do that."))
        elif command == "crash":
            raise RuntimeError("Simulated executor crash")
        elif command == "hangup":
            # Ends the stream with the task still working: no final status, ever.
            await updater.update_status(TaskState.TASK_STATE_WORKING, say("hanging up"))
        elif command == "inspect":
            m = context.message
            seen = {
                "metadata": message_metadata(m),
                "extensions": list(m.extensions),
                "header": extensions_header(context),
                "parts": [json_format.MessageToDict(p) for p in m.parts],
            }
            await updater.add_artifact([new_data_part(seen)], name="inspect", last_chunk=True)
            await updater.complete(say("inspected"))
        elif command == "frontend":
            tools = lane_entry(context.message, CONTEXT_EXTENSION).get("tools") or []
            if any(isinstance(t, dict) and t.get("name") == "pick_color" for t in tools):
                call = {"type": "agui-tool-call", "toolCallId": PICK_CALL_ID, "name": "pick_color", "args": {"palette": "warm"}}
                await updater.requires_input(updater.new_agent_message([new_data_part(call)]))
            else:
                await updater.complete(say("No frontend tools."))
        elif command == "statepatch":
            await updater.complete(say(describe_state(context.message)))
        elif command == "whoami":
            user = context.call_context.user if context.call_context else None
            name = user.user_name if user is not None and user.is_authenticated else "anonymous"
            await updater.complete(say(f"you are {name}"))
        else:
            await updater.complete(say(f"unknown scenario: {text}"))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        task = context.current_task
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.cancel(updater.new_agent_message([new_text_part("Canceled by client.")]))


def legacy_security(card) -> dict:
    """The 0.3 card's securitySchemes / security / supportsAuthenticatedExtendedCard."""

    def dump(value):
        # The SDK gives a scheme as a pydantic model, a requirement as a plain dict.
        if isinstance(value, dict):
            return value
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)

    out = {}
    if card.security_schemes:
        out["securitySchemes"] = {k: dump(to_compat_security_scheme(v)) for k, v in card.security_schemes.items()}
        out["security"] = [dump(to_compat_security_requirement(r)) for r in card.security_requirements]
    if card.capabilities.extended_agent_card:
        out["supportsAuthenticatedExtendedCard"] = True
    return out


def v1_method_guard(app):
    """For the 0.3-only mode: refuse every A2A 1.0 method."""

    async def guarded(scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != "/":
            return await app(scope, receive, send)
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        try:
            method = json.loads(body).get("method", "")
        except Exception:
            method = ""
        if method and "/" not in method:
            response = JSONResponse(
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32601, "message": "Method not found (0.3-only agent)"}}
            )
            return await response(scope, receive, send)
        sent = False

        async def replay():
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        return await app(scope, replay, send)

    return guarded


def rest_routes(handler, path_prefix: str = "") -> list:
    """The SDK's own HTTP+JSON routes, without the `/{tenant}` mount it adds at the root
    (it would put the tenant before the prefix, and shadow the card route)."""
    return [r for r in create_rest_routes(handler, path_prefix=path_prefix) if isinstance(r, Route)]


@dataclasses.dataclass
class Identity:
    """The identity flags (module docstring); all off by default."""

    card_security: list = dataclasses.field(default_factory=list)  # of lists of kinds
    oauth_issuer: str | None = None
    scope: str | None = None
    extended_card: bool = False
    push: bool = False  # --push (module docstring)


# The card's security scheme per --card-security kind (A2A 1.0 SecurityScheme).
SECURITY_KINDS = ("oauth2", "oidc", "bearer", "apikey", "mtls")


def security_scheme(kind: str, ident: Identity) -> SecurityScheme:
    issuer = (ident.oauth_issuer or "http://127.0.0.1:9").rstrip("/")
    if kind == "oauth2":
        flow = ClientCredentialsOAuthFlow(token_url=f"{issuer}/token", scopes={ident.scope or "agents.invoke": "call the agent"})
        return SecurityScheme(
            oauth2_security_scheme=OAuth2SecurityScheme(
                flows=OAuthFlows(client_credentials=flow),
                oauth2_metadata_url=f"{issuer}/.well-known/openid-configuration",
            )
        )
    if kind == "oidc":
        url = f"{issuer}/.well-known/openid-configuration"
        return SecurityScheme(open_id_connect_security_scheme=OpenIdConnectSecurityScheme(open_id_connect_url=url))
    if kind == "bearer":
        return SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="Bearer", bearer_format="JWT"))
    if kind == "apikey":
        return SecurityScheme(api_key_security_scheme=APIKeySecurityScheme(location="header", name=API_KEY_HEADER))
    return SecurityScheme(mtls_security_scheme=MutualTlsSecurityScheme(description="a client certificate from the test CA"))


def card_security(ident: Identity) -> tuple[dict, list]:
    """(security_schemes, security_requirements) of the card: one requirement per flag."""
    schemes, requirements = {}, []
    for kinds in ident.card_security:
        needed = {}
        for kind in kinds:
            schemes[kind] = security_scheme(kind, ident)
            scopes = [ident.scope or "agents.invoke"] if kind in ("oauth2", "oidc") else []
            needed[kind] = StringList(list=scopes)
        requirements.append(SecurityRequirement(schemes=needed))
    return schemes, requirements


EXTENDED_SKILL = AgentSkill(
    id="extended",
    name="Extended skill",
    description="Listed only in the extended card, served to authenticated callers.",
    tags=["test"],
)


def push_kwargs(push: bool) -> dict:
    """The request handler's push arguments for --push: the SDK's own store and sender."""
    if not push:
        return {}
    store = InMemoryPushNotificationConfigStore()
    sender = BasePushNotificationSender(httpx.AsyncClient(), store, push_url_validator=push_url_allowed)
    return {"push_config_store": store, "push_sender": sender, "push_url_validator": push_url_allowed}


def build(versions: str, base: str, declare_lane: bool = False, ident: Identity | None = None):
    ident = ident or Identity()
    card, handler = agent(versions, base, declare_lane, ident)
    if versions == "grpc":
        return Starlette(routes=create_agent_card_routes(card)), handler
    return app(versions, base, declare_lane, card, handler)


def agent(versions: str, base: str, declare_lane: bool, ident: Identity):
    interfaces = []
    if versions in ("both", "1.0"):
        interfaces.append(AgentInterface(url=base, protocol_binding="JSONRPC", protocol_version="1.0"))
    if versions in ("both", "0.3"):
        interfaces.append(AgentInterface(url=base, protocol_binding="JSONRPC", protocol_version="0.3"))
    if versions in ("both", "1.0"):
        interfaces.append(AgentInterface(url=base + "rest", protocol_binding="HTTP+JSON", protocol_version="1.0"))
    if versions == "grpc":
        interfaces.append(AgentInterface(url=base, protocol_binding="GRPC", protocol_version="1.0"))
    if versions == "rest":
        interfaces.append(
            AgentInterface(
                url=base.rstrip("/") + REST_PREFIX,
                protocol_binding="HTTP+JSON",
                protocol_version="1.0",
                tenant=REST_TENANT,
            )
        )
    skill = AgentSkill(
        id="scripted",
        name="Scripted scenarios",
        description="echo X | artifact | approve | auth | form | state | slow N | fail | reject | crash | msg X"
        " | inspect | frontend | statepatch",
        tags=["test"],
    )
    card = AgentCard(
        name=f"Reference upstream ({versions})",
        description="Scripted a2a-sdk 1.3.0 agent for gateway tests.",
        supported_interfaces=interfaces,
        version="1.0.0",
        capabilities=AgentCapabilities(
            streaming=True,
            push_notifications=ident.push,
            extensions=[AgentExtension(uri=u) for u in LANE_EXTENSIONS] if declare_lane else [],
            extended_agent_card=True if ident.extended_card else None,
        ),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[skill],
    )
    schemes, requirements = card_security(ident)
    for name, scheme in schemes.items():
        card.security_schemes[name].CopyFrom(scheme)
    card.security_requirements.extend(requirements)
    extended = None
    if ident.extended_card:
        extended = AgentCard()
        extended.CopyFrom(card)
        extended.skills.append(EXTENDED_SKILL)
    handler = DefaultRequestHandlerV2(
        agent_executor=ScriptedExecutor(),
        task_store=InMemoryTaskStore(),
        agent_card=card,
        extended_agent_card=extended,
        **push_kwargs(ident.push),
    )
    return card, handler


def app(versions: str, base: str, declare_lane: bool, card, handler):
    skill = card.skills[0]
    if versions == "rest":
        routes = create_agent_card_routes(card)
        routes.append(Mount(f"{REST_PREFIX}/{REST_TENANT}", routes=rest_routes(handler)))
        return Starlette(routes=routes)
    routes = create_jsonrpc_routes(handler, "/", enable_v0_3_compat=versions != "1.0")
    if versions == "0.3":
        legacy_card = {
            "protocolVersion": "0.3.0",
            "name": card.name,
            "description": card.description,
            "url": base,
            "preferredTransport": "JSONRPC",
            "version": "1.0.0",
            "capabilities": {"streaming": True, "pushNotifications": card.capabilities.push_notifications}
            | ({"extensions": [{"uri": u} for u in LANE_EXTENSIONS]} if declare_lane else {}),
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "scripted", "name": skill.name, "description": skill.description, "tags": ["test"]}],
        }
        legacy_card |= legacy_security(card)
        routes.append(Route("/.well-known/agent-card.json", lambda _r: JSONResponse(legacy_card)))
        return v1_method_guard(Starlette(routes=routes))
    routes += create_agent_card_routes(card)
    routes += rest_routes(handler, "/rest")
    return Starlette(routes=routes)


HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def serve_grpc(declare_lane: bool, port: int, parent_pid: int, push: bool = False):
    """The grpc mode: the card (uvicorn) and the SDK's gRPC handler behind one socket."""
    import grpc
    import uvicorn

    from a2a.server.request_handlers import GrpcHandler
    from a2a.types import a2a_pb2_grpc

    front = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    front.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    front.bind(("127.0.0.1", port))
    front.listen(128)
    base = f"http://127.0.0.1:{front.getsockname()[1]}/"
    card_app, handler = build("grpc", base, declare_lane, Identity(push=push))

    async def pipe(reader, writer):
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def run():
        server = grpc.aio.server()
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(GrpcHandler(handler), server)
        grpc_port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        http = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        http.bind(("127.0.0.1", 0))
        http.listen(128)
        http_port = http.getsockname()[1]
        web = uvicorn.Server(uvicorn.Config(card_app, log_level="warning"))
        serving = asyncio.get_running_loop().create_task(web.serve(sockets=[http]))

        async def route(reader, writer):
            try:
                head = await reader.readexactly(len(HTTP2_PREFACE))
            except asyncio.IncompleteReadError as cut:
                head = cut.partial
            target = grpc_port if head == HTTP2_PREFACE else http_port
            try:
                up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target)
            except OSError:
                writer.close()
                return
            up_writer.write(head)
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

        router = await asyncio.start_server(route, sock=front)
        while not web.started:
            await asyncio.sleep(0.01)
        print(f"READY {base}", flush=True)
        while not parent_pid or os.path.exists(f"/proc/{parent_pid}"):
            await asyncio.sleep(0.5)
        router.close()
        web.should_exit = True
        await server.stop(0)
        await serving

    asyncio.run(run())


def identity_args(parser) -> None:
    """The identity flags (module docstring)."""
    checks = parser.add_mutually_exclusive_group()
    checks.add_argument("--require-jwt", metavar="JWKS_URL", help="require a Bearer JWT signed by a key of this JWKS")
    checks.add_argument("--require-bearer", metavar="FILE", help="require a Bearer equal to FILE's current content")
    checks.add_argument("--require-api-key", metavar="FILE", help="require X-API-Key equal to FILE's current content")
    parser.add_argument("--audience", help="the aud a JWT must hold (with --require-jwt)")
    parser.add_argument("--issuer", help="the iss a JWT must have (with --require-jwt)")
    parser.add_argument("--require-scope", help="a scope a JWT must hold; also the card's oauth2 scope")
    parser.add_argument(
        "--card-security",
        action="append",
        default=[],
        metavar="KIND[,KIND...]",
        help=f"declare a security requirement of these kinds ({', '.join(SECURITY_KINDS)}); repeat for alternatives",
    )
    parser.add_argument("--oauth-issuer", help="the issuer the card's oauth2/oidc schemes point at")
    parser.add_argument("--extended-card", action="store_true", help="declare and serve an extended card")
    parser.add_argument("--push", action="store_true", help="declare push notifications and send them (SDK's sender)")
    parser.add_argument("--tls-cert", help="serve HTTPS with this certificate chain (PEM)")
    parser.add_argument("--tls-key", help="the private key of --tls-cert (PEM)")
    parser.add_argument("--tls-client-ca", help="require a client certificate signed by this CA (PEM)")


def identity_of(parser, args) -> tuple[Identity, dict | None, bool]:
    """(card identity, TLS options for peer_serve, whether the verifying front is wanted)."""
    kinds = [[k.strip() for k in flag.split(",") if k.strip()] for flag in args.card_security]
    for k in (k for ks in kinds for k in ks):
        if k not in SECURITY_KINDS:
            parser.error(f"--card-security: unknown kind {k} (one of {', '.join(SECURITY_KINDS)})")
    if args.require_jwt and not args.audience:
        parser.error("--require-jwt needs --audience")
    if bool(args.tls_cert) != bool(args.tls_key) or (args.tls_client_ca and not args.tls_cert):
        parser.error("--tls-cert and --tls-key go together (and --tls-client-ca needs them)")
    issuer = args.oauth_issuer
    if issuer is None and args.require_jwt:
        parts = urllib.parse.urlsplit(args.require_jwt)
        issuer = f"{parts.scheme}://{parts.netloc}"
    ident = Identity(
        card_security=kinds, oauth_issuer=issuer, scope=args.require_scope, extended_card=args.extended_card, push=args.push
    )
    tls = {"cert": args.tls_cert, "key": args.tls_key, "client_ca": args.tls_client_ca} if args.tls_cert else None
    guarded = any(
        [args.require_jwt, args.require_bearer, args.require_api_key, kinds, args.extended_card, tls, args.require_scope]
    )
    return ident, tls, guarded


def main():
    # The crash scenario raises on purpose; keep the SDK's tracebacks out of test output.
    logging.disable(logging.CRITICAL)
    parser = argparse.ArgumentParser()
    parser.add_argument("--versions", choices=["both", "1.0", "0.3", "rest", "grpc"], default="both")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--parent-pid", type=int, default=0, help="exit when this process is gone")
    parser.add_argument(
        "--declare-lane", action="store_true", help="declare the forwarding lane's extensions in the card"
    )
    identity_args(parser)
    args = parser.parse_args()
    ident, tls, guarded = identity_of(parser, args)
    if args.versions == "grpc":
        if guarded:
            parser.error("the identity flags are not supported with --versions grpc")
        return serve_grpc(args.declare_lane, args.port, args.parent_pid, args.push)

    def build_guarded(base, _port):
        built = build(args.versions, base, args.declare_lane, ident)
        if not guarded:
            return built
        jwt = None
        if args.require_jwt:
            jwt = JwtCheck(Jwks(args.require_jwt), args.audience, args.issuer, args.require_scope)
        return AuthGuard(built, jwt=jwt, bearer_file=args.require_bearer, api_key_file=args.require_api_key)

    serve(build_guarded, port=args.port, parent_pid=args.parent_pid, tls=tls)


if __name__ == "__main__":
    sys.exit(main())
