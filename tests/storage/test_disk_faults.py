"""Disk faults through the fault-injection file (storage/disk_and_clock.py) against
real files: a full disk undoes the write and leaves the log online, a failed fsync
takes the log directory offline, a failed index write leaves no batch in the .log
(docs/disk-and-clock-faults.md)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from log_fixtures import (
    T0,
    check_log_invariants,
    hash_dir,
    make_batch,
    offsets_read,
    read_everything,
)

from seglog.storage import disk_and_clock
from seglog.storage.errors import KafkaStorageError, LogDirFullError
from seglog.storage.log_config import LogConfig
from seglog.storage.log_dir import LogDirectory
from seglog.storage.mapped_index import IndexFullError
from seglog.storage.segment import LogSegment

CFG = LogConfig.defaults().with_overrides(
    {"segment.bytes": 4096, "segment.index.bytes": 1024, "index.interval.bytes": 100}
)


@pytest.fixture
def faults(tmp_path: Path) -> Iterator[Path]:
    """The fault file, installed for this test only; write it with `set_faults`."""
    path = tmp_path / "faults.json"
    path.write_text("{}")
    disk_and_clock.install(str(path))
    try:
        yield path
    finally:
        disk_and_clock.install(None)


def set_faults(path: Path, **faults: object) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(faults))
    os.replace(tmp, path)
    assert disk_and_clock.INJECTOR is not None
    disk_and_clock.INJECTOR.refresh(force=True)


def test_full_disk_undoes_the_append_and_the_log_works_again_when_space_returns(
    tmp_path: Path, faults: Path
) -> None:
    events: list[str] = []
    d = LogDirectory(tmp_path / "logs")
    d.on_full = lambda _d, e: events.append(str(e))
    log = d.create_log("t", 0, CFG, time_ms=T0)
    for _ in range(5):
        log.append_as_leader(make_batch(3, value_size=40), 0, time_ms=T0)
    before = hash_dir(log.directory)
    leo, epochs = log.log_end_offset, log.epoch_cache.entries()
    # Room for part of the next batch only: the write is partial, then ENOSPC.
    set_faults(faults, disk_free_bytes=50)
    for _ in range(3):
        with pytest.raises(LogDirFullError):
            # A new leader epoch: its entry must not be assigned for data not written.
            log.append_as_leader(make_batch(3, value_size=40), 1, time_ms=T0)
    assert log.log_end_offset == leo
    assert log.epoch_cache.entries() == epochs
    assert hash_dir(log.directory) == before  # nothing of it in .log/.index/.timeindex
    assert d.offline_reason is None and log.offline_reason is None
    assert len(events) == 3 and "no space left" in events[0].lower()
    assert offsets_read(log) == list(range(leo))  # reads go on
    set_faults(faults)  # space returns
    info = log.append_as_leader(make_batch(3, value_size=40), 1, time_ms=T0)
    assert info.first_offset == leo
    assert log.epoch_cache.latest_epoch == 1
    assert offsets_read(log) == list(range(leo + 3))
    check_log_invariants(log)


def test_full_disk_on_a_follower_append_of_many_groups_cuts_what_was_written(
    tmp_path: Path, faults: Path
) -> None:
    leader = LogDirectory(tmp_path / "leader").create_log("t", 0, CFG, time_ms=T0)
    for _ in range(60):
        leader.append_as_leader(make_batch(2, value_size=60), 3, time_ms=T0)
    fetched = read_everything(leader)
    assert len(fetched) > 2 * CFG.segment_bytes  # appended as several groups
    follower = LogDirectory(tmp_path / "follower").create_log("t", 0, CFG, time_ms=T0)
    set_faults(faults, disk_free_bytes=len(fetched) // 2)
    with pytest.raises(LogDirFullError):
        follower.append_as_follower(fetched, time_ms=T0)
    assert follower.log_end_offset == 0
    assert follower.epoch_cache.latest_epoch is None
    assert offsets_read(follower) == []
    set_faults(faults)
    follower.append_as_follower(fetched, time_ms=T0)
    assert offsets_read(follower) == offsets_read(leader)
    check_log_invariants(follower)


def test_failed_fsync_takes_the_log_dir_offline(tmp_path: Path, faults: Path) -> None:
    offline: list[str] = []
    d = LogDirectory(tmp_path / "logs")
    d.on_offline = lambda _d, e: offline.append(str(e))
    a = d.create_log("t", 0, CFG, time_ms=T0)
    b = d.create_log("t", 1, CFG, time_ms=T0)
    a.append_as_leader(make_batch(3), 0, time_ms=T0)
    b.append_as_leader(make_batch(3), 0, time_ms=T0)
    set_faults(faults, fsync_failure=True)
    with pytest.raises(KafkaStorageError, match="fsync"):
        a.flush()
    # flush() raises to its caller; the log manager's background flush reports it, an
    # append's inline flush (flush.messages) through the log: do that here.
    a.config = CFG.with_overrides({"flush.messages": 1})
    with pytest.raises(KafkaStorageError):
        a.append_as_leader(make_batch(1), 0, time_ms=T0)
    assert len(offline) == 1 and "injected fsync failure" in offline[0]
    for log in (a, b):  # every partition of the directory, not only the failed one
        with pytest.raises(KafkaStorageError, match="offline log directory"):
            log.append_as_leader(make_batch(1), 0, time_ms=T0)
        with pytest.raises(KafkaStorageError, match="offline log directory"):
            log.read(0, 1000)
    with pytest.raises(KafkaStorageError, match="offline"):
        d.create_log("t", 2, CFG, time_ms=T0)
    # No clean-shutdown marker for a directory whose fsync failed: the next start recovers.
    d.close()
    assert not (tmp_path / "logs" / ".kafka_cleanshutdown").exists()
    set_faults(faults)
    again = LogDirectory(tmp_path / "logs")
    again.load(CFG)
    assert not again.had_clean_shutdown
    assert offsets_read(again.logs[("t", 1)]) == [0, 1, 2]


def test_failed_segment_write_takes_the_log_dir_offline(tmp_path: Path, faults: Path) -> None:
    d = LogDirectory(tmp_path / "logs")
    log = d.create_log("t", 0, CFG, time_ms=T0)
    log.append_as_leader(make_batch(2), 0, time_ms=T0)
    set_faults(faults, write_failure=True)
    with pytest.raises(KafkaStorageError, match="injected write failure"):
        log.append_as_leader(make_batch(2), 0, time_ms=T0)
    assert d.offline_reason is not None
    assert log.log_end_offset == 2


def test_a_failed_index_append_leaves_no_batch_in_the_log(tmp_path: Path) -> None:
    # 24 bytes: three offset-index entries, but one usable time-index entry (its last
    # slot is kept for the roll), so the third append's time-index entry fails after
    # its offset-index entry went in.
    seg = LogSegment(tmp_path, 0, index_interval_bytes=0, max_index_size=24, now_ms=T0)
    first, second, third = (make_batch(1, base_offset=i, ts=T0 + i) for i in range(3))
    seg.append(0, T0, 0, first)
    seg.append(1, T0 + 1, 1, second)  # indexed in both
    size = seg.size
    with pytest.raises(IndexFullError):
        seg.append(2, T0 + 2, 2, third)
    assert seg.size == size == os.path.getsize(seg.log_path)
    assert seg.read_next_offset() == 2
    assert seg.offset_index.entries == 1 and seg.time_index.entries == 1
    assert seg.max_timestamp_so_far == T0 + 1
    seg.close()


def test_a_fault_file_that_does_not_parse_is_named_and_the_faults_stay(
    tmp_path: Path, faults: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    set_faults(faults, write_delay_ms=1)
    faults.write_text('{"fsync_fail": true}')
    assert disk_and_clock.INJECTOR is not None
    kept = disk_and_clock.INJECTOR.refresh(force=True)
    assert kept.write_delay_ms == 1
    err = capsys.readouterr().err
    assert "unknown key 'fsync_fail'" in err and str(faults) in err
    with pytest.raises(disk_and_clock.FaultFileError, match="write_delay_ms must be int"):
        disk_and_clock.parse_faults('{"write_delay_ms": "5"}', None)
    with pytest.raises(disk_and_clock.FaultFileError, match="not JSON"):
        disk_and_clock.parse_faults("{", None)
    only_two = '{"node_ids": [2], "fsync_failure": true}'
    assert disk_and_clock.parse_faults(only_two, 1).fsync_failure is False
    assert disk_and_clock.parse_faults(only_two, 2).fsync_failure is True


def test_clock_offset_and_skew(faults: Path) -> None:
    import time

    plain = disk_and_clock.plain_wall_ms()
    set_faults(faults, clock_offset_ms=-3_600_000)
    assert abs(disk_and_clock.wall_ms() - (plain - 3_600_000)) < 5_000
    mono = disk_and_clock.monotonic_s()
    set_faults(faults, monotonic_offset_ms=60_000)
    assert disk_and_clock.monotonic_s() - mono >= 60
    set_faults(faults, clock_skew=1.0)  # twice as fast, from where the clocks stand
    w0, m0 = disk_and_clock.wall_ms(), disk_and_clock.monotonic_s()
    assert abs(w0 - disk_and_clock.plain_wall_ms()) < 5_000  # no jump on change
    time.sleep(0.2)
    assert disk_and_clock.monotonic_s() - m0 >= 0.35
    assert disk_and_clock.wall_ms() - w0 >= 350
    m1 = disk_and_clock.monotonic_s()
    set_faults(faults, monotonic_offset_ms=60_000)  # the skew cleared
    assert disk_and_clock.monotonic_s() >= m1  # the monotonic clock never goes back


def test_a_blocked_disk_holds_writes_until_it_answers_again(faults: Path, tmp_path: Path) -> None:
    """write_block: a write neither fails nor progresses (a hung disk), is seen in
    flight (storage/io_watch), and completes once the file no longer blocks."""
    import threading
    import time

    from seglog.storage import io_watch

    set_faults(faults, write_block=True)
    fd = os.open(tmp_path / "blocked", os.O_WRONLY | os.O_CREAT)
    done: list[int] = []
    t = threading.Thread(target=lambda: done.append(disk_and_clock.disk_write(fd, b"abc")))
    t.start()
    try:
        time.sleep(0.3)
        assert not done and t.is_alive()
        started = io_watch.oldest_started()
        assert started is not None and time.monotonic() - started >= 0.25
    finally:
        set_faults(faults)
        t.join(5)
        os.close(fd)
    assert done == [3] and (tmp_path / "blocked").read_bytes() == b"abc"
    assert io_watch.oldest_started() is None
