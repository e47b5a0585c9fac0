"""Both network models of the Kafka listener (kafka.listener.model) carry a real
client the same way: librdkafka's pipelined idempotent acks=all produces to several
partitions come back in order and are read back exactly once, and so do a
transaction's (verified with the coordinator before they open it, KIP-890); a frame over
socket.request.max.bytes closes its connection; an admin request (answered from the
handler pool on the event loop) works alongside. The event loop reports its lag."""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path

import pytest

from seglog.harness.metrics_scrape import metrics_port, scrape
from seglog.harness.node_process import NodeProcess
from seglog.harness.ports import free_port

ck = pytest.importorskip("confluent_kafka")
WAIT_S = 30.0
VALUES = 300
PARTITIONS = 3


def start_node(root: Path, model: str) -> tuple[NodeProcess, int]:
    kafka_port, grpc_port = free_port(), free_port()
    node = NodeProcess(
        root,
        port=grpc_port,
        overrides={
            "listeners": f"GRPC://127.0.0.1:{grpc_port},PLAINTEXT://127.0.0.1:{kafka_port}",
            "kafka.listener.model": model,
            "socket.request.max.bytes": "1048576",
            "metrics.port": "0",
            "metrics.host": "127.0.0.1",
        },
    )
    node.start()
    return node, kafka_port


def metric(node: NodeProcess, name: str) -> float | None:
    samples = scrape(metrics_port(node))
    return samples.get((name, ())) if (name, ()) in samples else None


@pytest.mark.parametrize("model", ["event-loop", "threads"])
def test_both_models_carry_librdkafka_in_order_and_refuse_oversized_frames(
    tmp_path: Path, model: str
) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    node, port = start_node(tmp_path, model)
    try:
        bootstrap = f"127.0.0.1:{port}"
        admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: its futures need it
        admin.create_topics([NewTopic("models", PARTITIONS, 1)])["models"].result(WAIT_S)
        producer = ck.Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 0,
                "max.in.flight.requests.per.connection": 5,
            }
        )
        delivered: dict[int, list[tuple[int, int]]] = {p: [] for p in range(PARTITIONS)}
        failed: list[object] = []

        def report(err: object, msg: object) -> None:
            if err is not None:
                failed.append(err)
            else:
                delivered[msg.partition()].append((msg.offset(), int(msg.value())))  # type: ignore[attr-defined]

        for i in range(VALUES):
            producer.produce(
                "models", value=b"%d" % i, partition=i % PARTITIONS, on_delivery=report
            )
            producer.poll(0)
        assert producer.flush(WAIT_S) == 0 and not failed, failed[:3]
        for p, got in delivered.items():
            assert [o for o, _ in got] == list(range(len(got))), f"offsets of {p} out of order"
            assert [v for _, v in got] == list(range(p, VALUES, PARTITIONS))

        consumer = ck.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"g-{model}",
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe(["models"])
        read: list[int] = []
        deadline = time.monotonic() + WAIT_S
        while len(read) < VALUES and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and not msg.error():
                read.append(int(msg.value()))
        consumer.close()
        assert sorted(read) == list(range(VALUES)), "a value lost or read twice"

        # A transaction's pipelined batches, the first of each partition verified with
        # the coordinator (KIP-890) before it is appended: in order, in both models.
        txn = ck.Producer(
            {
                "bootstrap.servers": bootstrap,
                "transactional.id": f"models-{model}",
                "linger.ms": 0,
                "max.in.flight.requests.per.connection": 5,
            }
        )
        txn.init_transactions(WAIT_S)
        txn.begin_transaction()
        in_txn: dict[int, list[tuple[int, int]]] = {p: [] for p in range(PARTITIONS)}

        def report_txn(err: object, msg: object) -> None:
            if err is not None:
                failed.append(err)
            else:
                in_txn[msg.partition()].append((msg.offset(), int(msg.value())))  # type: ignore[attr-defined]

        for i in range(VALUES):
            txn.produce("models", value=b"%d" % i, partition=i % PARTITIONS, on_delivery=report_txn)
            txn.poll(0)
        txn.commit_transaction(WAIT_S)
        assert not failed, failed[:3]
        for p, got in in_txn.items():
            offsets = [o for o, _ in got]
            assert offsets == sorted(offsets), f"transactional offsets of {p} out of order"
            assert [v for _, v in got] == list(range(p, VALUES, PARTITIONS))
        committed = ck.Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"txn-{model}",
                "isolation.level": "read_committed",
            }
        )
        committed.assign([ck.TopicPartition("models", p, got[0][0]) for p, got in in_txn.items()])
        read = []
        deadline = time.monotonic() + WAIT_S
        while len(read) < VALUES and time.monotonic() < deadline:
            msg = committed.poll(0.5)
            if msg is not None and not msg.error():
                read.append(int(msg.value()))
        committed.close()
        assert sorted(read) == list(range(VALUES)), "a committed value lost or read twice"

        # A frame announcing more than socket.request.max.bytes: closed, before its body.
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(struct.pack(">i", 2 * 1048576) + b"\0" * 64)
            assert s.recv(4) == b"", "the connection stayed open"
        assert '"event":"kafka_frame_refused"' in node.log_path.read_text()

        lag = metric(node, "seglog_node_event_loop_lag_seconds")
        if model == "event-loop":
            assert lag is not None and 0.0 <= lag < 5.0, lag
        else:
            assert lag is None, "no event loop runs in the threaded model"
        assert node.proc is not None and node.proc.poll() is None
    finally:
        print(node.tail(80))  # shown only when the test fails: the node's side of it
        node.stop()
