"""A client that never reached its cluster says why at once (client/bootstrap_probe.py):
a node's Kafka-protocol port is named in about a second by every client, a refused port
by Admin and Producer (and so by every tool), where they used to retry silently for
request_timeout_ms (30 s); a gRPC node answers normally, and one live address in the
bootstrap list is enough."""

from __future__ import annotations

import struct
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from seglog.client import bootstrap_probe as bp
from seglog.client.admin import Admin
from seglog.client.consumer import Consumer
from seglog.client.errors import BootstrapUnreachable
from seglog.client.producer import Producer
from seglog.harness.node_process import NodeProcess
from seglog.harness.ports import free_port

# A bound far below the 30 s of retries it replaces (about 0.1 s on an idle machine).
FAST_S = 5.0


def test_replies_are_classified() -> None:
    request = bp.api_versions_v0()
    size, api_key, version, correlation_id = struct.unpack(">ihhi", request[:12])
    assert (size, api_key, version) == (len(request) - 4, 18, 0)
    kafka_reply = struct.pack(">ii", 20, correlation_id) + b"\x00" * 16
    assert bp.is_kafka_reply(kafka_reply)
    assert not bp.is_kafka_reply(struct.pack(">ii", 20, correlation_id + 1))
    assert not bp.is_kafka_reply(b"")
    settings = bytes([0, 0, 6, 4, 0, 0, 0, 0, 0]) + b"\x00" * 6
    assert bp.is_http2_settings(settings)
    assert not bp.is_http2_settings(bytes([0, 0, 8, 7, 0, 0, 0, 0, 0]))  # GOAWAY
    assert not bp.is_http2_settings(kafka_reply)

    refused = bp.Probe("127.0.0.1", 1, bp.REFUSED)
    kafka = bp.Probe("127.0.0.1", 9092, bp.KAFKA)
    assert bp.unreachable_reason([refused, bp.Probe("h", 2, bp.HTTP2)]) is None
    # A TLS listener, or a proxy before a node that does not listen yet: retried as ever.
    assert bp.unreachable_reason([refused, bp.Probe("h", 2, bp.OTHER)]) is None
    reason = bp.unreachable_reason([refused, kafka])
    assert reason is not None
    assert "127.0.0.1:1: connection refused" in reason
    assert "127.0.0.1:9092: this is a Kafka-protocol port" in reason
    assert "here 127.0.0.1:9192" in reason


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    grpc_port, kafka_port = free_port(), free_port()
    n = NodeProcess(
        tmp_path_factory.mktemp("probe"),
        port=grpc_port,
        overrides={"listeners": f"GRPC://127.0.0.1:{grpc_port},PLAINTEXT://127.0.0.1:{kafka_port}"},
    ).start()
    n.kafka_port = kafka_port  # type: ignore[attr-defined]
    try:
        yield n
    finally:
        n.stop()


def test_the_probe_tells_the_listeners_apart(node: NodeProcess) -> None:
    kafka_port = node.kafka_port  # type: ignore[attr-defined]
    assert bp.probe("127.0.0.1", node.port).outcome == bp.HTTP2
    assert bp.probe("127.0.0.1", kafka_port).outcome == bp.KAFKA
    assert bp.probe("127.0.0.1", free_port()).outcome == bp.REFUSED


def _fails_fast(what: str, attempt: Callable[[], object]) -> str:
    started = time.monotonic()
    with pytest.raises(BootstrapUnreachable) as caught:
        attempt()
    took = time.monotonic() - started
    assert took < FAST_S, f"{what}: {took:.1f}s"
    return str(caught.value)


def _admin(address: str) -> None:
    with Admin(address) as admin:
        admin.list_topics()


def _produce(address: str) -> None:
    producer = Producer(address)
    try:
        producer.send("t", b"v")
    finally:
        producer.close(timeout=1)


def _consume(address: str) -> None:
    # kafka-python's consumer raises NoBrokersAvailable as it is built; so may this one.
    consumer = Consumer("t", bootstrap_servers=address, group_id="g")
    try:
        for _ in range(10):
            consumer.poll(200)
    finally:
        consumer.close(timeout_ms=1000)


def test_every_client_fails_fast_naming_the_address(node: NodeProcess) -> None:
    kafka = f"127.0.0.1:{node.kafka_port}"  # type: ignore[attr-defined]
    refused = f"127.0.0.1:{free_port()}"
    for what, client in (("Admin", _admin), ("Producer", _produce), ("Consumer", _consume)):
        message = _fails_fast(what, lambda client=client: client(kafka))
        assert f"cannot reach {kafka}: this is a Kafka-protocol port" in message, (what, message)
    # The consumer that raised as it was built left no thread behind.
    assert not [t.name for t in threading.enumerate() if t.name.startswith("seglog-consumer")]
    for what, client in (("Admin", _admin), ("Producer", _produce)):
        message = _fails_fast(what, lambda client=client: client(refused))
        assert f"cannot reach {refused}: connection refused" in message, (what, message)
    # A Consumer keeps polling a port where nothing listens yet (a cluster may start
    # there: tests/client/test_consumer_unreachable.py), as Kafka's consumers do.


def test_one_live_address_in_the_list_is_enough(node: NodeProcess) -> None:
    refused = f"127.0.0.1:{free_port()}"
    with Admin(f"{refused},{node.bootstrap}") as admin:
        started = time.monotonic()
        admin.list_topics()
        assert time.monotonic() - started < FAST_S
