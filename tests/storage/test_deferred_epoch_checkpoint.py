"""The leader epoch cache's deferred writes (storage/leader_epoch_cache.py): a node on an
event loop does not fsync leader-epoch-checkpoint where the epoch changes. The file is
written by the next flush job before it moves the recovery point, by the node's tick,
or by the log's close, and a crash before any of them loses no entry a reload needs."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest

from seglog.storage.checkpoint_file import LEADER_EPOCH_CHECKPOINT, LeaderEpochCheckpointFile
from seglog.storage.errors import KafkaStorageError
from seglog.storage.leader_epoch_cache import EpochEntry, LeaderEpochCache
from seglog.storage.log import Log
from seglog.storage.log_config import LogConfig
from seglog.storage.record_batch import NewRecord, build_batch

T0 = 1_700_000_000_000
CONFIG = LogConfig()


def on_disk(directory: Path) -> list[tuple[int, int]]:
    return LeaderEpochCheckpointFile(directory / LEADER_EPOCH_CHECKPOINT).read()


def deferred_cache(directory: Path) -> LeaderEpochCache:
    cache = LeaderEpochCache(LeaderEpochCheckpointFile(directory / LEADER_EPOCH_CHECKPOINT))
    cache.defer_writes = True
    return cache


def test_a_deferred_change_is_written_by_the_write_taken_for_it(tmp_path: Path) -> None:
    cache = deferred_cache(tmp_path)
    cache.assign(2, 0)
    cache.assign(5, 40)
    assert on_disk(tmp_path) == [] and cache.has_unwritten
    write = cache.take_unwritten()
    assert write is not None and not cache.has_unwritten
    assert cache.take_unwritten() is None  # handed over once
    write.run()
    assert on_disk(tmp_path) == [(2, 0), (5, 40)]


def test_an_older_write_run_last_does_not_overwrite_a_newer_one(tmp_path: Path) -> None:
    cache = deferred_cache(tmp_path)
    cache.assign(1, 0)
    older = cache.take_unwritten()
    cache.assign(3, 10)
    newer = cache.take_unwritten()
    assert older is not None and newer is not None
    newer.run()
    older.run()
    assert on_disk(tmp_path) == [(1, 0), (3, 10)]


def test_a_failed_write_is_owed_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = deferred_cache(tmp_path)
    cache.assign(4, 0)
    write = cache.take_unwritten()
    assert write is not None

    def full_disk(self: LeaderEpochCheckpointFile, entries: object) -> None:
        raise KafkaStorageError("No space left on device")

    with monkeypatch.context() as m:
        m.setattr(LeaderEpochCheckpointFile, "write", full_disk)
        with pytest.raises(KafkaStorageError):
            write.run()
    assert cache.has_unwritten
    cache.write_unwritten()
    assert on_disk(tmp_path) == [(4, 0)]


def test_a_write_owed_to_a_removed_directory_is_dropped(tmp_path: Path) -> None:
    part = tmp_path / "t-0"
    part.mkdir()
    cache = deferred_cache(part)
    cache.assign(1, 0)
    write = cache.take_unwritten()
    assert write is not None
    shutil.rmtree(part)  # the partition was deleted meanwhile
    write.run()
    assert not part.exists() and not cache.has_unwritten


def batch(base_offset: int, epoch: int) -> bytes:
    return build_batch(
        [NewRecord(b"v%d" % base_offset, b"k", T0)],
        base_offset=base_offset,
        partition_leader_epoch=epoch,
        now_ms=T0,
    )


def follower_log(part: Path) -> Log:
    log = Log.open(part, CONFIG, time_ms=T0)
    log.epoch_cache.defer_writes = True
    log.append_as_follower(batch(0, 1))
    log.append_as_follower(batch(1, 1))
    log.append_as_follower(batch(2, 3))
    assert log.epoch_cache.entries() == [EpochEntry(1, 0), EpochEntry(3, 2)]
    assert on_disk(part) == []  # nothing written where the epochs changed
    return log


def test_a_flush_job_writes_the_epochs_before_it_moves_the_recovery_point(
    tmp_path: Path,
) -> None:
    part = tmp_path / "t-0"
    log = follower_log(part)
    log.durability_demanded = log.log_end_offset  # as flush.messages asks it
    job = log.begin_demanded_flush(time_ms=T0)
    assert job is not None
    assert on_disk(part) == []  # taken under the lock, written outside it
    assert job.run()
    assert on_disk(part) == [(1, 0), (3, 2)]
    log.end_flush(job)
    assert log.durable_offset == 3
    log.close()


def test_an_inline_flush_and_a_close_write_the_epochs(tmp_path: Path) -> None:
    part = tmp_path / "t-0"
    log = follower_log(part)
    log.flush()
    assert on_disk(part) == [(1, 0), (3, 2)]
    log.append_as_follower(batch(3, 6))
    assert on_disk(part) == [(1, 0), (3, 2)]
    log.close()
    assert on_disk(part) == [(1, 0), (3, 2), (6, 3)]
    again = Log.open(part, CONFIG, recovery_point=4, had_clean_shutdown=True, time_ms=T0)
    assert again.epoch_cache.entries() == [EpochEntry(1, 0), EpochEntry(3, 2), EpochEntry(6, 3)]
    again.close()


def test_a_crash_before_the_write_loses_no_epoch(tmp_path: Path) -> None:
    part = tmp_path / "t-0"
    log = follower_log(part)
    log.abandon()  # killed: no flush, no close
    assert on_disk(part) == []
    # The recovery point never moved, so recovery reads every batch and re-assigns.
    again = Log.open(part, CONFIG, recovery_point=log.durable_offset, time_ms=T0)
    assert again.epoch_cache.entries() == [EpochEntry(1, 0), EpochEntry(3, 2)]
    again.close()


def test_a_close_writes_a_new_leaders_epoch_that_has_no_records_yet(tmp_path: Path) -> None:
    part = tmp_path / "t-0"
    log = follower_log(part)
    log.flush()
    log.epoch_cache.assign(7, log.log_end_offset)  # became leader: (epoch, LEO), no batch
    log.close()  # nothing to flush: the close itself writes it
    # (A reload drops an entry at the LEO again, as Kafka's loader truncates from the end.)
    assert on_disk(part) == [(1, 0), (3, 2), (7, 3)]


def test_a_close_waits_for_a_write_another_thread_took(tmp_path: Path) -> None:
    """The log manager took the write (under the partition lock) and writes it outside
    the lock; a close, or a flush job, that finds nothing to take must not go on (and
    write the clean-shutdown marker, or move the recovery point) before it is on disk."""
    cache = deferred_cache(tmp_path)
    cache.assign(2, 0)
    taken = cache.take_unwritten()
    assert taken is not None
    flush_step = cache.take_for_flush()
    assert flush_step is not None
    late = threading.Timer(0.3, taken.run)  # the tick's write, still to come
    late.start()
    started = time.monotonic()
    cache.write_unwritten()
    assert time.monotonic() - started >= 0.25
    assert on_disk(tmp_path) == [(2, 0)]
    flush_step()  # durable already: returns at once
    late.join()


def test_a_write_another_thread_failed_is_made_by_the_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = deferred_cache(tmp_path)
    cache.assign(3, 0)
    taken = cache.take_unwritten()
    assert taken is not None
    real_write = LeaderEpochCheckpointFile.write
    failures = [1]

    def fails_once(self: LeaderEpochCheckpointFile, entries: object) -> None:
        if failures:
            failures.pop()
            raise KafkaStorageError("I/O error")
        real_write(self, entries)  # type: ignore[arg-type]

    monkeypatch.setattr(LeaderEpochCheckpointFile, "write", fails_once)
    errors: list[BaseException] = []

    def tick() -> None:
        time.sleep(0.2)
        try:
            taken.run()
        except KafkaStorageError as e:
            errors.append(e)

    t = threading.Thread(target=tick)
    t.start()
    cache.write_unwritten()  # waits for the tick's write, which fails, then writes itself
    t.join()
    assert len(errors) == 1 and on_disk(tmp_path) == [(3, 0)]
