"""partition.metadata and Kafka's Uuid rendering (docs/architecture.md (storage))."""

from __future__ import annotations

import errno
import os
import re
import tempfile
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog.storage import partition_metadata as pm
from seglog.storage.atomic_file import tmp_path_for
from seglog.storage.errors import CheckpointError, KafkaStorageError
from seglog.storage.partition_metadata import (
    PARTITION_METADATA_FILE,
    ZERO_TOPIC_ID,
    PartitionMetadata,
    PartitionMetadataFile,
    new_topic_id,
    topic_id_to_uuid,
    uuid_to_topic_id,
)

EXAMPLE_ID = "q4RDr2lTR8y1Wy6eYUpl6g"
EXAMPLE_BYTES = b"version: 0\ntopic_id: q4RDr2lTR8y1Wy6eYUpl6g"
# The 16 bytes behind EXAMPLE_ID (a version-4 uuid: note the "4" opening the third group).
EXAMPLE_UUID = uuid.UUID("ab8443af-6953-47cc-b55b-2e9e614a65ea")


def test_example_exact_bytes_no_trailing_newline(tmp_path: Path) -> None:
    f = PartitionMetadataFile.in_dir(tmp_path)
    assert f.path == tmp_path / PARTITION_METADATA_FILE == tmp_path / "partition.metadata"
    assert not f.exists()
    f.write(EXAMPLE_ID)
    assert f.path.read_bytes() == EXAMPLE_BYTES
    assert f.exists()
    assert f.read() == PartitionMetadata(version=0, topic_id=EXAMPLE_ID)
    assert not tmp_path_for(f.path).exists()


def test_reads_kafka_written_file(tmp_path: Path) -> None:
    (tmp_path / PARTITION_METADATA_FILE).write_bytes(EXAMPLE_BYTES)
    assert PartitionMetadataFile.in_dir(tmp_path).read().topic_id == EXAMPLE_ID


def test_uuid_rendering_matches_kafka() -> None:
    assert topic_id_to_uuid(EXAMPLE_ID) == EXAMPLE_UUID
    assert uuid_to_topic_id(EXAMPLE_UUID) == EXAMPLE_ID
    assert uuid_to_topic_id(uuid.UUID(int=0)) == ZERO_TOPIC_ID == "A" * 22
    assert uuid_to_topic_id(uuid.UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"
    # URL-safe alphabet: 0xfb 0xff -> "-_" rather than "+/".
    assert uuid_to_topic_id(uuid.UUID(bytes=b"\xfb\xff" + b"\x00" * 14)).startswith("-_")


@pytest.mark.parametrize(
    "text", ["", "short", EXAMPLE_ID[:21], EXAMPLE_ID + "A", EXAMPLE_ID + "=", "+" * 22, "/" * 22]
)
def test_topic_id_to_uuid_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        topic_id_to_uuid(text)


def test_topic_id_padded_form_accepted_like_java_decoder() -> None:
    assert topic_id_to_uuid(EXAMPLE_ID + "==") == EXAMPLE_UUID


def test_new_topic_id_shape() -> None:
    ids = {new_topic_id() for _ in range(200)}
    assert len(ids) == 200
    for topic_id in ids:
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", topic_id)
        assert not topic_id.startswith("-")
        assert topic_id_to_uuid(topic_id).version == 4


def test_new_topic_id_skips_reserved_and_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    dash_first = uuid.UUID(bytes=b"\xf8" + b"\x11" * 15)  # 0xf8 >> 2 == 62 -> '-'
    good = uuid.UUID(bytes=b"\x10" * 16)
    candidates = iter([uuid.UUID(int=0), uuid.UUID(int=1), dash_first, good])
    monkeypatch.setattr(pm.uuid, "uuid4", lambda: next(candidates))
    assert uuid_to_topic_id(dash_first).startswith("-")
    assert new_topic_id() == uuid_to_topic_id(good)


def test_write_rejects_invalid_ids(tmp_path: Path) -> None:
    f = PartitionMetadataFile.in_dir(tmp_path)
    with pytest.raises(ValueError):
        f.write(ZERO_TOPIC_ID)
    with pytest.raises(ValueError):
        f.write("not-a-topic-id")
    assert not f.exists()


def test_padded_id_written_canonically(tmp_path: Path) -> None:
    f = PartitionMetadataFile.in_dir(tmp_path)
    f.write(EXAMPLE_ID + "==")
    assert f.path.read_bytes() == EXAMPLE_BYTES


@pytest.mark.parametrize(
    "content",
    [
        EXAMPLE_BYTES + b"\n",  # Kafka reads two lines and ignores the rest
        EXAMPLE_BYTES + b"\nextra: stuff\n",
        b"version: 0\r\ntopic_id: q4RDr2lTR8y1Wy6eYUpl6g",
        b"version:\t  0\ntopic_id:  q4RDr2lTR8y1Wy6eYUpl6g",
        b"version: 0\ntopic_id: q4RDr2lTR8y1Wy6eYUpl6g==",
    ],
)
def test_accepted_variants(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / PARTITION_METADATA_FILE
    path.write_bytes(content)
    assert PartitionMetadataFile(path).read() == PartitionMetadata(0, EXAMPLE_ID)


def test_newer_version_is_accepted_for_downgrades(tmp_path: Path) -> None:
    path = tmp_path / PARTITION_METADATA_FILE
    path.write_bytes(b"version: 3\ntopic_id: " + EXAMPLE_ID.encode())
    assert PartitionMetadataFile(path).read() == PartitionMetadata(3, EXAMPLE_ID)


@pytest.mark.parametrize(
    "content, fragment",
    [
        (b"", "no version line"),
        (b"version: 0", "no topic_id line"),
        (b"version: 0\n", "''"),
        (b"version:0\ntopic_id: q4RDr2lTR8y1Wy6eYUpl6g", "'version:0'"),
        (b"version 0\ntopic_id: q4RDr2lTR8y1Wy6eYUpl6g", "'version 0'"),
        (b"Version: 0\ntopic_id: q4RDr2lTR8y1Wy6eYUpl6g", "'Version: 0'"),
        (b" version: 0\ntopic_id: q4RDr2lTR8y1Wy6eYUpl6g", "' version: 0'"),
        (b"version: x\ntopic_id: q4RDr2lTR8y1Wy6eYUpl6g", "'version: x'"),
        (b"version: 0 \ntopic_id: q4RDr2lTR8y1Wy6eYUpl6g", "'version: 0 '"),
        (b"version: 0 1\ntopic_id: q4RDr2lTR8y1Wy6eYUpl6g", "'version: 0 1'"),
        (b"version: -1\ntopic_id: q4RDr2lTR8y1Wy6eYUpl6g", "Unrecognized version"),
        (b"topic_id: q4RDr2lTR8y1Wy6eYUpl6g\nversion: 0", "'topic_id: q4RDr2lTR8y1Wy6eYUpl6g'"),
        (b"version: 0\ntopic: q4RDr2lTR8y1Wy6eYUpl6g", "'topic: q4RDr2lTR8y1Wy6eYUpl6g'"),
        (b"version: 0\ntopic_id: q4RDr2lTR8y1Wy6eYUpl", "'topic_id: q4RDr2lTR8y1Wy6eYUpl'"),
        (b"version: 0\ntopic_id: q4RDr2lTR8y1Wy6eYUpl6g x", "'topic_id: q4RDr2lTR8y1Wy6eYUpl6g x'"),
        (b"version: 0\ntopic_id: q4RDr2lTR8y1Wy6eYUp+6g", "'topic_id: q4RDr2lTR8y1Wy6eYUp+6g'"),
        (b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA", "Invalid topic ID"),
        (b"version: 0\ntopic_id: \xff", "UTF-8"),
    ],
)
def test_malformed_files(tmp_path: Path, content: bytes, fragment: str) -> None:
    path = tmp_path / PARTITION_METADATA_FILE
    path.write_bytes(content)
    with pytest.raises(CheckpointError) as info:
        PartitionMetadataFile(path).read()
    assert str(path) in str(info.value)
    assert fragment in str(info.value)


def test_missing_file_is_storage_error(tmp_path: Path) -> None:
    with pytest.raises(KafkaStorageError, match=PARTITION_METADATA_FILE):
        PartitionMetadataFile.in_dir(tmp_path).read()


def test_delete(tmp_path: Path) -> None:
    f = PartitionMetadataFile.in_dir(tmp_path)
    f.write(EXAMPLE_ID)
    f.delete()
    assert not f.exists()
    f.delete()  # idempotent


def test_failed_write_keeps_previous_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = PartitionMetadataFile.in_dir(tmp_path)
    f.write(EXAMPLE_ID)

    def enospc(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", enospc)
    with pytest.raises(KafkaStorageError, match="No space left"):
        f.write(new_topic_id())
    monkeypatch.undo()
    assert f.path.read_bytes() == EXAMPLE_BYTES
    assert not tmp_path_for(f.path).exists()


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=st.uuids(allow_nil=False))
def test_roundtrip(tmp_path: Path, value: uuid.UUID) -> None:
    topic_id = uuid_to_topic_id(value)
    assert len(topic_id) == 22 and "=" not in topic_id
    assert topic_id_to_uuid(topic_id) == value
    f = PartitionMetadataFile.in_dir(Path(tempfile.mkdtemp(dir=tmp_path)))
    f.write(topic_id)
    assert f.path.read_bytes() == f"version: 0\ntopic_id: {topic_id}".encode()
    assert f.read() == PartitionMetadata(0, topic_id)
