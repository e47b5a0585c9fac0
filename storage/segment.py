"""One log segment: `N.log` plus its sparse `N.index` and `N.timeindex`.

N is the segment's base offset, zero-padded to 20 digits. The `.log` holds
whole record batches back to back; the indexes map (last offset of an
appended chunk -> that chunk's first byte) and (max timestamp so far -> offset).

The indexes are mapped lazily, on first use, as Kafka's LazyIndex does, and the
log unloads those of inactive segments it has not used lately (Log's bound).
Python's mmap keeps a duplicate of the file's descriptor for its whole life, so
a mapped index costs a descriptor where Kafka's costs none: with every index
mapped a segment held three, and a node with ~6,600 segments reached a 20,000
descriptor limit (a chaos soak did). Unloaded, a segment holds only its `.log`,
one descriptor as in Kafka.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NamedTuple

from . import disk_and_clock, segment_recovery
from .errors import (
    CorruptIndexError,
    KafkaStorageError,
    LogDirFullError,
    StorageError,
)
from .mapped_index import rename_index_file
from .offset_index import OffsetIndex
from .record_batch import (
    BATCH_SCAN,
    CURRENT_MAGIC,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    BatchHeader,
    batch_size_at,
    check_batch,
)
from .segment_recovery import BatchVisitor
from .time_index import TimeIndex, last_entry_at_rest
from .txn_index import TransactionIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"

# Recovery and fetch scans read the `.log` in chunks this large, so a batch
# costs a struct unpack in memory rather than a syscall.
SCAN_CHUNK_BYTES = 8 * 1024 * 1024
MAX_RELATIVE_OFFSET = 2**31 - 1


def file_prefix(offset: int) -> str:
    return f"{offset:020d}"


def offset_from_file_name(name: str) -> int:
    return int(name.split(".", 1)[0])


# Results of the lookup paths are named tuples: immutable like the frozen
# dataclasses they replaced, at a fraction of the construction cost. The hot
# paths build them with tuple.__new__, which is what their generated __new__
# runs, minus a Python-level call.
_new_tuple = tuple.__new__


class BatchPosition(NamedTuple):
    """Where a batch sits: its byte position in the segment and its header."""

    position: int
    header: BatchHeader


class SegmentRead(NamedTuple):
    """Whole batches read from one segment."""

    data: bytes
    position: int
    first_offset: int  # base offset of the first batch returned
    next_offset: int  # offset after the last batch returned


class LogSegment:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        *,
        index_interval_bytes: int,
        max_index_size: int,
        roll_jitter_ms: int = 0,
        now_ms: int,
        file_suffix: str = "",
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        prefix = directory / file_prefix(base_offset)
        self.log_path = Path(f"{prefix}{LOG_SUFFIX}{file_suffix}")
        try:
            self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as e:
            raise KafkaStorageError(f"cannot open segment {self.log_path}: {e}") from e
        self.size = os.fstat(self._fd).st_size
        self.max_index_size = max_index_size
        self._offset_index_path = Path(f"{prefix}{INDEX_SUFFIX}{file_suffix}")
        self._time_index_path = Path(f"{prefix}{TIME_INDEX_SUFFIX}{file_suffix}")
        self.txn_index = TransactionIndex(
            base_offset, Path(f"{prefix}{TXN_INDEX_SUFFIX}{file_suffix}")
        )
        self._offset_index: OffsetIndex | None = None
        self._time_index: TimeIndex | None = None
        # Serialises loading and unloading the indexes with a flush, which runs outside
        # the partition lock (storage/flush_job.py); reads need it only to load.
        self._index_lock = threading.Lock()
        # Told when this segment maps its indexes (the log bounds how many stay mapped).
        self.on_indexes_loaded: Callable[[LogSegment], None] | None = None
        if not (self._offset_index_path.exists() and self._time_index_path.exists()):
            self._load_indexes()  # a new segment: its index files exist from the start
        self.bytes_since_last_index_entry = 0
        self.created_ms = now_ms
        # (max timestamp, the last offset of the batch carrying it); loaded from
        # the time index lazily, as Kafka does.
        self._max_timestamp: int | None = None
        self._offset_of_max_timestamp = base_offset
        self._rolling_base_timestamp: int | None = None
        self._closed = False

    # --- the indexes, mapped on first use -------------------------------------------

    @property
    def offset_index(self) -> OffsetIndex:
        index = self._offset_index
        if index is None:
            index = self._load_indexes()[0]
        return index

    @property
    def time_index(self) -> TimeIndex:
        index = self._time_index
        if index is None:
            index = self._load_indexes()[1]
        return index

    @property
    def indexes_loaded(self) -> bool:
        return self._offset_index is not None

    @property
    def closed(self) -> bool:
        return self._closed

    def _load_indexes(self) -> tuple[OffsetIndex, TimeIndex]:
        with self._index_lock:
            offset_index, time_index = self._offset_index, self._time_index
            if offset_index is None or time_index is None:
                offset_index = self._offset_index or OffsetIndex(
                    self._offset_index_path, self.base_offset, self.max_index_size
                )
                try:
                    time_index = self._time_index or TimeIndex(
                        self._time_index_path, self.base_offset, self.max_index_size
                    )
                except BaseException:
                    offset_index.abandon()
                    raise
                self._offset_index, self._time_index = offset_index, time_index
                loaded = True
            else:
                loaded = False
        if loaded and self.on_indexes_loaded is not None:
            self.on_indexes_loaded(self)
        return offset_index, time_index

    def unload_indexes(self) -> bool:
        """Unmap both indexes (trimmed to their entries first, as a close does); the next
        use maps them again. Only for an inactive segment, under the partition lock.
        False when a flush holds them right now (the caller tries again later)."""
        if not self._index_lock.acquire(blocking=False):
            return False
        try:
            offset_index, time_index = self._offset_index, self._time_index
            self._offset_index = self._time_index = None
            if offset_index is not None:
                self._offset_index_path = offset_index.path
                offset_index.close()
            if time_index is not None:
                self._time_index_path = time_index.path
                time_index.close()
            return True
        finally:
            self._index_lock.release()

    def index_entries(self) -> tuple[int, int]:
        """(offset index entries, time index entries), without mapping an unloaded index:
        at rest an index file is exactly its entries."""
        offset_index, time_index = self._offset_index, self._time_index
        if offset_index is not None and time_index is not None:
            return offset_index.entries, time_index.entries
        sizes = []
        for path, entry_size in (
            (self._offset_index_path, OffsetIndex.ENTRY_SIZE),
            (self._time_index_path, TimeIndex.ENTRY_SIZE),
        ):
            try:
                sizes.append(os.stat(path).st_size // entry_size)
            except FileNotFoundError:
                sizes.append(0)
            except OSError as e:
                raise KafkaStorageError(f"cannot stat index {path}: {e}") from e
        return sizes[0], sizes[1]

    def _last_time_entry(self) -> tuple[int, int]:
        """The time index's last entry, read from the file when the index is not mapped
        (retention and ListOffsets ask every segment; mapping each would not be bounded)."""
        time_index = self._time_index
        if time_index is not None:
            return time_index.last_entry()
        entry = last_entry_at_rest(self._time_index_path, self.base_offset)
        # No file: mapping the index creates it, as Kafka's does.
        return self.time_index.last_entry() if entry is None else entry

    # --- properties -----------------------------------------------------------

    @property
    def max_timestamp_so_far(self) -> int:
        if self._max_timestamp is None:
            ts, off = self._last_time_entry()
            self._max_timestamp, self._offset_of_max_timestamp = ts, off
        return self._max_timestamp

    @property
    def offset_of_max_timestamp(self) -> int:
        _ = self.max_timestamp_so_far
        return self._offset_of_max_timestamp

    @property
    def largest_timestamp(self) -> int:
        """What time-based retention compares: max record timestamp, else the file's mtime."""
        ts = self.max_timestamp_so_far
        if ts >= 0:
            return ts
        return int(os.stat(self.log_path).st_mtime * 1000)

    def rolling_base_timestamp(self) -> int | None:
        """maxTimestamp of the segment's first batch, the clock of time-based rolling."""
        if self._rolling_base_timestamp is None and self.size > 0:
            first = self.header_at(0)
            if first is not None:
                self._rolling_base_timestamp = first.max_timestamp
        return self._rolling_base_timestamp

    # --- writing --------------------------------------------------------------

    def append(
        self,
        largest_offset: int,
        largest_timestamp: int,
        offset_of_max_timestamp: int,
        data: bytes | bytearray | memoryview,
    ) -> int:
        """Append whole batches; returns the position they were written at."""
        length = len(data)
        if not length:
            return self.size
        if not 0 <= largest_offset - self.base_offset <= MAX_RELATIVE_OFFSET:
            raise StorageError(
                f"offset {largest_offset} does not fit the relative offset range of segment "
                f"{self.log_path.name}"
            )
        position = self.size
        max_timestamp = self._max_timestamp
        if max_timestamp is None:
            max_timestamp = self.max_timestamp_so_far
        self._write_all(data)
        self.size = position + length
        if position == 0:
            self._rolling_base_timestamp = largest_timestamp
        # Checked before counting this chunk: the first chunk is never indexed and
        # an entry maps the chunk's last offset to its first byte.
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            entries = self.offset_index.entries, self.time_index.entries
            try:
                self.offset_index.append(largest_offset, position)
                self.time_index.maybe_append(
                    max(max_timestamp, largest_timestamp),
                    offset_of_max_timestamp
                    if largest_timestamp > max_timestamp
                    else self._offset_of_max_timestamp,
                )
            except StorageError:
                # An index that cannot take the entry must not leave the batch in the
                # .log: the log end offset has not moved, so the next append would
                # write the same offsets after it.
                self._undo_append(position, *entries)
                raise
            self.bytes_since_last_index_entry = length
        else:
            self.bytes_since_last_index_entry += length
        if largest_timestamp > max_timestamp:
            self._max_timestamp = largest_timestamp
            self._offset_of_max_timestamp = offset_of_max_timestamp
        return position

    def _undo_append(self, position: int, offset_entries: int, time_entries: int) -> None:
        """Cut the .log and both indexes back to before an append at `position`."""
        self.offset_index.keep_entries(offset_entries)
        self.time_index.keep_entries(time_entries)
        self._truncate_file(position)
        if position == 0:
            self._rolling_base_timestamp = None

    def _write_all(self, data: bytes | bytearray | memoryview) -> None:
        length = len(data)
        written = 0
        try:
            written = disk_and_clock.disk_write(self._fd, data)  # all of it, but on a full disk
            if written != length:
                view = memoryview(data)
                while written < length:
                    n = disk_and_clock.disk_write(self._fd, view[written:])
                    if n <= 0:
                        raise OSError("write returned no progress")
                    written += n
        except OSError as e:
            # A partial write (full disk) must not leave half a batch behind.
            try:
                os.ftruncate(self._fd, self.size)
            except OSError:
                # Half a batch stays behind: only recovery can cut it, the dir goes offline.
                raise KafkaStorageError(
                    f"cannot append to {self.log_path} ({e}) nor undo the partial write"
                ) from e
            if e.errno == errno.ENOSPC:
                raise LogDirFullError(f"cannot append to {self.log_path}: {e}") from e
            raise KafkaStorageError(f"cannot append to {self.log_path}: {e}") from e

    def should_roll(
        self,
        size: int,
        last_offset: int,
        max_timestamp: int,
        now_ms: int,
        segment_bytes: int,
        max_segment_ms: int,
    ) -> bool:
        """Whether an append of `size` bytes ending at `last_offset` must go to a new
        segment (Kafka's LogSegment.shouldRoll): no room, too old, a full index, or an
        offset beyond the relative range. Time counts from the first batch's
        maxTimestamp when both are known, else from the segment's creation."""
        base_ts = self._rolling_base_timestamp
        if base_ts is None:
            base_ts = self.rolling_base_timestamp()
        if base_ts is not None and base_ts >= 0 and max_timestamp >= 0:
            waited = max_timestamp - base_ts
        else:
            waited = now_ms - self.created_ms
        return (
            self.size > segment_bytes - size
            or waited > max_segment_ms - self.roll_jitter_ms
            or self._indexes_full()
            or not self.can_hold_offset(last_offset)
        )

    def _indexes_full(self) -> bool:
        return self.offset_index.is_full() or self.time_index.is_full()

    def can_hold_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= MAX_RELATIVE_OFFSET

    # --- reading --------------------------------------------------------------

    @property
    def fd(self) -> int:
        """The open `.log`'s descriptor (for FileSlice.of, under the log's lock)."""
        return self._fd

    def pread(self, position: int, size: int) -> bytes:
        try:
            return os.pread(self._fd, size, position)
        except OSError as e:
            raise KafkaStorageError(f"cannot read {self.log_path}: {e}") from e

    def header_at(self, position: int) -> BatchHeader | None:
        raw = self.pread(position, HEADER_SIZE)
        if len(raw) < HEADER_SIZE:
            return None
        return BatchHeader.parse(raw)

    def translate_offset(self, offset: int, starting_position: int = 0) -> BatchPosition | None:
        """The first batch whose last offset is >= `offset`, or None past the segment's end."""
        found = self._locate(offset, starting_position)
        if found is None:
            return None
        return _new_tuple(BatchPosition, (found[0], BatchHeader.parse(found[1])))

    def _locate(
        self,
        offset: int,
        starting_position: int = 0,
        max_bytes: int = 0,
        min_one_batch: bool = False,
    ) -> tuple[int, bytes] | None:
        """Position and first bytes (at least HEADER_SIZE) of the first batch whose last
        offset is >= `offset`; steps over the others reading only their headers.

        Segment.read passes its max_bytes and min_one_batch: the batch after the first
        one stepped over is usually the one, so when the read would take about one
        batch of that size, that many bytes are read with its header (one pread
        instead of two)."""
        position = self.offset_index.lookup(offset)[1]
        if position < starting_position:
            position = starting_position
        end = self.size
        want = HEADER_SIZE
        read_ahead = max_bytes > 0
        try:
            # Terminates: every step moves past a batch of at least HEADER_SIZE bytes.
            while position < end:
                raw = os.pread(self._fd, want, position)
                if len(raw) < HEADER_SIZE:
                    return None
                base_offset, batch_length, magic, last_offset_delta = BATCH_SCAN.unpack_from(raw)
                size = batch_length + LOG_OVERHEAD
                if size < HEADER_SIZE or magic != CURRENT_MAGIC or base_offset < self.base_offset:
                    # Index entries only ever point at batch starts: a bad header here
                    # means a bad index, which the log rebuilds from the .log.
                    raise CorruptIndexError(
                        f"{self.offset_index.path} leads to position {position} of "
                        f"{self.log_path}, where no valid batch starts"
                    )
                if base_offset + last_offset_delta >= offset:
                    return position, raw
                position += size
                want = HEADER_SIZE
                if read_ahead:
                    read_ahead = False
                    window = min(max_bytes, end - position)
                    if min_one_batch and size > window:
                        window = size
                    if HEADER_SIZE < window <= 2 * size:
                        want = window
        except OSError as e:
            raise KafkaStorageError(f"cannot read {self.log_path}: {e}") from e
        return None

    def read(
        self,
        start_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> SegmentRead | None:
        """Whole batches from the batch containing `start_offset`, at most `max_bytes`
        (but at least one batch when `min_one_batch`), none at or above `max_offset`."""
        found = self._locate(start_offset, 0, max_bytes, min_one_batch)
        if found is None:
            return None
        position, raw = found
        first_offset, batch_length, _magic, last_offset_delta = BATCH_SCAN.unpack_from(raw)
        first_size = batch_length + LOG_OVERHEAD
        if max_offset is not None and first_offset >= max_offset:
            return SegmentRead(b"", position, first_offset, first_offset)
        window = min(max_bytes, self.size - position)
        if min_one_batch and first_size > window:
            window = first_size
        if window <= 0:
            return SegmentRead(b"", position, first_offset, first_offset)
        if len(raw) >= window:
            data = raw if len(raw) == window else raw[:window]
        else:
            data = self.pread(position, window)
        n = len(data)
        # The first batch was checked by _locate; count the whole ones after it.
        if first_size <= n:
            end, next_offset = first_size, first_offset + last_offset_delta + 1
        else:
            end, next_offset = 0, first_offset
        while end < n:
            fields = BATCH_SCAN.unpack_from(data, end) if n - end >= BATCH_SCAN.size else None
            if (
                fields is None
                or fields[2] != CURRENT_MAGIC
                or not HEADER_SIZE <= fields[1] + LOG_OVERHEAD <= n - end
            ):
                batch_size_at(data, end)  # raises for a bad length or magic, else a partial tail
                break
            if max_offset is not None and fields[0] >= max_offset:
                break
            end += fields[1] + LOG_OVERHEAD
            next_offset = fields[0] + fields[3] + 1
        return _new_tuple(SegmentRead, (data[:end], position, first_offset, next_offset))

    def read_extent(
        self,
        start_offset: int,
        max_bytes: int,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> tuple[int, int, int] | None:
        """What `read` would return, as (position, size, next offset) without reading
        the batches: it steps from header to header (one small pread each), so the
        bytes can go from the file to a socket with sendfile. None: the offset lies
        past this segment."""
        found = self._locate(start_offset, 0)
        if found is None:
            return None
        position, raw = found
        first_offset, batch_length, _magic, last_offset_delta = BATCH_SCAN.unpack_from(raw)
        size = batch_length + LOG_OVERHEAD
        if max_offset is not None and first_offset >= max_offset:
            return position, 0, first_offset
        if size > max_bytes and not min_one_batch:
            return position, 0, first_offset
        if position + size > self.size:
            return position, 0, first_offset  # a partial batch at the end: not yet whole
        end, next_offset = position + size, first_offset + last_offset_delta + 1
        limit = position + max(max_bytes, size)
        # Bounded by the segment's size: each pass moves past one whole batch.
        while end < self.size:
            raw = self.pread(end, BATCH_SCAN.size)
            if len(raw) < BATCH_SCAN.size:
                break
            base, length, magic, delta = BATCH_SCAN.unpack_from(raw)
            size = length + LOG_OVERHEAD
            if magic != CURRENT_MAGIC or size < HEADER_SIZE or end + size > self.size:
                break
            if end + size > limit or (max_offset is not None and base >= max_offset):
                break
            end += size
            next_offset = base + delta + 1
        return position, end - position, next_offset

    def scan(
        self, start_position: int = 0, validate: bool = True
    ) -> Iterator[tuple[int, memoryview, int, BatchHeader]]:
        """Yield (file position, chunk, position in chunk, header) for every whole batch.

        Raises CorruptRecordError at the first invalid batch when validating.
        """
        position = start_position
        while position < self.size:
            chunk = self.pread(position, min(SCAN_CHUNK_BYTES, self.size - position))
            view = memoryview(chunk)
            p = 0
            while p < len(view):
                size = batch_size_at(view, p)
                if size is None:
                    break
                header = check_batch(view, p) if validate else BatchHeader.parse(view, p)
                yield position + p, view, p, header
                p += size
            if p == 0:
                if len(view) >= MAGIC_OFFSET + 1:
                    # One batch larger than the chunk: read it whole.
                    head = BatchHeader.parse(self.pread(position, HEADER_SIZE))
                    whole = memoryview(self.pread(position, head.size))
                    if len(whole) < head.size:
                        return
                    header = check_batch(whole, 0) if validate else head
                    yield position, whole, 0, header
                    p = head.size
                else:
                    return  # a partial tail: end of data
            position += p

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> BatchPosition | None:
        """The first batch at or after `start_offset` whose maxTimestamp is >= `timestamp`."""
        _ts, indexed_offset = self.time_index.lookup(timestamp)
        position = self.offset_index.lookup(max(indexed_offset, start_offset))[1]
        for file_pos, _view, _p, header in self.scan(position, validate=False):
            if header.max_timestamp >= timestamp and header.last_offset >= start_offset:
                return BatchPosition(file_pos, header)
        return None

    def read_next_offset(self) -> int:
        """The offset after the segment's last batch (its base offset when empty)."""
        start = self.offset_index.last_entry()[1]
        next_offset = self.base_offset
        for _pos, _view, _p, header in self.scan(start, validate=False):
            next_offset = header.next_offset
        return next_offset

    # --- recovery and truncation -----------------------------------------------

    def recover(self, on_batch: BatchVisitor | None = None) -> int:
        """Rebuild both indexes from the `.log`, cutting it at the first invalid
        batch (storage/segment_recovery.py). Returns the number of bytes truncated."""
        found = segment_recovery.rebuild_indexes(self, on_batch)
        truncated = self.size - found.valid_bytes
        if truncated:
            self._truncate_file(found.valid_bytes)
        self.offset_index.trim_to_valid_size()
        max_ts, offset_of_max = found.max_timestamp, found.offset_of_max_timestamp
        self.time_index.maybe_append(max_ts, offset_of_max, skip_full_check=True)
        self.time_index.trim_to_valid_size()
        self._max_timestamp, self._offset_of_max_timestamp = max_ts, offset_of_max
        self._rolling_base_timestamp = None
        self.bytes_since_last_index_entry = found.valid_bytes - found.last_indexed
        return truncated

    def rebuild_indexes(self) -> None:
        """Rebuild both indexes from a `.log` that must be valid; unlike recover()
        this never truncates data (it raises CorruptRecordError instead)."""
        for _ in self.scan(0, validate=True):
            pass
        truncated = self.recover()
        assert truncated == 0, "a validated log cannot lose bytes in recovery"

    def truncate_to(self, offset: int) -> int:
        """Drop every batch at or after `offset`; returns the bytes removed."""
        self.txn_index.truncate_to(offset)
        found = self.translate_offset(offset)
        if found is None:
            return 0
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self.offset_index.resize(self.offset_index.max_index_size)
        self.time_index.resize(self.time_index.max_index_size)
        removed = self.size - found.position
        self._truncate_file(found.position)
        if self.size == 0:
            self._rolling_base_timestamp = None
        self.bytes_since_last_index_entry = 0
        # The truncated time index knows the max timestamp only up to its last entry;
        # the batches after that entry may hold a larger one (Kafka rescans them too).
        ts, off = self.time_index.last_entry()
        start = self.offset_index.lookup(off)[1] if off > self.base_offset else 0
        for _pos, _view, _p, header in self.scan(start, validate=False):
            if header.max_timestamp > ts:
                ts, off = header.max_timestamp, header.last_offset
        self._max_timestamp, self._offset_of_max_timestamp = ts, off
        return removed

    def _truncate_file(self, size: int) -> None:
        try:
            os.ftruncate(self._fd, size)
        except OSError as e:
            raise KafkaStorageError(f"cannot truncate {self.log_path}: {e}") from e
        self.size = size

    def sanity_check(self) -> None:
        """Cheap checks on a segment that recovery did not scan; raises CorruptIndexError."""
        segment_recovery.check_indexes(self)

    # --- lifecycle --------------------------------------------------------------

    def on_becoming_inactive(self) -> None:
        """On roll: the time index's final entry, then trim both indexes."""
        self.time_index.maybe_append(
            self.max_timestamp_so_far, self.offset_of_max_timestamp, skip_full_check=True
        )
        self.offset_index.trim_to_valid_size()
        self.time_index.trim_to_valid_size()

    def flush(self) -> None:
        """fsync the `.log` and both indexes: a mapped index by msync, an unloaded one
        through its file (the pages its mapping dirtied are in the page cache)."""
        try:
            disk_and_clock.disk_fsync(self._fd)
        except OSError as e:
            raise KafkaStorageError(f"cannot fsync {self.log_path}: {e}") from e
        self.txn_index.flush()
        with self._index_lock:
            if self._offset_index is not None and self._time_index is not None:
                self._offset_index.flush()
                self._time_index.flush()
                return
            for path in (self._offset_index_path, self._time_index_path):
                _fsync_file(path)

    def close(self) -> None:
        if self._closed:
            return
        if self.indexes_loaded:
            if self.max_timestamp_so_far >= 0:
                self.time_index.maybe_append(
                    self.max_timestamp_so_far, self.offset_of_max_timestamp, skip_full_check=True
                )
            self.offset_index.close()
            self.time_index.close()
        # Unloaded: closed (trimmed, final time entry) when it last was.
        self.txn_index.close()
        os.close(self._fd)
        self._closed = True

    def abandon(self) -> None:
        """The process died: release the file and the index maps, write nothing."""
        if self._closed:
            return
        if self._offset_index is not None:
            self._offset_index.abandon()
        if self._time_index is not None:
            self._time_index.abandon()
        self.txn_index.close()
        os.close(self._fd)
        self._closed = True

    @property
    def index_paths(self) -> tuple[Path, Path]:
        """(offset index, time index) paths, mapped or not."""
        if self._offset_index is not None and self._time_index is not None:
            return self._offset_index.path, self._time_index.path
        return self._offset_index_path, self._time_index_path

    def rename_indexes(self, offset_index_path: Path, time_index_path: Path) -> None:
        """Rename both index files; a mapping keeps working, a missing file is no error."""
        with self._index_lock:
            for index, old, new in (
                (self._offset_index, self._offset_index_path, offset_index_path),
                (self._time_index, self._time_index_path, time_index_path),
            ):
                if index is not None:
                    index.rename_to(new)
                    continue
                rename_index_file(old, new)
            self._offset_index_path, self._time_index_path = offset_index_path, time_index_path

    def rename_with_suffix(self, suffix: str) -> None:
        """Rename all three files, e.g. adding `.deleted`; the segment keeps working."""
        new_log = Path(str(self.log_path) + suffix)
        os.rename(self.log_path, new_log)
        self.log_path = new_log
        offset_path, time_path = self.index_paths
        self.rename_indexes(Path(str(offset_path) + suffix), Path(str(time_path) + suffix))
        if self.txn_index.path is not None:
            self.txn_index.rename_to(Path(str(self.txn_index.path) + suffix))

    def delete(self) -> None:
        with self._index_lock:
            for index, path in (
                (self._offset_index, self._offset_index_path),
                (self._time_index, self._time_index_path),
            ):
                if index is not None:
                    index.delete()
                    continue
                try:
                    os.remove(path)
                except FileNotFoundError:
                    pass
                except OSError as e:
                    raise KafkaStorageError(f"Error while deleting index {path}: {e}") from e
        self.txn_index.delete()
        if not self._closed:
            os.close(self._fd)
            self._closed = True
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.log_path)

    @property
    def last_modified_ms(self) -> int:
        return int(os.stat(self.log_path).st_mtime * 1000)

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path.name}, size={self.size})"


def _fsync_file(path: Path) -> None:
    """fsync a file by name (an unloaded index); a missing one has nothing to flush."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    except OSError as e:
        raise KafkaStorageError(f"cannot open {path} to fsync it: {e}") from e
    try:
        disk_and_clock.disk_fsync(fd)
    except OSError as e:
        raise KafkaStorageError(f"cannot fsync {path}: {e}") from e
    finally:
        os.close(fd)
