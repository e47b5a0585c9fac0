"""A log's transactions (the share of Kafka's UnifiedLog that serves them): COMMIT/ABORT
control batches (EndTransactionMarker), the `.txnindex` entry each ABORT marker adds to
its segment (storage/txn_index.py), the last stable offset, and the aborted transactions
a read_committed Fetch returns.

`Log` (storage/log.py) calls these with its segments (a LocalLog) and its producer
state: a leader appends a marker with `marker_batch` + `record_completed`; a follower
and every producer-state replay (recovery, truncation) go through `replay`, so they
build the same producer state and the same `.txnindex` entries as the leader.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from .local_log import LocalLog
from .producer_state import ControlMarker, ProducerStateManager
from .producer_state_entry import CompletedTxn
from .record_batch import BatchHeader, ControlType, NewRecord, build_batch, control_record_type
from .txn_index import AbortedTxn

# EndTransactionMarker: key = (int16 version 0, int16 control type), value = (int16
# version 0, int32 coordinator epoch) — Kafka's ControlRecordType and EndTransactionMarker.
_CONTROL_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")
CONTROL_RECORD_KEY_VERSION = 0
END_TXN_MARKER_VERSION = 0


class TxnMarkerAppend(NamedTuple):
    """A coordinator's marker for one partition (a WriteTxnMarkers entry)."""

    producer_id: int
    producer_epoch: int
    marker: ControlMarker


def marker_batch(
    producer_id: int,
    producer_epoch: int,
    marker: ControlMarker,
    *,
    base_offset: int,
    leader_epoch: int,
    now_ms: int,
) -> bytes:
    """A COMMIT/ABORT control batch as Kafka's MemoryRecords.withEndTransactionMarker
    writes it: transactional and control, no sequence, one record."""
    ctype = ControlType.COMMIT if marker.kind == "COMMIT" else ControlType.ABORT
    record = NewRecord(
        key=_CONTROL_KEY.pack(CONTROL_RECORD_KEY_VERSION, int(ctype)),
        value=_MARKER_VALUE.pack(END_TXN_MARKER_VERSION, marker.coordinator_epoch),
        timestamp=now_ms,
    )
    return build_batch(
        [record],
        base_offset=base_offset,
        partition_leader_epoch=leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        now_ms=now_ms,
    )


def marker_of(view: memoryview, pos: int, h: BatchHeader) -> ControlMarker | None:
    """The end-transaction marker of a control batch (None for data and other controls)."""
    if not h.is_control:
        return None
    control = control_record_type(view, pos, h)
    if control is None or control[0] not in (ControlType.ABORT, ControlType.COMMIT):
        return None
    if control[0] == ControlType.COMMIT:
        return ControlMarker("COMMIT", control[1])
    return ControlMarker("ABORT", control[1])


def with_positions(
    data: bytes | bytearray | memoryview, headers: list[BatchHeader]
) -> Iterator[tuple[BatchHeader, memoryview, int]]:
    """(header, buffer, position) of the batches of `data` that carry a producer id."""
    view = memoryview(data)
    pos = 0
    for h in headers:
        if h.has_producer_id:
            yield h, view, pos
        pos += h.size


def record_completed(
    local: LocalLog, producer_state: ProducerStateManager, completed: list[CompletedTxn]
) -> None:
    """Kafka's UnifiedLog after an append: each transaction a marker closed gets its
    `.txnindex` entry (ABORT only) in the segment holding the marker, then stays
    unstable until the high watermark passes the marker."""
    for txn in completed:
        if txn.is_aborted:
            lso = producer_state.last_stable_offset(txn)
            seg = local.segments[local.segment_index_for(txn.last_offset)]
            seg.txn_index.append(
                AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso)
            )
        producer_state.complete_txn(txn)


def replay(
    local: LocalLog,
    producer_state: ProducerStateManager,
    batches: Iterator[tuple[BatchHeader, memoryview, int]],
) -> None:
    """Apply batches already in the log to the producer state, unvalidated (a follower's
    append, recovery, truncation), writing the `.txnindex` entries their markers add."""
    for h, view, p in batches:
        if h.has_producer_id:
            completed = producer_state.replay_batch(h, marker_of(view, p, h))
            if completed:
                record_completed(local, producer_state, completed)


def truncate_indexes(local: LocalLog, offset: int) -> None:
    """Remove every `.txnindex` entry whose marker lies at or after `offset` (a replay
    from `offset` writes them again)."""
    for seg in local.segments[local.segment_index_for(offset) :]:
        seg.txn_index.truncate_to(offset)


def last_stable_offset(producer_state: ProducerStateManager, high_watermark: int) -> int:
    """Kafka's LSO: the first offset of the oldest transaction still open or whose marker
    is not yet replicated, or the high watermark when that is lower (or there is none)."""
    first = producer_state.first_unstable_offset()
    return first if first is not None and first < high_watermark else high_watermark


def collect_aborted(local: LocalLog, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
    """The aborted transactions overlapping [fetch_offset, upper_bound), from the
    `.txnindex` of the segment holding `fetch_offset` on, until an entry proves that no
    later one can (Kafka's LocalLog.collectAbortedTransactions)."""
    found: list[AbortedTxn] = []
    for seg in local.segments[local.segment_index_for(fetch_offset) :]:
        result = seg.txn_index.collect(fetch_offset, upper_bound)
        found.extend(result.aborted)
        if result.complete:
            break
    return found
