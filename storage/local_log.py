"""A log's segments (Kafka's LocalLog): the ordered segment list, rolling, the one
locate step every lookup shares (both read paths, offset translation), truncation,
retention's segment deletion and flushing.

The log start offset, high watermark, leader-epoch cache and producer state are
`Log`'s (storage/log.py), opening and recovery storage/log_loader.py's. Where the
segments live is the segment factory's choice: files in the partition directory
(`file_segments`), or memory (the simulators' logs), with `directory` None.

Not thread-safe: the node serialises calls per partition.
"""

from __future__ import annotations

import bisect
import random
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from .errors import CorruptIndexError, StorageError
from .flush_job import FlushJob
from .log_config import LogConfig
from .record_batch import BatchHeader, Record, decode_records
from .segment import (
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    file_prefix,
)

T = TypeVar("T")

# Inactive segments of one log whose indexes stay mapped (the ones read lately): a
# mapped index holds a file descriptor (storage/segment.py), so not every segment's.
MAX_MAPPED_INACTIVE = 4

# Whether retention deletes a segment, given the one after it (None: the active one).
SegmentPredicate = Callable[[LogSegment, LogSegment | None], bool]
# A new segment: (base offset, the log's config, roll jitter in ms, now in ms).
SegmentFactory = Callable[[int, LogConfig, int, int], LogSegment]


def file_segments(directory: Path) -> SegmentFactory:
    """Segments as `N.log`, `N.index` and `N.timeindex` files in `directory`."""

    def new_segment(base_offset: int, config: LogConfig, jitter_ms: int, now_ms: int) -> LogSegment:
        return LogSegment(
            directory,
            base_offset,
            index_interval_bytes=config.index_interval_bytes,
            max_index_size=config.segment_index_bytes,
            roll_jitter_ms=jitter_ms,
            now_ms=now_ms,
        )

    return new_segment


def parse_partition_dir(name: str) -> tuple[str, int]:
    """`<topic>-<partition>`; topics may contain '-', so split on the last one."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise StorageError(f"{name!r} is not a partition directory name (<topic>-<partition>)")
    return topic, int(partition)


@dataclass(slots=True)
class PendingDeletion:
    segment: LogSegment
    snapshot: Path | None
    due_ms: int


class LocalLog:
    def __init__(
        self,
        directory: Path | None,
        name: str,
        config: LogConfig,
        new_segment: SegmentFactory,
        rng: random.Random,
    ) -> None:
        self.directory = directory  # None: the segments are held in memory
        self.name = name
        self.config = config
        self._segment_factory = new_segment
        self._rng = rng
        self.segments: list[LogSegment] = []
        self.base_offsets: list[int] = []
        # Inactive segments whose indexes are mapped, least recently mapped first, and
        # the segments that mapped theirs since the last look (unload_idle_indexes).
        self._mapped: OrderedDict[LogSegment, None] = OrderedDict()
        self.recently_mapped: deque[LogSegment] = deque()
        self.log_end_offset = 0
        self.recovery_point = 0
        # A roll's flush of the finished segments, deferred (see flush_pending), and the
        # producer snapshots its rolls wrote without fsync (the next flush job's).
        self.pending_flush: int | None = None
        self.unsynced_snapshots: list[Path] = []
        # The owning log's leader epoch cache's deferred write, if one is owed (set by
        # Log): each flush job runs it before its segments.
        self.take_epoch_checkpoint: Callable[[], Callable[[], None] | None] = lambda: None
        # Counts truncations, so a FlushJob finishing after one is ignored.
        self.truncations = 0
        self.unflushed_messages = 0
        self.last_flush_ms = 0
        self.pending_deletions: list[PendingDeletion] = []
        # Told the seconds each successful flush's fsyncs took (a node's metrics).
        self.flush_observer: Callable[[float], None] | None = None

    # --- the segment list -------------------------------------------------------------

    @property
    def active(self) -> LogSegment:
        return self.segments[-1]

    def new_segment(self, base_offset: int, t: int) -> LogSegment:
        config = self.config
        return self._segment_factory(
            base_offset, config, config.random_segment_jitter(self._rng), t
        )

    def add_segment(self, seg: LogSegment) -> None:
        assert not self.base_offsets or seg.base_offset > self.base_offsets[-1], (
            "segments must be added in offset order"
        )
        self.segments.append(seg)
        self.base_offsets.append(seg.base_offset)
        seg.on_indexes_loaded = self.recently_mapped.append
        if seg.indexes_loaded:
            self.recently_mapped.append(seg)

    def segment_index_for(self, offset: int) -> int:
        return max(0, bisect.bisect_right(self.base_offsets, offset) - 1)

    def unload_idle_indexes(self) -> None:
        """Keep the indexes of at most MAX_MAPPED_INACTIVE inactive segments mapped (the
        most recently mapped ones; the active segment's always): a mapped index holds a
        file descriptor (storage/segment.py). Under the partition lock, as every call
        that maps an index of an inactive segment is."""
        recent, mapped = self.recently_mapped, self._mapped
        # Bounded: appends come only from segments of this log mapping their indexes.
        while recent:
            seg = recent.popleft()
            mapped[seg] = None
            mapped.move_to_end(seg)
        # The active segment stays in `mapped` (it becomes inactive at the next roll)
        # but is never unloaded.
        active = self.segments[-1] if self.segments else None
        limit = MAX_MAPPED_INACTIVE + (1 if active in mapped else 0)
        if len(mapped) <= limit:
            return
        for seg in list(mapped):
            if len(mapped) <= limit:
                break
            if seg is active:
                continue
            if not seg.indexes_loaded or seg.closed or seg.unload_indexes():
                del mapped[seg]

    def resize_active_indexes(self) -> None:
        """The active segment's indexes take segment.index.bytes (they are trimmed to
        their entries whenever a segment is checked or rebuilt)."""
        active = self.segments[-1]
        active.offset_index.resize(self.config.segment_index_bytes)
        active.time_index.resize(self.config.segment_index_bytes)

    # --- rolling --------------------------------------------------------------------

    def replace_empty_active(self, base: int, t: int) -> LogSegment:
        old = self.segments.pop()
        self.base_offsets.pop()
        old.delete()
        seg = self.new_segment(base, t)
        self.add_segment(seg)
        return seg

    def roll(self, new_base: int, t: int) -> LogSegment | None:
        """Close the active segment and start one at `new_base`; None (nothing done)
        when the active segment is already an empty one there."""
        active = self.segments[-1]
        if active.base_offset == new_base and active.size == 0:
            return None
        active.on_becoming_inactive()
        if self.directory is not None:
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                stale = self.directory / f"{file_prefix(new_base)}{suffix}"
                stale.unlink(missing_ok=True)
        seg = self.new_segment(new_base, t)
        self.add_segment(seg)
        self.unload_idle_indexes()  # a leader that is never read from rolls on and on
        return seg

    # --- locating -------------------------------------------------------------------

    def locate(
        self, offset: int, op: Callable[[LogSegment], T | None]
    ) -> tuple[LogSegment, T] | None:
        """The first segment, from the one whose base offset is at or below `offset`,
        for which `op` (a segment lookup: a read, an extent, a translation) finds
        something, with what it found; None when none does. An index that proves bad
        is rebuilt from its `.log` once and the lookup retried."""
        try:
            segments = self.segments
            i = bisect.bisect_right(self.base_offsets, offset) - 1
            if i < 0:
                i = 0
            # Bounded by the segment count: each pass moves to the next segment.
            while i < len(segments):
                seg = segments[i]
                try:
                    found = op(seg)
                except CorruptIndexError:
                    found = self.rebuild_index_and_retry(seg, op)
                if found is not None:
                    return seg, found
                i += 1
            return None
        finally:
            if self.recently_mapped:
                self.unload_idle_indexes()

    def with_valid_index(self, seg: LogSegment, op: Callable[[LogSegment], T]) -> T:
        """Run a lookup; if the segment's index proves bad, rebuild it once and retry."""
        try:
            return op(seg)
        except CorruptIndexError:
            return self.rebuild_index_and_retry(seg, op)

    def rebuild_index_and_retry(self, seg: LogSegment, op: Callable[[LogSegment], T]) -> T:
        seg.rebuild_indexes()
        if seg is self.segments[-1]:
            self.resize_active_indexes()
        return op(seg)

    def batches_between(
        self, start: int, end: int
    ) -> Iterator[tuple[BatchHeader, memoryview, int]]:
        """(header, chunk, position in chunk) of every batch holding offsets in
        [start, end), in order."""
        if start >= end:
            return
        for seg in self.segments[self.segment_index_for(start) :]:
            if seg.base_offset >= end:
                break
            position = seg.translate_offset(start)
            if position is None:
                continue
            for _pos, view, p, h in seg.scan(position.position, validate=False):
                if h.base_offset >= end:
                    break
                if h.last_offset >= start:
                    yield h, view, p
            if self.recently_mapped:
                self.unload_idle_indexes()  # a replay of many segments maps them one by one

    def find_by_timestamp(self, timestamp: int, start: int) -> tuple[Record, int] | None:
        """The first record at or after `start` with timestamp >= `timestamp`, and its
        batch's partition leader epoch."""
        try:
            for seg in self.segments:
                if seg.largest_timestamp < timestamp:
                    continue
                found = self.with_valid_index(
                    seg, lambda s: s.find_offset_by_timestamp(timestamp, start)
                )
                if found is None:
                    continue
                # The first batch whose max timestamp qualifies may still hold no record
                # that does (the log start can cut into it): keep scanning the segment.
                for _pos, view, p, header in seg.scan(found.position, validate=False):
                    if header.max_timestamp < timestamp or header.last_offset < start:
                        continue
                    for record in decode_records(view, p, header):
                        if record.timestamp >= timestamp and record.offset >= start:
                            return record, header.partition_leader_epoch
            return None
        finally:
            if self.recently_mapped:
                self.unload_idle_indexes()

    # --- truncation -----------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove everything at or after `offset` (an offset inside a batch takes the
        whole batch); returns the new log end offset. `offset` lies in the segments."""
        self.truncations += 1
        while len(self.segments) > 1 and self.segments[-1].base_offset > offset:
            self.segments.pop().delete()
            self.base_offsets.pop()
        active = self.segments[-1]
        active.truncate_to(offset)
        # An offset inside a batch takes the whole batch: the LEO is where the data
        # ends, so a follower fetches that batch again rather than leave a hole.
        offset = min(offset, active.read_next_offset())
        self.log_end_offset = offset
        self.recovery_point = min(self.recovery_point, offset)
        return offset

    def truncate_fully(self, offset: int, t: int) -> None:
        """Delete every segment and start an empty one at `offset`."""
        self.pending_flush = None  # every segment it would fsync is deleted
        self.truncations += 1
        for seg in self.segments:
            seg.delete()
        self.segments.clear()
        self.base_offsets.clear()
        self.add_segment(self.new_segment(offset, t))
        self.log_end_offset = offset
        self.recovery_point = offset

    # --- retention and the cleaner's swap ---------------------------------------------

    def deletable_prefix(
        self, predicate: SegmentPredicate, high_watermark: int
    ) -> list[LogSegment]:
        """The leading segments `predicate` accepts, none holding data at or above the
        high watermark and never an empty active segment."""
        victims: list[LogSegment] = []
        segments = self.segments
        for i, seg in enumerate(segments):
            nxt = segments[i + 1] if i + 1 < len(segments) else None
            upper = nxt.base_offset if nxt is not None else self.log_end_offset
            if high_watermark < upper:
                break  # nothing at or above the high watermark is ever deleted
            if nxt is None and seg.size == 0:
                break
            if not predicate(seg, nxt):
                break
            victims.append(seg)
        return victims

    def retention_breaches(self, t: int) -> Iterator[SegmentPredicate]:
        """retention.bytes, then retention.ms, as deletable_prefix's predicates; each
        is made once the one before was applied (the size left counts)."""
        config = self.config
        if not config.delete:
            return
        if config.retention_bytes >= 0:
            excess = sum(s.size for s in self.segments) - config.retention_bytes
            if excess >= 0:
                budget = [excess]

                def size_breach(seg: LogSegment, _nxt: LogSegment | None) -> bool:
                    if budget[0] - seg.size >= 0:
                        budget[0] -= seg.size
                        return True
                    return False

                yield size_breach
        if config.retention_ms >= 0:
            limit = config.retention_ms
            yield lambda seg, _nxt: t - seg.largest_timestamp > limit

    def remove_segments(self, victims: list[LogSegment]) -> None:
        for seg in victims:
            self.segments.remove(seg)
            self.base_offsets.remove(seg.base_offset)

    def replace_segments(self, new: LogSegment, old: list[LogSegment]) -> None:
        """`new` takes the place of the consecutive segments `old` in the list."""
        i = next((k for k, seg in enumerate(self.segments) if seg is old[0]), None)
        if (
            i is None
            or self.segments[i : i + len(old)] != old
            or i + len(old) >= len(self.segments)
        ):
            raise StorageError(f"segments to replace are not in {self.name}")
        if new.base_offset != old[0].base_offset:
            raise StorageError("a cleaned segment keeps the base offset of the first it replaces")
        self.segments[i : i + len(old)] = [new]
        self.base_offsets[i : i + len(old)] = [new.base_offset]

    def schedule_deletion(self, seg: LogSegment, snapshot: Path | None, t: int) -> None:
        """Delete `seg` (and its producer snapshot) after file.delete.delay.ms."""
        self.pending_deletions.append(
            PendingDeletion(seg, snapshot, t + self.config.file_delete_delay_ms)
        )

    def remove_deleted_files(self, t: int, force: bool) -> int:
        self.flush_pending()
        due = [p for p in self.pending_deletions if force or p.due_ms <= t]
        for p in due:
            p.segment.delete()
            if p.snapshot is not None:
                p.snapshot.unlink(missing_ok=True)
            self.pending_deletions.remove(p)
        return len(due)

    @staticmethod
    def mark_deleted(seg: LogSegment) -> None:
        seg.rename_with_suffix(DELETED_SUFFIX)

    # --- flushing -------------------------------------------------------------------
    #
    # A roll does not fsync the finished segment itself: it records the flush as
    # pending (defer_flush), and flush_pending runs it. The node's flush scheduler
    # does that through flush_if_due, and so does every method that reads or moves
    # the recovery point or changes the segment list first. The recovery point only
    # moves once the data below it is fsynced, and it always reads as it would with
    # the flush done inline: only when the fsync happens changes.

    def flush_pending(self) -> None:
        """Run the flush the last roll(s) deferred, if any."""
        target = self.pending_flush
        if target is not None:
            self.pending_flush = None
            self._sync_below(target)

    def defer_flush(self, up_to: int, t: int, snapshot: Path | None = None) -> None:
        """flush(up_to), but the fsyncs and the recovery point wait for flush_pending;
        the flush.messages / flush.ms clocks restart now, as the inline flush did. A
        producer snapshot the roll wrote without fsync goes with the next flush job."""
        if snapshot is not None:
            self.unsynced_snapshots.append(snapshot)  # bounded: one per roll until a flush
        target = min(up_to, self.log_end_offset)
        flushed = self.recovery_point if self.pending_flush is None else self.pending_flush
        if target <= flushed:
            return
        self.pending_flush = target
        self.unflushed_messages = 0
        self.last_flush_ms = t

    def flush(self, up_to: int | None, clock: Callable[[], int], time_ms: int | None) -> None:
        self.flush_pending()
        target = self.log_end_offset if up_to is None else min(up_to, self.log_end_offset)
        if target <= self.recovery_point:
            return
        self._sync_below(target)
        self.unflushed_messages = 0
        self.last_flush_ms = clock() if time_ms is None else time_ms

    def _sync_below(self, target: int) -> None:
        """fsync the segments holding data in [recovery point, target) and the
        directory, then move the recovery point to `target`."""
        job = self._flush_job(target, due_to_flush_ms=False)
        if not job.run():
            assert job.error is not None
            raise job.error
        self.recovery_point = target

    def _flush_job(self, target: int, *, due_to_flush_ms: bool) -> FlushJob:
        segments = []
        for i, seg in enumerate(self.segments):
            nxt = self.base_offsets[i + 1] if i + 1 < len(self.segments) else None
            if seg.base_offset >= target:
                break
            if nxt is None or nxt > self.recovery_point:
                segments.append(seg)
        return FlushJob(
            self.directory,
            segments,
            target,
            self.truncations,
            due_to_flush_ms,
            observer=self.flush_observer,
            snapshots=self._take_unsynced_snapshots(),
            epoch_checkpoint=self.take_epoch_checkpoint(),
        )

    def _take_unsynced_snapshots(self) -> list[Path]:
        snapshots, self.unsynced_snapshots = self.unsynced_snapshots, []
        return snapshots

    def _flush_ms_due(self, t: int) -> bool:
        return (
            self.log_end_offset > max(self.recovery_point, self.pending_flush or 0)
            and t - self.last_flush_ms >= self.config.flush_ms
        )

    def wants_flush(self, t: int) -> bool:
        """Whether begin_flush(t) may have work: read without the partition lock, so the
        scheduler's scan of an idle log takes no lock (a change it misses, it sees at
        its next scan)."""
        return self.pending_flush is not None or self._flush_ms_due(t)

    def begin_flush(self, t: int) -> FlushJob | None:
        target = self.pending_flush
        due = self._flush_ms_due(t)
        if due:
            target = self.log_end_offset
            self.unflushed_messages = 0
            self.last_flush_ms = t
        self.pending_flush = None
        if target is None or target <= self.recovery_point:
            return None
        return self._flush_job(target, due_to_flush_ms=due)

    def end_flush(self, job: FlushJob) -> None:
        if job.truncations != self.truncations:
            return  # its segments may be gone; a later flush covers what is left
        target = min(job.target, self.log_end_offset)
        if job.error is None:
            if target > self.recovery_point:
                self.recovery_point = target
        elif target > self.recovery_point:
            self.pending_flush = max(self.pending_flush or 0, target)

    def flush_if_due(self, t: int) -> bool:
        """flush.ms, and a roll's deferred flush, inline: True if flush.ms was due."""
        job = self.begin_flush(t)
        if job is None:
            return False
        job.run()
        self.end_flush(job)
        if job.error is not None:
            raise job.error
        return job.due_to_flush_ms

    # --- closing --------------------------------------------------------------------

    def close(self) -> None:
        for seg in self.segments:
            seg.close()

    def abandon(self) -> None:
        for seg in self.segments:
            seg.abandon()
        for pending in self.pending_deletions:
            pending.segment.abandon()
        self.pending_flush = None

    def delete(self) -> None:
        """Remove every segment, and the directory with what else it holds."""
        self.pending_flush = None  # every segment it would fsync is deleted
        for seg in self.segments:
            seg.delete()
        self.remove_deleted_files(0, force=True)
        if self.directory is not None:
            for path in self.directory.iterdir():
                path.unlink(missing_ok=True)
            self.directory.rmdir()
