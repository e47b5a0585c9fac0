"""A log segment held in memory: what `storage/segment.py`'s `LogSegment` answers, for
the lookups, appends, rolls and truncations production's `Log` makes of its segments,
with its batches in a list instead of a `.log` file and no indexes (a batch is found by
bisecting the batches' last offsets, where a file segment looks in its offset index); its
aborted-transaction index is storage/txn_index.py's, without a file.

The simulators' in-memory replica log (memory_log.py) is production's `Log` over a
`LocalLog` of these. Nothing is written anywhere: flushing, renaming and deleting only
mark the segment, and a zero-copy read (`fd`) is refused.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterator
from pathlib import Path

from seglog.storage.errors import StorageError
from seglog.storage.log_config import LogConfig
from seglog.storage.record_batch import (
    BATCH_SCAN,
    LOG_OVERHEAD,
    MAX_TIMESTAMP_OFFSET,
    BatchHeader,
    check_batch,
)
from seglog.storage.segment import BatchPosition, LogSegment, SegmentRead
from seglog.storage.txn_index import TransactionIndex

_MAX_TIMESTAMP = struct.Struct(">q")


class MemorySegment(LogSegment):
    # LogSegment's file and index state is never set up: every method Log and LocalLog
    # call on a segment is answered here, from the batch list.
    def __init__(self, base_offset: int, *, roll_jitter_ms: int = 0, now_ms: int = 0) -> None:
        self.base_offset = base_offset
        self.roll_jitter_ms = roll_jitter_ms
        self.created_ms = now_ms
        self.log_path = Path(f"memory:{base_offset}")
        self.on_indexes_loaded = None
        self._batches: list[bytes] = []
        self._positions: list[int] = []  # each batch's byte position in the segment
        self._last_offsets: list[int] = []  # bisected to find the batch holding an offset
        self.size = 0
        self._max_ts = -1
        self._offset_of_max_timestamp = base_offset
        self._rolling_base_timestamp: int | None = None
        self._closed = False
        self.txn_index = TransactionIndex(base_offset, None)

    @staticmethod
    def factory(base_offset: int, config: LogConfig, jitter_ms: int, now_ms: int) -> LogSegment:
        """A storage.local_log.SegmentFactory."""
        return MemorySegment(base_offset, roll_jitter_ms=jitter_ms, now_ms=now_ms)

    def copy_below(self, offset: int) -> MemorySegment:
        """A copy holding the batches wholly below `offset` (what survives a crash)."""
        copy = MemorySegment(
            self.base_offset, roll_jitter_ms=self.roll_jitter_ms, now_ms=self.created_ms
        )
        keep = bisect.bisect_left(self._last_offsets, offset)
        for data in self._batches[:keep]:
            copy._add(data)
        for txn in self.txn_index.entries:
            if txn.last_offset < offset:
                copy.txn_index.append(txn)
        return copy

    def batches_below(self, offset: int) -> list[bytes]:
        """The batches wholly below `offset`."""
        return self._batches[: bisect.bisect_left(self._last_offsets, offset)]

    # --- what a file segment keeps in its indexes -------------------------------------

    @property
    def indexes_loaded(self) -> bool:
        return False  # nothing mapped: nothing for the log to unload

    def unload_indexes(self) -> bool:
        return True

    @property
    def max_timestamp_so_far(self) -> int:
        return self._max_ts

    @property
    def offset_of_max_timestamp(self) -> int:
        return self._offset_of_max_timestamp

    @property
    def largest_timestamp(self) -> int:
        return self._max_ts

    def rolling_base_timestamp(self) -> int | None:
        return self._rolling_base_timestamp

    # --- writing --------------------------------------------------------------------

    def append(
        self,
        largest_offset: int,
        largest_timestamp: int,
        offset_of_max_timestamp: int,
        data: bytes | bytearray | memoryview,
    ) -> int:
        position = self.size
        if not len(data):
            return position
        if not self.can_hold_offset(largest_offset):
            raise StorageError(f"offset {largest_offset} does not fit segment {self.log_path}")
        view = memoryview(data)
        p = 0
        # Bounded: every batch's size is at least its header (checked on append).
        while p < len(view):
            size = BATCH_SCAN.unpack_from(view, p)[1] + LOG_OVERHEAD
            self._add(bytes(view[p : p + size]))
            p += size
        if position == 0:
            self._rolling_base_timestamp = largest_timestamp
        if largest_timestamp > self._max_ts:
            self._max_ts = largest_timestamp
            self._offset_of_max_timestamp = offset_of_max_timestamp
        return position

    def _add(self, batch: bytes) -> None:
        base, _length, _magic, delta = BATCH_SCAN.unpack_from(batch)
        self._positions.append(self.size)
        self._last_offsets.append(base + delta)
        self._batches.append(batch)
        self.size += len(batch)
        max_ts = _MAX_TIMESTAMP.unpack_from(batch, MAX_TIMESTAMP_OFFSET)[0]
        if max_ts > self._max_ts:
            self._max_ts, self._offset_of_max_timestamp = max_ts, base + delta
        if self._rolling_base_timestamp is None:
            self._rolling_base_timestamp = max_ts

    def _indexes_full(self) -> bool:
        return False  # no index to fill up

    def on_becoming_inactive(self) -> None:
        pass

    # --- reading --------------------------------------------------------------------

    @property
    def fd(self) -> int:
        raise StorageError(f"{self.log_path} is in memory: it has no file for a zero-copy read")

    def _extent(
        self, start_offset: int, max_bytes: int, max_offset: int | None, min_one_batch: bool
    ) -> tuple[int, int, int, int] | None:
        """(position, end position, first offset, next offset) of what a read takes:
        whole batches from the one holding `start_offset`, at most `max_bytes` (at
        least one batch when `min_one_batch`), none at or past `max_offset`."""
        i = bisect.bisect_left(self._last_offsets, start_offset)
        if i == len(self._batches):
            return None
        position = self._positions[i]
        first = BATCH_SCAN.unpack_from(self._batches[i])[0]
        if max_offset is not None and first >= max_offset:
            return position, position, first, first
        limit = position + max(max_bytes, len(self._batches[i]) if min_one_batch else 0)
        end, next_offset = position, first
        # Bounded by the batch count.
        while i < len(self._batches):
            batch = self._batches[i]
            if end + len(batch) > limit:
                break
            if max_offset is not None and BATCH_SCAN.unpack_from(batch)[0] >= max_offset:
                break
            end += len(batch)
            next_offset = self._last_offsets[i] + 1
            i += 1
        return position, end, first, next_offset

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> SegmentRead | None:
        extent = self._extent(start_offset, max_bytes, max_offset, min_one_batch)
        if extent is None:
            return None
        position, end, first, next_offset = extent
        i = bisect.bisect_left(self._positions, position)
        j = bisect.bisect_left(self._positions, end)
        return SegmentRead(b"".join(self._batches[i:j]), position, first, next_offset)

    def read_extent(
        self,
        start_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> tuple[int, int, int] | None:
        extent = self._extent(start_offset, max_bytes, max_offset, min_one_batch)
        if extent is None:
            return None
        return extent[0], extent[1] - extent[0], extent[3]

    def translate_offset(self, offset: int, starting_position: int = 0) -> BatchPosition | None:
        i = bisect.bisect_left(self._last_offsets, offset)
        i = max(i, bisect.bisect_left(self._positions, starting_position))
        if i == len(self._batches):
            return None
        return BatchPosition(self._positions[i], BatchHeader.parse(self._batches[i]))

    def scan(
        self, start_position: int = 0, validate: bool = True
    ) -> Iterator[tuple[int, memoryview, int, BatchHeader]]:
        i = bisect.bisect_left(self._positions, start_position)
        # A copy of the list: the log may append or truncate while a scan is open.
        for position, batch in zip(self._positions[i:], self._batches[i:], strict=True):
            view = memoryview(batch)
            header = check_batch(view, 0) if validate else BatchHeader.parse(view, 0)
            yield position, view, 0, header

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> BatchPosition | None:
        i = bisect.bisect_left(self._last_offsets, start_offset)
        for position, batch in zip(self._positions[i:], self._batches[i:], strict=True):
            if _MAX_TIMESTAMP.unpack_from(batch, MAX_TIMESTAMP_OFFSET)[0] >= timestamp:
                return BatchPosition(position, BatchHeader.parse(batch))
        return None

    def read_next_offset(self) -> int:
        return self._last_offsets[-1] + 1 if self._last_offsets else self.base_offset

    # --- truncation and lifecycle ---------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        self.txn_index.truncate_to(offset)
        i = bisect.bisect_left(self._last_offsets, offset)
        if i == len(self._batches):
            return 0
        kept = self._batches[:i]
        removed = self.size - self._positions[i]
        self._batches, self._positions, self._last_offsets = [], [], []
        self.size = 0
        self._max_ts, self._offset_of_max_timestamp = -1, self.base_offset
        self._rolling_base_timestamp = None
        for batch in kept:
            self._add(batch)
        return removed

    def rebuild_indexes(self) -> None:
        pass  # no index to go bad

    def sanity_check(self) -> None:
        pass

    def flush(self) -> None:
        pass  # the simulator's memory log models durability itself (the recovery point)

    def close(self) -> None:
        self._closed = True

    def abandon(self) -> None:
        self._closed = True

    def delete(self) -> None:
        self._closed = True

    def rename_with_suffix(self, suffix: str) -> None:
        self.log_path = Path(str(self.log_path) + suffix)

    def __repr__(self) -> str:
        return f"MemorySegment({self.base_offset}, size={self.size}, batches={len(self._batches)})"
