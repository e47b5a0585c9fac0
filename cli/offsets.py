"""`seglog get-offsets`: kafka-get-offsets for seglog. Prints `topic:partition:offset`
per partition; the offset is empty when no record has a timestamp at or after
the one asked for (as kafka-get-offsets prints it)."""

from __future__ import annotations

import argparse
import re
import sys
from typing import TextIO

from .arguments import open_admin

_NAMED_TIMES = {"latest": -1, "earliest": -2, "max-timestamp": -3}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--topic",
        help="a topic name, or a regular expression matching whole names (default: all topics)",
    )
    p.add_argument("--partitions", help="comma-separated partition ids (default: all)")
    p.add_argument(
        "--time",
        default="latest",
        help="earliest, latest, max-timestamp, -1, -2, -3, or a timestamp in ms "
        "(the first offset whose timestamp is at or after it); default latest",
    )


def parse_time(value: str) -> int:
    named = _NAMED_TIMES.get(value.strip().lower())
    if named is not None:
        return named
    try:
        t = int(value)
    except ValueError:
        raise ValueError(
            f"--time {value!r} is not earliest, latest, max-timestamp or a timestamp in ms"
        ) from None
    if t < -3:
        raise ValueError(f"--time {t} is negative (only -1, -2 and -3 have a meaning)")
    return t


def parse_partitions(value: str | None) -> list[int] | None:
    if value is None:
        return None
    out = []
    for item in value.split(","):
        item = item.strip()
        if not item.isdigit():
            raise ValueError(f"--partitions {value!r}: {item!r} is not a partition id")
        out.append(int(item))
    return sorted(set(out))


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from seglog.client.cluster import TopicPartition
    from seglog.client.errors import error_class

    out = out or sys.stdout
    timestamp = parse_time(args.time)
    wanted = parse_partitions(args.partitions)
    with open_admin(args) as admin:
        names = admin.list_topics()
        if args.topic is None:
            topics = names
        elif args.topic in names:
            topics = [args.topic]
        else:
            try:
                pattern = re.compile(args.topic)
            except re.error:
                pattern = None
            topics = [n for n in names if pattern is not None and pattern.fullmatch(n)]
            if not topics:
                raise error_class("UNKNOWN_TOPIC_OR_PARTITION")(
                    f"topic {args.topic!r} does not exist"
                )
        specs: dict[TopicPartition, int] = {}
        for t in admin.describe_topics(topics):
            ids = [p.partition for p in t.partitions]
            if wanted is not None:
                missing = [p for p in wanted if p not in ids] if len(topics) == 1 else []
                if missing:
                    raise error_class("UNKNOWN_TOPIC_OR_PARTITION")(
                        f"topic {t.name!r} has no partition {missing[0]} "
                        f"(it has {len(ids)} partitions)"
                    )
                ids = [p for p in ids if p in wanted]
            specs.update((TopicPartition(t.name, p), timestamp) for p in ids)
        results = admin.list_offsets(specs)
    for tp in sorted(results, key=lambda tp: (tp.topic, tp.partition)):
        offset = results[tp].offset
        print(f"{tp.topic}:{tp.partition}:{offset if offset >= 0 else ''}", file=out)
    return 0
