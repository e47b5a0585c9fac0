"""Kafka's partition assignors, as the group leader runs them: `range`,
`roundrobin` and `cooperative-sticky`, with Kafka's semantics and names, so a group
mixing seglog's consumers and Kafka's clients agrees on who reads what.

Pure functions of the partition counts and the members' subscriptions: no I/O.
Each returns every member id, with its (possibly empty) sorted partition list.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping

from .cluster import TopicPartition
from .consumer_protocol import Subscription

EAGER = "EAGER"
COOPERATIVE = "COOPERATIVE"

Assignment = dict[str, list[TopicPartition]]


def member_order(member_id: str, sub: Subscription) -> tuple[int, str, str]:
    """Kafka's MemberInfo order: static members first by group.instance.id, then
    dynamic ones by member id."""
    if sub.group_instance_id:
        return (0, sub.group_instance_id, member_id)
    return (1, "", member_id)


def _sorted_members(subscriptions: Mapping[str, Subscription]) -> list[str]:
    return sorted(subscriptions, key=lambda m: member_order(m, subscriptions[m]))


def _start(
    subscriptions: Mapping[str, Subscription],
) -> tuple[dict[str, list[TopicPartition]], list[str], list[str]]:
    """What an eager assignor starts from: an empty list per member, the members in
    order, and every subscribed topic, sorted."""
    out: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
    topics = sorted({t for s in subscriptions.values() for t in s.topics})
    return out, _sorted_members(subscriptions), topics


def _tp_key(tp: TopicPartition) -> tuple[str, int]:
    return (tp.topic, tp.partition)


def _finish(assignment: Mapping[str, Iterable[TopicPartition]]) -> Assignment:
    return {m: sorted(tps, key=_tp_key) for m, tps in assignment.items()}


class Assignor(ABC):
    """`name` is the protocol name sent in JoinGroup; `rebalance_protocol` is EAGER
    (members give everything up before a rebalance) or COOPERATIVE (they keep what
    they own and give up only what moves)."""

    name: str
    rebalance_protocol: str = EAGER

    @abstractmethod
    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> Assignment:
        """Partitions per member id. Topics absent from `partitions_per_topic` (not
        known to exist) are left out."""


class RangeAssignor(Assignor):
    """Per topic: the members subscribed to it, in member order, each take a
    contiguous range; the first `n % members` take one more."""

    name = "range"

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> Assignment:
        out, members, topics = _start(subscriptions)
        for topic in topics:
            count = partitions_per_topic.get(topic)
            if not count:
                continue
            consumers = [m for m in members if topic in subscriptions[m].topics]
            per, extra = divmod(count, len(consumers))
            for i, member in enumerate(consumers):
                start = per * i + min(i, extra)
                length = per + (1 if i < extra else 0)
                out[member].extend(TopicPartition(topic, p) for p in range(start, start + length))
        return _finish(out)


class RoundRobinAssignor(Assignor):
    """Every partition of every subscribed topic (sorted by topic, then partition)
    dealt in turn to the members, in member order, skipping a member not
    subscribed to the partition's topic."""

    name = "roundrobin"

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> Assignment:
        out, members, topics = _start(subscriptions)
        if not members:
            return {}
        turn = 0
        for topic in topics:
            for p in range(partitions_per_topic.get(topic, 0)):
                # Someone is subscribed to the topic, so this ends within one lap.
                for _ in range(len(members)):
                    member = members[turn % len(members)]
                    turn += 1
                    if topic in subscriptions[member].topics:
                        out[member].append(TopicPartition(topic, p))
                        break
        return _finish(out)


class CooperativeStickyAssignor(Assignor):
    """Balanced (member counts within one when subscriptions are equal) and sticky:
    a member keeps what it owns unless that unbalances the group. Cooperative
    (Kafka's KIP-429): a partition moving from one member to another is left out of
    this generation's assignment, so its owner revokes it and rejoins, and the
    next rebalance hands it to its new member. So a partition is never assigned
    to one member while another still owns it.

    Ownership comes from each member's subscription (owned partitions, generation):
    when several members claim one partition, the claim of the highest generation
    wins; claimants tied at the highest generation all give it up first (it is
    left unassigned until none of them owns it).
    """

    name = "cooperative-sticky"
    rebalance_protocol = COOPERATIVE

    def assign(
        self, partitions_per_topic: Mapping[str, int], subscriptions: Mapping[str, Subscription]
    ) -> Assignment:
        members = _sorted_members(subscriptions)
        rank = {m: i for i, m in enumerate(members)}
        all_tps = [
            TopicPartition(t, p)
            for t in sorted({t for s in subscriptions.values() for t in s.topics})
            for p in range(partitions_per_topic.get(t, 0))
        ]
        existing = set(all_tps)
        owner, contested = self._owners(subscriptions, existing)
        current: dict[str, set[TopicPartition]] = {m: set() for m in members}
        for tp, m in owner.items():
            current[m].add(tp)
        target = {m: set(tps) for m, tps in current.items()}
        # Partitions nobody validly owns go to the least loaded member that wants them.
        for tp in all_tps:
            if tp in owner or tp in contested:
                continue
            eligible = [m for m in members if tp.topic in subscriptions[m].topics]
            best = min(eligible, key=lambda m: (len(target[m]), rank[m]))
            target[best].add(tp)
        self._balance(target, subscriptions, members, rank)
        # Cooperative: what moves between two members waits for the next generation.
        out: dict[str, set[TopicPartition]] = {}
        for m, tps in target.items():
            out[m] = {tp for tp in tps if owner.get(tp, m) == m}
        return _finish(out)

    @staticmethod
    def _owners(
        subscriptions: Mapping[str, Subscription], existing: set[TopicPartition]
    ) -> tuple[dict[TopicPartition, str], set[TopicPartition]]:
        claims: dict[TopicPartition, list[tuple[int, str]]] = {}
        for m, sub in subscriptions.items():
            for tp in sub.owned_partitions:
                if tp in existing and tp.topic in sub.topics:
                    claims.setdefault(tp, []).append((sub.generation_id, m))
        owner: dict[TopicPartition, str] = {}
        contested: set[TopicPartition] = set()
        for tp, cs in claims.items():
            top = max(g for g, _ in cs)
            best = [m for g, m in cs if g == top]
            if len(best) == 1:
                owner[tp] = best[0]
            else:
                contested.add(tp)
        return owner, contested

    @staticmethod
    def _balance(
        target: dict[str, set[TopicPartition]],
        subscriptions: Mapping[str, Subscription],
        members: list[str],
        rank: Mapping[str, int],
    ) -> None:
        """Move one partition at a time from the most loaded member to the least
        loaded one that can take it, while that narrows the gap by more than one.
        Each move lowers the sum of squared loads, so this ends; the bound is a guard."""
        total = sum(len(t) for t in target.values())
        for _ in range(total * max(len(members), 1) + 1):
            moved = False
            for donor in sorted(members, key=lambda m: (-len(target[m]), rank[m])):
                for receiver in sorted(members, key=lambda m: (len(target[m]), rank[m])):
                    if len(target[donor]) - len(target[receiver]) <= 1:
                        break
                    movable = sorted(
                        (tp for tp in target[donor] if tp.topic in subscriptions[receiver].topics),
                        key=_tp_key,
                    )
                    if movable:
                        tp = movable[-1]
                        target[donor].remove(tp)
                        target[receiver].add(tp)
                        moved = True
                        break
                if moved:
                    break
            if not moved:
                return
        raise AssertionError("cooperative-sticky balancing did not converge")


ASSIGNORS: dict[str, type[Assignor]] = {
    a.name: a for a in (RangeAssignor, RoundRobinAssignor, CooperativeStickyAssignor)
}
# Kafka's class names for the same assignors, as partition.assignment.strategy takes them.
_ALIASES = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
}


def make_assignors(strategy: str | Iterable[str]) -> list[Assignor]:
    """`partition_assignment_strategy`: names in preference order (a comma-separated
    string or a list). A clear error names an unknown one."""
    names = [strategy] if isinstance(strategy, str) else list(strategy)
    names = [n.strip() for name in names for n in str(name).split(",") if n.strip()]
    if not names:
        raise ValueError("partition_assignment_strategy is empty")
    out: list[Assignor] = []
    for name in names:
        cls = ASSIGNORS.get(_ALIASES.get(name, name).lower())
        if cls is None:
            raise ValueError(
                f"partition_assignment_strategy {name!r} is unknown; known: {', '.join(ASSIGNORS)}"
            )
        if any(isinstance(a, cls) for a in out):
            raise ValueError(f"partition_assignment_strategy lists {name!r} twice")
        out.append(cls())
    return out


def rebalance_protocol(assignors: Iterable[Assignor]) -> str:
    """COOPERATIVE only when every configured assignor supports it (Kafka's rule:
    a group moves to cooperative rebalancing once no member could pick an eager one)."""
    return COOPERATIVE if all(a.rebalance_protocol == COOPERATIVE for a in assignors) else EAGER
