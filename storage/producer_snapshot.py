"""Producer-state snapshot files (`<offset>.snapshot`), byte-compatible with Kafka.

Layout (docs/architecture.md (storage); Kafka's ProducerSnapshot message, version 1,
non-flexible), all big-endian:

    int16  version = 1
    uint32 crc       CRC-32C of bytes [6, end of file)
    int32  n         number of entries
    n x 46-byte entries: producerId int64, epoch int16, lastSequence int32,
        lastOffset int64, offsetDelta int32, timestamp int64,
        coordinatorEpoch int32, currentTxnFirstOffset int64

The offset in the file name is the exclusive end offset of the state it holds.
"""

from __future__ import annotations

import contextlib
import errno
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from seglog.storage import disk_and_clock
from seglog.storage.crc import crc32c
from seglog.storage.errors import CorruptSnapshotError, KafkaStorageError

SNAPSHOT_VERSION = 1
SNAPSHOT_SUFFIX = ".snapshot"
DELETED_SUFFIX = ".deleted"
TMP_SUFFIX = ".tmp"

_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_ENTRY = struct.Struct(">qhiqiqiq")
HEADER_SIZE = _HEADER.size
ENTRY_SIZE = _ENTRY.size
_CRC_START = 6  # the CRC covers everything after itself
assert HEADER_SIZE == 10 and ENTRY_SIZE == 46


@dataclass(frozen=True, slots=True)
class SnapshotEntry:
    """One producer as persisted: only its latest batch survives a snapshot."""

    producer_id: int
    epoch: int
    last_sequence: int  # -1 if the producer has no batch
    last_offset: int  # -1 if the producer has no batch
    offset_delta: int  # lastOffset - firstOffset of the last batch; 0 if none
    timestamp: int  # the producer's lastTimestamp
    coordinator_epoch: int
    current_txn_first_offset: int  # -1 if no transaction is open


def encode_snapshot(entries: Iterable[SnapshotEntry]) -> bytes:
    """Serialize entries in the given order into a complete snapshot file image."""
    items = list(entries)
    buf = bytearray(HEADER_SIZE + ENTRY_SIZE * len(items))
    _HEADER.pack_into(buf, 0, SNAPSHOT_VERSION, 0, len(items))
    pos = HEADER_SIZE
    for e in items:
        try:
            _ENTRY.pack_into(
                buf,
                pos,
                e.producer_id,
                e.epoch,
                e.last_sequence,
                e.last_offset,
                e.offset_delta,
                e.timestamp,
                e.coordinator_epoch,
                e.current_txn_first_offset,
            )
        except struct.error as exc:
            raise ValueError(f"snapshot entry field out of range: {e}: {exc}") from exc
        pos += ENTRY_SIZE
    # The CRC is patched in after serialization, exactly as Kafka does.
    struct.pack_into(">I", buf, 2, crc32c(memoryview(buf)[_CRC_START:]))
    return bytes(buf)


def decode_snapshot(data: bytes, source: str = "<bytes>") -> list[SnapshotEntry]:
    """Parse a snapshot file image; any defect raises CorruptSnapshotError naming `source`."""
    size = len(data)
    if size < HEADER_SIZE:
        raise CorruptSnapshotError(
            f"corrupt producer snapshot {source}: {size} bytes is shorter than the "
            f"{HEADER_SIZE}-byte header"
        )
    version, stored_crc, count = _HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(
            f"corrupt producer snapshot {source}: unknown version {version} "
            f"(expected {SNAPSHOT_VERSION})"
        )
    body = size - HEADER_SIZE
    if body % ENTRY_SIZE:
        raise CorruptSnapshotError(
            f"corrupt producer snapshot {source}: size {size} is not {HEADER_SIZE} + {ENTRY_SIZE}*n"
        )
    if count != body // ENTRY_SIZE:
        raise CorruptSnapshotError(
            f"corrupt producer snapshot {source}: header declares {count} entries "
            f"but the file holds {body // ENTRY_SIZE}"
        )
    computed = crc32c(memoryview(data)[_CRC_START:])
    if computed != stored_crc:
        raise CorruptSnapshotError(
            f"corrupt producer snapshot {source}: CRC mismatch "
            f"(stored 0x{stored_crc:08x}, computed 0x{computed:08x})"
        )
    return [SnapshotEntry(*fields) for fields in _ENTRY.iter_unpack(memoryview(data)[HEADER_SIZE:])]


def _write_all(fd: int, data: bytes) -> None:
    # Separate function so tests can inject ENOSPC without patching os globally.
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        disk_and_clock.disk_fsync(fd)
    finally:
        os.close(fd)


def write_snapshot(path: Path | str, entries: Iterable[SnapshotEntry], sync: bool = True) -> None:
    """Atomically (re)write `path`: tmp file, fsync, rename, fsync the directory.

    With sync=False the fsyncs are skipped (Kafka defers them on segment roll;
    call fsync_snapshot later). On any I/O error the tmp file is removed, the
    previous file at `path` is left untouched and KafkaStorageError is raised.
    """
    path = Path(path)
    data = encode_snapshot(entries)
    tmp = path.with_name(path.name + TMP_SUFFIX)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, data)
            if sync:
                disk_and_clock.disk_fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        if sync:
            _fsync_dir(path.parent)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        reason = "no space left on device" if exc.errno == errno.ENOSPC else str(exc)
        raise KafkaStorageError(f"failed to write producer snapshot {path}: {reason}") from exc


def fsync_snapshot(path: Path | str) -> None:
    """Make a snapshot written with sync=False durable (file and its directory entry)."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            disk_and_clock.disk_fsync(fd)
        finally:
            os.close(fd)
        _fsync_dir(path.parent)
    except OSError as exc:
        raise KafkaStorageError(f"failed to fsync producer snapshot {path}: {exc}") from exc


def read_snapshot(path: Path | str) -> list[SnapshotEntry]:
    """Read and validate a snapshot file.

    FileNotFoundError propagates unchanged; other I/O errors become KafkaStorageError.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise KafkaStorageError(f"failed to read producer snapshot {path}: {exc}") from exc
    return decode_snapshot(data, str(path))


def snapshot_path(directory: Path | str, offset: int) -> Path:
    """`<dir>/<offset as 20 digits>.snapshot`."""
    if offset < 0:
        raise ValueError(f"snapshot offset must be >= 0, got {offset}")
    return Path(directory) / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def snapshot_offset(path: Path | str) -> int | None:
    """The offset of a `*.snapshot` file name (text before the first '.'), else None."""
    name = Path(path).name
    if not name.endswith(SNAPSHOT_SUFFIX):
        return None
    prefix = name.split(".", 1)[0]
    if not prefix.isdigit() or not prefix.isascii():
        return None
    return int(prefix)


def list_snapshots(directory: Path | str) -> list[tuple[int, Path]]:
    """(offset, path) of every snapshot file in `directory`, sorted by offset.

    `.snapshot.deleted`, `.snapshot.tmp` and names without a numeric prefix are ignored;
    a missing directory has no snapshots.
    """
    directory = Path(directory)
    found: list[tuple[int, Path]] = []
    try:
        with os.scandir(directory) as it:
            for dirent in it:
                offset = snapshot_offset(dirent.name)
                if offset is not None and dirent.is_file():
                    found.append((offset, directory / dirent.name))
    except FileNotFoundError:
        return []
    found.sort(key=lambda item: item[0])
    return found
