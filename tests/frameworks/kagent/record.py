"""Records the wire fixtures of agent.py into fixtures/a2a/frameworks/kagent/.

Usage (from this directory): .venv/bin/python record.py
Starts agent.py (port 0), sends the `think` scenario over A2A 0.3 JSON-RPC with httpx and
stores the JSON-RPC request bodies (pretty) and the raw response bytes exactly as the server
sent them: `think.request.json` + `think.sse` (message/stream), `think-get.request.json` +
`think-get.json` (tasks/get of that task). The other files of that directory are
hand-written (its README.md).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
OUT = HERE.parent.parent.parent / "fixtures" / "a2a" / "frameworks" / "kagent"


def start():
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "agent.py"), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=open(os.devnull, "w"),
        text=True,
    )
    line = proc.stdout.readline().strip()
    assert line.startswith("READY "), line
    return proc, line.split(" ", 1)[1]


def call(http, base, name, body, suffix):
    (OUT / f"{name}.request.json").write_text(json.dumps(body, indent=2) + "\n")
    headers = {"Content-Type": "application/json", "Accept": "text/event-stream, application/json"}
    raw = b""
    with http.stream("POST", base, headers=headers, content=json.dumps(body)) as r:
        for chunk in r.iter_raw():
            raw += chunk
    (OUT / f"{name}.{suffix}").write_bytes(raw)
    return raw


def main():
    proc, base = start()
    try:
        http = httpx.Client(timeout=30)
        message = {
            "kind": "message",
            "messageId": "msg-think",
            "role": "user",
            "parts": [{"kind": "text", "text": "think about the weather in Paris"}],
        }
        raw = call(http, base, "think", {"jsonrpc": "2.0", "id": 1, "method": "message/stream", "params": {"message": message}}, "sse")
        events = [json.loads(l[5:]) for l in raw.decode().splitlines() if l.startswith("data:")]
        task_id = next(e["result"].get("taskId") or e["result"].get("id") for e in events if "result" in e)
        call(http, base, "think-get", {"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"id": task_id}}, "json")
        print(f"recorded {OUT} from {base}", file=sys.stderr)
    finally:
        proc.terminate()
        proc.wait()


if __name__ == "__main__":
    main()
