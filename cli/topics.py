"""`seglog topics`: kafka-topics for seglog (create, list, describe, alter configs,
delete). The options it shares with the other networked subcommands are in
arguments.py."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from .arguments import add_actions, add_pairs_option, open_admin, parse_pairs

if TYPE_CHECKING:
    from seglog.client.admin import Admin, TopicDescription

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


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_actions(
        p,
        {
            "--create": "create a topic",
            "--list": "list topic names",
            "--describe": "describe topics",
            "--alter": "set or delete topic configs",
            "--delete": "delete a topic",
        },
    )
    p.add_argument("--topic", help="the topic (every topic for --list/--describe if omitted)")
    p.add_argument("--partitions", type=int, help="partition count (--create)")
    p.add_argument("--replication-factor", type=int, help="replicas per partition (--create)")
    add_pairs_option(
        p,
        "--config",
        "a topic config override (--create, --alter); repeatable",
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


_MISSING = "UNKNOWN_TOPIC_OR_PARTITION"


def _done(call: Callable[[], object], error: str, tolerated: bool) -> bool:
    """Run the admin call; False when it failed with `error` and --if-exists or
    --if-not-exists (`tolerated`) makes that a quiet success: exit 0, nothing printed."""
    from seglog.client.errors import error_class

    try:
        call()
    except error_class(error):
        if tolerated:
            return False
        raise
    return True


def _create(admin: Admin, args: argparse.Namespace, configs: dict[str, str], out: TextIO) -> int:
    from seglog.client.admin import NewTopic

    topic = NewTopic(
        args.topic,
        num_partitions=args.partitions if args.partitions is not None else -1,
        replication_factor=args.replication_factor if args.replication_factor is not None else -1,
        topic_configs=configs,
    )
    if not _done(lambda: admin.create_topics([topic]), "TOPIC_ALREADY_EXISTS", args.if_not_exists):
        return 0
    print(f"Created topic {args.topic}.", file=out)
    return 0


def _list(admin: Admin, args: argparse.Namespace, out: TextIO) -> int:
    for name in admin.list_topics():
        if args.topic is None or name == args.topic:
            print(name, file=out)
    return 0


def _describe(admin: Admin, args: argparse.Namespace, out: TextIO) -> int:
    from seglog.client.errors import error_class

    topics: list[TopicDescription] = []
    names = [args.topic] if args.topic else None
    if not _done(lambda: topics.extend(admin.describe_topics(names)), _MISSING, args.if_exists):
        return 0
    for t in topics:
        # A topic deleted between the two requests is simply skipped.
        try:
            configs = admin.describe_configs(t.name)
        except error_class(_MISSING):
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

    if args.partitions is not None:
        return _add_partitions(admin, args, configs, out)
    removed = [k.strip() for k in args.delete_config or []]
    if not configs and not removed:
        raise ValueError("--alter needs --config KEY=VALUE or --delete-config KEY")
    if not _done(
        lambda: admin.alter_configs(args.topic, set=configs, delete=removed),
        _MISSING,
        args.if_exists,
    ):
        return 0
    print(f"Updated config for topic {args.topic}.", file=out)
    return 0


def _add_partitions(
    admin: Admin, args: argparse.Namespace, configs: dict[str, str], out: TextIO
) -> int:
    from seglog.client.admin import NewPartitions

    if configs or args.delete_config:
        raise ValueError("--alter --partitions can't be combined with --config/--delete-config")
    grow = {args.topic: NewPartitions(args.partitions)}
    if not _done(lambda: admin.create_partitions(grow), _MISSING, args.if_exists):
        return 0
    print(
        "WARNING: If partitions are increased for a topic that has a key, the partition "
        "logic or ordering of the messages will be affected",
        file=out,
    )
    print("Adding partitions succeeded!", file=out)
    return 0


def _delete(admin: Admin, args: argparse.Namespace) -> int:

    if not _done(lambda: admin.delete_topics([args.topic]), _MISSING, args.if_exists):
        return 0
    # kafka-topics --delete prints nothing on success.
    return 0
