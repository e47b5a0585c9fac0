"""Writing one group of a cleaning pass into `<base>.log.cleaned` (and its indexes).

Batches come in offset order; they are scanned, their keys looked up in the offset
map a buffer at a time, judged by the `BatchFilter`, and written as they are
(copied), rebuilt with the records kept, or emptied. Output goes to the segment in
pieces of about `index.interval.bytes`, so the rebuilt indexes are as dense as an
appended segment's. The last batch of the group is always written (empty if need
be): it bounds the group for recovery's `.swap` handling.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from .cleaner_filter import Action, BatchFilter, RecordView
from .cleaner_records import (
    Buffer,
    ScannedRecord,
    batch_payload,
    empty_batch,
    rebuild_batch,
    scan_records,
)
from .offset_map import OffsetMap, hash_keys
from .record_batch import BatchHeader, control_record_type
from .segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    file_prefix,
)


@dataclass
class WriteStats:
    records_read: int = 0
    records_kept: int = 0
    batches_emptied: int = 0
    bytes_written: int = 0
    horizon_due_ms: int | None = None  # earliest delete horizon of what was kept


class _Pending(NamedTuple):
    """A batch read and scanned, waiting for its keys' map lookups."""

    view: memoryview
    pos: int
    header: BatchHeader
    control_type: int | None
    records: list[ScannedRecord]
    payload: Buffer


@dataclass
class _Piece:
    """Output batches waiting to be appended as one chunk (one index entry at most)."""

    data: list[bytes] = field(default_factory=list)
    size: int = 0
    last_offset: int = -1
    max_ts: int = -1
    offset_of_max: int = -1

    def add(self, batch: bytes, h: BatchHeader, max_ts: int) -> None:
        self.data.append(batch)
        self.size += len(batch)
        self.last_offset = h.last_offset
        if max_ts > self.max_ts or self.offset_of_max < 0:
            self.max_ts = max(max_ts, self.max_ts)
            self.offset_of_max = h.last_offset


class GroupWriter:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        now_ms: int,
        index_interval_bytes: int,
        max_index_bytes: int,
        offset_map: OffsetMap,
        batch_filter: BatchFilter,
        buffer_bytes: int,
        on_write: Callable[[int], None],
        step: Callable[[str], None],
    ) -> None:
        prefix = directory / file_prefix(base_offset)
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            Path(f"{prefix}{suffix}{CLEANED_SUFFIX}").unlink(missing_ok=True)  # a stale try
        self.segment = LogSegment(
            directory,
            base_offset,
            index_interval_bytes=index_interval_bytes,
            max_index_size=max_index_bytes,
            now_ms=now_ms,
            file_suffix=CLEANED_SUFFIX,
        )
        self.index_interval_bytes = index_interval_bytes
        self.map = offset_map
        self.filter = batch_filter
        self.buffer_bytes = buffer_bytes
        self._on_write = on_write
        self._step = step
        self.stats = WriteStats()
        self._pending: list[_Pending] = []
        self._pending_bytes = 0
        self._piece = _Piece()
        self._wrote = False

    def add(self, view: memoryview, p: int, h: BatchHeader) -> None:
        payload: Buffer = batch_payload(view, p, h) if h.records_count else b""
        records = scan_records(payload, h.records_count, h.base_offset) if h.records_count else []
        ctype = None
        if h.is_control and h.records_count:
            control = control_record_type(view, p, h)
            ctype = None if control is None else control[0]
        self._pending.append(_Pending(view, p, h, ctype, records, payload))
        self._pending_bytes += h.size
        self.stats.records_read += h.records_count
        # Bounded by bytes: pending batches keep their read chunks alive. The last one
        # waits: it may be the group's last batch.
        if self._pending_bytes > self.buffer_bytes:
            last = self._pending.pop()
            self._filter_pending(group_end=False)
            self._pending = [last]
            self._pending_bytes = last.header.size

    def flush(self, *, group_end: bool) -> None:
        """Judge every pending batch; with `group_end` the last one is the group's last."""
        self._filter_pending(group_end=group_end)
        self._pending = []
        self._pending_bytes = 0

    def finish(self) -> LogSegment | None:
        """The `.cleaned` segment, trimmed and fsynced; None (and no file) if empty."""
        self.flush(group_end=True)
        self._append_piece()
        self._step("cleaned_written")
        if not self._wrote:
            self.segment.delete()
            return None
        self.segment.on_becoming_inactive()
        self.segment.flush()
        return self.segment

    def discard(self) -> None:
        self.segment.delete()

    def _filter_pending(self, *, group_end: bool) -> None:
        pending = self._pending
        if not pending:
            return
        keys = [r.key for item in pending for r in item.records if r.key is not None]
        mapped = self.map.get_many(*hash_keys(keys)).tolist() if keys else []
        k = 0
        last_index = len(pending) - 1
        stats = self.stats
        for i, (view, p, h, ctype, records, payload) in enumerate(pending):
            rviews = []
            for r in records:
                if r.key is not None:
                    mo = mapped[k]
                    k += 1
                else:
                    mo = -1
                rviews.append(
                    RecordView(h.base_offset + r.offset_delta, r.key is not None, r.tombstone, mo)
                )
            retain_empty = group_end and i == last_index
            verdict = self.filter.decide(h, rviews, control_type=ctype, retain_empty=retain_empty)
            if verdict.horizon_ms is not None:
                due = stats.horizon_due_ms
                stats.horizon_due_ms = (
                    verdict.horizon_ms if due is None else min(due, verdict.horizon_ms)
                )
            action = verdict.action
            if action is Action.DROP:
                continue
            if verdict.aborted_txn is not None:
                self.segment.txn_index.append(verdict.aborted_txn)
            if action is Action.COPY:
                out = bytes(view[p : p + h.size])
                max_ts = h.max_timestamp
                stats.records_kept += len(verdict.kept)
            elif action is Action.EMPTY:
                out = empty_batch(h)
                max_ts = h.max_timestamp
                stats.batches_emptied += 1
            else:
                kept = [records[j] for j in verdict.kept]
                out = rebuild_batch(h, payload, kept, verdict.delete_horizon_ms)
                max_ts = BatchHeader.parse(out).max_timestamp
                stats.records_kept += len(kept)
            self._piece.add(out, h, max_ts)
            self._wrote = True
            if self._piece.size >= self.index_interval_bytes:
                self._append_piece()

    def _append_piece(self) -> None:
        piece = self._piece
        if not piece.data:
            return
        seg = self.segment
        if seg.offset_index.is_full() or seg.time_index.is_full():
            # A full index stays as it is; the rest of the segment is found by scanning.
            seg.bytes_since_last_index_entry = -(2**62)
        data = b"".join(piece.data)
        first = seg.size == 0
        seg.append(piece.last_offset, piece.max_ts, piece.offset_of_max, data)
        self.stats.bytes_written += len(data)
        self._on_write(len(data))
        if first:
            self._step("cleaned_partial")
        self._piece = _Piece()


__all__ = ["GroupWriter", "WriteStats"]
