"""The shared machinery of Kafka's `.index` and `.timeindex` files (AbstractIndex).

An index file is a bare array of fixed-size big-endian entries: no header, no
count, no checksum. The entry count is derived from the file length when a file
is opened, so a file at rest must be trimmed to exactly its valid entries.

Search. `np.searchsorted` converts a non-native-endian array to native order,
i.e. copies the whole index on every call (measured: ~1.4k lookups/s on a full
offset index). Instead the mmap is viewed as an array of opaque `S<entry_size>`
strings: numpy compares those with memcmp, which for big-endian integers is
numeric order as long as the leading (key) column is non-negative. So when the
keys are strictly increasing and non-negative, which every append enforces, a
whole-entry byte search gives exactly Kafka's "largest entry <= target" with no
copy. A file opened from disk is checked once, lazily; if its keys break that
rule (a corrupt file) every search runs Kafka's own binary search, warm section
included, so results still match Kafka probe for probe.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

import numpy as np

from .errors import CorruptIndexError, InvalidConfigError, KafkaStorageError, StorageError

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

# Kafka searches the last 8 KiB of an index first so lookups near the tail stay
# on the same few pages; only the literal (fallback) search needs it.
_WARM_BYTES = 8192


def rename_index_file(old: Path, new: Path) -> None:
    """Rename an index file (any of a segment's three); a missing file is not an error,
    as in Kafka. Another failure raises KafkaStorageError naming both paths."""
    try:
        os.replace(old, new)
    except FileNotFoundError:
        pass
    except OSError as e:
        raise KafkaStorageError(f"Error while renaming index {old} to {new}: {e}") from e


class IndexAppendError(StorageError):
    """An append that would break an index's invariants (a caller bug, or a
    segment that outgrew its index); the file is left unchanged."""


class IndexFullError(IndexAppendError):
    """Append to an index with no free slot; the segment should have rolled."""


class InvalidOffsetError(IndexAppendError):
    """Append of an offset that does not advance past the last entry's offset."""


class IndexOffsetOverflowError(IndexAppendError):
    """An offset whose distance from the base offset does not fit in an int32."""


class MappedIndex:
    """Base of OffsetIndex and TimeIndex: file life cycle, mmap, search, truncation.

    Not thread-safe: the owning segment/log serialises access (a remap or trim
    under a concurrent reader could fault).
    """

    ENTRY_SIZE: ClassVar[int]
    # dtype of the leading (search key) column, used only to validate a loaded file.
    _KEY_DTYPE: ClassVar[str]

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        if not 0 <= base_offset <= INT64_MAX:
            raise ValueError(f"base offset {base_offset} of index {path} is not in [0, 2^63-1]")
        if not self.ENTRY_SIZE <= max_index_size <= INT32_MAX:
            raise InvalidConfigError(
                f"segment.index.bytes (max_index_size) = {max_index_size} for index {path} "
                f"must be in [{self.ENTRY_SIZE}, {INT32_MAX}]"
            )
        self.path = Path(path)
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        self.entry_size = self.ENTRY_SIZE
        self._warm_entries = _WARM_BYTES // self.ENTRY_SIZE
        self._mm: mmap.mmap | None = None
        self._append_fd = -1  # opened by the first append, closed with the mapping
        self._view: np.ndarray | None = None  # every slot, as S<entry_size>
        # The first `entries` slots of _view, built by the first search after a change:
        # appends only drop it, so they never pay for numpy.
        self._live: np.ndarray | None = None
        self._length = 0
        self._max_entries = 0
        self._entries = 0
        self._closed = False
        # True: keys strictly increasing and >= 0 (byte search is exact);
        # False: Kafka's literal search; None: not yet checked (loaded file).
        self._fast: bool | None = True

        created = False
        try:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666)
                created = True
            except FileExistsError:
                fd = os.open(self.path, os.O_RDWR)
            try:
                if created:
                    # Sparse preallocation, as RandomAccessFile.setLength does.
                    os.ftruncate(fd, self._round_down(max_index_size))
                length = os.fstat(fd).st_size
                if length > INT32_MAX:
                    raise CorruptIndexError(
                        f"Index file {self.path} is corrupt, found {length} bytes which is "
                        f"more than an index can map ({INT32_MAX})"
                    )
                self._map(fd, length)
            finally:
                os.close(fd)
        except OSError as e:
            raise KafkaStorageError(f"Error while opening index file {self.path}: {e}") from e
        self._set_entries(0 if created else self._max_entries)
        if not created:
            self._fast = None if self._entries else True

    # ------------------------------------------------------------------ sizes

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self._max_entries

    @property
    def size_in_bytes(self) -> int:
        return self._entries * self.ENTRY_SIZE

    @property
    def length(self) -> int:
        """Current file length (the mapped size), preallocated slots included."""
        return self._length

    def is_full(self) -> bool:
        return self._entries >= self._max_entries

    # -------------------------------------------------------- search and trim

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= `offset` (the file keeps its size)."""
        self._require_open()
        slot = self._offset_slot(offset)
        if slot < 0:
            keep = 0
        elif self._relative_offset_at(slot) == offset - self.base_offset:
            keep = slot
        else:
            keep = slot + 1
        self._truncate_to_entries(keep)

    def keep_entries(self, n: int) -> None:
        """Drop every entry after the first `n` (an append being undone)."""
        self._require_open()
        if n < self._entries:
            self._truncate_to_entries(n)

    def reset(self) -> None:
        """Drop every entry and grow the file back to max_index_size."""
        self._require_open()
        self._truncate_to_entries(0)
        self.resize(self.max_index_size)

    def trim_to_valid_size(self) -> None:
        """Shrink the file to exactly its entries, so a reopen derives the same count."""
        self.resize(self._entries * self.ENTRY_SIZE)

    def resize(self, new_size: int) -> bool:
        """Set the file length to `new_size` rounded down to whole entries, keeping
        the entries; returns False if the length was already that."""
        self._require_open()
        rounded = self._round_down(new_size)
        if rounded == self._length:
            return False
        if not self._entries * self.ENTRY_SIZE <= rounded <= INT32_MAX:
            raise ValueError(
                f"cannot resize index {self.path} to {new_size} bytes: it holds "
                f"{self._entries} entries ({self.size_in_bytes} bytes), limit {INT32_MAX}"
            )
        entries = self._entries
        # Unmap first: shrinking a file under a live mapping makes touching the
        # cut pages a SIGBUS.
        self._unmap()
        try:
            fd = os.open(self.path, os.O_RDWR)
            try:
                os.ftruncate(fd, rounded)
                self._map(fd, rounded)
            finally:
                os.close(fd)
        except OSError as e:
            self._closed = True  # no mapping left to serve from
            raise KafkaStorageError(f"Error while resizing index file {self.path}: {e}") from e
        self._set_entries(entries)
        return True

    # ------------------------------------------------------------- life cycle

    def flush(self) -> None:
        """msync the mapping, so entries survive an OS crash."""
        self._require_open()
        if self._mm is not None:
            try:
                self._mm.flush()
            except OSError as e:
                raise KafkaStorageError(f"Error while flushing index {self.path}: {e}") from e

    def close(self) -> None:
        """Trim to the valid entries, then unmap. Idempotent."""
        if self._closed:
            return
        self.trim_to_valid_size()
        self._unmap()
        self._closed = True

    def _mapped(self) -> mmap.mmap:
        """The mapping, for reads of entries (an open index always has one)."""
        mm = self._mm
        assert mm is not None, f"index {self.path} is not mapped"
        return mm

    def abandon(self) -> None:
        """The process died: drop the mapping, write nothing (a simulated crash)."""
        if not self._closed:
            self._unmap()
            self._closed = True

    def rename_to(self, new_path: Path) -> None:
        """Rename the file (e.g. add `.deleted`); the mapping keeps working. A missing
        file is not an error: the index still takes the new name, as in Kafka."""
        new_path = Path(new_path)
        rename_index_file(self.path, new_path)
        self.path = new_path

    def delete(self) -> bool:
        """Unmap (without trimming) and remove the file; False if it was already gone."""
        self._unmap()
        self._closed = True
        try:
            os.remove(self.path)
        except FileNotFoundError:
            return False
        except OSError as e:
            raise KafkaStorageError(f"Error while deleting index {self.path}: {e}") from e
        return True

    def sanity_check(self) -> None:
        """Raise CorruptIndexError naming the file if it fails Kafka's checks."""
        if self._length % self.ENTRY_SIZE != 0:
            raise CorruptIndexError(
                f"Index file {self.path} is corrupt, found {self._length} bytes which is "
                f"not positive or not a multiple of {self.ENTRY_SIZE}"
            )
        self._check_entries()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({str(self.path)!r}, base_offset={self.base_offset}, "
            f"entries={self._entries}/{self._max_entries})"
        )

    def entry(self, n: int) -> tuple[int, int]:
        """The n-th entry: absolute (offset, position) in an offset index, (timestamp,
        absolute offset) in a time index."""
        self._require_open()
        self._check_slot(n)
        return self._parse(n)

    def last_entry(self) -> tuple[int, int]:
        """The last entry; with none, (base_offset, 0) in an offset index and
        (-1, base_offset) in a time index."""
        if self._entries == 0:
            return self._no_entry()
        self._require_open()
        return self._parse(self._entries - 1)

    # ------------------------------------------------------- subclass hooks

    def _parse(self, slot: int) -> tuple[int, int]:
        """The entry in `slot`, as `entry` returns it."""
        raise NotImplementedError

    def _no_entry(self) -> tuple[int, int]:
        """What `last_entry` returns for an empty index."""
        raise NotImplementedError

    def _check_entries(self) -> None:
        """Index-specific sanity checks (length already verified)."""
        raise NotImplementedError

    def _offset_slot(self, offset: int) -> int:
        """Largest slot whose offset is <= `offset`, or -1."""
        raise NotImplementedError

    def _relative_offset_at(self, slot: int) -> int:
        raise NotImplementedError

    def _search_key(self, target: int) -> bytes | None:
        """A whole-entry byte string that sorts after exactly the entries whose key
        is <= target, or None if target is below every non-negative key."""
        raise NotImplementedError

    def _key_at(self, slot: int) -> int:
        """The absolute key (offset / timestamp) of `slot`, for the literal search."""
        raise NotImplementedError

    # ---------------------------------------------------------------- helpers

    def _cache_last_entry(self) -> None:
        """Keep the last entry as ints, so an append checks its order without
        reading the mapping back. Called whenever the entry count changes other
        than by an append."""
        raise NotImplementedError

    def _key_slot(self, target: int) -> int:
        """Kafka's largestLowerBoundSlotFor(target) on the key column; -1 if none."""
        if self._entries == 0:
            return -1
        if self._fast is None:
            self._fast = self._keys_strictly_increasing()
        if self._fast:
            key = self._search_key(target)
            if key is None:
                return -1
            live = self._live_slots()
            assert live is not None
            return int(live.searchsorted(key)) - 1
        return self._kafka_search(target, self._key_at, upper=False)

    def _live_slots(self) -> np.ndarray | None:
        """The live entries as a numpy array (None without a mapping)."""
        if self._live is None and self._view is not None:
            self._live = self._view[: self._entries]
        return self._live

    def _kafka_search(self, target: int, column: Callable[[int], int], upper: bool) -> int:
        """Kafka's indexSlotRangeFor, verbatim: largest slot with column <= target
        (upper=False) or smallest slot with column >= target (upper=True); -1 if none."""
        n = self._entries
        if n == 0:
            return -1
        first_hot = max(0, n - 1 - self._warm_entries)
        if column(first_hot) < target:
            return self._bsearch(target, column, upper, first_hot, n - 1)
        if column(0) > target:
            return 0 if upper else -1
        return self._bsearch(target, column, upper, 0, first_hot)

    def _bsearch(
        self, target: int, column: Callable[[int], int], upper: bool, lo: int, hi: int
    ) -> int:
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            found = column(mid)
            if found > target:
                hi = mid - 1
            elif found < target:
                lo = mid
            else:
                return mid
        if not upper:
            return lo
        return -1 if lo == self._entries - 1 else lo + 1

    def _keys_strictly_increasing(self) -> bool:
        """One O(entries) pass over a loaded file: may the byte search serve it?"""
        n = self._entries
        if n == 0:
            return True
        col = np.ndarray(
            (n,), dtype=self._KEY_DTYPE, buffer=self._mm, offset=0, strides=(self.ENTRY_SIZE,)
        )
        try:
            return bool(col[0] >= 0) and bool(np.all(col[1:] > col[:-1]))
        finally:
            del col  # a live export would make the next unmap fail

    def _relative(self, offset: int) -> int:
        relative = offset - self.base_offset
        if not 0 <= relative <= INT32_MAX:
            raise IndexOffsetOverflowError(
                f"Integer overflow for offset: {offset} (base offset {self.base_offset}, "
                f"index {self.path})"
            )
        return relative

    def _check_slot(self, n: int) -> None:
        if not 0 <= n < self._entries:
            raise IndexError(
                f"Attempt to fetch the {n}th entry from index {self.path}, "
                f"which has size {self._entries}"
            )

    def _require_open(self) -> None:
        if self._closed:
            raise ValueError(f"index {self.path} is closed")

    def _round_down(self, size: int) -> int:
        return size // self.ENTRY_SIZE * self.ENTRY_SIZE

    def _map(self, fd: int, length: int) -> None:
        assert self._mm is None and self._view is None
        self._length = length
        self._max_entries = length // self.ENTRY_SIZE
        if length == 0:
            return  # mmap cannot map an empty file
        self._mm = mmap.mmap(fd, length)
        if self._max_entries:
            self._view = np.frombuffer(
                self._mm, dtype=np.dtype(f"S{self.ENTRY_SIZE}"), count=self._max_entries
            )

    def _unmap(self) -> None:
        # numpy views export the mmap's buffer; close() refuses while they live.
        self._live = None
        self._view = None
        if self._mm is not None:
            self._mm.close()
            self._mm = None
        fd, self._append_fd = self._append_fd, -1
        if fd >= 0:
            os.close(fd)

    def _write_entry(self, slot: int, entry: bytes) -> None:
        """Append path: the entry goes in with pwrite, not through the mapping. A
        store into a mapped page the process has not written since the kernel last
        wrote it back faults, and on a sparse, preallocated index that fault costs
        milliseconds (block allocation) — with the GIL held, stalling every thread of
        the node. The mapping shares the page cache, so reads see the entry at once."""
        try:
            if self._append_fd < 0:  # kept open: an active index takes an entry every few appends
                self._append_fd = os.open(self.path, os.O_WRONLY)
            written = os.pwrite(self._append_fd, entry, slot * self.ENTRY_SIZE)
        except OSError as e:
            raise KafkaStorageError(f"Error while appending to index {self.path}: {e}") from e
        if written != len(entry):
            raise KafkaStorageError(
                f"Short write appending to index {self.path}: {written} of {len(entry)} bytes"
            )

    def _set_entries(self, n: int) -> None:
        assert 0 <= n <= self._max_entries, (n, self._max_entries)
        self._entries = n
        self._live = None
        self._cache_last_entry()

    def _truncate_to_entries(self, n: int) -> None:
        assert 0 <= n <= self._entries, (n, self._entries)
        self._set_entries(n)
        if n == 0:
            self._fast = True
        elif self._fast is False:
            self._fast = None  # the kept prefix may be well-formed after all
