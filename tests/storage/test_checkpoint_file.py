"""Text checkpoint files (docs/architecture.md (storage)) and the atomic write underneath them."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog.storage import atomic_file
from seglog.storage.atomic_file import tmp_path_for, write_atomically
from seglog.storage.checkpoint_file import (
    LEADER_EPOCH_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
)
from seglog.storage.errors import CheckpointError, KafkaStorageError

RECOVERY_EXAMPLE = b"0\n2\norders 0 1500\norders 1 1432\n"
EPOCH_EXAMPLE = b"0\n3\n0 0\n2 100\n5 250\n"


def test_file_names() -> None:
    assert RECOVERY_POINT_CHECKPOINT == "recovery-point-offset-checkpoint"
    assert REPLICATION_OFFSET_CHECKPOINT == "replication-offset-checkpoint"
    assert LOG_START_OFFSET_CHECKPOINT == "log-start-offset-checkpoint"
    assert LEADER_EPOCH_CHECKPOINT == "leader-epoch-checkpoint"


# ----------------------------------------------------------------- format


def test_recovery_point_example_exact_bytes(tmp_path: Path) -> None:
    path = tmp_path / RECOVERY_POINT_CHECKPOINT
    cp = OffsetCheckpointFile(path)
    # Insertion order deliberately unsorted: output must be sorted by (topic, partition).
    cp.write({("orders", 1): 1432, ("orders", 0): 1500})
    assert path.read_bytes() == RECOVERY_EXAMPLE
    assert cp.read() == {("orders", 0): 1500, ("orders", 1): 1432}


def test_leader_epoch_example_exact_bytes(tmp_path: Path) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    cp = LeaderEpochCheckpointFile(path)
    cp.write([(0, 0), (2, 100), (5, 250)])
    assert path.read_bytes() == EPOCH_EXAMPLE
    assert cp.read() == [(0, 0), (2, 100), (5, 250)]


def test_reads_kafka_written_example(tmp_path: Path) -> None:
    path = tmp_path / RECOVERY_POINT_CHECKPOINT
    path.write_bytes(RECOVERY_EXAMPLE)
    assert OffsetCheckpointFile(path).read() == {("orders", 0): 1500, ("orders", 1): 1432}
    epoch_path = tmp_path / LEADER_EPOCH_CHECKPOINT
    epoch_path.write_bytes(EPOCH_EXAMPLE)
    assert LeaderEpochCheckpointFile(epoch_path).read() == [(0, 0), (2, 100), (5, 250)]


def test_empty_write_is_version_and_zero_count(tmp_path: Path) -> None:
    cp = OffsetCheckpointFile(tmp_path / "cp")
    cp.write({})
    assert cp.path.read_bytes() == b"0\n0\n"
    assert cp.read() == {}


def test_constructor_creates_empty_file(tmp_path: Path) -> None:
    path = tmp_path / REPLICATION_OFFSET_CHECKPOINT
    cp = OffsetCheckpointFile(path)
    assert path.is_file() and path.read_bytes() == b""
    assert cp.read() == {}
    assert LeaderEpochCheckpointFile.in_dir(tmp_path).read() == []
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_bytes() == b""


def test_constructor_keeps_existing_content(tmp_path: Path) -> None:
    path = tmp_path / RECOVERY_POINT_CHECKPOINT
    path.write_bytes(RECOVERY_EXAMPLE)
    OffsetCheckpointFile(path)
    assert path.read_bytes() == RECOVERY_EXAMPLE


def test_constructor_in_missing_dir_raises_storage_error(tmp_path: Path) -> None:
    with pytest.raises(KafkaStorageError, match="nope"):
        OffsetCheckpointFile(tmp_path / "nope" / "cp")


@pytest.mark.parametrize(
    "content, expected",
    [
        (b"", {}),
        (b"0", {}),  # version line only
        (b"0\n", {}),
        (b"0\n0\n", {}),
        (b"0\n0", {}),
        (b"0\n1\nt 0 5", {("t", 0): 5}),  # last line unterminated
        (b"0\r\n1\r\nt 0 5\r\n", {("t", 0): 5}),  # Java readLine accepts CRLF
        (b"0\r1\rt 0 5\r", {("t", 0): 5}),
        (b"0\n1\nt\t0   5 \t\n", {("t", 0): 5}),  # whitespace runs; trailing blanks ignored
        (b"+0\n+1\nt +3 -7\n", {("t", 3): -7}),  # Integer.parseInt accepts signs
        (b"0\n2\nt 0 5\nt 0 9\n", {("t", 0): 9}),  # duplicate: last wins like HashMap.put
        (b"0\n1\nmy-topic.v2_x 12 9223372036854775807\n", {("my-topic.v2_x", 12): 2**63 - 1}),
    ],
)
def test_offset_checkpoint_accepted_inputs(tmp_path: Path, content: bytes, expected: dict) -> None:
    path = tmp_path / "cp"
    path.write_bytes(content)
    assert OffsetCheckpointFile(path).read() == expected


OFFSET_MALFORMED = [
    # (content, text that must appear in the message besides the path)
    (b"1\n0\n", "version 1"),
    (b"-1\n0\n", "version -1"),
    (b"x\n", "'x'"),
    (b"0 \n0\n", "'0 '"),  # parseInt does not trim
    (b" 0\n0\n", "' 0'"),
    (b"\n", "''"),
    (b"0\nx\n", "'x'"),
    (b"0\n-1\n", "'-1'"),
    (b"0\n1.0\n", "'1.0'"),
    (b"0\n2\norders 0 1\n", "Expected 2 entries"),
    (b"0\n0\norders 0 1\n", "Expected 0 entries"),
    (b"0\n1\norders 0 1\norders 1 2\n", "Expected 1 entries"),
    (b"0\n1\norders 0\n", "'orders 0'"),
    (b"0\n1\norders 0 1 2\n", "'orders 0 1 2'"),
    (b"0\n1\norders x 1\n", "'orders x 1'"),
    (b"0\n1\norders 0 1.5\n", "'orders 0 1.5'"),
    (b"0\n1\norders 0 0x10\n", "'orders 0 0x10'"),
    (b"0\n1\norders 0 1_000\n", "'orders 0 1_000'"),
    (b"0\n1\n orders 0 1\n", "' orders 0 1'"),  # Java split keeps a leading empty field
    (b"0\n1\norders 0 9223372036854775808\n", "9223372036854775808"),
    (b"0\n1\norders 2147483648 0\n", "2147483648"),
    (b"0\n1\n\n", "''"),
    (b"0\n0\n\n", "''"),  # a blank line after the entries is an entry line
    (b"0\n1\norders 0 \xd9\xa1\n", "orders"),  # non-ASCII digit
    (b"0\n1\n\xff 0 1\n", "UTF-8"),
]


@pytest.mark.parametrize("content, fragment", OFFSET_MALFORMED)
def test_offset_checkpoint_malformed(tmp_path: Path, content: bytes, fragment: str) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_bytes(content)
    with pytest.raises(CheckpointError) as info:
        OffsetCheckpointFile(path).read()
    assert str(path) in str(info.value)
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    "content, fragment",
    [
        (b"0\n1\n1\n", "'1'"),
        (b"0\n1\n1 2 3\n", "'1 2 3'"),
        (b"0\n1\na 0\n", "'a 0'"),
        (b"0\n1\n2147483648 0\n", "2147483648"),
        (b"0\n1\n0 x\n", "'0 x'"),
        (b"0\n2\n0 0\n", "Expected 2 entries"),
        (b"7\n0\n", "version 7"),
    ],
)
def test_leader_epoch_checkpoint_malformed(tmp_path: Path, content: bytes, fragment: str) -> None:
    path = tmp_path / LEADER_EPOCH_CHECKPOINT
    path.write_bytes(content)
    with pytest.raises(CheckpointError) as info:
        LeaderEpochCheckpointFile(path).read()
    assert str(path) in str(info.value)
    assert fragment in str(info.value)


def test_read_of_vanished_file_is_storage_error(tmp_path: Path) -> None:
    cp = OffsetCheckpointFile(tmp_path / "cp")
    cp.path.unlink()
    with pytest.raises(KafkaStorageError, match="cp"):
        cp.read()


@pytest.mark.parametrize("topic", ["", "two words", "tab\there", "nl\n"])
def test_write_rejects_topic_that_would_corrupt_file(tmp_path: Path, topic: str) -> None:
    cp = OffsetCheckpointFile(tmp_path / "cp")
    cp.write({("orders", 0): 1})
    with pytest.raises(ValueError):
        cp.write({(topic, 0): 1})
    assert cp.read() == {("orders", 0): 1}


def test_write_rejects_out_of_range_values(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        OffsetCheckpointFile(tmp_path / "a").write({("t", 2**31): 0})
    with pytest.raises(ValueError):
        OffsetCheckpointFile(tmp_path / "b").write({("t", 0): 2**63})
    with pytest.raises(ValueError):
        LeaderEpochCheckpointFile(tmp_path / "c").write([(2**31, 0)])


# ---------------------------------------------------------- property tests

TOPICS = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
    min_size=1,
    max_size=20,
)
OFFSET_MAPS = st.dictionaries(
    st.tuples(TOPICS, st.integers(0, 2**31 - 1)),
    st.integers(-(2**63), 2**63 - 1),
    max_size=20,
)


def naive_offset_file(entries: dict[tuple[str, int], int]) -> bytes:
    lines = ["0", str(len(entries))]
    for topic, partition in sorted(entries):
        lines.append(f"{topic} {partition} {entries[(topic, partition)]}")
    return ("\n".join(lines) + "\n").encode()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(first=OFFSET_MAPS, second=OFFSET_MAPS)
def test_offset_checkpoint_roundtrip(tmp_path: Path, first: dict, second: dict) -> None:
    path = Path(tempfile.mkdtemp(dir=tmp_path)) / "cp"
    cp = OffsetCheckpointFile(path)
    for entries in (first, second):  # a rewrite fully replaces the old content
        cp.write(entries)
        assert path.read_bytes() == naive_offset_file(entries)
        assert cp.read() == entries
        assert OffsetCheckpointFile(path).read() == entries
    assert not tmp_path_for(path).exists()


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    entries=st.lists(
        st.tuples(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1)),
        max_size=20,
    )
)
def test_leader_epoch_checkpoint_roundtrip(tmp_path: Path, entries: list) -> None:
    path = Path(tempfile.mkdtemp(dir=tmp_path)) / LEADER_EPOCH_CHECKPOINT
    cp = LeaderEpochCheckpointFile(path)
    cp.write(entries)
    expected = f"0\n{len(entries)}\n" + "".join(f"{e} {o}\n" for e, o in entries)
    assert path.read_bytes() == expected.encode()
    assert cp.read() == entries


# ------------------------------------------------------------ atomic write


def test_tmp_path_appends_suffix(tmp_path: Path) -> None:
    assert tmp_path_for(tmp_path / "a.log") == tmp_path / "a.log.tmp"
    assert tmp_path_for(tmp_path / "leader-epoch-checkpoint").name == "leader-epoch-checkpoint.tmp"


def test_write_atomically_replaces_content_and_leaves_no_tmp(tmp_path: Path) -> None:
    path = tmp_path / "f"
    write_atomically(path, b"old")
    tmp_path_for(path).write_bytes(b"stale tmp from a crash")
    write_atomically(path, b"new")
    assert path.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_write_atomically_order_of_syscalls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Data is fsynced before the rename, and the directory is fsynced after it."""
    path = tmp_path / "f"
    events: list[str] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        kind = "dir" if os.path.isdir(f"/proc/self/fd/{fd}") else "file"
        events.append(f"fsync-{kind}")
        real_fsync(fd)

    def replace(src: object, dst: object) -> None:
        events.append("replace")
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    write_atomically(path, b"data")
    assert events == ["fsync-file", "replace", "fsync-dir"]
    assert path.read_bytes() == b"data"


def _enospc(*args: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("syscall", ["write", "fsync", "replace", "open"])
def test_write_atomically_failure_keeps_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, syscall: str
) -> None:
    path = tmp_path / "f"
    write_atomically(path, b"old content")
    monkeypatch.setattr(os, syscall, _enospc)
    with pytest.raises(KafkaStorageError) as info:
        write_atomically(path, b"new content that does not fit")
    monkeypatch.undo()
    assert str(path) in str(info.value)
    assert "No space left on device" in str(info.value)
    assert isinstance(info.value.__cause__, OSError)
    assert path.read_bytes() == b"old content"
    assert not tmp_path_for(path).exists()


def test_write_atomically_partial_writes_are_completed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_write = os.write
    monkeypatch.setattr(os, "write", lambda fd, data: real_write(fd, bytes(data[:3])))
    write_atomically(tmp_path / "f", b"0123456789")
    monkeypatch.undo()
    assert (tmp_path / "f").read_bytes() == b"0123456789"


def test_dir_fsync_failure_is_storage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail_dir(directory: Path) -> None:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(atomic_file, "fsync_dir", fail_dir)
    with pytest.raises(KafkaStorageError, match="I/O error"):
        write_atomically(tmp_path / "f", b"x")


def test_checkpoint_write_on_full_disk_keeps_previous_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cp = OffsetCheckpointFile(tmp_path / RECOVERY_POINT_CHECKPOINT)
    cp.write({("orders", 0): 1500, ("orders", 1): 1432})
    monkeypatch.setattr(os, "write", _enospc)
    with pytest.raises(KafkaStorageError, match=RECOVERY_POINT_CHECKPOINT):
        cp.write({("orders", 0): 2000})
    monkeypatch.undo()
    assert cp.path.read_bytes() == RECOVERY_EXAMPLE
    assert cp.read() == {("orders", 0): 1500, ("orders", 1): 1432}


def test_write_into_missing_dir_is_storage_error(tmp_path: Path) -> None:
    with pytest.raises(KafkaStorageError, match="gone"):
        write_atomically(tmp_path / "gone" / "f", b"x")
