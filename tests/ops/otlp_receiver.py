"""A minimal OTLP/HTTP trace receiver for the end-to-end tests (tests/e2e/ops.rs).

stdlib http.server + opentelemetry-proto only. Usage:
    otlp_receiver.py [--port 0] [--parent-pid PID]
- binds 127.0.0.1:<port> (0: any free port), prints exactly one line "READY <base>" on stdout
  (base = "http://127.0.0.1:<port>", no trailing slash), flushed, once it serves;
- POST /v1/traces: an ExportTraceServiceRequest in protobuf (Content-Encoding gzip accepted);
  answers 200 with an empty ExportTraceServiceResponse; a body that does not decode is a 400;
- GET /spans: every span received so far, in arrival order, as JSON
  [{"traceId", "spanId", "parentSpanId", "name", "kind", "attributes": {k: v},
    "resource": {k: v}}] (ids lowercase hex, parentSpanId "" for a root span);
- GET /requests: [{"path", "contentType", "contentEncoding", "bytes"}] of every POST;
- if --parent-pid is non-zero, exits once that process is gone (polled every 0.5 s).
"""

import argparse
import gzip
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

LOCK = threading.Lock()
SPANS = []
REQUESTS = []


def any_value(v):
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in v.kvlist_value.values}
    if kind == "bytes_value":
        return v.bytes_value.hex()
    return getattr(v, kind)


def attributes(kvs):
    return {kv.key: any_value(kv.value) for kv in kvs}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body, content_type):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        encoding = (self.headers.get("Content-Encoding") or "").lower()
        with LOCK:
            REQUESTS.append({
                "path": self.path,
                "contentType": self.headers.get("Content-Type"),
                "contentEncoding": encoding,
                "bytes": len(body),
            })
        if self.path.split("?")[0] != "/v1/traces":
            return self.reply(404, b"not found", "text/plain")
        try:
            if encoding == "gzip":
                body = gzip.decompress(body)
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
        except Exception as e:
            return self.reply(400, f"bad request: {e}".encode(), "text/plain")
        spans = []
        for rs in request.resource_spans:
            resource = attributes(rs.resource.attributes)
            for ss in rs.scope_spans:
                for s in ss.spans:
                    spans.append({
                        "traceId": s.trace_id.hex(),
                        "spanId": s.span_id.hex(),
                        "parentSpanId": s.parent_span_id.hex(),
                        "name": s.name,
                        "kind": s.kind,
                        "attributes": attributes(s.attributes),
                        "resource": resource,
                    })
        with LOCK:
            SPANS.extend(spans)
        self.reply(200, ExportTraceServiceResponse().SerializeToString(), "application/x-protobuf")

    def do_GET(self):
        path = self.path.split("?")[0]
        with LOCK:
            data = {"/spans": SPANS, "/requests": REQUESTS}.get(path)
            body = None if data is None else json.dumps(data).encode()
        if body is None:
            return self.reply(404, b"not found", "text/plain")
        self.reply(200, body, "application/json")


def watch_parent(pid, server):
    while True:
        time.sleep(0.5)
        try:
            os.kill(pid, 0)
        except OSError:
            server.shutdown()
            return


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--parent-pid", type=int, default=0)
    args = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    if args.parent_pid:
        threading.Thread(target=watch_parent, args=(args.parent_pid, server), daemon=True).start()
    print(f"READY http://127.0.0.1:{server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
