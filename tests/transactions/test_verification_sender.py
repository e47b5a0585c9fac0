"""The leader's verification shell (node/transactions/verification_sender.py) on real
sockets: a coordinator that never answers, one that refuses the connection, one not
known, and this node as its own coordinator. Whatever happens the Produce's callback
comes, with a retriable error, by the deadline: nothing waits for ever."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from seglog.node.transactions.txn_verification import (
    DEFAULT_ERROR,
    GENERIC_ERROR_SUPPORTED,
    TransactionSupportedOperation,
)
from seglog.node.transactions.verification_sender import (
    OffsetsVerified,
    Verification,
    VerificationSender,
    start_offsets_verification,
    start_verification,
)
from seglog.storage.producer_state import ProducerStateManager
from seglog.storage.record_batch import NewRecord, build_batch
from seglog.storage.txn_verification import VerificationGuard

TP = ("t", 0)
Errors = dict[tuple[str, int], str]


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A listener that takes connections and never says a word."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield server.getsockname()[1]
    stop.set()
    t.join(2)
    for s in accepted:
        s.close()
    server.close()


def closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def sender(coordinator: int, address: tuple[str, int] | None, local=None) -> VerificationSender:
    def no_local(*_a: object) -> Errors:
        raise AssertionError("the coordinator is another node")

    return VerificationSender(1, lambda _tid: coordinator, local or no_local, lambda _node: address)


def ask(s: VerificationSender, timeout_ms: int) -> tuple[Errors, float]:
    got: list[Errors] = []
    done = threading.Event()
    began = time.monotonic()

    def answered(errors: Errors) -> None:
        got.append(errors)
        done.set()

    s.verify("app", 5, 0, [TP], timeout_ms, answered)
    assert done.wait(10), "no answer"
    return got[0], time.monotonic() - began


def test_a_coordinator_that_never_answers_times_the_question_out(silent_port: int) -> None:
    s = sender(2, ("127.0.0.1", silent_port))
    observed: list[tuple[float, int]] = []
    s.observer = lambda ms, failed: observed.append((ms, failed))  # the node's metrics
    try:
        errors, took = ask(s, 500)
    finally:
        s.shutdown()
    assert errors == {TP: "NETWORK_EXCEPTION"}
    assert 0.4 < took < 3.0
    assert len(observed) == 1 and observed[0][0] >= 400 and observed[0][1] == 1


def test_a_coordinator_that_refuses_the_connection_fails_at_once() -> None:
    s = sender(2, ("127.0.0.1", closed_port()))
    try:
        errors, took = ask(s, 30_000)
    finally:
        s.shutdown()
    assert errors == {TP: "NETWORK_EXCEPTION"} and took < 3.0


def test_no_coordinator_known_is_coordinator_not_available() -> None:
    for s in (sender(-1, None), sender(2, None)):
        try:
            errors, _ = ask(s, 30_000)
        finally:
            s.shutdown()
        assert errors == {TP: "COORDINATOR_NOT_AVAILABLE"}


def test_this_node_as_coordinator_is_asked_directly() -> None:
    asked: list[tuple[str, int, int, Sequence[tuple[str, int]]]] = []

    def local(tid: str, pid: int, epoch: int, tps: Sequence[tuple[str, int]]) -> Errors:
        asked.append((tid, pid, epoch, tps))
        return {tp: "TRANSACTION_ABORTABLE" for tp in tps}

    s = sender(1, None, local)
    try:
        errors, _ = ask(s, 30_000)
    finally:
        s.shutdown()
    assert asked == [("app", 5, 0, (TP,))]
    assert errors == {TP: "INVALID_TXN_STATE"}


class Partitions:
    """start_verification's guard source: real producer state, one partition each."""

    def __init__(self, directory: Path) -> None:
        self.states = {
            tp: ProducerStateManager(directory / str(tp[1]), transaction_verification_enabled=True)
            for tp in (("t", 0), ("t", 1))
        }

    def start_transaction_verification(
        self, tp: tuple[str, int], producer_id: int, producer_epoch: int, sequence: int
    ) -> tuple[str, VerificationGuard | None]:
        state = self.states.get(tp)
        if state is None:
            return "NOT_LEADER_OR_FOLLOWER", None
        return "NONE", state.maybe_start_transaction_verification(
            producer_id, sequence, producer_epoch, 0
        )


def test_start_verification_maps_the_answers_to_produce_errors(tmp_path: Path) -> None:
    batch = build_batch([NewRecord(b"v")], producer_id=5, producer_epoch=0, base_sequence=0,
                        is_transactional=True)  # fmt: skip
    items = [(("t", 0), batch), (("t", 1), batch), (("t", 9), batch)]

    def local(_tid: str, _pid: int, _epoch: int, tps: Sequence[tuple[str, int]]) -> Errors:
        return {("t", 0): "NONE", ("t", 1): "CONCURRENT_TRANSACTIONS"}

    s = sender(1, None, local)
    box: list[Verification] = []
    done = threading.Event()
    try:
        now = start_verification(
            s, Partitions(tmp_path), "app", items, 30_000, lambda v: (box.append(v), done.set())
        )
        assert now is None and done.wait(10)
    finally:
        s.shutdown()
    v = box[0]
    assert set(v.guards) == {("t", 0)}
    assert v.errors[("t", 1)][0] == "NOT_ENOUGH_REPLICAS"
    assert "Underlying error: CONCURRENT_TRANSACTIONS" in v.errors[("t", 1)][1]
    assert v.errors[("t", 9)][0] == "NOT_LEADER_OR_FOLLOWER"
    # Nothing to ask without a transactional id or without transactional batches.
    assert start_verification(s, Partitions(tmp_path), None, items, 1, print) == Verification()
    plain = [(("t", 0), build_batch([NewRecord(b"v")]))]
    assert start_verification(s, Partitions(tmp_path), "app", plain, 1, print) == Verification()


def test_start_offsets_verification_answers_txn_offset_commit_errors(tmp_path: Path) -> None:
    """The group coordinator's question for the group's `__consumer_offsets` partition:
    the guard once verified, Kafka's TxnOffsetCommit errors otherwise; nothing asked
    with verification off, or once the producer's transaction is open there."""
    answer = {"NONE": "NONE"}
    asked: list[tuple[str, int, int, Sequence[tuple[str, int]]]] = []

    def local(tid: str, pid: int, epoch: int, tps: Sequence[tuple[str, int]]) -> Errors:
        asked.append((tid, pid, epoch, tps))
        return dict.fromkeys(tps, answer["NONE"])

    def verify(
        s: VerificationSender | None,
        partitions: Partitions,
        tp: tuple[str, int] = TP,
        tid: str = "app",
        operation: TransactionSupportedOperation = DEFAULT_ERROR,
    ) -> OffsetsVerified:
        box: list[OffsetsVerified] = []
        done = threading.Event()
        now = start_offsets_verification(
            s, partitions, tid, 5, 0, tp, 30_000, lambda v: (box.append(v), done.set()),
            operation,
        )  # fmt: skip
        if now is not None:
            return now
        assert done.wait(10), "no answer"
        return box[0]

    s = sender(1, None, local)
    try:
        partitions = Partitions(tmp_path)
        for coordinator_says, expected in (
            ("TRANSACTION_ABORTABLE", "INVALID_TXN_STATE"),  # AddOffsetsToTxn never sent
            ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH"),
            ("CONCURRENT_TRANSACTIONS", "CONCURRENT_TRANSACTIONS"),
        ):
            answer["NONE"] = coordinator_says
            assert verify(s, partitions) == (expected, None)
        # TxnOffsetCommit v4 (KIP-890) hears TRANSACTION_ABORTABLE by its name.
        answer["NONE"] = "TRANSACTION_ABORTABLE"
        assert verify(s, partitions, operation=GENERIC_ERROR_SUPPORTED) == (
            "TRANSACTION_ABORTABLE",
            None,
        )
        assert asked[0] == ("app", 5, 0, (TP,))
        answer["NONE"] = "NONE"
        error, guard = verify(s, partitions)
        assert error == "NONE" and guard is not None
        assert partitions.states[TP].verification_state_entry(5).guard is guard  # type: ignore[union-attr]
        assert partitions.states[TP].verification_state_entry(5).lowest_sequence == -1  # type: ignore[union-attr]
        # Not led here: the group has moved, the client looks for it again.
        assert verify(s, partitions, tp=("t", 9)) == ("NOT_COORDINATOR", None)
        asked.clear()
        assert verify(None, partitions) == ("NONE", None)  # verification off
        assert verify(s, partitions, tid="") == ("NONE", None)
        assert asked == []
    finally:
        s.shutdown()


def test_an_offsets_verification_that_times_out_is_retried_as_loading(
    tmp_path: Path, silent_port: int
) -> None:
    """NETWORK_EXCEPTION (the coordinator did not answer in time) is answered
    COORDINATOR_LOAD_IN_PROGRESS, which every client retries at the same coordinator."""
    s = sender(2, ("127.0.0.1", silent_port))
    box: list[OffsetsVerified] = []
    done = threading.Event()
    try:
        now = start_offsets_verification(
            s, Partitions(tmp_path), "app", 5, 0, TP, 300, lambda v: (box.append(v), done.set())
        )
        assert now is None and done.wait(10)
    finally:
        s.shutdown()
    assert box == [("COORDINATOR_LOAD_IN_PROGRESS", None)]
