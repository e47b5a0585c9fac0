"""`seglog console`: the web console (seglog.console) over a cluster's APIs."""

from __future__ import annotations

import argparse

from .arguments import bootstrap_servers, security_options


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (%(default)s)")
    p.add_argument("--port", type=int, default=9500, help="port to listen on (%(default)s)")
    p.add_argument(
        "--refresh-interval-ms",
        type=int,
        default=2000,
        metavar="MS",
        help="how often the one shared metadata refresh runs (default %(default)s)",
    )


def run(args: argparse.Namespace) -> int:
    from seglog.console.server import serve

    return serve(
        bootstrap_servers(args),
        args.host,
        args.port,
        security_options(args),
        args.refresh_interval_ms,
        args.request_timeout_ms,
    )
