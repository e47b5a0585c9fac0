"""Transactions in a partition's log: COMMIT/ABORT control batches, ongoing transactions
in producer state and its `.snapshot`, the last stable offset, the `.txnindex` in
Kafka's format — written at marker append, replicated, cut with the log, rebuilt by
recovery — and `seglog dump-log` over all of it."""

from __future__ import annotations

import io
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from log_fixtures import T0, config

from seglog.storage.dump_log import DumpOptions, dump_files
from seglog.storage.errors import (
    CorruptIndexError,
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
)
from seglog.storage.log import Log
from seglog.storage.producer_snapshot import read_snapshot
from seglog.storage.producer_state import ControlMarker
from seglog.storage.producer_state_entry import TransactionCoordinatorFencedError
from seglog.storage.record_batch import NewRecord, build_batch, iter_batches
from seglog.storage.txn_index import AbortedTxn, TransactionIndex

ABORT = ControlMarker("ABORT", 7)
COMMIT = ControlMarker("COMMIT", 7)


def txn_batch(pid: int, seq: int, n: int = 2, *, epoch: int = 0, txn: bool = True) -> bytes:
    records = [NewRecord(b"v%d" % (seq + i), timestamp=T0) for i in range(n)]
    return build_batch(
        records,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        is_transactional=txn,
    )


def open_log(path: Path, **kw: object) -> Log:
    cfg = config(**kw) if kw else config()
    return Log.open(path, cfg, time_ms=T0, clock=lambda: T0)


def txnindex_files(log: Log) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(log.directory.glob("*.txnindex"))}


def entry_bytes(pid: int, first: int, last: int, lso: int) -> bytes:
    # Kafka's AbortedTxn, written out field by field: version int16 0, then four int64.
    return (
        (0).to_bytes(2, "big")
        + pid.to_bytes(8, "big")
        + first.to_bytes(8, "big")
        + last.to_bytes(8, "big")
        + lso.to_bytes(8, "big")
    )


def test_a_transactional_batch_repeating_an_ended_transactions_sequences_is_refused(
    tmp_path: Path,
) -> None:
    """Seen on compose (one-way, seed 10): librdkafka purged a batch in flight when it
    aborted, then sent the next transaction's record with the same epoch and sequence.
    Taken as a retry, it was acknowledged at the aborted batch's offset and never
    written: a committed write lost. A true retry finds its first copy inside the
    transaction the producer has open here; anything older is refused, unwritten."""
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(txn_batch(1000, 0, 1), 0)  # offset 0: the batch given up on
    log.append_marker(1000, 0, ABORT, 0)  # 1
    with pytest.raises(OutOfOrderSequenceError, match="offset 0, which a transaction ended"):
        log.append_as_leader(txn_batch(1000, 0, 1), 0)
    assert log.log_end_offset == 2
    assert log.producer_state.ongoing_txns == {}
    # The same after a commit.
    log.append_as_leader(txn_batch(1000, 1, 1), 0)  # 2
    log.append_marker(1000, 0, COMMIT, 0)  # 3
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(txn_batch(1000, 1, 1), 0)
    # A retry inside the open transaction is still a duplicate, answered with the
    # first copy's offsets and not written again.
    log.append_as_leader(txn_batch(1000, 2, 2), 0)  # 4-5
    log.append_as_leader(txn_batch(1000, 4, 1), 0)  # 6
    retried = log.append_as_leader(txn_batch(1000, 2, 2), 0)
    assert (retried.first_offset, retried.last_offset) == (4, 5)
    assert log.log_end_offset == 7
    # After an epoch bump the sequences start again, and nothing is a repeat.
    log.append_marker(1000, 0, ABORT, 0)  # 7
    bumped = log.append_as_leader(txn_batch(1000, 0, 1, epoch=1), 1)
    assert bumped.first_offset == 8


def test_an_aborted_transaction_gets_its_34_byte_entry_and_a_commit_none(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(txn_batch(1000, 0), 0)  # offsets 0-1
    log.append_as_leader(txn_batch(1000, 2), 0)  # offsets 2-3
    assert log.producer_state.ongoing_txns == {1000: 0}
    log.append_marker(1000, 0, ABORT, 0)  # offset 4
    assert txnindex_files(log) == {"00000000000000000000.txnindex": entry_bytes(1000, 0, 4, 5)}
    assert log.producer_state.ongoing_txns == {}
    log.append_as_leader(txn_batch(1000, 4), 0)  # 5-6
    log.append_marker(1000, 0, COMMIT, 0)  # 7
    # A commit adds nothing.
    assert txnindex_files(log) == {"00000000000000000000.txnindex": entry_bytes(1000, 0, 4, 5)}
    # Each marker is a control batch: transactional, control, the producer's id and
    # epoch, no sequence, one record holding Kafka's EndTransactionMarker.
    data = (log.directory / "00000000000000000000.log").read_bytes()
    markers = [h for _pos, h in iter_batches(data) if h.is_control]
    assert [
        (h.base_offset, h.is_transactional, h.producer_id, h.base_sequence) for h in markers
    ] == [
        (4, True, 1000, -1),
        (7, True, 1000, -1),
    ]
    log.close()


def test_the_entry_lso_is_the_first_offset_of_another_open_transaction(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(txn_batch(1, 0), 0)  # 0-1
    log.append_as_leader(txn_batch(2, 0), 0)  # 2-3
    log.append_as_leader(txn_batch(1, 2), 0)  # 4-5
    log.append_marker(1, 0, ABORT, 0)  # 6: producer 2's transaction from 2 is still open
    log.append_marker(2, 0, ABORT, 0)  # 7: none open
    seg = log.segments[0]
    assert seg.txn_index.entries == [AbortedTxn(1, 0, 6, 2), AbortedTxn(2, 2, 7, 8)]
    log.close()


def test_the_lso_waits_for_open_transactions_and_unreplicated_markers(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(txn_batch(-1, -1, txn=False), 0)  # 0-1 plain records
    log.append_as_leader(txn_batch(5, 0), 0)  # 2-3
    log.update_high_watermark(log.log_end_offset)
    assert log.high_watermark == 4
    assert log.last_stable_offset == 2  # the open transaction holds it
    log.append_marker(5, 0, COMMIT, 0)  # 4
    log.update_high_watermark(4)  # the marker is not replicated yet
    assert log.last_stable_offset == 2
    log.update_high_watermark(5)
    assert log.last_stable_offset == 5
    log.close()


def test_a_producer_fenced_by_a_higher_epoch_and_a_zombie_coordinator_are_refused(
    tmp_path: Path,
) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(txn_batch(9, 0, epoch=3), 0)
    with pytest.raises(InvalidProducerEpochError):
        log.append_marker(9, 2, ABORT, 0)  # an older producer epoch
    log.append_marker(9, 3, ControlMarker("ABORT", 8), 0)
    log.append_as_leader(txn_batch(9, 2, epoch=3), 0)
    with pytest.raises(TransactionCoordinatorFencedError):
        log.append_marker(9, 3, ControlMarker("COMMIT", 7), 0)  # an older coordinator
    log.close()


def test_a_follower_builds_the_same_producer_state_and_txnindex(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader" / "t-0", segment_bytes=400)
    for pid in (1, 2, 3):
        leader.append_as_leader(txn_batch(pid, 0), 0)
    leader.append_marker(1, 0, ABORT, 0)
    leader.append_as_leader(txn_batch(2, 2), 0)
    leader.append_marker(2, 0, COMMIT, 0)
    leader.append_marker(3, 0, ABORT, 0)
    leader.append_as_leader(txn_batch(1, 0, epoch=1), 0)  # a new transaction, left open
    assert len(leader.segments) > 1
    follower = open_log(tmp_path / "follower" / "t-0", segment_bytes=400)
    offset = 0
    while offset < leader.log_end_offset:
        chunk = leader.read(offset, 300)
        follower.append_as_follower(chunk.records)
        offset = chunk.next_offset
    assert txnindex_files(follower) == txnindex_files(leader)
    assert txnindex_files(leader)  # not vacuous
    assert follower.producer_state.ongoing_txns == leader.producer_state.ongoing_txns == {1: 11}
    for log in (leader, follower):
        log.update_high_watermark(log.log_end_offset)
    assert follower.last_stable_offset == leader.last_stable_offset == 11
    leader.close()
    follower.close()


def test_truncation_cuts_the_txnindex_with_the_log(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(txn_batch(1, 0), 0)  # 0-1
    log.append_marker(1, 0, ABORT, 0)  # 2
    log.append_as_leader(txn_batch(1, 2), 0)  # 3-4
    log.append_marker(1, 0, ABORT, 0)  # 5
    assert [t.last_offset for t in log.segments[0].txn_index.entries] == [2, 5]
    log.truncate_to(5)
    assert log.segments[0].txn_index.entries == [AbortedTxn(1, 0, 2, 3)]
    assert txnindex_files(log) == {"00000000000000000000.txnindex": entry_bytes(1, 0, 2, 3)}
    # The transaction the truncated marker closed is open again.
    assert log.producer_state.ongoing_txns == {1: 3}
    log.truncate_to(2)
    assert txnindex_files(log) == {"00000000000000000000.txnindex": b""}
    assert log.producer_state.ongoing_txns == {1: 0}
    log.close()


def test_ongoing_transactions_survive_in_the_snapshot(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(txn_batch(-1, -1, txn=False), 0)  # 0-1
    log.append_as_leader(txn_batch(42, 0), 0)  # 2-3, open
    log.close()
    (snapshot,) = sorted((tmp_path / "t-0").glob("*.snapshot"))
    (entry,) = read_snapshot(snapshot)
    assert (entry.producer_id, entry.current_txn_first_offset) == (42, 2)
    reopened = open_log(tmp_path / "t-0")
    assert reopened.producer_state.ongoing_txns == {42: 2}
    reopened.update_high_watermark(reopened.log_end_offset)
    assert reopened.last_stable_offset == 2
    reopened.append_marker(42, 0, ABORT, 0)
    assert reopened.segments[-1].txn_index.entries == [AbortedTxn(42, 2, 4, 5)]
    reopened.close()


def test_recovery_rebuilds_a_lost_txnindex(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=400)
    for round_ in range(6):
        log.append_as_leader(txn_batch(7, round_ * 2), 0)
        log.append_marker(7, 0, ABORT if round_ % 2 else COMMIT, 0)
    expected = txnindex_files(log)
    assert len(expected) >= 2
    log.flush()
    log.abandon()  # a crash: no clean-shutdown marker, no snapshot at the end
    for path in (tmp_path / "t-0").glob("*.txnindex"):
        path.unlink()
    # Unclean open from recovery point 0: every segment is recovered.
    recovered = Log.open(tmp_path / "t-0", config(segment_bytes=400), time_ms=T0, clock=lambda: T0)
    assert txnindex_files(recovered) == expected
    recovered.close()


def test_a_torn_txnindex_entry_is_cut_and_a_bad_version_refused(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(entry_bytes(1, 0, 4, 5) + entry_bytes(1, 6, 9, 10)[:20])
    index = TransactionIndex(0, path)
    assert index.entries == [AbortedTxn(1, 0, 4, 5)]
    assert path.stat().st_size == 34
    index.append(AbortedTxn(2, 6, 11, 12))
    index.close()
    assert path.read_bytes() == entry_bytes(1, 0, 4, 5) + entry_bytes(2, 6, 11, 12)
    with pytest.raises(ValueError, match="must increase"):
        TransactionIndex(0, path).append(AbortedTxn(3, 0, 11, 12))
    path.write_bytes(struct.pack(">hqqqq", 1, 1, 0, 4, 5))
    with pytest.raises(CorruptIndexError, match="version 1"):
        _ = TransactionIndex(0, path).entries


def test_collect_walks_segments_until_an_entry_covers_the_upper_bound(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", segment_bytes=300)
    log.append_as_leader(txn_batch(1, 0), 0)  # 0-1, aborted at a marker segments later
    log.append_as_leader(txn_batch(2, 0), 0)  # 2-3
    log.append_marker(2, 0, ABORT, 0)  # 4
    log.append_as_leader(txn_batch(3, 0), 0)  # 5-6
    log.append_marker(3, 0, COMMIT, 0)  # 7
    log.append_marker(1, 0, ABORT, 0)  # 8
    assert [s.base_offset for s in log.segments] == [0, 5]
    assert log.collect_aborted_transactions(0, 4) == [
        AbortedTxn(2, 2, 4, 0),
        AbortedTxn(1, 0, 8, 9),
    ]
    # From offset 5 on, producer 2's transaction (marker at 4) is behind the fetch.
    assert log.collect_aborted_transactions(5, 9) == [AbortedTxn(1, 0, 8, 9)]
    log.close()


def test_dump_log_shows_the_markers_and_the_txnindex(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(txn_batch(1000, 0), 0)
    log.append_marker(1000, 0, ABORT, 0)
    log.close()
    out = io.StringIO()
    base = tmp_path / "t-0" / "00000000000000000000"
    rc = dump_files(
        [Path(f"{base}.log"), Path(f"{base}.txnindex")],
        DumpOptions(deep_iteration=True),
        out,
        io.StringIO(),
    )
    text = out.getvalue()
    assert rc == 0, text
    assert "isTransactional: true isControl: true" in text
    assert "| offset: 2 CreateTime: " in text and "endTxnMarker: ABORT coordinatorEpoch: 7" in text
    assert "version: 0 producerId: 1000 firstOffset: 0 lastOffset: 2 lastStableOffset: 3" in text
    # The command itself, as an operator runs it.
    cli = subprocess.run(
        [sys.executable, "-m", "seglog.cli", "dump-log", "--files", f"{base}.txnindex"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 0, cli.stderr
    assert "lastStableOffset: 3" in cli.stdout
