"""Records the wire fixtures of agent.py into fixtures/a2a/frameworks/adk/.

Usage (from this directory): .venv/bin/python record.py [VARIANT ...] [--only SCENARIO ...]
Starts agent.py once per variant (port 0), sends the scenarios with httpx and stores every
JSON-RPC request body (pretty) and the raw response bytes exactly as the server sent them.
Without arguments every variant and scenario is recorded; `record.py executor-v2 --only tool`
re-records one scenario (`hello`, `tool`, `think`, `approve`, `approve-wrong`, `send`) of one variant.

Variants (directory under fixtures/a2a/frameworks/adk/):
  .               A2A 1.0 methods, legacy executor (ADK's default), --streaming sse
  v0_3/           A2A 0.3 methods on the same server (a2a-sdk compat layer)
  stream-none/    A2A 1.0, --streaming none (model called with stream=False)
  executor-v2/    A2A 1.0, --executor v2 (ADK's new executor, opt-in)
"""

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent.parent
OUT = ROOT / "fixtures" / "a2a" / "frameworks" / "adk"
ANSWER = "yes, send it"


def start(*flags):
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "agent.py"), "--port", "0", *flags],
        stdout=subprocess.PIPE,
        stderr=open(os.devnull, "w"),
        text=True,
    )
    line = proc.stdout.readline().strip()
    assert line.startswith("READY "), line
    return proc, line.split(" ", 1)[1]


class Recorder:
    def __init__(self, base, out: Path, version: str):
        self.base, self.out, self.version = base, out, version
        self.out.mkdir(parents=True, exist_ok=True)
        self.http = httpx.Client(timeout=30)
        self.next_id = 1

    @property
    def v1(self):
        return self.version == "1.0"

    def headers(self):
        h = {"Content-Type": "application/json", "Accept": "text/event-stream, application/json"}
        if self.v1:
            h["A2A-Version"] = "1.0"
        return h

    def method(self, kind):
        names = {
            "stream": ("SendStreamingMessage", "message/stream"),
            "send": ("SendMessage", "message/send"),
            "get": ("GetTask", "tasks/get"),
        }
        return names[kind][0 if self.v1 else 1]

    def text_part(self, text):
        return {"text": text} if self.v1 else {"kind": "text", "text": text}

    def data_part(self, data, metadata=None):
        part = {"data": data} if self.v1 else {"kind": "data", "data": data}
        if metadata is not None:
            part["metadata"] = metadata
        return part

    def message(self, message_id, parts, task_id=None, context_id=None):
        m = {"messageId": message_id, "role": "ROLE_USER" if self.v1 else "user", "parts": parts}
        if not self.v1:
            m["kind"] = "message"
        if task_id:
            m["taskId"] = task_id
        if context_id:
            m["contextId"] = context_id
        return m

    def call(self, name, kind, params, suffix):
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": self.method(kind), "params": params}
        self.next_id += 1
        (self.out / f"{name}.request.json").write_text(json.dumps(body, indent=2) + "\n")
        raw = b""
        with self.http.stream("POST", self.base, headers=self.headers(), content=json.dumps(body)) as r:
            if not r.headers.get("content-type", "").startswith("text/event-stream"):
                suffix = "json"  # e.g. a JSON-RPC error answering a streaming call
            for chunk in r.iter_raw():
                raw += chunk
        (self.out / f"{name}.{suffix}").write_bytes(raw)
        if suffix == "sse":
            return [json.loads(l[5:]) for l in raw.decode().splitlines() if l.startswith("data:")]
        return [json.loads(raw)]

    def stream(self, name, message):
        return self.call(name, "stream", {"message": message}, "sse")

    def send(self, name, message):
        return self.call(name, "send", {"message": message, "configuration": {"returnImmediately": False} if self.v1 else {"blocking": True}}, "json")

    def get(self, name, task_id):
        return self.call(name, "get", {"id": task_id}, "json")

    # -- helpers over the decoded events ---------------------------------------------------
    @staticmethod
    def results(events):
        return [e["result"] for e in events if "result" in e]

    def ids(self, events):
        """(taskId, contextId) from the first event of a stream or a send result."""
        r = self.results(events)[0]
        if self.v1:
            if "task" in r:
                return r["task"]["id"], r["task"]["contextId"]
            u = r.get("statusUpdate") or r.get("artifactUpdate")
            return u["taskId"], u["contextId"]
        if r.get("kind") == "task":
            return r["id"], r["contextId"]
        return r["taskId"], r["contextId"]

    def pending_call(self, events):
        """The long-running function_call data part of the last input-required status."""
        found = None
        for r in self.results(events):
            candidates = []
            if self.v1:
                s = (r.get("statusUpdate") or r.get("task") or {}).get("status", {})
            else:
                s = r.get("status", {})
            if s.get("state") in ("TASK_STATE_INPUT_REQUIRED", "input-required"):
                candidates = s.get("message", {}).get("parts", [])
            for p in candidates:
                if (p.get("metadata") or {}).get("adk_is_long_running"):
                    found = p["data"]
        assert found, f"no pending call in {events}"
        return found

    def resume_parts(self, call, answer=ANSWER):
        return [
            self.data_part(
                {"id": call["id"], "name": call["name"], "response": {"answer": answer}},
                {"adk_type": "function_response"},
            )
        ]


SCENARIOS = ("hello", "tool", "think", "approve", "approve-wrong", "send")


def record_variant(rec: Recorder, with_send: bool, only=SCENARIOS):
    if "hello" in only:
        rec.stream("hello", rec.message("msg-hello", [rec.text_part("hello")]))
    if "tool" in only:
        ev = rec.stream("tool", rec.message("msg-tool", [rec.text_part("tool")]))
        # The task as a thread reload reads it (where the v2 executor keeps the calls).
        rec.get("tool-get", rec.ids(ev)[0])

    if "think" in only:
        # Thought parts, a tool call and usage metadata (the think script of agent.py).
        ev = rec.stream("think", rec.message("msg-think", [rec.text_part("think")]))
        rec.get("think-get", rec.ids(ev)[0])

    if "approve" in only:
        ev = rec.stream("approve", rec.message("msg-approve", [rec.text_part("approve")]))
        task_id, context_id = rec.ids(ev)
        call = rec.pending_call(ev)
        rec.stream(
            "approve-resume",
            rec.message("msg-approve-resume", rec.resume_parts(call), task_id, context_id),
        )
        rec.get("approve-get", task_id)

    if "approve-wrong" in only:
        # The wrong shape: a plain text part only, on a second approve task.
        ev = rec.stream("approve-wrong-resume.setup", rec.message("msg-approve-2", [rec.text_part("approve")]))
        task_id, context_id = rec.ids(ev)
        call2 = rec.pending_call(ev)
        rec.stream(
            "approve-wrong-resume",
            rec.message("msg-approve-wrong-resume", [rec.text_part(ANSWER)], task_id, context_id),
        )
        rec.get("approve-wrong-resume-get", task_id)
        # Then the right shape on that same task.
        rec.stream(
            "approve-late-resume",
            rec.message("msg-approve-late-resume", rec.resume_parts(call2), task_id, context_id),
        )

    if with_send and "send" in only:
        rec.send("hello-send", rec.message("msg-hello-send", [rec.text_part("hello")]))
        rec.send("tool-send", rec.message("msg-tool-send", [rec.text_part("tool")]))
        ev = rec.send("approve-send", rec.message("msg-approve-send", [rec.text_part("approve")]))
        task = ev[0]["result"]["task"] if rec.v1 else ev[0]["result"]
        ev = [{"result": {"task": task}} if rec.v1 else {"result": task}]
        rec.send(
            "approve-resume-send",
            rec.message("msg-approve-resume-send", rec.resume_parts(rec.pending_call(ev)), task["id"], task["contextId"]),
        )


def main():
    variants = [
        (".", "1.0", [], True),
        ("v0_3", "0.3", [], True),
        ("stream-none", "1.0", ["--streaming", "none"], False),
        ("executor-v2", "1.0", ["--executor", "v2"], True),
    ]
    parser = argparse.ArgumentParser()
    parser.add_argument("variant", nargs="*", help="directories to record (default: all)")
    parser.add_argument("--only", nargs="+", choices=SCENARIOS, default=SCENARIOS)
    args = parser.parse_args()
    unknown = set(args.variant) - {v[0] for v in variants}
    if unknown:
        parser.error(f"unknown variant(s) {sorted(unknown)}; known: {[v[0] for v in variants]}")
    for directory, version, flags, with_send in variants:
        if args.variant and directory not in args.variant:
            continue
        proc, base = start(*flags)
        try:
            out = OUT / directory
            rec = Recorder(base, out, version)
            if directory == ".":
                card = rec.http.get(base + ".well-known/agent-card.json").content
                (out / "agent-card.json").write_bytes(card)
            record_variant(rec, with_send, args.only)
            print(f"recorded {out.relative_to(ROOT)} from {base}", file=sys.stderr)
        finally:
            proc.terminate()
            proc.wait()


if __name__ == "__main__":
    main()
