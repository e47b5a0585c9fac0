"""Kafka's generic text checkpoint files (docs/replication-rules.md, 1.3).

Layout, UTF-8, every line terminated by ``\\n``::

    0            <- version
    2            <- number of entry lines
    orders 0 1500
    orders 1 1432

Parsing mirrors Kafka's ``CheckpointFile.CheckpointReadBuffer`` so that we accept and reject
the same files:

* lines end at ``\\n``, ``\\r\\n`` or ``\\r`` (Java ``readLine``); a zero-byte file, or one
  holding only the version line, has no entries;
* the version and count lines must be exactly a decimal int (no surrounding blanks);
* entry lines are split on runs of ASCII whitespace (Java ``\\s+``); trailing whitespace is
  ignored but leading whitespace yields an empty first field, which is rejected;
* a wrong version, an unparsable line or a count that differs from the number of entry lines
  raises CheckpointError naming the file (and the line).

Writes go through :func:`write_atomically` (tmp + fsync + rename + dir fsync).
"""

from __future__ import annotations

import os
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Generic, TypeVar

from .atomic_file import write_atomically
from .errors import CheckpointError, KafkaStorageError

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"

CURRENT_VERSION = 0

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# Java's \s: space, \t, \n, \x0B, \f, \r -- not Unicode whitespace as str.split() would use.
_JAVA_WHITESPACE = re.compile(r"[ \t\n\x0b\f\r]+")
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
# Integer.parseInt / Long.parseLong: optional sign, ASCII digits, nothing else.
_DECIMAL = re.compile(r"[+-]?[0-9]+")

T = TypeVar("T")


def parse_java_int(text: str, lo: int, hi: int) -> int | None:
    """Parse like Integer.parseInt/Long.parseLong (range [lo, hi]); None if Java would throw."""
    if not _DECIMAL.fullmatch(text):
        return None
    value = int(text)
    return value if lo <= value <= hi else None


def split_fields(line: str) -> list[str]:
    """Split an entry line the way Java's ``Pattern.compile("\\\\s+").split(line)`` does."""
    parts = _JAVA_WHITESPACE.split(line)
    while parts and parts[-1] == "":  # Java drops trailing empty strings, keeps leading ones
        parts.pop()
    return parts


def _split_lines(text: str) -> list[str]:
    if not text:
        return []
    lines = _LINE_BREAK.split(text)
    if lines[-1] == "":  # the final terminator does not start another line
        lines.pop()
    return lines


class CheckpointFile(ABC, Generic[T]):
    """One checkpoint file; subclasses define how an entry maps to a line.

    Like Kafka, constructing the object creates an empty file if none exists, so a fresh log
    dir contains zero-length checkpoints. Reads and writes on one object are serialised; two
    objects for the same path are not coordinated (the broker owns exactly one of each).
    """

    def __init__(self, path: Path, version: int = CURRENT_VERSION) -> None:
        self._path = Path(path)
        self._version = version
        self._lock = threading.Lock()
        try:
            fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            pass
        except OSError as e:
            raise KafkaStorageError(f"Error creating checkpoint file {self._path}: {e}") from e
        else:
            os.close(fd)

    @property
    def path(self) -> Path:
        return self._path

    @abstractmethod
    def _format_entry(self, entry: T) -> str: ...

    @abstractmethod
    def _parse_entry(self, fields: list[str]) -> T | None:
        """The entry for these (non-empty) fields, or None if they are malformed."""

    def _malformed(self, line: str) -> CheckpointError:
        return CheckpointError(f"Malformed line in checkpoint file {self._path}: {line!r}")

    def encode(self, entries: Sequence[T]) -> bytes:
        """The exact bytes ``write`` puts on disk for ``entries`` (in the given order)."""
        lines = [str(self._version), str(len(entries))]
        lines.extend(self._format_entry(e) for e in entries)
        return "".join(line + "\n" for line in lines).encode("utf-8")

    def write_entries(self, entries: Sequence[T]) -> None:
        data = self.encode(entries)
        with self._lock:
            write_atomically(self._path, data)

    def read_entries(self) -> list[T]:
        with self._lock:
            try:
                raw = self._path.read_bytes()
            except OSError as e:
                raise KafkaStorageError(f"Error reading checkpoint file {self._path}: {e}") from e
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CheckpointError(f"Checkpoint file {self._path} is not valid UTF-8: {e}") from e
        return self.decode(text)

    def decode(self, text: str) -> list[T]:
        lines = _split_lines(text)
        if not lines:
            return []
        version = parse_java_int(lines[0], INT32_MIN, INT32_MAX)
        if version is None:
            raise self._malformed(lines[0])
        if version != self._version:
            raise CheckpointError(
                f"Unrecognised version {version} (expected {self._version}) "
                f"in checkpoint file {self._path}"
            )
        if len(lines) == 1:
            return []
        expected = parse_java_int(lines[1], 0, INT32_MAX)
        if expected is None:
            raise self._malformed(lines[1])
        entries: list[T] = []
        for line in lines[2:]:
            fields = split_fields(line)
            entry = self._parse_entry(fields) if fields and all(fields) else None
            if entry is None:
                raise self._malformed(line)
            entries.append(entry)
        if len(entries) != expected:
            raise CheckpointError(
                f"Expected {expected} entries in checkpoint file {self._path}, "
                f"but found {len(entries)}"
            )
        return entries


def _int_and_long(int_field: str, long_field: str) -> tuple[int, int] | None:
    """Both entry formats end in a Java int and a Java long; None if either is not one."""
    a = parse_java_int(int_field, INT32_MIN, INT32_MAX)
    b = parse_java_int(long_field, INT64_MIN, INT64_MAX)
    return None if a is None or b is None else (a, b)


def _fits_int_and_long(a: int, b: int) -> bool:
    return INT32_MIN <= a <= INT32_MAX and INT64_MIN <= b <= INT64_MAX


def _check_no_whitespace(topic: str) -> None:
    # A blank would shift the fields and make the file unreadable (Kafka topic names are
    # [a-zA-Z0-9._-]+, so this only guards against programming errors).
    if not topic or _JAVA_WHITESPACE.search(topic):
        raise ValueError(f"topic {topic!r} cannot be stored in a checkpoint file")


class OffsetCheckpointFile(CheckpointFile[tuple[tuple[str, int], int]]):
    """``<topic> <partition> <offset>`` per line: recovery point, high watermark, log start
    offset and cleaner checkpoints of one log dir."""

    def _format_entry(self, entry: tuple[tuple[str, int], int]) -> str:
        (topic, partition), offset = entry
        _check_no_whitespace(topic)
        if not _fits_int_and_long(partition, offset):
            raise ValueError(f"entry {entry!r} out of range for a checkpoint file")
        return f"{topic} {partition} {offset}"

    def _parse_entry(self, fields: list[str]) -> tuple[tuple[str, int], int] | None:
        if len(fields) != 3:
            return None
        numbers = _int_and_long(fields[1], fields[2])
        if numbers is None:
            return None
        partition, offset = numbers
        return (fields[0], partition), offset

    def write(self, entries: Mapping[tuple[str, int], int]) -> None:
        # Kafka writes in hash-map order; sorting makes our files deterministic.
        self.write_entries(sorted(entries.items()))

    def read(self) -> dict[tuple[str, int], int]:
        # A duplicated partition keeps its last value, as Kafka's HashMap.put does.
        return dict(self.read_entries())


class LeaderEpochCheckpointFile(CheckpointFile[tuple[int, int]]):
    """``<epoch> <startOffset>`` per line, in increasing epoch order (one per partition dir)."""

    @classmethod
    def in_dir(cls, partition_dir: Path) -> LeaderEpochCheckpointFile:
        return cls(Path(partition_dir) / LEADER_EPOCH_CHECKPOINT)

    def _format_entry(self, entry: tuple[int, int]) -> str:
        epoch, start_offset = entry
        if not _fits_int_and_long(epoch, start_offset):
            raise ValueError(f"epoch entry {entry!r} out of range for a checkpoint file")
        return f"{epoch} {start_offset}"

    def _parse_entry(self, fields: list[str]) -> tuple[int, int] | None:
        return _int_and_long(fields[0], fields[1]) if len(fields) == 2 else None

    def write(self, entries: Sequence[tuple[int, int]]) -> None:
        self.write_entries(list(entries))

    def read(self) -> list[tuple[int, int]]:
        return self.read_entries()
