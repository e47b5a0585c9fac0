"""Producer snapshot files: golden bytes of a worked example, round trips, corruption."""

from __future__ import annotations

import errno
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog.storage import producer_snapshot as ps
from seglog.storage.crc import crc32c
from seglog.storage.errors import CorruptSnapshotError, KafkaStorageError
from seglog.storage.producer_snapshot import (
    SnapshotEntry,
    decode_snapshot,
    encode_snapshot,
    list_snapshots,
    read_snapshot,
    snapshot_offset,
    snapshot_path,
    write_snapshot,
)

# docs/architecture.md (storage) worked example.
GOLDEN_ENTRIES = [
    SnapshotEntry(
        producer_id=1000,
        epoch=0,
        last_sequence=9,
        last_offset=41,
        offset_delta=4,
        timestamp=1700000000005,
        coordinator_epoch=-1,
        current_txn_first_offset=-1,
    ),
    SnapshotEntry(
        producer_id=2000,
        epoch=3,
        last_sequence=119,
        last_offset=60,
        offset_delta=2,
        timestamp=1700000000007,
        coordinator_epoch=12,
        current_txn_first_offset=55,
    ),
]
GOLDEN_BYTES = bytes.fromhex(
    "00 01 a9 7a 02 69 00 00 00 02 00 00 00 00 00 00"
    "03 e8 00 00 00 00 00 09 00 00 00 00 00 00 00 29"
    "00 00 00 04 00 00 01 8b cf e5 68 05 ff ff ff ff"
    "ff ff ff ff ff ff ff ff 00 00 00 00 00 00 07 d0"
    "00 03 00 00 00 77 00 00 00 00 00 00 00 3c 00 00"
    "00 02 00 00 01 8b cf e5 68 07 00 00 00 0c 00 00"
    "00 00 00 00 00 37"
)
GOLDEN_EMPTY = bytes.fromhex("00 01 48 67 4b c7 00 00 00 00")


def _with_fixed_crc(data: bytearray) -> bytes:
    struct.pack_into(">I", data, 2, crc32c(bytes(data[6:])))
    return bytes(data)


def test_golden_worked_example_bytes(tmp_path: Path) -> None:
    path = snapshot_path(tmp_path, 61)
    write_snapshot(path, GOLDEN_ENTRIES)
    assert path.read_bytes() == GOLDEN_BYTES
    assert len(GOLDEN_BYTES) == 10 + 46 * 2
    assert read_snapshot(path) == GOLDEN_ENTRIES


def test_golden_empty_snapshot(tmp_path: Path) -> None:
    path = snapshot_path(tmp_path, 0)
    write_snapshot(path, [])
    assert path.read_bytes() == GOLDEN_EMPTY
    assert read_snapshot(path) == []


def test_entries_are_written_in_the_given_order() -> None:
    reversed_bytes = encode_snapshot(list(reversed(GOLDEN_ENTRIES)))
    assert reversed_bytes != GOLDEN_BYTES
    assert decode_snapshot(reversed_bytes) == list(reversed(GOLDEN_ENTRIES))


int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
entries_strategy = st.lists(
    st.builds(SnapshotEntry, int64, int16, int32, int64, int32, int64, int32, int64),
    max_size=20,
)


@given(entries_strategy)
def test_encode_decode_round_trip(entries: list[SnapshotEntry]) -> None:
    data = encode_snapshot(entries)
    assert len(data) == 10 + 46 * len(entries)
    assert decode_snapshot(data) == entries


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=50)
@given(entries_strategy)
def test_file_round_trip(tmp_path: Path, entries: list[SnapshotEntry]) -> None:
    path = snapshot_path(tmp_path, 7)
    write_snapshot(path, entries, sync=False)
    assert read_snapshot(path) == entries


def test_out_of_range_field_is_rejected_before_writing(tmp_path: Path) -> None:
    path = snapshot_path(tmp_path, 1)
    bad = SnapshotEntry(1, 2**15, 0, 0, 0, 0, 0, -1)  # epoch does not fit int16
    with pytest.raises(ValueError, match="out of range"):
        write_snapshot(path, [bad])
    assert not path.exists()


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (lambda b: b"", "shorter than"),
        (lambda b: b[:9], "shorter than"),
        (lambda b: b"\x00\x02" + b[2:], "unknown version 2"),
        (lambda b: b"\x00\x00" + b[2:], "unknown version 0"),
        (lambda b: b + b"\x00", "not 10 + 46"),
        (lambda b: b[:-1], "not 10 + 46"),
        (lambda b: _with_fixed_crc(bytearray(b[:6] + b"\x00\x00\x00\x03" + b[10:])), "declares 3"),
        (lambda b: _with_fixed_crc(bytearray(b[:6] + b"\xff\xff\xff\xff" + b[10:])), "declares -1"),
        (lambda b: b[:20] + bytes([b[20] ^ 0x01]) + b[21:], "CRC mismatch"),
        (lambda b: b[:2] + b"\x00\x00\x00\x00" + b[6:], "CRC mismatch"),
    ],
    ids=[
        "empty-file",
        "truncated-header",
        "version-2",
        "version-0",
        "trailing-byte",
        "truncated-entry",
        "count-too-big",
        "count-negative",
        "flipped-bit",
        "zeroed-crc",
    ],
)
def test_corrupt_snapshot_is_rejected(
    tmp_path: Path, mutate: Callable[[bytes], bytes], problem: str
) -> None:
    path = snapshot_path(tmp_path, 61)
    path.write_bytes(mutate(GOLDEN_BYTES))
    with pytest.raises(CorruptSnapshotError) as info:
        read_snapshot(path)
    assert path.name in str(info.value)
    assert problem in str(info.value)


def test_corrupt_empty_snapshot_count(tmp_path: Path) -> None:
    path = snapshot_path(tmp_path, 5)
    path.write_bytes(_with_fixed_crc(bytearray(GOLDEN_EMPTY[:6] + b"\x00\x00\x00\x01")))
    with pytest.raises(CorruptSnapshotError, match="declares 1 entries but the file holds 0"):
        read_snapshot(path)


def test_missing_file_raises_file_not_found(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_snapshot(snapshot_path(tmp_path, 3))


def test_snapshot_path_is_twenty_digits(tmp_path: Path) -> None:
    assert snapshot_path(tmp_path, 0).name == "00000000000000000000.snapshot"
    assert snapshot_path(tmp_path, 368769).name == "00000000000000368769.snapshot"
    assert snapshot_path(tmp_path, 2**63 - 1).name == "09223372036854775807.snapshot"
    assert snapshot_path(tmp_path, 5).parent == tmp_path
    with pytest.raises(ValueError):
        snapshot_path(tmp_path, -1)


def test_snapshot_offset_parses_prefix() -> None:
    assert snapshot_offset("00000000000000000042.snapshot") == 42
    assert snapshot_offset("00000000000000000042.snapshot.deleted") is None
    assert snapshot_offset("00000000000000000042.snapshot.tmp") is None
    assert snapshot_offset("00000000000000000042.log") is None
    assert snapshot_offset("abc.snapshot") is None


def test_list_snapshots_sorted_and_filtered(tmp_path: Path) -> None:
    for offset in (300, 7, 42):
        write_snapshot(snapshot_path(tmp_path, offset), [], sync=False)
    (tmp_path / "00000000000000000001.snapshot.deleted").write_bytes(GOLDEN_EMPTY)
    (tmp_path / "00000000000000000002.snapshot.tmp").write_bytes(GOLDEN_EMPTY)
    (tmp_path / "00000000000000000003.log").write_bytes(b"")
    (tmp_path / "junk.snapshot").write_bytes(b"")
    (tmp_path / "00000000000000000004.snapshot").mkdir()
    listed = list_snapshots(tmp_path)
    assert [o for o, _ in listed] == [7, 42, 300]
    assert [p for _, p in listed] == [snapshot_path(tmp_path, o) for o in (7, 42, 300)]


def test_list_snapshots_of_missing_dir_is_empty(tmp_path: Path) -> None:
    assert list_snapshots(tmp_path / "absent") == []


def test_write_replaces_existing_file_and_leaves_no_tmp(tmp_path: Path) -> None:
    path = snapshot_path(tmp_path, 61)
    write_snapshot(path, [])
    write_snapshot(path, GOLDEN_ENTRIES)
    assert path.read_bytes() == GOLDEN_BYTES
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_disk_full_keeps_old_file_and_names_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = snapshot_path(tmp_path, 61)
    write_snapshot(path, GOLDEN_ENTRIES)

    def no_space(fd: int, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(ps, "_write_all", no_space)
    with pytest.raises(KafkaStorageError) as info:
        write_snapshot(path, [])
    assert str(path) in str(info.value)
    assert "no space" in str(info.value)
    assert path.read_bytes() == GOLDEN_BYTES
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name]


def test_write_into_missing_dir_is_storage_error(tmp_path: Path) -> None:
    path = snapshot_path(tmp_path / "absent", 1)
    with pytest.raises(KafkaStorageError, match="absent"):
        write_snapshot(path, [])


def test_fsync_snapshot(tmp_path: Path) -> None:
    path = snapshot_path(tmp_path, 9)
    write_snapshot(path, GOLDEN_ENTRIES, sync=False)
    ps.fsync_snapshot(path)
    assert read_snapshot(path) == GOLDEN_ENTRIES
    with pytest.raises(KafkaStorageError):
        ps.fsync_snapshot(snapshot_path(tmp_path, 10))
