"""No acknowledged record lost to a client's implicit ack (docs/replication-rules.md,
"Produce errors"), with each real Kafka client, against a real node.

A proxy in front of the node's Kafka listener (produce_hold_proxy.py) refuses the first
Produce of a partition itself (NOT_LEADER_OR_FOLLOWER, or UNKNOWN_TOPIC_OR_PARTITION) and
lets that answer go only after the node has answered the partition's next Produce: the
race right after a topic is created or a leader moves. librdkafka takes a success for
sequence n+1 as proof that n was written and reports n delivered (its "implicit ack"), so
the node must refuse n+1 from a producer it has no state for (UNKNOWN_PRODUCER_ID). Every
value reported delivered must then be in the log exactly once.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from produce_hold_proxy import ProduceHoldProxy

from seglog.harness.kafka_cluster import read_partition_values
from seglog.harness.node_process import NodeProcess
from seglog.harness.ports import free_port

ERRORS = ["NOT_LEADER_OR_FOLLOWER", "UNKNOWN_TOPIC_OR_PARTITION"]
VALUES = 60
WAIT_S = 60.0
_names = itertools.count()


class ProxiedNode:
    def __init__(self, root: Path) -> None:
        self.kafka_port = free_port()
        self.proxy = ProduceHoldProxy(self.kafka_port, set(), "NOT_LEADER_OR_FOLLOWER")
        grpc_port = free_port()
        self.node = NodeProcess(
            root,
            port=grpc_port,
            overrides={
                "listeners": f"GRPC://127.0.0.1:{grpc_port},"
                f"PLAINTEXT://127.0.0.1:{self.kafka_port}",
                # Clients learn the proxy's address from Metadata: every connection,
                # bootstrap or leader, goes through it.
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.proxy.port}",
                "auto.create.topics.enable": "false",
            },
        )

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.proxy.port}"

    def new_topic(self, error: str) -> str:
        from confluent_kafka.admin import AdminClient, NewTopic

        topic = f"implicit-ack-{next(_names)}"
        # Created on the node's own port: the proxy only meddles with Produce.
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{self.kafka_port}"})
        # Partition 1 warms a producer up (its producer id, its connection); partition 0
        # gets the burst whose first Produce the proxy refuses.
        admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(timeout=30)
        self.proxy.error = error
        self.proxy.targets.add((topic, 0))
        return topic

    def log_values(self, topic: str) -> list[bytes]:
        """Every value in the partition, read from the node directly."""
        return read_partition_values(f"127.0.0.1:{self.kafka_port}", topic, 0, WAIT_S)

    def refusals(self, topic: str) -> list:
        return [r for r in self.proxy.refusals if r.partition == (topic, 0)]


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProxiedNode]:
    pn = ProxiedNode(tmp_path_factory.mktemp("implicit-ack"))
    pn.node.start()
    try:
        yield pn
    finally:
        pn.node.stop()
        pn.proxy.close()


def check(pn: ProxiedNode, topic: str, delivered: list[bytes], failed: list[bytes]) -> None:
    in_log = pn.log_values(topic)
    assert len(pn.refusals(topic)) == 1, pn.proxy.refusals
    lost = [v for v in delivered if in_log.count(v) != 1]
    assert not lost, f"reported delivered but not in the log exactly once: {lost}"
    assert sorted(delivered + failed) == sorted(b"v%03d" % i for i in range(VALUES))


@pytest.mark.parametrize("error", ERRORS)
def test_confluent_kafka(proxied: ProxiedNode, error: str) -> None:
    from confluent_kafka import Producer

    topic = proxied.new_topic(error)
    delivered: list[bytes] = []
    failed: list[bytes] = []

    def report(err: object, msg: object) -> None:
        (failed if err is not None else delivered).append(msg.value())  # type: ignore[attr-defined]

    p = Producer(
        {
            "bootstrap.servers": proxied.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 0,
            "retry.backoff.ms": 50,
            "message.timeout.ms": 30_000,
        }
    )
    p.produce(topic, value=b"warm-up", partition=1)
    assert p.flush(WAIT_S) == 0  # a producer id and a connection before the burst
    # librdkafka sends its next batch within milliseconds. The refusal is let go at the
    # answer to it (produce_hold_proxy.py ties the two before forwarding); the longer
    # hold only bounds a run where no next batch ever comes.
    proxied.proxy.max_hold_s = 10.0
    for i in range(VALUES):
        p.produce(topic, value=b"v%03d" % i, partition=0, on_delivery=report)
        p.poll(0)
        time.sleep(0.002)  # a few batches, pipelined on one connection
    assert p.flush(WAIT_S) == 0
    # librdkafka pipelines: the refused batch's answer came after the next one's.
    assert [r.released_after_next_answer for r in proxied.refusals(topic)] == [True]
    check(proxied, topic, delivered, failed)
    assert not failed, f"librdkafka retries a batch refused as not written: {failed}"


@pytest.mark.parametrize("error", ERRORS)
def test_kafka_python(proxied: ProxiedNode, error: str) -> None:
    from kafka import KafkaProducer

    topic = proxied.new_topic(error)
    p = KafkaProducer(
        bootstrap_servers=proxied.bootstrap,
        enable_idempotence=True,
        acks="all",
        linger_ms=0,
        retry_backoff_ms=50,
    )
    try:
        p.send(topic, value=b"warm-up", partition=1).get(timeout=WAIT_S)
        futures = []
        for i in range(VALUES):
            futures.append((b"v%03d" % i, p.send(topic, value=b"v%03d" % i, partition=0)))
            time.sleep(0.002)
        p.flush(WAIT_S)
    finally:
        p.close(timeout=10)
    delivered = [v for v, f in futures if f.succeeded()]
    failed = [v for v, f in futures if f.failed()]
    check(proxied, topic, delivered, failed)


@pytest.mark.parametrize("error", ERRORS)
def test_aiokafka(proxied: ProxiedNode, error: str) -> None:
    from aiokafka import AIOKafkaProducer

    topic = proxied.new_topic(error)
    delivered: list[bytes] = []
    failed: list[bytes] = []

    async def run() -> None:
        p = AIOKafkaProducer(
            bootstrap_servers=proxied.bootstrap,
            enable_idempotence=True,
            acks="all",
            linger_ms=0,
            retry_backoff_ms=50,
        )
        await p.start()
        try:
            await p.send_and_wait(topic, value=b"warm-up", partition=1)
            sent = []
            for i in range(VALUES):
                sent.append((b"v%03d" % i, await p.send(topic, value=b"v%03d" % i, partition=0)))
                await asyncio.sleep(0.002)
            for value, fut in sent:
                try:
                    await asyncio.wait_for(fut, WAIT_S)
                    delivered.append(value)
                except Exception:  # noqa: BLE001 - any failure counts as not delivered
                    failed.append(value)
        finally:
            await p.stop()

    asyncio.run(run())
    check(proxied, topic, delivered, failed)
