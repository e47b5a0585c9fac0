"""What a Fetch answer says of transactions, per partition (docs/transactions.md): the
last stable offset, and for an isolation_level 1 (READ_COMMITTED) fetch the aborted
transactions its records overlap, as Kafka's AbortedTransaction (producer id, first
offset). The reading itself is the partition leader's (replication/leader_reads.py)."""

from __future__ import annotations

from typing import Any

from ..partition_requests import FetchResult

READ_COMMITTED = 1


def last_stable_offset(r: FetchResult) -> int:
    """The partition's LSO as read with the records (the HW when the read failed)."""
    return r.last_stable_offset if r.last_stable_offset >= 0 else r.high_watermark


def aborted_transactions(partition_cls: Any, r: FetchResult, isolation_level: int) -> Any:
    """The AbortedTransactions field: None (null) for READ_UNCOMMITTED, as Kafka sends."""
    if isolation_level != READ_COMMITTED:
        return None
    return [
        partition_cls.AbortedTransaction(producer_id=t.producer_id, first_offset=t.first_offset)
        for t in r.aborted_transactions or ()
    ]


def aborted_pairs(r: FetchResult, isolation_level: int) -> list[tuple[int, int]] | None:
    """aborted_transactions as (producer id, first offset) pairs, for the hot codec
    (node/kafka/hot_codec.py): None (null) for READ_UNCOMMITTED."""
    if isolation_level != READ_COMMITTED:
        return None
    return [(t.producer_id, t.first_offset) for t in r.aborted_transactions or ()]
