"""The log cleaner against a model: after cleaning, the cleanable part of a compacted
log holds exactly the last record of every key at its original offset, tombstones
until delete.retention.ms after the cleaner first passed them; the rest of the log
is untouched. Plus producer state, transactions, the checkpoint, and refusing
records without a key."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from cleaner_fixtures import (
    RETENTION_MS,
    SENTINEL,
    T0,
    batches_on_disk,
    clean_fully,
    compact_config,
    keyed_batch,
    marker_batch,
    open_compacted,
    records_on_disk,
    seal,
)
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from seglog.storage.checkpoint_file import CLEANER_OFFSET_CHECKPOINT
from seglog.storage.cleaner_checkpoint import CleanerCheckpoint
from seglog.storage.compression import CompressionType
from seglog.storage.dump_log import DumpOptions, dump_files
from seglog.storage.errors import InvalidRecordError, StorageError
from seglog.storage.log import Log
from seglog.storage.log_cleaner import clean_log
from seglog.storage.offset_map import BYTES_PER_ENTRY, OffsetMap
from seglog.storage.record_batch import NewRecord, build_batch, decode_records, iter_batches
from seglog.storage.txn_index import AbortedTxn, decode_entries

Row = tuple[int, bytes | None, bytes | None]


def rows(log: Log) -> list[Row]:
    return [(r.offset, r.key, r.value) for r in records_on_disk(log)]


def last_per_key(appended: list[Row], below: int) -> list[Row]:
    last: dict[bytes | None, Row] = {}
    for row in appended:
        if row[0] < below:
            last[row[1]] = row
    return sorted(last.values())


def append_rows(log: Log, batches: list[list[tuple[bytes, bytes | None]]], t: int) -> list[Row]:
    out: list[Row] = []
    for pairs in batches:
        info = log.append_as_leader(keyed_batch(pairs, ts=t), 0, time_ms=t)
        out += [(info.first_offset + i, k, v) for i, (k, v) in enumerate(pairs)]
    return out


# ------------------------------------------------------------------------------------------
# the model check
# ------------------------------------------------------------------------------------------

KEYS = [b"k%d" % i for i in range(12)]
pair = st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.binary(min_size=1, max_size=40)))
workload = st.lists(st.lists(pair, min_size=1, max_size=4), min_size=1, max_size=60)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
# a tombstone whose horizon is reached exactly by the next round's pass
@example(
    rounds=[[[(b"a", None)], [(b"b", b"x")]], [[(b"c", b"1")]]],
    map_slots=1000,
    segment_bytes=5000,
    steps=[RETENTION_MS, 0, 0],
)
@given(
    rounds=st.lists(workload, min_size=1, max_size=3),
    map_slots=st.sampled_from([6, 20, 1000]),
    segment_bytes=st.sampled_from([300, 700, 5000]),
    steps=st.lists(
        st.sampled_from([0, 1, RETENTION_MS - 1, RETENTION_MS, RETENTION_MS // 2 + 1]),
        min_size=3,
        max_size=3,
    ),
)
def test_cleaning_keeps_the_last_value_of_every_key_at_its_offset(
    tmp_path_factory: pytest.TempPathFactory,
    rounds: list[list[list[tuple[bytes, bytes | None]]]],
    map_slots: int,
    segment_bytes: int,
    steps: list[int],
) -> None:
    directory = tmp_path_factory.mktemp("model") / "topic-0"
    log = open_compacted(directory, segment_bytes=segment_bytes)
    # A map of a few slots forces several passes; load factor 1 so 4-record batches fit.
    offset_map = OffsetMap(map_slots * BYTES_PER_ENTRY, load_factor=1.0)
    appended: list[Row] = []
    # offset of a batch's first record -> when the cleaner first kept a tombstone in it
    horizon: dict[int, int] = {}
    batch_of: dict[int, int] = {}
    checkpoint = None
    t = T0
    for n, batches in enumerate(rounds):
        before = len(appended)
        appended += append_rows(log, batches, t)
        for row in appended[before:]:
            batch_of[row[0]] = row[0]
        # the first record of every batch names the batch
        first = before
        for pairs in batches:
            for i in range(len(pairs)):
                batch_of[appended[first + i][0]] = appended[first][0]
            first += len(pairs)
        seal(log, t)
        appended.append((log.log_end_offset - 1, SENTINEL, b"s"))
        bound = log.active_segment.base_offset
        checkpoint, _ = clean_fully(log, t, offset_map, checkpoint)
        assert checkpoint == bound
        expected = []
        for row in last_per_key(appended, bound):
            if row[2] is None:
                b = batch_of[row[0]]
                since = horizon.setdefault(b, t + RETENTION_MS)
                if since <= t:
                    continue  # its horizon had passed: this pass removed it
            expected.append(row)
        untouched = [r for r in appended if r[0] >= bound]
        assert rows(log) == expected + untouched, f"round {n}"
        t += steps[n]  # the clock moves on: up to, just before or past the horizons
    # Finally, well after every horizon: no tombstone below the active segment is left.
    t += 2 * RETENTION_MS
    clean_fully(log, t, offset_map, checkpoint)
    bound = log.active_segment.base_offset
    final = [r for r in last_per_key(appended, bound) if r[2] is not None]
    assert rows(log) == final + [r for r in appended if r[0] >= bound]
    # Offsets read through the log (indexes of cleaned segments) find the same records.
    _check_reads(log)
    log.close()
    reopened = Log.open(directory, compact_config(segment_bytes=segment_bytes), time_ms=t)
    assert rows(reopened) == final + [r for r in appended if r[0] >= bound]
    reopened.close()


def _check_reads(log: Log) -> None:
    """Reading from every offset returns the first batch at or after it."""
    batches = batches_on_disk(log)
    for h, raw in batches:
        for offset in range(h.base_offset, h.last_offset + 1):
            got = log.read(offset, 1)
            assert got.records == raw, offset
    gaps = sorted(
        set(range(log.log_start_offset, log.log_end_offset))
        - {o for h, _ in batches for o in range(h.base_offset, h.last_offset + 1)}
    )
    for offset in gaps[:200]:
        got = log.read(offset, 1)
        nxt = next(raw for h, raw in batches if h.base_offset > offset)
        assert got.records == nxt


# ------------------------------------------------------------------------------------------
# fixed scenarios
# ------------------------------------------------------------------------------------------


def test_tombstones_stay_until_the_delete_horizon_then_go(tmp_path: Path) -> None:
    log = open_compacted(tmp_path / "t-0")
    appended = append_rows(log, [[(b"a", b"1")], [(b"b", b"2")], [(b"a", None)]], T0)
    seal(log)
    m = OffsetMap(1 << 16)
    cp, results = clean_fully(log, T0, m)
    assert results[0].horizon_due_ms == T0 + RETENTION_MS
    assert rows(log)[:2] == [appended[1], appended[2]]
    clean_fully(log, T0 + RETENTION_MS - 1, m, cp)
    assert (2, b"a", None) in rows(log)
    clean_fully(log, T0 + RETENTION_MS, m, cp)
    assert rows(log)[0] == appended[1]
    assert all(r[1] != b"a" for r in rows(log))
    # the tombstone's batch carried the delete horizon while it was kept
    log.close()


def test_cleaner_never_touches_the_active_segment_or_data_above_the_high_watermark(
    tmp_path: Path,
) -> None:
    log = open_compacted(tmp_path / "t-0", segment_bytes=500)
    appended = append_rows(log, [[(b"a", b"%d" % i)] for i in range(40)], T0)
    m = OffsetMap(1 << 16)
    log.update_high_watermark(10)
    assert len(log.segments) > 2
    cp, _ = clean_fully(log, T0, m)
    # only segments wholly below the HW were cleaned
    seg_bounds = [s.base_offset for s in log.segments]
    assert cp is not None and cp <= 10 and cp in seg_bounds
    assert rows(log)[-30:] == appended[-30:]
    log.update_high_watermark(log.log_end_offset)
    cp, _ = clean_fully(log, T0, m, cp)
    active = log.active_segment.base_offset
    assert cp == active
    assert rows(log) == [appended[active - 1]] + [r for r in appended if r[0] >= active]
    log.close()


def test_min_compaction_lag_keeps_young_segments_dirty(tmp_path: Path) -> None:
    log = open_compacted(tmp_path / "t-0", min_compaction_lag_ms=60_000)
    append_rows(log, [[(b"a", b"%d" % i)] for i in range(40)], T0)
    seal(log, T0)
    m = OffsetMap(1 << 16)
    assert clean_log(log, offset_map=m, now_ms=T0 + 1000, force=True) is None
    r = clean_log(log, offset_map=m, now_ms=T0 + 61_000, force=True)
    assert r is not None and r.records_kept == 1
    log.close()


def test_cleaned_batches_keep_offsets_producer_fields_and_have_valid_crcs(
    tmp_path: Path,
) -> None:
    log = open_compacted(tmp_path / "t-0", segment_bytes=100_000)
    seq = 0
    for i in range(10):
        pairs = [(b"k%d" % (j % 3), b"v%d-%d" % (i, j)) for j in range(4)]
        log.append_as_leader(
            keyed_batch(
                pairs,
                compression=CompressionType.GZIP,
                producer_id=7,
                producer_epoch=2,
                base_sequence=seq,
            ),
            0,
            time_ms=T0,
        )
        seq += 4
    before = {h.base_offset: h for h, _ in batches_on_disk(log)}
    seal(log)
    clean_fully(log, T0, OffsetMap(1 << 16))
    after = batches_on_disk(log)[:-1]
    for h, _raw in after:
        old = before[h.base_offset]
        assert (h.last_offset, h.producer_id, h.producer_epoch, h.base_sequence) == (
            old.last_offset,
            7,
            2,
            old.base_sequence,
        )
        assert h.partition_leader_epoch == old.partition_leader_epoch
    # the producer's last batch survives (its sequence must), the others' stale keys went
    assert after[-1][0].base_offset == 36
    assert sorted(r[1] for r in rows(log)[:-1]) == [b"k0", b"k1", b"k2"]
    log.close()


def test_a_superseded_last_batch_of_a_producer_is_kept_empty(tmp_path: Path) -> None:
    log = open_compacted(tmp_path / "t-0", segment_bytes=100_000)
    log.append_as_leader(
        keyed_batch([(b"a", b"1")], producer_id=9, producer_epoch=0, base_sequence=0),
        0,
        time_ms=T0,
    )
    log.append_as_leader(keyed_batch([(b"a", b"2")]), 0, time_ms=T0)
    log.append_as_leader(keyed_batch([(b"b", b"x")]), 0, time_ms=T0)
    seal(log)
    clean_fully(log, T0, OffsetMap(1 << 16))
    hs = [h for h, _ in batches_on_disk(log)]
    assert (hs[0].base_offset, hs[0].records_count, hs[0].producer_id) == (0, 0, 9)
    assert hs[0].base_timestamp == -1 and hs[0].max_timestamp == T0
    assert [r[1:] for r in rows(log)] == [(b"a", b"2"), (b"b", b"x"), (SENTINEL, b"s")]
    # Producer state rebuilt from the cleaned log still knows the producer's sequence.
    log.close()
    for snap in (tmp_path / "t-0").glob("*.snapshot"):
        snap.unlink()
    reopened = Log.open(tmp_path / "t-0", compact_config(segment_bytes=100_000), time_ms=T0)
    dup = reopened.append_as_leader(
        keyed_batch([(b"a", b"1")], producer_id=9, producer_epoch=0, base_sequence=0),
        0,
        time_ms=T0,
    )
    assert dup.duplicate and dup.first_offset == 0
    reopened.close()


def test_aborted_transactions_and_their_markers_go(tmp_path: Path) -> None:
    """As Kafka's cleaner does: the aborted transactions come from the `.txnindex`; the
    pass that drops an aborted transaction's data keeps its ABORT marker as it is, with
    its entry in the cleaned segment's `.txnindex`; the next pass gives the marker a
    delete horizon and drops the entry; the one after the horizon drops the marker."""
    log = open_compacted(tmp_path / "t-0", segment_bytes=100_000)
    pid, epoch = 42, 1
    data = [
        keyed_batch(
            [(b"a", b"committed")],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=0,
            base_offset=0,
            is_transactional=True,
        ),
        marker_batch(1, pid, epoch, commit=True),
        keyed_batch(
            [(b"a", b"aborted")],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=1,
            base_offset=2,
            is_transactional=True,
        ),
        marker_batch(3, pid, epoch, commit=False),
        keyed_batch([(b"b", b"plain")], base_offset=4),
    ]
    log.append_as_follower(b"".join(data), time_ms=T0)
    seal(log)
    entry = AbortedTxn(pid, 2, 3, 4)
    assert log.segments[0].txn_index.entries == [entry]
    m = OffsetMap(1 << 16)
    clean_fully(log, T0, m)
    got = rows(log)
    # the aborted record is gone and did not hide the committed value
    assert (0, b"a", b"committed") in got and all(v != b"aborted" for _o, _k, v in got)
    hs = {h.base_offset: h for h, _ in batches_on_disk(log)}
    assert hs[1].is_control and hs[1].records_count == 1  # its data is still there
    assert hs[3].is_control and not hs[3].has_delete_horizon  # kept as it was
    index = log.segments[0].txn_index
    assert index.path is not None and index.path.name == "00000000000000000000.txnindex"
    assert decode_entries(index.path.read_bytes(), "test") == [entry]
    # Every later pass starts from the log start (as new dirty data makes it do).
    # The producer's last batch is the emptied aborted one: Kafka's cleaner still sees a
    # batch of the transaction, so the marker and its entry stay.
    clean_fully(log, T0, m)
    assert {h.base_offset for h, _ in batches_on_disk(log)} >= {2, 3}
    assert log.segments[0].txn_index.entries == [entry]
    # The producer writes again: the emptied batch goes (seen one last time)...
    log.append_as_follower(
        keyed_batch(
            [(b"c", b"later")],
            producer_id=pid,
            producer_epoch=epoch,
            base_sequence=2,
            base_offset=log.log_end_offset,
        ),
        time_ms=T0,
    )
    seal(log)
    clean_fully(log, T0, m)
    hs = {h.base_offset: h for h, _ in batches_on_disk(log)}
    assert 2 not in hs and not hs[3].has_delete_horizon
    # ...then no data of the transaction is left: a horizon, and no entry handed on.
    clean_fully(log, T0, m)
    hs = {h.base_offset: h for h, _ in batches_on_disk(log)}
    assert hs[3].is_control and hs[3].has_delete_horizon
    assert log.segments[0].txn_index.entries == []
    assert log.collect_aborted_transactions(0, log.log_end_offset) == []
    clean_fully(log, T0 + RETENTION_MS, m)
    hs = {h.base_offset: h for h, _ in batches_on_disk(log)}
    assert 3 not in hs  # the marker went
    assert (0, b"a", b"committed") in rows(log)
    log.close()


def test_offset_map_too_small_for_one_batch_is_an_error(tmp_path: Path) -> None:
    log = open_compacted(tmp_path / "t-0")
    append_rows(log, [[(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]], T0)
    seal(log)
    with pytest.raises(Exception, match="dedupe.buffer.size"):
        clean_log(log, offset_map=OffsetMap(2 * BYTES_PER_ENTRY), now_ms=T0, force=True)
    assert rows(log)[:3] == [(0, b"a", b"1"), (1, b"b", b"2"), (2, b"c", b"3")]
    log.close()


def test_a_truncation_during_a_pass_leaves_the_log_as_it_was(tmp_path: Path) -> None:
    log = open_compacted(tmp_path / "t-0")
    append_rows(log, [[(b"a", b"%d" % i)] for i in range(40)], T0)
    seal(log)
    before = rows(log)

    def truncate_midway(step: str) -> None:
        if step == "cleaned_written":
            log.truncate_to(log.log_end_offset - 1)

    r = clean_log(
        log, offset_map=OffsetMap(1 << 16), now_ms=T0, force=True, step_hook=truncate_midway
    )
    assert r is not None and not r.swapped
    assert rows(log) == before[:-1]
    assert not list((tmp_path / "t-0").glob("*.cleaned"))
    log.close()


# ------------------------------------------------------------------------------------------
# records without a key; the checkpoint
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.LZ4])
def test_compacted_topic_refuses_records_without_a_key(tmp_path: Path, codec) -> None:
    log = open_compacted(tmp_path / "t-0")
    log.append_as_leader(keyed_batch([(b"a", b"1")]), 0, time_ms=T0)
    files = {p.name: p.read_bytes() for p in (tmp_path / "t-0").iterdir()}
    bad = build_batch(
        [NewRecord(b"v", key=b"k"), NewRecord(b"v", key=None)], compression=codec, now_ms=T0
    )
    with pytest.raises(InvalidRecordError) as e:
        log.append_as_leader(bad, 0, time_ms=T0)
    assert e.value.error_name == "INVALID_RECORD"
    assert log.log_end_offset == 1
    assert {p.name: p.read_bytes() for p in (tmp_path / "t-0").iterdir()} == files
    log.close()


def test_a_delete_topic_still_takes_records_without_a_key(tmp_path: Path) -> None:
    log = Log.open(tmp_path / "t-0", compact_config(cleanup_policy="delete"), time_ms=T0)
    log.append_as_leader(build_batch([NewRecord(b"v")], now_ms=T0), 0, time_ms=T0)
    assert log.log_end_offset == 1
    log.close()


def test_cleaner_offset_checkpoint_is_kafkas_text_format(tmp_path: Path) -> None:
    cp = CleanerCheckpoint(tmp_path)
    cp.update(("orders", 0), 1500)
    cp.update(("orders", 1), 1432)
    assert (tmp_path / CLEANER_OFFSET_CHECKPOINT).read_text() == (
        "0\n2\norders 0 1500\norders 1 1432\n"
    )
    assert CleanerCheckpoint(tmp_path).get(("orders", 1)) == 1432
    cp.remove(("orders", 0))
    assert CleanerCheckpoint(tmp_path).all() == {("orders", 1): 1432}
    (tmp_path / CLEANER_OFFSET_CHECKPOINT).write_text("garbage")
    assert CleanerCheckpoint(tmp_path).all() == {}  # unreadable: start over
    assert os.path.exists(tmp_path / CLEANER_OFFSET_CHECKPOINT)


def test_dump_log_shows_cleaned_segments(tmp_path: Path) -> None:
    log = open_compacted(tmp_path / "t-0", segment_bytes=100_000)
    log.append_as_leader(
        keyed_batch([(b"a", b"1")], producer_id=9, producer_epoch=0, base_sequence=0),
        0,
        time_ms=T0,
    )
    log.append_as_leader(keyed_batch([(b"a", b"2"), (b"b", None)]), 0, time_ms=T0)
    seal(log)
    clean_fully(log, T0, OffsetMap(1 << 16))
    out = io.StringIO()
    paths = [Path(s.log_path) for s in log.segments[:1]]
    paths += [Path(str(s.log_path)[: -len(".log")] + ".index") for s in log.segments[:1]]
    rc = dump_files(paths, DumpOptions(print_data_log=True, verify_index_only=False), out)
    text = out.getvalue()
    assert rc == 0, text
    assert "baseOffset: 0 lastOffset: 0 count: 0 " in text and "producerId: 9" in text
    assert f"deleteHorizonMs: OptionalLong[{T0 + RETENTION_MS}]" in text
    assert "offset: 2 CreateTime: 1700000000000 keySize: 1 valueSize: -1" in text
    log.close()


def test_a_reader_during_cleaning_never_goes_backwards(tmp_path: Path) -> None:
    """A consumer fetching between every step of the passes (while .cleaned is written,
    around the swap) moves forward only, and reads only records that were written."""
    log = open_compacted(tmp_path / "t-0", segment_bytes=500)
    appended = append_rows(log, [[(b"k%d" % (i % 7), b"v%d" % i)] for i in range(150)], T0)
    seal(log)
    written = set(appended) | {(log.log_end_offset - 1, SENTINEL, b"s")}
    position = 0
    seen: list[int] = []

    def read_some(_step: str) -> None:
        nonlocal position
        for _ in range(3):
            got = log.read(position, 1, upper_bound=log.high_watermark)
            if not got.records:
                return
            for r in records_of_bytes(got.records):
                if r[0] >= position:
                    assert r in written
                    seen.append(r[0])
            assert got.next_offset > position
            position = got.next_offset

    m = OffsetMap(6 * BYTES_PER_ENTRY, load_factor=1.0)  # several passes
    cp = None
    for _ in range(50):
        r = clean_log(log, offset_map=m, now_ms=T0, checkpoint=cp, force=True, step_hook=read_some)
        if r is None or r.map_end >= r.first_uncleanable:
            break
        cp = r.map_end
    while position < log.high_watermark:
        read_some("after")
    assert seen == sorted(set(seen)) and seen
    log.close()


def records_of_bytes(data: bytes) -> list[Row]:
    return [
        (r.offset, r.key, r.value)
        for pos, h in iter_batches(data)
        for r in decode_records(data, pos, h)
    ]


def test_a_corrupt_batch_fails_the_pass_and_changes_nothing(tmp_path: Path) -> None:
    log = open_compacted(tmp_path / "t-0", segment_bytes=500)
    append_rows(log, [[(b"k%d" % (i % 3), b"value-%d" % i)] for i in range(40)], T0)
    seal(log)
    first = Path(log.segments[0].log_path)
    data = bytearray(first.read_bytes())
    data[-3] ^= 0xFF  # inside the last record's value: the CRC no longer matches
    first.write_bytes(bytes(data))
    before = {p.name: p.read_bytes() for p in (tmp_path / "t-0").iterdir()}
    with pytest.raises(StorageError, match="CRC"):
        clean_log(log, offset_map=OffsetMap(1 << 16), now_ms=T0, force=True)
    after = {p.name: p.read_bytes() for p in (tmp_path / "t-0").iterdir()}
    assert after == before
