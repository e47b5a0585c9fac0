"""``partition.metadata``: the topic id of a partition directory (docs/architecture.md (storage)).

Exact bytes, no trailing newline::

    version: 0
    topic_id: q4RDr2lTR8y1Wy6eYUpl6g

Topic ids are rendered as Kafka's ``Uuid.toString``: URL-safe base64 of the 16 big-endian
bytes without padding (22 characters).

Reading mirrors Kafka's ``PartitionMetadataReadBuffer``: each of the first two lines is split
once on ``:`` followed by whitespace into a key and a value; the key must be ``version`` /
``topic_id``, the version an int >= 0 and the topic id a valid, non-zero Uuid. Like Kafka we
ignore anything after the second line (e.g. a trailing newline written by hand).

The file is written atomically and must exist before the first record is appended, so data
never sits on disk without a topic id.
"""

from __future__ import annotations

import base64
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

from .atomic_file import write_atomically
from .errors import CheckpointError, KafkaStorageError

PARTITION_METADATA_FILE = "partition.metadata"
CURRENT_VERSION = 0

ZERO_UUID = uuid.UUID(int=0)
ONE_UUID = uuid.UUID(int=1)  # Kafka's METADATA_TOPIC_ID; reserved like ZERO_UUID
ZERO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"

# Java's Base64 URL decoder accepts the padded form too; only 16-byte results are valid.
_TOPIC_ID = re.compile(r"[A-Za-z0-9_-]{22}(?:==)?")
_KEY_SEPARATOR = re.compile(r":[ \t\n\x0b\f\r]+")  # Java ":\s+"
_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_DECIMAL = re.compile(r"[+-]?[0-9]+")


def uuid_to_topic_id(value: uuid.UUID) -> str:
    """Render a UUID the way Kafka's ``Uuid.toString`` does (22 chars, URL-safe, unpadded)."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def topic_id_to_uuid(topic_id: str) -> uuid.UUID:
    """Parse Kafka's rendering of a Uuid; ValueError if it is not one."""
    if not _TOPIC_ID.fullmatch(topic_id):
        raise ValueError(f"{topic_id!r} is not a base64-encoded topic id")
    return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id[:22] + "=="))


def new_topic_id() -> str:
    """A random version-4 topic id that Kafka's ``Uuid.randomUuid`` could also have produced.

    Kafka never hands out the reserved ids 0 and 1, nor ids whose text starts with ``-``
    (they would look like command-line options).
    """
    while True:
        value = uuid.uuid4()
        topic_id = uuid_to_topic_id(value)
        if value not in (ZERO_UUID, ONE_UUID) and not topic_id.startswith("-"):
            return topic_id


@dataclass(frozen=True)
class PartitionMetadata:
    version: int
    topic_id: str  # canonical 22-character form

    def encode(self) -> bytes:
        return f"version: {self.version}\ntopic_id: {self.topic_id}".encode()


class PartitionMetadataFile:
    """The ``partition.metadata`` file at ``path``."""

    def __init__(self, path: Path) -> None:
        self._path = Path(path)

    @classmethod
    def in_dir(cls, partition_dir: Path) -> PartitionMetadataFile:
        return cls(Path(partition_dir) / PARTITION_METADATA_FILE)

    @property
    def path(self) -> Path:
        return self._path

    def exists(self) -> bool:
        return self._path.exists()

    def write(self, topic_id: str) -> None:
        """Atomically write the current version and ``topic_id`` (ValueError if invalid/zero)."""
        value = topic_id_to_uuid(topic_id)
        if value == ZERO_UUID:
            raise ValueError("the all-zero topic id cannot be written")
        write_atomically(self._path, PartitionMetadata(CURRENT_VERSION, topic_id[:22]).encode())

    def read(self) -> PartitionMetadata:
        try:
            raw = self._path.read_bytes()
        except OSError as e:
            raise KafkaStorageError(
                f"Error reading partition metadata file {self._path}: {e}"
            ) from e
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CheckpointError(
                f"Partition metadata file {self._path} is not valid UTF-8: {e}"
            ) from e
        lines = _LINE_BREAK.split(text) if text else []

        version_text = self._value(lines, 0, "version")
        if not _DECIMAL.fullmatch(version_text) or not -(2**31) <= int(version_text) < 2**31:
            raise self._malformed(lines[0])
        version = int(version_text)
        # Newer versions are accepted so that a downgrade can still read the file.
        if version < CURRENT_VERSION:
            raise CheckpointError(
                f"Unrecognized version of partition metadata file {self._path}: {version}"
            )

        id_text = self._value(lines, 1, "topic_id")
        try:
            value = topic_id_to_uuid(id_text)
        except ValueError:
            raise self._malformed(lines[1]) from None
        if value == ZERO_UUID:
            raise CheckpointError(f"Invalid topic ID in partition metadata file {self._path}")
        return PartitionMetadata(version, uuid_to_topic_id(value))

    def delete(self) -> None:
        self._path.unlink(missing_ok=True)

    def _malformed(self, line: str) -> CheckpointError:
        return CheckpointError(f"Malformed line in partition metadata file {self._path}: {line!r}")

    def _value(self, lines: list[str], index: int, key: str) -> str:
        if index >= len(lines):
            raise CheckpointError(f"Partition metadata file {self._path} has no {key} line")
        parts = _KEY_SEPARATOR.split(lines[index], maxsplit=1)
        if len(parts) != 2 or parts[0] != key:
            raise self._malformed(lines[index])
        return parts[1]
