"""KIP-848's consumer group without I/O: membership by heartbeat, assignment computed
by the coordinator, and the reconciliation that hands a partition to a member only
once its previous owner has given it up.

A `ConsumerGroup` takes `heartbeat` (one ConsumerGroupHeartbeat request, with the
partition counts of the topics in the cluster and the current time) and `tick` (time)
and answers with a `ConsumerHeartbeatResult`. Its epochs:
- the group epoch bumps whenever what the assignment depends on changes (a member
  joins or goes, a subscription or the server assignor changes, a subscribed topic's
  partition count changes); the target assignment is recomputed at once and carries
  that epoch (the assignment epoch);
- a member's epoch catches up with the assignment epoch when it has reconciled: it
  first revokes what the target took away (state UNREVOKED_PARTITIONS: its epoch
  stays, it only keeps current ∩ target), then receives the target's partitions that
  no other member still holds (UNRELEASED_PARTITIONS while some are held elsewhere),
  and is STABLE once it holds its whole target.
A partition is held by one member at most at any time (its assigned or still-revoking
partitions): asserted on every change."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from .group_config import ConsumerConfig
from .group_errors import (
    FENCED_MEMBER_EPOCH,
    GROUP_MAX_SIZE_REACHED,
    INVALID_REQUEST,
    NONE,
    UNKNOWN_MEMBER_ID,
    UNSUPPORTED_ASSIGNOR,
)
from .group_messages import (
    ConsumerHeartbeat,
    ConsumerHeartbeatResult,
    DescribedConsumerGroup,
    DescribedConsumerMember,
    TopicPartition,
)

Assignment = dict[str, frozenset[int]]

LEAVE_EPOCH = -1
LEAVE_STATIC_EPOCH = -2

STABLE = "STABLE"
UNREVOKED_PARTITIONS = "UNREVOKED_PARTITIONS"
UNRELEASED_PARTITIONS = "UNRELEASED_PARTITIONS"

MAX_SUBSCRIBED_TOPICS = 10_000  # a bound on one member's subscription


@dataclass
class ConsumerMember:
    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    subscribed: tuple[str, ...]
    server_assignor: str | None
    instance_id: str | None = None
    rack_id: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: str = STABLE
    assigned: Assignment = field(default_factory=dict)  # the member may use these now
    revoking: Assignment = field(default_factory=dict)  # it must give these up first
    session_deadline_ms: int = 0
    revocation_deadline_ms: int | None = None
    last_sent: Assignment | None = None  # the assignment the last answer carried

    def holds(self) -> set[TopicPartition]:
        return {(t, p) for a in (self.assigned, self.revoking) for t, ps in a.items() for p in ps}


def _listed(a: Mapping[str, frozenset[int]]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    return tuple((t, tuple(sorted(ps))) for t, ps in sorted(a.items()) if ps)


def _flat(a: Mapping[str, frozenset[int]]) -> set[TopicPartition]:
    return {(t, p) for t, ps in a.items() for p in ps}


def _nest(tps: set[TopicPartition]) -> Assignment:
    out: dict[str, set[int]] = {}
    for t, p in tps:
        out.setdefault(t, set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}


# --- server-side assignors ------------------------------------------------------------

Subscriptions = Mapping[str, tuple[str, ...]]  # member id -> subscribed topics
Assignor = Callable[
    [Subscriptions, Mapping[str, int], Mapping[str, Assignment]], dict[str, Assignment]
]


def range_assignor(
    members: Subscriptions, topics: Mapping[str, int], _previous: Mapping[str, Assignment]
) -> dict[str, Assignment]:
    """Per topic, its subscribers (by member id) get contiguous ranges, the first
    ones one partition more when it does not divide evenly."""
    out: dict[str, dict[str, set[int]]] = {m: {} for m in members}
    for topic in sorted(topics):
        subs = sorted(m for m, s in members.items() if topic in s)
        if not subs:
            continue
        n = topics[topic]
        base, extra = divmod(n, len(subs))
        start = 0
        for i, m in enumerate(subs):
            count = base + (1 if i < extra else 0)
            if count:
                out[m][topic] = set(range(start, start + count))
            start += count
    return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in out.items()}


def uniform_assignor(
    members: Subscriptions, topics: Mapping[str, int], previous: Mapping[str, Assignment]
) -> dict[str, Assignment]:
    """Balanced and sticky: each member's fair share is the sum over its topics of
    partitions / subscribers, rounded down; it keeps what it had up to that share, and
    the rest goes, one partition at a time, to the least loaded subscriber (ties by
    member id)."""
    subscribers = {t: sorted(m for m, s in members.items() if t in s) for t in topics}
    share: dict[str, int] = {}
    for m, subs in members.items():
        fair = sum(topics[t] / len(subscribers[t]) for t in subs if t in topics)
        share[m] = int(fair)  # rounded down: the remainder goes to the least loaded
    taken: dict[str, set[TopicPartition]] = {m: set() for m in members}
    owner: dict[TopicPartition, str] = {}
    for m in sorted(members):
        for tp in sorted(_flat(previous.get(m, {}))):
            t, p = tp
            if (
                t in topics
                and p < topics[t]
                and t in members[m]
                and tp not in owner
                and len(taken[m]) < share[m]
            ):
                taken[m].add(tp)
                owner[tp] = m
    # The topics with fewest subscribers first: their partitions have the fewest places
    # to go, so the others' can even the load out afterwards.
    for t in sorted(topics, key=lambda t: (len(subscribers[t]), t)):
        for p in range(topics[t]):
            if (t, p) in owner or not subscribers[t]:
                continue
            m = min(subscribers[t], key=lambda x: (len(taken[x]), x))
            taken[m].add((t, p))
            owner[(t, p)] = m
    return {m: _nest(tps) for m, tps in taken.items()}


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform_assignor, "range": range_assignor}


# --- the group -------------------------------------------------------------------------


class ConsumerGroup:
    def __init__(self, group_id: str, config: ConsumerConfig) -> None:
        self.group_id = group_id
        self.config = config
        self.group_epoch = 0
        self.assignment_epoch = 0
        self.members: dict[str, ConsumerMember] = {}
        self.target: dict[str, Assignment] = {}
        self.topic_sizes: dict[str, int] = {}  # subscribed topics' partition counts

    # --- what the group looks like -----------------------------------------------

    @property
    def state(self) -> str:
        """Kafka's consumer group states."""
        if not self.members:
            return "Empty"
        if self.assignment_epoch < self.group_epoch:
            return "Assigning"
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state != STABLE:
                return "Reconciling"
        return "Stable"

    def holders(self) -> dict[TopicPartition, str]:
        """Who holds each partition (assigned or revoking); asserts one at most."""
        out: dict[TopicPartition, str] = {}
        for m in self.members.values():
            for tp in m.holds():
                assert tp not in out, f"{tp} held by {out[tp]} and {m.member_id}"
                out[tp] = m.member_id
        return out

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed}

    # --- requests ------------------------------------------------------------------

    def heartbeat(
        self,
        req: ConsumerHeartbeat,
        topics: Mapping[str, int],
        now_ms: int,
        new_member_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> ConsumerHeartbeatResult:
        """One heartbeat; `topics`: partition counts of the cluster's topics."""
        error = self._invalid(req)
        if error is not None:
            return ConsumerHeartbeatResult(error[0], error[1])
        if req.member_epoch in (LEAVE_EPOCH, LEAVE_STATIC_EPOCH):
            member = self.members.get(req.member_id)
            if member is None:
                return ConsumerHeartbeatResult(
                    UNKNOWN_MEMBER_ID, f"{req.member_id} is not a member of {self.group_id}"
                )
            self._remove(req.member_id, topics)
            return ConsumerHeartbeatResult(
                NONE, member_id=req.member_id, member_epoch=req.member_epoch
            )
        member = self.members.get(req.member_id) if req.member_id else None
        joining = req.member_epoch == 0
        if joining:
            if member is not None:
                # Rejoining from scratch: its old incarnation gives everything up.
                self._remove(member.member_id, topics)
            elif len(self.members) >= self.config.max_size:
                return ConsumerHeartbeatResult(GROUP_MAX_SIZE_REACHED, "the group is full")
            member_id = req.member_id or new_member_id()
            member = ConsumerMember(
                member_id,
                req.client_id,
                req.client_host,
                req.rebalance_timeout_ms,
                tuple(sorted(set(req.subscribed_topic_names or ()))),
                req.server_assignor,
                req.instance_id,
                req.rack_id,
            )
            self.members[member_id] = member
            self.group_epoch += 1
        else:
            if member is None:
                return ConsumerHeartbeatResult(
                    UNKNOWN_MEMBER_ID, f"{req.member_id} is not a member of {self.group_id}"
                )
            if not self._epoch_ok(member, req):
                return ConsumerHeartbeatResult(
                    FENCED_MEMBER_EPOCH,
                    f"member epoch {req.member_epoch} is not {member.member_epoch}",
                )
            changed = False
            if req.subscribed_topic_names is not None:
                subscribed = tuple(sorted(set(req.subscribed_topic_names)))
                changed |= subscribed != member.subscribed
                member.subscribed = subscribed
            if req.server_assignor is not None and req.server_assignor != member.server_assignor:
                member.server_assignor = req.server_assignor
                changed = True
            if req.rebalance_timeout_ms > 0:
                member.rebalance_timeout_ms = req.rebalance_timeout_ms
            if req.rack_id is not None:
                member.rack_id = req.rack_id
            if changed:
                self.group_epoch += 1
        session_ms = req.session_timeout_ms or self.config.session_timeout_ms
        member.session_deadline_ms = now_ms + session_ms
        self._refresh_target(topics)
        owned = None if req.owned is None else set(req.owned)
        self._reconcile(member, owned, now_ms)
        send = (
            joining
            or member.last_sent != member.assigned
            or (owned is not None and owned != _flat(member.assigned))
        )
        assignment = None
        if send:
            member.last_sent = dict(member.assigned)
            assignment = _listed(member.assigned)
        return ConsumerHeartbeatResult(
            NONE,
            member_id=member.member_id,
            member_epoch=member.member_epoch,
            heartbeat_interval_ms=req.heartbeat_interval_ms or self.config.heartbeat_interval_ms,
            assignment=assignment,
        )

    def tick(self, topics: Mapping[str, int], now_ms: int) -> list[str]:
        """Members whose session expired, or who kept partitions to revoke beyond
        their rebalance timeout, are removed; returns their ids."""
        gone = [
            m.member_id
            for m in self.members.values()
            if m.session_deadline_ms <= now_ms
            or (m.revocation_deadline_ms is not None and m.revocation_deadline_ms <= now_ms)
        ]
        for member_id in gone:
            self._remove(member_id, topics)
        return gone

    def describe(self) -> DescribedConsumerGroup:
        return DescribedConsumerGroup(
            NONE,
            self.group_id,
            state=self.state,
            group_epoch=self.group_epoch,
            assignment_epoch=self.assignment_epoch,
            assignor_name=self._assignor(),
            members=tuple(
                DescribedConsumerMember(
                    m.member_id,
                    m.instance_id,
                    m.rack_id,
                    m.member_epoch,
                    m.client_id,
                    m.client_host,
                    m.subscribed,
                    _listed(m.assigned),
                    _listed(self.target.get(m.member_id, {})),
                )
                for m in self.members.values()
            ),
        )

    def current_epoch_of(self, member_id: str) -> int | None:
        m = self.members.get(member_id)
        return None if m is None else m.member_epoch

    # --- inside ------------------------------------------------------------------------

    def _invalid(self, req: ConsumerHeartbeat) -> tuple[str, str] | None:
        """Kafka's request checks: (error, message) or None."""
        if req.instance_id is not None and not req.instance_id:
            return INVALID_REQUEST, "InstanceId can't be empty."
        if req.rack_id is not None and not req.rack_id:
            return INVALID_REQUEST, "RackId can't be empty."
        if req.subscribed_topic_regex is not None:
            return INVALID_REQUEST, "SubscribedTopicRegex is not supported by this broker."
        if req.member_epoch < LEAVE_STATIC_EPOCH:
            return INVALID_REQUEST, f"MemberEpoch {req.member_epoch} is invalid."
        if req.member_epoch == 0:
            if req.member_id_from_client and not req.member_id:
                return INVALID_REQUEST, "MemberId can't be empty."
            if req.rebalance_timeout_ms == -1:
                return INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request."
            if req.subscribed_topic_names is None:
                return INVALID_REQUEST, "SubscribedTopicNames must be set in first request."
            if req.owned:
                return INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining."
        elif not req.member_id:
            return INVALID_REQUEST, "MemberId can't be empty."
        if req.subscribed_topic_names is not None and (
            len(req.subscribed_topic_names) > MAX_SUBSCRIBED_TOPICS
        ):
            return INVALID_REQUEST, "too many SubscribedTopicNames"
        if req.server_assignor is not None and req.server_assignor not in self.config.assignors:
            return UNSUPPORTED_ASSIGNOR, f"ServerAssignor {req.server_assignor} is not supported."
        return None

    def _epoch_ok(self, member: ConsumerMember, req: ConsumerHeartbeat) -> bool:
        """The member's epoch, or its previous one when the answer that moved it on was
        lost (then what it owns must be within what it is assigned)."""
        if req.member_epoch == member.member_epoch:
            return True
        return (
            req.member_epoch == member.previous_member_epoch
            and req.owned is not None
            and set(req.owned) <= _flat(member.assigned)
        )

    def _remove(self, member_id: str, topics: Mapping[str, int]) -> None:
        del self.members[member_id]
        self.target.pop(member_id, None)
        self.group_epoch += 1
        self._refresh_target(topics)

    def _refresh_target(self, topics: Mapping[str, int]) -> None:
        """Recompute the target assignment when the group epoch moved on, or when a
        subscribed topic's partition count changed (which moves the group epoch)."""
        sizes = {t: topics[t] for t in self.subscribed_topics() if t in topics}
        if sizes != self.topic_sizes:
            self.topic_sizes = sizes
            if self.assignment_epoch == self.group_epoch:  # else one bump covers both
                self.group_epoch += 1
        if self.assignment_epoch == self.group_epoch:
            return
        subs = {m.member_id: m.subscribed for m in self.members.values()}
        self.target = ASSIGNORS[self._assignor()](subs, sizes, self.target)
        self.assignment_epoch = self.group_epoch
        self._check_target()

    def _assignor(self) -> str:
        """The server assignor most members ask for (ties: the configured order); the
        first configured one when none asks."""
        asked = [m.server_assignor for m in self.members.values() if m.server_assignor]
        if not asked:
            return self.config.assignors[0]
        return max(
            self.config.assignors, key=lambda a: (asked.count(a), -self.config.assignors.index(a))
        )

    def _check_target(self) -> None:
        seen: set[TopicPartition] = set()
        for member_id, a in self.target.items():
            assert member_id in self.members
            for tp in _flat(a):
                assert tp not in seen, f"{tp} in two targets"
                assert tp[1] < self.topic_sizes.get(tp[0], 0), f"{tp} does not exist"
                seen.add(tp)

    def _reconcile(self, m: ConsumerMember, owned: set[TopicPartition] | None, now_ms: int) -> None:
        target = _flat(self.target.get(m.member_id, {}))
        if m.state == UNREVOKED_PARTITIONS:
            if owned is None or owned & _flat(m.revoking):
                return  # still revoking: nothing moves until it says it let go
            m.revoking = {}
            m.revocation_deadline_ms = None
            m.state = STABLE
        if m.member_epoch == self.assignment_epoch and m.state == STABLE:
            return
        current = _flat(m.assigned)
        to_revoke = current - target
        if to_revoke:
            m.assigned = _nest(current & target)
            m.revoking = _nest(to_revoke)
            m.state = UNREVOKED_PARTITIONS
            m.revocation_deadline_ms = now_ms + max(m.rebalance_timeout_ms, 0)
            self.holders()
            return
        holders = self.holders()
        free = {tp for tp in target if holders.get(tp, m.member_id) == m.member_id}
        m.assigned = _nest(free)
        if m.member_epoch != self.assignment_epoch:
            m.previous_member_epoch = m.member_epoch
            m.member_epoch = self.assignment_epoch
        m.state = STABLE if free == target else UNRELEASED_PARTITIONS
        self.holders()
