"""A follower's fetch state (docs/replication-rules.md 6.4, 6.6, 7.2) as a table: every
legal move is one (state, event) -> state entry and anything else raises
`IllegalFetchTransition` naming the state and the event, so a new code path cannot
slip in a move nobody reasoned about."""

from __future__ import annotations

import enum


class FetchState(enum.Enum):
    IDLE = "idle"  # nothing to do: leader, no leader known, or not a replica
    FETCHING = "fetching"
    TRUNCATING = "truncating"  # needs OffsetsForLeaderEpoch (6.4)
    LEADER_LEO = "leader_leo"  # OFFSET_OUT_OF_RANGE, step 1: ask the leader's LEO (6.6)
    LEADER_START = "leader_start"  # step 2: ask the leader's log start offset
    FENCED = "fenced"  # our epoch is stale: wait for metadata (7.2)


class FetchEvent(enum.Enum):
    STOP = "stop"  # metadata: leader here, no leader, or no longer a replica
    RESTART = "restart"  # metadata: a (new) leader to fetch from, the log has epochs
    RESTART_WITHOUT_EPOCHS = "restart_without_epochs"  # ... the log has none (6.4)
    LEGACY_TRUNCATED = "legacy_truncated"  # no epochs: cut to the HW (7.2 step 1)
    EPOCH_UNCERTAIN = "epoch_uncertain"  # validate the log by OffsetsForLeaderEpoch
    EPOCH_ANSWERED = "epoch_answered"  # truncated to the divergence point (6.4, 6.5)
    EPOCH_ASK_AGAIN = "epoch_ask_again"  # truncated below an epoch we never had
    FENCED_LEADER_EPOCH = "fenced_leader_epoch"  # the leader has a newer epoch (7.2)
    OUT_OF_RANGE = "out_of_range"  # OFFSET_OUT_OF_RANGE (6.6)
    LEADER_HAS_LESS = "leader_has_less"  # 6.6 step 1: truncated to the leader's LEO
    LEADER_HAS_MORE = "leader_has_more"  # 6.6 step 1: ask the leader's start offset
    START_ADOPTED = "start_adopted"  # 6.6 step 2


class IllegalFetchTransition(AssertionError):
    """A move the table does not hold (AssertionError: a broken invariant, kept under
    `python -O` because it is raised explicitly)."""


S, E = FetchState, FetchEvent
_ASKING = (S.FETCHING, S.TRUNCATING, S.LEADER_LEO, S.LEADER_START)

TRANSITIONS: dict[tuple[FetchState, FetchEvent], FetchState] = {
    # Metadata may restart or stop fetching from any state.
    **{(s, E.STOP): S.IDLE for s in S},
    **{(s, E.RESTART): S.FETCHING for s in S},
    **{(s, E.RESTART_WITHOUT_EPOCHS): S.TRUNCATING for s in S},
    (S.TRUNCATING, E.LEGACY_TRUNCATED): S.FETCHING,
    (S.FETCHING, E.EPOCH_UNCERTAIN): S.TRUNCATING,
    # An epoch answer: OffsetsForLeaderEpoch, or a fetch's diverging epoch.
    (S.TRUNCATING, E.EPOCH_ANSWERED): S.FETCHING,
    (S.FETCHING, E.EPOCH_ANSWERED): S.FETCHING,
    (S.TRUNCATING, E.EPOCH_ASK_AGAIN): S.TRUNCATING,
    (S.FETCHING, E.EPOCH_ASK_AGAIN): S.TRUNCATING,
    **{(s, E.FENCED_LEADER_EPOCH): S.FENCED for s in _ASKING},
    (S.FETCHING, E.OUT_OF_RANGE): S.LEADER_LEO,
    (S.TRUNCATING, E.OUT_OF_RANGE): S.LEADER_LEO,
    (S.LEADER_LEO, E.LEADER_HAS_LESS): S.FETCHING,
    (S.LEADER_LEO, E.LEADER_HAS_MORE): S.LEADER_START,
    (S.LEADER_START, E.START_ADOPTED): S.FETCHING,
}


def next_fetch_state(state: FetchState, event: FetchEvent) -> FetchState:
    try:
        return TRANSITIONS[(state, event)]
    except KeyError:
        raise IllegalFetchTransition(
            f"fetch state {state.value} has no move on {event.value}"
        ) from None
