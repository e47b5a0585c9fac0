"""Kafka's transactions end to end on three real nodes with unmodified clients
(docs/transactions.md): confluent-kafka's transactional producer commits and aborts
across partitions and a read_committed consumer never sees an aborted record; two
producers with one transactional id — the older is fenced, none of its records become
visible; the coordinator's APIs answer kafka-python's admin calls."""

from __future__ import annotations

import time

import pytest

TIMEOUT_S = 30.0


def consume_all(bootstrap: str, topic: str, partitions: int, isolation: str, want: int) -> list:
    ck = pytest.importorskip("confluent_kafka")
    c = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{topic}-{isolation}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    c.assign([ck.TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(out) < want and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is not None and not msg.error():
            out.append(msg.value())
    quiet = time.monotonic() + 2  # anything more (an aborted record read late) shows here
    while time.monotonic() < quiet:
        msg = c.poll(0.2)
        if msg is not None and not msg.error():
            out.append(msg.value())
    c.close()
    return out


def create(bootstrap: str, topic: str, partitions: int) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 3)])[topic].result(TIMEOUT_S)


def test_confluent_kafka_commits_and_aborts_and_read_committed_sees_only_commits(kafka_cluster):
    ck = pytest.importorskip("confluent_kafka")
    b = kafka_cluster.kafka_bootstrap
    create(b, "txn-orders", 3)
    kafka_cluster.wait("the topic", lambda: kafka_cluster.known_everywhere("txn-orders", 3))
    p = ck.Producer({"bootstrap.servers": b, "transactional.id": "tx-orders"})
    p.init_transactions(TIMEOUT_S)
    committed = []
    for round_ in range(4):
        p.begin_transaction()
        values = [b"r%d-%d" % (round_, i) for i in range(20)]
        for i, v in enumerate(values):
            p.produce("txn-orders", key=b"k%d" % i, value=v)
        if round_ % 2 == 0:
            p.commit_transaction(TIMEOUT_S)
            committed += values
        else:
            assert p.flush(TIMEOUT_S) == 0  # written first (an abort purges what is queued)
            p.abort_transaction(TIMEOUT_S)
    got = consume_all(b, "txn-orders", 3, "read_committed", len(committed))
    assert sorted(got) == sorted(committed)
    everything = consume_all(b, "txn-orders", 3, "read_uncommitted", 80)
    assert len(everything) == 80


def test_a_second_producer_fences_the_first(kafka_cluster):
    ck = pytest.importorskip("confluent_kafka")
    b = kafka_cluster.kafka_bootstrap
    create(b, "txn-zombies", 1)
    kafka_cluster.wait("the topic", lambda: kafka_cluster.known_everywhere("txn-zombies", 1))
    zombie = ck.Producer({"bootstrap.servers": b, "transactional.id": "tx-zombie"})
    zombie.init_transactions(TIMEOUT_S)
    zombie.begin_transaction()
    zombie.produce("txn-zombies", value=b"zombie-0")
    assert zombie.flush(TIMEOUT_S) == 0  # written, in its open transaction

    fresh = ck.Producer({"bootstrap.servers": b, "transactional.id": "tx-zombie"})
    fresh.init_transactions(TIMEOUT_S)  # bumps the epoch: the zombie's transaction aborts
    fresh.begin_transaction()
    fresh.produce("txn-zombies", value=b"fresh-0")
    fresh.commit_transaction(TIMEOUT_S)

    zombie.produce("txn-zombies", value=b"zombie-1")
    with pytest.raises(ck.KafkaException) as refused:
        zombie.commit_transaction(TIMEOUT_S)
    error = refused.value.args[0]
    assert error.fatal() or error.txn_requires_abort(), error
    assert consume_all(b, "txn-zombies", 1, "read_committed", 1) == [b"fresh-0"]


def test_consume_transform_produce_commits_offsets_with_the_transaction(kafka_cluster):
    """send_offsets_to_transaction: the input offsets are committed with the output,
    so an aborted round leaves both the output invisible and the offsets where they were."""
    ck = pytest.importorskip("confluent_kafka")
    b = kafka_cluster.kafka_bootstrap
    for topic in ("ctp-in", "ctp-out"):
        create(b, topic, 1)
        kafka_cluster.wait("the topic", lambda t=topic: kafka_cluster.known_everywhere(t, 1))
    source = ck.Producer({"bootstrap.servers": b})
    for i in range(10):
        source.produce("ctp-in", value=b"in-%d" % i)
    assert source.flush(TIMEOUT_S) == 0

    consumer = ck.Consumer(
        {
            "bootstrap.servers": b,
            "group.id": "ctp-group",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    consumer.subscribe(["ctp-in"])
    producer = ck.Producer({"bootstrap.servers": b, "transactional.id": "tx-ctp"})
    producer.init_transactions(TIMEOUT_S)

    def transform(count: int, commit: bool) -> None:
        batch = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(batch) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                batch.append(msg)
        assert len(batch) == count
        producer.begin_transaction()
        for msg in batch:
            producer.produce("ctp-out", value=msg.value().replace(b"in", b"out"))
        positions = consumer.position(consumer.assignment())
        producer.send_offsets_to_transaction(
            positions, consumer.consumer_group_metadata(), TIMEOUT_S
        )
        if commit:
            producer.commit_transaction(TIMEOUT_S)
        else:
            assert producer.flush(TIMEOUT_S) == 0
            producer.abort_transaction(TIMEOUT_S)

    transform(5, commit=True)
    transform(5, commit=False)
    consumer.close()

    def committed() -> int | None:
        c = ck.Consumer({"bootstrap.servers": b, "group.id": "ctp-group"})
        try:
            (tp,) = c.committed([ck.TopicPartition("ctp-in", 0)], timeout=10)
        finally:
            c.close()
        return tp.offset if tp.error is None else None

    assert committed() == 5  # the aborted round's offsets were never committed
    assert consume_all(b, "ctp-out", 1, "read_committed", 5) == [b"out-%d" % i for i in range(5)]


def test_kafka_python_and_aiokafka_transactional_producers(kafka_cluster):
    import asyncio

    from kafka import KafkaProducer

    b = kafka_cluster.kafka_bootstrap
    create(b, "txn-py", 2)
    kafka_cluster.wait("the topic", lambda: kafka_cluster.known_everywhere("txn-py", 2))
    kp = KafkaProducer(bootstrap_servers=b.split(","), transactional_id="tx-kafka-python")
    kp.init_transactions()
    kp.begin_transaction()
    for i in range(5):
        kp.send("txn-py", value=b"kp-commit-%d" % i)
    kp.commit_transaction()
    kp.begin_transaction()
    for i in range(5):
        kp.send("txn-py", value=b"kp-abort-%d" % i)
    kp.flush()
    kp.abort_transaction()
    kp.close()

    async def aio() -> None:
        from aiokafka import AIOKafkaProducer

        producer = AIOKafkaProducer(bootstrap_servers=b, transactional_id="tx-aiokafka")
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(5):
                    await producer.send("txn-py", value=b"aio-commit-%d" % i)
            await producer.begin_transaction()
            for i in range(5):
                await producer.send_and_wait("txn-py", value=b"aio-abort-%d" % i)
            await producer.abort_transaction()
        finally:
            await producer.stop()

    asyncio.run(aio())
    got = consume_all(b, "txn-py", 2, "read_committed", 10)
    assert sorted(got) == sorted(
        [b"kp-commit-%d" % i for i in range(5)] + [b"aio-commit-%d" % i for i in range(5)]
    )
    assert len(consume_all(b, "txn-py", 2, "read_uncommitted", 20)) == 20


def test_offsets_pending_in_a_transaction_are_unstable_for_require_stable(kafka_cluster):
    """OffsetFetch v7+ with require_stable: UNSTABLE_OFFSET_COMMIT while the transaction
    holding the group's offsets is open, the offset once it commits."""
    from kafka.protocol.consumer import OffsetFetchRequest
    from kafka.protocol.metadata import FindCoordinatorRequest

    from seglog.harness.kafka_cluster import KafkaConnection

    ck = pytest.importorskip("confluent_kafka")
    b = kafka_cluster.kafka_bootstrap
    create(b, "txn-stable", 1)
    kafka_cluster.wait("the topic", lambda: kafka_cluster.known_everywhere("txn-stable", 1))
    group = "stable-group"

    def coordinator_port() -> int | None:
        for port in kafka_cluster.kafka_ports.values():
            with KafkaConnection(port) as conn:
                _, r = conn.request(FindCoordinatorRequest[3](key=group, key_type=0))
            if r.error_code == 0:
                return int(r.port)
        return None

    def fetched(require_stable: bool) -> tuple[int, int]:
        R = OffsetFetchRequest
        request = R[7](
            group_id=group,
            topics=[R.OffsetFetchRequestTopic(name="txn-stable", partition_indexes=[0])],
            require_stable=require_stable,
        )
        with KafkaConnection(port) as conn:
            _, r = conn.request(request)
        p = r.topics[0].partitions[0]
        return int(p.error_code), int(p.committed_offset)

    port = kafka_cluster.wait("the group coordinator", coordinator_port)
    producer = ck.Producer({"bootstrap.servers": b, "transactional.id": "tx-stable"})
    producer.init_transactions(TIMEOUT_S)
    producer.begin_transaction()
    producer.produce("txn-stable", value=b"v")
    metadata = ck.Consumer({"bootstrap.servers": b, "group.id": group}).consumer_group_metadata()
    offsets = [ck.TopicPartition("txn-stable", 0, 42)]
    producer.send_offsets_to_transaction(offsets, metadata, TIMEOUT_S)
    assert fetched(require_stable=True)[0] == 88  # UNSTABLE_OFFSET_COMMIT
    assert fetched(require_stable=False) == (0, -1)  # nothing committed yet
    producer.commit_transaction(TIMEOUT_S)
    # EndTxn is answered once the decision is written; the marker reaches the group's
    # partition just after, and until then the offset stays unstable.
    stable = kafka_cluster.wait(
        "the committed offset", lambda: fetched(True) if fetched(True)[0] == 0 else None
    )
    assert stable == (0, 42)
