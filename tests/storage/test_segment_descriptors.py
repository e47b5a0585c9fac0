"""A segment holds one file descriptor (its `.log`), as in Kafka: the indexes are
mapped on first use and the log keeps at most MAX_MAPPED_INACTIVE inactive segments'
indexes mapped. Python's mmap keeps a duplicate descriptor per mapping, so with
every index mapped a segment held three, and a chaos soak's node with ~6,600
segments reached its 20,000-descriptor limit (its log directory went offline and a
restart could not even open its segments)."""

from __future__ import annotations

import os
from pathlib import Path

from log_fixtures import T0, make_batch

from seglog.storage.log import MAX_MAPPED_INACTIVE, Log
from seglog.storage.log_config import LogConfig

SEGMENTS = 120
HOUR_MS = 3_600_000


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def small_segment_log(path: Path, **overrides: str) -> Log:
    props = {"segment.bytes": "200", "index.interval.bytes": "1", **overrides}
    return Log.open(path, LogConfig.defaults().with_overrides(props), time_ms=T0)


def fill(log: Log, segments: int) -> None:
    """Two batches per segment, timestamps an hour apart per segment."""
    for i in range(segments * 2):
        log.append_as_leader(make_batch(2, ts=T0 + (i // 2) * HOUR_MS, value_size=40), 0)
    log.update_high_watermark(log.log_end_offset)


def read_all(log: Log) -> int:
    offset, n = 0, 0
    while offset < log.log_end_offset:
        info = log.read(offset, 1 << 20, upper_bound=log.high_watermark)
        assert info.records, f"nothing read at {offset}"
        offset = info.next_offset
        n += 1
    return n


def mapped(log: Log) -> int:
    return sum(1 for s in log.segments if s.indexes_loaded)


def test_a_log_holds_one_descriptor_per_segment_while_writing_loading_and_reading(
    tmp_path: Path,
) -> None:
    before = open_fds()
    log = small_segment_log(tmp_path / "t-0")
    fill(log, SEGMENTS)
    segments = len(log.segments)
    assert segments >= SEGMENTS
    bound = segments + 2 * (MAX_MAPPED_INACTIVE + 1)
    assert open_fds() - before <= bound
    log.close()
    assert open_fds() == before

    reopened = small_segment_log(tmp_path / "t-0")  # a clean load: every segment checked
    assert len(reopened.segments) == segments
    reopened.update_high_watermark(reopened.log_end_offset)
    assert open_fds() - before <= bound
    assert read_all(reopened) >= segments  # every segment's index used once
    assert mapped(reopened) <= MAX_MAPPED_INACTIVE + 1
    assert open_fds() - before <= bound
    # Every record is there, in order, after all the mapping and unmapping.
    assert reopened.log_end_offset == SEGMENTS * 4
    reopened.close()
    assert open_fds() == before


def test_unmapped_indexes_answer_timestamps_flush_and_retention(tmp_path: Path) -> None:
    log = small_segment_log(tmp_path / "t-0", **{"retention.ms": str(10 * HOUR_MS)})
    fill(log, 40)
    stamps = [s.largest_timestamp for s in log.segments[:-1]]
    log.close()
    log = small_segment_log(tmp_path / "t-0", **{"retention.ms": str(10 * HOUR_MS)})
    log.update_high_watermark(log.log_end_offset)  # retention deletes only below it
    assert mapped(log) <= MAX_MAPPED_INACTIVE + 1
    # Read from the files of unmapped time indexes: the same as when they were mapped.
    assert [s.largest_timestamp for s in log.segments[:-1]] == stamps
    assert mapped(log) <= MAX_MAPPED_INACTIVE + 1
    found = log.offset_for_timestamp(T0 + 25 * HOUR_MS)
    assert found is not None and found.offset == 100
    assert mapped(log) <= MAX_MAPPED_INACTIVE + 1
    log.flush(log.log_end_offset)  # unmapped indexes are fsynced through their files
    deleted = log.delete_old_segments(time_ms=T0 + 40 * HOUR_MS)
    assert deleted == 60 and log.log_start_offset == 120  # older than 10 h: 60 segments
    for seg in log.segments:
        assert seg.log_path.exists()
        assert all(p.exists() or p.with_name(p.name + ".deleted").exists() for p in seg.index_paths)
    log.close()
