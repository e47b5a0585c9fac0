"""OffsetIndex (`.index`) against doc section 3 (docs/architecture.md (storage))."""

from __future__ import annotations

import itertools
import os
import shutil
import struct
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog.storage.errors import CorruptIndexError, InvalidConfigError, StorageError
from seglog.storage.offset_index import (
    IndexAppendError,
    IndexFullError,
    IndexOffsetOverflowError,
    InvalidOffsetError,
    OffsetIndex,
)

BASE = 1000
# Doc 3.2: base offset 1000, entries 1059 @ 5000 and 1109 @ 10000.
GOLDEN = bytes.fromhex("00 00 00 3b 00 00 13 88   00 00 00 6d 00 00 27 10")
_unique = itertools.count()
# tmp_path is shared by the examples of one test; fresh_dir() separates them.
NO_FIXTURE_CHECK = [HealthCheck.function_scoped_fixture]


def fresh_dir(tmp_path: Path) -> Path:
    """A new directory per hypothesis example (tmp_path is shared by all of them)."""
    d = tmp_path / f"ex{next(_unique)}"
    d.mkdir()
    return d


def naive_lookup(entries: list[tuple[int, int]], base: int, target: int) -> tuple[int, int]:
    found = (base, 0)
    for offset, position in entries:
        if offset <= target:
            found = (offset, position)
    return found


def kafka_reference_slot(keys: list[int], target: int, warm: int) -> int:
    """Kafka's indexSlotRangeFor (largest lower bound), written out independently."""
    n = len(keys)
    if n == 0:
        return -1

    def bsearch(lo: int, hi: int) -> int:
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if keys[mid] > target:
                hi = mid - 1
            elif keys[mid] < target:
                lo = mid
            else:
                return mid
        return lo

    first_hot = max(0, n - 1 - warm)
    if keys[first_hot] < target:
        return bsearch(first_hot, n - 1)
    if keys[0] > target:
        return -1
    return bsearch(0, first_hot)


def build(path: Path, entries: list[tuple[int, int]], base: int = BASE, **kw: int) -> OffsetIndex:
    idx = OffsetIndex(path, base, **kw)
    for offset, position in entries:
        idx.append(offset, position)
    return idx


def write_raw(path: Path, pairs: list[tuple[int, int]]) -> None:
    path.write_bytes(b"".join(struct.pack(">ii", r, p) for r, p in pairs))


# ----------------------------------------------------------------- bytes


def test_golden_bytes_of_doc_example(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000001000.index"
    idx = build(path, [(1059, 5000), (1109, 10000)])
    idx.close()
    assert path.read_bytes() == GOLDEN


def test_golden_bytes_parse(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000001000.index"
    path.write_bytes(GOLDEN)
    idx = OffsetIndex(path, BASE)
    assert idx.entries == 2
    assert [idx.entry(0), idx.entry(1)] == [(1059, 5000), (1109, 10000)]
    assert idx.last_entry() == (1109, 10000)
    assert idx.lookup(1100) == (1059, 5000)
    idx.sanity_check()
    idx.close()
    assert path.read_bytes() == GOLDEN  # closing an unchanged index rewrites nothing


def test_new_file_is_preallocated_and_zero_filled(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    idx = OffsetIndex(path, BASE, max_index_size=1001)
    assert os.path.getsize(path) == 1000 == idx.length
    assert idx.max_entries == 125 and idx.entries == 0 and idx.size_in_bytes == 0
    assert path.read_bytes() == bytes(1000)
    assert idx.last_entry() == (BASE, 0)
    idx.append(1001, 77)
    idx.flush()
    assert path.read_bytes()[:8] == struct.pack(">ii", 1, 77)
    assert os.path.getsize(path) == 1000
    idx.close()


def test_default_size_matches_kafka(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "a.index", 0)
    assert idx.max_index_size == 10 * 1024 * 1024
    assert idx.max_entries == 1_310_720
    assert idx.entry_size == 8
    idx.close()
    assert os.path.getsize(tmp_path / "a.index") == 0


def test_max_index_size_smaller_than_an_entry_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(InvalidConfigError, match="a.index"):
        OffsetIndex(tmp_path / "a.index", 0, max_index_size=7)
    assert not (tmp_path / "a.index").exists()


# ---------------------------------------------------------------- lookup


def test_lookup_empty_and_below_first(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "a.index", BASE, max_index_size=800)
    assert idx.lookup(BASE) == (BASE, 0)
    assert idx.lookup(BASE + 10**9) == (BASE, 0)
    idx.append(1010, 100)
    assert idx.lookup(1009) == (BASE, 0)
    assert idx.lookup(0) == (BASE, 0)
    assert idx.lookup(-5) == (BASE, 0)
    assert idx.lookup(1010) == (1010, 100)
    assert idx.lookup(2**63 - 1) == (1010, 100)
    assert idx.lookup(2**80) == (1010, 100)  # beyond int64 still means "after everything"


entries_strategy = st.lists(
    st.tuples(st.integers(1, 50), st.integers(1, 5000)), min_size=0, max_size=60
)


def accumulate(steps: list[tuple[int, int]], base: int) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    offset, position = base - 1, 0
    for d_off, d_pos in steps:
        offset += d_off
        position += d_pos
        out.append((offset, position))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=NO_FIXTURE_CHECK)
@given(
    steps=entries_strategy,
    base=st.integers(0, 2**40),
    targets=st.lists(st.integers(-100, 3200), max_size=40),
)
def test_lookup_matches_naive_reference(
    tmp_path: Path, steps: list[tuple[int, int]], base: int, targets: list[int]
) -> None:
    entries = accumulate(steps, base)
    idx = build(fresh_dir(tmp_path) / "a.index", entries, base=base, max_index_size=800)
    keys = [o for o, _ in entries]
    probes = [base + t for t in targets] + keys + [k - 1 for k in keys] + [k + 1 for k in keys]
    for t in probes:
        want = naive_lookup(entries, base, t)
        assert idx.lookup(t) == want, t
        slot = kafka_reference_slot(keys, t, 1024)
        assert want == (entries[slot] if slot >= 0 else (base, 0))
    # Kafka's literal search (used for corrupt loaded files) agrees too.
    idx._fast = False
    for t in probes:
        assert idx.lookup(t) == naive_lookup(entries, base, t), t
    idx.close()


@pytest.mark.parametrize("n", [1024, 1025, 1026, 1030, 2100])
def test_warm_section_boundaries(tmp_path: Path, n: int) -> None:
    """Targets around the first hot slot (entries-1-1024), both search paths."""
    entries = [(BASE + 3 * i + 2, 10 * i) for i in range(n)]
    idx = build(tmp_path / "a.index", entries, max_index_size=n * 8)
    first_hot = max(0, n - 1 - 1024)
    keys = [o for o, _ in entries]
    interesting = {0, 1, first_hot - 1, first_hot, first_hot + 1, n - 2, n - 1}
    probes = [BASE, BASE + 1]
    for s in interesting:
        if 0 <= s < n:
            probes += [keys[s] - 1, keys[s], keys[s] + 1]
    for fast in (True, False):
        idx._fast = fast
        for t in probes:
            assert idx.lookup(t) == naive_lookup(entries, BASE, t), (fast, t)
    idx.close()


def test_corrupt_loaded_file_searches_like_kafka(tmp_path: Path) -> None:
    """Non-increasing keys (a corrupt file): results follow Kafka's probe order."""
    path = tmp_path / "a.index"
    pairs = [(5, 50), (9, 90), (3, 30), (12, 120), (12, 121), (0, 0), (20, 200)]
    write_raw(path, pairs)
    idx = OffsetIndex(path, BASE)
    keys = [BASE + r for r, _ in pairs]
    for t in range(BASE - 2, BASE + 25):
        slot = kafka_reference_slot(keys, t, 1024)
        want = (keys[slot], pairs[slot][1]) if slot >= 0 else (BASE, 0)
        assert idx.lookup(t) == want, t
    assert idx._fast is False
    idx.close()


@pytest.mark.parametrize("n", [1030, 1500])
def test_corrupt_file_beyond_warm_section_searches_like_kafka(tmp_path: Path, n: int) -> None:
    """Scrambled keys over more than the warm section: the hot/cold split itself
    decides which slot Kafka answers, so it must match entries-1-1024 exactly."""
    path = tmp_path / "a.index"
    order = list(range(n))
    for i in range(0, n - 1, 3):  # a deterministic local scramble
        order[i], order[i + 1] = order[i + 1], order[i]
    write_raw(path, [(2 * k, k) for k in order])
    idx = OffsetIndex(path, BASE)
    keys = [BASE + 2 * k for k in order]
    mismatching_sorted = 0
    for t in range(BASE - 1, BASE + 2 * n + 1):
        slot = kafka_reference_slot(keys, t, 1024)
        want = (keys[slot], order[slot]) if slot >= 0 else (BASE, 0)
        assert idx.lookup(t) == want, t
        k = (t - BASE) // 2  # the answer had the file been sorted
        mismatching_sorted += t >= BASE and want != (BASE + 2 * min(k, n - 1), min(k, n - 1))
    assert idx._fast is False
    assert mismatching_sorted  # the scramble really changes answers


def test_positions_do_not_take_part_in_the_key_search(tmp_path: Path) -> None:
    """Only offsets are compared: an entry whose position bytes are all 0xFF
    (-1, which the byte search's sentinel also ends in) is still found."""
    path = tmp_path / "a.index"
    write_raw(path, [(1, 10), (4, -1), (9, 0)])
    idx = OffsetIndex(path, BASE)
    for _ in range(2):  # the first lookup of a loaded file also validates it
        assert idx.lookup(BASE + 4) == (BASE + 4, -1)
        assert idx.lookup(BASE + 5) == (BASE + 4, -1)
        assert idx.lookup(BASE + 9) == (BASE + 9, 0)
    assert idx._fast is True


def test_loaded_well_formed_file_uses_byte_search(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    write_raw(path, [(1, 10), (4, 40), (9, 90)])
    idx = OffsetIndex(path, BASE)
    assert idx.lookup(BASE + 5) == (BASE + 4, 40)
    assert idx._fast is True
    idx.close()


def test_fetch_upper_bound_offset(tmp_path: Path) -> None:
    idx = build(tmp_path / "a.index", [(1010, 100), (1020, 200), (1030, 300)], max_index_size=800)
    assert idx.fetch_upper_bound_offset(0, 50) == 1010
    assert idx.fetch_upper_bound_offset(100, 1) == 1020
    assert idx.fetch_upper_bound_offset(150, 50) == 1020
    assert idx.fetch_upper_bound_offset(150, 51) == 1030
    assert idx.fetch_upper_bound_offset(250, 50) == 1030
    assert idx.fetch_upper_bound_offset(250, 51) is None
    empty = OffsetIndex(tmp_path / "b.index", 0, max_index_size=80)
    assert empty.fetch_upper_bound_offset(0, 10) is None


def test_fetch_upper_bound_keeps_kafkas_first_slot_quirk(tmp_path: Path) -> None:
    """Kafka's binarySearch never probes its first slot, so a bound equal to the
    first entry's position answers the *next* entry (None with one entry)."""
    idx = build(tmp_path / "a.index", [(1010, 100), (1020, 200), (1030, 300)], max_index_size=800)
    assert idx.fetch_upper_bound_offset(0, 100) == 1020
    assert idx.fetch_upper_bound_offset(0, 200) == 1020  # a probed slot matches exactly
    one = build(tmp_path / "b.index", [(1010, 100)], max_index_size=80)
    assert one.fetch_upper_bound_offset(40, 60) is None
    assert one.fetch_upper_bound_offset(40, 59) == 1010


# ---------------------------------------------------------------- append


def test_append_rejects_non_increasing_offset(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    idx = build(path, [(1010, 100)], max_index_size=800)
    for bad in (1010, 1009):
        with pytest.raises(InvalidOffsetError, match=str(path)):
            idx.append(bad, 500)
    assert idx.entries == 1 and idx.last_entry() == (1010, 100)
    idx.append(1011, 500)
    assert idx.entries == 2


def test_append_relative_offset_range(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    idx = OffsetIndex(path, BASE, max_index_size=800)
    assert not idx.can_append_offset(BASE - 1)
    assert idx.can_append_offset(BASE)
    assert idx.can_append_offset(BASE + 2**31 - 1)
    assert not idx.can_append_offset(BASE + 2**31)
    with pytest.raises(IndexOffsetOverflowError, match=str(path)):
        idx.append(BASE - 1, 0)
    assert idx.entries == 0
    idx.append(BASE, 0)
    with pytest.raises(IndexOffsetOverflowError):
        idx.append(BASE + 2**31, 10)
    idx.append(BASE + 2**31 - 1, 10)
    assert idx.last_entry() == (BASE + 2**31 - 1, 10)
    assert idx.lookup(BASE + 2**40) == (BASE + 2**31 - 1, 10)


def test_append_position_range(tmp_path: Path) -> None:
    idx = OffsetIndex(tmp_path / "a.index", BASE, max_index_size=800)
    with pytest.raises(IndexAppendError, match="a.index"):
        idx.append(BASE + 1, -1)
    with pytest.raises(IndexAppendError):
        idx.append(BASE + 1, 2**31)
    idx.append(BASE + 1, 2**31 - 1)
    assert idx.entry(0) == (BASE + 1, 2**31 - 1)


def test_full_index(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    idx = OffsetIndex(path, BASE, max_index_size=39)  # 4 slots
    for i in range(4):
        assert not idx.is_full()
        idx.append(BASE + i + 1, i * 10)
    assert idx.is_full()
    with pytest.raises(IndexFullError, match=str(path)):
        idx.append(BASE + 10, 100)
    assert idx.entries == 4
    idx.truncate_to(BASE + 4)
    assert not idx.is_full()
    idx.append(BASE + 10, 100)


def test_errors_are_storage_errors() -> None:
    for cls in (IndexAppendError, IndexFullError, InvalidOffsetError, IndexOffsetOverflowError):
        assert issubclass(cls, StorageError)


def test_entry_out_of_range_names_file(tmp_path: Path) -> None:
    idx = build(tmp_path / "a.index", [(1001, 1)], max_index_size=80)
    assert idx.entry(0) == (1001, 1)
    for n in (1, -1):
        with pytest.raises(IndexError, match="a.index"):
            idx.entry(n)


# -------------------------------------------------------------- truncate


@pytest.fixture
def three(tmp_path: Path) -> OffsetIndex:
    return build(tmp_path / "a.index", [(1010, 100), (1020, 200), (1030, 300)], max_index_size=800)


@pytest.mark.parametrize(
    ("offset", "kept"),
    [
        (1020, 1),  # exact match: the entry for 1020 goes
        (1025, 2),  # between entries: 1020 stays, 1030 goes
        (1021, 2),
        (1019, 1),
        (1010, 0),
        (1000, 0),  # at base offset
        (5, 0),  # below base offset
        (1030, 2),
        (1031, 3),  # beyond the last: nothing removed
        (10**12, 3),
    ],
)
def test_truncate_to(three: OffsetIndex, offset: int, kept: int) -> None:
    entries = [(1010, 100), (1020, 200), (1030, 300)]
    length = three.length
    three.truncate_to(offset)
    assert three.entries == kept
    assert three.length == length  # truncation does not resize the file
    assert three.last_entry() == (entries[kept - 1] if kept else (BASE, 0))
    assert three.lookup(10**12) == three.last_entry()


def test_append_after_truncate_then_reopen(tmp_path: Path, three: OffsetIndex) -> None:
    three.truncate_to(1020)
    three.append(1015, 150)  # below the old 1020/1030 entries: they are gone
    three.close()
    reopened = OffsetIndex(three.path, BASE)
    assert [reopened.entry(i) for i in range(reopened.entries)] == [(1010, 100), (1015, 150)]


@settings(max_examples=40, deadline=None, suppress_health_check=NO_FIXTURE_CHECK)
@given(steps=entries_strategy, cut=st.integers(-5, 3200))
def test_truncate_matches_reference(tmp_path: Path, steps: list[tuple[int, int]], cut: int) -> None:
    entries = accumulate(steps, BASE)
    idx = build(fresh_dir(tmp_path) / "a.index", entries, max_index_size=800)
    idx.truncate_to(BASE + cut)
    kept = [e for e in entries if e[0] < BASE + cut]
    assert [idx.entry(i) for i in range(idx.entries)] == kept
    idx.close()


# ------------------------------------------------------- sizes / reopen


def test_trim_reopen_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    entries = [(BASE + 7 * i + 3, 4096 * i + 17) for i in range(50)]
    idx = build(path, entries, max_index_size=4000)
    idx.trim_to_valid_size()
    assert os.path.getsize(path) == 50 * 8 == idx.length == idx.size_in_bytes
    assert idx.is_full()  # a trimmed index has no free slot until resized
    idx.close()
    assert os.path.getsize(path) == 400

    again = OffsetIndex(path, BASE, max_index_size=4000)
    assert again.entries == again.max_entries == 50
    assert [again.entry(i) for i in range(50)] == entries
    assert again.is_full()
    assert again.resize(again.max_index_size) is True
    assert again.max_entries == 500 and again.entries == 50
    assert os.path.getsize(path) == 4000
    again.append(BASE + 1000, 999_999)
    again.close()
    assert os.path.getsize(path) == 51 * 8
    final = OffsetIndex(path, BASE)
    assert final.last_entry() == (BASE + 1000, 999_999)
    assert final.lookup(BASE + 999) == entries[-1]


def test_resize_rules(tmp_path: Path) -> None:
    idx = build(tmp_path / "a.index", [(1001, 1), (1002, 2)], max_index_size=800)
    assert idx.resize(803) is False  # rounds down to the current 800
    assert idx.resize(100) is True and idx.length == 96 and idx.max_entries == 12
    with pytest.raises(ValueError, match="a.index"):
        idx.resize(15)  # would cut an entry
    assert [idx.entry(0), idx.entry(1)] == [(1001, 1), (1002, 2)]
    assert idx.resize(16) is True and idx.is_full()


def test_reset(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    idx = build(path, [(1001, 1), (1002, 2)], max_index_size=800)
    idx.trim_to_valid_size()
    idx.reset()
    assert idx.entries == 0 and idx.length == 800 and os.path.getsize(path) == 800
    assert idx.lookup(1002) == (BASE, 0)
    idx.append(1001, 5)
    assert idx.lookup(1002) == (1001, 5)


def test_empty_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    path.write_bytes(b"")
    idx = OffsetIndex(path, BASE, max_index_size=80)
    assert idx.entries == 0 and idx.max_entries == 0 and idx.is_full()
    assert idx.lookup(BASE + 5) == (BASE, 0)
    idx.sanity_check()
    with pytest.raises(IndexFullError):
        idx.append(BASE + 1, 0)
    idx.resize(idx.max_index_size)
    idx.append(BASE + 1, 0)
    assert idx.lookup(BASE + 5) == (BASE + 1, 0)


# ------------------------------------------------------------ life cycle


def test_close_is_idempotent_and_final(tmp_path: Path) -> None:
    idx = build(tmp_path / "a.index", [(1001, 1)], max_index_size=80)
    idx.close()
    idx.close()
    for call in (lambda: idx.lookup(1001), lambda: idx.append(1002, 2), idx.flush):
        with pytest.raises(ValueError, match="closed"):
            call()


def test_rename_then_continue(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000001000.index"
    idx = build(path, [(1001, 10)], max_index_size=80)
    new = tmp_path / "00000000000000001000.index.deleted"
    idx.rename_to(new)
    assert idx.path == new and new.exists() and not path.exists()
    idx.append(1002, 20)
    assert idx.lookup(1002) == (1002, 20)
    with pytest.raises(InvalidOffsetError, match=r"\.index\.deleted"):
        idx.append(1002, 30)
    idx.trim_to_valid_size()  # reopens the file by its new name
    assert os.path.getsize(new) == 16
    idx.close()
    assert new.read_bytes() == struct.pack(">iiii", 1, 10, 2, 20)


def test_rename_of_missing_file_still_takes_the_name(tmp_path: Path) -> None:
    idx = build(tmp_path / "a.index", [(1001, 10)], max_index_size=80)
    os.remove(tmp_path / "a.index")
    idx.rename_to(tmp_path / "b.index")
    assert idx.path == tmp_path / "b.index"
    assert idx.lookup(1001) == (1001, 10)  # the mapping outlives the name


def test_delete(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    idx = build(path, [(1001, 10)], max_index_size=80)
    assert idx.delete() is True
    assert not path.exists()
    assert idx.delete() is False
    idx.close()  # no-op after delete
    other = OffsetIndex(tmp_path / "b.index", 0, max_index_size=80)
    other.close()
    assert other.delete() is True and not (tmp_path / "b.index").exists()


# --------------------------------------------------------- sanity checks


def test_sanity_check_passes_on_good_files(tmp_path: Path) -> None:
    idx = build(tmp_path / "a.index", [(1000, 0), (1001, 10)], max_index_size=80)
    idx.sanity_check()
    idx.close()
    OffsetIndex(tmp_path / "a.index", BASE).sanity_check()
    OffsetIndex(tmp_path / "b.index", BASE, max_index_size=80).sanity_check()  # new, empty


def test_sanity_length_not_multiple_of_entry_size(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    path.write_bytes(GOLDEN + b"\x00\x00\x00")
    idx = OffsetIndex(path, BASE)
    assert idx.entries == 2  # Kafka: floor(length / 8)
    with pytest.raises(CorruptIndexError, match=rf"{path}.*19 bytes.*multiple of 8"):
        idx.sanity_check()


def test_sanity_last_offset_below_base(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    write_raw(path, [(5, 10), (-1, 20)])
    with pytest.raises(CorruptIndexError, match=rf"{path}.*last offset is 999.*base offset 1000"):
        OffsetIndex(path, BASE).sanity_check()


def test_crash_left_preallocated_zero_tail_is_detected(tmp_path: Path) -> None:
    """Doc pitfall 1: a crash leaves the active index at its preallocated size.
    Kafka's own checks pass such a file (zero entries read as (base, 0));
    sanity_check additionally requires the last relative offset >= entries-1."""
    path = tmp_path / "00000000000000001000.index"
    idx = build(path, [(1010, 100), (1020, 200), (1030, 300)], max_index_size=800)
    idx.flush()
    crashed = tmp_path / "crashed" / path.name
    crashed.parent.mkdir()
    shutil.copyfile(path, crashed)  # the on-disk state without the trim of a clean close
    idx.close()

    loaded = OffsetIndex(crashed, BASE, max_index_size=800)
    assert loaded.entries == 100 and loaded.is_full()
    assert loaded.last_entry() == (BASE, 0)
    with pytest.raises(CorruptIndexError, match=rf"{crashed}.*100 entries.*zero-filled"):
        loaded.sanity_check()
    loaded.reset()  # recovery rebuilds it from the log
    loaded.sanity_check()
    assert loaded.entries == 0


def test_all_zero_preallocated_file_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "a.index"
    OffsetIndex(path, BASE, max_index_size=800)  # created, never closed: 800 zero bytes
    with pytest.raises(CorruptIndexError, match="a.index"):
        OffsetIndex(path, BASE).sanity_check()


def test_single_zero_entry_is_accepted_as_kafka_does(tmp_path: Path) -> None:
    """One zero entry is (base, 0), a legal entry that lookups treat like 'not found'."""
    path = tmp_path / "a.index"
    path.write_bytes(bytes(8))
    idx = OffsetIndex(path, BASE)
    idx.sanity_check()
    assert idx.lookup(BASE + 9) == (BASE, 0)
