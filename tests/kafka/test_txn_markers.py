"""Transactions in the data path of three real nodes: transactional batches produced
with a transactional id, COMMIT/ABORT markers written by WriteTxnMarkers (as a
transaction coordinator writes them), the `.txnindex` every replica builds, and
read_committed consumers (confluent-kafka, kafka-python) that never see an aborted
record while read_uncommitted ones see them all (docs/transactions.md). The batches are
written without a coordinator's transaction (its producer ids and markers are made by
hand), so the nodes run with transaction.partition.verification.enable=false, which
lets them in as Kafka before KIP-890 did."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.protocol.producer import (
    InitProducerIdRequest,
    WriteTxnMarkersRequest,
)

from seglog.harness.kafka_cluster import KafkaCluster, KafkaConnection, produce_request
from seglog.storage.record_batch import NewRecord, build_batch

TIMEOUT_S = 30.0
TOPIC = "txn-data"


def produce(tid: str | None, records: bytes, topic: str = TOPIC):
    return produce_request(topic, 0, records, transactional_id=tid)


def markers(pid: int, epoch: int, commit: bool, coordinator_epoch: int = 0):
    R = WriteTxnMarkersRequest
    return R[1](
        markers=[
            R.WritableTxnMarker(
                producer_id=pid,
                producer_epoch=epoch,
                transaction_result=commit,
                topics=[
                    R.WritableTxnMarker.WritableTxnMarkerTopic(name=TOPIC, partition_indexes=[0])
                ],
                coordinator_epoch=coordinator_epoch,
            )
        ]
    )


@pytest.fixture(scope="module")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """Three real nodes that take transactional batches without verifying them."""
    cluster = KafkaCluster(
        tmp_path_factory.mktemp("txn-markers"),
        {"transaction.partition.verification.enable": "false"},
    )
    yield from cluster.serve_tests()


def txn_batch(pid: int, seq: int, values: list[bytes]) -> bytes:
    return build_batch(
        [NewRecord(v) for v in values],
        producer_id=pid,
        producer_epoch=0,
        base_sequence=seq,
        is_transactional=True,
    )


def produce_error(port: int, tid: str | None, data: bytes) -> int:
    with KafkaConnection(port) as conn:
        _, response = conn.request(produce(tid, data))
    return int(response.responses[0].partition_responses[0].error_code)


def marker_error(port: int, request: object) -> int:
    with KafkaConnection(port) as conn:
        _, response = conn.request(request)
    return int(response.markers[0].topics[0].partitions[0].error_code)


def new_producer_id(port: int) -> int:
    with KafkaConnection(port) as conn:
        _, response = conn.request(
            InitProducerIdRequest[4](
                transactional_id=None,
                transaction_timeout_ms=60_000,
                producer_id=-1,
                producer_epoch=-1,
            )
        )
    assert response.error_code == 0
    return int(response.producer_id)


def txnindex_bytes(log_dirs: list[Path]) -> bytes | None:
    for d in log_dirs:
        path = d / f"{TOPIC}-0" / "00000000000000000000.txnindex"
        if path.exists():
            return path.read_bytes()
    return None


def test_aborted_records_are_never_read_committed(kafka_cluster):
    from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
    from kafka.admin import NewTopic

    b = kafka_cluster.kafka_bootstrap.split(",")
    admin = KafkaAdminClient(bootstrap_servers=b, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(TOPIC, 1, 3, topic_configs={"min.insync.replicas": "2"})])
    finally:
        admin.close()
    kafka_cluster.wait("the topic everywhere", lambda: kafka_cluster.known_everywhere(TOPIC, 1))
    leader = kafka_cluster.wait("a leader", lambda: kafka_cluster.leader_of(TOPIC))
    port = kafka_cluster.kafka_ports[leader]
    aborting, committing = new_producer_id(port), new_producer_id(port)

    # Interleaved: an aborted transaction around a committed one, plain records between.
    assert produce_error(port, "tx-a", txn_batch(aborting, 0, [b"a0", b"a1"])) == 0
    assert produce_error(port, "tx-c", txn_batch(committing, 0, [b"c0"])) == 0
    assert produce_error(port, None, build_batch([NewRecord(b"p0")])) == 0
    assert produce_error(port, "tx-a", txn_batch(aborting, 2, [b"a2"])) == 0
    assert produce_error(port, "tx-c", txn_batch(committing, 1, [b"c1", b"c2"])) == 0
    assert marker_error(port, markers(aborting, 0, False)) == 0
    assert marker_error(port, markers(committing, 0, True)) == 0
    # A marker from an older producer epoch or coordinator epoch is refused.
    assert produce_error(port, "tx-a", txn_batch(aborting, 3, [b"a3"])) == 0
    assert marker_error(port, markers(aborting, -1, True)) == 47  # INVALID_PRODUCER_EPOCH
    assert marker_error(port, markers(aborting, 0, False, coordinator_epoch=5)) == 0  # 3 open
    assert marker_error(port, markers(aborting, 0, True, coordinator_epoch=4)) == 52  # fenced
    end = 11  # 8 records, 3 markers

    expected_committed = [b"c0", b"p0", b"c1", b"c2"]
    consumer = KafkaConsumer(
        bootstrap_servers=b, isolation_level="read_committed", enable_auto_commit=False
    )
    tp = TopicPartition(TOPIC, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    assert consumer.end_offsets([tp]) == {tp: end}
    got: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < len(expected_committed) and time.monotonic() < deadline:
        for records in consumer.poll(500).values():
            got += [r.value for r in records]
    consumer.close()
    assert got == expected_committed

    import confluent_kafka as ck

    def consume(isolation: str, count: int) -> list[bytes]:
        c = ck.Consumer(
            {
                "bootstrap.servers": kafka_cluster.kafka_bootstrap,
                "group.id": f"unused-{isolation}",
                "enable.auto.commit": False,
                "isolation.level": isolation,
            }
        )
        c.assign([ck.TopicPartition(TOPIC, 0, 0)])
        out: list[bytes] = []
        limit = time.monotonic() + TIMEOUT_S
        while len(out) < count and time.monotonic() < limit:
            msg = c.poll(0.5)
            if msg is not None and not msg.error():
                out.append(msg.value())
        # Nothing more arrives: an aborted record read late would show here.
        more = c.poll(1.0)
        if more is not None and not more.error():
            out.append(more.value())
        c.close()
        return out

    assert consume("read_committed", 4) == expected_committed
    assert consume("read_uncommitted", 8) == [
        b"a0", b"a1", b"c0", b"p0", b"a2", b"c1", b"c2", b"a3",
    ]  # fmt: skip

    # Every replica holds the same aborted-transaction index: two entries for `aborting`
    # (Kafka's 34-byte AbortedTxn), the first with the LSO at `committing`'s start.
    def indexes() -> list[bytes] | None:
        found = [txnindex_bytes(n.log_dirs) for n in kafka_cluster.nodes.values()]
        if any(f is None or len(f) < 68 for f in found):
            return None
        return [f for f in found if f is not None]

    copies = kafka_cluster.wait("the txnindex on every replica", indexes)
    assert copies[0] == copies[1] == copies[2]
    assert len(copies[0]) == 2 * 34
    version, pid, first, last, lso = (
        int.from_bytes(copies[0][0:2], "big"),
        int.from_bytes(copies[0][2:10], "big"),
        int.from_bytes(copies[0][10:18], "big"),
        int.from_bytes(copies[0][18:26], "big"),
        int.from_bytes(copies[0][26:34], "big"),
    )
    assert (version, pid, first, last, lso) == (0, aborting, 0, 7, 2)


def test_the_markers_connection_is_kept_and_replaced_when_the_leader_drops_it(kafka_cluster):
    """node/transactions/marker_sender.py keeps a leader's connection for the next
    transaction's markers (no connect, TLS handshake or login each time), and a kept
    connection the leader has dropped is replaced: the markers are asked again on a new
    one instead of failing the round (the coordinator would retry only on its timer)."""
    import socket

    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    from seglog.node.transactions.marker_sender import MarkerSender
    from seglog.node.transactions.txn_shard import NONE, SendMarkers

    topic = "txn-kept"
    b = kafka_cluster.kafka_bootstrap.split(",")
    admin = KafkaAdminClient(bootstrap_servers=b, request_timeout_ms=10_000)
    try:
        admin.create_topics([NewTopic(topic, 1, 3)])
    finally:
        admin.close()
    kafka_cluster.wait("the topic everywhere", lambda: kafka_cluster.known_everywhere(topic, 1))
    leader = kafka_cluster.wait("a leader", lambda: kafka_cluster.leader_of(topic))
    port = kafka_cluster.kafka_ports[leader]
    sender = MarkerSender(
        99,  # a coordinator on no node of this cluster: every marker goes over the wire
        None,  # type: ignore[arg-type]  # no local partitions, no replica manager needed
        lambda _tp: leader,
        lambda n: ("127.0.0.1", kafka_cluster.kafka_ports[n]),
    )

    def transaction(tid: str) -> tuple[str, list[bytes]]:
        pid = new_producer_id(port)
        request = produce(tid, txn_batch(pid, 0, [tid.encode()]), topic)
        with KafkaConnection(port) as conn:
            _, response = conn.request(request)
        assert response.responses[0].partition_responses[0].error_code == 0
        outcome = sender._write(SendMarkers(0, 0, tid, pid, 0, True, frozenset({(topic, 0)})))
        return outcome, [s for _a, s, _t in sender._idle.get(leader, [])]

    try:
        first, kept = transaction("kept-1")
        assert first == NONE and len(kept) == 1
        second, again = transaction("kept-2")
        assert second == NONE and again == kept  # the same connection, reused
        # The leader drops it (as connections.max.idle.ms or a restart would): the next
        # answer is lost on it, and the markers go again on a new connection.
        kept[0].shutdown(socket.SHUT_RD)
        third, replaced = transaction("kept-3")
        assert third == NONE and len(replaced) == 1 and replaced != kept
    finally:
        sender.shutdown()
    # All three committed: a read_committed reader sees them.
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=b, isolation_level="read_committed", enable_auto_commit=False
    )
    tp = TopicPartition(topic, 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    got: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < 3 and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=500).values():
            got += [r.value for r in records]
    consumer.close()
    assert got == [b"kept-1", b"kept-2", b"kept-3"]
