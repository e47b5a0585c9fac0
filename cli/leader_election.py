"""`seglog leader-election`, as kafka-leader-election (KIP-460):

    seglog leader-election --bootstrap-server H:P --election-type PREFERRED|UNCLEAN
        (--topic T --partition N | --all-topic-partitions | --path-to-json-file F)

The JSON file is kafka-leader-election's: {"partitions": [{"topic": "t", "partition": 0}]}.
Output, as Kafka's tool:

    Successfully completed leader election (PREFERRED) for partitions t-0, t-1
    Valid replica already elected for partitions t-2
    Error completing leader election (PREFERRED) for partition: t-3: PREFERRED_LEADER_NOT_AVAILABLE

and exit status 1 when any partition could not be elected.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TextIO

from .arguments import open_admin


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--election-type",
        required=True,
        type=str.upper,
        choices=("PREFERRED", "UNCLEAN"),
        help="PREFERRED or UNCLEAN",
    )
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", help="the topic (with --partition)")
    which.add_argument(
        "--all-topic-partitions",
        action="store_true",
        help="every partition that needs an election",
    )
    which.add_argument(
        "--path-to-json-file", type=Path, help='{"partitions": [{"topic": ..., "partition": ...}]}'
    )
    p.add_argument("--partition", type=int, help="the partition (with --topic)")


def _wanted(args: argparse.Namespace) -> list[tuple[str, int]] | None:
    if args.all_topic_partitions:
        if args.partition is not None:
            raise ValueError("--partition can't be used with --all-topic-partitions")
        return None
    if args.topic is not None:
        if args.partition is None:
            raise ValueError("--topic needs --partition")
        return [(args.topic, args.partition)]
    if args.partition is not None:
        raise ValueError("--partition needs --topic")
    try:
        doc = json.loads(args.path_to_json_file.read_text())
        entries = doc["partitions"]
        wanted = [(str(e["topic"]), int(e["partition"])) for e in entries]
    except OSError as e:
        raise ValueError(f"cannot read {args.path_to_json_file}: {e}") from None
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(
            f"{args.path_to_json_file} is not a partitions file "
            f'({{"partitions": [{{"topic": ..., "partition": ...}}]}}): {e!r}'
        ) from None
    if len(set(wanted)) != len(wanted):
        raise ValueError(f"{args.path_to_json_file} lists a partition twice")
    return wanted


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from seglog.client.cluster import TopicPartition

    out = out or sys.stdout
    wanted = _wanted(args)
    election = args.election_type
    with open_admin(args) as admin:
        results = admin.perform_leader_election(
            election.lower(),
            None if wanted is None else [TopicPartition(t, p) for t, p in wanted],
        )

    def names(outcome: str) -> list[str]:
        return [f"{tp.topic}-{tp.partition}" for tp, o in sorted(results.items()) if o == outcome]

    elected, noop = names("NONE"), names("ELECTION_NOT_NEEDED")
    failed = sorted(
        (tp, o) for tp, o in results.items() if o not in ("NONE", "ELECTION_NOT_NEEDED")
    )
    if elected:
        print(
            f"Successfully completed leader election ({election}) for partitions "
            + ", ".join(elected),
            file=out,
        )
    if noop:
        print("Valid replica already elected for partitions " + ", ".join(noop), file=out)
    for tp, outcome in failed:
        print(
            f"Error completing leader election ({election}) for partition: "
            f"{tp.topic}-{tp.partition}: {outcome}",
            file=out,
        )
    if not results:
        print(f"No partitions needed a leader election ({election})", file=out)
    if failed:
        raise ValueError(f"{len(failed)} replica(s) could not be elected")
    return 0
