"""Recovery of one segment: its indexes rebuilt from the `.log`, and the cheap checks
that decide whether a segment recovery did not scan can be trusted.

Kafka's LogSegment.recover and LogSegment.sanityCheck, as functions over the segment's
public surface (`RecoverableSegment`) so that they read without its append and read
paths; LogSegment.recover applies the result (truncating the `.log` and taking the
max timestamp) and LogSegment.sanity_check calls `check_indexes`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple, Protocol

from .errors import CorruptIndexError, CorruptRecordError
from .offset_index import OffsetIndex
from .record_batch import BatchHeader
from .time_index import TimeIndex

BatchVisitor = Callable[[memoryview, int, BatchHeader], None]


class RecoverableSegment(Protocol):
    """What recovery reads of a segment (LogSegment has it)."""

    base_offset: int
    log_path: Path
    size: int
    index_interval_bytes: int

    @property
    def offset_index(self) -> OffsetIndex: ...
    @property
    def time_index(self) -> TimeIndex: ...
    def header_at(self, position: int) -> BatchHeader | None: ...
    def can_hold_offset(self, offset: int) -> bool: ...
    def scan(
        self, start_position: int = 0, validate: bool = True
    ) -> Iterator[tuple[int, memoryview, int, BatchHeader]]: ...


class RecoveredIndexes(NamedTuple):
    """What a recovery scan found: the `.log` is valid up to `valid_bytes`."""

    valid_bytes: int
    last_indexed: int  # the position of the last offset index entry written
    max_timestamp: int
    offset_of_max_timestamp: int


def rebuild_indexes(
    segment: RecoverableSegment, on_batch: BatchVisitor | None = None
) -> RecoveredIndexes:
    """Reset both indexes and index the `.log`'s batches again, up to the first invalid
    one (a bad CRC or length, offsets not after the previous batch's or beyond what the
    segment can hold). `on_batch` sees every valid batch. Truncates nothing."""
    offset_index, time_index = segment.offset_index, segment.time_index
    offset_index.reset()
    time_index.reset()
    valid_bytes = 0
    last_indexed = 0
    max_ts = -1
    offset_of_max = segment.base_offset
    previous_last = segment.base_offset - 1
    try:
        for position, view, p, header in segment.scan(0, validate=True):
            if header.base_offset <= previous_last or not segment.can_hold_offset(
                header.last_offset
            ):
                raise CorruptRecordError(
                    f"batch at position {position} of {segment.log_path} has offsets "
                    f"{header.base_offset}..{header.last_offset}, not after {previous_last}"
                )
            if header.max_timestamp > max_ts:
                max_ts, offset_of_max = header.max_timestamp, header.last_offset
            # Recovery indexes per batch where appends indexed per chunk, so it can
            # need more entries than the segment had: past a full index, it
            # leaves the rest sparser instead of failing (Kafka fails here).
            if (
                valid_bytes - last_indexed > segment.index_interval_bytes
                and not offset_index.is_full()
                and not time_index.is_full()
            ):
                offset_index.append(header.last_offset, valid_bytes)
                time_index.maybe_append(max_ts, offset_of_max)
                last_indexed = valid_bytes
            valid_bytes += header.size
            previous_last = header.last_offset
            if on_batch is not None:
                on_batch(view, p, header)
    except CorruptRecordError:
        pass  # everything from the first bad byte on is the caller's to truncate
    return RecoveredIndexes(valid_bytes, last_indexed, max_ts, offset_of_max)


def check_indexes(segment: RecoverableSegment) -> None:
    """Cheap checks on a segment that recovery did not scan; raises CorruptIndexError."""
    offset_index = segment.offset_index
    offset_index.sanity_check()
    segment.time_index.sanity_check()
    last_offset, last_position = offset_index.last_entry()
    if last_position > segment.size or (
        offset_index.entries > 1 and offset_index.entry(offset_index.entries - 2)[0] >= last_offset
    ):
        raise CorruptIndexError(
            f"index {offset_index.path} does not match {segment.log_path}: last entry "
            f"({last_offset}, {last_position}), log size {segment.size}"
        )
    if offset_index.entries and segment.header_at(last_position) is None:
        raise CorruptIndexError(
            f"index {offset_index.path} points at position {last_position}, "
            f"where {segment.log_path} holds no batch"
        )
