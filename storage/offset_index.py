"""Kafka's offset index (`N.index`): sparse map from offset to `.log` byte position.

Entry (8 bytes, big-endian): int32 offset relative to the segment's base offset,
int32 position of a batch in the `.log`. An entry (o, p) says the chunk of
batches starting at byte p ends at offset o. Offsets strictly increase.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from .errors import CorruptIndexError
from .mapped_index import (
    INT32_MAX,
    IndexAppendError,
    IndexFullError,
    IndexOffsetOverflowError,
    InvalidOffsetError,
    MappedIndex,
)

__all__ = [
    "IndexAppendError",
    "IndexFullError",
    "IndexOffsetOverflowError",
    "InvalidOffsetError",
    "OffsetIndex",
]

_ENTRY = struct.Struct(">ii")
_REL = struct.Struct(">i")
# (relative + 1, position 0): the entries that sort before it are exactly those
# with relative offset <= target. Unsigned, so INT32_MAX + 1 packs.
_SEARCH_KEY = struct.Struct(">II")


class OffsetIndex(MappedIndex):
    _last_offset: int
    ENTRY_SIZE = 8
    _KEY_DTYPE = ">i4"

    def __init__(
        self, path: Path, base_offset: int, max_index_size: int = 10 * 1024 * 1024
    ) -> None:
        super().__init__(path, base_offset, max_index_size)

    def append(self, offset: int, position: int) -> None:
        """Add (offset, position); offset must exceed the last entry's offset."""
        if self._closed:
            self._require_open()
        n = self._entries
        if n >= self._max_entries:
            raise IndexFullError(f"Attempt to append to a full index {self.path} (size = {n})")
        if n and offset <= self._last_offset:
            raise InvalidOffsetError(
                f"Attempt to append an offset {offset} to position {n} no larger than the "
                f"last offset appended ({self._last_offset}) to {self.path}"
            )
        relative = offset - self.base_offset
        if not 0 <= relative <= INT32_MAX:
            self._relative(offset)  # raises IndexOffsetOverflowError
        if not 0 <= position <= INT32_MAX:
            raise IndexAppendError(
                f"position {position} for offset {offset} does not fit an int32 (index {self.path})"
            )
        assert self._mm is not None  # not full, so the file has room
        self._write_entry(n, _ENTRY.pack(relative, position))
        self._entries = n + 1
        self._last_offset = offset
        self._live = None

    def can_append_offset(self, offset: int) -> bool:
        """Whether `offset` is representable relative to the base offset."""
        return 0 <= offset - self.base_offset <= INT32_MAX

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """Largest entry with offset <= target_offset, else (base_offset, 0)."""
        live = self._live
        if live is None:
            live = self._live_slots()
        relative = target_offset - self.base_offset
        if self._fast and live is not None and relative >= 0:
            # Hot path, inlined: _key_slot's byte search (see mapped_index).
            if relative > INT32_MAX:
                relative = INT32_MAX
            slot = int(live.searchsorted(_SEARCH_KEY.pack(relative + 1, 0))) - 1
        else:
            self._require_open()
            slot = self._key_slot(target_offset)
        if slot < 0:
            return self.base_offset, 0
        relative, position = _ENTRY.unpack_from(self._mapped(), slot << 3)
        return self.base_offset + relative, position

    def fetch_upper_bound_offset(self, start_position: int, fetch_size: int) -> int | None:
        """Offset of the first entry whose position is >= start_position + fetch_size,
        or None; bounds a scan of the transaction index. Kafka's search, verbatim:
        a bound equal to the first entry's position answers the next entry."""
        self._require_open()
        slot = self._kafka_search(start_position + fetch_size, self._position_at, upper=True)
        return None if slot < 0 else self._parse(slot)[0]

    # ------------------------------------------------------------------ hooks

    def _check_entries(self) -> None:
        n = self._entries
        if n == 0:
            return
        last_offset = self.last_entry()[0]
        if last_offset < self.base_offset:
            raise CorruptIndexError(
                f"Corrupt index found, index file ({self.path}) has non-zero size but the last "
                f"offset is {last_offset} which is less than the base offset {self.base_offset}"
            )
        # Beyond Kafka: strictly increasing relative offsets from >= 0 put the last
        # one at >= n-1, so this catches a zero-filled preallocated tail (crash)
        # in O(1) without ever rejecting a file Kafka could have written.
        if last_offset - self.base_offset < n - 1:
            raise CorruptIndexError(
                f"Corrupt index found, index file ({self.path}) has {n} entries but the last "
                f"offset is {last_offset}, so offsets do not strictly increase from base offset "
                f"{self.base_offset} (a zero-filled preallocated tail left by a crash?)"
            )

        if n > 1 and self._mm is not None:
            # Every entry, vectorised: offsets and positions strictly increase.
            columns = np.frombuffer(self._mm, dtype=">i4", count=2 * n).reshape(n, 2)
            for name, column in (("offsets", columns[:, 0]), ("positions", columns[:, 1])):
                if bool(np.any(np.diff(column.astype(np.int64)) <= 0)):
                    raise CorruptIndexError(
                        f"Corrupt index found, index file ({self.path}): {name} do not "
                        f"strictly increase across its {n} entries"
                    )

    def _cache_last_entry(self) -> None:
        n = self._entries
        self._last_offset = self._parse(n - 1)[0] if n else self.base_offset

    def _offset_slot(self, offset: int) -> int:
        return self._key_slot(offset)

    def _relative_offset_at(self, slot: int) -> int:
        relative: int = _REL.unpack_from(self._mapped(), slot * self.ENTRY_SIZE)[0]
        return relative

    def _search_key(self, target: int) -> bytes | None:
        relative = target - self.base_offset
        if relative < 0:
            return None
        return _SEARCH_KEY.pack(min(relative, INT32_MAX) + 1, 0)

    def _key_at(self, slot: int) -> int:
        return self.base_offset + self._relative_offset_at(slot)

    def _position_at(self, slot: int) -> int:
        position: int = _REL.unpack_from(self._mapped(), slot * self.ENTRY_SIZE + 4)[0]
        return position

    def _no_entry(self) -> tuple[int, int]:
        return self.base_offset, 0

    def _parse(self, slot: int) -> tuple[int, int]:
        relative, position = _ENTRY.unpack_from(self._mapped(), slot * self.ENTRY_SIZE)
        return self.base_offset + relative, position
