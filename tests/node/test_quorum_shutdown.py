"""A quorum controller that shuts down fails the proposals nobody will commit at once.

A broker's controlled shutdown (a want_shutdown heartbeat from another node) could
propose just after the Raft thread's last pass: nothing answered it, and its gRPC
thread waited out COMMIT_TIMEOUT_S (10 s), holding its controller process's exit. A
three-node cluster stopped as a whole took 12-15 s, most of it that wait."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest

from seglog.controller.cluster_control import ControlError
from seglog.controller.metadata_records import RegisterBrokerRecord
from seglog.node.controller.quorum_controller import COMMIT_TIMEOUT_S, QuorumController
from seglog.storage.disk_and_clock import plain_monotonic_s
from seglog.storage.log_config import LogConfig

RECORD = RegisterBrokerRecord(broker_id=2, broker_epoch=5, host="127.0.0.1", port=9002)


def quorum(tmp_path: Path) -> QuorumController:
    # Not started (white-box): no Raft thread takes what is proposed, as after its last pass.
    voters = {1: ("127.0.0.1", 1), 2: ("127.0.0.1", 2), 3: ("127.0.0.1", 3)}
    return QuorumController(1, voters, tmp_path, LogConfig.defaults(), random.Random(0))


def propose(qc: QuorumController) -> tuple[threading.Thread, list[ControlError | int]]:
    """A request thread proposing RECORD, once its proposal is queued; its outcome (the
    committed index or the error) lands in the list."""
    outcome: list[ControlError | int] = []

    def run() -> None:
        try:
            outcome.append(qc._commit([RECORD]))
        except ControlError as e:
            outcome.append(e)

    proposer = threading.Thread(target=run)
    proposer.start()
    deadline = plain_monotonic_s() + 5
    while qc._inbound.empty() and plain_monotonic_s() < deadline:
        proposer.join(0.01)
    assert not qc._inbound.empty()
    return proposer, outcome


def test_a_proposal_left_in_the_queue_fails_when_the_controller_shuts_down(
    tmp_path: Path,
) -> None:
    qc = quorum(tmp_path)
    proposer, outcome = propose(qc)
    started = plain_monotonic_s()
    qc.shutdown()
    proposer.join(COMMIT_TIMEOUT_S + 5)
    waited = plain_monotonic_s() - started
    assert len(outcome) == 1 and isinstance(outcome[0], ControlError), outcome
    assert outcome[0].error_name == "NOT_CONTROLLER"
    assert waited < COMMIT_TIMEOUT_S / 5, f"the proposal waited {waited:.1f} s"


def test_a_proposal_after_the_shutdown_is_refused_at_once(tmp_path: Path) -> None:
    qc = quorum(tmp_path)
    qc.shutdown()
    started = plain_monotonic_s()
    with pytest.raises(ControlError) as e:
        qc._commit([RECORD])
    assert e.value.error_name == "NOT_CONTROLLER"
    assert plain_monotonic_s() - started < 1
    assert qc._inbound.empty()


def test_closing_lets_the_proposals_made_commit_and_refuses_new_ones(tmp_path: Path) -> None:
    """The active controller closes its proposals before its listener stops: a broker's
    controlled shutdown already proposed still commits (the Raft thread and the peers'
    acknowledgements go on meanwhile), a later one is told NOT_CONTROLLER at once."""
    qc = quorum(tmp_path)
    proposer, outcome = propose(qc)
    kind, payload = qc._inbound.get_nowait()
    assert kind == "propose"
    _data, future = payload  # type: ignore[misc]

    closer = threading.Thread(target=qc.close_proposals, kwargs={"drain_s": 10.0})
    closer.start()
    closer.join(0.3)
    assert closer.is_alive()  # draining: the proposal has not committed yet
    with pytest.raises(ControlError) as e:
        qc._commit([RECORD])  # closed meanwhile
    assert e.value.error_name == "NOT_CONTROLLER"
    future.set_result(7)  # what the Raft thread does once the peers acknowledged it
    closer.join(2)
    proposer.join(2)
    assert not closer.is_alive() and outcome == [7]
    qc.shutdown()


def test_closing_waits_no_longer_than_its_bound(tmp_path: Path) -> None:
    qc = quorum(tmp_path)
    proposer, outcome = propose(qc)
    started = plain_monotonic_s()
    qc.close_proposals(drain_s=0.5)  # nobody commits it
    assert 0.4 < plain_monotonic_s() - started < 3
    qc.shutdown()  # fails it
    proposer.join(5)
    assert len(outcome) == 1 and isinstance(outcome[0], ControlError), outcome
