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


def create(cluster, name: str, partitions: int, per_partition: int = 0, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap})
    admin.create_topics([NewTopic(name, partitions, 3, config=config)])[name].result(TIMEOUT_S)
    cluster.wait(f"{name} has leaders", lambda: cluster.leader_of(name, partitions - 1))
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
    done = admin.delete_records([TopicPartition(topic, 2, 30)])
    deleted = done[TopicPartition(topic, 2, 30)].result(TIMEOUT_S)
    assert deleted.low_watermark == 30

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

        with pytest.raises(PolicyViolationError):
            kp.delete_records({KpTopicPartition(topic, 0): -1})
    finally:
        kp.close()
