"""Consumer groups on real nodes with real Kafka clients: confluent-kafka (librdkafka),
kafka-python and aiokafka consumers join, rebalance, commit and resume; a member that
dies without leaving loses its partitions after its session timeout; and the
coordinator's errors (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, NOT_COORDINATOR) come
back as Kafka sends them."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.consumer import (
    HeartbeatRequest,
    JoinGroupRequest,
    OffsetCommitRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest

from seglog.harness.kafka_cluster import KafkaCluster, KafkaConnection

PARTITIONS = 12
SESSION_MS = 6000


def create_topic(cluster: KafkaCluster, name: str, partitions: int = PARTITIONS) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap})
    admin.create_topics([NewTopic(name, partitions, 3)])[name].result(30)
    cluster.wait(f"{name} known to every node", lambda: cluster.known_everywhere(name, partitions))


def produce(cluster: KafkaCluster, topic: str, per_partition: int) -> None:
    p = Producer({"bootstrap.servers": cluster.kafka_bootstrap, "acks": "all"})
    for i in range(per_partition * PARTITIONS):
        p.produce(topic, str(i).encode(), partition=i % PARTITIONS)
    assert p.flush(30) == 0


def consumer(cluster: KafkaCluster, group: str, **extra: object) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "session.timeout.ms": SESSION_MS,
            "heartbeat.interval.ms": 500,
            "partition.assignment.strategy": "range",
            **extra,
        }
    )


def poll_until(
    consumers: list[Consumer], done: Callable[[], bool], timeout_s: float = 45.0
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for c in consumers:
            c.poll(0.1)
        if done():
            return
    raise AssertionError(f"not reached in {timeout_s}s: {[assigned(c) for c in consumers]}")


def assigned(c: Consumer) -> list[int]:
    return sorted(tp.partition for tp in c.assignment())


def covers_disjointly(consumers: list[Consumer], partitions: int = PARTITIONS) -> bool:
    owned = [p for c in consumers for p in assigned(c)]
    return sorted(owned) == list(range(partitions)) and all(assigned(c) for c in consumers)


def test_three_confluent_consumers_share_twelve_partitions_and_rebalance(group_cluster):
    topic, group = "g-share", "share-group"
    create_topic(group_cluster, topic)
    members = [consumer(group_cluster, group) for _ in range(3)]
    try:
        for c in members:
            c.subscribe([topic])
        poll_until(members, lambda: covers_disjointly(members))
        assert sorted(len(assigned(c)) for c in members) == [4, 4, 4]

        # A member leaves (close sends LeaveGroup): the other two take over.
        members.pop().close()
        poll_until(members, lambda: covers_disjointly(members))
        assert sorted(len(assigned(c)) for c in members) == [6, 6]

        # A member joins: a rebalance spreads the partitions over three again.
        newcomer = consumer(group_cluster, group)
        newcomer.subscribe([topic])
        members.append(newcomer)
        poll_until(members, lambda: covers_disjointly(members))
        assert sorted(len(assigned(c)) for c in members) == [4, 4, 4]

        # The group as DescribeGroups shows it.
        admin = AdminClient({"bootstrap.servers": group_cluster.kafka_bootstrap})
        described = admin.describe_consumer_groups([group])[group].result(30)
        assert described.state.name == "STABLE"
        assert len(described.members) == 3
        assert described.partition_assignor == "range"
        listed = admin.list_consumer_groups().result(30)
        assert group in {g.group_id for g in listed.valid}
    finally:
        for c in members:
            c.close()


def test_commits_survive_a_consumer_restart(group_cluster):
    topic, group = "g-resume", "resume-group"
    create_topic(group_cluster, topic)
    produce(group_cluster, topic, 50)
    first = consumer(group_cluster, group)
    first.subscribe([topic])
    seen: dict[int, int] = {}
    deadline = time.monotonic() + 45
    while sum(seen.values()) < 25 * PARTITIONS and time.monotonic() < deadline:
        m = first.poll(0.2)
        if m is not None and not m.error() and seen.get(m.partition(), 0) < 25:
            seen[m.partition()] = seen.get(m.partition(), 0) + 1
            first.commit(message=m, asynchronous=False)
    assert sum(seen.values()) == 25 * PARTITIONS
    first.close()

    second = consumer(group_cluster, group)
    try:
        committed = second.committed(
            [TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30
        )
        assert {tp.partition: tp.offset for tp in committed} == dict.fromkeys(range(PARTITIONS), 25)
        second.subscribe([topic])
        firsts: dict[int, int] = {}
        deadline = time.monotonic() + 45
        while len(firsts) < PARTITIONS and time.monotonic() < deadline:
            m = second.poll(0.2)
            if m is not None and not m.error():
                firsts.setdefault(m.partition(), m.offset())
        assert firsts == dict.fromkeys(range(PARTITIONS), 25)  # resumed, nothing skipped
    finally:
        second.close()


def test_kafka_python_aiokafka_and_confluent_consumers_in_one_group(group_cluster):
    """Three clients' consumers in one group (all with the range assignor)."""
    from aiokafka import AIOKafkaConsumer
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor as AioRange
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.range import RangePartitionAssignor

    topic, group = "g-mixed", "mixed-group"
    create_topic(group_cluster, topic)
    produce(group_cluster, topic, 10)
    rd = consumer(group_cluster, group)
    rd.subscribe([topic])
    kp = KafkaConsumer(
        topic,
        bootstrap_servers=group_cluster.kafka_bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=500,
        partition_assignment_strategy=[RangePartitionAssignor],
    )

    async def aio_member(stop: asyncio.Event, out: dict[str, list[int]]) -> None:
        aio = AIOKafkaConsumer(
            topic,
            bootstrap_servers=group_cluster.kafka_bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=500,
            partition_assignment_strategy=[AioRange],
        )
        await aio.start()
        try:
            while not stop.is_set():
                await aio.getmany(timeout_ms=100)
                out["aio"] = sorted(tp.partition for tp in aio.assignment())
                await asyncio.sleep(0.05)
        finally:
            await aio.stop()

    async def scenario() -> dict[str, list[int]]:
        stop = asyncio.Event()
        out: dict[str, list[int]] = {"aio": []}
        task = asyncio.create_task(aio_member(stop, out))
        deadline = time.monotonic() + 60
        try:
            while time.monotonic() < deadline:
                await asyncio.to_thread(rd.poll, 0.1)
                await asyncio.to_thread(kp.poll, 100)
                out["rd"] = assigned(rd)
                out["kp"] = sorted(tp.partition for tp in kp.assignment())
                owned = out["rd"] + out["kp"] + out["aio"]
                if sorted(owned) == list(range(PARTITIONS)) and all(out.values()):
                    return dict(out)
            raise AssertionError(f"no shared assignment: {out}")
        finally:
            stop.set()
            await task

    try:
        shares = asyncio.run(scenario())
        assert sorted(len(v) for v in shares.values()) == [4, 4, 4]
    finally:
        kp.close()
        rd.close()


MEMBER_SCRIPT = """
import sys, time
from confluent_kafka import Consumer
c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
              "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
              "partition.assignment.strategy": "range", "enable.auto.commit": False})
c.subscribe([sys.argv[3]])
while True:
    c.poll(0.1)
    if c.assignment():
        print("assigned", flush=True)
"""


def test_a_killed_member_loses_its_partitions_within_the_session_timeout(group_cluster):
    topic, group = "g-killed", "killed-group"
    create_topic(group_cluster, topic)
    survivor = consumer(group_cluster, group)
    survivor.subscribe([topic])
    proc = subprocess.Popen(
        [sys.executable, "-c", MEMBER_SCRIPT, group_cluster.kafka_bootstrap, group, topic],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        poll_until([survivor], lambda: len(assigned(survivor)) == PARTITIONS // 2)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "assigned"
        os.kill(proc.pid, signal.SIGKILL)  # no LeaveGroup: only the session timeout tells
        proc.wait(10)
        killed_at = time.monotonic()
        poll_until([survivor], lambda: len(assigned(survivor)) == PARTITIONS, timeout_s=30)
        took = time.monotonic() - killed_at
        # The session timeout, then a rebalance (bounded by the survivor's rejoin).
        assert SESSION_MS / 1000 - 1 <= took <= SESSION_MS / 1000 + 10, took
    finally:
        if proc.poll() is None:
            proc.kill()
        survivor.close()


# --- errors, with raw requests --------------------------------------------------------


def coordinator_port(cluster: KafkaCluster, group: str) -> tuple[int, int]:
    """(coordinator port, another node's port)."""

    def find() -> int | None:
        with KafkaConnection(cluster.kafka_ports[1]) as conn:
            _b, r = conn.request(FindCoordinatorRequest[3](key=group, key_type=0))
        return r.node_id if r.error_code == 0 else None

    node = cluster.wait("a coordinator", find)
    other = next(i for i in cluster.kafka_ports if i != node)
    return cluster.kafka_ports[node], cluster.kafka_ports[other]


def join(conn: KafkaConnection, group: str, member_id: str = "") -> object:
    R = JoinGroupRequest
    _b, r = conn.request(
        R[5](
            group_id=group,
            session_timeout_ms=SESSION_MS,
            rebalance_timeout_ms=SESSION_MS,
            member_id=member_id,
            group_instance_id=None,
            protocol_type="consumer",
            protocols=[R.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x00")],
        )
    )
    return r


def commit(conn: KafkaConnection, group: str, generation: int, member_id: str) -> int:
    R = OffsetCommitRequest
    _b, r = conn.request(
        R[7](
            group_id=group,
            generation_id_or_member_epoch=generation,
            member_id=member_id,
            group_instance_id=None,
            topics=[
                R.OffsetCommitRequestTopic(
                    name="g-errors",
                    partitions=[
                        R.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                            partition_index=0,
                            committed_offset=5,
                            committed_leader_epoch=-1,
                            committed_metadata="",
                        )
                    ],
                )
            ],
        )
    )
    return int(r.topics[0].partitions[0].error_code)


def test_coordinator_errors_as_kafka_sends_them(group_cluster):
    group = "errors-group"
    create_topic(group_cluster, "g-errors", 1)  # a commit for an unknown topic is refused
    port, other = coordinator_port(group_cluster, group)
    with KafkaConnection(port, timeout_s=30) as conn:
        first = join(conn, group)
        assert first.error_code == 79  # MEMBER_ID_REQUIRED (JoinGroup v4+)
        member = first.member_id
        joined = join(conn, group, member)
        assert joined.error_code == 0 and joined.leader == member
        generation = joined.generation_id
        R = SyncGroupRequest
        _b, synced = conn.request(
            R[3](
                group_id=group,
                generation_id=generation,
                member_id=member,
                group_instance_id=None,
                assignments=[R.SyncGroupRequestAssignment(member_id=member, assignment=b"")],
            )
        )
        assert synced.error_code == 0
        assert commit(conn, group, generation, member) == 0
        assert commit(conn, group, generation - 1, member) == 22  # ILLEGAL_GENERATION
        assert commit(conn, group, generation, "nobody") == 25  # UNKNOWN_MEMBER_ID
        _b, hb = conn.request(
            HeartbeatRequest[3](
                group_id=group,
                generation_id=generation + 1,
                member_id=member,
                group_instance_id=None,
            )
        )
        assert hb.error_code == 22
    with KafkaConnection(other) as conn:
        assert commit(conn, group, generation, member) == 16  # NOT_COORDINATOR
        assert join(conn, group).error_code == 16


def test_the_offsets_topic_is_internal_and_refuses_produce(group_cluster):
    from kafka.protocol.metadata import MetadataRequest

    coordinator_port(group_cluster, "any-group")  # the topic exists from here on
    with KafkaConnection(group_cluster.kafka_ports[1]) as conn:
        R = MetadataRequest
        _b, md = conn.request(
            R[9](
                topics=[R.MetadataRequestTopic(name="__consumer_offsets")],
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
    t = md.topics[0]
    assert t.is_internal and len(t.partitions) == 10  # offsets.topic.num.partitions here
    assert all(len(p.replica_nodes) == 3 for p in t.partitions)
    p = Producer({"bootstrap.servers": group_cluster.kafka_bootstrap, "retries": 0})
    errors = []
    p.produce("__consumer_offsets", b"x", partition=0, on_delivery=lambda e, _m: errors.append(e))
    p.flush(30)
    assert errors and errors[0] is not None and errors[0].code() == 17  # INVALID_TOPIC_EXCEPTION


@pytest.mark.skipif(not os.path.exists("/usr/bin/kcat"), reason="kcat is not installed")
def test_kcat_balanced_consumer_reads_every_partition(group_cluster):
    topic, group = "g-kcat", "kcat-group"
    create_topic(group_cluster, topic)
    produce(group_cluster, topic, 5)
    out = subprocess.run(
        [
            "kcat",
            "-b",
            group_cluster.kafka_bootstrap,
            "-G",
            group,
            "-o",
            "beginning",
            "-e",
            "-X",
            "partition.assignment.strategy=range",
            topic,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert sorted(int(x) for x in out.stdout.split()) == list(range(5 * PARTITIONS)), out.stderr


def test_cooperative_sticky_members_keep_their_partitions(group_cluster):
    topic, group = "g-coop", "coop-group"
    create_topic(group_cluster, topic)
    members = [
        consumer(group_cluster, group, **{"partition.assignment.strategy": "cooperative-sticky"})
        for _ in range(3)
    ]
    try:
        for c in members:
            c.subscribe([topic])
        poll_until(members, lambda: covers_disjointly(members))
        before = [set(assigned(c)) for c in members[:2]]
        members.pop().close()
        poll_until(members, lambda: covers_disjointly(members))
        # Incremental: the survivors only gained partitions.
        assert all(b <= set(assigned(c)) for b, c in zip(before, members, strict=True))
    finally:
        for c in members:
            c.close()


def test_a_static_member_restarting_within_its_session_causes_no_rebalance(group_cluster):
    topic, group = "g-static", "static-group"
    create_topic(group_cluster, topic)
    revoked: list[int] = []

    def static(i: int, count: bool) -> Consumer:
        c = consumer(group_cluster, group, **{"group.instance.id": f"instance-{i}"})
        if count:
            c.subscribe([topic], on_revoke=lambda _c, parts: revoked.append(len(parts)))
        else:
            c.subscribe([topic])
        return c

    leader = static(0, count=True)  # the first member stays the group's leader
    poll_until([leader], lambda: len(assigned(leader)) == PARTITIONS)
    members = [leader, static(1, count=True), static(2, count=False)]
    try:
        poll_until(members, lambda: covers_disjointly(members))
        shares = [assigned(c) for c in members]
        revoked.clear()
        members.pop().close()  # a static member sends no LeaveGroup
        members.append(static(2, count=False))
        poll_until(members, lambda: covers_disjointly(members))
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:  # and nothing moves afterwards either
            for c in members:
                c.poll(0.05)
        assert [assigned(c) for c in members] == shares
        assert revoked == [], "the other members were rebalanced"
    finally:
        for c in members:
            c.close()


def test_a_restarted_static_leader_causes_no_rebalance(group_cluster):
    """librdkafka's JoinGroup predates KIP-814's skip_assignment (v9): a static leader
    that restarts is answered, as Kafka answers it, with the old leader id and no
    members, so it syncs its own assignment back and nobody else is revoked
    (librdkafka's 0102-static_group_rebalance restarts whichever member led)."""
    topic, group = "g-static-leader", "static-leader-group"
    create_topic(group_cluster, topic)
    events: list[tuple[int, str]] = []

    def static(i: int) -> Consumer:
        c = consumer(group_cluster, group, **{"group.instance.id": f"leader-test-{i}"})
        c.subscribe(
            [topic],
            on_assign=lambda _c, _p: events.append((i, "assign")),
            on_revoke=lambda _c, _p: events.append((i, "revoke")),
        )
        return c

    leader = static(0)  # joins alone first: the leader
    poll_until([leader], lambda: len(assigned(leader)) == PARTITIONS)
    members = [leader, static(1), static(2)]
    try:
        poll_until(members, lambda: covers_disjointly(members))
        shares = [assigned(c) for c in members]
        events.clear()
        members.pop(0).close()  # the leader; a static member sends no LeaveGroup
        members.insert(0, static(0))
        poll_until(members, lambda: covers_disjointly(members))
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            for c in members:
                c.poll(0.05)
        assert [assigned(c) for c in members] == shares
        assert [e for e in events if e[0] != 0] == [], "the other members were rebalanced"
    finally:
        for c in members:
            c.close()


def test_admin_alters_lists_and_deletes_group_offsets(group_cluster):
    from confluent_kafka import ConsumerGroupTopicPartitions

    topic, group = "g-admin", "admin-group"
    create_topic(group_cluster, topic)
    admin = AdminClient({"bootstrap.servers": group_cluster.kafka_bootstrap})
    wanted = [TopicPartition(topic, p, 10 + p) for p in range(3)]

    def alter() -> bool | None:
        # Right after __consumer_offsets is created, the coordinator's node may not
        # have its metadata yet (COORDINATOR_NOT_AVAILABLE): librdkafka's admin call
        # does not retry that itself.
        done = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, wanted)])
        errors = [tp.error for tp in done[group].result(30).topic_partitions]
        assert all(e is None or e.code() in (14, 15, 16) for e in errors), errors
        return True if not any(errors) else None

    group_cluster.wait("offsets altered", alter)
    listed = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, p) for p in range(3)])]
    )[group].result(30)
    assert {tp.partition: tp.offset for tp in listed.topic_partitions} == {0: 10, 1: 11, 2: 12}
    admin.delete_consumer_groups([group])[group].result(30)
    gone = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])]
    )[group].result(30)
    assert [tp.offset for tp in gone.topic_partitions] == [-1001]  # OFFSET_INVALID: none
    with pytest.raises(Exception, match="GROUP_ID_NOT_FOUND"):
        admin.delete_consumer_groups([group])[group].result(30)


def test_commits_for_a_topic_that_does_not_exist_get_unknown_topic_or_partition(group_cluster):
    """Kafka checks each committed partition against its metadata: a topic that does not
    exist, or a partition beyond the topic's count, is UNKNOWN_TOPIC_OR_PARTITION (3),
    while the known partitions of the same request are committed."""
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
    from kafka import KafkaAdminClient
    from kafka.structs import OffsetAndMetadata
    from kafka.structs import TopicPartition as KpTopicPartition

    topic, group = "g-unknown-commit", "unknown-commit-group"
    create_topic(group_cluster, topic, 2)
    b = group_cluster.kafka_bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    asked = [
        TopicPartition(topic, 0, 5),
        TopicPartition(topic, 7, 5),  # beyond the topic's 2 partitions
        TopicPartition("g-no-such-topic", 0, 5),
    ]

    def alter() -> dict[tuple[str, int], int] | None:
        done = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, asked)])
        try:
            result = done[group].result(30)
        except KafkaException as e:  # librdkafka raises the first partition error
            return {("*", -1): e.args[0].code()}
        codes = {
            (tp.topic, tp.partition): tp.error.code() if tp.error else 0
            for tp in result.topic_partitions
        }
        return None if any(c in (14, 15, 16) for c in codes.values()) else codes

    codes = group_cluster.wait("offsets altered", alter)
    assert codes in ({("*", -1): 3}, {(topic, 0): 0, (topic, 7): 3, ("g-no-such-topic", 0): 3})

    # kafka-python's admin: an OffsetCommit outside any generation.
    kp = KafkaAdminClient(bootstrap_servers=b)
    try:
        tp = KpTopicPartition("g-no-such-topic", 0)
        result = kp.alter_group_offsets(group, {tp: OffsetAndMetadata(3, "", -1)})
        assert result[tp].__name__ == "UnknownTopicOrPartitionError", result
    finally:
        kp.close()
    # Nothing was stored for the unknown partitions; the known one was (if it was sent).
    listed = admin.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition("g-no-such-topic", 0)])]
    )[group].result(30)
    assert [tp.offset for tp in listed.topic_partitions] == [-1001]

    # A member's commit through confluent-kafka's consumer.
    c = consumer(group_cluster, group + "-member")
    try:
        with pytest.raises(KafkaException, match="UNKNOWN_TOPIC_OR_PART"):
            c.commit(offsets=[TopicPartition("g-no-such-topic", 0, 1)], asynchronous=False)
    finally:
        c.close()
