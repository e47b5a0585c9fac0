"""confluent-kafka's idempotent acks=all producer while the leader is SIGKILLed (with
its controller process, as a machine crash): every delivered message is read back
exactly once, at the offset its delivery report named, in send order per partition;
no value appears twice; once the victim is back in every ISR, the three replicas'
logs are byte-identical. With followers fetching over gRPC and over Kafka's
inter-broker protocol (replica.fetch.protocol). Its own cluster: the kill must not
disturb other tests."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import defaultdict

import pytest

from seglog.harness.cluster import topic_of
from seglog.harness.kafka_cluster import KafkaCluster

ck = pytest.importorskip("confluent_kafka")

TOPIC = "failover"
PARTITIONS = 3
RATE = 400  # messages per second
RUN_S = 8.0
KILL_AFTER_S = 2.5


def replica_bytes(cluster: KafkaCluster, node: int, partition: int) -> bytes:
    """The record batches of a replica, its segments' .log files in offset order."""
    out = b""
    for log_dir in cluster.nodes[node].log_dirs:
        part = log_dir / f"{TOPIC}-{partition}"
        if part.is_dir():
            for segment in sorted(part.glob("*.log")):
                out += segment.read_bytes()
    return out


@pytest.mark.parametrize("protocol", ["grpc", "kafka"])
def test_leader_sigkill_loses_and_duplicates_nothing(tmp_path, protocol):
    from confluent_kafka.admin import AdminClient, NewTopic

    cluster = KafkaCluster(tmp_path / "cluster", {"replica.fetch.protocol": protocol})
    try:
        cluster.start_all()
        b = cluster.kafka_bootstrap
        admin = AdminClient({"bootstrap.servers": b})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[
            TOPIC
        ].result(30)
        victim = cluster.wait("a leader", lambda: cluster.leader_of(TOPIC, 0))

        producer = ck.Producer(
            {
                "bootstrap.servers": b,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 60_000,
            }
        )
        delivered: dict[int, list[tuple[int, int]]] = defaultdict(list)  # p -> (offset, n)
        failed = []
        lock = threading.Lock()

        def on_delivery(err, msg):  # noqa: ANN202
            with lock:
                if err is not None:
                    failed.append((err, msg.value()))
                else:
                    delivered[msg.partition()].append((msg.offset(), int(msg.value()[1:])))

        started = time.monotonic()
        killed = False
        n = 0
        while time.monotonic() - started < RUN_S:
            if not killed and time.monotonic() - started > KILL_AFTER_S:
                proc = cluster.nodes[victim].proc
                assert proc is not None
                os.killpg(proc.pid, signal.SIGKILL)  # the broker and its controller process
                proc.wait(10)
                cluster.nodes[victim].proc = None
                killed = True
            producer.produce(
                TOPIC, value=b"m%07d" % n, partition=n % PARTITIONS, on_delivery=on_delivery
            )
            n += 1
            producer.poll(0)
            time.sleep(1 / RATE)
        assert producer.flush(90) == 0, "messages still undelivered"
        assert killed
        total = sum(len(v) for v in delivered.values())
        assert total > 0.9 * n, f"only {total} of {n} delivered; failures: {failed[:3]}"

        cluster.start(victim)  # back for the read; two replicas would do as well
        # A restarted node answers Metadata as soon as it serves, possibly before its
        # image holds the topic again: librdkafka then calls the partitions unknown.
        cluster.wait(
            "the restarted node knows the topic's leaders",
            lambda: (
                (t := topic_of(cluster.metadata(victim, [TOPIC]), TOPIC))
                and len(t.partitions) == PARTITIONS
                and all(p.leader_id > 0 for p in t.partitions)
                or None
            ),
        )
        consumer = ck.Consumer(
            {"bootstrap.servers": b, "group.id": "unused", "enable.auto.commit": False}
        )
        ends = {}
        for p in range(PARTITIONS):
            ends[p] = consumer.get_watermark_offsets(ck.TopicPartition(TOPIC, p), timeout=30)[1]
        consumer.assign([ck.TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        read: dict[int, list[tuple[int, int]]] = defaultdict(list)
        deadline = time.monotonic() + 60
        while (
            any((read[p][-1][0] + 1 if read[p] else 0) < ends[p] for p in range(PARTITIONS))
            and time.monotonic() < deadline
        ):
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            read[msg.partition()].append((msg.offset(), int(msg.value()[1:])))
        consumer.close()

        seen: set[int] = set()
        for p in range(PARTITIONS):
            values = [v for _o, v in read[p]]
            assert values == sorted(values), f"partition {p} out of send order"
            assert not seen & set(values), "a value appears twice"
            assert len(set(values)) == len(values), f"a value appears twice in {p}"
            seen |= set(values)
            at = dict(read[p])
            for offset, value in delivered[p]:
                assert at.get(offset) == value, (
                    f"delivered {value} at {p}:{offset}, read {at.get(offset)}"
                )
        # The victim truncated what it had beyond the high watermark and fetched the
        # rest: every replica holds the same batches, byte for byte.
        cluster.wait(
            "the victim back in every ISR",
            lambda: (
                (t := topic_of(cluster.metadata(1 if victim != 1 else 2, [TOPIC]), TOPIC))
                and all(len(p.isr_nodes) == 3 for p in t.partitions)
                or None
            ),
        )
        for p in range(PARTITIONS):
            cluster.wait(
                f"partition {p}'s replicas identical",
                lambda p=p: len({replica_bytes(cluster, i, p) for i in cluster.nodes}) == 1
                or None,
            )
            assert len(replica_bytes(cluster, victim, p)) > 0
        assert not cluster.crashes(), cluster.crashes()
    finally:
        cluster.stop_all()
