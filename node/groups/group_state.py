"""One classic consumer group's state, without I/O: its members, generation, chosen
protocol and Kafka's five states. The transitions Kafka allows are checked where the
state changes; the classic protocol (classic_group_protocol.py) decides when to make them."""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


# Kafka's ClassicGroupState valid previous states.
_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(
        {
            GroupState.STABLE,
            GroupState.PREPARING_REBALANCE,
            GroupState.COMPLETING_REBALANCE,
            GroupState.EMPTY,
            GroupState.DEAD,
        }
    ),
}


class GroupInvariantError(AssertionError):
    """A group state the coordinator must never reach: a bug, not bad input."""


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (assignor name, subscription), in preference order
    assignment: bytes = b""
    awaiting_join: int | None = None  # the parked JoinGroup's request id
    awaiting_sync: int | None = None  # the parked SyncGroup's request id
    heartbeat_deadline_ms: int = 0
    is_new: bool = False  # joined during this rebalance (Kafka's isNew)

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def same_protocols(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def same_subscriptions(self, protocols: list[tuple[str, bytes]]) -> bool:
        """A restarted static member subscribes as before: the same assignors in the
        same order, each with the same topics. Its subscription bytes also carry the
        partitions it owned and its generation (ConsumerProtocolSubscription v1+),
        which a restart changes without changing what it asks for."""
        if [n for n, _ in self.protocols] != [n for n, _ in protocols]:
            return False
        for (_, old), (_, new) in zip(self.protocols, protocols, strict=True):
            if old != new:
                old_topics, new_topics = subscription_topics(old), subscription_topics(new)
                if old_topics is None or old_topics != new_topics:
                    return False
        return True


@dataclass
class ClassicGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol: str | None = None
    leader: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id → member id
    # Dynamic members told MEMBER_ID_REQUIRED: member id → deadline to rejoin.
    pending_members: dict[str, int] = field(default_factory=dict)
    state_timestamp_ms: int = -1
    # PreparingRebalance: when the join phase ends at the latest; with the initial
    # delay, when it ends unless another member joins (bounded by join_limit_ms).
    join_deadline_ms: int | None = None
    join_limit_ms: int | None = None
    initial_delay: bool = False
    # CompletingRebalance: members that have not synced by then are removed.
    sync_deadline_ms: int | None = None
    # The generation whose GroupMetadata write (the leader's SyncGroup) is in flight,
    # -1 for none: a late write of an older generation must not block the current one.
    sync_write_generation: int = -1
    synced: set[str] = field(default_factory=set)  # members that sent SyncGroup

    def transition(self, to: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[to]:
            raise GroupInvariantError(
                f"group {self.group_id}: {self.state.value} -> {to.value} is not a transition"
            )
        self.state = to
        self.state_timestamp_ms = now_ms
        self.check()

    def check(self) -> None:
        if self.state in (GroupState.EMPTY, GroupState.DEAD) and self.members:
            raise GroupInvariantError(f"group {self.group_id} is {self.state.value} with members")
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            if self.leader not in self.members:
                raise GroupInvariantError(
                    f"group {self.group_id} is {self.state.value} without its leader"
                )
        for instance, member_id in self.static_members.items():
            m = self.members.get(member_id)
            if m is None or m.group_instance_id != instance:
                raise GroupInvariantError(
                    f"group {self.group_id}: static member {instance} maps to {member_id}"
                )

    def is_empty(self) -> bool:
        return not self.members

    def max_rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def supports(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Kafka's supportsProtocols: an empty group takes any non-empty set; else the
        type must match and one assignor must be common to every member and this one."""
        names = {name for name, _ in protocols}
        if self.is_empty():
            return bool(protocol_type) and bool(names)
        if protocol_type != self.protocol_type:
            return False
        return bool(names & self.candidate_protocols())

    def candidate_protocols(self) -> set[str]:
        common: set[str] | None = None
        for m in self.members.values():
            names = {name for name, _ in m.protocols}
            common = names if common is None else common & names
        return common or set()

    def select_protocol(self) -> str:
        """Each member votes for its most preferred common assignor; the most votes win
        (ties: the name first in sort order, so every replay picks the same)."""
        candidates = self.candidate_protocols()
        if not candidates:
            raise GroupInvariantError(f"group {self.group_id} has no common protocol")
        votes: dict[str, int] = {}
        for m in self.members.values():
            for name, _ in m.protocols:
                if name in candidates:
                    votes[name] = votes.get(name, 0) + 1
                    break
        return max(sorted(votes), key=lambda n: votes[n])

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (Kafka's ConsumerProtocolSubscription);
        None when it cannot be known (another protocol type, undecodable metadata)."""
        if self.protocol_type != "consumer" or self.protocol is None:
            return None if self.members else set()
        topics: set[str] = set()
        for m in self.members.values():
            decoded = subscription_topics(m.metadata(self.protocol))
            if decoded is None:
                return None
            topics |= decoded
        return topics


def subscription_topics(data: bytes) -> set[str] | None:
    """The topics of a ConsumerProtocolSubscription (INT16 version, ARRAY of STRING,
    ...): every version starts with them. None if it does not decode."""
    try:
        pos = 2
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if count < 0 or count > 100_000:
            return None
        out = set()
        for _ in range(count):
            (n,) = struct.unpack_from(">h", data, pos)
            pos += 2
            if n < 0 or pos + n > len(data):
                return None
            out.add(data[pos : pos + n].decode("utf-8"))
            pos += n
        return out
    except (struct.error, UnicodeDecodeError):
        return None
