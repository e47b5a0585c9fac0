"""The log cleaner's file work (Kafka's LogCleaner `Cleaner`): a thin shell around
`cleaner_plan` (what to clean), `offset_map` (key -> last offset) and
`cleaner_filter` (what to keep), reading through `cleaner_source` and writing
through `cleaner_writer`.

One pass over a compacted log:

1. Under the partition lock: a view of the log (`log_view`), its cleanable range,
   and what the pass must know of the log then (segments, sizes, truncation
   count, active producers).
   The aborted transactions are read from the segments' `.txnindex` files then
   (Kafka's collectAbortedTransactions).
2. Without the lock: the offset map is filled from the dirty range, batch by batch,
   until it is full or the range ends (`map_end`; a later pass goes on from there).
3. Without the lock, a group of segments at a time: every segment below `map_end`
   is rewritten into `<base>.log.cleaned` (plus indexes), fsynced.
4. Under the lock, if the log still holds those segments and was not truncated:
   the `.cleaned` files are renamed to `.swap` (indexes first, the `.log` last:
   the commit point), the old segments' files to `.deleted`, the `.swap` files to
   their final names, and the segment list is updated; the old files are removed
   after file.delete.delay.ms, like retention's.

A crash before the `.log.swap` exists leaves `.cleaned` files that opening the
log deletes (the old segments are intact); after it, opening the log completes
the swap (`LogLoader._commit_swap`): the segments the `.swap` covers, up to its last
batch's offset, are deleted and the suffix is stripped. The last batch of every
group is kept (empty if need be) so that this range covers the whole group.

Offsets never change. The source segments are read through the cleaner's own file
descriptors, so a concurrent deletion or retention cannot pull them away mid-read;
a truncation or retention meanwhile makes step 4 give up, leaving the log as it was.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .atomic_file import fsync_dir
from .cleaner_filter import (
    AbortedTxns,
    BatchFilter,
    CleanerError,
    LastRecord,
    mappable,
)
from .cleaner_plan import (
    CleanableRange,
    LogView,
    SegmentView,
    cleanable_range,
    group_segments,
    is_due,
)
from .cleaner_records import (
    batch_payload,
    scan_keys,
)
from .cleaner_source import SourceSegment
from .cleaner_writer import GroupWriter, WriteStats
from .disk_and_clock import plain_monotonic_s
from .log import Log
from .offset_map import OffsetMap, hash_keys
from .segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    SWAP_SUFFIX,
    LogSegment,
)

DEFAULT_DEDUPE_BUFFER_SIZE = 128 * 1024 * 1024
DEFAULT_IO_BUFFER_SIZE = 512 * 1024
# Keys are hashed and looked up this many at a time.
MAP_FLUSH_KEYS = 16_384

StepHook = Callable[[str], None]
Throttle = Callable[[int], object]


class CleanerAborted(CleanerError):
    """The pass was asked to stop (partition deleted, node shutting down)."""


@dataclass(frozen=True)
class CleanerConfig:
    dedupe_buffer_size: int = DEFAULT_DEDUPE_BUFFER_SIZE  # per cleaner thread
    io_buffer_size: int = DEFAULT_IO_BUFFER_SIZE
    io_buffer_load_factor: float = 0.9


@dataclass
class CleanResult:
    """What one pass did (Kafka's CleanerStats, in part)."""

    first_dirty: int
    map_end: int  # the next pass's first dirty offset (the new checkpoint)
    first_uncleanable: int
    swapped: bool = True  # False: the log changed under the pass, nothing was replaced
    map_keys: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    batches_emptied: int = 0
    segments_cleaned: int = 0
    groups: int = 0
    horizon_due_ms: int | None = None  # earliest delete horizon of what was kept
    elapsed_s: float = 0.0
    dirty_ratio: float = 0.0
    truncations: int = 0  # the log's truncation count the pass started from


def log_view(log: Log, checkpoint: int | None, horizon_due_ms: int | None = None) -> LogView:
    """The planner's view of `log`; take it under the partition lock."""
    segs = log.segments
    views = []
    for i, seg in enumerate(segs):
        nxt = segs[i + 1].base_offset if i + 1 < len(segs) else log.log_end_offset
        first_ts = seg.rolling_base_timestamp()
        entries = seg.index_entries()  # without mapping every segment's indexes
        views.append(
            SegmentView(
                base_offset=seg.base_offset,
                next_offset=nxt,
                size=seg.size,
                index_bytes=entries[0] * 8,
                time_index_bytes=entries[1] * 12,
                largest_timestamp=seg.largest_timestamp,
                first_timestamp=first_ts if first_ts is not None else -1,
            )
        )
    config = log.config
    return LogView(
        segments=tuple(views),
        log_start_offset=log.log_start_offset,
        high_watermark=log.high_watermark,
        first_undecided_offset=log.producer_state.first_undecided_offset(),
        checkpoint=checkpoint,
        compact=config.compact,
        min_cleanable_dirty_ratio=config.min_cleanable_dirty_ratio,
        min_compaction_lag_ms=config.min_compaction_lag_ms,
        max_compaction_lag_ms=config.max_compaction_lag_ms,
        horizon_due_ms=horizon_due_ms,
    )


class CleaningJob:
    """One pass over one log; see the module docstring for the steps and the locking."""

    def __init__(
        self,
        log: Log,
        rng: CleanableRange,
        *,
        now_ms: int,
        offset_map: OffsetMap,
        config: CleanerConfig,
        throttle: Throttle | None = None,
        should_abort: Callable[[], bool] | None = None,
        step_hook: StepHook | None = None,
    ) -> None:
        # Under the partition lock: what the pass needs of the log.
        self.directory = log.directory
        self.rng = rng
        self.now_ms = now_ms
        self.map = offset_map
        self.config = config
        self._throttle = throttle
        self._should_abort = should_abort
        self._hook = step_hook
        self.truncations = log.truncation_count
        self.log_start_offset = log.log_start_offset
        self.segment_bytes = log.config.segment_bytes
        self.segment_index_bytes = log.config.segment_index_bytes
        self.index_interval_bytes = log.config.index_interval_bytes
        self.delete_retention_ms = log.config.delete_retention_ms
        view = log_view(log, None)
        self.sources = [
            SourceSegment(seg, seg.log_path, seg.size, sv)
            for seg, sv in zip(log.segments, view.segments, strict=True)
        ]
        self.last_records = {
            pid: LastRecord(
                e.last_data_offset if e.last_data_offset >= 0 else None, e.producer_epoch
            )
            for pid, e in log.producer_state.active_producers.items()
        }
        self.chunk = max(64 * 1024, config.io_buffer_size)  # the read buffer
        self.aborted = AbortedTxns()
        self.map_end = rng.first_dirty
        self.result = CleanResult(rng.first_dirty, rng.first_dirty, rng.first_uncleanable)
        self.result.dirty_ratio = rng.ratio
        self.result.truncations = self.truncations

    # --- reading ----------------------------------------------------------------------

    def _step(self, name: str) -> None:
        if self._hook is not None:
            self._hook(name)

    def _check_abort(self) -> None:
        if self._should_abort is not None and self._should_abort():
            raise CleanerAborted(f"cleaning of {self.directory.name} aborted")

    def _on_read(self, n: int) -> None:
        """Every chunk read: the abort check, the byte count, the throttle."""
        self._check_abort()
        self.result.bytes_read += n
        if self._throttle is not None:
            self._throttle(n)

    # --- step 2: aborted transactions and the offset map -------------------------------

    def collect_aborted_transactions(self) -> None:
        """Under the partition lock: every entry of the segments' `.txnindex` files (an
        index is appended to under the lock; a transaction still open then lies above
        the cleanable range)."""
        self.aborted = AbortedTxns.of(
            txn for src in self.sources for txn in src.segment.txn_index.entries
        )

    def build_offset_map(self) -> None:
        """Map keys from the first dirty offset until the map is full or the range ends;
        `map_end` is the first offset not mapped."""
        m = self.map
        m.clear()
        first_dirty, end = self.rng.first_dirty, self.rng.first_uncleanable
        keys: list[bytes] = []
        offsets: list[int] = []

        def flush() -> None:
            if keys:
                h1, h2 = hash_keys(keys)
                m.put_many(h1, h2, np.asarray(offsets, dtype=np.int64))
                keys.clear()
                offsets.clear()

        self.map_end = end
        for src in self.sources:
            if src.view.next_offset <= first_dirty or src.view.base_offset >= end:
                continue
            # The map pass skips CRCs: the writing pass checks every batch it reads,
            # and a corrupt one fails the pass before anything is swapped in.
            for view, p, h in src.batches(self.chunk, self._on_read, validate=False):
                if h.last_offset < first_dirty:
                    continue
                if h.base_offset >= end:
                    break
                if not mappable(h, self.aborted) or h.records_count == 0:
                    continue
                if m.size + len(keys) + h.records_count > m.max_entries:
                    flush()
                    if m.size + h.records_count > m.max_entries:
                        if m.size == 0:
                            raise CleanerError(
                                f"log.cleaner.dedupe.buffer.size holds {m.max_entries} keys, "
                                f"fewer than the {h.records_count} records of the batch at "
                                f"offset {h.base_offset} of {self.directory.name}"
                            )
                        self.map_end = h.base_offset  # full: the next pass goes on here
                        flush()
                        self.result.map_keys = m.size
                        return
                scan_keys(batch_payload(view, p, h), h.records_count, h.base_offset, keys, offsets)
                if len(keys) >= MAP_FLUSH_KEYS:
                    flush()
        flush()
        self.result.map_keys = m.size

    # --- step 3: writing a group ----------------------------------------------------------

    def groups(self) -> list[list[SourceSegment]]:
        """The segments below the map's end (and not wholly below the log start), grouped."""
        chosen = [
            s
            for s in self.sources[:-1]
            if s.view.base_offset < self.map_end and s.view.next_offset > self.log_start_offset
        ]
        by_base = {s.view.base_offset: s for s in chosen}
        planned = group_segments(
            [s.view for s in chosen], self.segment_bytes, self.segment_index_bytes
        )
        return [[by_base[v.base_offset] for v in g] for g in planned]

    def write_group(
        self, group: list[SourceSegment], batch_filter: BatchFilter
    ) -> LogSegment | None:
        """Rewrite the group into a `.cleaned` segment (fsynced); None if it holds no batch."""
        non_empty = [s for s in group if s.size > 0]
        if not non_empty:
            return None
        writer = GroupWriter(
            self.directory,
            group[0].view.base_offset,
            now_ms=self.now_ms,
            index_interval_bytes=self.index_interval_bytes,
            max_index_bytes=self.segment_index_bytes,
            offset_map=self.map,
            batch_filter=batch_filter,
            buffer_bytes=self.chunk,
            on_write=self._on_write,
            step=self._step,
        )
        try:
            for src in non_empty:
                for view, p, h in src.batches(self.chunk, self._on_read):
                    writer.add(view, p, h)
                writer.flush(group_end=src is non_empty[-1])
            cleaned = writer.finish()
        except Exception:
            writer.discard()  # a crash leaves it instead: opening the log deletes it
            raise
        finally:
            self._merge(writer.stats)
        return cleaned

    def _on_write(self, n: int) -> None:
        self._check_abort()
        if self._throttle is not None:
            self._throttle(n)

    def _merge(self, stats: WriteStats) -> None:
        r = self.result
        r.records_read += stats.records_read
        r.records_kept += stats.records_kept
        r.batches_emptied += stats.batches_emptied
        r.bytes_written += stats.bytes_written
        if stats.horizon_due_ms is not None:
            due = r.horizon_due_ms
            r.horizon_due_ms = (
                stats.horizon_due_ms if due is None else min(due, stats.horizon_due_ms)
            )

    # --- step 4: swapping a group in --------------------------------------------------------

    def still_current(self, log: Log, group: list[SourceSegment]) -> bool:
        if log.truncation_count != self.truncations or log.closed:
            return False
        segs = log.segments
        first = group[0].segment
        for i, seg in enumerate(segs):
            if seg is first:
                window = segs[i : i + len(group)]
                return (
                    len(window) == len(group)
                    and all(a is b.segment for a, b in zip(window, group, strict=True))
                    and i + len(group) < len(segs)
                )
        return False

    def swap_in(self, log: Log, group: list[SourceSegment], cleaned: LogSegment) -> bool:
        """Under the partition lock: replace the group by the cleaned segment, or give up
        (deleting the `.cleaned` files) if the log changed meanwhile."""
        if not self.still_current(log, group):
            cleaned.delete()
            return False
        _rename_segment(cleaned, CLEANED_SUFFIX, SWAP_SUFFIX)
        fsync_dir(self.directory)
        self._step("swap_renamed")
        for i, src in enumerate(group):
            src.segment.rename_with_suffix(DELETED_SUFFIX)
            if i == 0:
                self._step("old_deleting")
        self._step("old_deleted")
        _rename_segment(cleaned, SWAP_SUFFIX, "")
        fsync_dir(self.directory)
        self._step("swapped")
        log.replace_segments(cleaned, [s.segment for s in group], time_ms=self.now_ms)
        self.result.segments_cleaned += len(group)
        self.result.groups += 1
        return True


def _rename_segment(seg: LogSegment, old_suffix: str, new_suffix: str) -> None:
    """Rename a segment's files from one suffix to another: the indexes first and the
    `.log` last, so the `.log`'s rename is the step that counts."""

    def renamed(path: Path) -> Path:
        name = path.name
        if old_suffix:
            assert name.endswith(old_suffix), f"{name} does not end with {old_suffix}"
            name = name[: -len(old_suffix)]
        return path.with_name(name + new_suffix)

    offset_index_path, time_index_path = seg.index_paths
    seg.rename_indexes(renamed(offset_index_path), renamed(time_index_path))
    if seg.txn_index.path is not None:
        seg.txn_index.rename_to(renamed(seg.txn_index.path))
    new_log = renamed(seg.log_path)
    os.rename(seg.log_path, new_log)
    seg.log_path = new_log


def clean_log(
    log: Log,
    *,
    offset_map: OffsetMap,
    now_ms: int,
    checkpoint: int | None = None,
    horizon_due_ms: int | None = None,
    config: CleanerConfig | None = None,
    force: bool = False,
    locked: Callable[[], AbstractContextManager[object]] | None = None,
    throttle: Throttle | None = None,
    should_abort: Callable[[], bool] | None = None,
    step_hook: StepHook | None = None,
) -> CleanResult | None:
    """One cleaning pass, or None if the log is not due (with `force`: has nothing
    cleanable). `locked()` is entered around the steps that need the partition lock."""
    started = plain_monotonic_s()
    lock = locked or contextlib.nullcontext
    with lock():
        if log.closed:
            return None  # deleted (or closed) before the pass began
        view = log_view(log, checkpoint, horizon_due_ms)
        rng = cleanable_range(view, now_ms)
        if not (is_due(view, rng) if not force else view.compact and _anything(view, rng)):
            return None
        job = CleaningJob(
            log,
            rng,
            now_ms=now_ms,
            offset_map=offset_map,
            config=config or CleanerConfig(),
            throttle=throttle,
            should_abort=should_abort,
            step_hook=step_hook,
        )
        job.collect_aborted_transactions()
    job.build_offset_map()
    batch_filter = BatchFilter(
        map_end=job.map_end,
        now_ms=now_ms,
        delete_retention_ms=job.delete_retention_ms,
        last_records=job.last_records,
        aborted=job.aborted,
    )
    result = job.result
    result.map_end = job.map_end
    for group in job.groups():
        cleaned = job.write_group(group, batch_filter)
        if cleaned is None:
            continue
        with lock():
            if not job.swap_in(log, group, cleaned):
                result.swapped = False
                break
    result.elapsed_s = plain_monotonic_s() - started
    return result


def _anything(view: LogView, rng: CleanableRange) -> bool:
    return rng.has_dirty or rng.first_dirty > view.log_start_offset


__all__ = [
    "CleanResult",
    "CleanerAborted",
    "CleanerConfig",
    "CleanerError",
    "CleaningJob",
    "clean_log",
    "log_view",
]
