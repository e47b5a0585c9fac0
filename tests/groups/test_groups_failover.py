"""The group coordinator's node is SIGKILLed (with its controller process, as a machine
crash) while two confluent-kafka consumers of the group consume and commit: the group
finds the new coordinator (the new leader of its `__consumer_offsets` partition, which
loads the group from the log) and goes on; no acknowledged commit is lost, no committed
offset ever goes back, and every record is consumed at least once. Its own cluster:
the kill must not disturb other tests."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.metadata import FindCoordinatorRequest

from seglog.harness.kafka_cluster import GROUP_OVERRIDES, KafkaCluster, KafkaConnection
from seglog.node.groups.offsets_records import (
    OFFSETS_TOPIC,
    OffsetCommitKey,
    decode_key,
    decode_offset_commit,
    partition_for,
)
from seglog.storage.record_batch import decode_records, iter_batches

TOPIC, GROUP = "fo-topic", "fo-group"
PARTITIONS = 12
PER_PARTITION = 200
COMMIT_EVERY = 10


def find_coordinator(cluster: KafkaCluster, skip: int | None = None) -> int | None:
    for i, port in cluster.kafka_ports.items():
        if i == skip:
            continue
        try:
            with KafkaConnection(port, timeout_s=5) as conn:
                _b, r = conn.request(FindCoordinatorRequest[3](key=GROUP, key_type=0))
        except OSError:
            continue
        if r.error_code == 0 and r.node_id != skip:
            return int(r.node_id)
    return None


def committed_history(root: Path, node: int) -> dict[int, list[int]]:
    """Each partition's committed offsets for GROUP, in the order of the log."""
    partition = partition_for(GROUP, int(GROUP_OVERRIDES["offsets.topic.num.partitions"]))
    out: dict[int, list[int]] = {}
    for d in root.glob(f"node{node}-*/{OFFSETS_TOPIC}-{partition}"):
        for seg in sorted(d.glob("*.log")):
            data = seg.read_bytes()
            for pos, header in iter_batches(data):
                for r in decode_records(data, pos, header):
                    key = decode_key(r.key or b"")
                    if isinstance(key, OffsetCommitKey) and key.group == GROUP and r.value:
                        value = decode_offset_commit(r.value)
                        out.setdefault(key.partition, []).append(value.offset)
    return out


def test_coordinator_sigkill_loses_no_commit_and_none_goes_back(tmp_path):
    cluster = KafkaCluster(tmp_path / "cluster", GROUP_OVERRIDES)
    consumers: list[Consumer] = []
    try:
        cluster.start_all()
        b = cluster.kafka_bootstrap
        admin = AdminClient({"bootstrap.servers": b})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
        cluster.wait("leaders", lambda: cluster.leader_of(TOPIC, PARTITIONS - 1))
        producer = Producer({"bootstrap.servers": b, "acks": "all"})
        for i in range(PER_PARTITION * PARTITIONS):
            producer.produce(TOPIC, b"%d" % i, partition=i % PARTITIONS)
        assert producer.flush(30) == 0
        victim = cluster.wait("the coordinator", lambda: find_coordinator(cluster))

        consumers = [
            Consumer(
                {
                    "bootstrap.servers": b,
                    "group.id": GROUP,
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                    "session.timeout.ms": 6000,
                    "heartbeat.interval.ms": 500,
                    "partition.assignment.strategy": "range",
                }
            )
            for _ in range(2)
        ]
        for c in consumers:
            c.subscribe([TOPIC])
        acked: dict[int, int] = {}  # partition -> highest acknowledged committed offset
        acked_before_kill: dict[int, int] = {}
        consumed: set[bytes] = set()
        pending: list[dict[int, int]] = [{}, {}]
        polled = [0, 0]
        failed_commits = 0
        killed_at: float | None = None
        resumed_at: float | None = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(consumed) < PER_PARTITION * PARTITIONS:
            for k, c in enumerate(consumers):
                m = c.poll(0.05)
                if m is None or m.error():
                    continue
                consumed.add(m.value())
                pending[k][m.partition()] = m.offset() + 1
                polled[k] += 1
                if polled[k] % COMMIT_EVERY == 0:
                    offsets = [TopicPartition(TOPIC, p, o) for p, o in pending[k].items()]
                    try:
                        done = c.commit(offsets=offsets, asynchronous=False)
                    except KafkaException:
                        failed_commits += 1
                        continue
                    for tp in done or []:
                        if tp.error is None:
                            acked[tp.partition] = max(acked.get(tp.partition, 0), tp.offset)
                            if killed_at is not None and resumed_at is None:
                                resumed_at = time.monotonic()
                    pending[k] = {}
                time.sleep(0.002)  # slow enough that the kill falls mid-way
            if killed_at is None and len(consumed) > PER_PARTITION * PARTITIONS // 3:
                acked_before_kill = dict(acked)
                proc = cluster.nodes[victim].proc
                assert proc is not None
                os.killpg(proc.pid, signal.SIGKILL)  # the broker and its controller process
                proc.wait(10)
                cluster.nodes[victim].proc = None
                killed_at = time.monotonic()
        assert killed_at is not None and acked_before_kill, "the kill never happened"
        assert len(consumed) == PER_PARTITION * PARTITIONS, (
            f"consumed {len(consumed)} of {PER_PARTITION * PARTITIONS} after the failover"
        )
        assert resumed_at is not None, "no commit was acknowledged after the kill"
        new = find_coordinator(cluster, skip=victim)
        assert new is not None and new != victim

        # Every acknowledged commit is there (at least: the group may have gone further).
        committed = consumers[0].committed(
            [TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30
        )
        final = {tp.partition: tp.offset for tp in committed}
        for p, offset in acked.items():
            assert final[p] >= offset, (p, final[p], offset)
        for p, offset in acked_before_kill.items():
            assert final[p] >= offset, ("lost across the failover", p, final[p], offset)
        loaded = cluster.log_events(new, "loaded_groups")
        assert any(e.get("groups", 0) for e in loaded), loaded
        # The group's records in the new coordinator's offsets partition, in log order:
        # no committed offset ever goes back.
        history = committed_history(tmp_path / "cluster", new)
        assert history and set(history) == set(range(PARTITIONS)), sorted(history)
        for p, offsets in history.items():
            assert offsets == sorted(offsets), (p, offsets)
    finally:
        for c in consumers:
            c.close()
        cluster.stop_all()
