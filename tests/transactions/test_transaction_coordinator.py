"""The transaction coordinator's core (node/transactions/), driven as the node's shell
drives it: every `__transaction_state` append it asks for goes into a list that is
acknowledged (or failed), markers are reported written, and a new coordinator loads
the records the old one wrote. Records are checked byte for byte against Kafka's
TransactionLogKey / TransactionLogValue v0 schemas."""

from __future__ import annotations

import struct
from itertools import count

import pytest

from seglog.node.transactions import txn_records as rec
from seglog.node.transactions.transaction_coordinator import TransactionCoordinator
from seglog.node.transactions.txn_config import TxnConfig
from seglog.node.transactions.txn_records import TxnLogValue, TxnState
from seglog.node.transactions.txn_shard import Append, Respond, SendMarkers, TxnResult

S = TxnState
TID = "tx-orders"


class Harness:
    """A node's shell in miniature: the coordinator, its log, its answers."""

    def __init__(
        self, max_timeout_ms: int = 900_000, expiration_ms: int = 604_800_000, hold_ms: int = 100
    ) -> None:
        pids = count(1000)
        self.config = TxnConfig(
            transaction_max_timeout_ms=max_timeout_ms,
            transactional_id_expiration_ms=expiration_ms,
            add_partitions_to_txn_retry_backoff_max_ms=hold_ms,
        )
        self.coord = TransactionCoordinator(self.config, lambda: next(pids))
        self.partition = self.coord.partition_for(TID)
        self.log: list[tuple[bytes, bytes | None]] = []
        self.answers: dict[int, TxnResult] = {}
        self.markers: list[SendMarkers] = []
        self.pending: list[Append] = []
        self.rid = 0
        self.now = 0
        shard, _ = self.coord.begin_loading(self.partition, 3)
        self.coord.finish_loading(shard)

    def run(self, actions: list, *, ack: bool = True) -> None:
        for a in actions:
            if isinstance(a, Respond):
                self.answers[a.request_id] = a.result
            elif isinstance(a, SendMarkers):
                self.markers.append(a)
            else:
                self.pending.append(a)
        if ack:
            self.ack()

    def ack(self, error: str = "NONE") -> None:
        while self.pending:
            a = self.pending.pop(0)
            if error == "NONE":
                self.log.append((a.key, a.value))
            self.run(
                self.coord.on_write_done(a.partition, a.leader_epoch, a.write_id, error, self.now),
                ack=error == "NONE",
            )

    def call(self, method: str, *args: object, ack: bool = True) -> TxnResult | None:
        self.rid += 1
        fn = getattr(self.coord, method)
        self.run(fn(self.rid, TID, *args, self.now), ack=ack)
        return self.answers.get(self.rid)

    def markers_written(self, error: str = "NONE", *, ack: bool = True) -> None:
        while self.markers:
            m = self.markers.pop(0)
            self.run(
                self.coord.on_markers_done(
                    m.partition, m.coordinator_epoch, m.transactional_id, m.producer_id,
                    m.producer_epoch, error, self.now,
                ),
                ack=ack,
            )  # fmt: skip

    def state(self) -> TxnState:
        meta = self.coord.shards[self.partition].txns[TID]
        return meta.state


def test_init_begins_at_epoch_0_and_each_init_bumps_it() -> None:
    h = Harness()
    assert h.call("init_producer_id", 60_000, -1, -1) == TxnResult("NONE", 1000, 0)
    assert h.call("init_producer_id", 60_000, -1, -1) == TxnResult("NONE", 1000, 1)
    assert h.state() is S.EMPTY
    assert rec.decode_key(h.log[-1][0]) == TID
    assert rec.decode_value(h.log[-1][1]) == TxnLogValue(
        1000, 1, 60_000, S.EMPTY, frozenset(), 0, -1
    )
    assert h.call("init_producer_id", 900_001, -1, -1).error == "INVALID_TRANSACTION_TIMEOUT"


def test_a_committed_transaction_goes_through_prepare_and_complete() -> None:
    h = Harness(hold_ms=0)
    h.call("init_producer_id", 60_000, -1, -1)
    parts = [("orders", 0), ("orders", 1)]
    h.now = 10
    assert h.call("add_partitions", 1000, 0, parts) == TxnResult("NONE", 1000, 0)
    assert h.state() is S.ONGOING
    h.now = 20
    # Partitions already in the transaction: answered at once, nothing written.
    written = len(h.log)
    assert h.call("add_partitions", 1000, 0, parts[:1]).error == "NONE"
    assert len(h.log) == written
    assert h.call("end_txn", 1000, 0, True) == TxnResult("NONE", 1000, 0)
    assert h.state() is S.PREPARE_COMMIT
    (m,) = h.markers
    assert (m.commit, m.producer_id, m.producer_epoch, m.coordinator_epoch) == (True, 1000, 0, 3)
    assert m.partitions == frozenset(parts)
    # Markers in flight: the producer's next transaction waits (not held: hold_ms=0).
    assert h.call("add_partitions", 1000, 0, parts).error == "CONCURRENT_TRANSACTIONS"
    h.markers_written()
    assert h.state() is S.COMPLETE_COMMIT
    states = [rec.decode_value(v).state for _k, v in h.log]  # type: ignore[union-attr]
    assert states == [S.EMPTY, S.ONGOING, S.PREPARE_COMMIT, S.COMPLETE_COMMIT]
    # A retried EndTxn answers as before; the opposite outcome is refused.
    assert h.call("end_txn", 1000, 0, True).error == "NONE"
    assert h.call("end_txn", 1000, 0, False).error == "INVALID_TXN_STATE"


def _committing(h: Harness) -> None:
    """A transaction on ("orders", 0) asked to commit: PrepareCommit written, markers out."""
    h.call("init_producer_id", 60_000, -1, -1)
    h.call("add_partitions", 1000, 0, [("orders", 0)])
    assert h.call("end_txn", 1000, 0, True) == TxnResult("NONE", 1000, 0)
    assert h.state() is S.PREPARE_COMMIT and len(h.markers) == 1


def test_the_next_transactions_add_partitions_is_held_until_the_previous_completes() -> None:
    h = Harness()
    _committing(h)
    h.now = 5
    # The producer's next transaction starts while the markers are being written:
    # no answer yet, nothing written.
    written = len(h.log)
    assert h.call("add_partitions", 1000, 0, [("orders", 1)]) is None
    assert len(h.log) == written
    assert h.coord.next_parked_deadline() == 105
    # Markers written, CompleteCommit not yet acknowledged: still held.
    h.now = 8
    h.markers_written(ack=False)
    assert h.answers.get(h.rid) is None
    h.ack()  # CompleteCommit acknowledged: the held request goes through
    assert h.answers[h.rid] == TxnResult("NONE", 1000, 0)
    states = [rec.decode_value(v).state for _k, v in h.log]  # type: ignore[union-attr]
    assert states[-3:] == [S.PREPARE_COMMIT, S.COMPLETE_COMMIT, S.ONGOING]
    assert h.state() is S.ONGOING
    assert h.coord.shards[h.partition].txns[TID].partitions == {("orders", 1)}
    assert h.coord.next_parked_deadline() is None


def test_a_held_add_partitions_is_answered_concurrent_transactions_at_its_deadline() -> None:
    h = Harness(hold_ms=50)
    _committing(h)
    h.now = 10
    assert h.call("add_offsets", 1000, 0, "group-a") is None  # AddOffsetsToTxn too
    h.now = 59
    h.run(h.coord.expire_parked(h.now))
    assert h.answers.get(h.rid) is None
    h.now = 60
    h.run(h.coord.expire_parked(h.now))
    assert h.answers[h.rid].error == "CONCURRENT_TRANSACTIONS"
    h.markers_written()
    assert h.state() is S.COMPLETE_COMMIT  # the expired request changed nothing


def test_a_held_add_partitions_hears_concurrent_transactions_when_the_markers_fail() -> None:
    h = Harness()
    _committing(h)
    assert h.call("add_partitions", 1000, 0, [("orders", 1)]) is None
    h.markers_written("NOT_LEADER_OR_FOLLOWER")
    assert h.answers[h.rid].error == "CONCURRENT_TRANSACTIONS"
    assert h.state() is S.PREPARE_COMMIT  # the timer sends the markers again
    # A zombie's request is refused at once, never held.
    assert h.call("add_partitions", 1000, 1, [("orders", 1)]).error == "PRODUCER_FENCED"


def test_a_held_add_partitions_hears_not_coordinator_when_the_partition_moves() -> None:
    h = Harness()
    _committing(h)
    assert h.call("add_partitions", 1000, 0, [("orders", 1)]) is None
    h.run(h.coord.unload(h.partition))
    assert h.answers[h.rid].error == "NOT_COORDINATOR"
    assert h.coord.next_parked_deadline() is None


def test_a_second_producer_fences_the_first_and_aborts_its_transaction() -> None:
    h = Harness()
    h.call("init_producer_id", 60_000, -1, -1)
    h.call("add_partitions", 1000, 0, [("orders", 0)])
    # The same transactional id starts again: the open transaction is aborted under
    # epoch 1, and the new producer retries until it gets epoch 2.
    assert h.call("init_producer_id", 60_000, -1, -1).error == "CONCURRENT_TRANSACTIONS"
    (m,) = h.markers
    assert (m.commit, m.producer_epoch) == (False, 1)
    h.markers_written()
    assert h.state() is S.COMPLETE_ABORT
    assert h.call("init_producer_id", 60_000, -1, -1) == TxnResult("NONE", 1000, 2)
    # The zombie (epoch 0) is refused everywhere.
    assert h.call("add_partitions", 1000, 0, [("orders", 1)]).error == "PRODUCER_FENCED"
    assert h.call("end_txn", 1000, 0, True).error == "PRODUCER_FENCED"
    assert h.call("end_txn", 999, 2, True).error == "INVALID_PRODUCER_ID_MAPPING"


def test_a_transaction_past_its_timeout_is_aborted_with_the_epoch_bumped() -> None:
    h = Harness()
    h.call("init_producer_id", 5_000, -1, -1)
    h.now = 100
    h.call("add_partitions", 1000, 0, [("orders", 0)])
    h.now = 5_099
    h.run(h.coord.tick(h.now))
    assert h.state() is S.ONGOING and not h.markers
    h.now = 5_100
    h.run(h.coord.tick(h.now))
    assert h.state() is S.PREPARE_ABORT
    assert [(m.commit, m.producer_epoch) for m in h.markers] == [(False, 1)]
    h.markers_written()
    assert h.state() is S.COMPLETE_ABORT
    assert h.call("end_txn", 1000, 0, True).error == "PRODUCER_FENCED"


def test_failed_writes_leave_the_state_and_answer_with_kafkas_errors() -> None:
    h = Harness()
    h.call("init_producer_id", 60_000, -1, -1)
    h.call("add_partitions", 1000, 0, [("orders", 0)], ack=False)
    h.ack("NOT_LEADER_OR_FOLLOWER")
    assert h.answers[h.rid].error == "NOT_COORDINATOR"
    assert h.state() is S.EMPTY
    h.call("add_partitions", 1000, 0, [("orders", 0)], ack=False)
    h.ack("REQUEST_TIMED_OUT")
    assert h.answers[h.rid].error == "COORDINATOR_NOT_AVAILABLE"
    assert h.call("add_partitions", 1000, 0, [("orders", 0)]).error == "NONE"


def test_a_new_coordinator_loads_the_log_and_finishes_a_prepared_commit() -> None:
    h = Harness()
    h.call("init_producer_id", 60_000, -1, -1)
    h.call("add_partitions", 1000, 0, [("orders", 0), ("orders", 2)])
    h.call("end_txn", 1000, 0, True)
    h.markers.clear()  # the coordinator dies before its markers are written
    h.coord.unload(h.partition)
    assert h.call("end_txn", 1000, 0, True).error == "NOT_COORDINATOR"

    fresh = TransactionCoordinator(h.config, lambda: 5000)
    shard, _ = fresh.begin_loading(h.partition, 4)
    for key, value in h.log:
        shard.replay(key, value)
    assert fresh.shard_for(TID)[1] == "COORDINATOR_LOAD_IN_PROGRESS"
    (m,) = [a for a in fresh.finish_loading(shard) if isinstance(a, SendMarkers)]
    assert (m.commit, m.coordinator_epoch, m.partitions) == (
        True, 4, frozenset({("orders", 0), ("orders", 2)}),
    )  # fmt: skip
    out = fresh.on_markers_done(h.partition, 4, TID, 1000, 0, "NONE", 50)
    (append,) = [a for a in out if isinstance(a, Append)]
    assert rec.decode_value(append.value).state is S.COMPLETE_COMMIT  # type: ignore[union-attr]
    # An outcome reported to the old leadership's epoch is ignored.
    assert fresh.on_write_done(h.partition, 3, append.write_id, "NONE", 50) == []


def test_idle_transactional_ids_expire_with_a_tombstone() -> None:
    h = Harness(expiration_ms=1_000)
    h.call("init_producer_id", 60_000, -1, -1)
    h.now = 1_000
    h.run(h.coord.tick(h.now))
    assert h.log[-1] == (rec.encode_key(TID), None)
    assert TID not in h.coord.shards[h.partition].txns
    assert h.coord.describe(TID) == ("TRANSACTIONAL_ID_NOT_FOUND", None)


def test_transaction_log_records_match_kafkas_schemas_byte_for_byte() -> None:
    value = TxnLogValue(
        1000, 7, 60_000, S.ONGOING, frozenset({("b", 3), ("a", 1), ("a", 0)}), 20, 10
    )

    def string(s: str) -> bytes:
        return struct.pack(">h", len(s)) + s.encode()

    expected = (
        struct.pack(">h", 0)  # value version
        + struct.pack(">qhib", 1000, 7, 60_000, 1)  # ProducerId, Epoch, Timeout, Status
        + struct.pack(">i", 2)  # TransactionPartitions: 2 topics, sorted
        + string("a") + struct.pack(">iii", 2, 0, 1)
        + string("b") + struct.pack(">ii", 1, 3)
        + struct.pack(">qq", 20, 10)  # LastUpdateTimestampMs, StartTimestampMs
    )  # fmt: skip
    assert rec.encode_value(value) == expected
    assert rec.decode_value(expected) == value
    assert rec.encode_key(TID) == struct.pack(">h", 0) + string(TID)
    with pytest.raises(rec.TxnRecordError, match="version 1"):
        rec.decode_value(struct.pack(">h", 1) + expected[2:])
    # Kafka's partition: abs(String.hashCode) % 50, as for __consumer_offsets.
    assert rec.partition_for("tx-orders", 50) == rec.partition_for("tx-orders", 50) < 50
