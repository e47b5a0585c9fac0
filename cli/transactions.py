"""`seglog transactions`, as kafka-transactions.sh (KIP-664):

    seglog transactions --bootstrap-server H:P list
    seglog transactions --bootstrap-server H:P describe --transactional-id ID
    seglog transactions --bootstrap-server H:P describe-producers --topic T --partition N
    seglog transactions --bootstrap-server H:P find-hanging (--broker-id N | --topic T
        [--partition N]) [--max-transaction-timeout MINUTES]
    seglog transactions --bootstrap-server H:P abort --topic T --partition N
        (--start-offset O | --producer-id P --producer-epoch E --coordinator-epoch C)

Tab-separated tables with Kafka's headers. A hanging transaction is Kafka's: open on
a partition for longer than the maximum transaction timeout (15 minutes by default)
while its coordinator does not have it open there (its producer was never added to a
transaction there, or the coordinator ended it without this partition's marker); no
coordinator will end it, so `abort` writes the ABORT marker at the partition's leader.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, TextIO

from .arguments import open_admin

if TYPE_CHECKING:
    from seglog.client.admin import Admin
    from seglog.client.admin_transactions import ProducerState
    from seglog.client.cluster import TopicPartition

DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN = 15  # Kafka's transaction.max.timeout.ms, in minutes


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="verb", required=True, metavar="VERB")
    sub.add_parser("list", help="list the transactions of every node's coordinator")
    d = sub.add_parser("describe", help="describe a transaction (its coordinator's state)")
    d.add_argument("--transactional-id", required=True, help="the transactional id")
    dp = sub.add_parser("describe-producers", help="the active producers of a partition")
    dp.add_argument("--topic", required=True)
    dp.add_argument("--partition", required=True, type=int)
    f = sub.add_parser("find-hanging", help="find hanging transactions")
    f.add_argument("--broker-id", type=int, help="the partitions this broker leads")
    f.add_argument("--topic", help="the partitions of this topic")
    f.add_argument("--partition", type=int, help="only this partition (with --topic)")
    f.add_argument(
        "--max-transaction-timeout",
        type=int,
        default=DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN,
        metavar="MINUTES",
        help="transactions open longer than this may hang (default %(default)s)",
    )
    a = sub.add_parser("abort", help="abort a hanging transaction on one partition")
    a.add_argument("--topic", required=True)
    a.add_argument("--partition", required=True, type=int)
    a.add_argument("--start-offset", type=int, help="the transaction's first offset there")
    a.add_argument("--producer-id", type=int)
    a.add_argument("--producer-epoch", type=int)
    a.add_argument("--coordinator-epoch", type=int)


def _table(out: TextIO, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    print("\t".join(header), file=out)
    for row in rows:
        print("\t".join(str(v) for v in row), file=out)


def _or_none(value: int) -> object:
    return value if value >= 0 else "None"


def _list(admin: Admin, out: TextIO) -> None:
    rows = [
        (t.transactional_id, t.coordinator_id, t.producer_id, t.state)
        for t in admin.list_transactions()
    ]
    _table(out, ("TransactionalId", "Coordinator", "ProducerId", "TransactionState"), rows)


def _describe(admin: Admin, tid: str, out: TextIO) -> None:
    (d,) = admin.describe_transactions([tid])
    now = int(time.time() * 1000)
    start = d.transaction_start_time_ms
    open_ = d.state == "Ongoing" and start >= 0
    _table(
        out,
        ("CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
         "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
         "TopicPartitions"),
        [(d.coordinator_id, d.transactional_id, d.producer_id, d.producer_epoch, d.state,
          d.transaction_timeout_ms, start if open_ else "None",
          now - start if open_ else "None",
          ",".join(f"{tp.topic}-{tp.partition}" for tp in d.partitions))],
    )  # fmt: skip


def _describe_producers(admin: Admin, tp: TopicPartition, out: TextIO) -> None:
    producers = admin.describe_producers([tp])[tp]
    _table(
        out,
        ("ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
         "LastTimestamp", "CurrentTransactionStartOffset"),
        [(p.producer_id, p.producer_epoch, p.coordinator_epoch, p.last_sequence,
          p.last_timestamp, _or_none(p.current_transaction_start_offset))
         for p in producers],
    )  # fmt: skip


def _partitions(admin: Admin, args: argparse.Namespace) -> list[TopicPartition]:
    from seglog.client.cluster import TopicPartition

    if (args.broker_id is None) == (args.topic is None):
        raise ValueError("find-hanging needs --broker-id or --topic (one of them)")
    if args.partition is not None and args.topic is None:
        raise ValueError("--partition needs --topic")
    if args.topic is not None:
        described = admin.describe_topics([args.topic])[0]
        ids = [p.partition for p in described.partitions]
        if args.partition is not None:
            if args.partition not in ids:
                raise ValueError(f"topic {args.topic!r} has no partition {args.partition}")
            ids = [args.partition]
        return [TopicPartition(args.topic, i) for i in ids]
    cluster = admin.describe_cluster()
    if args.broker_id not in {b.node_id for b in cluster.brokers}:
        raise ValueError(f"--broker-id {args.broker_id}: no such broker in the cluster")
    return [
        TopicPartition(t.name, p.partition)
        for t in admin.describe_topics()
        for p in t.partitions
        if p.leader == args.broker_id
    ]


def _find_hanging(admin: Admin, args: argparse.Namespace, out: TextIO) -> int:
    if args.max_transaction_timeout < 0:
        raise ValueError(
            f"--max-transaction-timeout must be >= 0, got {args.max_transaction_timeout}"
        )
    now = int(time.time() * 1000)
    limit_ms = args.max_transaction_timeout * 60_000
    open_long: list[tuple[TopicPartition, ProducerState]] = [
        (tp, p)
        for tp, producers in admin.describe_producers(_partitions(admin, args)).items()
        for p in producers
        if p.current_transaction_start_offset >= 0 and now - p.last_timestamp >= limit_ms
    ]
    # Which of them their coordinator has open on that partition: those are not hanging.
    by_producer = {}
    if open_long:
        listed = admin.list_transactions(producer_ids={p.producer_id for _tp, p in open_long})
        described = admin.describe_transactions([t.transactional_id for t in listed])
        by_producer = {d.producer_id: d for d in described}
    hanging = []
    for tp, p in open_long:
        d = by_producer.get(p.producer_id)
        if (
            d is None
            or d.state != "Ongoing"
            or tp not in d.partitions
            or (d.producer_epoch != p.producer_epoch)
        ):
            hanging.append((tp, p))
    _table(
        out,
        ("Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
         "StartOffset", "LastTimestamp", "Duration(min)"),
        [(tp.topic, tp.partition, p.producer_id, p.producer_epoch, p.coordinator_epoch,
          p.current_transaction_start_offset, p.last_timestamp,
          (now - p.last_timestamp) // 60_000) for tp, p in hanging],
    )  # fmt: skip
    return 0


def _abort(admin: Admin, args: argparse.Namespace, out: TextIO) -> None:
    from seglog.client.cluster import TopicPartition

    tp = TopicPartition(args.topic, args.partition)
    by_producer = (args.producer_id, args.producer_epoch, args.coordinator_epoch)
    if args.start_offset is not None:
        if any(v is not None for v in by_producer):
            raise ValueError(
                "--start-offset can't be used with --producer-id/--producer-epoch/"
                "--coordinator-epoch"
            )
        open_there = [
            p for p in admin.describe_producers([tp])[tp]
            if p.current_transaction_start_offset == args.start_offset
        ]  # fmt: skip
        if not open_there:
            raise ValueError(
                f"no open transaction starts at offset {args.start_offset} on "
                f"{tp.topic}-{tp.partition} (see describe-producers)"
            )
        p = open_there[0]
        pid, epoch, coordinator_epoch = p.producer_id, p.producer_epoch, max(p.coordinator_epoch, 0)
    elif all(v is not None for v in by_producer):
        pid, epoch, coordinator_epoch = by_producer  # type: ignore[assignment]
    else:
        raise ValueError(
            "abort needs --start-offset, or all of --producer-id, --producer-epoch and "
            "--coordinator-epoch"
        )
    admin.abort_transaction(tp, pid, epoch, coordinator_epoch)
    print(
        f"Aborted the transaction of producer {pid} (epoch {epoch}) on {tp.topic}-{tp.partition}",
        file=out,
    )


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    from seglog.client.cluster import TopicPartition

    out = out or sys.stdout
    with open_admin(args) as admin:
        if args.verb == "list":
            _list(admin, out)
        elif args.verb == "describe":
            _describe(admin, args.transactional_id, out)
        elif args.verb == "describe-producers":
            _describe_producers(admin, TopicPartition(args.topic, args.partition), out)
        elif args.verb == "find-hanging":
            return _find_hanging(admin, args, out)
        else:
            _abort(admin, args, out)
    return 0
