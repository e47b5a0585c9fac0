"""Reading the files `seglog dump-log` decodes, never writing them: a `.log` (or KRaft
snapshot) walked frame by frame as Kafka's FileLogInputStream does, the entries of an
index file, the batch an offset index points to, and private copies for the broker's
own index and checkpoint classes. The printing is storage/dump_log.py.
"""

from __future__ import annotations

import bisect
import os
import shutil
import struct
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import crc32c as _crc32c

from .crc import crc32c
from .errors import StorageError
from .record_batch import (
    ATTRIBUTES_OFFSET,
    CURRENT_MAGIC,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    BatchHeader,
    Record,
    decode_records,
)

# FileLogInputStream stops when fewer than this many bytes (offset, length,
# epoch, magic) are left after a batch.
_HEADER_SIZE_UP_TO_MAGIC = 17
_CHUNK = 1 << 20  # read granularity for .log files
_STREAM_CRC_ABOVE = 16 << 20  # larger batches are CRC-checked without buffering them

_PREFIX = struct.Struct(">qiib")
OFFSET_ENTRY = struct.Struct(">ii")
TIME_ENTRY = struct.Struct(">qi")
TXN_ENTRY = struct.Struct(">hqqqq")


class DumpError(Exception):
    """A problem with one file that ends its dump (reported, never raised out)."""


@contextmanager
def private_copy(path: Path) -> Iterator[Path]:
    """A throw-away copy of `path` for the storage classes written for the broker:
    index objects map their file read-write and trim it on close, checkpoint
    objects create their file when it is missing. Their errors name `path`."""
    with tempfile.TemporaryDirectory(prefix="seglog-dump-") as tmp:
        copy = Path(tmp) / path.name
        shutil.copyfile(path, copy)
        try:
            yield copy
        except StorageError as e:
            raise DumpError(str(e).replace(str(copy), str(path))) from e


# An indexed append holds at most this many batches (a 1 MiB request of tiny
# batches); the walk that verifies an entry stops there.
MAX_CHUNK_BATCHES = 100_000


@dataclass(frozen=True, slots=True)
class Frame:
    """What starts at a position of a `.log` file, classified as Kafka's
    FileLogInputStream would (plus the magic check it defers)."""

    kind: str  # "batch", "end" (no whole batch left), "corrupt" or "legacy"
    size: int = 0
    header: BatchHeader | None = None
    reason: str = ""


class LogFile:
    """A read-only `.log` (or KRaft snapshot) file read in bounded chunks."""

    def __init__(self, path: Path, limit: int | None = None) -> None:
        self.path = path
        self._f: BinaryIO = open(path, "rb")  # noqa: SIM115 - closed by close()
        self.file_size = os.fstat(self._f.fileno()).st_size
        size = self.file_size
        self.end = size if limit is None else max(0, min(size, limit))
        self._buf = b""
        self._buf_start = 0

    def close(self) -> None:
        self._f.close()

    def __enter__(self) -> LogFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _pread(self, pos: int, n: int) -> bytes:
        parts: list[bytes] = []
        fd = self._f.fileno()
        while n > 0:
            data = os.pread(fd, n, pos)
            if not data:
                break  # the file shrank under us
            parts.append(data)
            pos += len(data)
            n -= len(data)
        return b"".join(parts)

    def read(self, pos: int, n: int) -> memoryview:
        """Up to `n` bytes at `pos`, never past `end`."""
        n = max(0, min(n, self.end - pos))
        start = self._buf_start
        if not (start <= pos and pos + n <= start + len(self._buf)):
            want = max(n, min(_CHUNK, self.end - pos))
            self._buf = self._pread(pos, want)
            self._buf_start = start = pos
        return memoryview(self._buf)[pos - start : pos - start + n]

    def frame_at(self, pos: int) -> Frame:
        remaining = self.end - pos
        if pos < 0 or remaining <= _HEADER_SIZE_UP_TO_MAGIC:
            return Frame("end")
        base_offset, batch_length, _epoch, magic = _PREFIX.unpack_from(
            self.read(pos, _HEADER_SIZE_UP_TO_MAGIC)
        )
        if batch_length < MIN_BATCH_LENGTH:
            return Frame(
                "corrupt",
                reason=f"Found record size {batch_length} smaller than minimum record overhead "
                f"({MIN_BATCH_LENGTH}) in file {self.path} at position {pos}.",
            )
        size = batch_length + LOG_OVERHEAD
        if size > remaining:
            return Frame("end")  # a partial batch: Kafka's iterator just stops
        if magic in (0, 1):
            return Frame(
                "legacy",
                reason=f"Batch at position {pos} (offset {base_offset}) of {self.path} has "
                f"magic {magic} (message format v{magic}), which this tool cannot decode; "
                "stopping here.",
            )
        if magic != CURRENT_MAGIC:
            return Frame(
                "corrupt",
                reason=f"Batch at position {pos} of {self.path} has unknown magic {magic}.",
            )
        if size < HEADER_SIZE:
            return Frame(
                "corrupt",
                reason=f"Batch at position {pos} of {self.path} is {size} bytes, smaller than "
                f"the {HEADER_SIZE}-byte batch header.",
            )
        header = BatchHeader.parse(self.read(pos, HEADER_SIZE))
        return Frame("batch", size, header)

    def is_valid(self, pos: int, frame: Frame) -> bool:
        """Kafka's isValid: the stored CRC matches the bytes it covers."""
        assert frame.header is not None
        if frame.size <= _STREAM_CRC_ABOVE:
            view = self.read(pos, frame.size)
            return crc32c(view[ATTRIBUTES_OFFSET:]) == frame.header.crc
        crc = 0
        p, end = pos + ATTRIBUTES_OFFSET, pos + frame.size
        while p < end:
            chunk = self._pread(p, min(_CHUNK, end - p))
            if not chunk:
                return False
            crc = _crc32c.crc32c(chunk, crc)
            p += len(chunk)
        return crc == frame.header.crc

    def records(self, pos: int, frame: Frame) -> list[Record]:
        """Every record of the batch (no CRC check: Kafka iterates invalid batches too)."""
        assert frame.header is not None
        data = self.read(pos, frame.size)
        if len(data) != frame.size:
            raise DumpError(f"batch at position {pos} of {self.path} is truncated")
        return decode_records(data, 0, frame.header)

    def batches(self, start: int = 0) -> Iterator[tuple[int, Frame]]:
        """(position, frame) of each whole v2 batch from `start`; stops at anything else."""
        pos = start
        while True:
            frame = self.frame_at(pos)
            if frame.kind != "batch":
                return
            yield pos, frame
            pos += frame.size


def read_entries(path: Path, entry: struct.Struct) -> Iterator[tuple[int, ...]]:
    """The whole entries of an index file, read in chunks; a partial tail is
    ignored, as Kafka derives the count from floor(length / entrySize)."""
    per_read = entry.size * 8192
    with open(path, "rb") as f:
        carry = b""
        while True:
            data = f.read(per_read)
            if not data:
                return
            data = carry + data
            whole = len(data) - len(data) % entry.size
            yield from entry.iter_unpack(data[:whole])
            carry = data[whole:]


class BatchFinder:
    """Finds the first batch whose last offset is >= a target, starting from the
    segment's offset index as Kafka does (from position 0 without one)."""

    def __init__(self, index_path: Path, base: int) -> None:
        self._offsets: list[int] = []
        self._positions: list[int] = []
        if index_path.is_file():
            for i, (relative, position) in enumerate(read_entries(index_path, OFFSET_ENTRY)):
                if relative == 0 and i > 0:
                    break
                if self._offsets and base + relative <= self._offsets[-1]:
                    # Not increasing: a corrupt index is no guide.
                    self._offsets.clear()
                    self._positions.clear()
                    break
                self._offsets.append(base + relative)
                self._positions.append(position)

    def _start(self, target: int) -> int:
        """OffsetIndex.lookup(target).position: largest entry <= target, else 0."""
        slot = bisect.bisect_right(self._offsets, target) - 1
        return self._positions[slot] if slot >= 0 else 0

    @staticmethod
    def _scan(log: LogFile, start: int, target: int) -> tuple[int, Frame] | None:
        for pos, frame in log.batches(start):
            assert frame.header is not None
            if frame.header.last_offset >= target:
                return pos, frame
        return None

    def find(self, log: LogFile, target: int) -> tuple[int, Frame] | None:
        start = self._start(target)
        found = self._scan(log, start, target)
        if start != 0 and (found is None or found[1].header.base_offset > target):  # type: ignore[union-attr]
            # The index pointed past the target (or nowhere useful): scan from the start.
            found = self._scan(log, 0, target)
        return found
