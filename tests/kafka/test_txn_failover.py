"""The transaction coordinator's node SIGKILLed (with its controller process, as a
machine crash) while confluent-kafka's producer commits: the transaction ends committed
or aborted on every partition, never half, and the producer's next transaction commits
through the new coordinator (docs/transactions.md). A second producer of the same
coordinator left its transaction open when the node died (its application gone too):
the new coordinator aborts it at its transaction.timeout.ms, so the last stable offset
moves on and none of its records is read. Its own cluster: the kill must not disturb
other tests."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from kafka.protocol.metadata import FindCoordinatorRequest
from test_transactions import consume_all

from seglog.harness.kafka_cluster import KafkaCluster, KafkaConnection

ck = pytest.importorskip("confluent_kafka")
TOPIC = "txn-failover"
PARTITIONS = 3
TID = "tx-failover"
ABANDONED_TIMEOUT_MS = 3000
TIMEOUT_S = 60.0


def coordinator_of(cluster: KafkaCluster, key: str = TID, key_type: int = 1) -> int | None:
    """The coordinator of a transactional id (key_type 1) or a group (0), as FindCoordinator
    answers it."""
    for port in cluster.kafka_ports.values():
        with KafkaConnection(port) as conn:
            _, r = conn.request(FindCoordinatorRequest[3](key=key, key_type=key_type))
        if r.error_code == 0:
            return int(r.node_id)
    return None


def test_sigkill_of_the_coordinator_mid_commit_is_all_or_nothing(tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic

    # The coordinator looks for timed-out transactions every half second (Kafka: 10 s).
    cluster = KafkaCluster(
        tmp_path / "cluster",
        {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "500"},
    )
    try:
        cluster.start_all()
        b = cluster.kafka_bootstrap
        admin = AdminClient({"bootstrap.servers": b})
        config = {"min.insync.replicas": "2"}
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config=config)])[TOPIC].result(30)
        cluster.wait("the topic", lambda: cluster.known_everywhere(TOPIC, PARTITIONS))
        producer = ck.Producer({"bootstrap.servers": b, "transactional.id": TID})
        producer.init_transactions(TIMEOUT_S)
        victim = cluster.wait("the coordinator", lambda: coordinator_of(cluster))

        # A transactional id of the same coordinator, its transaction left open.
        stray = next(
            t for t in (f"tx-abandoned-{i}" for i in range(500))
            if cluster.wait("its coordinator", lambda t=t: coordinator_of(cluster, t)) == victim
        )  # fmt: skip
        abandoned = ck.Producer(
            {"bootstrap.servers": b, "transactional.id": stray,
             "transaction.timeout.ms": ABANDONED_TIMEOUT_MS}
        )  # fmt: skip
        abandoned.init_transactions(TIMEOUT_S)
        abandoned.begin_transaction()
        for i in range(PARTITIONS * 3):
            abandoned.produce(TOPIC, value=b"abandoned-%d" % i, partition=i % PARTITIONS)
        assert abandoned.flush(TIMEOUT_S) == 0

        first = [b"first-%d" % i for i in range(30)]
        producer.begin_transaction()
        for i, v in enumerate(first):
            producer.produce(TOPIC, value=v, partition=i % PARTITIONS)
        assert producer.flush(TIMEOUT_S) == 0
        outcome: list[str] = []

        def commit() -> None:
            try:
                producer.commit_transaction(TIMEOUT_S)
                outcome.append("committed")
            except ck.KafkaException as e:
                error = e.args[0]
                if error.txn_requires_abort():
                    producer.abort_transaction(TIMEOUT_S)
                    outcome.append("aborted")
                else:
                    outcome.append(f"failed: {error}")

        committing = threading.Thread(target=commit)
        committing.start()
        time.sleep(0.02)  # EndTxn on its way or answered: the markers may be half out
        proc = cluster.nodes[victim].proc
        assert proc is not None
        os.killpg(proc.pid, signal.SIGKILL)  # the broker and its controller process
        proc.wait(10)
        cluster.nodes[victim].proc = None
        committing.join(TIMEOUT_S + 30)
        assert outcome in (["committed"], ["aborted"]), outcome

        second = [b"second-%d" % i for i in range(30)]
        producer.begin_transaction()
        for i, v in enumerate(second):
            producer.produce(TOPIC, value=v, partition=i % PARTITIONS)
        producer.commit_transaction(TIMEOUT_S)

        # The abandoned records lie before these in every partition: they are read only
        # once the new coordinator has aborted the abandoned transaction.
        expected = (first if outcome == ["committed"] else []) + second
        got = consume_all(b, TOPIC, PARTITIONS, "read_committed", len(expected))
        assert sorted(got) == sorted(expected), outcome
        assert not [v for v in got if v.startswith(b"abandoned-")]
    finally:
        cluster.stop_all()
