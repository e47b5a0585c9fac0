"""`seglog consumer-groups`: kafka-consumer-groups for seglog, with its flags, its
columns and its messages: list groups, describe them (offsets and lag, members,
state), reset a group's offsets, delete groups or some of their offsets."""

from __future__ import annotations

import argparse
import datetime
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from .arguments import add_actions, open_admin

if TYPE_CHECKING:
    from seglog.client.admin import Admin, GroupInformation
    from seglog.client.cluster import TopicPartition

_INACTIVE = ("Empty", "Dead")
_DRY_RUN_WARNING = (
    "WARN: No action will be performed as the --execute option is missing. "
    "You should add the --dry-run option explicitly if you are scripting this command."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_actions(
        p,
        {
            "--list": "list every group",
            "--describe": "describe groups",
            "--reset-offsets": "reset the group's committed offsets",
            "--delete": "delete groups",
            "--delete-offsets": "delete some of a group's offsets",
        },
    )
    p.add_argument("--group", action="append", metavar="GROUP", help="the group (repeatable)")
    p.add_argument("--all-groups", action="store_true", help="every group")
    view = p.add_mutually_exclusive_group()
    view.add_argument("--members", action="store_true", help="with --describe: the members")
    view.add_argument(
        "--offsets", action="store_true", help="with --describe: offsets and lag (default)"
    )
    view.add_argument(
        "--state",
        nargs="?",
        const="",
        metavar="STATES",
        help="with --describe: the group's state; with --list: show (or filter by "
        "comma-separated) states",
    )
    p.add_argument("--verbose", action="store_true", help="with --members: the assignment")
    p.add_argument(
        "--topic",
        action="append",
        metavar="TOPIC[:PARTITIONS]",
        help="with --reset-offsets or --delete-offsets: a topic, optionally with "
        "comma-separated partitions (repeatable)",
    )
    p.add_argument("--all-topics", action="store_true", help="every topic the group committed")
    to = p.add_mutually_exclusive_group()
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-current", action="store_true")
    to.add_argument("--to-offset", type=int, metavar="N")
    to.add_argument("--shift-by", type=int, metavar="N")
    to.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="show the new offsets only")
    mode.add_argument("--execute", action="store_true", help="commit the new offsets")


def run(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    if args.verbose and not args.members:
        raise ValueError("--verbose needs --describe --members")
    if (args.members or args.offsets) and not args.describe:
        raise ValueError("--members and --offsets need --describe")
    with open_admin(args) as admin:
        if args.list:
            return _list(admin, args, out)
        groups = _groups(admin, args)
        if args.describe:
            return _describe(admin, args, groups, out, err)
        if args.reset_offsets:
            return _reset(admin, args, groups, out, err)
        if args.delete:
            return _delete(admin, groups, out, err)
        return _delete_offsets(admin, args, groups, out, err)


def _groups(admin: Admin, args: argparse.Namespace) -> list[str]:
    if args.all_groups:
        if args.group:
            raise ValueError("--group and --all-groups cannot be used together")
        if args.delete_offsets:
            raise ValueError("--delete-offsets needs one --group")
        return [g.group_id for g in admin.list_consumer_groups()]
    if not args.group:
        raise ValueError("one of --group or --all-groups is required")
    if args.delete_offsets and len(args.group) != 1:
        raise ValueError("--delete-offsets needs one --group")
    return list(dict.fromkeys(args.group))


def _table(rows: list[list[str]], out: TextIO) -> None:
    """Columns left-aligned to their widest cell, one space apart (as Kafka's tool)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print(" ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip(), file=out)


# --- list --------------------------------------------------------------------------------


def _list(admin: Admin, args: argparse.Namespace, out: TextIO) -> int:
    if args.state is None:
        for g in admin.list_consumer_groups():
            print(g.group_id, file=out)
        return 0
    states = [s.strip() for s in args.state.split(",") if s.strip()]
    known = {"Empty", "PreparingRebalance", "CompletingRebalance", "Stable", "Dead"}
    by_lower = {k.lower(): k for k in known}
    wanted = []
    for s in states:
        if s.lower() not in by_lower:
            raise ValueError(f"--state {s!r} is not one of {', '.join(sorted(known))}")
        wanted.append(by_lower[s.lower()])
    rows = [["GROUP", "STATE"]]
    rows += [[g.group_id, g.state] for g in admin.list_consumer_groups(wanted)]
    _table(rows, out)
    return 0


# --- describe ----------------------------------------------------------------------------


def _check_group(info: GroupInformation, err: TextIO) -> bool:
    """Kafka's notes before a group's table; False when it does not exist."""
    if info.state == "Dead":
        print(f"Error: Consumer group '{info.group}' does not exist.", file=err)
        return False
    if info.state in ("PreparingRebalance", "CompletingRebalance"):
        print(f"\nWarning: Consumer group '{info.group}' is rebalancing.", file=err)
    elif not info.members:
        print(f"\nConsumer group '{info.group}' has no active members.", file=err)
    return True


def _describe(
    admin: Admin, args: argparse.Namespace, groups: list[str], out: TextIO, err: TextIO
) -> int:
    from seglog.client.admin import LATEST_TIMESTAMP

    missing = False
    for info in admin.describe_consumer_groups(groups):
        if args.state is not None:
            if info.state == "Dead":
                print(f"Error: Consumer group '{info.group}' does not exist.", file=err)
                missing = True
                continue
            c = info.coordinator
            coordinator = f"{c.host}:{c.port} ({c.node_id})" if c is not None else "-"
            print("", file=out)
            _table(
                [
                    ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"],
                    [
                        info.group,
                        coordinator,
                        info.protocol or "",
                        info.state,
                        str(len(info.members)),
                    ],
                ],
                out,
            )
            continue
        committed = admin.list_consumer_group_offsets(info.group)
        if info.state == "Dead" and not committed:
            print(f"Error: Consumer group '{info.group}' does not exist.", file=err)
            missing = True
            continue
        if info.state != "Dead":
            _check_group(info, err)
        elif not info.members:
            print(f"\nConsumer group '{info.group}' has no active members.", file=err)
        if args.members:
            rows = [["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]]
            if args.verbose:
                rows[0].append("ASSIGNMENT")
            for m in sorted(info.members, key=lambda m: m.member_id):
                row = [info.group, m.member_id, m.client_host, m.client_id]
                row.append(str(len(m.member_assignment)))
                if args.verbose:
                    row.append(_assignment(m.member_assignment))
                rows.append(row)
            print("", file=out)
            _table(rows, out)
            continue
        owner: dict[TopicPartition, tuple[str, str, str]] = {}
        for m in info.members:
            for tp in m.member_assignment:
                owner[tp] = (m.member_id, m.client_host, m.client_id)
        tps = sorted(set(owner) | set(committed), key=lambda tp: (tp.topic, tp.partition))
        ends = _log_end_offsets(admin, tps, LATEST_TIMESTAMP)
        rows = [
            [
                "GROUP",
                "TOPIC",
                "PARTITION",
                "CURRENT-OFFSET",
                "LOG-END-OFFSET",
                "LAG",
                "CONSUMER-ID",
                "HOST",
                "CLIENT-ID",
            ]
        ]
        for tp in tps:
            om = committed.get(tp)
            end = ends.get(tp)
            current = str(om.offset) if om is not None else "-"
            lag = str(end - om.offset) if om is not None and end is not None else "-"
            member, host, client = owner.get(tp, ("-", "-", "-"))
            rows.append(
                [
                    info.group,
                    tp.topic,
                    str(tp.partition),
                    current,
                    str(end) if end is not None else "-",
                    lag,
                    member,
                    host,
                    client,
                ]
            )
        print("", file=out)
        _table(rows, out)
    return 1 if missing else 0


def _assignment(tps: Sequence[TopicPartition]) -> str:
    by_topic: dict[str, list[int]] = {}
    for tp in tps:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    if not by_topic:
        return "-"
    return ",".join(
        f"{t}({','.join(str(p) for p in sorted(ps))})" for t, ps in sorted(by_topic.items())
    )


def _log_end_offsets(
    admin: Admin, tps: Sequence[TopicPartition], spec: int
) -> dict[TopicPartition, int]:
    """Per partition the offset ListOffsets gives for `spec` (the high watermark
    for LATEST, as Kafka's tool shows log ends); partitions of deleted topics are
    left out."""
    from seglog.client.errors import KafkaError

    existing = set(admin.list_topics())
    wanted = {tp: spec for tp in tps if tp.topic in existing}
    try:
        return {tp: r.offset for tp, r in admin.list_offsets(wanted).items()}
    except KafkaError:
        # One missing partition must not hide the others: ask one by one.
        out = {}
        for tp in wanted:
            try:
                out[tp] = admin.list_offsets({tp: spec})[tp].offset
            except KafkaError:
                continue
        return out


# --- reset offsets -----------------------------------------------------------------------


def parse_topic_partitions(admin: Admin, specs: Sequence[str]) -> list[TopicPartition]:
    """`topic` (every partition) or `topic:0,1,2`."""
    from seglog.client.cluster import TopicPartition

    out: list[TopicPartition] = []
    for spec in specs:
        topic, sep, parts = spec.partition(":")
        if not topic:
            raise ValueError(f"--topic {spec!r} has no topic name")
        (described,) = admin.describe_topics([topic])
        ids = [p.partition for p in described.partitions]
        if sep:
            chosen = []
            for item in parts.split(","):
                item = item.strip()
                if not item.isdigit() or int(item) not in ids:
                    raise ValueError(
                        f"--topic {spec!r}: {item!r} is not a partition of {topic!r} "
                        f"(it has {len(ids)})"
                    )
                chosen.append(int(item))
            ids = sorted(set(chosen))
        out.extend(TopicPartition(topic, p) for p in ids)
    return list(dict.fromkeys(out))


def parse_datetime_ms(value: str) -> int:
    """Kafka's --to-datetime forms: YYYY-MM-DDTHH:mm:SS.sss, optionally with a zone
    (Z, +hh:mm); without one, local time."""
    text = value.strip()
    try:
        parsed = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"--to-datetime {value!r} is not YYYY-MM-DDTHH:mm:SS.sss (e.g. 2024-01-31T12:00:00.000)"
        ) from None
    if parsed.tzinfo is None:
        parsed = parsed.astimezone()
    return int(parsed.timestamp() * 1000)


def _reset(
    admin: Admin, args: argparse.Namespace, groups: list[str], out: TextIO, err: TextIO
) -> int:
    from seglog.client.admin import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
    from seglog.client.group_coordinator import OffsetAndMetadata

    targets = [
        args.to_earliest,
        args.to_latest,
        args.to_current,
        args.to_offset is not None,
        args.shift_by is not None,
        args.to_datetime is not None,
    ]
    if not any(targets):
        raise ValueError(
            "--reset-offsets needs one of --to-earliest, --to-latest, --to-current, "
            "--to-offset, --shift-by, --to-datetime"
        )
    if bool(args.topic) == bool(args.all_topics):
        raise ValueError("--reset-offsets needs either --topic or --all-topics")
    if not args.dry_run and not args.execute:
        print(_DRY_RUN_WARNING, file=err)
    for info in admin.describe_consumer_groups(groups):
        if info.state not in _INACTIVE:
            raise ValueError(
                f"Error: Assignments can only be reset if the group '{info.group}' is "
                f"inactive, but the current state is {info.state}."
            )
    for group in groups:
        committed = admin.list_consumer_group_offsets(group)
        if args.all_topics:
            tps = sorted(committed, key=lambda tp: (tp.topic, tp.partition))
        else:
            tps = parse_topic_partitions(admin, args.topic)
        earliest = _log_end_offsets(admin, tps, EARLIEST_TIMESTAMP)
        latest = _log_end_offsets(admin, tps, LATEST_TIMESTAMP)
        new: dict[TopicPartition, int] = {}
        if args.to_datetime is not None:
            stamp = parse_datetime_ms(args.to_datetime)
            found = admin.list_offsets({tp: stamp for tp in tps})
        for tp in tps:
            low, high = earliest.get(tp), latest.get(tp)
            if low is None or high is None:
                raise ValueError(f"Error: partition {tp.topic}-{tp.partition} does not exist")
            if args.to_earliest:
                offset = low
            elif args.to_latest:
                offset = high
            elif args.to_offset is not None:
                offset = args.to_offset
            elif args.to_datetime is not None:
                offset = found[tp].offset if found[tp].offset >= 0 else high
            else:
                om = committed.get(tp)
                if om is None:
                    raise ValueError(
                        f"Error: consumer group '{group}' has no committed offset for "
                        f"partition {tp.topic}-{tp.partition}"
                        + (" to shift" if args.shift_by is not None else "")
                    )
                offset = om.offset + (args.shift_by or 0)
            new[tp] = min(max(offset, low), high)  # Kafka clamps into the log's range
        if args.execute:
            admin.alter_consumer_group_offsets(
                group, {tp: OffsetAndMetadata(o) for tp, o in new.items()}
            )
        rows = [["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]]
        rows += [[group, tp.topic, str(tp.partition), str(o)] for tp, o in new.items()]
        print("", file=out)
        _table(rows, out)
    return 0


# --- delete ------------------------------------------------------------------------------


def _delete(admin: Admin, groups: list[str], out: TextIO, err: TextIO) -> int:
    results = admin.delete_consumer_groups(groups)
    failed = [(g, e) for g, e in results if e is not None]
    ok = [g for g, e in results if e is None]
    if ok:
        names = ", ".join(f"'{g}'" for g in ok)
        print(f"Deletion of requested consumer groups ({names}) was successful.", file=out)
    if failed:
        print("Error: Deletion of some consumer groups failed:", file=err)
        for g, e in failed:
            print(f"* Group '{g}' could not be deleted due to: {e}", file=err)
        return 1
    return 0


def _delete_offsets(
    admin: Admin, args: argparse.Namespace, groups: list[str], out: TextIO, err: TextIO
) -> int:
    if not args.topic:
        raise ValueError("--delete-offsets needs --topic")
    group = groups[0]
    tps = parse_topic_partitions(admin, args.topic)
    results = admin.delete_consumer_group_offsets(group, tps)
    rows = [["TOPIC", "PARTITION", "STATUS"]]
    for tp in sorted(results, key=lambda tp: (tp.topic, tp.partition)):
        e = results[tp]
        rows.append([tp.topic, str(tp.partition), "Successful" if e is None else f"Error: {e}"])
    if all(e is None for e in results.values()):
        topics = ",".join(sorted({tp.topic for tp in tps}))
        print(f"Request succeed for deleting offsets with topic {topics} group {group}", file=out)
        code = 0
    else:
        print("Error: Encounter some partition level error, see the follow output:", file=err)
        code = 1
    print("", file=out)
    _table(rows, out)
    return code
