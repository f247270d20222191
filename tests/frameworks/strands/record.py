"""Record raw A2A 0.3 wire fixtures from agent.py, in both streaming modes.

Usage: .venv/bin/python record.py [OUT_DIR]   (default: fixtures/a2a/frameworks/strands)
Writes OUT_DIR/agent-card.json and OUT_DIR/{default,compliant}/<scenario>.{request.json,sse,json}.
Every response is stored exactly as the server sent it (raw bytes of the HTTP body).
"""

import json
import os
import pathlib
import subprocess
import sys

import httpx

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[2]
OUT = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "fixtures/a2a/frameworks/strands"
ANSWER = "yes, send it"


class Recorder:
    def __init__(self, base: str, out: pathlib.Path):
        self.base = base
        self.out = out
        self.next_id = 1
        self.client = httpx.Client(timeout=30)
        out.mkdir(parents=True, exist_ok=True)

    def _request(self, name: str, method: str, params: dict) -> dict:
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.next_id += 1
        (self.out / f"{name}.request.json").write_text(json.dumps(body, indent=2) + "\n")
        return body

    def stream(self, name: str, message: dict) -> list[dict]:
        body = self._request(name, "message/stream", {"message": message})
        raw = b""
        with self.client.stream("POST", self.base, json=body, headers={"Accept": "text/event-stream"}) as r:
            for chunk in r.iter_raw():
                raw += chunk
        (self.out / f"{name}.sse").write_bytes(raw)
        events = []
        for line in raw.decode().splitlines():
            if line.startswith("data:"):
                events.append(json.loads(line[5:]))
        return events

    def unary(self, name: str, method: str, params: dict) -> dict:
        body = self._request(name, method, params)
        r = self.client.post(self.base, json=body)
        (self.out / f"{name}.json").write_bytes(r.content)
        return r.json()


def text_message(message_id: str, text: str, task_id=None, context_id=None) -> dict:
    m = {"kind": "message", "messageId": message_id, "role": "user", "parts": [{"kind": "text", "text": text}]}
    if task_id:
        m["taskId"] = task_id
        m["contextId"] = context_id
    return m


def resume_message(message_id: str, interrupt_id: str, answer, task_id: str, context_id: str) -> dict:
    return {
        "kind": "message",
        "messageId": message_id,
        "role": "user",
        "parts": [{"kind": "data", "data": {"interruptResponse": {"interruptId": interrupt_id, "response": answer}}}],
        "taskId": task_id,
        "contextId": context_id,
    }


def interrupts_of(status: dict) -> list[dict]:
    for part in status.get("message", {}).get("parts", []):
        if part.get("kind") == "data" and "interrupts" in part.get("data", {}):
            return part["data"]["interrupts"]
    raise SystemExit(f"no interrupts data part in {status}")


def record(rec: Recorder) -> None:
    # Streaming.
    rec.stream("hello", text_message("msg-hello", "hello"))
    rec.stream("tool", text_message("msg-tool", "tool: what is the weather in Paris?"))
    events = rec.stream("approve", text_message("msg-approve", "approve the report"))
    last = events[-1]["result"]
    task_id, context_id = last["taskId"], last["contextId"]
    assert last["status"]["state"] == "input-required", last
    interrupt_id = interrupts_of(last["status"])[0]["interruptId"]
    rec.stream("approve-wrong-resume", text_message("msg-approve-wrong-resume", ANSWER, task_id, context_id))
    rec.unary("approve-get-after-wrong", "tasks/get", {"id": task_id})
    # A new message on the parked context without the taskId (a new task): refused too.
    no_task = text_message("msg-approve-new-task", ANSWER)
    no_task["contextId"] = context_id
    events = rec.stream("approve-new-task", no_task)
    orphan = [e["result"]["id"] for e in events if e.get("result", {}).get("kind") == "task"]
    if orphan:
        rec.unary("approve-new-task-get", "tasks/get", {"id": orphan[0]})
    rec.stream(
        "approve-unknown-interrupt",
        resume_message("msg-approve-unknown-interrupt", "v1:tool_call:nope", ANSWER, task_id, context_id),
    )
    rec.stream("approve-resume", resume_message("msg-approve-resume", interrupt_id, ANSWER, task_id, context_id))
    rec.unary("approve-get", "tasks/get", {"id": task_id})

    # Non-streaming (message/send, blocking).
    cfg = {"blocking": True}
    rec.unary("hello-send", "message/send", {"message": text_message("msg-hello-send", "hello"), "configuration": cfg})
    rec.unary(
        "tool-send",
        "message/send",
        {"message": text_message("msg-tool-send", "tool: what is the weather in Paris?"), "configuration": cfg},
    )
    task = rec.unary(
        "approve-send",
        "message/send",
        {"message": text_message("msg-approve-send", "approve the report"), "configuration": cfg},
    )["result"]
    task_id, context_id = task["id"], task["contextId"]
    interrupt_id = interrupts_of(task["status"])[0]["interruptId"]
    rec.unary(
        "approve-send-wrong-resume",
        "message/send",
        {"message": text_message("msg-approve-send-wrong-resume", ANSWER, task_id, context_id), "configuration": cfg},
    )
    rec.unary(
        "approve-send-resume",
        "message/send",
        {
            "message": resume_message("msg-approve-send-resume", interrupt_id, ANSWER, task_id, context_id),
            "configuration": cfg,
        },
    )


def main() -> int:
    python = str(HERE / ".venv/bin/python")
    for mode in ("default", "compliant"):
        proc = subprocess.Popen(
            [python, str(HERE / "agent.py"), "--port", "0", "--mode", mode, "--parent-pid", str(os.getpid())],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            line = proc.stdout.readline().strip()
            assert line.startswith("READY "), line
            base = line.split()[1]
            if mode == "default":
                r = httpx.get(base + ".well-known/agent-card.json")
                OUT.mkdir(parents=True, exist_ok=True)
                (OUT / "agent-card.json").write_bytes(r.content)
            record(Recorder(base, OUT / mode))
            print(f"recorded {mode} from {base}", file=sys.stderr)
        finally:
            proc.terminate()
            proc.wait(10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
