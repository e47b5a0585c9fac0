"""The follower's fetch states move only through their table."""

from __future__ import annotations

import pytest

from seglog.replication.fetch_state import (
    TRANSITIONS,
    FetchEvent,
    FetchState,
    IllegalFetchTransition,
    next_fetch_state,
)
from seglog.replication.partition_replica import PartitionReplica
from seglog.sim.memory_log import MemoryLog


def test_every_state_is_reachable_and_metadata_moves_from_anywhere() -> None:
    assert {to for to in TRANSITIONS.values()} == set(FetchState)
    for state in FetchState:
        assert next_fetch_state(state, FetchEvent.STOP) is FetchState.IDLE
        assert next_fetch_state(state, FetchEvent.RESTART) is FetchState.FETCHING


@pytest.mark.parametrize(
    ("state", "event"),
    [
        (FetchState.IDLE, FetchEvent.OUT_OF_RANGE),
        (FetchState.FENCED, FetchEvent.EPOCH_ANSWERED),
        (FetchState.FETCHING, FetchEvent.LEADER_HAS_MORE),
        (FetchState.LEADER_START, FetchEvent.LEADER_HAS_LESS),
        (FetchState.IDLE, FetchEvent.FENCED_LEADER_EPOCH),
    ],
)
def test_a_move_outside_the_table_is_refused_by_name(state: FetchState, event: FetchEvent) -> None:
    with pytest.raises(IllegalFetchTransition, match=f"{state.value} has no move on {event.value}"):
        next_fetch_state(state, event)


def test_the_replicas_fetcher_goes_through_the_table() -> None:
    replica = PartitionReplica(2, MemoryLog("F"))
    assert replica.fetcher.state is FetchState.IDLE
    with pytest.raises(IllegalFetchTransition):
        replica.fetcher.move(FetchEvent.LEADER_HAS_LESS)
    with pytest.raises(AttributeError):
        replica.fetcher.state = FetchState.FETCHING  # type: ignore[misc]
