"""The argument handling the tools share (commands.py builds their parsers): the
connection options, one-of actions, `key=value` options; and what the connection
options make (the bootstrap list, the security options, an Admin)."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from seglog.client.admin import Admin

DEFAULT_REQUEST_TIMEOUT_MS = 30_000


def add_connection_args(parser: argparse.ArgumentParser, verbose: bool = True) -> None:
    """`verbose=False` for a tool whose --verbose means something else (consumer-groups)."""
    parser.add_argument(
        "--bootstrap-server",
        required=True,
        metavar="HOST:PORT",
        help="node(s) to connect to, comma-separated",
    )
    parser.add_argument(
        "--request-timeout-ms",
        type=int,
        default=DEFAULT_REQUEST_TIMEOUT_MS,
        metavar="MS",
        help="give up on an unreachable cluster after this long (default %(default)s)",
    )
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="client properties (security.protocol, ssl.truststore.location, "
        "ssl.keystore.location, ssl.key.password), as Kafka's tools take",
    )
    if verbose:
        parser.add_argument(
            "--verbose",
            action="store_true",
            help="log the client's failed requests and retries to stderr",
        )


def security_options(args: argparse.Namespace) -> dict[str, str | None]:
    """--command-config as the clients' kafka-python-named security options."""
    from dataclasses import asdict

    from seglog.client.security import ClientSecurity
    from seglog.storage.properties_file import parse_properties

    path = getattr(args, "command_config", None)
    if not path:
        return {}
    try:
        props = parse_properties(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise ValueError(f"--command-config {path}: {e}") from None
    return asdict(ClientSecurity.from_properties(props))


def bootstrap_servers(args: argparse.Namespace) -> str:
    """--bootstrap-server, checked up front so a typo is one clear line, not a
    connection error later."""
    from seglog.client.cluster import parse_bootstrap

    value: str = args.bootstrap_server
    try:
        addresses = parse_bootstrap(value)
    except ValueError as e:
        raise ValueError(f"--bootstrap-server {value!r}: {e}") from None
    for _host, port in addresses:
        if not 0 < port < 65536:
            raise ValueError(f"--bootstrap-server {value!r}: port {port} is out of range")
    if args.request_timeout_ms <= 0:
        raise ValueError(f"--request-timeout-ms must be positive, got {args.request_timeout_ms}")
    return value


def open_admin(args: argparse.Namespace) -> Admin:
    from seglog.client.admin import Admin

    return Admin(
        bootstrap_servers(args),
        request_timeout_ms=args.request_timeout_ms,
        **security_options(args),
    )


def parse_pairs(items: Iterable[str] | None, option: str) -> dict[str, str]:
    """`["k=v", ...]` → {k: v}; the value may itself contain '='."""
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{option} {item!r} is not key=value")
        out[key.strip()] = value
    return out


def add_actions(parser: argparse.ArgumentParser, actions: Mapping[str, str | None]) -> None:
    """The subcommand's actions (flag → help): exactly one must be given."""
    group = parser.add_mutually_exclusive_group(required=True)
    for flag, help in actions.items():
        group.add_argument(flag, action="store_true", help=help)


def add_pairs_option(parser: argparse.ArgumentParser, flag: str, help: str) -> None:
    """A repeatable KEY=VALUE option (read back with parse_pairs)."""
    parser.add_argument(flag, action="append", metavar="KEY=VALUE", help=help)
