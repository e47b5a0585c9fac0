"""KIP-903 at the node's controller (`LocalController`, the quorum of one, through the
request surface the AlterPartition servicer calls): a broker restarts and registers a
new broker epoch while its leader's AlterPartition, naming the old epoch, is in flight."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from seglog.controller.cluster_control import ControlError
from seglog.node.controller.controller_requests import IsrChange
from seglog.node.controller.local_controller import LocalController
from seglog.storage.log_config import LogConfig


@pytest.fixture
def controller(tmp_path: Path) -> LocalController:
    c = LocalController(tmp_path / "meta", LogConfig.defaults(), random.Random(3))
    c.load(clean=True)
    for b in (1, 2, 3):
        c.register_broker(b, "localhost", 9000 + b)
    c.create_topic("t", 1, 3, {})
    return c


def test_an_alter_partition_naming_a_restarted_brokers_old_epoch_is_refused(
    controller: LocalController,
) -> None:
    state = controller.image.partition("t", 0)
    assert state is not None and len(state.isr) == 3
    leader = state.leader
    follower, dropped = (r for r in state.replicas if r != leader)
    epochs = {b: controller.image.brokers[b].broker_epoch for b in (1, 2, 3)}
    # The leader shrinks `dropped` out, keeping `follower` with the epoch it last saw...
    in_flight = IsrChange(
        "t",
        0,
        state.leader_epoch,
        state.partition_epoch,
        (leader, follower),
        (epochs[leader], epochs[follower]),
    )
    # ...while `follower` restarts and registers again.
    new_epoch = controller.register_broker(follower, "localhost", 9000 + follower)
    assert new_epoch > epochs[follower]
    [(error, message)] = controller.alter_partitions(leader, epochs[leader], [in_flight])
    assert error == "INELIGIBLE_REPLICA"
    assert str(epochs[follower]) in message and str(new_epoch) in message
    after = controller.image.partition("t", 0)
    assert after is not None and after.isr == state.isr  # nothing applied
    # Named with the new registration, the same change goes through.
    fresh = IsrChange(
        "t",
        0,
        state.leader_epoch,
        state.partition_epoch,
        (leader, follower),
        (epochs[leader], new_epoch),
    )
    assert controller.alter_partitions(leader, epochs[leader], [fresh]) == [("NONE", "")]
    after = controller.image.partition("t", 0)
    assert after is not None and set(after.isr) == {leader, follower}


def test_a_leader_sending_with_its_old_broker_epoch_is_refused_whole(
    controller: LocalController,
) -> None:
    state = controller.image.partition("t", 0)
    assert state is not None
    old = controller.image.brokers[state.leader].broker_epoch
    controller.register_broker(state.leader, "localhost", 9000 + state.leader)
    change = IsrChange("t", 0, state.leader_epoch, state.partition_epoch, state.isr, ())
    with pytest.raises(ControlError) as e:
        controller.alter_partitions(state.leader, old, [change])
    assert e.value.error_name == "STALE_BROKER_EPOCH"
