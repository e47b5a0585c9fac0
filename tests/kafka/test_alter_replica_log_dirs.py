"""AlterReplicaLogDirs against three real nodes (each has two log directories):
kafka-python's admin moves a leader's replica to its node's other directory while a
producer keeps writing; every record is read back from the moved replica, the files
left the old directory, and Kafka's errors answer a directory that is not one of
`log.dirs` and a partition the node does not host."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, TopicPartitionReplica
from kafka.errors import KafkaStorageError, LogDirNotFoundError, NoError, ReplicaNotAvailableError

TIMEOUT_S = 30.0


def where(kp: KafkaAdminClient, topic: str, broker: int) -> dict[str, list[tuple[int, bool]]]:
    """The broker's log dirs holding the topic: dir -> [(partition, is_future)]."""
    out: dict[str, list[tuple[int, bool]]] = {}
    for answer in kp.describe_log_dirs({topic: [0]}, brokers=[broker]):
        for result in answer["log_dirs"]:
            for t in result["topics"]:
                if t["name"] == topic:
                    out.setdefault(result["log_dir"], []).extend(
                        (p["partition_index"], p["is_future_key"]) for p in t["partitions"]
                    )
    return out


def test_a_replica_moves_to_another_log_dir_while_it_is_written(kafka_cluster):
    topic, broker = "moving-orders", 1
    admin = AdminClient({"bootstrap.servers": kafka_cluster.kafka_bootstrap})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[broker]])])[topic].result(
        TIMEOUT_S
    )
    kafka_cluster.wait("topic known", lambda: kafka_cluster.known_everywhere(topic, 1))
    p = Producer({"bootstrap.servers": kafka_cluster.kafka_bootstrap, "linger.ms": 5})
    sent = 0

    def produce(n: int) -> None:
        nonlocal sent
        for _ in range(n):
            p.produce(topic, b"v%d" % sent, key=b"k%d" % (sent % 7))
            sent += 1
        assert p.flush(TIMEOUT_S) == 0

    produce(20_000)
    kp = KafkaAdminClient(bootstrap_servers=kafka_cluster.kafka_bootstrap)
    try:
        before = where(kp, topic, broker)
        (source,) = before
        node_dirs = [str(d.resolve()) for d in kafka_cluster.nodes[broker].log_dirs]
        (target,) = [d for d in node_dirs if d != source]
        moved = kp.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, broker): target})
        assert moved == {TopicPartitionReplica(topic, 0, broker): NoError}
        produce(5_000)  # while it moves (or after): the replica keeps taking writes
        kafka_cluster.wait(
            "the replica in its new dir",
            lambda: where(kp, topic, broker) == {target: [(0, False)]} or None,
        )
        produce(5_000)

        # Kafka's errors.
        wrong = kp.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, broker): "/nowhere"})
        assert wrong == {TopicPartitionReplica(topic, 0, broker): LogDirNotFoundError}
        other = next(b for b in (2, 3) if b != broker)
        elsewhere = kp.alter_replica_log_dirs(
            {
                TopicPartitionReplica(topic, 0, other): str(
                    kafka_cluster.nodes[other].log_dirs[0].resolve()
                )
            }
        )
        assert elsewhere == {TopicPartitionReplica(topic, 0, other): ReplicaNotAvailableError}
        assert KafkaStorageError.errno == 56  # the error an offline directory answers
    finally:
        kp.close()

    # Every record, in order, from the moved replica.
    c = Consumer(
        {
            "bootstrap.servers": kafka_cluster.kafka_bootstrap,
            "group.id": "moving-readers",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < sent and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value())
    c.close()
    assert got == [b"v%d" % i for i in range(sent)]

    # The files left the old directory; the new one holds the segments.
    source_dir = next(d for d in kafka_cluster.nodes[broker].log_dirs if str(d.resolve()) == source)
    target_dir = next(d for d in kafka_cluster.nodes[broker].log_dirs if str(d.resolve()) == target)
    kafka_cluster.wait(
        "the old copy gone", lambda: not (source_dir / f"{topic}-0").exists() or None
    )
    assert list((target_dir / f"{topic}-0").glob("*.log"))
    assert not list(target_dir.glob("*-future"))
