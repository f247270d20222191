"""Serve a test peer's ASGI app with uvicorn on 127.0.0.1 (stdlib + uvicorn only).

Shared by the Python peers of the end-to-end tests (tests/upstream/ref_agent.py and
tests/frameworks/<fw>/agent.py), each of which imports it with
`sys.path.insert(0, <the tests/ dir>)`.

Contract of `serve(build, port=..., parent_pid=..., tls=...)`:
- binds 127.0.0.1:<port> (0: any free port) and calls `build(base, port)` for the app, where
  base is "http://127.0.0.1:<port>/" ("https://..." with `tls`);
- with `tls` {"cert": PEM file, "key": PEM file, "client_ca": PEM file or None} serves HTTPS
  (HTTP/2 offered by ALPN); with a client CA, a client certificate signed by it is required
  in the handshake;
- prints exactly one line "READY <base>" on stdout, flushed, once the app is ready to serve:
  after uvicorn's startup, ASGI lifespan startup included (nothing is printed if startup
  fails);
- if parent_pid is non-zero, shuts down once that process is gone (polled every 0.5 s).
"""

import asyncio
import os
import socket
import ssl

import uvicorn


def serve(build, *, port=0, parent_pid=0, lifespan="auto", tls=None):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    port = sock.getsockname()[1]
    scheme = "https" if tls else "http"
    base = f"{scheme}://127.0.0.1:{port}/"
    ssl_options = {}
    if tls:
        ssl_options = {"ssl_certfile": tls["cert"], "ssl_keyfile": tls["key"]}
        if tls.get("client_ca"):
            ssl_options |= {"ssl_ca_certs": tls["client_ca"], "ssl_cert_reqs": ssl.CERT_REQUIRED}
    config = uvicorn.Config(build(base, port), log_level="warning", lifespan=lifespan, **ssl_options)
    server = uvicorn.Server(config)

    async def watch_parent():
        while True:
            await asyncio.sleep(0.5)
            try:
                os.kill(parent_pid, 0)
            except OSError:
                server.should_exit = True
                return

    async def run():
        loop = asyncio.get_running_loop()
        watcher = loop.create_task(watch_parent()) if parent_pid else None
        serving = loop.create_task(server.serve(sockets=[sock]))
        while not server.started and not serving.done():
            await asyncio.sleep(0.01)
        if server.started:
            print(f"READY {base}", flush=True)
        await serving
        if watcher:
            watcher.cancel()

    asyncio.run(run())
