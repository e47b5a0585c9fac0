"""Log behaviour, case by case, against docs/architecture.md (storage)
5.3-5.5 and 8.2-8.3."""

from __future__ import annotations

import os
import shutil
import struct
from pathlib import Path

import pytest
from log_fixtures import (
    T0,
    check_log_invariants,
    config,
    hash_dir,
    headers_of,
    index_lookup_table,
    make_batch,
    offsets_read,
    read_everything,
    records_of,
    segment_file_bytes,
    sized_batch,
)

from seglog.storage.checkpoint_file import LeaderEpochCheckpointFile
from seglog.storage.crc import crc32c
from seglog.storage.errors import (
    CorruptRecordError,
    InvalidProducerEpochError,
    InvalidRecordError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
    RecordListTooLargeError,
    UnexpectedAppendOffsetError,
    UnknownProducerIdError,
    UnsupportedMagicError,
)
from seglog.storage.flush_job import FlushJob
from seglog.storage.leader_epoch_cache import EpochEntry
from seglog.storage.log import Log
from seglog.storage.log_config import LogConfig
from seglog.storage.record_batch import (
    BatchHeader,
    NewRecord,
    TimestampType,
    build_batch,
    check_batch,
    decode_records,
)

HOUR_MS = 3_600_000
SMALL_INDEX = {"segment.index.bytes": 4096}


def open_log(tmp_path: Path, name: str = "topic-0", time_ms: int = T0, **overrides: object) -> Log:
    props = dict(SMALL_INDEX)
    props.update({k.replace("_", "."): v for k, v in overrides.items()})
    return Log.open(tmp_path / name, LogConfig.defaults().with_overrides(props), time_ms=time_ms)


def append_n(log: Log, count: int, batch: bytes, epoch: int = 0, time_ms: int = T0) -> None:
    for _ in range(count):
        log.append_as_leader(batch, epoch, time_ms=time_ms)


def follower_batch(base_offset: int, n: int = 1, epoch: int = 0, ts: int = T0) -> bytes:
    return make_batch(n, ts=ts, base_offset=base_offset, partition_leader_epoch=epoch)


def idem(seq: int, n: int = 5, pid: int = 1000, epoch: int = 0, ts: int = T0) -> bytes:
    return make_batch(n, ts=ts, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def index_entries(index: object) -> list[tuple[int, int]]:
    return [index.entry(k) for k in range(index.entries)]  # type: ignore[attr-defined]


def names(log: Log) -> list[str]:
    return sorted(p.name for p in log.directory.iterdir())


# ------------------------------------------------------------------------------------------
# 2.9: offsets and the leader epoch are assigned in place
# ------------------------------------------------------------------------------------------


def test_leader_rewrites_only_base_offset_and_epoch(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(make_batch(3), 0, time_ms=T0)
    produced = make_batch(4, ts=[T0, T0 + 1, T0 + 3, T0 + 2], key=b"k")
    info = log.append_as_leader(produced, 7, time_ms=T0)
    assert (info.first_offset, info.last_offset) == (3, 6)
    assert info.record_count == 4 and info.valid_bytes == len(produced)
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (T0 + 3, 6)
    assert log.log_end_offset == 7

    stored = Path(log.active_segment.log_path).read_bytes()[-len(produced) :]
    expected = bytearray(produced)
    struct.pack_into(">q", expected, 0, 3)
    struct.pack_into(">i", expected, 12, 7)
    assert stored == bytes(expected)
    header = check_batch(stored)  # the CRC still verifies
    assert header.crc == BatchHeader.parse(produced).crc
    assert [r.offset for r in decode_records(stored)] == [3, 4, 5, 6]


def test_multi_batch_append_assigns_consecutive_offsets(tmp_path):
    log = open_log(tmp_path)
    payload = make_batch(2, ts=T0 + 5) + make_batch(3, ts=T0 + 9) + make_batch(1, ts=T0 + 9)
    info = log.append_as_leader(payload, 2, time_ms=T0)
    assert (info.first_offset, info.last_offset, info.record_count) == (0, 5, 6)
    # the max timestamp is attributed to the first batch carrying it
    assert (info.max_timestamp, info.offset_of_max_timestamp) == (T0 + 9, 4)
    stored = segment_file_bytes(log)
    assert len(stored) == len(payload)
    hs = [h for _, h in headers_of(stored)]
    assert [(h.base_offset, h.last_offset, h.partition_leader_epoch) for h in hs] == [
        (0, 1, 2),
        (2, 4, 2),
        (5, 5, 2),
    ]
    # bytes 16.. of every batch (magic, CRC, and all CRC-covered fields) are untouched
    pos = 0
    for _p, h in headers_of(payload):
        assert stored[pos + 16 : pos + h.size] == payload[pos + 16 : pos + h.size]
        assert stored[pos + 8 : pos + 12] == payload[pos + 8 : pos + 12]
        pos += h.size


def test_log_append_time_stamps_batch_and_recomputes_crc(tmp_path):
    log = open_log(tmp_path, message_timestamp_type="LogAppendTime")
    info = log.append_as_leader(make_batch(3, ts=T0 - 1000), 0, time_ms=T0 + 42)
    assert info.log_append_time == T0 + 42
    stored = segment_file_bytes(log)
    h = check_batch(stored)
    assert h.timestamp_type == TimestampType.LOG_APPEND_TIME
    assert h.max_timestamp == T0 + 42
    assert {r.timestamp for r in decode_records(stored)} == {T0 + 42}


# ------------------------------------------------------------------------------------------
# 8.2: reads
# ------------------------------------------------------------------------------------------


def test_read_starts_at_the_batch_containing_the_offset(tmp_path):
    log = open_log(tmp_path)
    append_n(log, 3, make_batch(5))
    info = log.read(7, 1 << 20)
    hs = [h for _, h in headers_of(info.records)]
    assert [h.base_offset for h in hs] == [5, 10]
    assert info.next_offset == 15 and info.fetch_offset == 7


def test_read_returns_whole_batches_within_max_bytes(tmp_path):
    log = open_log(tmp_path)
    append_n(log, 4, sized_batch(1000, 10))
    info = log.read(0, 2999)
    assert len(info.records) == 2000
    assert [h.base_offset for _, h in headers_of(info.records)] == [0, 10]
    assert info.next_offset == 20
    assert len(log.read(0, 3000).records) == 3000


def test_read_returns_one_batch_larger_than_max_bytes(tmp_path):
    log = open_log(tmp_path)
    append_n(log, 2, sized_batch(1000, 10))
    info = log.read(3, 1)
    assert len(info.records) == 1000 and info.next_offset == 10
    assert check_batch(info.records).base_offset == 0
    strict = log.read(3, 1, min_one_batch=False)
    assert strict.records == b"" and strict.next_offset == 3


def test_read_without_min_one_batch_never_skips_to_a_later_segment(tmp_path):
    log = open_log(tmp_path, segment_bytes=1050)
    log.append_as_leader(sized_batch(1000, 10), 0, time_ms=T0)
    log.append_as_leader(make_batch(1), 0, time_ms=T0)
    assert [s.base_offset for s in log.segments] == [0, 10]
    info = log.read(0, 200, min_one_batch=False)
    assert info.records == b""
    assert info.next_offset == 0


def test_read_stops_at_the_high_watermark(tmp_path):
    log = open_log(tmp_path)
    append_n(log, 4, make_batch(5))
    assert log.update_high_watermark(10) == 10
    info = log.read(0, 1 << 20, upper_bound=log.high_watermark)
    assert [h.base_offset for _, h in headers_of(info.records)] == [0, 5]
    assert info.next_offset == 10
    at_hw = log.read(10, 1 << 20, upper_bound=10)
    assert at_hw.records == b"" and at_hw.next_offset == 10
    above_hw = log.read(13, 1 << 20, upper_bound=10)  # between HW and LEO: empty, no error
    assert above_hw.records == b""
    # a follower (bound = LEO) sees everything
    assert offsets_read(log) == list(range(20))


def test_read_out_of_range(tmp_path):
    log = open_log(tmp_path)
    append_n(log, 4, make_batch(5))
    with pytest.raises(OffsetOutOfRangeError):
        log.read(21, 100)
    assert log.read(20, 100).records == b""
    log.update_high_watermark(20)
    assert log.maybe_increment_log_start_offset(10)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(9, 100)
    assert check_batch(log.read(10, 100).records).base_offset == 10
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(21)  # beyond the HW


def test_reads_cross_segment_boundaries(tmp_path):
    log = open_log(tmp_path, segment_bytes=2500)
    append_n(log, 7, sized_batch(1000, 10))
    assert [s.base_offset for s in log.segments] == [0, 20, 40, 60]
    assert offsets_read(log) == list(range(70))
    # the last batch of a segment, and exactly at a segment base
    assert check_batch(log.read(15, 1).records).base_offset == 10
    assert check_batch(log.read(20, 1).records).base_offset == 20
    info = log.read(19, 1 << 20)
    assert info.records and check_batch(info.records).base_offset == 10


def test_read_from_an_offset_in_a_follower_gap(tmp_path):
    log = open_log(tmp_path, segment_bytes=200)
    log.append_as_follower(follower_batch(0, 2), time_ms=T0)
    log.append_as_follower(follower_batch(10, 2), time_ms=T0)  # offsets 2..9 never existed
    info = log.read(5, 1 << 20)
    assert check_batch(info.records).base_offset == 10
    assert offsets_read(log) == [0, 1, 10, 11]


# ------------------------------------------------------------------------------------------
# 3.4 / 3.5: index entries
# ------------------------------------------------------------------------------------------


def test_offset_index_worked_example(tmp_path):
    log = open_log(tmp_path, index_interval_bytes=4096)
    batch = sized_batch(1000, 10)
    append_n(log, 5, batch)
    assert log.active_segment.offset_index.entries == 0  # 4000 is not > 4096
    log.append_as_leader(batch, 0, time_ms=T0)  # the 6th chunk: position 5000, offsets 50..59
    assert index_entries(log.active_segment.offset_index) == [(59, 5000)]
    append_n(log, 4, batch)
    assert index_entries(log.active_segment.offset_index) == [(59, 5000)]
    log.append_as_leader(batch, 0, time_ms=T0)  # the 11th chunk
    assert index_entries(log.active_segment.offset_index) == [(59, 5000), (109, 10000)]
    check_log_invariants(log, single_batch_chunks=True)


def test_first_chunk_of_a_segment_is_never_indexed(tmp_path):
    log = open_log(tmp_path, index_interval_bytes=0)
    log.append_as_leader(make_batch(3), 0, time_ms=T0)
    assert log.active_segment.offset_index.entries == 0
    log.append_as_leader(make_batch(2), 0, time_ms=T0)
    size0 = len(make_batch(3))
    assert index_entries(log.active_segment.offset_index) == [(4, size0)]


def test_index_entries_point_at_batch_starts_with_that_last_offset(tmp_path):
    log = open_log(tmp_path, index_interval_bytes=300, segment_bytes=5000)
    sizes = [1, 4, 2, 9, 3, 1, 7, 5, 2, 8, 1, 6] * 5
    for i, n in enumerate(sizes):
        log.append_as_leader(make_batch(n, value_size=3 + 7 * (i % 5)), 0, time_ms=T0)
    total = sum(s.offset_index.entries for s in log.segments)
    assert total >= 10 and len(log.segments) >= 2
    for seg in log.segments:
        data = Path(seg.log_path).read_bytes()
        starts = {pos: h for pos, h in headers_of(data)}
        for off, pos in index_entries(seg.offset_index):
            assert pos in starts
            assert starts[pos].last_offset == off
    check_log_invariants(log, single_batch_chunks=True)
    # lookup semantics: every offset resolves to the batch that holds it
    for off, (_base, _pos, last) in index_lookup_table(log).items():
        assert off <= last
        found = log.translate_offset(off)
        assert found is not None and found[2].base_offset <= off


def test_multi_batch_chunk_maps_its_last_offset_to_its_first_byte(tmp_path):
    log = open_log(tmp_path, index_interval_bytes=0)
    first = make_batch(2)
    log.append_as_leader(first, 0, time_ms=T0)
    log.append_as_leader(make_batch(3) + make_batch(4), 0, time_ms=T0)
    assert index_entries(log.active_segment.offset_index) == [(8, len(first))]


def test_time_index_entries_follow_the_max_timestamp(tmp_path):
    log = open_log(tmp_path, index_interval_bytes=0)
    for ts in (T0 + 10, T0 + 30, T0 + 20, T0 + 30, T0 + 50, T0 + 40):
        log.append_as_leader(make_batch(2, ts=ts), 0, time_ms=T0)
    # indexed before chunks 2..6; the time entry carries the max so far and the last
    # offset of the first batch that reached it
    assert index_entries(log.active_segment.time_index) == [(T0 + 30, 3), (T0 + 50, 9)]
    check_log_invariants(log, single_batch_chunks=True)


def test_time_index_indexes_timestamp_zero(tmp_path):
    log = open_log(tmp_path, index_interval_bytes=0)
    for ts in (0, 0, 5):
        log.append_as_leader(make_batch(1, ts=ts), 0, time_ms=T0)
    assert index_entries(log.active_segment.time_index) == [(0, 0), (5, 2)]


def test_time_index_gets_its_final_entry_on_roll(tmp_path):
    log = open_log(tmp_path, index_interval_bytes=1 << 20)
    log.append_as_leader(make_batch(2, ts=T0 + 5), 0, time_ms=T0)
    log.append_as_leader(make_batch(2, ts=T0 + 9), 0, time_ms=T0)
    log.append_as_leader(make_batch(2, ts=T0 + 7), 0, time_ms=T0)
    seg = log.active_segment
    assert seg.time_index.entries == 0
    log.roll(time_ms=T0)
    assert index_entries(seg.time_index) == [(T0 + 9, 3)]
    assert os.path.getsize(seg.time_index.path) == 12
    assert os.path.getsize(seg.offset_index.path) == 0


# ------------------------------------------------------------------------------------------
# 4.1 / 4.2: rolling
# ------------------------------------------------------------------------------------------


def test_roll_on_segment_bytes(tmp_path):
    log = open_log(tmp_path, segment_bytes=3000)
    append_n(log, 10, sized_batch(1000, 10))
    assert [s.base_offset for s in log.segments] == [0, 30, 60, 90]
    assert [s.size for s in log.segments] == [3000, 3000, 3000, 1000]
    assert names(log) == sorted(
        [
            f"{b:020d}{suffix}"
            for b in (0, 30, 60, 90)
            for suffix in (".log", ".index", ".timeindex")
        ]
        + [f"{b:020d}.snapshot" for b in (30, 60, 90)]
        + ["leader-epoch-checkpoint"]
    )
    check_log_invariants(log, single_batch_chunks=True)


def test_rolled_segments_have_trimmed_indexes(tmp_path):
    log = open_log(tmp_path, segment_bytes=3000, index_interval_bytes=500)
    append_n(log, 10, sized_batch(1000, 10))
    for seg in log.segments[:-1]:
        assert seg.offset_index.entries == 2
        assert os.path.getsize(seg.offset_index.path) == 8 * seg.offset_index.entries
        assert os.path.getsize(seg.time_index.path) == 12 * seg.time_index.entries
    active = log.active_segment
    assert os.path.getsize(active.offset_index.path) == 4096
    assert os.path.getsize(active.time_index.path) == 4092


def test_roll_writes_producer_snapshot_and_advances_recovery_point(tmp_path):
    log = open_log(tmp_path, segment_bytes=3000)
    log.append_as_leader(idem(0, 10), 0, time_ms=T0)
    assert log.recovery_point == 0
    for k in range(1, 5):
        log.append_as_leader(
            sized_batch(1000, 10, producer_id=1000, producer_epoch=0, base_sequence=10 * k),
            0,
            time_ms=T0,
        )
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 2
    snaps = sorted(p.name for p in log.directory.glob("*.snapshot"))
    assert snaps == [f"{b:020d}.snapshot" for b in bases[1:]]
    assert log.recovery_point == bases[-1]


def test_roll_on_segment_ms_uses_record_timestamps(tmp_path):
    log = open_log(tmp_path, segment_ms=1000)
    log.append_as_leader(make_batch(1, ts=T0), 0, time_ms=T0)
    # the wall clock does not matter when records carry timestamps
    log.append_as_leader(make_batch(1, ts=T0 + 500), 0, time_ms=T0 + 10 * HOUR_MS)
    log.append_as_leader(make_batch(1, ts=T0 + 1000), 0, time_ms=T0 + 10 * HOUR_MS)
    assert len(log.segments) == 1  # waited 1000, not > 1000
    log.append_as_leader(make_batch(1, ts=T0 + 1001), 0, time_ms=T0)
    assert [s.base_offset for s in log.segments] == [0, 3]
    # the new segment's clock is the maxTimestamp of its first batch
    log.append_as_leader(make_batch(1, ts=T0 + 2001), 0, time_ms=T0)
    assert [s.base_offset for s in log.segments] == [0, 3]
    log.append_as_leader(make_batch(1, ts=T0 + 2002), 0, time_ms=T0)
    assert [s.base_offset for s in log.segments] == [0, 3, 5]


def test_roll_on_segment_ms_with_jitter(tmp_path):
    log = open_log(tmp_path, segment_ms=1000, segment_jitter_ms=600)
    jitters = []
    ts = T0
    for _ in range(15):
        seg = log.active_segment
        jitter = seg.roll_jitter_ms
        jitters.append(jitter)
        assert 0 <= jitter < 600
        first = ts
        log.append_as_leader(make_batch(1, ts=first), 0, time_ms=T0)
        ts = first + 1000 - jitter  # waited == segment.ms - jitter: no roll
        log.append_as_leader(make_batch(1, ts=ts), 0, time_ms=T0)
        assert log.active_segment is seg
        ts += 1  # one more millisecond rolls
        base = log.log_end_offset
        log.append_as_leader(make_batch(1, ts=ts), 0, time_ms=T0)
        assert log.active_segment.base_offset == base
        ts += 1
        log.roll(time_ms=T0)
    assert len(set(jitters)) > 1, "the jitter is drawn per segment"


def test_roll_on_full_offset_index(tmp_path):
    # 48 bytes: 6 offset entries; the time index (4 slots, full at 3) sees one timestamp only
    log = open_log(tmp_path, segment_index_bytes=48, index_interval_bytes=0)
    append_n(log, 15, make_batch(1, ts=T0))
    first = log.segments[0]
    assert log.segments[1].base_offset == 7  # chunks 2..7 filled the 6 entries
    assert first.offset_index.entries == 6
    assert first.time_index.entries == 1
    assert os.path.getsize(first.offset_index.path) == 48
    check_log_invariants(log, single_batch_chunks=True)


def test_roll_on_full_time_index(tmp_path):
    log = open_log(tmp_path, segment_index_bytes=48, index_interval_bytes=0)
    for i in range(10):
        log.append_as_leader(make_batch(1, ts=T0 + i), 0, time_ms=T0)
    first = log.segments[0]
    # chunks 2..4 add three time entries; the 4th slot is reserved for the roll
    assert log.segments[1].base_offset == 4
    assert first.offset_index.entries == 3
    assert index_entries(first.time_index) == [(T0 + 1, 1), (T0 + 2, 2), (T0 + 3, 3)]
    check_log_invariants(log, single_batch_chunks=True)


def test_roll_on_relative_offset_overflow(tmp_path):
    log = open_log(tmp_path)
    log.append_as_follower(follower_batch(0, 3), time_ms=T0)
    edge = 2**31 - 1
    log.append_as_follower(follower_batch(edge, 1), time_ms=T0)  # relative 2^31-1 still fits
    assert [s.base_offset for s in log.segments] == [0]
    far = edge + 1 + 2**31
    log.append_as_follower(follower_batch(far, 2), time_ms=T0)
    assert [s.base_offset for s in log.segments] == [0, far]
    assert Path(log.active_segment.log_path).name == f"{far:020d}.log"
    assert len(f"{far:020d}") == 20
    assert log.log_end_offset == far + 2
    assert offsets_read(log) == [0, 1, 2, edge, far, far + 1]
    check_log_invariants(log, single_batch_chunks=True)


def test_roll_on_batch_straddling_the_relative_limit(tmp_path):
    log = open_log(tmp_path)
    log.append_as_follower(follower_batch(0, 1), time_ms=T0)
    base = 2**31 - 2  # last offset 2^31 - 1 + 1 does not fit segment 0
    log.append_as_follower(follower_batch(base, 3), time_ms=T0)
    assert [s.base_offset for s in log.segments] == [0, base]


def test_explicit_roll_and_segment_file_names(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(make_batch(3), 0, time_ms=T0)
    seg = log.roll(time_ms=T0)
    assert seg.base_offset == 3
    assert log.roll(time_ms=T0) is seg  # an empty active segment at the LEO is kept
    assert Path(seg.log_path).name == "00000000000000000003.log"
    assert (log.directory / "00000000000000000003.snapshot").exists()


# ------------------------------------------------------------------------------------------
# 8.3: offset for timestamp
# ------------------------------------------------------------------------------------------


def brute_force_offset_for_timestamp(log: Log):
    """Kafka's answer by a plain scan (8.3): the first batch with maxTimestamp >= T, and in
    it the first record with ts >= T and offset >= log start; else the next batch."""
    start = log.log_start_offset
    data = read_everything(log)
    batches = [(h, decode_records(data, pos, h)) for pos, h in headers_of(data)]

    def answer(target: int) -> tuple[int, int] | None:
        for h, records in batches:
            if h.max_timestamp < target or h.last_offset < start:
                continue
            for r in records:
                if r.timestamp >= target and r.offset >= start:
                    return r.timestamp, r.offset
        return None

    return answer


def test_offset_for_timestamp_at_segment_boundaries(tmp_path):
    log = open_log(tmp_path, segment_bytes=250)
    for i in range(6):  # three records per batch, ts = T0 + 100*i + {0, 10, 20}
        base = T0 + 100 * i
        log.append_as_leader(make_batch(3, ts=[base, base + 10, base + 20]), i, time_ms=T0)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 3
    r = log.offset_for_timestamp(T0 + 120)
    assert r is not None and (r.timestamp, r.offset, r.leader_epoch) == (T0 + 120, 5, 1)
    r = log.offset_for_timestamp(T0 + 121)  # after the last record of batch 1 -> batch 2
    assert r is not None and (r.timestamp, r.offset, r.leader_epoch) == (T0 + 200, 6, 2)
    r = log.offset_for_timestamp(0)
    assert r is not None and r.offset == 0
    assert log.offset_for_timestamp(T0 + 521) is None
    for seg_base in bases:  # the first record of every segment
        ts = records_of(log.read(seg_base, 1).records)[0].timestamp
        r = log.offset_for_timestamp(ts)
        assert r is not None and r.offset == seg_base


def test_offset_for_timestamp_with_non_monotonic_timestamps(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(make_batch(2, ts=[T0 + 100, T0 + 110]), 0, time_ms=T0)  # 0, 1
    log.append_as_leader(make_batch(2, ts=[T0 + 300, T0 + 250]), 0, time_ms=T0)  # 2, 3
    log.append_as_leader(make_batch(2, ts=[T0 + 200, T0 + 150]), 0, time_ms=T0)  # 4, 5
    log.append_as_leader(make_batch(3, ts=[T0 + 500, T0 + 120, T0 + 600]), 0, time_ms=T0)
    expected = {
        T0 + 105: (T0 + 110, 1),
        T0 + 150: (T0 + 300, 2),  # the first batch whose max >= T, not the closest ts
        T0 + 260: (T0 + 300, 2),
        T0 + 301: (T0 + 500, 6),
        T0 + 550: (T0 + 600, 8),
        T0 + 601: None,
    }
    for target, want in expected.items():
        r = log.offset_for_timestamp(target)
        got = None if r is None else (r.timestamp, r.offset)
        assert got == want, target


def test_offset_for_timestamp_continues_past_a_batch_cut_by_the_log_start(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(make_batch(2, ts=[T0 + 500, T0 + 100]), 0, time_ms=T0)
    log.append_as_leader(make_batch(1, ts=T0 + 600), 0, time_ms=T0)
    log.update_high_watermark(3)
    log.maybe_increment_log_start_offset(1)
    r = log.offset_for_timestamp(T0 + 400)
    assert r is not None and (r.timestamp, r.offset) == (T0 + 600, 2)


def test_offset_for_timestamp_matches_a_scan_with_many_index_entries(tmp_path):
    log = open_log(tmp_path, segment_bytes=1200, index_interval_bytes=150)
    stamps = [5, 3, 9, 9, 14, 2, 20, 20, 19, 30, 31, 25, 40, 41, 42, 43, 38, 50, 60, 55] * 2
    for i, s in enumerate(stamps):
        ts = T0 + s * 10 + (i // 20) * 1000
        log.append_as_leader(make_batch(2, ts=[ts, ts - 7]), 0, time_ms=T0)
    assert len(log.segments) >= 3
    assert sum(s.time_index.entries for s in log.segments) >= 5
    log.update_high_watermark(log.log_end_offset)
    # log starts at batch boundaries (two records per batch)
    for start in (0, 8, log.segments[1].base_offset + 2):
        log.maybe_increment_log_start_offset(start)
        assert log.log_start_offset == start
        expected = brute_force_offset_for_timestamp(log)
        for target in range(T0 - 10, T0 + 1700, 3):
            r = log.offset_for_timestamp(target)
            got = None if r is None else (r.timestamp, r.offset)
            assert got == expected(target), (start, target)


# ------------------------------------------------------------------------------------------
# 4.5: truncation
# ------------------------------------------------------------------------------------------


def test_truncate_mid_segment_at_a_batch_boundary(tmp_path):
    log = open_log(tmp_path, index_interval_bytes=0)
    append_n(log, 6, make_batch(5))
    log.update_high_watermark(30)
    log.flush()
    assert log.recovery_point == 30
    seg = log.active_segment
    before = index_entries(seg.offset_index)
    assert log.truncate_to(15, time_ms=T0)
    assert log.log_end_offset == 15
    assert log.high_watermark == 15 and log.recovery_point == 15
    assert index_entries(seg.offset_index) == [e for e in before if e[0] < 15]
    assert seg.size == 3 * len(make_batch(5))
    assert offsets_read(log) == list(range(15))
    info = log.append_as_leader(make_batch(2), 0, time_ms=T0)
    assert info.first_offset == 15
    check_log_invariants(log, single_batch_chunks=True)


def test_truncate_inside_a_batch_takes_the_batch_and_leaves_no_hole(tmp_path):
    """The LEO becomes the removed batch's base offset (not the offset asked for): the
    next append or fetch starts where the data ends, so no offsets go missing."""
    log = open_log(tmp_path)
    append_n(log, 3, make_batch(5))
    log.update_high_watermark(15)
    assert log.truncate_to(12, time_ms=T0)
    assert log.log_end_offset == 10 and log.high_watermark == 10
    assert offsets_read(log) == list(range(10))
    assert log.append_as_follower(follower_batch(10, 5), time_ms=T0).first_offset == 10
    assert offsets_read(log) == list(range(15))
    check_log_invariants(log, single_batch_chunks=True)


def test_truncate_to_a_segment_base(tmp_path):
    log = open_log(tmp_path, segment_bytes=2500)
    append_n(log, 7, sized_batch(1000, 10))
    assert [s.base_offset for s in log.segments] == [0, 20, 40, 60]
    assert log.truncate_to(40, time_ms=T0)
    assert [s.base_offset for s in log.segments] == [0, 20, 40]
    assert log.active_segment.size == 0
    assert not (log.directory / f"{60:020d}.log").exists()
    assert not (log.directory / f"{60:020d}.index").exists()
    assert not list(log.directory.glob("*.snapshot")) or all(
        int(p.name.split(".")[0]) <= 40 for p in log.directory.glob("*.snapshot")
    )
    assert log.append_as_leader(make_batch(1), 0, time_ms=T0).first_offset == 40
    assert [s.base_offset for s in log.segments] == [0, 20, 40]
    check_log_invariants(log, single_batch_chunks=True)


def test_truncate_below_first_segment_truncates_fully(tmp_path):
    log = open_log(tmp_path, segment_bytes=2500, retention_bytes=0)
    append_n(log, 7, sized_batch(1000, 10), epoch=3)
    log.update_high_watermark(40)
    log.delete_old_segments(time_ms=T0)
    assert log.segments[0].base_offset == 40 and log.log_start_offset == 40
    assert log.truncate_to(25, time_ms=T0)
    assert [s.base_offset for s in log.segments] == [25]
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (25, 25, 25)
    assert log.epoch_cache.entries() == []
    assert log.producer_state.is_empty
    assert sorted(p.name for p in log.directory.glob("*.log")) == [f"{25:020d}.log"]
    assert log.append_as_leader(make_batch(1), 4, time_ms=T0).first_offset == 25


def test_truncate_beyond_leo_is_a_noop_but_drops_a_dangling_epoch(tmp_path):
    log = open_log(tmp_path)
    append_n(log, 3, make_batch(5))
    log.epoch_cache.assign(5, log.log_end_offset)  # a new leader's epoch with no data yet
    files = hash_dir(log.directory)
    assert not log.truncate_to(100, time_ms=T0)
    assert log.log_end_offset == 15
    assert log.epoch_cache.entries() == [EpochEntry(0, 0)]
    after = hash_dir(log.directory)
    after.pop("leader-epoch-checkpoint")
    files.pop("leader-epoch-checkpoint")
    assert after == files
    assert (log.directory / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"


def test_truncation_truncates_the_epoch_cache(tmp_path):
    log = open_log(tmp_path)
    for epoch in (0, 1, 2):
        append_n(log, 2, make_batch(5), epoch=epoch)
    assert log.epoch_cache.entries() == [(0, 0), (1, 10), (2, 20)]
    log.truncate_to(15, time_ms=T0)
    assert log.epoch_cache.entries() == [(0, 0), (1, 10)]
    assert LeaderEpochCheckpointFile.in_dir(log.directory).read() == [(0, 0), (1, 10)]
    assert (log.directory / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n1 10\n"
    log.truncate_to(10, time_ms=T0)
    assert log.epoch_cache.entries() == [(0, 0)]


def test_truncation_rewinds_producer_state(tmp_path):
    log = open_log(tmp_path)
    for seq in (0, 5, 10):
        log.append_as_leader(idem(seq), 0, time_ms=T0)
    retried = idem(10)
    assert log.append_as_leader(retried, 0, time_ms=T0).duplicate
    log.truncate_to(10, time_ms=T0)
    # the batch at 10..14 is gone: its retry is a new append now
    info = log.append_as_leader(retried, 0, time_ms=T0)
    assert not info.duplicate and (info.first_offset, info.last_offset) == (10, 14)
    assert log.log_end_offset == 15
    # and seq 5 is still a duplicate of its original offsets
    dup = log.append_as_leader(idem(5), 0, time_ms=T0)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (5, 9)


def test_truncation_then_next_sequence_must_follow_the_surviving_batch(tmp_path):
    log = open_log(tmp_path)
    for seq in (0, 5, 10):
        log.append_as_leader(idem(seq), 0, time_ms=T0)
    log.truncate_to(5, time_ms=T0)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(idem(15), 0, time_ms=T0)
    assert log.append_as_leader(idem(5), 0, time_ms=T0).first_offset == 5


def test_truncate_fully_and_start_at(tmp_path):
    log = open_log(tmp_path, segment_bytes=2500)
    append_n(log, 5, sized_batch(1000, 10))
    log.truncate_fully_and_start_at(1234, time_ms=T0)
    assert (log.log_start_offset, log.log_end_offset) == (1234, 1234)
    assert sorted(p.name for p in log.directory.glob("*.log")) == [f"{1234:020d}.log"]
    assert not list(log.directory.glob("*.snapshot"))
    assert log.append_as_leader(make_batch(2), 0, time_ms=T0).first_offset == 1234
    check_log_invariants(log, single_batch_chunks=True)


def test_truncation_keeps_the_largest_timestamp_of_surviving_batches(tmp_path):
    log = open_log(tmp_path, index_interval_bytes=4096)
    for i in range(8):
        log.append_as_leader(sized_batch(1000, 10, ts=T0 + 100 * i), 0, time_ms=T0)
    seg = log.active_segment
    assert index_entries(seg.time_index) == [(T0 + 500, 59)]
    log.truncate_to(70, time_ms=T0)  # batches 0..6 survive, max timestamp T0 + 600 at 69
    r = log.offset_for_timestamp(T0 + 550)
    assert r is not None and (r.timestamp, r.offset) == (T0 + 600, 60)
    log.roll(time_ms=T0)
    assert index_entries(seg.time_index) == [(T0 + 500, 59), (T0 + 600, 69)]


def test_follower_batch_straddling_an_empty_logs_start(tmp_path):
    # 2.9: the Log refuses it; the partition layer then restarts the log at the batch base
    log = open_log(tmp_path)
    log.truncate_fully_and_start_at(15, time_ms=T0)
    batch = follower_batch(10, 10, epoch=2)
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(batch, time_ms=T0)
    log.truncate_fully_and_start_at(10, time_ms=T0)
    log.append_as_follower(batch, time_ms=T0)
    assert (log.log_start_offset, log.log_end_offset) == (10, 20)
    assert log.epoch_cache.entries() == [(2, 10)]


# ------------------------------------------------------------------------------------------
# 4.3 / 4.4: retention and the log start offset
# ------------------------------------------------------------------------------------------


def timed_log(tmp_path: Path, **overrides: object) -> Log:
    """Four segments of three 1000-byte batches; segment k's records are at T0 + k hours,
    except segment 2 which is newer than segment 3."""
    log = open_log(tmp_path, segment_bytes=3000, **overrides)
    for ts in (T0, T0 + HOUR_MS, T0 + 5 * HOUR_MS, T0 + 2 * HOUR_MS):
        for _ in range(3):
            log.append_as_leader(sized_batch(1000, 10, ts=ts), 0, time_ms=T0)
        log.roll(time_ms=T0)
    assert [s.base_offset for s in log.segments] == [0, 30, 60, 90, 120]
    return log


def test_retention_ms_deletes_an_oldest_first_prefix(tmp_path):
    log = timed_log(tmp_path, retention_ms=HOUR_MS, file_delete_delay_ms=1000)
    log.update_high_watermark(log.log_end_offset)
    now = T0 + 3 * HOUR_MS + 1  # segments 0, 1, 3 expired; segment 2 (T0+5h) is not
    assert log.delete_old_segments(time_ms=now) == 2
    assert [s.base_offset for s in log.segments] == [60, 90, 120]
    assert log.log_start_offset == 60
    with pytest.raises(OffsetOutOfRangeError):
        log.read(59, 100)
    assert offsets_read(log)[0] == 60
    check_log_invariants(log, single_batch_chunks=True)


def test_retention_ms_boundary_is_strict(tmp_path):
    log = timed_log(tmp_path, retention_ms=HOUR_MS)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments(time_ms=T0 + HOUR_MS) == 0
    assert log.delete_old_segments(time_ms=T0 + HOUR_MS + 1) == 1


def test_retention_renames_then_removes_after_the_delay(tmp_path):
    log = timed_log(tmp_path, retention_ms=HOUR_MS, file_delete_delay_ms=60_000)
    log.update_high_watermark(log.log_end_offset)
    now = T0 + 3 * HOUR_MS + 1
    assert log.delete_old_segments(time_ms=now) == 2
    d = log.directory
    for base in (0, 30):
        for suffix in (".log", ".index", ".timeindex"):
            assert not (d / f"{base:020d}{suffix}").exists()
            assert (d / f"{base:020d}{suffix}.deleted").exists()
    assert (d / f"{30:020d}.snapshot.deleted").exists()
    assert (d / f"{60:020d}.snapshot").exists()
    assert log.remove_deleted_files(time_ms=now + 59_999) == 0
    assert len(list(d.glob("*.deleted"))) == 7
    assert log.remove_deleted_files(time_ms=now + 60_000) == 2
    assert not list(d.glob("*.deleted"))
    assert (d / f"{60:020d}.log").exists()


def test_retention_never_deletes_at_or_above_the_high_watermark(tmp_path):
    log = timed_log(tmp_path, retention_ms=HOUR_MS)
    log.update_high_watermark(45)  # inside segment 30
    assert log.delete_old_segments(time_ms=T0 + 100 * HOUR_MS) == 1
    assert [s.base_offset for s in log.segments] == [30, 60, 90, 120]
    log.update_high_watermark(60)  # exactly segment 30's upper bound
    assert log.delete_old_segments(time_ms=T0 + 100 * HOUR_MS) == 1
    assert log.log_start_offset == 60 <= log.high_watermark


def test_retention_rolls_when_every_segment_is_deletable(tmp_path):
    log = open_log(tmp_path, retention_ms=HOUR_MS)
    append_n(log, 3, make_batch(5))
    log.update_high_watermark(15)
    assert len(log.segments) == 1
    assert log.delete_old_segments(time_ms=T0 + 2 * HOUR_MS) == 1
    assert [s.base_offset for s in log.segments] == [15]
    assert log.active_segment.size == 0
    assert (log.log_start_offset, log.log_end_offset) == (15, 15)
    # the empty active segment is never deleted
    assert log.delete_old_segments(time_ms=T0 + 200 * HOUR_MS) == 0
    assert log.append_as_leader(make_batch(1), 0, time_ms=T0).first_offset == 15


def test_retention_bytes(tmp_path):
    log = open_log(tmp_path, segment_bytes=3000, retention_bytes=5000)
    append_n(log, 10, sized_batch(1000, 10))  # segments 3000, 3000, 3000, 1000
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments(time_ms=T0) == 1  # excess 5000: 3000 fits, then 2000 < 3000
    assert [s.base_offset for s in log.segments] == [30, 60, 90]
    assert log.size_in_bytes == 7000
    assert log.delete_old_segments(time_ms=T0) == 0  # excess 2000 < 3000


def test_retention_bytes_exactly_at_the_limit(tmp_path):
    log = open_log(tmp_path, segment_bytes=3000, retention_bytes=7000)
    append_n(log, 10, sized_batch(1000, 10))
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments(time_ms=T0) == 1  # excess 3000 - 3000 >= 0
    assert log.size_in_bytes == 7000


def test_broker_retention_hours(tmp_path):
    cfg = LogConfig.from_broker({"log.retention.hours": 2, "log.segment.bytes": 3000})
    assert cfg.retention_ms == 2 * HOUR_MS
    log = Log.open(tmp_path / "b-0", cfg, time_ms=T0)
    for ts in (T0, T0 + HOUR_MS):
        for _ in range(3):
            log.append_as_leader(sized_batch(1000, 10, ts=ts), 0, time_ms=T0)
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments(time_ms=T0 + 2 * HOUR_MS) == 0
    assert log.delete_old_segments(time_ms=T0 + 2 * HOUR_MS + 1) == 1
    assert log.log_start_offset == 30


def test_retention_truncates_the_epoch_cache_from_the_start(tmp_path):
    log = open_log(tmp_path, segment_bytes=2000, retention_bytes=0)
    append_n(log, 3, sized_batch(1000, 5), epoch=0)  # 0..14
    append_n(log, 3, sized_batch(1000, 5), epoch=1)  # 15..29
    assert [s.base_offset for s in log.segments] == [0, 10, 20]
    assert log.epoch_cache.entries() == [(0, 0), (1, 15)]
    log.update_high_watermark(20)
    assert log.delete_old_segments(time_ms=T0) == 2
    assert log.log_start_offset == 20
    assert log.epoch_cache.entries() == [(1, 20)]
    assert LeaderEpochCheckpointFile.in_dir(log.directory).read() == [(1, 20)]


def test_log_start_offset_breach_deletes_segments_below_it(tmp_path):
    log = open_log(tmp_path, segment_bytes=3000, retention_ms=-1)
    append_n(log, 10, sized_batch(1000, 10))
    log.update_high_watermark(log.log_end_offset)
    assert log.maybe_increment_log_start_offset(65)
    assert log.delete_old_segments(time_ms=T0 + 1000 * HOUR_MS) == 2
    assert [s.base_offset for s in log.segments] == [60, 90]
    assert log.log_start_offset == 65
    with pytest.raises(OffsetOutOfRangeError):
        log.read(64, 100)
    assert offsets_read(log)[0] == 65


def test_compacted_topic_applies_only_the_start_offset_rule(tmp_path):
    log = open_log(tmp_path, segment_bytes=3000, retention_ms=1, cleanup_policy="compact")
    append_n(log, 10, sized_batch(1000, 10, key=b"k"))
    log.update_high_watermark(log.log_end_offset)
    assert log.delete_old_segments(time_ms=T0 + 1000 * HOUR_MS) == 0
    log.maybe_increment_log_start_offset(30)
    assert log.delete_old_segments(time_ms=T0 + 1000 * HOUR_MS) == 1


# ------------------------------------------------------------------------------------------
# 5.5: idempotent producers
# ------------------------------------------------------------------------------------------


def test_retries_of_the_last_five_batches_are_answered_with_original_offsets(tmp_path):
    log = open_log(tmp_path)
    originals = {}
    for k in range(7):
        info = log.append_as_leader(idem(5 * k), 0, time_ms=T0)
        originals[5 * k] = (info.first_offset, info.last_offset)
    leo, files = log.log_end_offset, hash_dir(log.directory)
    for seq in (10, 15, 20, 25, 30):
        info = log.append_as_leader(idem(seq), 0, time_ms=T0)
        assert info.duplicate
        assert (info.first_offset, info.last_offset) == originals[seq]
    assert log.log_end_offset == leo
    assert hash_dir(log.directory) == files
    # the 6th most recent batch is out of the window: its retry is out of order
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(idem(5), 0, time_ms=T0)
    assert hash_dir(log.directory) == files


def test_out_of_order_sequence_leaves_the_log_unchanged(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(idem(0), 0, time_ms=T0)
    files = hash_dir(log.directory)
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(idem(6), 0, time_ms=T0)
    with pytest.raises(OutOfOrderSequenceError):  # epoch bump must restart at 0
        log.append_as_leader(idem(5, epoch=1), 0, time_ms=T0)
    with pytest.raises(OutOfOrderSequenceError):  # a good batch then a gap: all or nothing
        log.append_as_leader(idem(5) + idem(11), 0, time_ms=T0)
    assert hash_dir(log.directory) == files
    assert log.log_end_offset == 5
    assert log.append_as_leader(idem(5), 0, time_ms=T0).first_offset == 5


def test_fenced_producer_epoch_leaves_the_log_unchanged(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(idem(0, epoch=3), 0, time_ms=T0)
    log.append_as_leader(idem(0, epoch=4), 0, time_ms=T0)
    files, leo = hash_dir(log.directory), log.log_end_offset
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(idem(5, epoch=3), 0, time_ms=T0)
    assert hash_dir(log.directory) == files and log.log_end_offset == leo


def test_unknown_producer_must_start_at_sequence_zero(tmp_path):
    log = open_log(tmp_path)
    with pytest.raises(UnknownProducerIdError, match="starts at sequence 77, not 0"):
        log.append_as_leader(idem(77, pid=5), 0, time_ms=T0)
    assert log.log_end_offset == 0  # refused before anything was written
    assert log.append_as_leader(idem(0, pid=5), 0, time_ms=T0).first_offset == 0
    assert log.append_as_leader(idem(5, pid=5), 0, time_ms=T0).first_offset == 5


def test_unknown_producer_replicated_at_any_sequence(tmp_path):
    leader = open_log(tmp_path, "lead-0")
    leader.append_as_leader(idem(0, pid=5), 0, time_ms=T0)
    leader.append_as_leader(idem(5, pid=5), 0, time_ms=T0)
    # A follower whose log starts after the producer's first batch (here: it copies only
    # the second) takes it as the leader wrote it: replication never judges sequences.
    follower = open_log(tmp_path, "lead-1")
    follower.truncate_fully_and_start_at(5, time_ms=T0)
    second = leader.read(5, 1 << 20).records
    follower.append_as_follower(second, time_ms=T0)
    assert follower.log_end_offset == 10


# ------------------------------------------------------------------------------------------
# 2.9: follower appends
# ------------------------------------------------------------------------------------------


def test_follower_copies_leader_bytes_verbatim(tmp_path):
    cfg = {"segment_bytes": 2500, "index_interval_bytes": 700}
    leader = open_log(tmp_path, "lead-0", **cfg)
    for k, epoch in enumerate((0, 0, 0, 2, 2, 5, 5, 5, 5)):
        leader.append_as_leader(sized_batch(700 + 37 * k, 1 + k, ts=T0 + k), epoch, time_ms=T0)
    leader.append_as_leader(idem(0), 5, time_ms=T0)
    follower = open_log(tmp_path, "lead-1", **cfg)
    while follower.log_end_offset < leader.log_end_offset:
        chunk = leader.read(follower.log_end_offset, 1600).records
        follower.append_as_follower(chunk, time_ms=T0)
    assert [s.base_offset for s in follower.segments] == [s.base_offset for s in leader.segments]
    for fs, ls in zip(follower.segments, leader.segments, strict=True):
        assert Path(fs.log_path).read_bytes() == Path(ls.log_path).read_bytes()
    assert follower.epoch_cache.entries() == leader.epoch_cache.entries()
    assert follower.epoch_cache.entries() == [(0, 0), (2, 6), (5, 15)]
    assert follower.producer_state.last_entry(1000).last_seq == 4
    check_log_invariants(follower)


def test_follower_rejects_offsets_below_its_leo(tmp_path):
    log = open_log(tmp_path)
    log.append_as_follower(follower_batch(0, 5), time_ms=T0)
    files = hash_dir(log.directory)
    with pytest.raises(UnexpectedAppendOffsetError):
        log.append_as_follower(follower_batch(4, 2), time_ms=T0)
    with pytest.raises(UnexpectedAppendOffsetError):  # overlapping batches inside one fetch
        log.append_as_follower(follower_batch(5, 3) + follower_batch(7, 1), time_ms=T0)
    assert hash_dir(log.directory) == files and log.log_end_offset == 5


def test_follower_rejects_corrupt_batches(tmp_path):
    log = open_log(tmp_path)
    log.append_as_follower(follower_batch(0, 5), time_ms=T0)
    files = hash_dir(log.directory)
    bad = bytearray(follower_batch(5, 2))
    bad[-1] ^= 0x01
    with pytest.raises(CorruptRecordError):
        log.append_as_follower(follower_batch(5, 1) + bytes(bad), time_ms=T0)
    assert hash_dir(log.directory) == files and log.log_end_offset == 5


def test_follower_learns_epochs_from_batches(tmp_path):
    log = open_log(tmp_path)
    payload = follower_batch(0, 2, epoch=1) + follower_batch(2, 2, epoch=1)
    payload += follower_batch(4, 1, epoch=4) + follower_batch(5, 1, epoch=7)
    log.append_as_follower(payload, time_ms=T0)
    assert log.epoch_cache.entries() == [(1, 0), (4, 4), (7, 5)]
    assert (log.directory / "leader-epoch-checkpoint").read_text() == "0\n3\n1 0\n4 4\n7 5\n"


# ------------------------------------------------------------------------------------------
# 2.9: bad client input leaves the partition directory byte-for-byte unchanged
# ------------------------------------------------------------------------------------------


def _recrc(buf: bytearray) -> bytes:
    struct.pack_into(">I", buf, 17, crc32c(memoryview(buf)[21:]))
    return bytes(buf)


def _bad_crc() -> bytes:
    b = bytearray(make_batch(3))
    b[-2] ^= 0xFF
    return bytes(b)


def _bad_magic() -> bytes:
    b = bytearray(make_batch(3))
    b[16] = 1
    return bytes(b)


def _length_too_long() -> bytes:
    b = bytearray(make_batch(3))
    struct.pack_into(">i", b, 8, len(b) - 12 + 10)
    return bytes(b)


def _length_too_short() -> bytes:
    b = bytearray(make_batch(3))
    struct.pack_into(">i", b, 8, 40)  # below the 61-byte header
    return bytes(b)


def _length_cuts_a_record() -> bytes:
    # batchLength shortened by 5 and the CRC recomputed over the shorter range: the tail
    # bytes then start a "batch" of garbage
    b = bytearray(make_batch(3))
    struct.pack_into(">i", b, 8, len(b) - 12 - 5)
    struct.pack_into(">I", b, 17, crc32c(memoryview(b)[21 : len(b) - 5]))
    return bytes(b)


def _base_offset_nonzero() -> bytes:
    return make_batch(3, base_offset=5)


def _delta_mismatch() -> bytes:
    b = bytearray(make_batch(3))
    struct.pack_into(">i", b, 23, 1)
    return _recrc(b)


def _count_mismatch() -> bytes:
    b = bytearray(make_batch(3))
    struct.pack_into(">i", b, 57, 4)
    return _recrc(b)


def _control_batch() -> bytes:
    return build_batch(
        [NewRecord(b"\x00\x00\x00\x01", key=b"\x00\x00\x00\x01", timestamp=T0)],
        producer_id=9,
        producer_epoch=0,
        is_control=True,
        is_transactional=True,
    )


def _pid_without_sequence() -> bytes:
    return make_batch(2, producer_id=9, producer_epoch=0, base_sequence=-1)


BAD_INPUTS = {
    "bad-crc": (_bad_crc, CorruptRecordError),
    "magic-1": (_bad_magic, UnsupportedMagicError),
    "length-too-long": (_length_too_long, CorruptRecordError),
    "length-too-short": (_length_too_short, CorruptRecordError),
    "length-cuts-record": (_length_cuts_a_record, CorruptRecordError),
    "base-offset-5": (_base_offset_nonzero, InvalidRecordError),
    "last-offset-delta": (_delta_mismatch, InvalidRecordError),
    "records-count": (_count_mismatch, InvalidRecordError),
    "control-batch": (_control_batch, InvalidRecordError),
    "pid-no-sequence": (_pid_without_sequence, InvalidRecordError),
    "empty": (lambda: b"", InvalidRecordError),
}


@pytest.mark.parametrize(
    ("case", "after_good_batch"),
    [(c, False) for c in sorted(BAD_INPUTS)]
    + [(c, True) for c in sorted(BAD_INPUTS) if c != "empty"],
)
def test_bad_client_input_is_refused_and_changes_nothing(tmp_path, case, after_good_batch):
    make, error = BAD_INPUTS[case]
    log = open_log(tmp_path)
    log.append_as_leader(idem(0), 0, time_ms=T0)
    files, leo = hash_dir(log.directory), log.log_end_offset
    payload = make()
    if after_good_batch:  # a valid batch first: the whole append is refused
        payload = make_batch(2) + payload
    with pytest.raises(error):
        log.append_as_leader(payload, 0, time_ms=T0)
    assert hash_dir(log.directory) == files
    assert log.log_end_offset == leo
    assert log.append_as_leader(idem(5), 0, time_ms=T0).first_offset == leo


def _records_shorter_than_declared() -> bytes:
    """recordsCount and lastOffsetDelta say 3, but only 2 records are present (CRC valid)."""
    two = bytearray(make_batch(2))
    struct.pack_into(">i", two, 23, 2)
    struct.pack_into(">i", two, 57, 3)
    return _recrc(two)


def _record_length_lies() -> bytes:
    """The first record's length varint claims one byte more than it has (CRC valid)."""
    b = bytearray(make_batch(2))
    assert b[61] < 0x3F * 2  # a one-byte zig-zag varint
    b[61] += 2
    return _recrc(b)


@pytest.mark.parametrize("make", [_records_shorter_than_declared, _record_length_lies])
def test_batches_with_lying_record_sections_fail_when_decoded(tmp_path, make):
    """By design the append path checks a batch's header and CRC only and never
    decodes its records (unlike Kafka's validator): a producer that computed a valid
    CRC over a broken records section gets it stored, and every reader that decodes
    it gets CorruptRecordError naming the batch."""
    log = open_log(tmp_path)
    log.append_as_leader(make_batch(1), 0, time_ms=T0)
    info = log.append_as_leader(make(), 0, time_ms=T0)
    data = log.read(info.first_offset, 1 << 20).records
    with pytest.raises(CorruptRecordError):
        decode_records(data, 0)


def test_message_too_large(tmp_path):
    log = open_log(tmp_path, max_message_bytes=999)
    log.append_as_leader(make_batch(1), 0, time_ms=T0)
    files = hash_dir(log.directory)
    with pytest.raises(MessageTooLargeError):
        log.append_as_leader(sized_batch(1000, 2), 0, time_ms=T0)
    assert hash_dir(log.directory) == files
    log.append_as_leader(sized_batch(999, 2), 0, time_ms=T0)  # exactly the limit is fine


def test_append_larger_than_segment_bytes(tmp_path):
    log = open_log(tmp_path, segment_bytes=1500)
    log.append_as_leader(make_batch(1), 0, time_ms=T0)
    files = hash_dir(log.directory)
    with pytest.raises(RecordListTooLargeError):
        log.append_as_leader(sized_batch(1501, 2), 0, time_ms=T0)
    with pytest.raises(RecordListTooLargeError):  # the whole append counts
        log.append_as_leader(sized_batch(800, 2) + sized_batch(800, 2), 0, time_ms=T0)
    assert hash_dir(log.directory) == files
    log.append_as_leader(sized_batch(1500, 2), 0, time_ms=T0)
    assert [s.size for s in log.segments] == [len(make_batch(1)), 1500]


# ------------------------------------------------------------------------------------------
# 3.7: close, reopen, recovery
# ------------------------------------------------------------------------------------------


def populated_log(tmp_path: Path, name: str = "topic-0") -> Log:
    log = open_log(tmp_path, name, segment_bytes=2500, index_interval_bytes=600)
    for k, epoch in enumerate((0, 0, 1, 1, 1, 3, 3, 3, 3, 3)):
        log.append_as_leader(
            sized_batch(
                500 + 50 * (k % 4),
                1 + k % 5,
                ts=T0 + 1000 * (k % 6),
                producer_id=1000,
                producer_epoch=0,
                base_sequence=sum(1 + j % 5 for j in range(k)),
            ),
            epoch,
            time_ms=T0,
        )
    log.append_as_leader(make_batch(3, ts=T0 + 4000), 3, time_ms=T0)
    assert len(log.segments) >= 3
    log.update_high_watermark(log.log_end_offset - 3)
    return log


def lookups(log: Log) -> dict[str, object]:
    return {
        "segments": [s.base_offset for s in log.segments],
        "leo": log.log_end_offset,
        "translate": index_lookup_table(log),
        "bytes": read_everything(log),
        "by_time": [
            (t, None if r is None else (r.timestamp, r.offset, r.leader_epoch))
            for t in range(T0 - 1, T0 + 6000, 250)
            for r in [log.offset_for_timestamp(t)]
        ],
        "epochs": log.epoch_cache.entries(),
    }


def last_batch_retry(log: Log) -> bytes:
    entry = log.producer_state.last_entry(1000)
    assert entry is not None
    meta = entry.batch_metadata[-1]
    n = meta.offset_delta + 1
    return make_batch(n, ts=T0, producer_id=1000, producer_epoch=0, base_sequence=meta.first_seq)


def test_clean_close_and_reopen_keeps_everything(tmp_path):
    log = populated_log(tmp_path)
    before = lookups(log)
    retry = last_batch_retry(log)
    original = log.append_as_leader(retry, 3, time_ms=T0)
    assert original.duplicate
    hw, start = log.high_watermark, log.log_start_offset
    log.close()
    for seg in log.segments:  # every index is trimmed at close, the active one included
        assert os.path.getsize(seg.offset_index.path) == 8 * seg.offset_index.entries
        assert os.path.getsize(seg.time_index.path) == 12 * seg.time_index.entries
    assert (log.directory / f"{before['leo']:020d}.snapshot").exists()

    reopened = Log.open(
        tmp_path / "topic-0",
        config(segment_bytes=2500, index_interval_bytes=600, segment_index_bytes=4096),
        recovery_point=before["leo"],
        log_start_offset=start,
        high_watermark=hw,
        had_clean_shutdown=True,
        time_ms=T0,
    )
    assert lookups(reopened) == before
    assert reopened.high_watermark == hw and reopened.recovery_point == before["leo"]
    dup = reopened.append_as_leader(retry, 3, time_ms=T0)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (
        original.first_offset,
        original.last_offset,
    )
    assert reopened.log_end_offset == before["leo"]
    check_log_invariants(reopened, single_batch_chunks=True)


def test_crash_reopen_rebuilds_indexes_with_identical_lookups(tmp_path):
    log = populated_log(tmp_path)
    before = lookups(log)
    retry = last_batch_retry(log)
    # a crash: the files as they are now (active indexes still preallocated), no close
    crashed = tmp_path / "disk" / "topic-0"
    shutil.copytree(log.directory, crashed)
    assert os.path.getsize(crashed / f"{before['segments'][-1]:020d}.index") == 4096
    for p in crashed.glob("*.index"):  # indexes are disposable: drop one entirely
        if p.name.startswith(f"{before['segments'][1]:020d}"):
            p.unlink()
    reopened = Log.open(
        crashed,
        config(segment_bytes=2500, index_interval_bytes=600, segment_index_bytes=4096),
        recovery_point=0,
        had_clean_shutdown=False,
        time_ms=T0,
    )
    assert lookups(reopened) == before
    check_log_invariants(reopened, single_batch_chunks=True)
    dup = reopened.append_as_leader(retry, 3, time_ms=T0)
    assert dup.duplicate
    assert reopened.log_end_offset == before["leo"]
    nxt = reopened.append_as_leader(make_batch(1), 3, time_ms=T0)
    assert nxt.first_offset == before["leo"]


def test_crash_reopen_from_the_real_recovery_point(tmp_path):
    log = populated_log(tmp_path)
    assert 0 < log.recovery_point < log.log_end_offset  # rolls flushed below the active segment
    before = lookups(log)
    crashed = tmp_path / "disk" / "topic-0"
    shutil.copytree(log.directory, crashed)
    reopened = Log.open(
        crashed,
        config(segment_bytes=2500, index_interval_bytes=600, segment_index_bytes=4096),
        recovery_point=log.recovery_point,
        high_watermark=log.high_watermark,
        time_ms=T0,
    )
    assert lookups(reopened) == before
    assert reopened.recovery_point == log.recovery_point
    assert reopened.high_watermark == log.high_watermark
    check_log_invariants(reopened, single_batch_chunks=True)


def test_index_interval_counts_from_zero_after_a_clean_reopen(tmp_path):
    cfg = config(index_interval_bytes=4096, segment_index_bytes=4096)
    log = Log.open(tmp_path / "topic-0", cfg, time_ms=T0)
    batch = sized_batch(1000, 10)
    append_n(log, 3, batch)
    log.close()
    log = Log.open(tmp_path / "topic-0", cfg, had_clean_shutdown=True, time_ms=T0)
    assert os.path.getsize(log.active_segment.offset_index.path) == 4096  # resized for appends
    append_n(log, 5, batch)
    assert index_entries(log.active_segment.offset_index) == []
    log.append_as_leader(batch, 0, time_ms=T0)  # 5000 bytes since the reopen
    assert index_entries(log.active_segment.offset_index) == [(89, 8000)]
    check_log_invariants(log, single_batch_chunks=True)


def test_crash_with_a_torn_tail_truncates_it(tmp_path):
    log = populated_log(tmp_path)
    before = lookups(log)
    crashed = tmp_path / "disk" / "topic-0"
    shutil.copytree(log.directory, crashed)
    active = crashed / f"{before['segments'][-1]:020d}.log"
    good_size = os.path.getsize(active)
    with open(active, "ab") as f:
        f.write(make_batch(4, base_offset=before["leo"])[:-9])  # half-written batch
    reopened = Log.open(
        crashed,
        config(segment_bytes=2500, index_interval_bytes=600, segment_index_bytes=4096),
        recovery_point=0,
        time_ms=T0,
    )
    assert os.path.getsize(active) == good_size
    assert lookups(reopened) == before


def test_crash_with_corruption_in_an_older_segment_drops_what_follows(tmp_path):
    log = populated_log(tmp_path)
    segs = [s.base_offset for s in log.segments]
    crashed = tmp_path / "disk" / "topic-0"
    shutil.copytree(log.directory, crashed)
    second = crashed / f"{segs[1]:020d}.log"
    data = bytearray(second.read_bytes())
    first_size = BatchHeader.parse(data).size
    data[first_size + 70] ^= 0xFF  # corrupt the second batch of segment 1
    second.write_bytes(bytes(data))
    reopened = Log.open(
        crashed,
        config(segment_bytes=2500, index_interval_bytes=600, segment_index_bytes=4096),
        recovery_point=0,
        time_ms=T0,
    )
    assert [s.base_offset for s in reopened.segments] == segs[:2]
    assert os.path.getsize(second) == first_size
    assert reopened.log_end_offset == BatchHeader.parse(data).next_offset
    assert not (crashed / f"{segs[2]:020d}.log").exists()
    check_log_invariants(reopened, single_batch_chunks=True)
    assert all(e.start_offset < reopened.log_end_offset for e in reopened.epoch_cache.entries())


def test_reopen_removes_leftover_deleted_files(tmp_path):
    log = timed_log(tmp_path, retention_ms=HOUR_MS)
    log.update_high_watermark(log.log_end_offset)
    log.delete_old_segments(time_ms=T0 + 3 * HOUR_MS + 1)
    assert list(log.directory.glob("*.deleted"))
    crashed = tmp_path / "disk" / "topic-0"
    shutil.copytree(log.directory, crashed)
    reopened = Log.open(crashed, log.config, log_start_offset=60, high_watermark=60, time_ms=T0)
    assert not list(crashed.glob("*.deleted"))
    assert [s.base_offset for s in reopened.segments] == [60, 90, 120]
    assert reopened.log_start_offset == 60


def test_flush_if_due(tmp_path):
    log = open_log(tmp_path, flush_ms=1000)
    log.append_as_leader(make_batch(2), 0, time_ms=T0)
    # wants_flush (the scheduler's lock-free look) agrees with what a flush would do.
    assert not log.wants_flush(time_ms=T0 + 999)
    assert not log.flush_if_due(time_ms=T0 + 999)
    assert log.recovery_point == 0
    assert log.wants_flush(time_ms=T0 + 1000)
    assert log.flush_if_due(time_ms=T0 + 1000)
    assert log.recovery_point == 2
    assert not log.wants_flush(time_ms=T0 + 5000)
    assert not log.flush_if_due(time_ms=T0 + 5000)  # nothing new


def test_flush_ms_clock_restarts_at_a_roll_with_the_callers_time(tmp_path):
    log = open_log(tmp_path, flush_ms=1000, segment_bytes=1500)
    log.append_as_leader(sized_batch(1000, 10), 0, time_ms=T0)
    log.append_as_leader(sized_batch(1000, 10), 0, time_ms=T0 + 500)  # rolls at T0 + 500
    assert [s.base_offset for s in log.segments] == [0, 10]
    assert log.recovery_point == 10
    assert not log.flush_if_due(time_ms=T0 + 1499)
    assert log.flush_if_due(time_ms=T0 + 1500)
    assert log.recovery_point == 20


def rolled_log_and_its_flush_job(tmp_path: Path) -> tuple[Log, FlushJob]:
    """A log whose second batch rolled it, and the deferred flush of [0, 10) taken."""
    log = open_log(tmp_path, segment_bytes=1500)
    log.append_as_leader(sized_batch(1000, 10), 0, time_ms=T0)
    log.append_as_leader(sized_batch(1000, 10), 0, time_ms=T0)
    job = log.begin_flush(time_ms=T0)
    assert job is not None and job.target == 10
    return log, job


def test_a_flush_job_runs_outside_the_log_and_moves_the_recovery_point_after(tmp_path):
    log, job = rolled_log_and_its_flush_job(tmp_path)
    assert [s.base_offset for s in job.segments] == [0]
    log.append_as_leader(make_batch(3), 0, time_ms=T0)  # appends go on meanwhile
    assert job.run()
    assert log.durable_offset == 0  # not before end_flush
    log.end_flush(job)
    assert log.recovery_point == 10
    assert not log.wants_flush(time_ms=T0)
    assert log.begin_flush(time_ms=T0) is None  # nothing deferred left


def test_a_flush_job_finishing_after_a_truncation_leaves_the_recovery_point(tmp_path):
    log, job = rolled_log_and_its_flush_job(tmp_path)
    log.truncate_to(10)  # drops the active segment's data
    log.append_as_leader(sized_batch(1000, 10), 1, time_ms=T0)
    job.run()
    log.end_flush(job)
    assert log.durable_offset == 0  # the job's data may be gone: ignored
    check_log_invariants(log)


def test_a_failed_flush_job_is_pending_again(tmp_path):
    log, job = rolled_log_and_its_flush_job(tmp_path)
    job.segments[0].close()  # its fsync now fails, as on a failing disk
    assert not job.run()
    assert job.error is not None and "topic-0" in str(job.error)
    log.end_flush(job)
    assert log.durable_offset == 0
    assert log.wants_flush(time_ms=T0)
    retry = log.begin_flush(time_ms=T0)
    assert retry is not None and retry.target == 10


def test_flush_messages_flushes_inline(tmp_path):
    log = open_log(tmp_path, flush_messages=5)
    log.append_as_leader(make_batch(4), 0, time_ms=T0)
    assert log.recovery_point == 0
    log.append_as_leader(make_batch(1), 0, time_ms=T0)
    assert log.recovery_point == 5


def test_records_survive_a_round_trip(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(make_batch(3, ts=[T0, T0 + 1, T0 + 2], key=b"key"), 0, time_ms=T0)
    rs = records_of(read_everything(log))
    assert [(r.offset, r.key, r.timestamp) for r in rs] == [
        (0, b"key", T0),
        (1, b"key", T0 + 1),
        (2, b"key", T0 + 2),
    ]


def test_a_roll_writes_its_producer_snapshot_without_fsync_and_the_flush_job_syncs_it(
    tmp_path, monkeypatch
):
    """Kafka's takeSnapshot(false) at a roll: an fsync there would stall the appending
    thread (the node's event loop); the roll's deferred flush job makes it durable."""
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    log = open_log(tmp_path, segment_bytes=3000)
    log.append_as_leader(idem(0, 10), 0, time_ms=T0)
    monkeypatch.setattr(os, "fsync", fsync)
    log.append_as_leader(
        sized_batch(2900, 10, producer_id=1000, producer_epoch=0, base_sequence=10), 0, time_ms=T0
    )
    log.append_as_leader(
        sized_batch(2900, 10, producer_id=1000, producer_epoch=0, base_sequence=20), 0, time_ms=T0
    )
    snapshots = sorted(str(p) for p in log.directory.glob("*.snapshot"))
    assert snapshots, "no roll happened"
    assert not [s for s in synced if s.endswith(".snapshot")], synced
    job = log.begin_flush(time_ms=T0)
    assert job is not None
    assert job.run(), job.error
    log.end_flush(job)
    assert set(snapshots) <= set(synced), (snapshots, synced)
