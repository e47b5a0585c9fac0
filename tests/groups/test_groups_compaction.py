"""`__consumer_offsets` is compacted by the log cleaner like any compacted topic: after
many commits of the same partitions the group's partition holds few records, a new
coordinator loads the right offsets from the compacted log, and a deleted group's
tombstones remove its keys from the log. Its own cluster (a node is stopped)."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from kafka.protocol.metadata import FindCoordinatorRequest

from seglog.harness.kafka_cluster import GROUP_OVERRIDES, KafkaCluster, KafkaConnection
from seglog.node.groups.offsets_records import (
    OFFSETS_TOPIC,
    decode_key,
    partition_for,
)
from seglog.storage.record_batch import decode_records, iter_batches

GROUP = "compact-group"
COMMITS = 400
PARTITIONS = 3
CLEANER = {
    "log.cleaner.backoff.ms": "200",
    "log.cleaner.dedupe.buffer.size": str(4 * 1024 * 1024),
}
OFFSETS_CONFIGS = {
    "segment.bytes": "8192",
    "segment.ms": "1000",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "1000",
    "file.delete.delay.ms": "0",
}


def group_keys(root: Path, node: int) -> list[object]:
    """The group's keys in the node's copy of its offsets partition, in log order."""
    partition = partition_for(GROUP, int(GROUP_OVERRIDES["offsets.topic.num.partitions"]))
    out: list[object] = []
    for d in root.glob(f"node{node}-*/{OFFSETS_TOPIC}-{partition}"):
        for seg in sorted(d.glob("*.log")):
            data = seg.read_bytes()
            for pos, header in iter_batches(data):
                for r in decode_records(data, pos, header):
                    key = decode_key(r.key or b"")
                    if getattr(key, "group", None) == GROUP:
                        out.append(key)
    return out


def coordinator(cluster: KafkaCluster) -> int | None:
    for port in cluster.kafka_ports.values():
        try:
            with KafkaConnection(port, timeout_s=5) as conn:
                _b, r = conn.request(FindCoordinatorRequest[3](key=GROUP, key_type=0))
        except OSError:
            continue
        if r.error_code == 0:
            return int(r.node_id)
    return None


def test_offsets_topic_is_compacted_and_reloads_from_the_compacted_log(tmp_path):
    root = tmp_path / "cluster"
    cluster = KafkaCluster(root, {**GROUP_OVERRIDES, **CLEANER})
    try:
        cluster.start_all()
        b = cluster.kafka_bootstrap
        node = cluster.wait("a coordinator", lambda: coordinator(cluster))
        admin = AdminClient({"bootstrap.servers": b})
        resource = ConfigResource(
            ConfigResource.Type.TOPIC,
            OFFSETS_TOPIC,
            incremental_configs=[
                ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
                for k, v in OFFSETS_CONFIGS.items()
            ],
        )
        admin.incremental_alter_configs([resource])[resource].result(30)
        # Offsets are committed only for partitions that exist (Kafka's rule): the topic
        # first, known to every node (whichever coordinates the group).
        admin.create_topics([NewTopic("compact-topic", PARTITIONS, 3)])["compact-topic"].result(30)
        cluster.wait(
            "the topic everywhere", lambda: cluster.known_everywhere("compact-topic", PARTITIONS)
        )

        c = Consumer({"bootstrap.servers": b, "group.id": GROUP, "enable.auto.commit": False})
        try:
            for i in range(1, COMMITS + 1):
                offsets = [
                    TopicPartition("compact-topic", p, i * 10 + p) for p in range(PARTITIONS)
                ]
                done = c.commit(offsets=offsets, asynchronous=False)
                assert all(tp.error is None for tp in done)
        finally:
            c.close()
        last = {p: COMMITS * 10 + p for p in range(PARTITIONS)}

        def compacted() -> bool | None:
            keys = group_keys(root, node)
            return True if 0 < len(keys) < COMMITS * PARTITIONS // 4 else None

        cluster.wait("the offsets partition compacted", compacted, timeout_s=60)

        # A new coordinator loads the compacted log.
        cluster.nodes[node].stop()
        new = cluster.wait(
            "a new coordinator",
            lambda: (lambda n: n if n not in (None, node) else None)(coordinator(cluster)),
        )
        c = Consumer({"bootstrap.servers": b, "group.id": GROUP})
        try:
            got = c.committed(
                [TopicPartition("compact-topic", p) for p in range(PARTITIONS)], timeout=30
            )
        finally:
            c.close()
        assert {tp.partition: tp.offset for tp in got} == last
        cluster.start(node)

        # Deleting the group writes tombstones; once cleaned (after delete.retention.ms)
        # none of its keys is left.
        admin.delete_consumer_groups([GROUP])[GROUP].result(30)
        time.sleep(1.5)

        def gone() -> bool | None:
            keys = group_keys(root, new)
            return True if not keys else None

        cluster.wait("the deleted group's keys cleaned away", gone, timeout_s=60)
    finally:
        cluster.stop_all()
