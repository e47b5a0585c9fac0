"""`send_offsets_to_transaction` while the node of the group's coordinator (and, in one
case, the transaction's) is frozen, fenced, left out of the Metadata response and then
thawed: the call returns once a coordinator answers, the transaction commits, and the
offsets it carried are the group's. A coordinator that never answered its pending
request, or answered with an error that does not send the client back to FindCoordinator,
would leave the call hanging: the test bounds it and fails.

With both coordinators on the frozen node, confluent-kafka (librdkafka 2.16.0) hangs:
its AddOffsetsToTxn moves to the new transaction coordinator, but its cached group
coordinator is the broker the Metadata response dropped, which librdkafka decommissions
and then waits on without a bound (librdkafka issues 5511 and 5456; Kafka's Metadata
leaves fenced brokers out too). That case runs with kafka-python, whose producer looks
the group coordinator up again. docs/chaos-reports/2026-12-03-compose-transactions-table.md
has the client's log of the hang."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from test_txn_failover import coordinator_of

from seglog.harness.kafka_cluster import KafkaCluster

ck = pytest.importorskip("confluent_kafka")
TOPIC = "txn-fenced-coordinator"
TIMEOUT_S = 30.0
CALL_BOUND_S = 45.0  # the thaw comes after a few seconds; a hung call never returns
FROZEN_S = 4.0


def fenced_in_metadata(cluster: KafkaCluster, victim: int) -> bool | None:
    """Whether another node's metadata has `victim` fenced (its Kafka Metadata then
    leaves it out, as Kafka's does)."""
    observer = next(n for n in cluster.kafka_ports if n != victim)
    return True if (cluster.brokers(observer) or {}).get(victim) is True else None


def committed_offset(consumer: object, timeout_s: float) -> int:
    """The group's committed offset of the partition. librdkafka's `committed` retries
    a NOT_COORDINATOR answer on the same connection and then gives up, while its group
    looks the coordinator up again; an application asks once more, as this does."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            [tp] = consumer.committed([ck.TopicPartition(TOPIC, 0)], timeout_s)  # type: ignore[attr-defined]
            return int(tp.offset)
        except ck.KafkaException as e:
            if e.args[0].code() != ck.KafkaError.NOT_COORDINATOR or time.monotonic() > deadline:
                raise
            time.sleep(0.5)


class LibrdkafkaTxn:
    """confluent-kafka's transactional producer and a consumer for the group metadata."""

    def __init__(self, bootstrap: str, tid: str, group: str) -> None:
        self.producer = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
        self.producer.init_transactions(TIMEOUT_S)
        self.consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        self.meta = self.consumer.consumer_group_metadata()

    def begin_and_send(self, value: bytes) -> None:
        self.producer.begin_transaction()
        self.producer.produce(TOPIC, value, partition=0)
        assert self.producer.flush(TIMEOUT_S) == 0

    def send_offsets(self, offset: int) -> None:
        tp = ck.TopicPartition(TOPIC, 0, offset)
        self.producer.send_offsets_to_transaction([tp], self.meta, TIMEOUT_S)

    def commit(self) -> None:
        self.producer.commit_transaction(TIMEOUT_S)

    def committed(self) -> int:
        return committed_offset(self.consumer, TIMEOUT_S)

    def close(self) -> None:
        self.consumer.close()


class KafkaPythonTxn:
    """kafka-python's transactional producer; its admin client reads the group's offsets."""

    def __init__(self, bootstrap: str, tid: str, group: str) -> None:
        from kafka import KafkaProducer

        self.bootstrap, self.group = bootstrap.split(","), group
        self.producer = KafkaProducer(bootstrap_servers=self.bootstrap, transactional_id=tid)
        self.producer.init_transactions()

    def begin_and_send(self, value: bytes) -> None:
        self.producer.begin_transaction()
        self.producer.send(TOPIC, value, partition=0).get(TIMEOUT_S)

    def send_offsets(self, offset: int) -> None:
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        offsets = {TopicPartition(TOPIC, 0): OffsetAndMetadata(offset, "", -1)}
        self.producer.send_offsets_to_transaction(offsets, self.group)

    def commit(self) -> None:
        self.producer.commit_transaction()

    def committed(self) -> int:
        from kafka import KafkaAdminClient, TopicPartition

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap)
        try:
            got = admin.list_group_offsets(self.group)[self.group]
        finally:
            admin.close()
        return int(got[TopicPartition(TOPIC, 0)].offset)

    def close(self) -> None:
        self.producer.close(TIMEOUT_S)


@pytest.mark.parametrize(
    ("frozen", "client"),
    [("group-coordinator", LibrdkafkaTxn), ("both-coordinators", KafkaPythonTxn)],
    ids=["group-coordinator-confluent-kafka", "both-coordinators-kafka-python"],
)
def test_send_offsets_returns_when_the_frozen_coordinator_is_fenced_and_thaws(
    tmp_path, frozen, client
):
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = KafkaCluster(tmp_path / "cluster")
    try:
        cluster.start_all()
        b = cluster.kafka_bootstrap
        admin = AdminClient({"bootstrap.servers": b})
        admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(TIMEOUT_S)
        cluster.wait("the topic", lambda: cluster.known_everywhere(TOPIC, 1))
        tid = "tx-fenced"
        txn_node = cluster.wait("the transaction coordinator", lambda: coordinator_of(cluster, tid))
        same = frozen == "both-coordinators"
        group = next(
            g for g in (f"group-{i}" for i in range(500))
            if (cluster.wait("a group coordinator", lambda g=g: coordinator_of(cluster, g, 0))
                == txn_node) == same
        )  # fmt: skip
        victim = cluster.wait("the group coordinator", lambda: coordinator_of(cluster, group, 0))

        txn = client(b, tid, group)
        # A first transaction with offsets: the client caches both coordinators.
        txn.begin_and_send(b"first")
        txn.send_offsets(1)
        txn.commit()

        txn.begin_and_send(b"second")
        proc = cluster.nodes[victim].proc
        assert proc is not None
        os.kill(proc.pid, signal.SIGSTOP)  # the broker only: its controller runs on
        outcome: list[object] = []

        def send_offsets() -> None:
            try:
                txn.send_offsets(2)
                outcome.append("returned")
            except Exception as e:  # noqa: BLE001 - the outcome is the assertion
                outcome.append(e)

        try:
            calling = threading.Thread(target=send_offsets, daemon=True)
            calling.start()  # its request goes to the frozen node, or waits for it
            cluster.wait("the frozen node fenced", lambda: fenced_in_metadata(cluster, victim))
            time.sleep(FROZEN_S)
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        calling.join(CALL_BOUND_S)
        assert outcome == ["returned"], (
            f"send_offsets_to_transaction {outcome or 'still waiting'} "
            f"{CALL_BOUND_S:.0f} s after node {victim} thawed"
        )
        txn.commit()
        assert txn.committed() == 2
        txn.close()
        assert cluster.crashes() == []
    finally:
        cluster.stop_all()
