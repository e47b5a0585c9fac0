"""The engine of `seglog dump-log`, our kafka-dump-log.sh (kafka.tools.DumpLogSegments).

Output lines and field names follow Kafka's DumpLogSegments (trunk, 4.0) so that
the two tools can be diffed against each other:

* `.log`: one line per batch (`baseOffset: ... isvalid: true`); with deep
  iteration one `| offset: ...` line per record, plus `key:`/`payload:` with
  --print-data-log (a null key or value is left out, as Kafka's decoder does;
  `keySize: -1` / `valueSize: -1` say it is null). A tail that is not a whole
  batch is reported as `Found <n> invalid bytes at the end of <name>`.
* `.index` / `.timeindex`: the entries, verified against the segment's `.log`;
  mismatches are summarised after all files, in Kafka's words.
* `.snapshot`, `.txnindex`: Kafka's lines. Checkpoint files and
  `partition.metadata` (which Kafka's tool does not decode): one line per entry.

Where Kafka would die with a stack trace (corrupt batch length, index entry
pointing nowhere, missing `.log`, unknown file, ...) we print one line naming
the file and go on with the next file; the exit code is then 1.

Nothing here ever writes: every file is opened read-only and `.log` files are
read in bounded chunks. The index and checkpoint classes, written for the broker,
only ever see a private copy (see `_private_copy`).
"""

from __future__ import annotations

import bisect
import os
import re
import shutil
import struct
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TextIO

import crc32c as _crc32c

from .checkpoint_file import (
    CLEANER_OFFSET_CHECKPOINT,
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
)
from .compression import CompressionType
from .crc import crc32c
from .errors import StorageError
from .mapped_index import MappedIndex
from .offset_index import OffsetIndex
from .partition_metadata import PARTITION_METADATA_FILE, PartitionMetadataFile
from .producer_snapshot import read_snapshot
from .record_batch import (
    ATTRIBUTES_OFFSET,
    CURRENT_MAGIC,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    NO_SEQUENCE,
    BatchHeader,
    Record,
    TimestampType,
    decode_records,
    increment_sequence,
)
from .time_index import TimeIndex

__all__ = ["DEFAULT_MAX_BYTES", "DumpOptions", "dump_files"]

INT32_MAX = 2**31 - 1
DEFAULT_MAX_BYTES = INT32_MAX  # Kafka's --max-bytes default (Integer.MAX_VALUE)

RECORD_INDENT = "|"
# FileLogInputStream stops when fewer than this many bytes (offset, length,
# epoch, magic) are left after a batch.
_HEADER_SIZE_UP_TO_MAGIC = 17
_CHUNK = 1 << 20  # read granularity for .log files
_STREAM_CRC_ABOVE = 16 << 20  # larger batches are CRC-checked without buffering them

_PREFIX = struct.Struct(">qiib")
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_TXN_ENTRY = struct.Struct(">hqqqq")
_TXN_VERSION = 0

_OFFSET_CHECKPOINTS = frozenset(
    {
        RECOVERY_POINT_CHECKPOINT,
        REPLICATION_OFFSET_CHECKPOINT,
        LOG_START_OFFSET_CHECKPOINT,
        CLEANER_OFFSET_CHECKPOINT,
    }
)
_KRAFT_SNAPSHOT = re.compile(r"(\d{20})-(\d{10})\.checkpoint")
_KRAFT_BOOTSTRAP = "bootstrap.checkpoint"

_CONTROL_TYPES = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}


@dataclass(frozen=True)
class DumpOptions:
    """The switches of `seglog dump-log` (Kafka's names, minus the decoders)."""

    print_data_log: bool = False
    deep_iteration: bool = False
    verify_index_only: bool = False
    index_sanity_check: bool = False
    max_bytes: int = DEFAULT_MAX_BYTES
    skip_record_metadata: bool = False
    # A decoder of the records' keys and values (--offsets-decoder: the group
    # coordinator's records): its text replaces `key: ... payload: ...`.
    record_decoder: Callable[[bytes | None, bytes | None], str] | None = None

    @property
    def is_deep_iteration(self) -> bool:
        """--print-data-log implies --deep-iteration, as in Kafka."""
        return self.deep_iteration or self.print_data_log


def dump_files(
    paths: Sequence[Path],
    options: DumpOptions,
    out: TextIO,
    err: TextIO | None = None,
) -> int:
    """Dump every file in `paths` to `out`; 0 if all went well, 1 if any file
    could not be read, was corrupt or failed verification.

    Errors and the end-of-run verification summaries go to `err` (Kafka's
    stderr); by default they are interleaved into `out`.
    """
    dumper = _Dumper(options, out, out if err is None else err)
    for path in paths:
        dumper.dump(Path(path))
    dumper.print_summaries()
    return 1 if dumper.failed else 0


# --------------------------------------------------------------------- helpers


def _optional_long(value: int | None) -> str:
    """Java's OptionalLong.toString."""
    return "OptionalLong.empty" if value is None else f"OptionalLong[{value}]"


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _decrement_sequence(sequence: int, decrement: int) -> int:
    """Kafka's DefaultRecordBatch.decrementSequence (wraps below 0 to 2^31-1)."""
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def _codec_name(attributes: int) -> str:
    codec = attributes & 0x07
    try:
        return CompressionType(codec).name.lower()
    except ValueError:
        return f"unknown({codec})"


def _timestamp_type_name(header: BatchHeader) -> str:
    if header.timestamp_type == TimestampType.LOG_APPEND_TIME:
        return "LogAppendTime"
    return "CreateTime"


def _base_offset_of(path: Path) -> tuple[str, int]:
    """(file prefix, base offset) from `<20 digits>.<suffix>`, as Kafka parses it."""
    prefix = path.name.split(".", 1)[0]
    if not prefix.isascii() or not prefix.isdigit():
        raise _DumpError(f"cannot parse a base offset from the file name {path.name}")
    return prefix, int(prefix)


def _decode_text(data: bytes) -> str:
    """Kafka's StringDecoder: `new String(bytes, UTF_8)`."""
    return data.decode("utf-8", "replace")


class _DumpError(Exception):
    """A problem with one file that ends its dump (reported, never raised out)."""


@contextmanager
def _private_copy(path: Path) -> Iterator[Path]:
    """A throw-away copy of `path` for the storage classes written for the broker:
    index objects map their file read-write and trim it on close, checkpoint
    objects create their file when it is missing. Their errors name `path`."""
    with tempfile.TemporaryDirectory(prefix="seglog-dump-") as tmp:
        copy = Path(tmp) / path.name
        shutil.copyfile(path, copy)
        try:
            yield copy
        except StorageError as e:
            raise _DumpError(str(e).replace(str(copy), str(path))) from e


# An indexed append holds at most this many batches (a 1 MiB request of tiny
# batches); the walk that verifies an entry stops there.
MAX_CHUNK_BATCHES = 100_000


@dataclass(frozen=True, slots=True)
class _Frame:
    """What starts at a position of a `.log` file, classified as Kafka's
    FileLogInputStream would (plus the magic check it defers)."""

    kind: str  # "batch", "end" (no whole batch left), "corrupt" or "legacy"
    size: int = 0
    header: BatchHeader | None = None
    reason: str = ""


class _LogFile:
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

    def __enter__(self) -> _LogFile:
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

    def frame_at(self, pos: int) -> _Frame:
        remaining = self.end - pos
        if pos < 0 or remaining <= _HEADER_SIZE_UP_TO_MAGIC:
            return _Frame("end")
        base_offset, batch_length, _epoch, magic = _PREFIX.unpack_from(
            self.read(pos, _HEADER_SIZE_UP_TO_MAGIC)
        )
        if batch_length < MIN_BATCH_LENGTH:
            return _Frame(
                "corrupt",
                reason=f"Found record size {batch_length} smaller than minimum record overhead "
                f"({MIN_BATCH_LENGTH}) in file {self.path} at position {pos}.",
            )
        size = batch_length + LOG_OVERHEAD
        if size > remaining:
            return _Frame("end")  # a partial batch: Kafka's iterator just stops
        if magic in (0, 1):
            return _Frame(
                "legacy",
                reason=f"Batch at position {pos} (offset {base_offset}) of {self.path} has "
                f"magic {magic} (message format v{magic}), which this tool cannot decode; "
                "stopping here.",
            )
        if magic != CURRENT_MAGIC:
            return _Frame(
                "corrupt",
                reason=f"Batch at position {pos} of {self.path} has unknown magic {magic}.",
            )
        if size < HEADER_SIZE:
            return _Frame(
                "corrupt",
                reason=f"Batch at position {pos} of {self.path} is {size} bytes, smaller than "
                f"the {HEADER_SIZE}-byte batch header.",
            )
        header = BatchHeader.parse(self.read(pos, HEADER_SIZE))
        return _Frame("batch", size, header)

    def is_valid(self, pos: int, frame: _Frame) -> bool:
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

    def records(self, pos: int, frame: _Frame) -> list[Record]:
        """Every record of the batch (no CRC check: Kafka iterates invalid batches too)."""
        assert frame.header is not None
        data = self.read(pos, frame.size)
        if len(data) != frame.size:
            raise _DumpError(f"batch at position {pos} of {self.path} is truncated")
        return decode_records(data, 0, frame.header)

    def batches(self, start: int = 0) -> Iterator[tuple[int, _Frame]]:
        """(position, frame) of each whole v2 batch from `start`; stops at anything else."""
        pos = start
        while True:
            frame = self.frame_at(pos)
            if frame.kind != "batch":
                return
            yield pos, frame
            pos += frame.size


def _read_entries(path: Path, entry: struct.Struct) -> Iterator[tuple[int, ...]]:
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


# ---------------------------------------------------------------------- dumper


class _Dumper:
    def __init__(self, options: DumpOptions, out: TextIO, err: TextIO) -> None:
        self.options = options
        self._out = out
        self._err = err
        self.failed = False
        # Kafka's end-of-run summaries, keyed by absolute path, in first-seen order.
        self.index_mismatches: dict[str, list[tuple[int, int]]] = {}
        self.index_position_errors: dict[str, list[str]] = {}
        self.time_mismatches: dict[str, list[tuple[int, int]]] = {}
        self.time_out_of_order: dict[str, list[tuple[int, int]]] = {}
        self.time_not_found: dict[str, list[tuple[int, int]]] = {}
        self.non_consecutive: dict[str, list[tuple[int, int]]] = {}

    # --- output -------------------------------------------------------------------

    def line(self, text: str) -> None:
        self._out.write(text + "\n")

    def error(self, text: str) -> None:
        self.failed = True
        self._err.write(text + "\n")

    # --- dispatch -----------------------------------------------------------------

    def dump(self, path: Path) -> None:
        self.line(f"Dumping {path}")
        try:
            if not path.exists():
                raise _DumpError(f"Cannot dump {path}: no such file")
            if path.is_dir():
                raise _DumpError(f"Cannot dump {path}: it is a directory")
            handler = self._handler_for(path)
            if handler is None:
                self.error(
                    f"Ignoring unknown file {path}: not a .log, .index, .timeindex, .txnindex, "
                    ".snapshot, checkpoint or partition.metadata file"
                )
                return
            handler(path)
        except _DumpError as e:
            self.error(str(e))
        except (StorageError, OSError, ValueError, struct.error) as e:
            self.error(f"Error while dumping {path}: {type(e).__name__}: {e}")

    def _handler_for(self, path: Path) -> Callable[[Path], None] | None:
        name = path.name
        if name == LEADER_EPOCH_CHECKPOINT:
            return self._dump_leader_epoch_checkpoint
        if name in _OFFSET_CHECKPOINTS:
            return self._dump_offset_checkpoint
        if name == PARTITION_METADATA_FILE:
            return self._dump_partition_metadata
        suffix = name[name.rfind(".") :] if "." in name else ""
        return {
            ".log": self._dump_log,
            ".checkpoint": self._dump_log,
            ".index": self._dump_index,
            ".timeindex": self._dump_time_index,
            ".snapshot": self._dump_producer_snapshot,
            ".txnindex": self._dump_txn_index,
        }.get(suffix)

    # --- .log ---------------------------------------------------------------------

    def _dump_log(self, path: Path) -> None:
        if path.name.endswith(".log"):
            _prefix, base = _base_offset_of(path)
            self.line(f"Log starting offset: {base}")
        elif path.name == _KRAFT_BOOTSTRAP:
            self.line("KRaft bootstrap snapshot")
        else:
            m = _KRAFT_SNAPSHOT.fullmatch(path.name)
            if m is None:
                raise _DumpError(f"Cannot parse KRaft snapshot file name {path.name}")
            self.line(f"Snapshot end offset: {int(m[1])}, epoch: {int(m[2])}")

        opts = self.options
        deep = opts.is_deep_iteration
        key = str(path.absolute())
        last_offset = -1
        valid_bytes = 0
        with _LogFile(path, opts.max_bytes) as log:
            frame = _Frame("end")
            for pos, frame in self._all_frames(log):
                if frame.kind != "batch":
                    break
                header = frame.header
                assert header is not None
                valid = log.is_valid(pos, frame)
                self.line(self._batch_line(header, pos, frame.size, valid))
                if not valid:
                    self.error(
                        f"Batch at position {pos} (baseOffset {header.base_offset}) of {path} "
                        "failed its CRC check"
                    )
                if deep:
                    try:
                        records = log.records(pos, frame)
                    except (StorageError, ValueError, _DumpError) as e:
                        self.error(
                            f"Cannot decode the records of the batch at position {pos} "
                            f"(baseOffset {header.base_offset}) of {path}: {e}"
                        )
                        records = []
                    for record in records:
                        if last_offset != -1 and record.offset != last_offset + 1:
                            self.non_consecutive.setdefault(key, []).append(
                                (last_offset, record.offset)
                            )
                        last_offset = record.offset
                        self.line(self._record_line(header, record))
                valid_bytes = pos + frame.size
            if frame.kind in ("corrupt", "legacy"):
                self.error(frame.reason)
            trailing = log.end - valid_bytes
            # With --max-bytes cutting the file short a partial last batch is expected
            # (Kafka then stays silent too).
            if trailing > 0 and frame.kind != "legacy" and log.end == log.file_size:
                self.failed = True
                self.line(f"Found {trailing} invalid bytes at the end of {path.name}")

    @staticmethod
    def _all_frames(log: _LogFile) -> Iterator[tuple[int, _Frame]]:
        """Every frame from position 0, including the one that ends the scan."""
        pos = 0
        while True:
            frame = log.frame_at(pos)
            yield pos, frame
            if frame.kind != "batch":
                return
            pos += frame.size

    @staticmethod
    def _batch_line(h: BatchHeader, pos: int, size: int, valid: bool) -> str:
        delete_horizon = h.base_timestamp if h.has_delete_horizon else None
        return (
            f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
            f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} "
            f"producerId: {h.producer_id} producerEpoch: {h.producer_epoch} "
            f"partitionLeaderEpoch: {h.partition_leader_epoch} "
            f"isTransactional: {_bool(h.is_transactional)} isControl: {_bool(h.is_control)} "
            f"deleteHorizonMs: {_optional_long(delete_horizon)} "
            f"position: {pos} {_timestamp_type_name(h)}: {h.max_timestamp} size: {size} "
            f"magic: {h.magic} compresscodec: {_codec_name(h.attributes)} crc: {h.crc} "
            f"isvalid: {_bool(valid)}"
        )

    def _record_line(self, h: BatchHeader, r: Record) -> str:
        opts = self.options
        parts: list[str] = []
        prefix = f"{RECORD_INDENT} "
        if not opts.skip_record_metadata:
            key_size = -1 if r.key is None else len(r.key)
            value_size = -1 if r.value is None else len(r.value)
            if h.base_sequence >= 0:
                sequence = increment_sequence(h.base_sequence, r.offset - h.base_offset)
            else:
                sequence = NO_SEQUENCE
            header_keys = ",".join(hdr.key for hdr in r.headers)
            parts.append(
                f"{prefix}offset: {r.offset} {_timestamp_type_name(h)}: {r.timestamp} "
                f"keySize: {key_size} valueSize: {value_size} "
                f"sequence: {sequence} headerKeys: [{header_keys}]"
            )
            prefix = " "
            if h.is_control:
                parts.append(" " + self._control_description(h, r))
        if opts.print_data_log and not h.is_control and opts.record_decoder is not None:
            parts.append(f"{prefix}{opts.record_decoder(r.key, r.value)}")
        elif opts.print_data_log and not h.is_control:
            if r.key is not None:
                parts.append(f"{prefix}key: {_decode_text(r.key)}")
            if r.value is not None:
                parts.append(f" payload: {_decode_text(r.value)}")
        return "".join(parts)

    def _control_description(self, h: BatchHeader, r: Record) -> str:
        """Kafka's ControlRecordType / EndTransactionMarker rendering of one record."""
        key = r.key or b""
        if len(key) < 4:
            self.error(
                f"Control record at offset {r.offset} has a {len(key)}-byte key; "
                "at least 4 bytes are required"
            )
            return "controlType: UNKNOWN(-1)"
        version, type_id = struct.unpack_from(">hh", key)
        if version < 0:
            self.error(f"Control record at offset {r.offset} has invalid key version {version}")
            return "controlType: UNKNOWN(-1)"
        name = _CONTROL_TYPES.get(type_id, "UNKNOWN")
        if name in ("ABORT", "COMMIT"):
            value = r.value or b""
            if len(value) < 6:
                self.error(
                    f"End transaction marker at offset {r.offset} has a {len(value)}-byte "
                    "value; 6 bytes are required"
                )
                return f"controlType: {name}({type_id})"
            _value_version, coordinator_epoch = struct.unpack_from(">hi", value)
            return f"endTxnMarker: {name} coordinatorEpoch: {coordinator_epoch}"
        # Kafka prints KRaft control records (types 3-6) as JSON; we only name them.
        return f"controlType: {name}({type_id})"

    # --- .index -------------------------------------------------------------------

    def _dump_index(self, path: Path) -> None:
        prefix, base = _base_offset_of(path)
        entries = path.stat().st_size // OffsetIndex.ENTRY_SIZE
        if entries == 0:
            self.line(f"{path} is empty.")
            return
        if self.options.index_sanity_check:
            self._sanity_check(path, base, OffsetIndex)
            return
        log_path = path.parent / f"{prefix}.log"
        log = _LogFile(log_path) if log_path.is_file() else None
        if log is None:
            self.error(f"Cannot verify {path}: log file {log_path} not found")
        key = str(path.absolute())
        try:
            for i, (relative, position) in enumerate(_read_entries(path, _OFFSET_ENTRY)):
                offset = base + relative
                # A crash can leave a zero-filled (preallocated) tail: stop at it.
                if offset == base and i > 0:
                    break
                if log is not None:
                    frame = log.frame_at(position)
                    if frame.kind != "batch":
                        self.index_mismatches.setdefault(key, []).append((offset, -1))
                        self.index_position_errors.setdefault(key, []).append(
                            f"  Index position mismatch: offset {offset} points at position "
                            f"{position}, where no valid batch starts"
                        )
                        self.failed = True
                    else:
                        assert frame.header is not None
                        ends_at = self._chunk_end_offset(log, position, offset)
                        if ends_at != offset:
                            # An append of several batches gets one entry: the chunk's
                            # last offset at its first byte (Kafka's LogSegment.append),
                            # so only an entry matching no batch end is a mismatch.
                            self.index_mismatches.setdefault(key, []).append(
                                (offset, frame.header.last_offset)
                            )
                            self.failed = True
                if not self.options.verify_index_only:
                    self.line(f"offset: {offset} position: {position}")
        finally:
            if log is not None:
                log.close()

    @staticmethod
    def _chunk_end_offset(log: _LogFile, position: int, offset: int) -> int:
        """The last offset of the first batch at or after `position` that reaches
        `offset` (bounded walk); equals `offset` for a valid index entry."""
        pos = position
        last = -1
        for _ in range(MAX_CHUNK_BATCHES):
            frame = log.frame_at(pos)
            if frame.kind != "batch" or frame.header is None:
                return last
            last = frame.header.last_offset
            if last >= offset:
                return last
            pos += frame.header.size
        return last

    def _sanity_check(self, path: Path, base: int, cls: type[MappedIndex]) -> None:
        """Run the index class's own sanity check, on a private copy."""
        with _private_copy(path) as copy:
            index = cls(copy, base)  # type: ignore[call-arg]
            try:
                index.sanity_check()
            finally:
                index.close()
        self.line(f"{path} passed sanity check.")

    # --- .timeindex ---------------------------------------------------------------

    def _dump_time_index(self, path: Path) -> None:
        prefix, base = _base_offset_of(path)
        if self.options.index_sanity_check:
            self._sanity_check(path, base, TimeIndex)
            return
        log_path = path.parent / f"{prefix}.log"
        if not log_path.is_file():
            self.error(f"Cannot verify {path}: log file {log_path} not found")
            if not self.options.verify_index_only:
                for i, (timestamp, relative) in enumerate(_read_entries(path, _TIME_ENTRY)):
                    if base + relative == base and i > 0:
                        break
                    self.line(f"timestamp: {timestamp} offset: {base + relative}")
            return
        finder = _BatchFinder(path.parent / f"{prefix}.index", base)
        key = str(path.absolute())
        prev_timestamp = -1
        with _LogFile(log_path) as log:
            for i, (timestamp, relative) in enumerate(_read_entries(path, _TIME_ENTRY)):
                offset = base + relative
                if offset == base and i > 0:
                    break
                found = finder.find(log, offset)
                if found is None:
                    self.time_not_found.setdefault(key, []).append((offset, -1))
                    self.failed = True
                else:
                    pos, frame = found
                    assert frame.header is not None
                    if frame.header.last_offset != offset:
                        self.time_not_found.setdefault(key, []).append(
                            (offset, frame.header.last_offset)
                        )
                        self.failed = True
                    else:
                        try:
                            records = log.records(pos, frame)
                        except (StorageError, ValueError, _DumpError) as e:
                            self.error(
                                f"Cannot decode the batch at position {pos} of {log_path} "
                                f"to verify {path}: {e}"
                            )
                            records = []
                        max_timestamp = max((r.timestamp for r in records), default=-1)
                        if max_timestamp != timestamp:
                            self.time_mismatches.setdefault(key, []).append(
                                (timestamp, max_timestamp)
                            )
                            self.failed = True
                        if prev_timestamp >= timestamp:
                            self.time_out_of_order.setdefault(key, []).append(
                                (timestamp, prev_timestamp)
                            )
                            self.failed = True
                if not self.options.verify_index_only:
                    self.line(f"timestamp: {timestamp} offset: {offset}")
                prev_timestamp = timestamp

    # --- .snapshot / .txnindex ----------------------------------------------------

    def _dump_producer_snapshot(self, path: Path) -> None:
        for e in read_snapshot(path):
            current_txn = e.current_txn_first_offset if e.current_txn_first_offset >= 0 else None
            text = (
                f"producerId: {e.producer_id} producerEpoch: {e.epoch} "
                f"coordinatorEpoch: {e.coordinator_epoch} "
                f"currentTxnFirstOffset: {_optional_long(current_txn)} "
                f"lastTimestamp: {e.timestamp} "
            )
            if e.last_offset >= 0:  # Kafka keeps batch metadata only for these
                first_seq = _decrement_sequence(e.last_sequence, e.offset_delta)
                text += (
                    f"firstSequence: {first_seq} lastSequence: {e.last_sequence} "
                    f"lastOffset: {e.last_offset} offsetDelta: {e.offset_delta} "
                    f"timestamp: {e.timestamp}"
                )
            self.line(text)

    def _dump_txn_index(self, path: Path) -> None:
        size = path.stat().st_size
        for version, producer_id, first, last, lso in _read_entries(path, _TXN_ENTRY):
            if version > _TXN_VERSION:
                raise _DumpError(
                    f"Unexpected aborted transaction version {version} in transaction index "
                    f"{path.absolute()}, current version is {_TXN_VERSION}"
                )
            self.line(
                f"version: {version} producerId: {producer_id} firstOffset: {first} "
                f"lastOffset: {last} lastStableOffset: {lso}"
            )
        if size % _TXN_ENTRY.size:
            raise _DumpError(
                f"Unexpected end of transaction index {path}: {size % _TXN_ENTRY.size} "
                f"trailing bytes are not a whole {_TXN_ENTRY.size}-byte entry"
            )

    # --- text files ---------------------------------------------------------------

    def _dump_leader_epoch_checkpoint(self, path: Path) -> None:
        with _private_copy(path) as copy:
            entries = LeaderEpochCheckpointFile(copy).read()
        for epoch, start_offset in entries:
            self.line(f"epoch: {epoch} startOffset: {start_offset}")

    def _dump_offset_checkpoint(self, path: Path) -> None:
        with _private_copy(path) as copy:
            entries = OffsetCheckpointFile(copy).read_entries()
        for (topic, partition), offset in entries:
            self.line(f"topic: {topic} partition: {partition} offset: {offset}")

    def _dump_partition_metadata(self, path: Path) -> None:
        metadata = PartitionMetadataFile(path).read()
        self.line(f"version: {metadata.version} topicId: {metadata.topic_id}")

    # --- summaries ----------------------------------------------------------------

    def print_summaries(self) -> None:
        """Kafka prints these to stderr once every file has been dumped."""
        err = self._err.write
        for name, mismatches in self.index_mismatches.items():
            err(f"Mismatches in :{name}\n")
            for index_offset, log_offset in mismatches:
                err(f"  Index offset: {index_offset}, log offset: {log_offset}\n")
            for text in self.index_position_errors.get(name, []):
                err(text + "\n")
        for name, mismatches in self.time_mismatches.items():
            err(f"Found timestamp mismatch in :{name}\n")
            for index_ts, log_ts in mismatches:
                err(f"  Index timestamp: {index_ts}, log timestamp: {log_ts}\n")
        for name, pairs in self.time_out_of_order.items():
            err(f"Found out of order timestamp in :{name}\n")
            for index_ts, prev_ts in pairs:
                err(f"  Index timestamp: {index_ts}, Previously indexed timestamp: {prev_ts}\n")
        for pairs in self.time_not_found.values():
            err("The following indexed offsets are not found in the log.\n")
            for indexed, found in pairs:
                err(f"Indexed offset: {indexed}, found log offset: {found}\n")
        for name, pairs in self.non_consecutive.items():
            err(f"Non-consecutive offsets in {name}\n")
            for first, second in pairs:
                err(f"  {first} is followed by {second}\n")


class _BatchFinder:
    """Finds the first batch whose last offset is >= a target, starting from the
    segment's offset index as Kafka does (from position 0 without one)."""

    def __init__(self, index_path: Path, base: int) -> None:
        self._offsets: list[int] = []
        self._positions: list[int] = []
        if index_path.is_file():
            for i, (relative, position) in enumerate(_read_entries(index_path, _OFFSET_ENTRY)):
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
    def _scan(log: _LogFile, start: int, target: int) -> tuple[int, _Frame] | None:
        for pos, frame in log.batches(start):
            assert frame.header is not None
            if frame.header.last_offset >= target:
                return pos, frame
        return None

    def find(self, log: _LogFile, target: int) -> tuple[int, _Frame] | None:
        start = self._start(target)
        found = self._scan(log, start, target)
        if start != 0 and (found is None or found[1].header.base_offset > target):  # type: ignore[union-attr]
            # The index pointed past the target (or nowhere useful): scan from the start.
            found = self._scan(log, 0, target)
        return found
