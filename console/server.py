"""Run the console: the shared refresher, the app, and uvicorn on one port."""

from __future__ import annotations

import socket
import sys
from collections.abc import Mapping
from typing import TextIO

import uvicorn

from seglog.client.admin import Admin

from .app import Console, build_app
from .cluster_io import ClusterIO
from .refresher import Refresher
from .security_view import SecurityClient

# The refresher's own calls give up sooner than a tool's, so that an unreachable
# cluster shows as an error on the page within seconds.
REFRESH_TIMEOUT_MS = 5_000
MAX_CONNECTIONS = 256


def serve(
    bootstrap: str,
    host: str,
    port: int,
    security: Mapping[str, str | None],
    refresh_interval_ms: int,
    request_timeout_ms: int,
    out: TextIO | None = None,
) -> int:
    out = out or sys.stdout
    if not 0 <= port < 65536:
        raise ValueError(f"--port {port} is out of range")
    if refresh_interval_ms <= 0:
        raise ValueError(f"--refresh-interval-ms must be positive, got {refresh_interval_ms}")
    # Bound before the cluster is asked anything, so a taken port fails at once.
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise OSError(f"the console cannot listen on {host}:{port}: {e.strerror}") from None
    refresh_admin = Admin(
        bootstrap,
        request_timeout_ms=min(REFRESH_TIMEOUT_MS, request_timeout_ms),
        client_id="seglog-console-refresh",
        **security,
    )
    admin = Admin(
        bootstrap, request_timeout_ms=request_timeout_ms, client_id="seglog-console", **security
    )
    refresher = Refresher(refresh_admin, security, refresh_interval_ms / 1000)
    io = ClusterIO(bootstrap, admin, security)
    security_client = SecurityClient(bootstrap, security, request_timeout_ms / 1000)
    app = build_app(Console(refresher, io, security_client), host)
    refresher.start()
    bound_port = sock.getsockname()[1]
    print(f"console: http://{host}:{bound_port}/", file=out, flush=True)
    config = uvicorn.Config(
        app,
        log_level="warning",
        timeout_graceful_shutdown=2,
        lifespan="off",
        # Live pages hold a connection each: beyond this many, 503 rather than more.
        limit_concurrency=MAX_CONNECTIONS,
    )
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        refresher.stop()
        io.close()
        security_client.close()
        admin.close()
        refresh_admin.close()
    return 0
