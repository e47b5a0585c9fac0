"""KIP-890's verification without I/O: the guard in a partition's producer state
(storage/txn_verification.py, ProducerStateManager), the coordinator's VerifyOnly
answer (TransactionCoordinator.verify_partitions), the leader's batching and deadlines
(node/transactions/txn_verification.py) and the Produce errors Kafka answers."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_transaction_coordinator import TID
from test_transaction_coordinator import Harness as CoordinatorHarness

from seglog.node.transactions.txn_verification import (
    DEFAULT_ERROR,
    GENERIC_ERROR_SUPPORTED,
    Answer,
    MixedProducers,
    Question,
    TxnVerifications,
    coordinator_error_at_leader,
    produce_error,
    produce_supported_operation,
    transactional_batches,
    txn_offset_commit_error,
    txn_offset_commit_supported_operation,
)
from seglog.storage.errors import OutOfOrderSequenceError
from seglog.storage.producer_state import ProducerStateManager
from seglog.storage.producer_state_entry import (
    AppendOrigin,
    ControlMarker,
    InvalidTxnStateError,
    ProducerAppendInfo,
)
from seglog.storage.record_batch import NewRecord, build_batch
from seglog.storage.txn_verification import VerificationGuard

CLIENT = AppendOrigin.CLIENT
PID = 7
TP = ("t", 0)


class Batch:
    """The header fields producer state reads (as tests/storage/test_producer_state.py)."""

    def __init__(
        self, offset: int, epoch: int, seq: int, txn: bool = True, control: bool = False
    ) -> None:
        self.base_offset = offset
        self.last_offset_delta = 0
        self.last_offset = offset
        self.max_timestamp = 1_000
        self.producer_id = PID
        self.producer_epoch = epoch
        self.base_sequence = seq
        self.last_sequence = seq
        self.is_transactional = txn
        self.is_control = control
        self.has_producer_id = True


class Partition:
    """A leader's producer state, appended to as the Log does."""

    def __init__(self, directory: Path, enabled: bool = True) -> None:
        self.psm = ProducerStateManager(directory, transaction_verification_enabled=enabled)
        self.leo = 0

    def append(self, epoch: int, seq: int, guard=None, txn: bool = True) -> None:
        info = self.psm.prepare_append(Batch(self.leo, epoch, seq, txn), CLIENT,
                                       verification_guard=guard)  # fmt: skip
        assert isinstance(info, ProducerAppendInfo)
        self.psm.update(info)
        self.leo += 1
        self.psm.update_map_end_offset(self.leo)

    def marker(self, epoch: int, kind: str = "ABORT") -> None:
        info = self.psm.prepare_append(
            Batch(self.leo, epoch, -1, control=True),
            AppendOrigin.COORDINATOR,
            ControlMarker(kind, 0),  # type: ignore[arg-type]
        )
        assert isinstance(info, ProducerAppendInfo)
        self.psm.update(info)
        self.leo += 1
        self.psm.update_map_end_offset(self.leo)


# --- the guard in producer state ------------------------------------------------------


def test_a_transaction_opens_only_with_its_verification_guard(tmp_path: Path) -> None:
    p = Partition(tmp_path)
    with pytest.raises(InvalidTxnStateError, match="not part of an ongoing transaction"):
        p.append(0, 0)  # never verified
    guard = p.psm.maybe_start_transaction_verification(PID, 0, 0, now_ms=1)
    assert guard is not None
    other = p.psm.maybe_start_transaction_verification(PID, 0, 0, now_ms=2)
    assert other is guard  # one verification per producer until an append spends it
    with pytest.raises(InvalidTxnStateError):
        p.append(0, 0, guard=object())  # another guard
    p.append(0, 0, guard=guard)
    assert p.psm.verification_state_entry(PID) is None  # spent
    # The transaction is open here now: its next batches need no guard.
    assert p.psm.maybe_start_transaction_verification(PID, 1, 0, now_ms=3) is None
    p.append(0, 1)
    assert p.psm.ongoing_txns == {PID: 0}


def test_a_marker_between_verification_and_append_fails_the_append(tmp_path: Path) -> None:
    """Kafka's ABA case: verified in the old transaction, the ABORT lands, the stale
    verification must not open a transaction the coordinator does not know."""
    p = Partition(tmp_path)
    guard = p.psm.maybe_start_transaction_verification(PID, 0, 0, now_ms=1)
    p.marker(0)  # the coordinator aborted meanwhile
    with pytest.raises(InvalidTxnStateError):
        p.append(0, 0, guard=guard)
    assert p.psm.ongoing_txns == {}


def test_an_epoch_bump_needs_a_new_verification(tmp_path: Path) -> None:
    p = Partition(tmp_path)
    p.append(0, 0, guard=p.psm.maybe_start_transaction_verification(PID, 0, 0, now_ms=1))
    # Open at epoch 0; a batch of epoch 1 is another transaction.
    assert p.psm.has_ongoing_transaction(PID, 0)
    assert not p.psm.has_ongoing_transaction(PID, 1)
    with pytest.raises(InvalidTxnStateError):
        p.append(1, 0)


def test_a_later_batch_may_not_use_an_earlier_ones_verification(tmp_path: Path) -> None:
    p = Partition(tmp_path)
    p.psm.maybe_start_transaction_verification(PID, 3, 0, now_ms=1)
    guard = p.psm.maybe_start_transaction_verification(PID, 0, 0, now_ms=2)
    assert p.psm.verification_state_entry(PID).lowest_sequence == 0  # type: ignore[union-attr]
    with pytest.raises(OutOfOrderSequenceError, match="earliest seen sequence"):
        p.psm.prepare_append(Batch(0, 0, 3), CLIENT, verification_guard=guard)


def test_the_group_coordinators_transactional_batch_needs_its_guard_too(tmp_path: Path) -> None:
    """A TxnOffsetCommit's batch (origin COORDINATOR) opens the producer's transaction in
    `__consumer_offsets` only with its verification's guard, asked with NO_SEQUENCE
    (-1); its own sequence is not held against the guard's (Kafka checks a client's
    only). A follower replicating it checks nothing."""
    p = Partition(tmp_path)
    coordinator = AppendOrigin.COORDINATOR
    with pytest.raises(InvalidTxnStateError, match="not verified"):
        p.psm.prepare_append(Batch(0, 0, 0), coordinator)
    guard = p.psm.maybe_start_transaction_verification(PID, -1, 0, now_ms=1)
    with pytest.raises(InvalidTxnStateError):
        p.psm.prepare_append(Batch(0, 0, 0), coordinator, verification_guard=VerificationGuard())
    info = p.psm.prepare_append(Batch(0, 0, 0), coordinator, verification_guard=guard)
    assert isinstance(info, ProducerAppendInfo)
    p.psm.update(info)
    assert p.psm.ongoing_txns == {PID: 0}
    assert p.psm.verification_state_entry(PID) is None  # spent
    replica = Partition(tmp_path / "follower")
    info = replica.psm.prepare_append(Batch(0, 0, 0), AppendOrigin.REPLICATION)
    assert isinstance(info, ProducerAppendInfo)


def test_verification_off_takes_any_transactional_batch(tmp_path: Path) -> None:
    p = Partition(tmp_path, enabled=False)
    p.append(0, 0)
    assert p.psm.ongoing_txns == {PID: 0}


def test_a_verification_never_used_expires_with_the_producer_expiry(tmp_path: Path) -> None:
    psm = ProducerStateManager(tmp_path, 1_000, transaction_verification_enabled=True)
    psm.maybe_start_transaction_verification(PID, 0, 0, now_ms=0)
    psm.remove_expired_producers(999)
    assert psm.verification_state_entry(PID) is not None
    psm.remove_expired_producers(1_000)
    assert psm.verification_state_entry(PID) is None


# --- the coordinator's VerifyOnly --------------------------------------------------------


def test_the_coordinator_verifies_from_its_state_without_writing() -> None:
    h = CoordinatorHarness()
    r = h.call("init_producer_id", 60_000, -1, -1)
    assert r is not None
    pid, epoch = r.producer_id, r.producer_epoch
    added = h.call("add_partitions", pid, epoch, [TP])
    assert added is not None and added.error == "NONE"
    writes = len(h.log)
    c = h.coord
    assert c.verify_partitions(TID, pid, epoch, [TP, ("t", 1)]) == {
        TP: "NONE",
        ("t", 1): "TRANSACTION_ABORTABLE",
    }
    assert c.verify_partitions(TID, pid, epoch + 1, [TP]) == {TP: "PRODUCER_FENCED"}
    assert c.verify_partitions(TID, pid + 1, epoch, [TP]) == {TP: "INVALID_PRODUCER_ID_MAPPING"}
    assert c.verify_partitions("", pid, epoch, [TP]) == {TP: "INVALID_REQUEST"}
    assert len(h.log) == writes  # nothing written
    # Decided (PrepareCommit, markers going out): CONCURRENT_TRANSACTIONS; completed:
    # no partition is in it any more.
    h.call("end_txn", pid, epoch, True)
    assert c.verify_partitions(TID, pid, epoch, [TP]) == {TP: "CONCURRENT_TRANSACTIONS"}
    h.markers_written()
    assert c.verify_partitions(TID, pid, epoch, [TP]) == {TP: "TRANSACTION_ABORTABLE"}


# --- the leader's questions --------------------------------------------------------------


def q(token: int, tid: str = "a", epoch: int = 0, deadline: int = 100) -> Question:
    return Question(token, tid, PID, epoch, (TP,), deadline)


def test_one_request_in_flight_per_coordinator_and_the_rest_batched() -> None:
    v = TxnVerifications(max_pending=10)
    assert v.verify(q(1, "a"), coordinator=2) == []
    (first,) = v.ready()
    assert first.node == 2 and [x.token for x in first.questions] == [1]
    v.verify(q(2, "b"), coordinator=2)
    v.verify(q(3, "c"), coordinator=2)
    assert v.ready() == []  # node 2 is busy
    answers = v.on_response(2, first.batch_id, {"a": {TP: "NONE"}})
    assert answers == [Answer(1, {})]
    (second,) = v.ready()
    assert sorted(x.token for x in second.questions) == [2, 3]
    answers = v.on_response(2, second.batch_id, {"b": {TP: "PRODUCER_FENCED"},
                                                  "c": {TP: "TRANSACTION_ABORTABLE"}})  # fmt: skip
    assert sorted(answers, key=lambda a: a.token) == [
        Answer(2, {TP: "INVALID_PRODUCER_EPOCH"}),  # what producers expect here
        Answer(3, {TP: "INVALID_TXN_STATE"}),  # Produce before v11 knows no ABORTABLE
    ]
    assert v.pending == 0


def test_each_question_hears_transaction_abortable_as_its_version_knows_it() -> None:
    """KIP-890: a Produce v11 (TxnOffsetCommit v4) question hears the coordinator's
    TRANSACTION_ABORTABLE, an older one INVALID_TXN_STATE, though both fly in the same
    batch to the coordinator (Kafka keeps the first question's mapping for the whole
    batch; here each keeps its own)."""
    v = TxnVerifications(max_pending=10)
    old = Question(1, "a", PID, 0, (TP,), 100, produce_supported_operation(10))
    new = Question(2, "b", PID, 0, (TP,), 100, produce_supported_operation(11))
    offsets = Question(3, "c", PID, 0, (TP,), 100, txn_offset_commit_supported_operation(4))
    for q_ in (old, new, offsets):
        v.verify(q_, coordinator=2)
    (batch,) = v.ready()
    abortable = {TP: "TRANSACTION_ABORTABLE"}
    answers = v.on_response(2, batch.batch_id, {"a": abortable, "b": abortable, "c": abortable})
    assert sorted(answers, key=lambda a: a.token) == [
        Answer(1, {TP: "INVALID_TXN_STATE"}),
        Answer(2, {TP: "TRANSACTION_ABORTABLE"}),
        Answer(3, {TP: "TRANSACTION_ABORTABLE"}),
    ]
    # Fenced is INVALID_PRODUCER_EPOCH whatever the version.
    fenced = coordinator_error_at_leader("PRODUCER_FENCED", GENERIC_ERROR_SUPPORTED)
    assert fenced == "INVALID_PRODUCER_EPOCH"


def test_the_versions_that_know_transaction_abortable_are_kafkas() -> None:
    """AddPartitionsToTxnManager.produceRequestVersionToTransactionSupportedOperation
    (v11) and txnOffsetCommitRequestVersionToTransactionSupportedOperation (v4)."""
    assert [produce_supported_operation(v) for v in (3, 9, 10, 11)] == [DEFAULT_ERROR] * 3 + [
        GENERIC_ERROR_SUPPORTED
    ]
    assert [txn_offset_commit_supported_operation(v) for v in (0, 3, 4)] == [DEFAULT_ERROR] * 2 + [
        GENERIC_ERROR_SUPPORTED
    ]


def test_a_newer_question_of_the_same_id_replaces_the_queued_one() -> None:
    v = TxnVerifications(max_pending=10)
    v.verify(q(1, "a"), 2)
    v.ready()  # 1 in flight
    v.verify(q(2, "a", epoch=0), 2)
    assert v.verify(q(3, "a", epoch=0), 2) == [Answer(2, {TP: "NETWORK_EXCEPTION"})]
    assert v.verify(q(4, "a", epoch=1), 2) == [Answer(3, {TP: "INVALID_PRODUCER_EPOCH"})]
    assert v.verify(q(5, "a", epoch=0), 2) == [Answer(5, {TP: "INVALID_PRODUCER_EPOCH"})]


def test_questions_are_bounded_and_time_out() -> None:
    v = TxnVerifications(max_pending=2)
    assert v.verify(q(1, "a", deadline=50), 2) == []
    assert v.verify(q(2, "b", deadline=80), 3) == []
    assert v.verify(q(3, "c"), 2) == [Answer(3, {TP: "COORDINATOR_NOT_AVAILABLE"})]
    assert v.verify(q(4, "d"), -1) == [Answer(4, {TP: "COORDINATOR_NOT_AVAILABLE"})]
    sends = v.ready()
    assert v.next_deadline() == 50
    assert v.expire(49) == []
    assert v.expire(50) == [Answer(1, {TP: "NETWORK_EXCEPTION"})]
    # The late answer of the timed-out question is dropped; the node is free again.
    (to_2,) = [s for s in sends if s.node == 2]
    assert v.on_response(2, to_2.batch_id, {"a": {TP: "NONE"}}) == []
    (to_3,) = [s for s in sends if s.node == 3]
    assert v.on_response(3, to_3.batch_id, None, "NETWORK_EXCEPTION") == [
        Answer(2, {TP: "NETWORK_EXCEPTION"})
    ]
    assert v.pending == 0 and v.next_deadline() is None


def test_produce_errors_are_kafkas() -> None:
    assert produce_error("INVALID_TXN_STATE") == (
        "INVALID_TXN_STATE",
        "Partition was not added to the transaction",
    )
    retriable_ones = (
        "NETWORK_EXCEPTION",
        "COORDINATOR_LOAD_IN_PROGRESS",
        "COORDINATOR_NOT_AVAILABLE",
        "NOT_COORDINATOR",
        "CONCURRENT_TRANSACTIONS",
    )
    for retriable in retriable_ones:
        name, message = produce_error(retriable)
        assert name == "NOT_ENOUGH_REPLICAS"
        assert message.endswith(f"Underlying error: {retriable}")
    assert produce_error("INVALID_PRODUCER_EPOCH")[0] == "INVALID_PRODUCER_EPOCH"
    assert coordinator_error_at_leader("PRODUCER_FENCED") == "INVALID_PRODUCER_EPOCH"
    assert coordinator_error_at_leader("TRANSACTION_ABORTABLE") == "INVALID_TXN_STATE"
    # Produce v11: Kafka answers it with no message of its own (a null ErrorMessage).
    assert produce_error("TRANSACTION_ABORTABLE") == ("TRANSACTION_ABORTABLE", None)


def test_txn_offset_commit_errors_are_kafkas() -> None:
    """GroupMetadataManager.maybeConvertOffsetCommitError on a failed verification of
    the group's offsets partition (the coordinator's answer as the leader reads it)."""
    at_leader = coordinator_error_at_leader
    assert txn_offset_commit_error(at_leader("TRANSACTION_ABORTABLE")) == "INVALID_TXN_STATE"
    abortable = at_leader("TRANSACTION_ABORTABLE", GENERIC_ERROR_SUPPORTED)  # v4
    assert txn_offset_commit_error(abortable) == "TRANSACTION_ABORTABLE"
    assert txn_offset_commit_error(at_leader("PRODUCER_FENCED")) == "INVALID_PRODUCER_EPOCH"
    assert txn_offset_commit_error("NETWORK_EXCEPTION") == "COORDINATOR_LOAD_IN_PROGRESS"
    assert txn_offset_commit_error("NOT_LEADER_OR_FOLLOWER") == "NOT_COORDINATOR"
    assert txn_offset_commit_error("UNKNOWN_TOPIC_OR_PARTITION") == "COORDINATOR_NOT_AVAILABLE"
    for same in ("COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR", "CONCURRENT_TRANSACTIONS",
                 "COORDINATOR_LOAD_IN_PROGRESS", "INVALID_PRODUCER_ID_MAPPING"):  # fmt: skip
        assert txn_offset_commit_error(same) == same


def test_the_transactional_batches_of_a_produce() -> None:
    def batch(pid: int, seq: int, txn: bool = True) -> bytes:
        return build_batch([NewRecord(b"v")], producer_id=pid, producer_epoch=0,
                           base_sequence=seq, is_transactional=txn)  # fmt: skip

    found = transactional_batches([(("t", 0), batch(5, 3)), (("t", 1), batch(5, 0) + batch(5, 1))])
    assert found is not None
    assert (found.producer_id, found.producer_epoch) == (5, 0)
    assert found.first_sequences == {("t", 0): 3, ("t", 1): 0}
    assert transactional_batches([(("t", 0), batch(5, 0, txn=False))]) is None
    assert transactional_batches([(("t", 0), b"not a batch")]) is None
    with pytest.raises(MixedProducers):
        transactional_batches([(("t", 0), batch(5, 0)), (("t", 1), batch(6, 0))])
