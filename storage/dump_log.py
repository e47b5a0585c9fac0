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
only ever see a private copy (`dump_log_reader.private_copy`). Reading the files
is storage/dump_log_reader.py; this module decodes and prints.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

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
from .dump_log_reader import (
    MAX_CHUNK_BATCHES,
    OFFSET_ENTRY,
    TIME_ENTRY,
    TXN_ENTRY,
    BatchFinder,
    DumpError,
    Frame,
    LogFile,
    private_copy,
    read_entries,
)
from .errors import StorageError
from .mapped_index import MappedIndex
from .offset_index import OffsetIndex
from .partition_metadata import PARTITION_METADATA_FILE, PartitionMetadataFile
from .producer_snapshot import read_snapshot
from .producer_state_entry import dec_seq
from .record_batch import (
    NO_SEQUENCE,
    BatchHeader,
    Record,
    TimestampType,
    increment_sequence,
)
from .time_index import TimeIndex

__all__ = ["DEFAULT_MAX_BYTES", "DumpOptions", "dump_files"]

INT32_MAX = 2**31 - 1
DEFAULT_MAX_BYTES = INT32_MAX  # Kafka's --max-bytes default (Integer.MAX_VALUE)

RECORD_INDENT = "|"
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
        raise DumpError(f"cannot parse a base offset from the file name {path.name}")
    return prefix, int(prefix)


def _decode_text(data: bytes) -> str:
    """Kafka's StringDecoder: `new String(bytes, UTF_8)`."""
    return data.decode("utf-8", "replace")


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

    def _records(self, log: LogFile, pos: int, frame: Frame, what: str) -> list[Record]:
        """The records of the batch at `pos`; none once `what` could not be decoded
        (reported, and the dump fails)."""
        try:
            return log.records(pos, frame)
        except (StorageError, ValueError, DumpError) as e:
            self.error(f"Cannot decode {what}: {e}")
            return []

    # --- dispatch -----------------------------------------------------------------

    def dump(self, path: Path) -> None:
        self.line(f"Dumping {path}")
        try:
            if not path.exists():
                raise DumpError(f"Cannot dump {path}: no such file")
            if path.is_dir():
                raise DumpError(f"Cannot dump {path}: it is a directory")
            handler = self._handler_for(path)
            if handler is None:
                self.error(
                    f"Ignoring unknown file {path}: not a .log, .index, .timeindex, .txnindex, "
                    ".snapshot, checkpoint or partition.metadata file"
                )
                return
            handler(path)
        except DumpError as e:
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
                raise DumpError(f"Cannot parse KRaft snapshot file name {path.name}")
            self.line(f"Snapshot end offset: {int(m[1])}, epoch: {int(m[2])}")

        opts = self.options
        deep = opts.is_deep_iteration
        key = str(path.absolute())
        last_offset = -1
        valid_bytes = 0
        with LogFile(path, opts.max_bytes) as log:
            frame = Frame("end")
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
                    records = self._records(
                        log,
                        pos,
                        frame,
                        f"the records of the batch at position {pos} "
                        f"(baseOffset {header.base_offset}) of {path}",
                    )
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
    def _all_frames(log: LogFile) -> Iterator[tuple[int, Frame]]:
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
        log = LogFile(log_path) if log_path.is_file() else None
        if log is None:
            self.error(f"Cannot verify {path}: log file {log_path} not found")
        key = str(path.absolute())
        try:
            for i, (relative, position) in enumerate(read_entries(path, OFFSET_ENTRY)):
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
    def _chunk_end_offset(log: LogFile, position: int, offset: int) -> int:
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
        with private_copy(path) as copy:
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
                for i, (timestamp, relative) in enumerate(read_entries(path, TIME_ENTRY)):
                    if base + relative == base and i > 0:
                        break
                    self.line(f"timestamp: {timestamp} offset: {base + relative}")
            return
        finder = BatchFinder(path.parent / f"{prefix}.index", base)
        key = str(path.absolute())
        prev_timestamp = -1
        with LogFile(log_path) as log:
            for i, (timestamp, relative) in enumerate(read_entries(path, TIME_ENTRY)):
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
                        records = self._records(
                            log,
                            pos,
                            frame,
                            f"the batch at position {pos} of {log_path} to verify {path}",
                        )
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
                first_seq = dec_seq(e.last_sequence, e.offset_delta)
                text += (
                    f"firstSequence: {first_seq} lastSequence: {e.last_sequence} "
                    f"lastOffset: {e.last_offset} offsetDelta: {e.offset_delta} "
                    f"timestamp: {e.timestamp}"
                )
            self.line(text)

    def _dump_txn_index(self, path: Path) -> None:
        size = path.stat().st_size
        for version, producer_id, first, last, lso in read_entries(path, TXN_ENTRY):
            if version > _TXN_VERSION:
                raise DumpError(
                    f"Unexpected aborted transaction version {version} in transaction index "
                    f"{path.absolute()}, current version is {_TXN_VERSION}"
                )
            self.line(
                f"version: {version} producerId: {producer_id} firstOffset: {first} "
                f"lastOffset: {last} lastStableOffset: {lso}"
            )
        if size % TXN_ENTRY.size:
            raise DumpError(
                f"Unexpected end of transaction index {path}: {size % TXN_ENTRY.size} "
                f"trailing bytes are not a whole {TXN_ENTRY.size}-byte entry"
            )

    # --- text files ---------------------------------------------------------------

    def _dump_leader_epoch_checkpoint(self, path: Path) -> None:
        with private_copy(path) as copy:
            entries = LeaderEpochCheckpointFile(copy).read()
        for epoch, start_offset in entries:
            self.line(f"epoch: {epoch} startOffset: {start_offset}")

    def _dump_offset_checkpoint(self, path: Path) -> None:
        with private_copy(path) as copy:
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
