"""The compose example's shared A2A upstream: the scripted a2a-sdk 1.3.0 agent of the
gateway's end-to-end tests (tests/upstream/ref_agent.py: echo X, artifact, approve, auth,
form, slow N, fail, ...), served on all interfaces for the other containers.

Env: UPSTREAM_HOST (default 0.0.0.0), UPSTREAM_PORT (9999), UPSTREAM_BASE_URL (the URL the
agent card advertises; default http://upstream:<port>/, the compose service name: it must
have the same origin as the gateway's configured agent URL), UPSTREAM_VERSIONS (both | 1.0 |
0.3; default both).
"""

import logging
import os

import uvicorn

from ref_agent import build

host = os.environ.get("UPSTREAM_HOST", "0.0.0.0")
port = int(os.environ.get("UPSTREAM_PORT", "9999"))
base = os.environ.get("UPSTREAM_BASE_URL", f"http://upstream:{port}/")
versions = os.environ.get("UPSTREAM_VERSIONS", "both")

if __name__ == "__main__":
    # The crash scenario raises on purpose; keep the SDK's tracebacks out of the logs.
    logging.disable(logging.CRITICAL)
    print(f"A2A upstream ({versions}) on {host}:{port}, card URL {base}", flush=True)
    uvicorn.run(build(versions, base), host=host, port=port, log_level="warning")
