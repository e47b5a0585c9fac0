"""Leader epoch cache (docs/replication-rules.md)."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog.storage.checkpoint_file import LEADER_EPOCH_CHECKPOINT, LeaderEpochCheckpointFile
from seglog.storage.errors import CheckpointError, KafkaStorageError
from seglog.storage.leader_epoch_cache import EpochEntry, LeaderEpochCache

EXAMPLE = [(0, 0), (2, 100), (5, 250)]


def make_cache(directory: Path, entries: list[tuple[int, int]] | None = None) -> LeaderEpochCache:
    cp = LeaderEpochCheckpointFile(directory / LEADER_EPOCH_CHECKPOINT)
    if entries is not None:
        cp.write(entries)
    return LeaderEpochCache(cp)


def on_disk(directory: Path) -> list[tuple[int, int]]:
    return LeaderEpochCheckpointFile(directory / LEADER_EPOCH_CHECKPOINT).read()


def reloaded(directory: Path) -> list[EpochEntry]:
    return make_cache(directory).entries()


class CountingCheckpoint(LeaderEpochCheckpointFile):
    writes = 0

    def write(self, entries: object) -> None:  # type: ignore[override]
        self.writes += 1
        super().write(entries)  # type: ignore[arg-type]


# ------------------------------------------------------------------ loading


def test_loads_example_checkpoint(tmp_path: Path) -> None:
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_bytes(b"0\n3\n0 0\n2 100\n5 250\n")
    cache = make_cache(tmp_path)
    assert cache.entries() == EXAMPLE
    assert cache.latest_epoch == 5
    assert cache.latest_entry == EpochEntry(5, 250)
    assert cache.earliest_entry == EpochEntry(0, 0)
    assert len(cache) == 3


def test_fresh_checkpoint_gives_empty_cache(tmp_path: Path) -> None:
    cache = make_cache(tmp_path)
    assert cache.entries() == []
    assert cache.latest_epoch is None and cache.latest_entry is None
    assert cache.earliest_entry is None
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_bytes() == b""


def test_loading_replays_assign_dropping_non_monotonic_entries(tmp_path: Path) -> None:
    cache = make_cache(tmp_path, [(0, 0), (2, 100), (1, 50)])
    assert cache.entries() == [(0, 0), (1, 50)]
    # Loading itself never writes.
    assert on_disk(tmp_path) == [(0, 0), (2, 100), (1, 50)]


@pytest.mark.parametrize("entry", [(-1, 0), (0, -5)])
def test_negative_entry_in_file_is_checkpoint_error(tmp_path: Path, entry: tuple[int, int]) -> None:
    with pytest.raises(CheckpointError, match=LEADER_EPOCH_CHECKPOINT):
        make_cache(tmp_path, [entry])


def test_malformed_file_propagates_checkpoint_error(tmp_path: Path) -> None:
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_bytes(b"0\n1\nx y\n")
    with pytest.raises(CheckpointError, match=LEADER_EPOCH_CHECKPOINT):
        make_cache(tmp_path)


# ------------------------------------------------------------------- assign


def test_assign_writes_checkpoint_synchronously(tmp_path: Path) -> None:
    cache = make_cache(tmp_path)
    assert cache.assign(0, 0) is True
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_bytes() == b"0\n1\n0 0\n"
    cache.assign(2, 100)
    cache.assign(5, 250)
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_bytes() == b"0\n3\n0 0\n2 100\n5 250\n"


def test_assign_same_epoch_later_offset_is_noop_without_write(tmp_path: Path) -> None:
    cp = CountingCheckpoint(tmp_path / LEADER_EPOCH_CHECKPOINT)
    cache = LeaderEpochCache(cp)
    cache.assign(5, 250)
    assert cp.writes == 1
    assert cache.assign(5, 250) is False
    assert cache.assign(5, 300) is False  # every later batch of the same epoch
    assert cp.writes == 1
    assert cache.entries() == [(5, 250)]


def test_leader_election_entry_then_first_batch(tmp_path: Path) -> None:
    cache = make_cache(tmp_path, [(0, 0)])
    cache.assign(3, 40)  # became leader with epoch 3 at LEO 40
    assert cache.assign(3, 40) is False  # first batch of epoch 3 starts at the LEO
    assert cache.entries() == [(0, 0), (3, 40)]


def test_assign_same_epoch_earlier_offset_replaces(tmp_path: Path) -> None:
    cache = make_cache(tmp_path, EXAMPLE)
    assert cache.assign(5, 200) is True
    assert cache.entries() == [(0, 0), (2, 100), (5, 200)]
    assert on_disk(tmp_path) == [(0, 0), (2, 100), (5, 200)]


@pytest.mark.parametrize(
    "epoch, start, expected",
    [
        (6, 300, [(0, 0), (2, 100), (5, 250), (6, 300)]),  # plain append
        (3, 260, [(0, 0), (2, 100), (3, 260)]),  # epoch 5 >= 3 removed
        (6, 250, [(0, 0), (2, 100), (6, 250)]),  # start 250 >= 250 removed
        (6, 100, [(0, 0), (6, 100)]),  # starts 100 and 250 removed
        (1, 50, [(0, 0), (1, 50)]),  # both conditions
        (0, 0, [(0, 0)]),  # same as the first entry: everything after it goes
        (7, 0, [(7, 0)]),  # start 0 conflicts with everything
        (2, 300, [(0, 0), (2, 300)]),  # epoch 2 re-assigned later: tail removed
    ],
)
def test_assign_removes_conflicting_tail(
    tmp_path: Path, epoch: int, start: int, expected: list[tuple[int, int]]
) -> None:
    cache = make_cache(tmp_path, EXAMPLE)
    assert cache.assign(epoch, start) is True
    assert cache.entries() == expected
    assert on_disk(tmp_path) == expected
    assert reloaded(tmp_path) == expected


@pytest.mark.parametrize("epoch, start", [(-1, 0), (0, -1), (2**31, 0), (0, 2**63)])
def test_assign_rejects_invalid(tmp_path: Path, epoch: int, start: int) -> None:
    cache = make_cache(tmp_path, EXAMPLE)
    with pytest.raises(ValueError):
        cache.assign(epoch, start)
    assert cache.entries() == EXAMPLE
    assert on_disk(tmp_path) == EXAMPLE


def test_assign_write_failure_raises_storage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = make_cache(tmp_path, EXAMPLE)

    def enospc(fd: int, data: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", enospc)
    with pytest.raises(KafkaStorageError, match=LEADER_EPOCH_CHECKPOINT):
        cache.assign(6, 300)
    monkeypatch.undo()
    assert on_disk(tmp_path) == EXAMPLE  # the checkpoint is never half-written


# ------------------------------------------------------------ end_offset_for

LEO = 300


@pytest.mark.parametrize(
    "requested, answer",
    [
        (5, (5, 300)),
        (4, (2, 250)),
        (3, (2, 250)),
        (2, (2, 250)),
        (1, (0, 100)),
        (0, (0, 100)),
        (6, (-1, -1)),
        (-1, (-1, -1)),
    ],
)
def test_end_offset_for_section_6_3_examples(requested: int, answer: tuple[int, int]) -> None:
    cache = LeaderEpochCache(None)
    for epoch, start in EXAMPLE:
        cache.assign(epoch, start)
    assert cache.end_offset_for(requested, LEO) == answer


def test_end_offset_for_epoch_older_than_cache() -> None:
    cache = LeaderEpochCache(None)
    cache.assign(3, 40)
    cache.assign(5, 250)
    assert cache.end_offset_for(1, LEO) == (1, 40)
    assert cache.end_offset_for(4, LEO) == (3, 250)


def test_end_offset_for_empty_cache() -> None:
    cache = LeaderEpochCache(None)
    assert cache.end_offset_for(0, 10) == (-1, -1)
    assert cache.end_offset_for(-1, 10) == (-1, -1)


def test_end_offset_for_diverging_fetch_example_6_5() -> None:
    leader = LeaderEpochCache(None)
    leader.assign(0, 0)
    leader.assign(2, 120)
    follower = LeaderEpochCache(None)
    follower.assign(0, 0)
    follower.assign(1, 100)
    assert leader.end_offset_for(1, 200) == (0, 120)  # 0 < 1: diverging
    assert follower.end_offset_for(0, 150) == (0, 100)
    follower.truncate_from_end(min(120, 100, 150))
    assert follower.entries() == [(0, 0)]
    assert leader.end_offset_for(0, 200) == (0, 120)


def test_end_offset_for_kip_279_example_6_8() -> None:
    b = LeaderEpochCache(None)
    b.assign(1, 0)
    b.assign(2, 1)
    c = LeaderEpochCache(None)
    c.assign(1, 0)
    c.assign(3, 2)
    assert c.end_offset_for(2, 5) == (1, 2)
    assert b.end_offset_for(1, 2) == (1, 1)


# -------------------------------------------------------------- truncation


@pytest.mark.parametrize(
    "end_offset, expected",
    [
        (300, EXAMPLE),  # beyond the latest start: nothing to do
        (251, EXAMPLE),
        (250, [(0, 0), (2, 100)]),
        (101, [(0, 0), (2, 100)]),
        (100, [(0, 0)]),
        (1, [(0, 0)]),
        (0, []),
        (-1, EXAMPLE),  # undefined offset is ignored
    ],
)
def test_truncate_from_end(tmp_path: Path, end_offset: int, expected: list) -> None:
    cache = make_cache(tmp_path, EXAMPLE)
    removed = cache.truncate_from_end(end_offset)
    assert cache.entries() == expected
    assert removed == EXAMPLE[len(expected) :]
    assert reloaded(tmp_path) == expected


@pytest.mark.parametrize(
    "start_offset, expected",
    [
        (0, EXAMPLE),
        (1, [(0, 1), (2, 100), (5, 250)]),
        (100, [(2, 100), (5, 250)]),
        (150, [(2, 150), (5, 250)]),
        (250, [(5, 250)]),
        (1000, [(5, 1000)]),  # beyond the LEO is the caller's business
    ],
)
def test_truncate_from_start(tmp_path: Path, start_offset: int, expected: list) -> None:
    cache = make_cache(tmp_path, EXAMPLE)
    cache.truncate_from_start(start_offset)
    assert cache.entries() == expected
    assert reloaded(tmp_path) == expected


def test_truncate_from_start_below_first_entry_is_noop(tmp_path: Path) -> None:
    cp = CountingCheckpoint(tmp_path / LEADER_EPOCH_CHECKPOINT)
    cache = LeaderEpochCache(cp)
    cache.assign(3, 40)
    assert cache.truncate_from_start(10) == []
    assert cache.truncate_from_end(41) == []
    assert cache.entries() == [(3, 40)]
    assert cp.writes == 1


def test_truncate_from_start_returns_original_entries(tmp_path: Path) -> None:
    cache = make_cache(tmp_path, EXAMPLE)
    assert cache.truncate_from_start(150) == [(0, 0), (2, 100)]


def test_truncation_after_partition_dir_deleted_is_silent(tmp_path: Path) -> None:
    part = tmp_path / "orders-0"
    part.mkdir()
    cache = make_cache(part, EXAMPLE)
    shutil.rmtree(part)
    cache.truncate_from_end(100)
    cache.truncate_from_start(50)
    assert cache.entries() == [(0, 50)]
    assert not part.exists()
    with pytest.raises(KafkaStorageError):
        cache.assign(9, 500)  # an assign must persist, as in Kafka


def test_loader_reapplies_truncations_to_stale_file(tmp_path: Path) -> None:
    """A crash can leave entries beyond the LEO (Kafka flushes truncations lazily)."""
    make_cache(tmp_path, EXAMPLE)
    cache = make_cache(tmp_path)
    cache.truncate_from_end(200)  # LEO after recovery
    cache.truncate_from_start(50)  # log start offset
    assert cache.entries() == [(0, 50), (2, 100)]
    assert reloaded(tmp_path) == [(0, 50), (2, 100)]


def test_clear_writes_empty_checkpoint(tmp_path: Path) -> None:
    cache = make_cache(tmp_path, EXAMPLE)
    cache.clear()
    assert cache.entries() == []
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT).read_bytes() == b"0\n0\n"
    assert reloaded(tmp_path) == []


# ------------------------------------------------------------------ queries


@pytest.mark.parametrize(
    "offset, epoch",
    [(0, 0), (99, 0), (100, 2), (249, 2), (250, 5), (10**12, 5)],
)
def test_epoch_for_offset(offset: int, epoch: int) -> None:
    cache = LeaderEpochCache(None)
    for e, o in EXAMPLE:
        cache.assign(e, o)
    assert cache.epoch_for_offset(offset) == epoch


def test_epoch_for_offset_before_first_entry_or_empty() -> None:
    cache = LeaderEpochCache(None)
    assert cache.epoch_for_offset(0) is None
    cache.assign(3, 40)
    assert cache.epoch_for_offset(39) is None
    assert cache.epoch_for_offset(40) == 3


def test_neighbour_epochs() -> None:
    cache = LeaderEpochCache(None)
    for e, o in EXAMPLE:
        cache.assign(e, o)
    assert cache.previous_epoch(5) == 2
    assert cache.previous_epoch(4) == 2
    assert cache.previous_epoch(0) is None
    assert cache.next_epoch(2) == 5
    assert cache.next_epoch(3) == 5
    assert cache.next_epoch(5) is None
    assert cache.epoch_entry(2) == (2, 100)
    assert cache.epoch_entry(3) is None


def test_entries_is_a_copy() -> None:
    cache = LeaderEpochCache(None)
    cache.assign(1, 10)
    cache.entries().append(EpochEntry(0, 0))
    assert cache.entries() == [(1, 10)]


def test_with_checkpoint_moves_backing_file(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    cache = make_cache(tmp_path / "a", EXAMPLE)
    moved = cache.with_checkpoint(
        LeaderEpochCheckpointFile(tmp_path / "b" / LEADER_EPOCH_CHECKPOINT)
    )
    assert moved.entries() == EXAMPLE
    assert on_disk(tmp_path / "b") == []  # nothing written until the next change
    moved.assign(6, 300)
    assert on_disk(tmp_path / "b") == EXAMPLE + [(6, 300)]
    assert on_disk(tmp_path / "a") == EXAMPLE
    assert cache.entries() == EXAMPLE


def test_invariant_check_fires_on_corruption() -> None:
    cache = LeaderEpochCache(None)
    cache.assign(1, 10)
    cache._entries.append(EpochEntry(2, 10))  # equal start offsets: not strictly increasing
    with pytest.raises(AssertionError):
        cache._check_invariants()


# -------------------------------------------------- property test vs a model


def model_assign(entries: list, epoch: int, start: int) -> list:
    if entries and entries[-1][0] == epoch and entries[-1][1] <= start:
        return entries
    return [e for e in entries if e[0] < epoch and e[1] < start] + [(epoch, start)]


def model_truncate_from_end(entries: list, end: int) -> list:
    return entries if end < 0 else [e for e in entries if e[1] < end]


def model_truncate_from_start(entries: list, start: int) -> list:
    covered = [e for e in entries if e[1] <= start]
    if not covered:
        return entries
    return [(covered[-1][0], start)] + [e for e in entries if e[1] > start]


def model_end_offset_for(entries: list, requested: int, leo: int) -> tuple[int, int]:
    if requested == -1:
        return (-1, -1)
    if entries and entries[-1][0] == requested:
        return (requested, leo)
    higher = [e for e in entries if e[0] > requested]
    lower = [e for e in entries if e[0] <= requested]
    if not higher:
        return (-1, -1)
    if not lower:
        return (requested, higher[0][1])
    return (lower[-1][0], higher[0][1])


def model_epoch_for_offset(entries: list, offset: int) -> int | None:
    covering = [e[0] for e in entries if e[1] <= offset]
    return covering[-1] if covering else None


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("assign"), st.integers(0, 12), st.integers(0, 60)),
        st.tuples(st.just("from_end"), st.integers(-1, 70)),
        st.tuples(st.just("from_start"), st.integers(0, 70)),
        st.tuples(st.just("clear")),
    ),
    max_size=15,
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS)
def test_matches_model(tmp_path: Path, ops: list) -> None:
    directory = Path(tempfile.mkdtemp(dir=tmp_path))
    cache = make_cache(directory)
    model: list[tuple[int, int]] = []
    for op in ops:
        if op[0] == "assign":
            cache.assign(op[1], op[2])
            model = model_assign(model, op[1], op[2])
        elif op[0] == "from_end":
            cache.truncate_from_end(op[1])
            model = model_truncate_from_end(model, op[1])
        elif op[0] == "from_start":
            cache.truncate_from_start(op[1])
            model = model_truncate_from_start(model, op[1])
        else:
            cache.clear()
            model = []
        entries = cache.entries()
        assert entries == model
        assert all(a[0] < b[0] and a[1] < b[1] for a, b in zip(entries, entries[1:], strict=False))
    leo = (model[-1][1] + 5) if model else 0
    for requested in range(-1, 15):
        assert cache.end_offset_for(requested, leo) == model_end_offset_for(model, requested, leo)
    for offset in range(0, 75, 3):
        assert cache.epoch_for_offset(offset) == model_epoch_for_offset(model, offset)
    assert reloaded(directory) == model
