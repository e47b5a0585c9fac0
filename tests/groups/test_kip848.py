"""KIP-848's consumer group protocol: the pure state machine's reconciliation (no
partition held by two members at any time, every partition assigned once the members
have heartbeated enough, epochs and errors as Kafka answers), and confluent-kafka
consumers with group.protocol=consumer on real nodes."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupType, TopicPartition
from confluent_kafka.admin import AdminClient
from hypothesis import given, settings
from hypothesis import strategies as st
from test_groups_kafka import create_topic, produce

from seglog.harness.kafka_cluster import KafkaCluster
from seglog.node.groups.consumer_group import (
    STABLE,
    ConsumerGroup,
    range_assignor,
    uniform_assignor,
)
from seglog.node.groups.coordinator_actions import Append, Respond
from seglog.node.groups.group_config import ConsumerConfig, GroupConfig
from seglog.node.groups.group_coordinator_shard import CoordinatorShard
from seglog.node.groups.group_errors import (
    FENCED_MEMBER_EPOCH,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_REQUEST,
    NON_EMPTY_GROUP,
    NONE,
    STALE_MEMBER_EPOCH,
    UNKNOWN_MEMBER_ID,
    UNSUPPORTED_ASSIGNOR,
)
from seglog.node.groups.group_messages import (
    CommitPartition,
    CommitResult,
    ConsumerHeartbeat,
    ConsumerHeartbeatResult,
    ErrorResult,
    JoinRequest,
    JoinResult,
)

TOPICS = {"a": 12, "b": 3}
CONFIG = ConsumerConfig(heartbeat_interval_ms=100, session_timeout_ms=1_000)


# --- the pure state machine ----------------------------------------------------------


class Client:
    """A consumer as KIP-848 expects it: it owns what the last answer assigned, and
    reports that in every heartbeat."""

    def __init__(self, group: ConsumerGroup, name: str, topics: tuple[str, ...]) -> None:
        self.group = group
        self.name = name
        self.topics = topics
        self.member_id = ""
        self.epoch = 0
        self.owned: set[tuple[str, int]] = set()

    def beat(self, now: int, **extra: object) -> ConsumerHeartbeatResult:
        joining = self.epoch == 0
        fields: dict[str, object] = {
            "rebalance_timeout_ms": 5_000 if joining else -1,
            "subscribed_topic_names": self.topics if joining else None,
            "owned": () if joining else tuple(sorted(self.owned)),
            "client_id": self.name,
            **extra,
        }
        req = ConsumerHeartbeat("g", self.member_id, self.epoch, **fields)  # type: ignore[arg-type]
        r = self.group.heartbeat(req, TOPICS, now, lambda: f"{self.name}-id")
        if r.error == NONE:
            self.member_id = r.member_id or self.member_id
            self.epoch = r.member_epoch
            if r.assignment is not None:
                self.owned = {(t, p) for t, ps in r.assignment for p in ps}
        return r

    def leave(self, now: int) -> ConsumerHeartbeatResult:
        r = self.group.heartbeat(ConsumerHeartbeat("g", self.member_id, -1), TOPICS, now)
        self.owned = set()
        return r


def owned_disjoint(clients: list[Client]) -> None:
    seen: set[tuple[str, int]] = set()
    for c in clients:
        assert not (c.owned & seen), f"{c.name} owns {c.owned & seen} someone else owns"
        seen |= c.owned


def settle(group: ConsumerGroup, clients: list[Client], now: int, rounds: int = 10) -> int:
    for _ in range(rounds):
        for c in clients:
            assert c.beat(now).error == NONE
            owned_disjoint(clients)
        now += 100
    return now


def test_three_members_get_disjoint_covering_assignments_and_a_leaver_hands_over() -> None:
    group = ConsumerGroup("g", CONFIG)
    clients = [Client(group, f"c{i}", ("a",)) for i in range(3)]
    now = settle(group, clients, 0)
    assert group.state == "Stable"
    assert sorted(p for c in clients for _, p in c.owned) == list(range(12))
    assert [len(c.owned) for c in clients] == [4, 4, 4]
    assert {c.epoch for c in clients} == {group.group_epoch}
    kept = {c.name: set(c.owned) for c in clients[:2]}
    assert clients[2].leave(now).member_epoch == -1
    now = settle(group, clients[:2], now)
    assert sorted(p for c in clients[:2] for _, p in c.owned) == list(range(12))
    for c in clients[:2]:
        assert kept[c.name] <= c.owned, "uniform is sticky: the stayers keep theirs"


def test_a_partition_moves_only_after_its_owner_revoked_it() -> None:
    group = ConsumerGroup("g", CONFIG)
    first = Client(group, "c0", ("a",))
    now = settle(group, [first], 0)
    assert len(first.owned) == 12
    second = Client(group, "c1", ("a",))
    r = second.beat(now)
    assert r.error == NONE and r.assignment == ()  # everything is still first's
    r = first.beat(now, owned=None)  # no owned partitions reported: still revoking
    assert group.members[first.member_id].state != STABLE
    first.beat(now)  # reports the revocation done
    assert len(first.owned) == 6
    second.beat(now)
    assert len(second.owned) == 6 and not (first.owned & second.owned)
    assert first.epoch == second.epoch == group.group_epoch


def test_errors_as_kafka_answers() -> None:
    group = ConsumerGroup("g", CONFIG)
    c = Client(group, "c0", ("a",))
    c.beat(0)
    stale = ConsumerHeartbeat("g", c.member_id, c.epoch + 5, owned=())
    assert group.heartbeat(stale, TOPICS, 1).error == FENCED_MEMBER_EPOCH
    unknown = ConsumerHeartbeat("g", "nobody", 3)
    assert group.heartbeat(unknown, TOPICS, 1).error == UNKNOWN_MEMBER_ID
    bad = ConsumerHeartbeat("g", "", 0, rebalance_timeout_ms=1, subscribed_topic_names=("a",))
    assert group.heartbeat(bad, TOPICS, 1, lambda: "x").error == NONE
    wrong = ConsumerHeartbeat(
        "g", "", 0, rebalance_timeout_ms=1, subscribed_topic_names=("a",), server_assignor="rr"
    )
    assert group.heartbeat(wrong, TOPICS, 1).error == UNSUPPORTED_ASSIGNOR
    no_topics = ConsumerHeartbeat("g", "", 0, rebalance_timeout_ms=1)
    assert group.heartbeat(no_topics, TOPICS, 1).error == INVALID_REQUEST
    v1_without_id = ConsumerHeartbeat(
        "g",
        "",
        0,
        rebalance_timeout_ms=1,
        subscribed_topic_names=("a",),
        member_id_from_client=True,
    )
    assert group.heartbeat(v1_without_id, TOPICS, 1).error == INVALID_REQUEST


def test_session_expiry_removes_the_member_and_bumps_the_epoch() -> None:
    group = ConsumerGroup("g", CONFIG)
    a, b = Client(group, "c0", ("a",)), Client(group, "c1", ("a",))
    now = settle(group, [a, b], 0)
    epoch = group.group_epoch
    for _ in range(20):  # only a heartbeats
        a.beat(now)
        now += 100
        group.tick(TOPICS, now)
    assert set(group.members) == {a.member_id} and group.group_epoch > epoch
    assert len(a.owned) == 12


def test_a_lost_answer_is_tolerated_with_the_previous_epoch() -> None:
    group = ConsumerGroup("g", CONFIG)
    a = Client(group, "c0", ("a",))
    now = settle(group, [a], 0)
    b = Client(group, "c1", ("a",))
    b.beat(now)
    a.beat(now)  # told to revoke half
    a.beat(now)  # reports it and moves to the new epoch: say this answer was lost
    member = group.members[a.member_id]
    moved_on, previous = member.member_epoch, member.previous_member_epoch
    assert previous < moved_on
    lost = ConsumerHeartbeat("g", a.member_id, previous, owned=())
    r = group.heartbeat(lost, TOPICS, now)
    assert r.error == NONE and r.member_epoch == moved_on
    owning_more = ConsumerHeartbeat(
        "g", a.member_id, previous, owned=tuple(("a", p) for p in range(12))
    )
    assert group.heartbeat(owning_more, TOPICS, now).error == FENCED_MEMBER_EPOCH


def test_assignors_are_balanced_and_complete() -> None:
    members = {"m1": ("a", "b"), "m2": ("a",), "m3": ("a", "b")}
    for assignor in (uniform_assignor, range_assignor):
        out = assignor(members, TOPICS, {})
        got = sorted((t, p) for a in out.values() for t, ps in a.items() for p in ps)
        assert got == sorted((t, p) for t, n in TOPICS.items() for p in range(n))
        assert "b" not in out["m2"]
    uniform = uniform_assignor(members, TOPICS, {})
    sizes = sorted(sum(len(ps) for ps in a.values()) for a in uniform.values())
    assert sizes[-1] - sizes[0] <= 1


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(("join", "beat", "lazy", "leave", "tick")),
            st.integers(0, 4),
            st.sampled_from((("a",), ("b",), ("a", "b"))),
        ),
        max_size=60,
    )
)
def test_no_partition_is_ever_owned_twice_and_all_end_assigned(
    steps: list[tuple[str, int, tuple[str, ...]]],
) -> None:
    group = ConsumerGroup("g", CONFIG)
    clients = [Client(group, f"c{i}", ("a",)) for i in range(5)]
    live: list[Client] = []
    now = 0
    for action, i, topics in steps:
        c = clients[i]
        now += 50
        if action == "join" and c not in live:
            c.topics = topics
            c.epoch, c.member_id, c.owned = 0, "", set()
            assert c.beat(now).error == NONE
            live.append(c)
        elif action in ("beat", "lazy") and c in live:
            r = c.beat(now, owned=None) if action == "lazy" else c.beat(now)
            if r.error != NONE:  # fenced: rejoins from scratch, as a consumer does
                c.owned, c.epoch, c.member_id = set(), 0, ""
                live.remove(c)
        elif action == "leave" and c in live:
            c.leave(now)
            live.remove(c)
        elif action == "tick":
            gone = group.tick(TOPICS, now)
            for x in [x for x in live if x.member_id in gone]:
                x.owned, x.epoch, x.member_id = set(), 0, ""
                live.remove(x)
        owned_disjoint(live)
        group.holders()
    if live:
        now = settle(group, live, now, rounds=6)
        wanted = {t for c in live for t in c.topics}
        got = sorted(tp for c in live for tp in c.owned)
        assert got == sorted((t, p) for t in wanted for p in range(TOPICS[t]))
        assert group.state == "Stable"


# --- in the coordinator shard ----------------------------------------------------------


def _shard() -> CoordinatorShard:
    import random

    shard = CoordinatorShard(0, 0, GroupConfig(consumer=CONFIG), random.Random(1))
    shard.finish_loading(0)
    return shard


def _answer(actions: list) -> object:
    return next(a.result for a in actions if isinstance(a, Respond))


def test_a_group_id_is_classic_or_consumer_and_commits_check_the_member_epoch() -> None:
    shard = _shard()
    join = ConsumerHeartbeat("g", "", 0, rebalance_timeout_ms=1, subscribed_topic_names=("a",))
    r = _answer(shard.consumer_heartbeat(1, join, TOPICS, 0))
    assert isinstance(r, ConsumerHeartbeatResult) and r.error == NONE and r.member_epoch == 1
    classic = JoinRequest("g", "", None, 10_000, 10_000, "consumer", (("range", b""),))
    jr = _answer(shard.join(2, classic, 0))
    assert isinstance(jr, JoinResult) and jr.error == INCONSISTENT_GROUP_PROTOCOL
    part = [CommitPartition("a", 0, 5, -1, "")]
    stale = _answer(shard.commit(3, "g", 7, r.member_id or "", None, part, 0))
    assert isinstance(stale, CommitResult) and stale.errors[0][2] == STALE_MEMBER_EPOCH
    actions = shard.commit(4, "g", r.member_epoch, r.member_id or "", None, part, 0)
    assert not [a for a in actions if isinstance(a, Respond)], "answered once written"
    (write,) = [a.write_id for a in actions if isinstance(a, Append)]
    ok = _answer(shard.on_write_done(write, NONE, 1))
    assert isinstance(ok, CommitResult) and ok.errors[0][2] == NONE
    # Not deletable while it has members; once the last one left, its offsets are
    # held as any empty group's.
    assert _answer(shard.delete_group(5, "g", 1)) == ErrorResult(NON_EMPTY_GROUP)
    leave = ConsumerHeartbeat("g", r.member_id or "", -1)
    assert _answer(shard.consumer_heartbeat(6, leave, TOPICS, 2)).error == NONE
    assert "g" not in shard.consumer_groups and shard.groups["g"].is_empty()
    assert shard.offsets["g"][("a", 0)].offset == 5


# --- real consumers --------------------------------------------------------------------

KIP848_OVERRIDES = {
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.session.timeout.ms": "6000",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    from seglog.harness.kafka_cluster import GROUP_OVERRIDES

    c = KafkaCluster(tmp_path_factory.mktemp("kip848"), {**GROUP_OVERRIDES, **KIP848_OVERRIDES})
    try:
        c.start_all()
        yield c
        assert not c.crashes(), c.crashes()
    finally:
        c.stop_all()


def consumer(cluster: KafkaCluster, group: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )


def assigned(c: Consumer) -> list[int]:
    return sorted(tp.partition for tp in c.assignment())


def poll_until(consumers: list[Consumer], done, timeout_s: float = 45.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll(0.1)
        if done():
            return
    raise AssertionError(f"not reached in {timeout_s}s: {[assigned(c) for c in consumers]}")


def disjoint_cover(consumers: list[Consumer]) -> bool:
    owned = [p for c in consumers for p in assigned(c)]
    return sorted(owned) == list(range(12)) and all(assigned(c) for c in consumers)


def test_confluent_kafka_consumers_with_group_protocol_consumer(cluster: KafkaCluster) -> None:
    create_topic(cluster, "kip848")
    produce(cluster, "kip848", 5)
    consumers = [consumer(cluster, "kip848-g") for _ in range(3)]
    try:
        for c in consumers:
            c.subscribe(["kip848"])
        poll_until(consumers, lambda: disjoint_cover(consumers))
        admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap})
        listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(30)
        assert [(g.group_id, g.type) for g in listed.valid] == [
            ("kip848-g", ConsumerGroupType.CONSUMER)
        ]

        # The coordinator's view once the group is Stable (until then a member may
        # still be revoking what another is waiting for).
        def stable() -> bool:
            d = admin.describe_consumer_groups(["kip848-g"])["kip848-g"].result(30)
            return d.state == ConsumerGroupState.STABLE

        poll_until(consumers, stable)
        # Stable means the coordinator has handed every member its target assignment
        # (Kafka's CurrentAssignmentBuilder), not that each client has applied it yet:
        # commit what the clients themselves hold once that covers the topic again.
        poll_until(consumers, lambda: disjoint_cover(consumers))
        described = admin.describe_consumer_groups(["kip848-g"])["kip848-g"].result(30)
        assert described.type == ConsumerGroupType.CONSUMER
        assert described.partition_assignor == "uniform"
        got = sorted(
            tp.partition for m in described.members for tp in m.assignment.topic_partitions
        )
        assert got == list(range(12)) and len(described.members) == 3
        # commits with the member epoch are accepted
        for c in consumers:
            answered = c.commit(
                offsets=[TopicPartition("kip848", p, 3) for p in assigned(c)], asynchronous=False
            )
            assert answered is not None
            assert [(tp.partition, tp.error) for tp in answered if tp.error] == []
        leaver = consumers.pop()
        moved = assigned(leaver)
        leaver.close()
        poll_until(consumers, lambda: disjoint_cover(consumers))
        assert set(moved) <= {p for c in consumers for p in assigned(c)}
    finally:
        for c in consumers:
            c.close()
    # Every node restarts: the consumer group is gone with its coordinator's memory,
    # the offsets were written to __consumer_offsets.
    cluster.stop_all()
    cluster.start_stopped()
    cluster.wait("kip848 has leaders", lambda: cluster.leader_of("kip848", 11))
    again = consumer(cluster, "kip848-g")
    try:
        again.subscribe(["kip848"])
        poll_until([again], lambda: assigned(again) == list(range(12)))
        committed = again.committed([TopicPartition("kip848", p) for p in range(12)], timeout=30)
        assert [tp.offset for tp in committed] == [3] * 12
    finally:
        again.close()
