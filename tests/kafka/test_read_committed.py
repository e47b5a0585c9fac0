"""read_committed against real nodes, without transactions in the log: the last stable
offset a Fetch reports and the READ_COMMITTED ListOffsets answer are the high
watermark, AbortedTransactions is an empty list (null for READ_UNCOMMITTED, as Kafka
sends), and kafka-python's read_committed consumer reads everything."""

from __future__ import annotations

import time

from kafka.protocol.consumer import FetchRequest

from seglog.harness.kafka_cluster import KafkaConnection

TIMEOUT_S = 30.0
TOPIC = "rc-plain"
COUNT = 200


def fetch(isolation_level: int):
    R = FetchRequest
    return R[11](
        replica_id=-1,
        max_wait_ms=10,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=isolation_level,
        session_id=0,
        session_epoch=-1,
        topics=[
            R.FetchTopic(
                topic=TOPIC,
                partitions=[
                    R.FetchTopic.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=0,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


def leader_answer(ports: list[int], isolation_level: int):
    """The partition's answer from whichever node leads it."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        for port in ports:
            with KafkaConnection(port) as conn:
                _, response = conn.request(fetch(isolation_level))
            part = response.responses[0].partitions[0]
            if part.error_code == 0 and part.high_watermark == COUNT:
                return part
        time.sleep(0.2)
    raise AssertionError("no leader answered with every record below its high watermark")


def test_read_committed_without_transactions_reads_to_the_high_watermark(kafka_cluster):
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
    from kafka.admin import NewTopic

    b = kafka_cluster.kafka_bootstrap.split(",")
    admin = KafkaAdminClient(bootstrap_servers=b, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(TOPIC, 1, 3)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=b, acks="all", enable_idempotence=True)
    for i in range(COUNT):
        producer.send(TOPIC, value=b"r%d" % i)
    producer.flush(TIMEOUT_S)
    producer.close()

    ports = [int(addr.rsplit(":", 1)[1]) for addr in b]
    committed = leader_answer(ports, 1)
    assert committed.last_stable_offset == committed.high_watermark == COUNT
    assert committed.aborted_transactions == []
    assert committed.records
    uncommitted = leader_answer(ports, 0)
    assert uncommitted.last_stable_offset == COUNT
    assert uncommitted.aborted_transactions is None

    consumer = KafkaConsumer(
        bootstrap_servers=b, isolation_level="read_committed", enable_auto_commit=False
    )
    tp = TopicPartition(TOPIC, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    assert consumer.end_offsets([tp]) == {tp: COUNT}  # ListOffsets READ_COMMITTED: the LSO
    values = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(values) < COUNT and time.monotonic() < deadline:
        for records in consumer.poll(500).values():
            values += [r.value for r in records]
    consumer.close()
    assert values == [b"r%d" % i for i in range(COUNT)]
