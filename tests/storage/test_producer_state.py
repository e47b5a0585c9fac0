"""Producer state: idempotence, sequences and snapshots (docs/replication-rules.md 5.5)."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seglog.storage.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    OutOfOrderSequenceError,
    UnknownProducerIdError,
)
from seglog.storage.producer_snapshot import read_snapshot, snapshot_path, write_snapshot
from seglog.storage.producer_state import ProducerStateManager
from seglog.storage.producer_state_entry import (
    MAX_SEQUENCE,
    AppendOrigin,
    BatchInfo,
    BatchMetadata,
    CompletedTxn,
    ControlMarker,
    DuplicateBatch,
    InvalidTxnStateError,
    ProducerAppendInfo,
    ProducerStateEntry,
    TransactionCoordinatorFencedError,
    dec_seq,
    inc_seq,
)

CLIENT = AppendOrigin.CLIENT
REPLICATION = AppendOrigin.REPLICATION
COORDINATOR = AppendOrigin.COORDINATOR
DAY_MS = 86_400_000


@dataclass(frozen=True)
class Batch:
    """Stand-in for record_batch.BatchHeader with the fields producer state reads."""

    base_offset: int
    last_offset_delta: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    max_timestamp: int = 1_000
    is_transactional: bool = False
    is_control: bool = False

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return inc_seq(self.base_sequence, self.last_offset_delta)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0


def data(
    offset: int, pid: int, epoch: int, seq: int, count: int = 1, ts: int = 1_000, txn: bool = False
) -> Batch:
    return Batch(offset, count - 1, pid, epoch, seq, ts, is_transactional=txn)


def marker_batch(offset: int, pid: int, epoch: int, ts: int = 2_000) -> Batch:
    return Batch(offset, 0, pid, epoch, -1, ts, is_transactional=True, is_control=True)


class Harness:
    """Drives a manager the way the Log does: offsets assigned at the end offset."""

    def __init__(self, directory: Path, expiration_ms: int = DAY_MS) -> None:
        self.psm = ProducerStateManager(directory, expiration_ms)
        self.leo = 0

    def append(
        self,
        pid: int,
        epoch: int,
        seq: int,
        count: int = 1,
        ts: int = 1_000,
        txn: bool = False,
        origin: AppendOrigin = CLIENT,
    ) -> ProducerAppendInfo | DuplicateBatch:
        batch = data(self.leo, pid, epoch, seq, count, ts, txn)
        result = self.psm.prepare_append(batch, origin)
        if isinstance(result, ProducerAppendInfo):
            self.psm.update(result)
            self.leo = batch.last_offset + 1
            self.psm.update_map_end_offset(self.leo)
        return result

    def marker(
        self,
        pid: int,
        epoch: int,
        kind: Literal["COMMIT", "ABORT"],
        coord: int,
        origin: AppendOrigin = COORDINATOR,
    ) -> ProducerAppendInfo:
        result = self.psm.prepare_append(
            marker_batch(self.leo, pid, epoch),
            origin,
            ControlMarker(kind, coord),
        )
        assert isinstance(result, ProducerAppendInfo)
        self.psm.update(result)
        self.leo += 1
        self.psm.update_map_end_offset(self.leo)
        return result


def entry_of(psm: ProducerStateManager, pid: int) -> ProducerStateEntry:
    entry = psm.last_entry(pid)
    assert entry is not None, f"no state for producer {pid}"
    return entry


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness(tmp_path)


def test_stand_in_satisfies_protocol() -> None:
    batch: BatchInfo = data(0, 1, 0, 0)
    assert batch.last_sequence == 0


# --------------------------------------------------------------------------- sequences


def test_sequence_arithmetic_wraps() -> None:
    assert inc_seq(5, 3) == 8
    assert inc_seq(MAX_SEQUENCE, 1) == 0
    assert inc_seq(2147483645, 4) == 1
    assert dec_seq(8, 3) == 5
    assert dec_seq(0, 1) == MAX_SEQUENCE
    assert dec_seq(1, 4) == 2147483645


@given(st.integers(0, MAX_SEQUENCE), st.integers(0, MAX_SEQUENCE))
def test_dec_undoes_inc(seq: int, delta: int) -> None:
    up = inc_seq(seq, delta)
    assert 0 <= up <= MAX_SEQUENCE
    assert up == (seq + delta) % (MAX_SEQUENCE + 1)
    assert dec_seq(up, delta) == seq


def test_batch_metadata_first_seq_wraps() -> None:
    meta = BatchMetadata(last_seq=1, last_offset=104, offset_delta=4, timestamp=7)
    assert meta.first_seq == 2147483645
    assert meta.first_offset == 100


def test_sequence_wrap_example(h: Harness) -> None:
    # 5.6: base 2147483645 with 5 records -> last sequence 1, next batch must start at 2.
    # Replicated: a client's first batch for an unknown producer must start at 0.
    h.append(pid=7, epoch=0, seq=2147483645, count=5, origin=REPLICATION)
    entry = h.psm.last_entry(7)
    assert entry is not None and entry.last_seq == 1
    assert entry.first_seq == 2147483645
    with pytest.raises(OutOfOrderSequenceError, match="expected sequence 2"):
        h.append(pid=7, epoch=0, seq=3)
    with pytest.raises(OutOfOrderSequenceError):
        h.append(pid=7, epoch=0, seq=0)
    assert isinstance(h.append(pid=7, epoch=0, seq=2), ProducerAppendInfo)


def test_sequence_zero_follows_max(h: Harness) -> None:
    h.append(pid=7, epoch=0, seq=MAX_SEQUENCE - 1, count=2, origin=REPLICATION)
    assert entry_of(h.psm, 7).last_seq == MAX_SEQUENCE
    assert isinstance(h.append(pid=7, epoch=0, seq=0), ProducerAppendInfo)


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize("epoch", [0, 9, 32767])
def test_unknown_producer_from_a_client_starts_at_sequence_zero(h: Harness, epoch: int) -> None:
    assert isinstance(h.append(pid=42, epoch=epoch, seq=0, count=1), ProducerAppendInfo)
    entry = h.psm.last_entry(42)
    assert entry is not None
    assert (entry.producer_epoch, entry.last_seq, entry.last_data_offset) == (epoch, 0, 0)


@pytest.mark.parametrize(("epoch", "seq"), [(0, 1), (0, 500), (9, 12345), (32767, MAX_SEQUENCE)])
def test_unknown_producer_from_a_client_refused_past_sequence_zero(
    h: Harness, epoch: int, seq: int
) -> None:
    # Kafka 1.0-2.4's rule (docs/replication-rules.md): an earlier batch may be missing,
    # and a client would take this batch's success as an acknowledgement of it.
    with pytest.raises(UnknownProducerIdError, match=f"starts at sequence {seq}, not 0") as info:
        h.append(pid=42, epoch=epoch, seq=seq, count=1)
    assert info.value.error_name == "UNKNOWN_PRODUCER_ID"
    assert h.psm.last_entry(42) is None and h.leo == 0


@pytest.mark.parametrize(("epoch", "seq"), [(0, 1), (9, 12345), (32767, MAX_SEQUENCE)])
def test_unknown_producer_replicated_at_any_sequence(h: Harness, epoch: int, seq: int) -> None:
    # A follower or a replay mirrors what its leader accepted (its log may start after
    # the producer's first batch): sequences are the leader's to judge.
    result = h.append(pid=42, epoch=epoch, seq=seq, count=1, origin=REPLICATION)
    assert isinstance(result, ProducerAppendInfo)
    assert entry_of(h.psm, 42).last_seq == seq


def test_known_producer_gap_is_out_of_order_not_unknown(h: Harness) -> None:
    h.append(pid=42, epoch=0, seq=0, count=2)
    with pytest.raises(OutOfOrderSequenceError, match="expected sequence 2"):
        h.append(pid=42, epoch=0, seq=3)


def test_in_order_appends_and_gap_rejected(h: Harness) -> None:
    h.append(pid=1, epoch=0, seq=0, count=3)
    h.append(pid=1, epoch=0, seq=3, count=2)
    with pytest.raises(OutOfOrderSequenceError) as info:
        h.append(pid=1, epoch=0, seq=7)
    message = str(info.value)
    assert "producer 1" in message
    assert "received sequence 7" in message
    assert "expected sequence 5" in message
    assert entry_of(h.psm, 1).last_seq == 4


def test_duplicate_window_is_five_batches(h: Harness) -> None:
    for i in range(6):
        h.append(pid=1, epoch=0, seq=2 * i, count=2, ts=100 + i)
    entry = h.psm.last_entry(1)
    assert entry is not None and len(entry.batch_metadata) == 5
    # Batches 1..5 (seq 2-3 .. 10-11, offsets 2-3 .. 10-11) are retries.
    for i in range(1, 6):
        result = h.psm.prepare_append(data(h.leo, 1, 0, 2 * i, 2), CLIENT)
        assert result == DuplicateBatch(
            first_offset=2 * i, last_offset=2 * i + 1, timestamp=100 + i
        )
    # The 6th-oldest (seq 0-1) fell out of the window: now it is out of order.
    with pytest.raises(OutOfOrderSequenceError):
        h.psm.prepare_append(data(h.leo, 1, 0, 0, 2), CLIENT)
    # A partial overlap is not a duplicate either.
    with pytest.raises(OutOfOrderSequenceError):
        h.psm.prepare_append(data(h.leo, 1, 0, 10, 1), CLIENT)


def test_duplicate_requires_same_epoch(h: Harness) -> None:
    h.append(pid=1, epoch=0, seq=0, count=2)
    h.append(pid=1, epoch=1, seq=0, count=2)  # bump: window cleared
    with pytest.raises(InvalidProducerEpochError):
        h.psm.prepare_append(data(h.leo, 1, 0, 0, 2), CLIENT)
    dup = h.psm.prepare_append(data(h.leo, 1, 1, 0, 2), CLIENT)
    assert dup == DuplicateBatch(2, 3, 1_000)


def test_duplicate_is_only_checked_for_clients(h: Harness) -> None:
    h.append(pid=1, epoch=0, seq=0, count=2)
    result = h.psm.prepare_append(data(h.leo, 1, 0, 0, 2), REPLICATION)
    assert isinstance(result, ProducerAppendInfo)


def test_lower_epoch_is_fenced_for_client_and_coordinator(h: Harness) -> None:
    h.append(pid=1, epoch=5, seq=0)
    for origin in (CLIENT, COORDINATOR):
        with pytest.raises(InvalidProducerEpochError, match="epoch of producer 1 .* is 4"):
            h.psm.prepare_append(data(h.leo, 1, 4, 1), origin)
    assert entry_of(h.psm, 1).producer_epoch == 5


def test_lower_epoch_is_accepted_from_replication(h: Harness) -> None:
    h.append(pid=1, epoch=5, seq=0)
    h.psm.replay_batch(data(h.leo, 1, 4, 17))
    entry = h.psm.last_entry(1)
    assert entry is not None
    assert (entry.producer_epoch, entry.last_seq, len(entry.batch_metadata)) == (4, 17, 1)


def test_epoch_bump_needs_sequence_zero(h: Harness) -> None:
    h.append(pid=1, epoch=0, seq=0, count=3)
    with pytest.raises(
        OutOfOrderSequenceError, match="new epoch 1 of producer 1.*received sequence 3"
    ):
        h.append(pid=1, epoch=1, seq=3)
    h.append(pid=1, epoch=1, seq=0, count=2)
    entry = h.psm.last_entry(1)
    assert entry is not None
    assert entry.producer_epoch == 1
    assert [m.last_seq for m in entry.batch_metadata] == [1]


def test_coordinator_origin_skips_sequence_checks(h: Harness) -> None:
    h.append(pid=1, epoch=0, seq=0)
    result = h.psm.prepare_append(data(h.leo, 1, 0, 99), COORDINATOR)
    assert isinstance(result, ProducerAppendInfo)


def test_client_control_batch_and_missing_sequence_are_invalid(h: Harness) -> None:
    with pytest.raises(InvalidRecordError):
        h.psm.prepare_append(marker_batch(0, 1, 0), CLIENT, ControlMarker("COMMIT", 0))
    with pytest.raises(InvalidRecordError):
        h.psm.prepare_append(data(0, 1, 0, -1), CLIENT)


def test_batches_without_producer_id_change_nothing(h: Harness) -> None:
    info = h.psm.prepare_append(data(0, -1, -1, -1, 3), CLIENT)
    assert isinstance(info, ProducerAppendInfo) and info.is_empty
    h.psm.update(info)
    assert h.psm.is_empty


def test_batch_below_map_end_offset_is_refused(h: Harness) -> None:
    h.append(pid=1, epoch=0, seq=0, count=5)
    with pytest.raises(ValueError, match="below the producer state end offset 5"):
        h.psm.prepare_append(data(4, 2, 0, 0), CLIENT)


def test_map_end_offset_only_grows(h: Harness) -> None:
    h.psm.update_map_end_offset(10)
    with pytest.raises(ValueError):
        h.psm.update_map_end_offset(9)
    assert h.psm.map_end_offset == 10


# --------------------------------------------------------------------------- multi-batch


def test_multiple_batches_validated_in_order(h: Harness) -> None:
    h.append(pid=1, epoch=0, seq=0, count=5)
    ok = [data(5, 1, 0, 5, 5), data(10, 2, 0, 0, 1), data(11, 1, 0, 10, 2)]
    info = h.psm.prepare_appends(ok, CLIENT)
    assert isinstance(info, ProducerAppendInfo)
    # Nothing is committed before update().
    assert entry_of(h.psm, 1).last_seq == 4
    assert h.psm.last_entry(2) is None
    h.psm.update(info)
    assert entry_of(h.psm, 1).last_seq == 11
    assert [m.last_seq for m in entry_of(h.psm, 1).batch_metadata] == [4, 9, 11]
    assert entry_of(h.psm, 2).last_seq == 0


def test_second_batch_checked_against_first(h: Harness) -> None:
    h.append(pid=1, epoch=0, seq=0, count=5)
    # Each batch alone would follow seq 4; together the second one repeats seq 5.
    bad = [data(5, 1, 0, 5, 5), data(10, 1, 0, 5, 5)]
    with pytest.raises(OutOfOrderSequenceError, match="expected sequence 10"):
        h.psm.prepare_appends(bad, CLIENT)
    assert entry_of(h.psm, 1).last_seq == 4


def test_unknown_producer_second_batch_is_checked(h: Harness) -> None:
    with pytest.raises(OutOfOrderSequenceError):
        h.psm.prepare_appends([data(0, 9, 0, 0, 2), data(2, 9, 0, 60, 1)], CLIENT)
    with pytest.raises(UnknownProducerIdError):
        h.psm.prepare_appends([data(0, 9, 0, 50, 2), data(2, 9, 0, 52, 1)], CLIENT)


def test_failed_batch_leaves_append_info_unchanged(h: Harness) -> None:
    info = h.psm.prepare_append(data(0, 1, 0, 0, 2), CLIENT)
    assert isinstance(info, ProducerAppendInfo)
    before = dict(info.updated_entries)
    snapshot_of_entry = before[1].copy()
    with pytest.raises(OutOfOrderSequenceError):
        h.psm.prepare_append(data(2, 1, 0, 9), CLIENT, append_info=info)
    assert info.updated_entries[1] == snapshot_of_entry
    assert h.psm.prepare_append(data(2, 1, 0, 2), CLIENT, append_info=info) is info
    h.psm.update(info)
    assert entry_of(h.psm, 1).last_seq == 2


def test_duplicate_in_multi_batch_append_wins(h: Harness) -> None:
    h.append(pid=1, epoch=0, seq=0, count=2)
    result = h.psm.prepare_appends([data(2, 2, 0, 0), data(3, 1, 0, 0, 2)], CLIENT)
    assert result == DuplicateBatch(0, 1, 1_000)


def test_stale_or_reused_append_info_is_refused(h: Harness) -> None:
    first = h.psm.prepare_append(data(0, 1, 0, 0), CLIENT)
    second = h.psm.prepare_append(data(0, 2, 0, 0), CLIENT)
    assert isinstance(first, ProducerAppendInfo) and isinstance(second, ProducerAppendInfo)
    h.psm.update(first)
    with pytest.raises(ValueError, match="already committed"):
        h.psm.update(first)
    with pytest.raises(ValueError, match="stale"):
        h.psm.update(second)


def test_prepare_appends_refuses_control_batches_without_marker(h: Harness) -> None:
    with pytest.raises(ValueError, match="needs its marker"):
        h.psm.prepare_appends([marker_batch(0, 1, 0)], COORDINATOR)


def test_deque_is_bounded(h: Harness) -> None:
    for i in range(7):
        h.append(pid=1, epoch=0, seq=i)
    entry = h.psm.last_entry(1)
    assert entry is not None
    assert [m.last_seq for m in entry.batch_metadata] == [2, 3, 4, 5, 6]
    with pytest.raises(ValueError):
        ProducerStateEntry(1, 0, deque(BatchMetadata(i, i, 0, 0) for i in range(6)))


# --------------------------------------------------------------------------- transactions


def test_transaction_opens_at_first_offset_and_blocks_plain_writes(h: Harness) -> None:
    h.append(pid=3, epoch=0, seq=0, count=2)
    h.leo = 10
    h.psm.update_map_end_offset(10)
    info = h.append(pid=3, epoch=0, seq=2, count=2, txn=True)
    assert isinstance(info, ProducerAppendInfo)
    assert info.started_txns == [(3, 10)]
    h.append(pid=3, epoch=0, seq=4, count=1, txn=True)
    assert entry_of(h.psm, 3).current_txn_first_offset == 10
    assert h.psm.first_undecided_offset() == 10
    with pytest.raises(InvalidTxnStateError, match="producer 3") as err:
        h.append(pid=3, epoch=0, seq=5)
    assert err.value.error_name == "INVALID_TXN_STATE"


def test_marker_closes_transaction_and_keeps_window(h: Harness) -> None:
    h.append(pid=3, epoch=2, seq=0, count=3, txn=True)
    done = h.marker(pid=3, epoch=2, kind="ABORT", coord=12)
    assert done.completed_txns == [CompletedTxn(3, 0, 3, is_aborted=True)]
    entry = h.psm.last_entry(3)
    assert entry is not None
    assert entry.current_txn_first_offset is None
    assert entry.coordinator_epoch == 12
    assert entry.last_timestamp == 2_000
    assert [m.last_seq for m in entry.batch_metadata] == [2]
    assert h.psm.first_undecided_offset() is None
    # Sequences continue after the marker; a plain write is allowed again.
    assert isinstance(h.append(pid=3, epoch=2, seq=3), ProducerAppendInfo)


def test_marker_of_empty_transaction_completes_nothing(h: Harness) -> None:
    h.append(pid=3, epoch=0, seq=0)
    assert h.marker(pid=3, epoch=0, kind="COMMIT", coord=1).completed_txns == []


def test_marker_with_new_epoch_clears_window(h: Harness) -> None:
    h.append(pid=3, epoch=0, seq=0, txn=True)
    h.marker(pid=3, epoch=1, kind="ABORT", coord=0)
    entry = h.psm.last_entry(3)
    assert entry is not None and entry.producer_epoch == 1 and entry.is_empty
    with pytest.raises(OutOfOrderSequenceError, match="expected sequence 0"):
        h.append(pid=3, epoch=1, seq=1)


def test_zombie_coordinator_is_fenced(h: Harness) -> None:
    h.append(pid=3, epoch=0, seq=0, txn=True)
    h.marker(pid=3, epoch=0, kind="COMMIT", coord=5)
    h.append(pid=3, epoch=0, seq=1, txn=True)
    with pytest.raises(TransactionCoordinatorFencedError):
        h.marker(pid=3, epoch=0, kind="COMMIT", coord=4)
    # Replication mirrors what the leader wrote.
    h.marker(pid=3, epoch=0, kind="COMMIT", coord=4, origin=REPLICATION)
    assert entry_of(h.psm, 3).coordinator_epoch == 4


def test_control_batch_without_marker_is_ignored(h: Harness) -> None:
    h.append(pid=3, epoch=0, seq=0, txn=True)
    h.psm.replay_batch(marker_batch(h.leo, 3, 0))
    assert entry_of(h.psm, 3).current_txn_first_offset == 0


def test_marker_kind_is_checked() -> None:
    with pytest.raises(ValueError):
        ControlMarker("PREPARE", 0)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- snapshots


def test_snapshot_holds_latest_batch_per_producer(h: Harness, tmp_path: Path) -> None:
    h.append(pid=2000, epoch=3, seq=110, count=5, ts=1700000000001, txn=True, origin=REPLICATION)
    h.leo = 37
    h.psm.update_map_end_offset(37)
    h.append(pid=1000, epoch=0, seq=0, count=5, ts=1700000000003)  # 37-41, seq 0-4
    h.append(pid=1000, epoch=0, seq=5, count=5, ts=1700000000005)  # 42-46, seq 5-9
    path = h.psm.take_snapshot()
    assert path == snapshot_path(tmp_path, 47)
    entries = read_snapshot(path)
    assert [
        (e.producer_id, e.epoch, e.last_sequence, e.last_offset, e.offset_delta) for e in entries
    ] == [
        (1000, 0, 9, 46, 4),
        (2000, 3, 114, 4, 4),
    ]
    assert entries[0].timestamp == 1700000000005
    assert (entries[0].coordinator_epoch, entries[0].current_txn_first_offset) == (-1, -1)
    assert entries[1].current_txn_first_offset == 0


def test_take_snapshot_only_when_end_offset_advanced(h: Harness, tmp_path: Path) -> None:
    assert h.psm.take_snapshot() is None  # map end offset 0, nothing new
    h.append(pid=1, epoch=0, seq=0)
    assert h.psm.take_snapshot() == snapshot_path(tmp_path, 1)
    assert h.psm.take_snapshot() is None
    assert h.psm.last_snapshot_offset == 1
    h.psm.update_map_end_offset(5)  # e.g. a roll after non-idempotent data
    assert h.psm.take_snapshot(sync=False) == snapshot_path(tmp_path, 5)
    assert h.psm.snapshot_offsets() == [1, 5]
    assert (h.psm.oldest_snapshot_offset(), h.psm.latest_snapshot_offset()) == (1, 5)


def test_reload_restores_last_batch_and_detects_retry(h: Harness, tmp_path: Path) -> None:
    for i in range(4):
        h.append(pid=1, epoch=2, seq=3 * i, count=3, ts=500 + i)  # last: seq 9-11 at 9-11
    h.append(pid=5, epoch=0, seq=40, count=1, ts=600, origin=REPLICATION)
    h.psm.take_snapshot()

    fresh = ProducerStateManager(tmp_path)
    assert fresh.load_latest_snapshot_at_or_below(100, now_ms=1_000) == 13
    assert fresh.map_end_offset == 13 and fresh.last_snapshot_offset == 13
    restored = fresh.last_entry(1)
    assert restored is not None
    assert list(restored.batch_metadata) == [BatchMetadata(11, 11, 2, 503)]
    assert restored.producer_epoch == 2 and restored.last_timestamp == 503
    assert restored.to_snapshot_entry() == entry_of(h.psm, 1).to_snapshot_entry()
    # The last batch is still recognised as a retry, with its original offsets ...
    assert fresh.prepare_append(data(13, 1, 2, 9, 3), CLIENT) == DuplicateBatch(9, 11, 503)
    # ... but the window is one batch deep now: the one before is out of order.
    with pytest.raises(OutOfOrderSequenceError):
        fresh.prepare_append(data(13, 1, 2, 6, 3), CLIENT)
    assert isinstance(fresh.prepare_append(data(13, 1, 2, 12, 1), CLIENT), ProducerAppendInfo)


def test_load_picks_latest_at_or_below(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path)
    for offset in (10, 20, 30):
        write_snapshot(snapshot_path(tmp_path, offset), [])
    assert psm.load_latest_snapshot_at_or_below(25, now_ms=0) == 20
    assert psm.map_end_offset == 20
    assert psm.snapshot_offsets() == [10, 20, 30]  # loading deletes nothing valid
    assert psm.load_latest_snapshot_at_or_below(9, now_ms=0, log_start_offset=4) is None
    assert psm.map_end_offset == 4


def test_load_skips_and_deletes_corrupt_snapshot(h: Harness, tmp_path: Path) -> None:
    h.append(pid=1, epoch=0, seq=0)
    h.psm.take_snapshot()  # at 1
    h.append(pid=1, epoch=0, seq=1)
    h.psm.take_snapshot()  # at 2
    latest = snapshot_path(tmp_path, 2)
    raw = bytearray(latest.read_bytes())
    raw[-1] ^= 0xFF
    latest.write_bytes(bytes(raw))
    fresh = ProducerStateManager(tmp_path)
    assert fresh.load_latest_snapshot_at_or_below(2, now_ms=0) == 1
    assert not latest.exists()
    assert entry_of(fresh, 1).last_seq == 0


def test_expired_producers_dropped_on_load(h: Harness, tmp_path: Path) -> None:
    h.append(pid=1, epoch=0, seq=0, ts=1_000)
    h.append(pid=2, epoch=0, seq=0, ts=5_000)
    h.append(pid=3, epoch=0, seq=0, ts=1_000, txn=True)  # open txn: never expires
    h.psm.take_snapshot()
    fresh = ProducerStateManager(tmp_path, producer_id_expiration_ms=4_000)
    fresh.load_latest_snapshot_at_or_below(100, now_ms=5_000)
    # now - 1000 >= 4000 expires pid 1; pid 2 is fresh.
    assert sorted(fresh.active_producers) == [2, 3]


def test_remove_expired_producers_boundary(h: Harness) -> None:
    psm = ProducerStateManager(h.psm.partition_dir, producer_id_expiration_ms=100)
    psm.replay_batch(data(0, 1, 0, 0, ts=1_000))
    psm.replay_batch(data(1, 2, 0, 0, ts=1_001))
    psm.replay_batch(data(2, 3, 0, 0, ts=0, txn=True))
    assert psm.remove_expired_producers(now_ms=1_099) == []
    assert psm.remove_expired_producers(now_ms=1_100) == [1]
    assert sorted(psm.active_producers) == [2, 3]
    # An expired producer is no longer active, but remembered: its client batches are
    # judged against its last state (a gap is out of order); a replica takes any sequence.
    with pytest.raises(OutOfOrderSequenceError):
        psm.prepare_append(data(3, 1, 0, 999), CLIENT)
    assert isinstance(psm.prepare_append(data(3, 1, 0, 1), CLIENT), ProducerAppendInfo)
    assert isinstance(psm.prepare_append(data(3, 1, 1, 0), CLIENT), ProducerAppendInfo)
    assert isinstance(psm.prepare_append(data(3, 1, 0, 999), REPLICATION), ProducerAppendInfo)


# --------------------------------------------------------------------------- truncation / files


def _snapshots_at(directory: Path, *offsets: int) -> None:
    for offset in offsets:
        write_snapshot(snapshot_path(directory, offset), [], sync=False)


def test_truncate_and_reload_deletes_outside_and_loads_latest(tmp_path: Path) -> None:
    _snapshots_at(tmp_path, 0, 10, 20, 30, 40)
    psm = ProducerStateManager(tmp_path)
    assert psm.truncate_and_reload(log_start_offset=10, log_end_offset=30, now_ms=0) == 30
    assert psm.snapshot_offsets() == [20, 30]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        snapshot_path(tmp_path, 20).name,
        snapshot_path(tmp_path, 30).name,
    ]
    assert psm.map_end_offset == 30


def test_truncate_and_reload_mid_segment_returns_replay_start(tmp_path: Path) -> None:
    _snapshots_at(tmp_path, 10, 20, 30)
    psm = ProducerStateManager(tmp_path)
    assert psm.truncate_and_reload(log_start_offset=0, log_end_offset=25, now_ms=0) == 20
    assert psm.snapshot_offsets() == [10, 20]


def test_truncate_and_reload_without_snapshot_starts_at_log_start(tmp_path: Path) -> None:
    _snapshots_at(tmp_path, 5)
    psm = ProducerStateManager(tmp_path)
    psm.replay_batch(data(0, 1, 0, 0))
    assert psm.truncate_and_reload(log_start_offset=5, log_end_offset=50, now_ms=0) == 5
    assert psm.snapshot_offsets() == []
    assert psm.is_empty


def test_truncate_and_reload_at_map_end_keeps_state(h: Harness, tmp_path: Path) -> None:
    h.append(pid=1, epoch=0, seq=0, count=3)
    h.append(pid=1, epoch=0, seq=3, count=3)
    _snapshots_at(tmp_path, 2)
    assert h.psm.truncate_and_reload(log_start_offset=0, log_end_offset=6, now_ms=0) == 6
    assert [m.last_seq for m in entry_of(h.psm, 1).batch_metadata] == [2, 5]
    assert h.psm.last_snapshot_offset == 2


def test_rebuild_by_replay_matches_original(h: Harness, tmp_path: Path) -> None:
    log: list[tuple[Batch, ControlMarker | None]] = []

    def client(pid: int, epoch: int, seq: int, count: int, txn: bool = False) -> None:
        batch = data(h.leo, pid, epoch, seq, count, ts=h.leo, txn=txn)
        h.append(pid, epoch, seq, count, ts=h.leo, txn=txn)
        log.append((batch, None))

    client(1, 0, 0, 3)
    client(2, 4, 0, 2, txn=True)
    h.psm.take_snapshot()  # at 5, like a segment roll
    client(1, 0, 3, 1)
    client(2, 4, 2, 1, txn=True)
    marker = ControlMarker("COMMIT", 7)
    log.append((marker_batch(h.leo, 2, 4), marker))
    h.marker(2, 4, "COMMIT", 7)
    client(1, 0, 4, 2)
    end = h.leo

    fresh = ProducerStateManager(tmp_path)
    start = fresh.truncate_and_reload(log_start_offset=0, log_end_offset=end, now_ms=0)
    assert start == 5
    for batch, mark in log:
        if batch.last_offset >= start:
            fresh.replay_batch(batch, mark)
    fresh.update_map_end_offset(end)
    assert fresh.take_snapshot() == snapshot_path(tmp_path, end)
    for pid in (1, 2):
        assert entry_of(fresh, pid).to_snapshot_entry() == entry_of(h.psm, pid).to_snapshot_entry()
    assert [m.last_seq for m in entry_of(fresh, 1).batch_metadata] == [2, 3, 5]


def test_delete_snapshots_outside(tmp_path: Path) -> None:
    _snapshots_at(tmp_path, 3, 4, 8, 9)
    psm = ProducerStateManager(tmp_path)
    assert psm.delete_snapshots_outside(log_start_offset=3, end_offset=8) == [3, 9]
    assert psm.snapshot_offsets() == [4, 8]


def test_rename_snapshot_for_deletion(tmp_path: Path) -> None:
    _snapshots_at(tmp_path, 10, 20)
    psm = ProducerStateManager(tmp_path)
    renamed = psm.rename_snapshot_for_deletion(10)
    assert renamed == tmp_path / "00000000000000000010.snapshot.deleted"
    assert renamed.exists()
    assert psm.snapshot_offsets() == [20]
    assert psm.rename_snapshot_for_deletion(15) is None


@pytest.mark.parametrize(
    ("snapshots", "segments", "kept"),
    [
        ([0, 5, 10, 15], [0, 10], [0, 10, 15]),  # newest stray above last segment survives
        ([0, 5, 10], [0, 10, 20], [0, 10]),  # newest stray below last segment goes too
        ([3, 7], [], [7]),  # no segments: only the newest stray survives
        ([0, 10], [0, 10], [0, 10]),
    ],
)
def test_delete_stray_snapshots(
    tmp_path: Path, snapshots: list[int], segments: list[int], kept: list[int]
) -> None:
    _snapshots_at(tmp_path, *snapshots)
    psm = ProducerStateManager(tmp_path)
    deleted = psm.delete_stray_snapshots(segments)
    assert psm.snapshot_offsets() == kept
    assert sorted(deleted) == sorted(set(snapshots) - set(kept))


def test_truncate_fully_and_start_at(h: Harness, tmp_path: Path) -> None:
    h.append(pid=1, epoch=0, seq=0, count=4)
    h.psm.take_snapshot()
    _snapshots_at(tmp_path, 2)
    h.psm.truncate_fully_and_start_at(100)
    assert h.psm.is_empty
    assert h.psm.snapshot_offsets() == []
    assert h.psm.map_end_offset == 100
    assert h.psm.take_snapshot() == snapshot_path(tmp_path, 100)


def test_stale_tmp_files_removed_at_start(tmp_path: Path) -> None:
    stale = tmp_path / "00000000000000000009.snapshot.tmp"
    stale.write_bytes(b"partial")
    other = tmp_path / "recovery-point-offset-checkpoint.tmp"
    other.write_bytes(b"")
    ProducerStateManager(tmp_path)
    assert not stale.exists()
    assert other.exists()


def test_clear_forgets_producers_only(h: Harness) -> None:
    h.append(pid=1, epoch=0, seq=0)
    h.psm.clear()
    assert h.psm.is_empty and h.psm.map_end_offset == 1
    with pytest.raises(UnknownProducerIdError):
        h.append(pid=1, epoch=3, seq=77)
    assert isinstance(h.append(pid=1, epoch=3, seq=0), ProducerAppendInfo)


def test_producer_without_batches_round_trips_empty(h: Harness, tmp_path: Path) -> None:
    # A marker with a new epoch clears the window: the snapshot stores "no batch" as -1s.
    h.append(pid=4, epoch=0, seq=0, txn=True)
    h.marker(pid=4, epoch=1, kind="ABORT", coord=3)
    path = h.psm.take_snapshot()
    assert path is not None
    [entry] = read_snapshot(path)
    assert (entry.epoch, entry.last_sequence, entry.last_offset, entry.offset_delta) == (
        1,
        -1,
        -1,
        0,
    )
    assert (entry.timestamp, entry.coordinator_epoch) == (2_000, 3)
    fresh = ProducerStateManager(tmp_path)
    fresh.load_latest_snapshot_at_or_below(100, now_ms=0)
    restored = fresh.last_entry(4)
    assert restored is not None and restored.is_empty and restored.producer_epoch == 1
    with pytest.raises(OutOfOrderSequenceError, match="expected sequence 0"):
        fresh.prepare_append(data(2, 4, 1, 5), CLIENT)


# --------------------------------------------------------------------------- unknown producers


def test_expired_producer_resumes_where_it_left_off(h: Harness) -> None:
    psm = ProducerStateManager(h.psm.partition_dir, producer_id_expiration_ms=100)
    h.psm = psm
    h.append(pid=1, epoch=0, seq=0, count=3, ts=1_000)
    assert psm.remove_expired_producers(now_ms=1_100) == [1]
    assert psm.last_entry(1) is None and 1 in psm.expired_producers
    # Its next batch continues the sequence: judged against what it was, accepted.
    assert isinstance(h.append(pid=1, epoch=0, seq=3, ts=2_000), ProducerAppendInfo)
    assert entry_of(psm, 1).last_seq == 3 and 1 not in psm.expired_producers
    # A gap after expiry is still a gap (an earlier batch is missing).
    psm.remove_expired_producers(now_ms=2_100)
    with pytest.raises(OutOfOrderSequenceError, match="expected sequence 4"):
        h.append(pid=1, epoch=0, seq=5, ts=3_000)
    # A retry of its last batch is still recognised as a duplicate.
    assert isinstance(h.append(pid=1, epoch=0, seq=3, ts=3_000), DuplicateBatch)


def test_expired_producers_remembered_are_bounded(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    from seglog.storage import producer_state

    monkeypatch.setattr(producer_state, "MAX_EXPIRED_PRODUCERS", 3)
    psm = ProducerStateManager(h.psm.partition_dir, producer_id_expiration_ms=10)
    h.psm = psm
    for pid in range(1, 6):
        h.append(pid=pid, epoch=0, seq=0, ts=pid)
    psm.remove_expired_producers(now_ms=1_000)
    assert list(psm.expired_producers) == [3, 4, 5]  # the oldest forgotten first
    # Forgotten: unknown again, so only a fresh start at sequence 0 is taken.
    with pytest.raises(UnknownProducerIdError):
        h.append(pid=1, epoch=0, seq=1, ts=2_000)
    assert isinstance(h.append(pid=3, epoch=0, seq=1, ts=2_000), ProducerAppendInfo)


def test_expired_producers_survive_a_snapshot_reload(h: Harness, tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, producer_id_expiration_ms=100)
    h.psm = psm
    h.append(pid=1, epoch=0, seq=0, count=2, ts=1_000)
    h.append(pid=2, epoch=0, seq=0, count=1, ts=5_000)
    psm.remove_expired_producers(now_ms=1_200)
    psm.take_snapshot()
    # Kafka's layout: the expired producer is a plain entry with its old timestamp.
    assert [e.producer_id for e in read_snapshot(snapshot_path(tmp_path, 3))] == [1, 2]
    fresh = ProducerStateManager(tmp_path, producer_id_expiration_ms=100)
    fresh.load_latest_snapshot_at_or_below(100, now_ms=5_050)
    assert sorted(fresh.active_producers) == [2] and list(fresh.expired_producers) == [1]
    batch = data(3, 1, 0, 2)
    assert isinstance(fresh.prepare_append(batch, CLIENT), ProducerAppendInfo)
    with pytest.raises(UnknownProducerIdError):
        fresh.prepare_append(data(3, 9, 0, 2), CLIENT)
