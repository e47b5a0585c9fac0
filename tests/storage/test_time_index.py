"""TimeIndex (`.timeindex`) against doc section 3 (docs/architecture.md (storage))."""

from __future__ import annotations

import itertools
import os
import shutil
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog.storage.errors import CorruptIndexError
from seglog.storage.mapped_index import (
    IndexAppendError,
    IndexFullError,
    IndexOffsetOverflowError,
    InvalidOffsetError,
)
from seglog.storage.time_index import InvalidIndexTimestampError, TimeIndex

BASE = 1000
# Doc 3.3: base offset 1000, entries (1700000000005, 1059), (1700000000900, 1109).
GOLDEN = bytes.fromhex("00 00 01 8b cf e5 68 05 00 00 00 3b   00 00 01 8b cf e5 6b 84 00 00 00 6d")
T0 = 1_700_000_000_000
_unique = itertools.count()
# tmp_path is shared by the examples of one test; fresh_dir() separates them.
NO_FIXTURE_CHECK = [HealthCheck.function_scoped_fixture]


def fresh_dir(tmp_path: Path) -> Path:
    d = tmp_path / f"ex{next(_unique)}"
    d.mkdir()
    return d


def naive_lookup(entries: list[tuple[int, int]], base: int, target: int) -> tuple[int, int]:
    found = (-1, base)
    for timestamp, offset in entries:
        if timestamp <= target:
            found = (timestamp, offset)
    return found


def build(path: Path, entries: list[tuple[int, int]], base: int = BASE, **kw: int) -> TimeIndex:
    idx = TimeIndex(path, base, **kw)
    for timestamp, offset in entries:
        assert idx.maybe_append(timestamp, offset) is True
    return idx


def write_raw(path: Path, pairs: list[tuple[int, int]]) -> None:
    path.write_bytes(b"".join(struct.pack(">qi", t, r) for t, r in pairs))


def test_golden_bytes_of_doc_example(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000001000.timeindex"
    idx = build(path, [(1700000000005, 1059), (1700000000900, 1109)])
    idx.close()
    assert path.read_bytes() == GOLDEN


def test_golden_bytes_parse(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000001000.timeindex"
    path.write_bytes(GOLDEN)
    idx = TimeIndex(path, BASE)
    assert idx.entries == 2
    assert idx.entry(0) == (1700000000005, 1059)
    assert idx.last_entry() == (1700000000900, 1109)
    assert idx.lookup(1700000000899) == (1700000000005, 1059)
    assert idx.lookup(1700000000004) == (-1, BASE)
    idx.sanity_check()


def test_sizes_match_kafka(tmp_path: Path) -> None:
    path = tmp_path / "a.timeindex"
    idx = TimeIndex(path, 0)
    assert idx.entry_size == 12
    assert os.path.getsize(path) == 10_485_756 == idx.length
    assert idx.max_entries == 873_813
    assert idx.last_entry() == (-1, 0)
    idx.close()
    assert os.path.getsize(path) == 0


# ------------------------------------------------------------ maybe_append


def test_equal_timestamp_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "a.timeindex"
    idx = TimeIndex(path, BASE, max_index_size=120)
    assert idx.maybe_append(T0, 1010) is True
    assert idx.maybe_append(T0, 1020) is False  # same max timestamp: no new entry
    assert idx.maybe_append(T0, 1010) is False  # roll/close re-offering the last entry
    assert idx.entries == 1 and idx.last_entry() == (T0, 1010)
    assert idx.maybe_append(T0 + 1, 1010) is True  # equal offset is allowed
    assert idx.entries == 2
    idx.close()
    assert path.read_bytes() == struct.pack(">qiqi", T0, 10, T0 + 1, 10)


def test_empty_index_acts_as_minus_one(tmp_path: Path) -> None:
    idx = TimeIndex(tmp_path / "a.timeindex", BASE, max_index_size=120)
    assert idx.maybe_append(-1, 1010) is False  # NO_TIMESTAMP is never indexed
    assert idx.maybe_append(-7, 1010) is False
    assert idx.entries == 0
    # The -1 rule applies before the offset check when empty, as in Kafka.
    assert idx.maybe_append(-1, 5) is False
    assert idx.maybe_append(0, 1010) is True
    assert idx.last_entry() == (0, 1010)


def test_backwards_timestamp_or_offset_rejected(tmp_path: Path) -> None:
    path = tmp_path / "a.timeindex"
    idx = build(path, [(T0 + 100, 1050)], max_index_size=120)
    with pytest.raises(InvalidIndexTimestampError, match=str(path)):
        idx.maybe_append(T0 + 99, 1060)
    with pytest.raises(InvalidOffsetError, match=str(path)):
        idx.maybe_append(T0 + 200, 1049)
    with pytest.raises(InvalidOffsetError):
        idx.maybe_append(T0 + 100, 1049)  # offset check comes first
    assert idx.entries == 1 and idx.last_entry() == (T0 + 100, 1050)
    assert issubclass(InvalidIndexTimestampError, IndexAppendError)


def test_relative_offset_range(tmp_path: Path) -> None:
    path = tmp_path / "a.timeindex"
    idx = TimeIndex(path, BASE, max_index_size=120)
    with pytest.raises(IndexOffsetOverflowError, match=str(path)):
        idx.maybe_append(T0, BASE - 1)
    with pytest.raises(IndexOffsetOverflowError):
        idx.maybe_append(T0, BASE + 2**31)
    assert idx.entries == 0
    assert idx.maybe_append(T0, BASE + 2**31 - 1)
    assert idx.lookup(T0) == (T0, BASE + 2**31 - 1)


def test_timestamp_beyond_int64_rejected(tmp_path: Path) -> None:
    idx = TimeIndex(tmp_path / "a.timeindex", BASE, max_index_size=120)
    with pytest.raises(IndexAppendError, match="a.timeindex"):
        idx.maybe_append(2**63, BASE)
    assert idx.maybe_append(2**63 - 1, BASE)
    assert idx.lookup(2**70) == (2**63 - 1, BASE)


def test_reserved_slot(tmp_path: Path) -> None:
    path = tmp_path / "a.timeindex"
    idx = TimeIndex(path, BASE, max_index_size=59)  # 4 slots, the last one reserved
    assert idx.max_entries == 4
    for i in range(3):
        assert not idx.is_full()
        idx.maybe_append(T0 + i, BASE + i)
    assert idx.is_full() and idx.entries == 3
    with pytest.raises(IndexFullError, match=str(path)):
        idx.maybe_append(T0 + 10, BASE + 10)
    assert idx.maybe_append(T0 + 10, BASE + 10, skip_full_check=True)  # the roll entry
    assert idx.entries == 4
    with pytest.raises(IndexFullError, match=str(path)):
        idx.maybe_append(T0 + 11, BASE + 11, skip_full_check=True)  # no slot left at all
    # Re-offering the last entry at roll/close on a full index is a quiet no-op.
    assert idx.maybe_append(T0 + 10, BASE + 10, skip_full_check=True) is False
    idx.close()
    assert os.path.getsize(path) == 48


# ------------------------------------------------------------------ lookup


@settings(max_examples=60, deadline=None, suppress_health_check=NO_FIXTURE_CHECK)
@given(
    steps=st.lists(st.tuples(st.integers(1, 10**6), st.integers(0, 40)), max_size=60),
    base=st.integers(0, 2**40),
    targets=st.lists(st.integers(-5, 10**8), max_size=40),
)
def test_lookup_matches_naive_reference(
    tmp_path: Path, steps: list[tuple[int, int]], base: int, targets: list[int]
) -> None:
    entries: list[tuple[int, int]] = []
    ts, offset = -1, base
    for d_ts, d_off in steps:
        ts, offset = ts + d_ts, offset + d_off
        entries.append((ts, offset))
    idx = build(fresh_dir(tmp_path) / "a.timeindex", entries, base=base, max_index_size=1200)
    keys = [t for t, _ in entries]
    probes = targets + keys + [k - 1 for k in keys] + [k + 1 for k in keys] + [-(2**63), 2**63]
    for fast in (True, False):
        idx._fast = fast
        for t in probes:
            assert idx.lookup(t) == naive_lookup(entries, base, t), (fast, t)
    idx.close()


@pytest.mark.parametrize("n", [682, 683, 684, 700, 1500])
def test_warm_section_boundaries(tmp_path: Path, n: int) -> None:
    """Warm section = 8192 // 12 = 682 entries; probe around entries-1-682."""
    entries = [(T0 + 5 * i, BASE + 2 * i) for i in range(n)]
    idx = build(tmp_path / "a.timeindex", entries, max_index_size=(n + 1) * 12)
    first_hot = max(0, n - 1 - 682)
    probes = [T0 - 1]
    for s in {0, 1, first_hot - 1, first_hot, first_hot + 1, n - 1}:
        if 0 <= s < n:
            probes += [entries[s][0] - 1, entries[s][0], entries[s][0] + 1]
    for fast in (True, False):
        idx._fast = fast
        for t in probes:
            assert idx.lookup(t) == naive_lookup(entries, BASE, t), (fast, t)
    idx.close()


def test_corrupt_loaded_file_falls_back_to_kafka_search(tmp_path: Path) -> None:
    path = tmp_path / "a.timeindex"
    # Negative and out-of-order timestamps: the byte search cannot serve this file.
    write_raw(path, [(-50, 1), (30, 2), (10, 3), (40, 4)])
    idx = TimeIndex(path, BASE)
    # Kafka: n=4, first_hot=0, key(0)=-50 < target -> bsearch(0, 3).
    assert idx.lookup(35) == (10, BASE + 3)  # mid=2 (10<35) lo=2; mid=3 (40>35) hi=2
    assert idx.lookup(30) == (10, BASE + 3)  # slot 1 (an exact 30) is never probed
    assert idx.lookup(45) == (40, BASE + 4)
    assert idx.lookup(-60) == (-1, BASE)
    assert idx._fast is False
    # Kafka's checks look only at the ends; ours check every entry and catch it.
    with pytest.raises(CorruptIndexError, match="do not strictly increase"):
        idx.sanity_check()


def test_offsets_do_not_take_part_in_the_key_search(tmp_path: Path) -> None:
    """Only timestamps are compared, even against an entry whose relative offset
    bytes are all 0xFF (a corrupt -1)."""
    path = tmp_path / "a.timeindex"
    write_raw(path, [(T0, 1), (T0 + 5, -1), (T0 + 9, 3)])
    idx = TimeIndex(path, BASE)
    for _ in range(2):  # the first lookup of a loaded file also validates it
        assert idx.lookup(T0 + 5) == (T0 + 5, BASE - 1)
        assert idx.lookup(T0 + 6) == (T0 + 5, BASE - 1)
    assert idx._fast is True


def test_truncating_a_bad_tail_restores_the_byte_search(tmp_path: Path) -> None:
    path = tmp_path / "a.timeindex"
    write_raw(path, [(T0, 1), (T0 + 5, 2), (T0 + 3, 7), (T0 + 1, 8)])  # timestamps go back
    idx = TimeIndex(path, BASE)
    assert idx.lookup(T0 + 7) == (T0 + 1, BASE + 8)  # Kafka's search lands in the bad tail
    assert idx._fast is False
    idx.truncate_to(BASE + 7)
    assert idx.entries == 2
    assert idx.lookup(T0 + 7) == (T0 + 5, BASE + 2)
    assert idx._fast is True


# ---------------------------------------------------------------- truncate


@pytest.mark.parametrize(
    ("offset", "kept"),
    [
        (1008, 1),  # exact match on the offset column
        (1007, 1),  # between entries
        (1009, 2),
        (1011, 2),
        (1012, 2),
        (1013, 3),
        (1005, 0),
        (1006, 1),
        (999, 0),
        (10**9, 3),
    ],
)
def test_truncate_uses_offset_column(tmp_path: Path, offset: int, kept: int) -> None:
    entries = [(T0 + 10, 1005), (T0 + 20, 1008), (T0 + 30, 1012)]
    idx = build(tmp_path / "a.timeindex", entries, max_index_size=120)
    idx.truncate_to(offset)
    assert idx.entries == kept
    assert idx.last_entry() == (entries[kept - 1] if kept else (-1, BASE))
    # Appending resumes after the truncated last entry.
    if kept < 3:
        assert idx.maybe_append(T0 + 25, 1012) is True
    else:
        with pytest.raises(InvalidIndexTimestampError):
            idx.maybe_append(T0 + 25, 1012)


@settings(max_examples=40, deadline=None, suppress_health_check=NO_FIXTURE_CHECK)
@given(
    steps=st.lists(st.tuples(st.integers(1, 100), st.integers(1, 9)), max_size=40),
    cut=st.integers(-3, 400),
)
def test_truncate_matches_reference(tmp_path: Path, steps: list[tuple[int, int]], cut: int) -> None:
    entries: list[tuple[int, int]] = []
    ts, offset = T0, BASE
    for d_ts, d_off in steps:
        ts, offset = ts + d_ts, offset + d_off
        entries.append((ts, offset))
    idx = build(fresh_dir(tmp_path) / "a.timeindex", entries, max_index_size=600)
    idx.truncate_to(BASE + cut)
    kept = [e for e in entries if e[1] < BASE + cut]
    assert [idx.entry(i) for i in range(idx.entries)] == kept
    idx.close()


def test_truncate_with_repeated_offsets_follows_kafka(tmp_path: Path) -> None:
    """Offsets may repeat (equal offset, larger timestamp); Kafka's search returns
    the first exact match it probes and keeps the entries before it."""
    entries = [(T0 + 1, 1005), (T0 + 2, 1007), (T0 + 3, 1007), (T0 + 4, 1009)]
    idx = build(tmp_path / "a.timeindex", entries, max_index_size=120)
    # bsearch(0, 3): mid=2 holds 1007 == target -> keep 2 entries (slot 1 survives).
    idx.truncate_to(1007)
    assert idx.entries == 2 and idx.last_entry() == (T0 + 2, 1007)


# ------------------------------------------------------- reopen / life cycle


def test_trim_reopen_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "a.timeindex"
    entries = [(T0 + 3 * i, BASE + 5 * i) for i in range(40)]
    idx = build(path, entries, max_index_size=1200)
    idx.trim_to_valid_size()
    assert os.path.getsize(path) == 40 * 12 == idx.size_in_bytes == idx.length
    idx.close()
    again = TimeIndex(path, BASE, max_index_size=1200)
    assert again.entries == 40
    assert [again.entry(i) for i in range(40)] == entries
    assert again.is_full()
    again.resize(again.max_index_size)
    assert again.max_entries == 100 and not again.is_full()
    again.maybe_append(T0 + 1000, BASE + 1000)
    again.close()
    assert os.path.getsize(path) == 41 * 12


def test_reset(tmp_path: Path) -> None:
    idx = build(tmp_path / "a.timeindex", [(T0, 1001)], max_index_size=120)
    idx.trim_to_valid_size()
    idx.reset()
    assert idx.entries == 0 and idx.length == 120 and idx.last_entry() == (-1, BASE)
    assert idx.maybe_append(T0 - 5, 1001)  # smaller than before the reset: fine now


def test_rename_then_continue(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000001000.timeindex"
    idx = build(path, [(T0, 1001)], max_index_size=120)
    new = tmp_path / "00000000000000001000.timeindex.deleted"
    idx.rename_to(new)
    assert not path.exists() and new.exists()
    idx.maybe_append(T0 + 1, 1002)
    with pytest.raises(InvalidIndexTimestampError, match=r"timeindex\.deleted"):
        idx.maybe_append(T0, 1003)
    idx.close()
    assert new.read_bytes() == struct.pack(">qiqi", T0, 1, T0 + 1, 2)
    assert idx.delete() is True and not new.exists()


# ----------------------------------------------------------- sanity checks


def test_sanity_last_timestamp_below_first(tmp_path: Path) -> None:
    path = tmp_path / "a.timeindex"
    write_raw(path, [(T0, 1), (T0 - 1, 2)])
    with pytest.raises(CorruptIndexError, match=rf"{path}.*last timestamp.*less than the first"):
        TimeIndex(path, BASE).sanity_check()


def test_sanity_last_offset_below_base(tmp_path: Path) -> None:
    path = tmp_path / "a.timeindex"
    write_raw(path, [(T0, 1), (T0 + 1, -1)])
    with pytest.raises(CorruptIndexError, match=rf"{path}.*last offset is 999"):
        TimeIndex(path, BASE).sanity_check()


def test_sanity_length_not_multiple(tmp_path: Path) -> None:
    path = tmp_path / "a.timeindex"
    path.write_bytes(GOLDEN + b"\x01")
    idx = TimeIndex(path, BASE)
    assert idx.entries == 2
    with pytest.raises(CorruptIndexError, match=rf"{path}.*25 bytes.*multiple of 12"):
        idx.sanity_check()


def test_sanity_passes_on_good_files(tmp_path: Path) -> None:
    path = tmp_path / "a.timeindex"
    idx = build(path, [(T0, 1001), (T0 + 1, 1001)], max_index_size=120)
    idx.sanity_check()
    idx.close()
    TimeIndex(path, BASE).sanity_check()


def test_crash_left_preallocated_zero_tail_is_detected(tmp_path: Path) -> None:
    """Doc pitfall 1. A zero tail after real entries fails Kafka's own check
    (last timestamp 0 < first); an all-zero file fails the extra strictness check."""
    path = tmp_path / "00000000000000001000.timeindex"
    idx = build(path, [(T0, 1010), (T0 + 9, 1020)], max_index_size=120)
    idx.flush()
    crashed = tmp_path / "crashed" / path.name
    crashed.parent.mkdir()
    shutil.copyfile(path, crashed)
    idx.close()
    loaded = TimeIndex(crashed, BASE)
    assert loaded.entries == 10
    with pytest.raises(CorruptIndexError, match=rf"{crashed}.*last timestamp is 0"):
        loaded.sanity_check()

    zeros = tmp_path / "zeros.timeindex"
    TimeIndex(zeros, BASE, max_index_size=120)  # created, never closed
    with pytest.raises(CorruptIndexError, match=r"zeros\.timeindex.*zero-filled"):
        TimeIndex(zeros, BASE).sanity_check()
