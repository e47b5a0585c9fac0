"""Unmodified Kafka clients against three real nodes: confluent-kafka (librdkafka
2.16), kafka-python 3 and aiokafka; produce, consume and admin requests."""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict

import pytest

TIMEOUT_S = 30.0


def _wait(what: str, probe, timeout_s: float = TIMEOUT_S):  # noqa: ANN202
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value is not None:
            return value
        assert time.monotonic() < deadline, f"timed out: {what}"
        time.sleep(0.1)


def test_confluent_kafka_idempotent_producer_and_assigned_consumer(kafka_cluster):
    ck = pytest.importorskip("confluent_kafka")
    from confluent_kafka.admin import AdminClient, NewTopic

    b = kafka_cluster.kafka_bootstrap
    admin = AdminClient({"bootstrap.servers": b})
    futures = admin.create_topics(
        [NewTopic("ck-orders", 3, 3, config={"min.insync.replicas": "2"})]
    )
    futures["ck-orders"].result(TIMEOUT_S)
    producer = ck.Producer(
        {"bootstrap.servers": b, "enable.idempotence": True, "acks": "all", "linger.ms": 5}
    )
    delivered: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    errors = []

    def on_delivery(err, msg):  # noqa: ANN202
        if err is not None:
            errors.append(err)
        else:
            delivered[msg.partition()].append((msg.offset(), msg.value()))

    for i in range(3000):
        producer.produce(
            "ck-orders", value=b"m%06d" % i, key=b"k%d" % (i % 11), on_delivery=on_delivery
        )
        producer.poll(0)
    assert producer.flush(TIMEOUT_S) == 0
    assert not errors, errors[:3]
    assert sum(len(v) for v in delivered.values()) == 3000
    assert len(delivered) == 3  # the keys spread over every partition

    consumer = ck.Consumer(
        {"bootstrap.servers": b, "group.id": "not-used", "enable.auto.commit": False}
    )
    consumer.assign([ck.TopicPartition("ck-orders", p, 0) for p in range(3)])
    got: dict[int, list[tuple[int, bytes]]] = defaultdict(list)
    deadline = time.monotonic() + TIMEOUT_S
    while sum(len(v) for v in got.values()) < 3000 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None or msg.error():
            continue
        got[msg.partition()].append((msg.offset(), msg.value()))
    consumer.close()
    for p in range(3):
        assert got[p] == sorted(delivered[p]), f"partition {p} differs"


def _retention_on(port: int, topic: str) -> str | None:
    """retention.ms of `topic` as the Kafka listener on `port` describes it, or None
    while that node answers with an error."""
    from kafka.protocol.admin import DescribeConfigsRequest as R

    from seglog.harness.kafka_cluster import KafkaConnection

    request = R[1](
        resources=[
            R.DescribeConfigsResource(
                resource_type=2, resource_name=topic, configuration_keys=["retention.ms"]
            )
        ],
        include_synonyms=False,
    )
    with KafkaConnection(port) as conn:
        _, response = conn.request(request)
    (result,) = response.results
    if result.error_code:
        return None
    values = [c.value for c in result.configs if c.name == "retention.ms"]
    return values[0] if values else None


def test_kafka_python_admin_producer_consumer(kafka_cluster):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import ConfigResource, ConfigResourceType, NewTopic

    b = kafka_cluster.kafka_bootstrap.split(",")
    admin = KafkaAdminClient(bootstrap_servers=b, request_timeout_ms=10_000)
    try:
        admin.create_topics(
            [NewTopic("kp-events", 2, 3, topic_configs={"retention.ms": "3600000"})]
        )

        def retention():  # noqa: ANN202 - brokers learn the new topic asynchronously
            result = admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, "kp-events", ["retention.ms"])]
            )
            entry = result["topic"].get("kp-events", {}).get("retention.ms")
            return entry["value"] if entry else None

        assert _wait("retention.ms described", retention) == "3600000"
        # kafka-python 3.0.12 checks an alter against a describe sent to any node; a
        # node that has not learned the topic yet answers UNKNOWN_TOPIC_OR_PARTITION
        # with no configs, so wait until every node describes it (as Kafka, brokers
        # learn a new topic asynchronously).
        for port in kafka_cluster.kafka_ports.values():
            _wait(
                f"node on {port} describes retention.ms",
                lambda port=port: _retention_on(port, "kp-events"),
            )
        admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "kp-events", {"retention.ms": "7200000"})],
            incremental=True,
        )
        _wait("retention.ms altered", lambda: True if retention() == "7200000" else None)

        producer = KafkaProducer(
            bootstrap_servers=b, acks="all", enable_idempotence=True, compression_type="gzip"
        )
        futures = [producer.send("kp-events", b"e%05d" % i, partition=i % 2) for i in range(500)]
        producer.flush(TIMEOUT_S)
        acked = [f.get(TIMEOUT_S) for f in futures]
        producer.close()
        assert sorted(m.offset for m in acked if m.partition == 0) == list(range(250))

        consumer = KafkaConsumer(bootstrap_servers=b, consumer_timeout_ms=5000)
        consumer.assign([TopicPartition("kp-events", p) for p in range(2)])
        consumer.seek_to_beginning()
        values = sorted(m.value for m in consumer)
        consumer.close()
        assert values == sorted(b"e%05d" % i for i in range(500))

        admin.delete_topics(["kp-events"])
        _wait(
            "topic deleted",
            lambda: True if "kp-events" not in admin.list_topics() else None,
        )
    finally:
        admin.close()


def test_aiokafka_producer_and_consumer(kafka_cluster):
    aiokafka = pytest.importorskip("aiokafka")
    from aiokafka.structs import TopicPartition

    b = kafka_cluster.kafka_bootstrap

    async def run() -> list[bytes]:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=b, acks="all")
        await producer.start()
        try:
            for i in range(200):
                await producer.send("aio-events", b"a%04d" % i, partition=0)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(bootstrap_servers=b, auto_offset_reset="earliest")
        await consumer.start()
        got: list[bytes] = []
        try:
            tp = TopicPartition("aio-events", 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            deadline = time.monotonic() + TIMEOUT_S
            while len(got) < 200 and time.monotonic() < deadline:
                batch = await consumer.getmany(timeout_ms=500)
                for records in batch.values():
                    got.extend(r.value for r in records)
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == [b"a%04d" % i for i in range(200)]


def test_kafka_python_create_partitions_grows_a_topic_that_then_serves(kafka_cluster):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewPartitions, NewTopic
    from kafka.errors import InvalidPartitionsError

    b = kafka_cluster.kafka_bootstrap.split(",")
    admin = KafkaAdminClient(bootstrap_servers=b, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic("kp-grow", 2, 3)])
        admin.create_partitions({"kp-grow": NewPartitions(total_count=5)})
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions({"kp-grow": NewPartitions(total_count=3)})  # only grows

        def five():  # noqa: ANN202 - brokers learn the new partitions asynchronously
            parts = admin.describe_topics(["kp-grow"])[0]["partitions"]
            return len(parts) if len(parts) == 5 else None

        assert _wait("five partitions described", five) == 5
        producer = KafkaProducer(bootstrap_servers=b, acks="all")
        acked = [producer.send("kp-grow", b"p%d" % p, partition=p) for p in range(5)]
        producer.flush(TIMEOUT_S)
        assert sorted(f.get(TIMEOUT_S).partition for f in acked) == list(range(5))
        producer.close()
        consumer = KafkaConsumer(bootstrap_servers=b, consumer_timeout_ms=5000)
        consumer.assign([TopicPartition("kp-grow", 4)])
        consumer.seek_to_beginning()
        assert [m.value for m in consumer] == [b"p4"]
        consumer.close()
    finally:
        admin.close()


def test_confluent_kafka_learns_which_records_a_compacted_topic_refused(kafka_cluster):
    """KIP-467: a batch with records without a key, sent to a compacted topic, is
    refused INVALID_RECORD, and the Produce answer (v8+) names the keyless records, so
    librdkafka fails those with INVALID_RECORD and the others of the batch with
    _INVALID_DIFFERENT_RECORD (librdkafka's 0011_produce_batch checks the same)."""
    from confluent_kafka import KafkaError, Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "kip467-compacted"
    admin = AdminClient({"bootstrap.servers": kafka_cluster.kafka_bootstrap})
    new = NewTopic(topic, 1, 3, config={"cleanup.policy": "compact"})
    admin.create_topics([new])[topic].result(TIMEOUT_S)
    _wait("the topic on every node", lambda: kafka_cluster.known_everywhere(topic, 1))
    producer = Producer(
        {"bootstrap.servers": kafka_cluster.kafka_bootstrap, "linger.ms": 500, "acks": "all"}
    )
    errors: dict[int, int] = {}

    def report(err, msg) -> None:
        errors[int(msg.value())] = err.code() if err is not None else 0

    for i in range(20):  # one batch: every fifth record has no key
        key = None if i % 5 == 0 else b"k%d" % i
        producer.produce(topic, b"%d" % i, key=key, partition=0, on_delivery=report)
    assert producer.flush(TIMEOUT_S) == 0
    assert sorted(i for i, e in errors.items() if e == KafkaError.INVALID_RECORD) == [0, 5, 10, 15]
    others = [i for i, e in errors.items() if e == KafkaError._INVALID_DIFFERENT_RECORD]
    assert len(others) == 16
