"""A producer that pauses past producer.id.expiration.ms goes on without an error, with
every client (docs/replication-rules.md 5.7): the partition remembers expired producers,
so the batch that continues a sequence is accepted rather than refused as coming from an
unknown producer (UNKNOWN_PRODUCER_ID, 5.6)."""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from seglog.client.admin import Admin, NewTopic
from seglog.client.producer import Producer as SeglogProducer
from seglog.harness.kafka_cluster import read_partition_values
from seglog.harness.node_process import NodeProcess
from seglog.harness.ports import free_port

EXPIRATION_MS = 1500
WAIT_S = 30.0
_names = itertools.count()


class ExpiringNode:
    def __init__(self, root: Path) -> None:
        grpc_port, self.kafka_port = free_port(), free_port()
        self.node = NodeProcess(
            root,
            port=grpc_port,
            overrides={
                "listeners": f"GRPC://127.0.0.1:{grpc_port},"
                f"PLAINTEXT://127.0.0.1:{self.kafka_port}",
                "producer.id.expiration.ms": str(EXPIRATION_MS),
                "producer.id.expiration.check.interval.ms": "200",
            },
        )

    @property
    def kafka(self) -> str:
        return f"127.0.0.1:{self.kafka_port}"

    def new_topic(self) -> str:
        topic = f"expiry-{next(_names)}"
        with Admin(self.node.bootstrap) as admin:
            admin.create_topics([NewTopic(topic, 1, 1)])
        return topic

    def expired(self, topic: str) -> bool:
        for line in self.node.log_path.read_text(errors="replace").splitlines():
            if '"producers_expired"' in line and json.loads(line).get("topic") == topic:
                return True
        return False

    def wait_expired(self, topic: str) -> None:
        deadline = time.monotonic() + WAIT_S
        while not self.expired(topic):
            assert time.monotonic() < deadline, f"no producer of {topic} expired"
            time.sleep(0.1)

    def values(self, topic: str) -> list[bytes]:
        return read_partition_values(self.kafka, topic, 0, WAIT_S)


@pytest.fixture(scope="module")
def expiring(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExpiringNode]:
    en = ExpiringNode(tmp_path_factory.mktemp("expiry"))
    en.node.start()
    try:
        yield en
    finally:
        en.node.stop()


def run_with_a_pause(en: ExpiringNode, send_five: Callable[[str, str], None]) -> None:
    """Five records, a pause until the node expired the producer, five more: all ten
    delivered (send_five raises otherwise), once each, in order."""
    topic = en.new_topic()
    send_five(topic, "a")
    en.wait_expired(topic)
    send_five(topic, "b")
    expected = [b"%s%d" % (side, i) for side in (b"a", b"b") for i in range(5)]
    assert en.values(topic) == expected


def test_confluent_kafka(expiring: ExpiringNode) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": expiring.kafka, "enable.idempotence": True})
    errors: list[object] = []

    def send_five(topic: str, side: str) -> None:
        for i in range(5):
            p.produce(
                topic,
                value=f"{side}{i}".encode(),
                partition=0,
                on_delivery=lambda err, _m: errors.append(err) if err else None,
            )
        assert p.flush(WAIT_S) == 0
        assert errors == []

    run_with_a_pause(expiring, send_five)


def test_kafka_python(expiring: ExpiringNode) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=expiring.kafka, enable_idempotence=True, acks="all")
    try:

        def send_five(topic: str, side: str) -> None:
            futures = [p.send(topic, value=f"{side}{i}".encode(), partition=0) for i in range(5)]
            for f in futures:
                f.get(timeout=WAIT_S)

        run_with_a_pause(expiring, send_five)
    finally:
        p.close(timeout=10)


def test_aiokafka(expiring: ExpiringNode) -> None:
    from aiokafka import AIOKafkaProducer

    async def run() -> None:
        p = AIOKafkaProducer(bootstrap_servers=expiring.kafka, enable_idempotence=True)
        await p.start()
        try:
            topic = expiring.new_topic()
            for i in range(5):
                await p.send_and_wait(topic, value=f"a{i}".encode(), partition=0)
            while not expiring.expired(topic):
                await asyncio.sleep(0.1)
            for i in range(5):
                await p.send_and_wait(topic, value=f"b{i}".encode(), partition=0)
        finally:
            await p.stop()
        expected = [b"%s%d" % (side, i) for side in (b"a", b"b") for i in range(5)]
        assert expiring.values(topic) == expected

    asyncio.run(asyncio.wait_for(run(), 2 * WAIT_S))


def test_seglog_producer(expiring: ExpiringNode) -> None:
    with SeglogProducer(expiring.node.bootstrap, acks="all") as p:

        def send_five(topic: str, side: str) -> None:
            futures = [p.send(topic, value=f"{side}{i}".encode(), partition=0) for i in range(5)]
            p.flush(timeout=WAIT_S)
            for f in futures:
                f.get(timeout=0)

        run_with_a_pause(expiring, send_five)
