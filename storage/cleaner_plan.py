"""The cleaner's planning, without I/O: which log to clean, what range, in what groups.

A log is seen through a `LogView` (its segments' offsets, sizes and timestamps,
its start offset, high watermark, first undecided transaction offset, the
cleaner's checkpoint and its compaction settings), taken under the partition
lock; time is an argument.

* The cleanable range of a log is [first dirty offset, first uncleanable offset).
  Nothing in the active segment, at or above the high watermark or the first
  undecided transaction, or in a segment younger than min.compaction.lag.ms
  (by its largest timestamp) is ever cleanable; the range ends at a segment
  boundary.
* Its dirty ratio is dirty bytes / (clean + dirty bytes), counted by segment as
  Kafka does. A log is due when the ratio reaches min.cleanable.dirty.ratio, when
  its oldest dirty segment is older than max.compaction.lag.ms, or when a
  tombstone's delete horizon has passed. The dirtiest due log goes first.
* Segments are cleaned in groups whose sizes, index sizes and offset spans fit
  one segment.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass

MAX_RELATIVE_OFFSET = 2**31 - 1
OFFSET_INDEX_ENTRY = 8
TIME_INDEX_ENTRY = 12


@dataclass(frozen=True, slots=True)
class SegmentView:
    base_offset: int
    next_offset: int  # the next segment's base offset (the LEO for the active one)
    size: int
    index_bytes: int  # offset index size (entries * 8)
    time_index_bytes: int  # time index size (entries * 12)
    largest_timestamp: int  # max record timestamp, else the file's mtime
    first_timestamp: int  # the first batch's max timestamp, -1 if unknown or empty


@dataclass(frozen=True, slots=True)
class LogView:
    segments: tuple[SegmentView, ...]  # in offset order; the last one is active
    log_start_offset: int
    high_watermark: int
    first_undecided_offset: int | None
    checkpoint: int | None  # cleaner-offset-checkpoint, None if the log has none
    compact: bool
    min_cleanable_dirty_ratio: float
    min_compaction_lag_ms: int
    max_compaction_lag_ms: int
    horizon_due_ms: int | None = None  # earliest delete horizon of a kept tombstone/marker


@dataclass(frozen=True, slots=True)
class CleanableRange:
    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    dirty_bytes: int
    forced: bool  # max.compaction.lag.ms passed for the oldest dirty segment
    horizon_due: bool  # a kept tombstone or marker may now go
    oldest_dirty_timestamp: int = -1  # of the oldest dirty segment, -1 if none

    @property
    def ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0

    @property
    def has_dirty(self) -> bool:
        return self.first_uncleanable > self.first_dirty and self.dirty_bytes > 0


def first_dirty_offset(view: LogView) -> int:
    """The checkpoint, unless it lies outside the log (then the log start: clean it all)."""
    cp = view.checkpoint
    leo = view.segments[-1].next_offset if view.segments else view.log_start_offset
    if cp is None or cp < view.log_start_offset or cp > leo:
        return view.log_start_offset
    return cp


def first_uncleanable_offset(view: LogView, now_ms: int) -> int:
    """The base offset of the first segment that may not be cleaned."""
    bound = view.high_watermark
    if view.first_undecided_offset is not None:
        bound = min(bound, view.first_undecided_offset)
    segments = view.segments
    for i, seg in enumerate(segments):
        if i == len(segments) - 1:
            return seg.base_offset  # the active segment
        if seg.next_offset > bound:
            return seg.base_offset
        if view.min_compaction_lag_ms > 0 and seg.largest_timestamp > (
            now_ms - view.min_compaction_lag_ms
        ):
            return seg.base_offset
    return view.log_start_offset  # no segment at all


def cleanable_range(view: LogView, now_ms: int) -> CleanableRange:
    first_dirty = first_dirty_offset(view)
    uncleanable = max(first_dirty, first_uncleanable_offset(view, now_ms))
    clean = dirty = 0
    oldest_dirty_ts: int | None = None
    for seg in view.segments:
        if seg.next_offset <= view.log_start_offset:
            continue
        if seg.base_offset < first_dirty:
            clean += seg.size
        # Segments overlapping [first dirty, first uncleanable) count as dirty.
        if seg.next_offset > first_dirty and seg.base_offset < uncleanable:
            dirty += seg.size
            if oldest_dirty_ts is None and seg.size > 0:
                oldest_dirty_ts = (
                    seg.first_timestamp if seg.first_timestamp >= 0 else seg.largest_timestamp
                )
    forced = (
        oldest_dirty_ts is not None
        and dirty > 0
        and now_ms - oldest_dirty_ts > view.max_compaction_lag_ms
    )
    horizon_due = view.horizon_due_ms is not None and view.horizon_due_ms <= now_ms
    return CleanableRange(
        first_dirty,
        uncleanable,
        clean,
        dirty,
        forced,
        horizon_due,
        oldest_dirty_ts if oldest_dirty_ts is not None and dirty > 0 else -1,
    )


def compaction_delay_ms(view: LogView, rng: CleanableRange, now_ms: int) -> int:
    """How long past max.compaction.lag.ms the oldest dirty segment is (Kafka's
    maxCompactionDelay: the clean it owes is that late); 0 when none is overdue."""
    if rng.oldest_dirty_timestamp < 0:
        return 0
    return max(0, now_ms - view.max_compaction_lag_ms - rng.oldest_dirty_timestamp)


def is_due(view: LogView, rng: CleanableRange) -> bool:
    if not view.compact:
        return False
    if rng.has_dirty and (rng.forced or rng.ratio >= view.min_cleanable_dirty_ratio):
        return True
    return rng.horizon_due and rng.first_dirty > view.log_start_offset


def select_filthiest(
    views: Iterable[tuple[Hashable, LogView]], now_ms: int
) -> tuple[Hashable, CleanableRange] | None:
    """The due log with the highest dirty ratio (forced logs count as due whatever
    their ratio; ties go to the first seen)."""
    best: tuple[Hashable, CleanableRange] | None = None
    for key, view in views:
        if not view.compact or not view.segments:
            continue
        rng = cleanable_range(view, now_ms)
        if not is_due(view, rng):
            continue
        if best is None or rng.ratio > best[1].ratio:
            best = (key, rng)
    return best


def group_segments(
    segments: Sequence[SegmentView], max_bytes: int, max_index_bytes: int
) -> list[list[SegmentView]]:
    """Consecutive segments in groups that fit one segment (Kafka's groupSegmentsBySize):
    total log bytes <= max_bytes, each index's total <= max_index_bytes, and every
    offset relative to the group's base within an int32. A group always holds at
    least one segment."""
    groups: list[list[SegmentView]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        size = segments[i].size
        index = segments[i].index_bytes
        time_index = segments[i].time_index_bytes
        i += 1
        while i < len(segments):
            nxt = segments[i]
            if (
                size + nxt.size > max_bytes
                or index + nxt.index_bytes > max_index_bytes
                or time_index + nxt.time_index_bytes > max_index_bytes
                or nxt.next_offset - 1 - group[0].base_offset > MAX_RELATIVE_OFFSET
            ):
                break
            group.append(nxt)
            size += nxt.size
            index += nxt.index_bytes
            time_index += nxt.time_index_bytes
            i += 1
        groups.append(group)
    return groups


def idle_roll_due(
    *,
    active_size: int,
    first_timestamp: int,
    created_ms: int,
    now_ms: int,
    max_segment_ms: int,
    roll_jitter_ms: int,
    high_watermark: int,
    log_end_offset: int,
) -> bool:
    """Whether a quiet compacted log's active segment should roll now, so the cleaner
    can reach its records: it holds data, all of it below the high watermark, and it
    is older than segment.ms (or max.compaction.lag.ms) by the rule appends use."""
    if active_size == 0 or high_watermark < log_end_offset:
        return False
    since = first_timestamp if first_timestamp >= 0 else created_ms
    return now_ms - since > max_segment_ms - roll_jitter_ms


__all__ = [
    "CleanableRange",
    "LogView",
    "SegmentView",
    "cleanable_range",
    "first_dirty_offset",
    "first_uncleanable_offset",
    "group_segments",
    "idle_roll_due",
    "is_due",
    "select_filthiest",
]
