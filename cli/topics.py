"""`seglog topics`: kafka-topics for seglog (create, list, describe, alter configs,
delete), plus the connection options and `key=value` parsing every networked
subcommand shares."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from seglog.client.admin import Admin, TopicDescription

DEFAULT_REQUEST_TIMEOUT_MS = 30_000


# --- shared by topics, produce, consume and get-offsets ---------------------------------


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


# --- topics --------------------------------------------------------------------------


# kafka-topics' --describe filters; at most one may be given.
DESCRIBE_FILTERS = {
    "--under-replicated-partitions": "whose ISR is smaller than their replica set",
    "--under-min-isr-partitions": "whose ISR is below min.insync.replicas",
    "--at-min-isr-partitions": "whose ISR is exactly min.insync.replicas",
    "--unavailable-partitions": "without a leader, or whose leader is offline",
}


def _filter_name(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "topics",
        help="create, list, describe, alter and delete topics (like kafka-topics)",
        description="Like kafka-topics: create, list, describe, alter and delete topics.",
    )
    add_connection_args(p)
    action = p.add_mutually_exclusive_group(required=True)
    action.add_argument("--create", action="store_true", help="create a topic")
    action.add_argument("--list", action="store_true", help="list topic names")
    action.add_argument("--describe", action="store_true", help="describe topics")
    action.add_argument("--alter", action="store_true", help="set or delete topic configs")
    action.add_argument("--delete", action="store_true", help="delete a topic")
    p.add_argument("--topic", help="the topic (every topic for --list/--describe if omitted)")
    p.add_argument("--partitions", type=int, help="partition count (--create)")
    p.add_argument("--replication-factor", type=int, help="replicas per partition (--create)")
    p.add_argument(
        "--config",
        action="append",
        metavar="KEY=VALUE",
        help="a topic config override (--create, --alter); repeatable",
    )
    p.add_argument(
        "--delete-config",
        action="append",
        metavar="KEY",
        help="remove a topic config override (--alter); repeatable",
    )
    p.add_argument(
        "--if-not-exists", action="store_true", help="--create: no error if the topic exists"
    )
    for flag, what in DESCRIBE_FILTERS.items():
        p.add_argument(flag, action="store_true", help=f"--describe: only partitions {what}")
    p.add_argument(
        "--if-exists",
        action="store_true",
        help="--alter/--delete/--describe: no error if the topic does not exist",
    )
    p.set_defaults(func=run)


def _action(args: argparse.Namespace) -> str:
    return next(a for a in ("create", "list", "describe", "alter", "delete") if getattr(args, a))


def _check_options(args: argparse.Namespace, action: str) -> None:
    """Reject options that mean nothing for the action, as kafka-topics does."""
    allowed = {
        "create": {"topic", "partitions", "replication_factor", "config", "if_not_exists"},
        "list": {"topic"},
        "describe": {"topic", "if_exists", *(_filter_name(f) for f in DESCRIBE_FILTERS)},
        "alter": {"topic", "config", "delete_config", "if_exists", "partitions"},
        "delete": {"topic", "if_exists"},
    }[action]
    for name in (
        "topic",
        "partitions",
        "replication_factor",
        "config",
        "delete_config",
        "if_not_exists",
        "if_exists",
        *(_filter_name(f) for f in DESCRIBE_FILTERS),
    ):
        value = getattr(args, name)
        if value not in (None, False) and name not in allowed:
            flag = "--" + name.replace("_", "-")
            raise ValueError(f"option {flag} can't be used with --{action}")
    if action in ("create", "alter", "delete") and not args.topic:
        raise ValueError(f"--{action} needs --topic")
    # kafka-topics' own checks and messages (-1 would mean the node's default).
    from seglog.client.errors import error_class

    if args.partitions is not None and args.partitions < 1:
        raise error_class("INVALID_PARTITIONS")("The partitions must be greater than 0")
    if args.replication_factor is not None and not 1 <= args.replication_factor <= 32767:
        raise error_class("INVALID_REPLICATION_FACTOR")(
            "The replication factor must be between 1 and 32767 inclusive"
        )
    given = [f for f in DESCRIBE_FILTERS if getattr(args, _filter_name(f))]
    if len(given) > 1:
        raise ValueError(f"only one of {', '.join(given)} can be given")


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    action = _action(args)
    _check_options(args, action)
    configs = parse_pairs(args.config, "--config")
    with open_admin(args) as admin:
        if action == "create":
            return _create(admin, args, configs, out)
        if action == "list":
            return _list(admin, args, out)
        if action == "describe":
            return _describe(admin, args, out)
        if action == "alter":
            return _alter(admin, args, configs, out)
        return _delete(admin, args)


def _create(admin: Admin, args: argparse.Namespace, configs: dict[str, str], out: TextIO) -> int:
    from seglog.client.admin import NewTopic
    from seglog.client.errors import error_class

    topic = NewTopic(
        args.topic,
        num_partitions=args.partitions if args.partitions is not None else -1,
        replication_factor=args.replication_factor if args.replication_factor is not None else -1,
        topic_configs=configs,
    )
    try:
        admin.create_topics([topic])
    except error_class("TOPIC_ALREADY_EXISTS"):
        if args.if_not_exists:
            return 0
        raise
    print(f"Created topic {args.topic}.", file=out)
    return 0


def _list(admin: Admin, args: argparse.Namespace, out: TextIO) -> int:
    for name in admin.list_topics():
        if args.topic is None or name == args.topic:
            print(name, file=out)
    return 0


def _describe(admin: Admin, args: argparse.Namespace, out: TextIO) -> int:
    from seglog.client.errors import error_class

    try:
        topics = admin.describe_topics([args.topic] if args.topic else None)
    except error_class("UNKNOWN_TOPIC_OR_PARTITION"):
        if args.if_exists:
            return 0
        raise
    for t in topics:
        # A topic deleted between the two requests is simply skipped.
        try:
            configs = admin.describe_configs(t.name)
        except error_class("UNKNOWN_TOPIC_OR_PARTITION"):
            if args.topic:
                raise
            continue
        overrides = sorted((c.name, c.value) for c in configs.values() if not c.is_default)
        keep = _partition_filter(args, configs, admin)
        if keep is None:
            _print_description(t, overrides, _replica_offsets(admin, t), out)
        else:
            # As kafka-topics: with a filter, only the matching partition lines.
            _print_partitions(t, [p for p in t.partitions if keep(p)], {}, out)
    return 0


def _partition_filter(
    args: argparse.Namespace, configs: Mapping[str, Any], admin: Admin
) -> Callable[[Any], bool] | None:
    """The --describe filter given, as a test of one partition (None: no filter)."""
    min_isr_entry = configs.get("min.insync.replicas")
    min_isr = int(min_isr_entry.value) if min_isr_entry is not None else 1
    if args.under_replicated_partitions:
        return lambda p: len(p.isr) < len(p.replicas)
    if args.under_min_isr_partitions:
        return lambda p: len(p.isr) < min_isr
    if args.at_min_isr_partitions:
        return lambda p: len(p.isr) == min_isr
    if args.unavailable_partitions:
        live = {b.node_id for b in admin.describe_cluster().brokers if not b.fenced}
        return lambda p: p.leader < 0 or p.leader not in live
    return None


def _replica_offsets(admin: Admin, t: TopicDescription) -> dict[int, tuple[int, dict[int, int]]]:
    """partition -> (high watermark, {replica: log end offset}), asked of each leader;
    a leader that does not answer just leaves its partitions out."""
    import grpc

    from seglog.proto import client_pb2 as pb

    out: dict[int, tuple[int, dict[int, int]]] = {}
    for leader in sorted({p.leader for p in t.partitions if p.leader >= 0}):
        try:
            stub = admin._metadata.stub_for(leader)
            r = stub.DescribeReplicas(pb.DescribeReplicasRequest(topics=[t.name]), timeout=5)
        except (grpc.RpcError, Exception):  # noqa: BLE001 - describe what we can
            continue
        for p in r.partitions:
            if p.topic == t.name:
                out[p.partition] = (
                    p.high_watermark,
                    {s.node_id: s.log_end_offset for s in p.replicas},
                )
    return out


def _nodes(ids: Sequence[int]) -> str:
    return ",".join(str(i) for i in ids)


def _print_description(
    t: TopicDescription,
    configs: list[tuple[str, str]],
    offsets: dict[int, tuple[int, dict[int, int]]],
    out: TextIO,
) -> None:
    print(
        f"Topic: {t.name}\tTopicId: {t.topic_id}\tPartitionCount: {len(t.partitions)}\t"
        f"ReplicationFactor: {t.replication_factor}\t"
        f"Configs: {','.join(f'{k}={v}' for k, v in configs)}",
        file=out,
    )
    _print_partitions(t, t.partitions, offsets, out)


def _print_partitions(
    t: TopicDescription,
    partitions: Sequence[Any],
    offsets: dict[int, tuple[int, dict[int, int]]],
    out: TextIO,
) -> None:
    for p in partitions:
        leader = str(p.leader) if p.leader >= 0 else "none"
        line = (
            f"\tTopic: {t.name}\tPartition: {p.partition}\tLeader: {leader}\t"
            f"Replicas: {_nodes(p.replicas)}\tIsr: {_nodes(p.isr)}\tLeaderEpoch: {p.leader_epoch}"
        )
        if p.offline_replicas:
            line += f"\tOffline: {_nodes(p.offline_replicas)}"
        if p.partition in offsets:
            hw, leos = offsets[p.partition]
            line += f"\tHighWatermark: {hw}\tLogEndOffsets: " + ",".join(
                f"{r}:{leos[r]}" for r in p.replicas if r in leos
            )
        print(line, file=out)


def _alter(admin: Admin, args: argparse.Namespace, configs: dict[str, str], out: TextIO) -> int:
    from seglog.client.errors import error_class

    if args.partitions is not None:
        return _add_partitions(admin, args, configs, out)
    removed = [k.strip() for k in args.delete_config or []]
    if not configs and not removed:
        raise ValueError("--alter needs --config KEY=VALUE or --delete-config KEY")
    try:
        admin.alter_configs(args.topic, set=configs, delete=removed)
    except error_class("UNKNOWN_TOPIC_OR_PARTITION"):
        if args.if_exists:
            return 0
        raise
    print(f"Updated config for topic {args.topic}.", file=out)
    return 0


def _add_partitions(
    admin: Admin, args: argparse.Namespace, configs: dict[str, str], out: TextIO
) -> int:
    from seglog.client.admin import NewPartitions
    from seglog.client.errors import error_class

    if configs or args.delete_config:
        raise ValueError("--alter --partitions can't be combined with --config/--delete-config")
    try:
        admin.create_partitions({args.topic: NewPartitions(args.partitions)})
    except error_class("UNKNOWN_TOPIC_OR_PARTITION"):
        if args.if_exists:
            return 0
        raise
    print(
        "WARNING: If partitions are increased for a topic that has a key, the partition "
        "logic or ordering of the messages will be affected",
        file=out,
    )
    print("Adding partitions succeeded!", file=out)
    return 0


def _delete(admin: Admin, args: argparse.Namespace) -> int:
    from seglog.client.errors import error_class

    try:
        admin.delete_topics([args.topic])
    except error_class("UNKNOWN_TOPIC_OR_PARTITION"):
        if args.if_exists:
            return 0
        raise
    # kafka-topics --delete prints nothing on success.
    return 0
