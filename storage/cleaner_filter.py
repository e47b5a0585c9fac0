"""What the cleaner keeps of each batch: Kafka's compaction rules, without I/O.

For a data batch, a record is kept unless

* its key is null (a compacted topic never accepts one; older data may hold it),
* a later record with the same key lies in the offset map (it is superseded),
* it is a tombstone (null value) whose batch's delete horizon has passed, or
* it belongs to an aborted transaction (Kafka's: the aborted transactions come from
  the segments' `.txnindex` files, see `AbortedTxns`).

Records at or above the map's end offset are always kept: the map says nothing
about them. A batch holding a kept tombstone gets a delete horizon (now +
delete.retention.ms) the first time the cleaner passes it; the tombstone goes in
the first pass after that time.

A COMMIT marker may go once no record of its transaction is left and its own delete
horizon (set the same way) has passed. An ABORT marker is kept as it is by the pass
that drops its transaction's data, and its `.txnindex` entry goes into the cleaned
segment's index (Kafka's CleanedTransactionMetadata: "retain the marker until all
batches from the transaction have been removed"); a later pass, finding no data of
it, gives it a horizon and then drops it, without the entry. A batch whose records all go
is kept empty when it holds the last data of a producer that is still active
(its sequence and epoch must survive for idempotence), and when the caller asks
(the last batch of a cleaned group, which bounds the group's `.swap` for
recovery); otherwise it is dropped.
"""

from __future__ import annotations

import bisect
import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from .record_batch import BatchHeader, ControlType
from .txn_index import AbortedTxn

# A log holding more aborted transactions than this is not cleaned (the list is
# held in memory for a pass).
MAX_ABORTED_TXNS = 1_000_000


class CleanerError(Exception):
    """A pass that cannot proceed (the log is left as it was)."""


class LastRecord(NamedTuple):
    """An active producer's last data offset (None after a marker only) and epoch."""

    last_data_offset: int | None
    producer_epoch: int


class Action(enum.Enum):
    DROP = "drop"  # nothing of the batch is written
    COPY = "copy"  # the batch's bytes as they are
    REWRITE = "rewrite"  # a new batch with the kept records (maybe a new horizon)
    EMPTY = "empty"  # a header-only batch (offsets and producer fields kept)


class Verdict(NamedTuple):
    action: Action
    kept: tuple[int, ...]  # indexes of the records kept (REWRITE)
    delete_horizon_ms: int | None  # horizon to stamp on a REWRITE, None to keep the batch's
    horizon_ms: int | None  # when a tombstone/marker kept in this batch can next go
    # A kept ABORT marker whose transaction's data this pass dropped: its `.txnindex`
    # entry, for the cleaned segment's index.
    aborted_txn: AbortedTxn | None = None


class RecordView(NamedTuple):
    """What the rules need of one record."""

    offset: int
    has_key: bool
    tombstone: bool
    mapped_offset: int  # the offset map's last offset for the key, -1 if absent


@dataclass
class AbortedTxns:
    """The aborted transactions of a log, from its segments' `.txnindex` entries (Kafka's
    collectAbortedTransactions): per producer, (first offset, marker offset) ranges and
    the entries themselves."""

    ranges: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    entries: dict[int, list[AbortedTxn]] = field(default_factory=dict)
    count: int = 0

    @classmethod
    def of(cls, txns: Iterable[AbortedTxn]) -> AbortedTxns:
        out = cls()
        for txn in sorted(txns, key=lambda t: (t.producer_id, t.first_offset)):
            out.add(txn)
        return out

    def add(self, txn: AbortedTxn) -> None:
        """Add an entry (a producer's in offset order)."""
        if self.count >= MAX_ABORTED_TXNS:
            raise CleanerError(f"more than {MAX_ABORTED_TXNS} aborted transactions in one log")
        self.ranges.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))
        self.entries.setdefault(txn.producer_id, []).append(txn)
        self.count += 1

    def find(self, producer_id: int, offset: int) -> AbortedTxn | None:
        """The aborted transaction of the producer that holds `offset`, if any."""
        spans = self.ranges.get(producer_id)
        if not spans:
            return None
        i = bisect.bisect_right(spans, (offset, 2**63)) - 1
        if i >= 0 and spans[i][0] <= offset <= spans[i][1]:
            return self.entries[producer_id][i]
        return None

    def is_aborted(self, producer_id: int, offset: int) -> bool:
        return self.find(producer_id, offset) is not None


@dataclass(kw_only=True, eq=False)
class BatchFilter:
    """The rules for one pass: the map's end, the clock, the producers that must keep
    their last batch, and the aborted transactions. Feed batches in offset order."""

    map_end: int
    now_ms: int
    delete_retention_ms: int
    last_records: Mapping[int, LastRecord]
    aborted: AbortedTxns
    # Producer id -> whether its current transaction kept a record this pass.
    _txn_kept: dict[int, bool] = field(default_factory=dict, init=False)
    # Producer id -> its aborted transaction whose data this pass dropped (until its marker).
    _aborted_dropped: dict[int, AbortedTxn] = field(default_factory=dict, init=False)

    def _is_last_of_producer(self, h: BatchHeader) -> bool:
        last = self.last_records.get(h.producer_id)
        if last is None:
            return False
        if last.last_data_offset is not None and last.last_data_offset >= 0:
            return h.last_offset == last.last_data_offset
        return h.is_control and h.producer_epoch == last.producer_epoch

    def _horizon_passed(self, h: BatchHeader) -> bool:
        return h.has_delete_horizon and h.base_timestamp <= self.now_ms

    def decide(
        self,
        h: BatchHeader,
        records: Sequence[RecordView],
        *,
        control_type: int | None = None,
        retain_empty: bool = False,
    ) -> Verdict:
        keep_empty = retain_empty or (h.has_producer_id and self._is_last_of_producer(h))
        if h.is_control:
            return self._decide_marker(h, records, control_type, keep_empty)
        if h.is_transactional and h.has_producer_id:
            txn = self.aborted.find(h.producer_id, h.base_offset)
            if txn is not None:
                self._aborted_dropped[h.producer_id] = txn
                kept: list[int] = []
                return self._verdict(h, records, kept, False, keep_empty)
        kept = []
        tombstone_kept = False
        for i, r in enumerate(records):
            if not r.has_key:
                continue
            if r.offset >= self.map_end:
                kept.append(i)
                continue
            if r.mapped_offset > r.offset:
                continue  # superseded by a later record with the same key
            if r.tombstone:
                if self._horizon_passed(h):
                    continue
                tombstone_kept = True
            kept.append(i)
        if h.is_transactional and h.has_producer_id and kept:
            self._txn_kept[h.producer_id] = True
        elif h.is_transactional and h.has_producer_id:
            self._txn_kept.setdefault(h.producer_id, False)
        return self._verdict(h, records, kept, tombstone_kept, keep_empty)

    def _decide_marker(
        self,
        h: BatchHeader,
        records: Sequence[RecordView],
        control_type: int | None,
        keep_empty: bool,
    ) -> Verdict:
        is_end_marker = control_type in (ControlType.COMMIT, ControlType.ABORT)
        if not is_end_marker or not h.has_producer_id or not records:
            # Other control records (and emptied markers) stay as they are.
            if records or keep_empty:
                return Verdict(Action.COPY, tuple(range(len(records))), None, None)
            return Verdict(Action.DROP, (), None, None)
        dropped = self._aborted_dropped.pop(h.producer_id, None)
        if control_type == ControlType.ABORT and dropped is not None:
            # Kept as it is while this pass drops the data; its entry goes on.
            return Verdict(Action.COPY, (0,), None, None, dropped)
        txn_kept = self._txn_kept.pop(h.producer_id, False)
        if txn_kept:
            return Verdict(Action.COPY, (0,), None, None)  # its records still need it
        if self._horizon_passed(h):
            return self._verdict(h, records, [], False, keep_empty)
        return self._verdict(h, records, [0], True, keep_empty)

    def _verdict(
        self,
        h: BatchHeader,
        records: Sequence[RecordView],
        kept: list[int],
        needs_horizon: bool,
        keep_empty: bool,
    ) -> Verdict:
        if not kept:
            if keep_empty:
                if h.records_count == 0:
                    return Verdict(Action.COPY, (), None, None)
                return Verdict(Action.EMPTY, (), None, None)
            return Verdict(Action.DROP, (), None, None)
        horizon: int | None = None
        stamp: int | None = None
        if needs_horizon:
            if h.has_delete_horizon:
                horizon = h.base_timestamp
            else:
                horizon = stamp = self.now_ms + self.delete_retention_ms
        if len(kept) == len(records) and stamp is None:
            return Verdict(Action.COPY, tuple(kept), None, horizon)
        return Verdict(Action.REWRITE, tuple(kept), stamp, horizon)


def mappable(h: BatchHeader, aborted: AbortedTxns) -> bool:
    """Whether a batch's records go into the offset map (not markers, not aborted data)."""
    if h.is_control:
        return False
    return not (
        h.is_transactional
        and h.has_producer_id
        and aborted.is_aborted(h.producer_id, h.base_offset)
    )


__all__ = [
    "MAX_ABORTED_TXNS",
    "AbortedTxns",
    "Action",
    "BatchFilter",
    "CleanerError",
    "LastRecord",
    "RecordView",
    "Verdict",
    "mappable",
]
