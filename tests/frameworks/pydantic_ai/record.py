"""Record the wire fixtures of the pydantic-ai / fasta2a peer.

Usage: .venv/bin/python record.py [OUT_DIR]   (default: ../../../fixtures/a2a/frameworks/pydantic_ai)

Starts agent.py on a free port, sends each scenario with the standard library's http.client
and writes the request bodies (pretty JSON) and the raw response bodies (exact bytes).
"""

import http.client
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE.parents[2] / "fixtures/a2a/frameworks/pydantic_ai"
V1 = {"A2A-Version": "1.0"}


class Peer:
    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "agent.py"), "--port", "0", "--parent-pid", str(os.getpid())],
            stdout=subprocess.PIPE,
            stderr=None if os.environ.get("KEEP_LOG") else subprocess.DEVNULL,  # KEEP_LOG=1: agent log on stderr
            text=True,
        )
        line = self.proc.stdout.readline().strip()
        assert line.startswith("READY "), line
        self.base = line.split(" ", 1)[1]
        u = urlsplit(self.base)
        self.host, self.port = u.hostname, u.port

    def raw(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
        h = {"Content-Type": "application/json"} if body is not None else {}
        h.update(headers or {})
        conn.request(method, path, body=body, headers=h)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        return resp.status, data

    def rpc(self, request: dict, headers: dict | None = None) -> bytes:
        status, data = self.raw("POST", "/", json.dumps(request).encode(), headers)
        assert status == 200, (status, data)
        return data

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(5)


def write(name: str, content) -> None:
    path = OUT / name
    if isinstance(content, (bytes, bytearray)):
        path.write_bytes(content)
    else:
        path.write_text(json.dumps(content, indent=2) + "\n")
    print(f"wrote {path.relative_to(HERE.parents[2])}")


def pretty(raw: bytes) -> dict:
    return json.loads(raw)


def sse_results(raw: bytes) -> list[dict]:
    return [json.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: ")]


def message(scenario: str, text: str | None = None, parts=None, v1=True, **ids) -> dict:
    msg = {"role": "ROLE_USER" if v1 else "user", "messageId": f"msg-{scenario}"}
    msg["parts"] = parts if parts is not None else [{"text": text or scenario}]
    msg.update(ids)
    return msg


def stream(peer: Peer, name: str, msg: dict, rid, v1=True) -> list[dict]:
    req = {"jsonrpc": "2.0", "id": rid, "method": "SendStreamingMessage" if v1 else "message/stream",
           "params": {"message": msg}}
    write(f"{name}.request.json", req)
    raw = peer.rpc(req, V1 if v1 else None)
    write(f"{name}.sse", raw)
    return sse_results(raw)


def get_task(peer: Peer, name: str, task_id: str, rid, v1=True, record_request=False) -> dict:
    req = {"jsonrpc": "2.0", "id": rid, "method": "GetTask" if v1 else "tasks/get", "params": {"id": task_id}}
    if record_request:
        write(f"{name}.request.json", req)
    raw = peer.rpc(req, V1 if v1 else None)
    write(f"{name}.json", pretty(raw))
    return pretty(raw)


def send_and_poll(peer: Peer, name: str, msg: dict, rid, v1=True) -> dict:
    """SendMessage answers at once with the submitted task; GetTask is polled to the end."""
    req = {"jsonrpc": "2.0", "id": rid, "method": "SendMessage" if v1 else "message/send", "params": {"message": msg}}
    write(f"{name}.request.json", req)
    first = pretty(peer.rpc(req, V1 if v1 else None))
    write(f"{name}.json", first)
    task_id = first["result"]["task"]["id"]
    done = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "completed", "failed"}
    for _ in range(200):
        probe = {"jsonrpc": "2.0", "id": f"{rid}-poll", "method": "GetTask" if v1 else "tasks/get",
                 "params": {"id": task_id}}
        state = pretty(peer.rpc(probe, V1 if v1 else None))["result"]["status"]["state"]
        if state in done:
            break
        time.sleep(0.02)
    return get_task(peer, f"{name}-get", task_id, f"{rid}-get", v1, record_request=True)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    peer = Peer()
    try:
        status, card = peer.raw("GET", "/.well-known/agent-card.json")
        assert status == 200
        card = json.loads(card)
        write("agent-card.json", card)

        # Streaming, A2A 1.0 method names (the card says protocolVersion 1.0).
        stream(peer, "hello", message("hello"), "hello")
        events = stream(peer, "tool", message("tool", "tool weather in Paris?"), "tool")
        get_task(peer, "tool-get", events[0]["result"]["task"]["id"], "tool-get", record_request=True)

        events = stream(peer, "approve", message("approve", "approve the weekly report"), "approve")
        task = events[0]["result"]["task"]
        ids = {"taskId": task["id"], "contextId": task["contextId"]}
        # No resume shape exists: both follow-ups are new tasks in the same context.
        wrong = stream(peer, "approve-wrong-resume", message("approve-wrong-resume", "yes", **ids), "approve-wrong-resume")
        get_task(peer, "approve-wrong-resume-get", wrong[0]["result"]["task"]["id"], "approve-wrong-resume-get",
                 record_request=True)
        data_parts = [{"data": {"approvals": {"call-send-report-1": True}}, "mediaType": "application/json"}]
        stream(peer, "approve-resume-data", message("approve-resume-data", parts=data_parts, **ids), "approve-resume-data")
        get_task(peer, "approve-get", task["id"], "approve-get", record_request=True)

        # The same, with the method names fasta2a has always used (0.3's), and a 0.3 client's
        # `kind` on the part: the objects keep the 1.0 shape, enums are lower-case.
        stream(peer, "hello.v03", message("hello-v03", parts=[{"kind": "text", "text": "hello"}], v1=False),
               "hello-v03", v1=False)

        # Non-streaming: SendMessage returns the submitted task at once; GetTask polled.
        send_and_poll(peer, "hello-send", message("hello-send", "hello"), "hello-send")
        send_and_poll(peer, "tool-send", message("tool-send", "tool weather in Paris?"), "tool-send")
        send_and_poll(peer, "approve-send", message("approve-send", "approve the weekly report"), "approve-send")
        send_and_poll(peer, "hello-send.v03", message("hello-send-v03", "hello", v1=False), "hello-send-v03", v1=False)

        # Errors.
        req = {"jsonrpc": "2.0", "id": "get-unknown", "method": "GetTask", "params": {"id": "no-such-task"}}
        write("get-unknown.request.json", req)
        write("get-unknown.json", pretty(peer.rpc(req, V1)))
        req = {"jsonrpc": "2.0", "id": "resub", "method": "SubscribeToTask", "params": {"id": task["id"]}}
        write("resubscribe-finished.request.json", req)
        write("resubscribe-finished.sse", peer.rpc(req, V1))
    finally:
        peer.stop()


if __name__ == "__main__":
    main()
