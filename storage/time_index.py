"""Kafka's time index (`N.timeindex`): sparse map from max timestamp to offset.

Entry (12 bytes, big-endian): int64 timestamp, int32 offset relative to the
segment's base offset. An entry (T, o) says the largest timestamp up to and
including the batch ending at offset o is T, so every record with a timestamp
> T lies after o. Timestamps strictly increase; offsets never decrease.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import numpy as np

from .errors import CorruptIndexError, KafkaStorageError
from .mapped_index import (
    INT32_MAX,
    INT64_MAX,
    IndexAppendError,
    IndexFullError,
    InvalidOffsetError,
    MappedIndex,
)

__all__ = ["InvalidIndexTimestampError", "TimeIndex"]

NO_TIMESTAMP = -1

_ENTRY = struct.Struct(">qi")
_TS = struct.Struct(">q")
_REL = struct.Struct(">i")
# (timestamp + 1, relative offset 0): the entries that sort before it are exactly
# those with timestamp <= target. Unsigned, so INT64_MAX + 1 packs.
_SEARCH_KEY = struct.Struct(">QI")


class InvalidIndexTimestampError(IndexAppendError):
    """Append of a timestamp below the last entry's timestamp."""


class TimeIndex(MappedIndex):
    _last_timestamp: int
    _last_offset: int
    ENTRY_SIZE = 12
    _KEY_DTYPE = ">i8"

    def __init__(
        self, path: Path, base_offset: int, max_index_size: int = 10 * 1024 * 1024
    ) -> None:
        super().__init__(path, base_offset, max_index_size)

    def is_full(self) -> bool:
        # One slot stays free for the entry appended when the segment rolls/closes.
        return self._entries >= self._max_entries - 1

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> bool:
        """Add (timestamp, offset) if timestamp exceeds the last entry's (an empty
        index acts as if it ended with (-1, base_offset)); returns whether it did.
        skip_full_check lets the roll/close entry use the reserved slot."""
        if self._closed:
            self._require_open()
        n = self._entries
        if not skip_full_check and n >= self._max_entries - 1:
            raise IndexFullError(f"Attempt to append to a full time index {self.path} (size = {n})")
        last_timestamp = self._last_timestamp
        last_offset = self._last_offset
        # An equal offset is fine: roll and close re-offer the last entry.
        if n and offset < last_offset:
            raise InvalidOffsetError(
                f"Attempt to append an offset ({offset}) to slot {n} no larger than the "
                f"last offset appended ({last_offset}) to {self.path}"
            )
        if n and timestamp < last_timestamp:
            raise InvalidIndexTimestampError(
                f"Attempt to append a timestamp ({timestamp}) to slot {n} no larger than "
                f"the last timestamp appended ({last_timestamp}) to {self.path}"
            )
        if timestamp <= last_timestamp:
            return False
        if timestamp > INT64_MAX:
            raise IndexAppendError(
                f"timestamp {timestamp} does not fit an int64 (index {self.path})"
            )
        relative = offset - self.base_offset
        if not 0 <= relative <= INT32_MAX:
            self._relative(offset)  # raises IndexOffsetOverflowError
        if n >= self._max_entries:
            # Even skip_full_check cannot write past the mapped file.
            raise IndexFullError(
                f"Attempt to append to a full time index {self.path} (size = {n}), "
                "reserved slot included"
            )
        assert self._mm is not None  # not full, so the file has room
        self._write_entry(n, _ENTRY.pack(timestamp, relative))
        self._entries = n + 1
        self._last_timestamp = timestamp
        self._last_offset = offset
        self._live = None
        return True

    def lookup(self, target_timestamp: int) -> tuple[int, int]:
        """Largest entry with timestamp <= target_timestamp, else (-1, base_offset)."""
        live = self._live
        if live is None:
            live = self._live_slots()
        if self._fast and live is not None and target_timestamp >= 0:
            # Hot path, inlined: _key_slot's byte search (see mapped_index).
            if target_timestamp > INT64_MAX:
                target_timestamp = INT64_MAX
            slot = int(live.searchsorted(_SEARCH_KEY.pack(target_timestamp + 1, 0))) - 1
        else:
            self._require_open()
            slot = self._key_slot(target_timestamp)
        if slot < 0:
            return NO_TIMESTAMP, self.base_offset
        timestamp, relative = _ENTRY.unpack_from(self._mapped(), slot * 12)
        return timestamp, self.base_offset + relative

    # ------------------------------------------------------------------ hooks

    def _check_entries(self) -> None:
        n = self._entries
        if n == 0:
            return
        first_timestamp = self._timestamp_at(0)
        last_timestamp, last_offset = self.last_entry()
        if last_timestamp < first_timestamp:
            raise CorruptIndexError(
                f"Corrupt time index found, time index file ({self.path}) has non-zero size "
                f"but the last timestamp is {last_timestamp} which is less than the first "
                f"timestamp {first_timestamp}"
            )
        if last_offset < self.base_offset:
            raise CorruptIndexError(
                f"Corrupt time index found, time index file ({self.path}) has non-zero size "
                f"but the last offset is {last_offset} which is less than the first offset "
                f"{self.base_offset}"
            )
        # Beyond Kafka: timestamps strictly increase, so two or more entries with
        # last == first mean a zero-filled preallocated file left by a crash.
        if n > 1 and last_timestamp == first_timestamp:
            raise CorruptIndexError(
                f"Corrupt time index found, time index file ({self.path}) has {n} entries but "
                f"the last timestamp equals the first ({first_timestamp}); timestamps must "
                "strictly increase (a zero-filled preallocated tail left by a crash?)"
            )

        if n > 1 and self._mm is not None:
            # Every entry, vectorised: timestamps strictly increase, offsets never fall.
            rows = np.frombuffer(self._mm, dtype=[("ts", ">i8"), ("off", ">i4")], count=n)
            if bool(np.any(np.diff(rows["ts"].astype(np.int64)) <= 0)) or bool(
                np.any(np.diff(rows["off"].astype(np.int64)) < 0)
            ):
                raise CorruptIndexError(
                    f"Corrupt time index found, time index file ({self.path}): timestamps do "
                    f"not strictly increase or offsets fall across its {n} entries"
                )

    def _cache_last_entry(self) -> None:
        n = self._entries
        if n:
            self._last_timestamp, self._last_offset = self._parse(n - 1)
        else:
            self._last_timestamp, self._last_offset = NO_TIMESTAMP, self.base_offset

    def _offset_slot(self, offset: int) -> int:
        # Truncation searches the offset (value) column, which may repeat, so use
        # Kafka's own search for probe-identical results.
        return self._kafka_search(offset, self._offset_at, upper=False)

    def _relative_offset_at(self, slot: int) -> int:
        relative: int = _REL.unpack_from(self._mapped(), slot * self.ENTRY_SIZE + 8)[0]
        return relative

    def _search_key(self, target: int) -> bytes | None:
        if target < 0:
            return None
        return _SEARCH_KEY.pack(min(target, INT64_MAX) + 1, 0)

    def _key_at(self, slot: int) -> int:
        return self._timestamp_at(slot)

    def _timestamp_at(self, slot: int) -> int:
        timestamp: int = _TS.unpack_from(self._mapped(), slot * self.ENTRY_SIZE)[0]
        return timestamp

    def _offset_at(self, slot: int) -> int:
        return self.base_offset + self._relative_offset_at(slot)

    def _no_entry(self) -> tuple[int, int]:
        return NO_TIMESTAMP, self.base_offset

    def _parse(self, slot: int) -> tuple[int, int]:
        timestamp, relative = _ENTRY.unpack_from(self._mapped(), slot * self.ENTRY_SIZE)
        return timestamp, self.base_offset + relative


def last_entry_at_rest(path: Path, base_offset: int) -> tuple[int, int] | None:
    """The last entry of an unmapped time index, read from its file (at rest the file is
    exactly its entries), so a segment answers retention and ListOffsets without mapping
    it; None when there is no file."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise KafkaStorageError(f"cannot open index {path}: {e}") from e
    try:
        size = os.fstat(fd).st_size
        if size % TimeIndex.ENTRY_SIZE:
            raise CorruptIndexError(
                f"Index file {path} is corrupt, found {size} bytes which is not "
                f"positive or not a multiple of {TimeIndex.ENTRY_SIZE}"
            )
        if size == 0:
            return -1, base_offset
        raw = os.pread(fd, TimeIndex.ENTRY_SIZE, size - TimeIndex.ENTRY_SIZE)
    except OSError as e:
        raise KafkaStorageError(f"cannot read index {path}: {e}") from e
    finally:
        os.close(fd)
    timestamp, relative = _ENTRY.unpack(raw)
    return timestamp, base_offset + relative
