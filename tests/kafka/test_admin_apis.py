"""Kafka's admin APIs beyond topics and groups, each exercised by unmodified clients
(kafka-python, confluent-kafka, aiokafka, kcat) against three real nodes: DeleteRecords,
DescribeLogDirs, ElectLeaders, DescribeTopicPartitions, GetTelemetrySubscriptions."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KpTopicPartition

TIMEOUT_S = 30.0


def create(
    cluster, name: str, partitions: int, per_partition: int = 0, rf: int = 3, **config: str
) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap})
    admin.create_topics([NewTopic(name, partitions, rf, config=config)])[name].result(TIMEOUT_S)
    cluster.wait(f"{name} known to every node", lambda: cluster.known_everywhere(name, partitions))
    if per_partition:
        p = Producer({"bootstrap.servers": cluster.kafka_bootstrap, "acks": "all"})
        for part in range(partitions):
            for i in range(per_partition):
                p.produce(name, b"r%d" % i, partition=part)
        assert p.flush(TIMEOUT_S) == 0


def checkpointed_start(log_dirs: list[Path], topic: str, partition: int) -> int | None:
    """The partition's entry in a node's log-start-offset-checkpoint, if any."""
    for d in log_dirs:
        f = d / "log-start-offset-checkpoint"
        if not f.exists():
            continue
        for line in f.read_text().splitlines()[2:]:
            name, part, offset = line.split()
            if (name, int(part)) == (topic, partition):
                return int(offset)
    return None


def test_delete_records_moves_the_log_start_on_every_replica(kafka_cluster):
    topic = "dr-orders"
    create(kafka_cluster, topic, 3, per_partition=100)
    b = kafka_cluster.kafka_bootstrap
    kp = KafkaAdminClient(bootstrap_servers=b)
    try:
        tp0, tp1 = KpTopicPartition(topic, 0), KpTopicPartition(topic, 1)
        result = kp.delete_records({tp0: -1, tp1: 50}, timeout_ms=10_000)
        assert result[tp0]["error_code"] == 0 and result[tp0]["low_watermark"] == 100
        assert result[tp1]["error_code"] == 0 and result[tp1]["low_watermark"] == 50
        # Kafka's errors: beyond the high watermark, a topic that does not exist.
        from kafka.errors import OffsetOutOfRangeError, UnknownTopicOrPartitionError

        with pytest.raises(OffsetOutOfRangeError):
            kp.delete_records({KpTopicPartition(topic, 2): 1000})
        with pytest.raises(UnknownTopicOrPartitionError):
            kp.delete_records({KpTopicPartition("dr-no-such-topic", 0): -1})
    finally:
        kp.close()

    # confluent-kafka's admin on the third partition.
    admin = AdminClient({"bootstrap.servers": b})
    done = admin.delete_records([TopicPartition(topic, 2, 20)])
    deleted = done[TopicPartition(topic, 2, 20)].result(TIMEOUT_S)
    assert deleted.low_watermark == 20

    # aiokafka's admin: a partition's records up to an offset (partition 2, again).
    import asyncio

    from aiokafka import TopicPartition as AioTopicPartition
    from aiokafka.admin import AIOKafkaAdminClient, RecordsToDelete

    async def aio_delete() -> dict[object, int]:
        aio = AIOKafkaAdminClient(bootstrap_servers=b)
        await aio.start()
        try:
            wanted = {AioTopicPartition(topic, 2): RecordsToDelete(30)}
            return dict(await aio.delete_records(wanted))
        finally:
            await aio.close()

    assert asyncio.run(aio_delete()) == {AioTopicPartition(topic, 2): 30}

    # A consumer from the beginning starts at the new log start offsets.
    c = Consumer({"bootstrap.servers": b, "group.id": "dr", "auto.offset.reset": "earliest"})
    try:
        assert [c.get_watermark_offsets(TopicPartition(topic, p), TIMEOUT_S) for p in range(3)] == [
            (100, 100),
            (50, 100),
            (30, 100),
        ]
        c.assign([TopicPartition(topic, p, -2) for p in range(3)])  # OFFSET_BEGINNING
        firsts: dict[int, int] = {}
        deadline = time.monotonic() + TIMEOUT_S
        while len(firsts) < 2 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                firsts.setdefault(m.partition(), m.offset())
        assert firsts == {1: 50, 2: 30}
    finally:
        c.close()

    # Every replica (leader and followers) checkpoints the moved start offsets.
    def checkpointed() -> bool | None:
        for n in kafka_cluster.nodes.values():
            got = [checkpointed_start(n.log_dirs, topic, p) for p in range(3)]
            if got != [100, 50, 30]:
                return None
        return True

    kafka_cluster.wait("every replica checkpointed the start offsets", checkpointed)


def test_delete_records_on_a_compacted_topic_is_a_policy_violation(kafka_cluster):
    topic = "dr-compacted"
    create(kafka_cluster, topic, 1, **{"cleanup.policy": "compact"})
    kp = KafkaAdminClient(bootstrap_servers=kafka_cluster.kafka_bootstrap)
    try:
        from kafka.errors import PolicyViolationError

        kp.wait_for_topics([topic])
        with pytest.raises(PolicyViolationError):
            kp.delete_records({KpTopicPartition(topic, 0): -1})
    finally:
        kp.close()


def test_describe_log_dirs_lists_each_nodes_directories_and_partitions(kafka_cluster):
    topic = "ld-sizes"
    create(kafka_cluster, topic, 2, per_partition=50)
    kp = KafkaAdminClient(bootstrap_servers=kafka_cluster.kafka_bootstrap)
    try:

        def described() -> list[dict[str, object]] | None:
            out = kp.describe_log_dirs()
            sizes = [
                p["partition_size"]
                for r in out
                for d in r["log_dirs"]
                for t in d["topics"]
                if t["name"] == topic
                for p in t["partitions"]
            ]
            # Every replica (2 partitions x 3 nodes) holds the 50 records.
            return out if len(sizes) == 6 and min(sizes) > 50 * 10 else None

        out = kafka_cluster.wait("every replica's size", described)
        assert {r["broker"] for r in out} == {1, 2, 3}
        for r in out:
            n = kafka_cluster.nodes[r["broker"]]
            dirs = {d["log_dir"]: d for d in r["log_dirs"]}
            assert set(dirs) == {str(p.resolve()) for p in n.log_dirs}
            for d in dirs.values():
                assert d["error_code"] == 0
                assert d["total_bytes"] > 0 and 0 <= d["usable_bytes"] <= d["total_bytes"]
                for t in d["topics"]:
                    for p in t["partitions"]:
                        assert p["offset_lag"] == 0 and not p["is_future_key"]
        # One topic's partitions only.
        only = kp.describe_log_dirs(topic_partitions={topic: [1]})
        named = {
            (t["name"], p["partition_index"])
            for r in only
            for d in r["log_dirs"]
            for t in d["topics"]
            for p in t["partitions"]
        }
        assert named == {(topic, 1)}
    finally:
        kp.close()


def test_elect_leaders_moves_leadership_to_the_preferred_replica(kafka_cluster):
    """A reassignment that only reorders the replicas leaves the leader where it is
    (Kafka keeps a leader that is still a replica); a preferred election then moves it
    to the new first replica. kafka-python and confluent-kafka each elect one."""
    from confluent_kafka import ElectionType
    from kafka.errors import ElectionNotNeededError

    topic = "el-preferred"
    create(kafka_cluster, topic, 2)
    b = kafka_cluster.kafka_bootstrap
    kp = KafkaAdminClient(bootstrap_servers=b)
    admin = AdminClient({"bootstrap.servers": b})
    try:
        kp.wait_for_topics([topic])
        # On a settled topic nothing needs electing: 84 per partition (kafka-python's
        # own integration test asks this).
        response = kp.elect_leaders(0, {topic: [0, 1]}, raise_errors=False)
        [(name, parts)] = [(r[0], r[1]) for r in response.replica_election_results]
        assert name == topic
        assert sorted((p[0], p[1]) for p in parts) == [
            (0, ElectionNotNeededError.errno),
            (1, ElectionNotNeededError.errno),
        ]

        def replicas(p: int) -> tuple[int, list[int]] | None:
            t = kp.describe_topics([topic])[0]
            for part in t["partitions"]:
                if part["partition_index"] == p:
                    return part["leader_id"], part["replica_nodes"]
            return None

        moved = {}
        for p in (0, 1):
            leader, order = replicas(p)  # type: ignore[misc]
            assert order[0] == leader
            target = [x for x in order if x != leader] + [leader]  # the leader last
            kp.alter_partition_reassignments({KpTopicPartition(topic, p): target})
            kafka_cluster.wait(
                f"{topic}-{p} reordered",
                lambda p=p, t=target, lead=leader: replicas(p) == (lead, t) or None,
            )
            moved[p] = target[0]

        response = kp.elect_leaders(0, {topic: [0]})  # raises on an error
        assert [(p[0], p[1]) for p in response.replica_election_results[0][1]] == [(0, 0)]
        done = admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 1)])
        assert done.result(TIMEOUT_S) == {TopicPartition(topic, 1): None}
        for p in (0, 1):
            kafka_cluster.wait(
                f"{topic}-{p} led by its preferred replica",
                lambda p=p: (replicas(p) or (None,))[0] == moved[p] or None,
            )
        # Unclean: every partition has a live leader, so nothing is needed.
        done = admin.elect_leaders(ElectionType.UNCLEAN, [TopicPartition(topic, 0)])
        error = done.result(TIMEOUT_S)[TopicPartition(topic, 0)]
        assert error is not None and error.name() == "ELECTION_NOT_NEEDED", error
    finally:
        kp.close()


def test_a_throttled_reassignment_is_listed_and_cancelled(kafka_cluster):
    """AlterPartitionReassignments/ListPartitionReassignments (the controller's KIP-455
    reassignment): a move held back by a replication throttle is listed with its
    adding and removing replicas, and a cancel (null replicas) ends it where it began."""
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    topic = "ra-throttled"
    create(
        kafka_cluster,
        topic,
        1,
        rf=1,
        **{
            "leader.replication.throttled.replicas": "*",
            "follower.replication.throttled.replicas": "*",
        },
    )
    b = kafka_cluster.kafka_bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    kp = KafkaAdminClient(bootstrap_servers=b)
    tp = KpTopicPartition(topic, 0)

    def throttle(op: AlterConfigOpType) -> None:
        entries = [
            ConfigEntry(name, "200000", incremental_operation=op)
            for name in ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
        ]
        for n in (1, 2, 3):  # librdkafka: one BROKER resource a call
            resource = ConfigResource(ResourceType.BROKER, str(n), incremental_configs=entries)
            admin.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)

    try:
        kp.wait_for_topics([topic])
        p = Producer({"bootstrap.servers": b, "acks": "all", "linger.ms": 20})
        for i in range(4000):
            p.produce(topic, b"%06d" % i + b"x" * 1000, partition=0)
        assert p.flush(TIMEOUT_S) == 0
        [was] = kp.describe_topics([topic])[0]["partitions"][0]["replica_nodes"]
        target = [n for n in (1, 2, 3) if n != was][0]
        throttle(AlterConfigOpType.SET)
        kp.alter_partition_reassignments({tp: [target]})
        ongoing = kafka_cluster.wait(
            "the reassignment listed", lambda: kp.list_partition_reassignments() or None
        )
        assert ongoing == {
            tp: {"replicas": [target, was], "adding_replicas": [target], "removing_replicas": [was]}
        } or ongoing == {
            tp: {"replicas": [was, target], "adding_replicas": [target], "removing_replicas": [was]}
        }, ongoing
        assert kp.list_partition_reassignments({topic: [0]}) == ongoing
        kp.alter_partition_reassignments({tp: None})  # cancel
        assert kp.list_partition_reassignments() == {}
        kafka_cluster.wait(
            "the partition back on its replica",
            lambda: (
                kp.describe_topics([topic])[0]["partitions"][0]["replica_nodes"] == [was] or None
            ),
        )
    finally:
        throttle(AlterConfigOpType.DELETE)
        kp.close()


def test_describe_topic_partitions_pages_with_a_cursor(kafka_cluster):
    """KIP-966's DescribeTopicPartitions through kafka-python: topics in name order,
    pages of ResponsePartitionLimit partitions, and the NextCursor to go on from."""
    first, second = "dtp-a", "dtp-b"
    create(kafka_cluster, first, 5)
    create(kafka_cluster, second, 2)
    kp = KafkaAdminClient(bootstrap_servers=kafka_cluster.kafka_bootstrap)
    try:
        whole = kp.describe_topic_partitions([second, first, "dtp-missing"])
        assert whole["next_cursor"] is None
        by_name = {t["name"]: t for t in whole["topics"]}
        assert [t["name"] for t in whole["topics"]] == [first, second, "dtp-missing"]
        assert by_name["dtp-missing"]["error_code"] == 3  # UNKNOWN_TOPIC_OR_PARTITION
        for name, count in ((first, 5), (second, 2)):
            t = by_name[name]
            assert t["error_code"] == 0 and not t["is_internal"]
            assert [p["partition_index"] for p in t["partitions"]] == list(range(count))
            for p in t["partitions"]:
                assert p["error_code"] == 0 and p["leader_id"] in p["isr_nodes"]
                assert sorted(p["replica_nodes"]) == [1, 2, 3]
                assert not p["eligible_leader_replicas"] and not p["offline_replicas"]

        pages: list[list[tuple[str, int]]] = []
        cursor = None
        for _ in range(5):
            page = kp.describe_topic_partitions(
                [first, second], response_partition_limit=3, cursor=cursor
            )
            pages.append(
                [(t["name"], p["partition_index"]) for t in page["topics"] for p in t["partitions"]]
            )
            cursor = page["next_cursor"]
            if cursor is None:
                break
        assert pages == [
            [(first, 0), (first, 1), (first, 2)],
            [(first, 3), (first, 4), (second, 0)],
            [(second, 1)],
        ]
        # No topics named: every topic.
        every = {t["name"] for t in kp.describe_topic_partitions([])["topics"]}
        assert {first, second} <= every
    finally:
        kp.close()


def test_telemetry_is_answered_as_by_a_broker_without_a_metrics_plugin(kafka_cluster):
    """KIP-714: like a Kafka broker with no client-metrics receiver, GetTelemetrySubscriptions
    is not listed in ApiVersions (kafka-python's and librdkafka's view), and a client that
    asks anyway gets an instance id, no requested metrics and the 5-minute interval; asking
    again within it is THROTTLING_QUOTA_EXCEEDED."""
    import uuid

    from seglog.harness.kafka_cluster import KafkaConnection
    from seglog.node.kafka.schemas.messages import GetTelemetrySubscriptionsRequest as R

    kp = KafkaAdminClient(bootstrap_servers=kafka_cluster.kafka_bootstrap)
    try:
        listed = kp.api_versions()
        # kafka-python: {api_key: (min, max)} of the node it asked.
        assert 71 not in listed and 72 not in listed
        assert listed[75] == (0, 0) and listed[21] == (0, 2)
    finally:
        kp.close()
    # librdkafka asks for no subscription (it would only if the API were listed) and
    # produces as usual with its default enable.metrics.push=true.
    p = Producer({"bootstrap.servers": kafka_cluster.kafka_bootstrap, "enable.metrics.push": True})
    p.produce("telemetry-check", b"x")
    assert p.flush(TIMEOUT_S) == 0
    with KafkaConnection(kafka_cluster.kafka_ports[1]) as conn:
        _raw, first = conn.request(R[0](client_instance_id=uuid.UUID(int=0)))
        assert first.error_code == 0 and first.client_instance_id != uuid.UUID(int=0)
        assert first.requested_metrics == [] and first.push_interval_ms == 300_000
        assert first.accepted_compression_types == [4, 3, 1, 2]
        assert first.telemetry_max_bytes == 1024 * 1024 and first.delta_temporality
        _raw, again = conn.request(R[0](client_instance_id=first.client_instance_id))
        assert again.error_code == 89  # THROTTLING_QUOTA_EXCEEDED
        _raw, other = conn.request(R[0](client_instance_id=uuid.uuid4()))
        assert other.error_code == 0


def test_topics_and_partitions_created_with_explicit_replica_assignments(kafka_cluster):
    """CreateTopics and CreatePartitions with a manual assignment, as Kafka takes them:
    the replicas in the given order (the first leads), checked for unregistered and
    repeated brokers and a replication factor that differs between partitions."""
    from confluent_kafka.admin import NewPartitions
    from kafka.admin import NewPartitions as KpNewPartitions
    from kafka.admin import NewTopic as KpNewTopic
    from kafka.errors import InvalidReplicationAssignmentError

    b = kafka_cluster.kafka_bootstrap
    kp = KafkaAdminClient(bootstrap_servers=b)
    admin = AdminClient({"bootstrap.servers": b})

    def placement(topic: str) -> list[tuple[int, list[int]]] | None:
        try:
            t = kp.describe_topics([topic])[0]
        except Exception:  # noqa: BLE001 - not known to this client yet
            return None
        if t["error_code"]:
            return None
        parts = sorted(t["partitions"], key=lambda p: p["partition_index"])
        return [(p["leader_id"], p["replica_nodes"]) for p in parts]

    try:
        # kafka-python: three partitions, each led by a different node.
        wanted = {0: [1, 2], 1: [2, 3], 2: [3, 1]}
        r = kp.create_topics([KpNewTopic("ma-kp", replica_assignments=wanted)])
        assert r["topics"][0]["error_code"] == 0, r
        expected = [(1, [1, 2]), (2, [2, 3]), (3, [3, 1])]
        kafka_cluster.wait("ma-kp placed", lambda: placement("ma-kp") == expected or None)
        # confluent-kafka: a single replica on node 2.
        admin.create_topics([NewTopic("ma-ck", 2, replica_assignment=[[2], [2]])])["ma-ck"].result(
            TIMEOUT_S
        )
        kafka_cluster.wait(
            "ma-ck placed", lambda: placement("ma-ck") == [(2, [2]), (2, [2])] or None
        )
        # CreatePartitions: kafka-python places partition 3, confluent-kafka 4 and 5.
        kp.create_partitions({"ma-kp": KpNewPartitions(4, [[2, 1]])})
        f = admin.create_partitions(
            [NewPartitions("ma-kp", 6, replica_assignment=[[3, 2], [1, 3]])]
        )
        f["ma-kp"].result(TIMEOUT_S)
        expected += [(2, [2, 1]), (3, [3, 2]), (1, [1, 3])]
        kafka_cluster.wait("ma-kp grown", lambda: placement("ma-kp") == expected or None)
        # The records go where they were placed (and only there).
        p = Producer({"bootstrap.servers": b, "acks": "all"})
        for part in range(6):
            p.produce("ma-kp", b"x", partition=part)
        assert p.flush(TIMEOUT_S) == 0

        # Kafka's refusals.
        bad = {
            "ma-unregistered": {0: [1, 9]},
            "ma-twice": {0: [2, 2]},
            "ma-uneven": {0: [1, 2], 1: [3]},
            "ma-gap": {0: [1], 2: [2]},
        }
        r = kp.create_topics(
            [KpNewTopic(name, replica_assignments=a) for name, a in bad.items()],
            raise_errors=False,
        )
        codes = {t["name"]: t["error_code"] for t in r["topics"]}
        assert codes == dict.fromkeys(bad, InvalidReplicationAssignmentError.errno), r
        f = admin.create_partitions([NewPartitions("ma-ck", 3, replica_assignment=[[1, 2]])])
        with pytest.raises(Exception, match="INVALID_REPLICA_ASSIGNMENT"):
            f["ma-ck"].result(TIMEOUT_S)
        assert placement("ma-ck") == [(2, [2]), (2, [2])]
    finally:
        kp.close()


def test_describe_configs_answers_every_config_of_every_resource(kafka_cluster):
    """DescribeConfigs as Kafka answers it: every broker config of the node asked
    (advertised.listeners included, read-only, with its type), every topic config
    (retention.bytes: DEFAULT_CONFIG, LONG, -1), several resources in one request, the
    KIP-226 synonyms down to the broker default, and documentation."""
    from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType
    from kafka.admin import ConfigResource as KpConfigResource
    from kafka.admin import ConfigResourceType

    topic = "dc-configs"
    create(kafka_cluster, topic, 1, **{"retention.ms": "3600000"})
    b = kafka_cluster.kafka_bootstrap
    kp = KafkaAdminClient(bootstrap_servers=b)
    try:
        kp.wait_for_topics([topic])
        node = kp._client.least_loaded_node()  # kafka-python's own tests ask this one
        broker = KpConfigResource(ConfigResourceType.BROKER, node)
        configs = kp.describe_configs([broker], config_filter="all")
        mine = configs["broker"][str(node)]
        listeners = mine["advertised.listeners"]
        assert listeners["config_type"] in ("LIST", "STRING") and listeners["read_only"] is True
        assert listeners["is_sensitive"] is False and listeners["synonyms"] == []
        assert "value" in listeners
        assert mine["num.partitions"]["value"] == "1"  # the test nodes' server.properties
        assert mine["num.partitions"]["config_source"] == "STATIC_BROKER_CONFIG"
        assert mine["log.retention.hours"]["value"] == "168"
        assert mine["log.retention.hours"]["config_source"] == "DEFAULT_CONFIG"
        assert mine["log.retention.hours"]["read_only"] is False  # dynamic in seglog too

        named = KpConfigResource(ConfigResourceType.TOPIC, topic)
        configs = kp.describe_configs([named], config_filter="all")
        retention = configs["topic"][topic]["retention.bytes"]
        assert retention["config_source"] == "DEFAULT_CONFIG" and retention["value"] == "-1"
        assert retention["config_type"] == "LONG" and retention["read_only"] is False
        assert retention["is_sensitive"] is False and retention["synonyms"] == []

        both = kp.describe_configs([named, broker], config_filter="all")
        assert len(both["topic"][topic]) > 1 and len(both["broker"][str(node)]) > 1
        # Another broker's id asked of this node: Kafka's INVALID_REQUEST.
        other = next(n for n in (1, 2, 3) if n != node)
        from kafka.protocol.admin import DescribeConfigsRequest as D

        from seglog.harness.kafka_cluster import KafkaConnection

        with KafkaConnection(kafka_cluster.kafka_ports[node]) as conn:
            request = D[4](
                resources=[
                    D.DescribeConfigsResource(
                        resource_type=4, resource_name=str(other), configuration_keys=None
                    )
                ],
                include_synonyms=True,
                include_documentation=True,
            )
            assert conn.request(request)[1].results[0].error_code == 42  # INVALID_REQUEST
    finally:
        kp.close()

    # confluent-kafka: two topics in one request, with synonyms.
    create(kafka_cluster, "dc-second", 1)
    admin = AdminClient({"bootstrap.servers": b})
    resources = [ConfigResource(ResourceType.TOPIC, t) for t in (topic, "dc-second")]
    done = admin.describe_configs(resources)  # librdkafka always asks for synonyms
    got = {r.name: f.result(TIMEOUT_S) for r, f in done.items()}
    assert set(got) == {topic, "dc-second"} and all(len(c) > 20 for c in got.values())
    retention_ms = got[topic]["retention.ms"]
    assert retention_ms.value == "3600000"
    assert retention_ms.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    # The override, then the broker default it hides (log.retention.hours=168).
    assert [(s.name, s.value, s.source) for s in retention_ms.synonyms.values()] == [
        ("retention.ms", "3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
        ("log.retention.hours", "168", ConfigSource.DEFAULT_CONFIG.value),
    ]
    assert got["dc-second"]["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value


def test_kafka_python_sees_a_kafka_4_0_broker_and_its_list_offsets_specs(kafka_cluster):
    """Our ApiVersions ranges are Kafka 4.0's where seglog behaves as 4.0 does
    (docs/compatibility.md): kafka-python infers 4.0, and ListOffsets v10's specs answer
    as on a broker without tiered storage (EARLIEST_LOCAL is the log start, nothing is
    LATEST_TIERED)."""
    from kafka.admin import OffsetSpec

    topic = "lo-specs"
    create(kafka_cluster, topic, 1, per_partition=10)
    kp = KafkaAdminClient(bootstrap_servers=kafka_cluster.kafka_bootstrap)
    try:
        kp.wait_for_topics([topic])
        node = kp._client.least_loaded_node()
        assert kp.get_broker_version_data(node).broker_version[:2] == (4, 0)
        tp = KpTopicPartition(topic, 0)
        kp.delete_records({tp: 4})
        got = {
            spec: kp.list_partition_offsets({tp: spec})[tp].offset
            for spec in (
                OffsetSpec.EARLIEST,
                OffsetSpec.EARLIEST_LOCAL,
                OffsetSpec.LATEST,
                OffsetSpec.LATEST_TIERED,
            )
        }
        assert got == {
            OffsetSpec.EARLIEST: 4,
            OffsetSpec.EARLIEST_LOCAL: 4,
            OffsetSpec.LATEST: 10,
            OffsetSpec.LATEST_TIERED: -1,
        }
    finally:
        kp.close()


def test_describe_quorum_shows_the_metadata_quorum(kafka_cluster):
    """DescribeQuorum through kafka-python's admin (its own integration test's checks):
    the __cluster_metadata partition, its leader and epoch, the high watermark and the
    three voters with their log ends, as the quorum's leader sees them."""
    kp = KafkaAdminClient(bootstrap_servers=kafka_cluster.kafka_bootstrap)
    try:
        result = kp.describe_metadata_quorum()
    finally:
        kp.close()
    assert "error_code" not in result and "error_message" not in result
    [t] = result["topics"]
    assert t["topic_name"] == "__cluster_metadata"
    [p] = t["partitions"]
    assert p["partition_index"] == 0 and p["error"] is None
    assert p["leader_id"] in (1, 2, 3) and p["leader_epoch"] >= 1
    assert p["high_watermark"] > 0
    voters = {v["replica_id"]: v for v in p["current_voters"]}
    assert set(voters) == {1, 2, 3}
    assert voters[p["leader_id"]]["log_end_offset"] >= p["high_watermark"]
    assert p["observers"] == []


def test_alter_configs_replaces_a_topics_overrides(kafka_cluster):
    """AlterConfigs (the non-incremental API librdkafka's alter_configs sends): the
    topic's overrides become exactly the ones given; the others go back to defaults."""
    from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

    topic = "ac-replace"
    create(kafka_cluster, topic, 1, **{"retention.ms": "3600000", "segment.bytes": "1048576"})
    admin = AdminClient({"bootstrap.servers": kafka_cluster.kafka_bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic, set_config={"retention.bytes": "123456"})
    admin.alter_configs([resource])[resource].result(TIMEOUT_S)

    def described() -> dict[str, tuple[str, int]] | None:
        plain = ConfigResource(ResourceType.TOPIC, topic)
        got = admin.describe_configs([plain])[plain].result(TIMEOUT_S)
        view = {n: (got[n].value, got[n].source) for n in ("retention.bytes", "retention.ms")}
        return view if view["retention.bytes"][0] == "123456" else None

    view = kafka_cluster.wait("the overrides replaced", described)
    assert view == {
        "retention.bytes": ("123456", ConfigSource.DYNAMIC_TOPIC_CONFIG.value),
        "retention.ms": ("604800000", ConfigSource.DEFAULT_CONFIG.value),  # deleted
    }
    bad = ConfigResource(ResourceType.TOPIC, "ac-missing", set_config={"retention.ms": "1"})
    with pytest.raises(Exception, match="UNKNOWN_TOPIC_OR_PART"):
        admin.alter_configs([bad])[bad].result(TIMEOUT_S)


def test_incremental_alter_configs_appends_to_and_subtracts_from_a_list(kafka_cluster):
    """IncrementalAlterConfigs' APPEND and SUBTRACT on a LIST config (cleanup.policy), as
    Kafka: from the topic's value (else the default), each item once; on a config that
    is not a list they are INVALID_CONFIG."""
    from confluent_kafka.admin import (
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    topic = "iac-lists"
    create(kafka_cluster, topic, 1)
    admin = AdminClient({"bootstrap.servers": kafka_cluster.kafka_bootstrap})

    def alter(name: str, value: str, op: AlterConfigOpType) -> None:
        entry = ConfigEntry(name, value, incremental_operation=op)
        resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
        admin.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)

    def policy() -> str:
        plain = ConfigResource(ResourceType.TOPIC, topic)
        return str(admin.describe_configs([plain])[plain].result(TIMEOUT_S)["cleanup.policy"].value)

    alter("cleanup.policy", "compact", AlterConfigOpType.APPEND)  # onto the default, delete
    kafka_cluster.wait("compact appended", lambda: policy() == "delete,compact" or None)
    alter("cleanup.policy", "compact", AlterConfigOpType.APPEND)  # already there: once
    alter("cleanup.policy", "delete", AlterConfigOpType.SUBTRACT)
    kafka_cluster.wait("delete subtracted", lambda: policy() == "compact" or None)
    with pytest.raises(Exception, match="INVALID_CONFIG"):
        alter("retention.ms", "5", AlterConfigOpType.APPEND)


def test_describe_topics_answers_the_topics_authorized_operations(kafka_cluster):
    """KIP-430 for topics (Metadata v8+'s TopicAuthorizedOperations), as librdkafka's
    0081 DescribeTopics asks: without an authorizer every topic operation is allowed."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation

    topic = "dt-operations"
    create(kafka_cluster, topic, 1)
    admin = AdminClient({"bootstrap.servers": kafka_cluster.kafka_bootstrap})
    done = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True)
    described = done[topic].result(TIMEOUT_S)
    assert set(described.authorized_operations) == {
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    }
