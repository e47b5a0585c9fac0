"""The node's log manager: its fsyncs never run under a partition lock; a log of an
older incarnation of a topic (same name, another topic id) is replaced."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from seglog.node.log_manager import LogManager
from seglog.storage.log import now_ms
from seglog.storage.log_config import BrokerLogSettings, LogConfig
from seglog.storage.log_dir import LogDirectory
from seglog.storage.partition_metadata import PartitionMetadataFile, new_topic_id
from seglog.storage.record_batch import NewRecord, build_batch
from seglog.storage.segment import LogSegment

# Ten records of ~1000 bytes: two of these fill a 1500-byte segment, so the second rolls.
BATCH = build_batch([NewRecord(b"v" * 90) for _ in range(10)])


def lock_is_free(lock: threading.RLock) -> bool:
    """True if another thread can take `lock` now."""
    result: list[bool] = []

    def probe() -> None:
        got = lock.acquire(blocking=False)
        if got:
            lock.release()
        result.append(got)

    t = threading.Thread(target=probe)
    t.start()
    t.join(5)
    return result == [True]


@pytest.fixture
def manager(tmp_path: Path) -> LogManager:
    config = LogConfig.defaults().with_overrides({"segment.bytes": 1500})
    m = LogManager(
        (tmp_path,), config, BrokerLogSettings.defaults(), clock=now_ms, rng=random.Random(0)
    )
    m.load()
    return m


def test_checkpoint_and_deferred_flush_fsync_outside_the_partition_lock(manager, monkeypatch):
    plog = manager.get_or_create(("t", 0), manager.defaults)
    with plog.lock:
        plog.log.append_as_leader(BATCH, 0)
        plog.log.append_as_leader(BATCH, 0)  # rolls: a deferred flush
    seen: list[tuple[str, bool]] = []
    seg_flush = LogSegment.flush
    write = LogDirectory.write_checkpoints

    def flush(seg: LogSegment) -> None:
        seen.append(("segment fsync", lock_is_free(plog.lock)))
        seg_flush(seg)

    def write_checkpoints(d: LogDirectory, state) -> None:
        seen.append(("checkpoint write", lock_is_free(plog.lock)))
        write(d, state)

    monkeypatch.setattr(LogSegment, "flush", flush)
    monkeypatch.setattr(LogDirectory, "write_checkpoints", write_checkpoints)
    manager.checkpoint()
    assert seen == [("segment fsync", True), ("checkpoint write", True)]
    recovery = manager.dirs[0].recovery_points.read()
    assert recovery[("t", 0)] == 10


def test_a_log_of_an_older_incarnation_of_the_topic_is_replaced(manager):
    old_id, new_id = new_topic_id(), new_topic_id()
    plog = manager.get_or_create(("t", 0), manager.defaults, old_id)
    with plog.lock:
        plog.log.append_as_leader(BATCH, 0)
    again = manager.get_or_create(("t", 0), manager.defaults, old_id)
    assert again is plog and again.log.log_end_offset == 10
    # Same name, new topic id: the topic was deleted and created again meanwhile.
    fresh = manager.get_or_create(("t", 0), manager.defaults, new_id)
    assert fresh is not plog
    assert fresh.log.log_end_offset == 0 and fresh.log.topic_id == new_id
    metadata = PartitionMetadataFile.in_dir(fresh.log.directory).read()
    assert metadata.topic_id == new_id


def test_a_reopened_log_knows_its_topic_id(tmp_path: Path):
    topic_id = new_topic_id()
    first = LogManager(
        (tmp_path,),
        LogConfig.defaults(),
        BrokerLogSettings.defaults(),
        clock=now_ms,
        rng=random.Random(0),
    )
    first.load()
    first.get_or_create(("t", 0), first.defaults, topic_id)
    first.shutdown()
    second = LogManager(
        (tmp_path,),
        LogConfig.defaults(),
        BrokerLogSettings.defaults(),
        clock=now_ms,
        rng=random.Random(0),
    )
    second.load()
    plog = second.get(("t", 0))
    assert plog is not None and plog.log.topic_id == topic_id


def test_retention_tells_whose_log_start_moved(tmp_path: Path):
    """A follower's fetch session reads only the partitions it was told changed; a
    log start that retention moved is one (node/session_fetch.py)."""
    config = LogConfig.defaults().with_overrides({"segment.bytes": 1500, "retention.ms": 1000})
    m = LogManager(
        (tmp_path,), config, BrokerLogSettings.defaults(), clock=now_ms, rng=random.Random(0)
    )
    m.load()
    aged, idle = m.get_or_create(("t", 0), config), m.get_or_create(("t", 1), config)
    with aged.lock:
        for _ in range(3):  # rolls twice
            aged.log.append_as_leader(BATCH, 0)
        aged.log.update_high_watermark(aged.log.log_end_offset)
    with idle.lock:
        idle.log.append_as_leader(BATCH, 0)
    told: list[list[tuple[str, int]]] = []
    m.on_log_start_moved = told.append
    assert m.run_retention(now_ms() + 60_000) >= 1
    assert aged.log.log_start_offset > 0 and idle.log.log_start_offset == 0
    assert told == [[("t", 0)]]
    assert m.run_retention(now_ms() + 60_000) == 0 and len(told) == 1  # nothing moved
    m.shutdown(-1)
