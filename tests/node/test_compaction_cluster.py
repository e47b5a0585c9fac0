"""A compacted topic on three real node processes (RF=3, min.insync.replicas=2) under
keyed load while its leader is SIGKILLed: each replica cleans its own log, and
afterwards

* the replicas agree on every (offset, key, value) they still hold below the HW and
  hold the same live value for every key (chaos.checker.compare_compacted_replicas);
* that live value is the last one acknowledged for the key, at its acknowledged
  offset; deleted keys (tombstones) are gone once delete.retention.ms has passed;
* the logs really were compacted (far fewer records than were sent), and a consumer
  reading from the beginning sees offsets only grow;
* a record without a key is refused with INVALID_RECORD.

Every wait is bounded; nothing asserts on timing.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from seglog.chaos.checker import compare_compacted_replicas, parse_rows
from seglog.client.admin import Admin, NewTopic
from seglog.client.consumer import Consumer, TopicPartition
from seglog.client.errors import KafkaError
from seglog.client.producer import Producer
from seglog.harness.cluster import NODE_IDS, ThreeNodeCluster, topic_of

TOPIC = "compacted"
WAIT_S = 60.0
KEYS = 25
TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "min.insync.replicas": "2",
    "segment.bytes": "8192",  # many small segments (the producer sends 2 KiB batches)
    "segment.ms": "1500",  # the quiet active segment rolls, so all of it gets cleaned
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "1000",
    "file.delete.delay.ms": "0",
}


class Cluster(ThreeNodeCluster):
    session_timeout_ms = 1500
    wait_s = WAIT_S
    start_timeout_s = WAIT_S

    def __init__(self, root: Path) -> None:
        super().__init__(
            root,
            {
                "replica.lag.time.max.ms": "3000",
                "default.replication.factor": "3",
                "min.insync.replicas": "2",
                "log.cleaner.backoff.ms": "200",
                "log.cleaner.dedupe.buffer.size": str(4 * 1024 * 1024),
            },
        )

    def check_while_waiting(self, what: str) -> None:
        crashes = self.crashes()
        if crashes:
            raise AssertionError(f"while waiting for {what}: a node thread died\n" + crashes[0])

    def partition(self, node_id: int) -> tuple[int, tuple[int, ...]] | None:
        t = topic_of(self.metadata(node_id, [TOPIC]), TOPIC)
        if t is None or not t.partitions:
            return None
        p = t.partitions[0]
        return p.leader_id, tuple(sorted(p.isr_nodes))

    def full_isr_leader(self) -> int | None:
        if len(self.running()) != 3:
            return None
        views = {self.partition(i) for i in NODE_IDS}
        if len(views) != 1:
            return None
        view = views.pop()
        if view is None or view[1] != NODE_IDS or view[0] not in NODE_IDS:
            return None
        return view[0]

    def replica_files(self, node_id: int) -> list[tuple[str, bytes]]:
        for d in self.nodes[node_id].log_dirs:
            pdir = d / f"{TOPIC}-0"
            if pdir.is_dir():
                out = []
                for f in sorted(pdir.glob("*.log")):
                    try:
                        out.append((f.name, f.read_bytes()))
                    except OSError:
                        pass  # swapped out under us: the next probe reads again
                return out
        return []


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path / "cluster")
    try:
        starters = [threading.Thread(target=c.start, args=(i,)) for i in NODE_IDS]
        for t in starters:
            t.start()
        for t in starters:
            t.join()
        c.wait("three unfenced brokers", lambda: c.all_up_and_unfenced() or None)
        yield c
    finally:
        for n in c.nodes.values():
            if n.proc is not None and n.proc.poll() is None:
                n.proc.send_signal(signal.SIGTERM)
        c.stop_all()


def test_compacted_topic_survives_a_leader_kill_and_replicas_agree(cluster: Cluster) -> None:
    with Admin(cluster.bootstrap, request_timeout_ms=int(WAIT_S * 1000)) as admin:
        admin.create_topics([NewTopic(TOPIC, 1, 3, TOPIC_CONFIGS)])
    first_leader = cluster.wait("a leader with the full ISR", cluster.full_isr_leader)

    producer = Producer(
        cluster.bootstrap,
        acks=-1,
        linger_ms=5,
        request_timeout_ms=5000,
        delivery_timeout_ms=120_000,
    )
    acked: dict[int, tuple[bytes, bytes | None]] = {}  # offset -> (key, value)
    failures: list[str] = []
    lock = threading.Lock()

    def send(n: int, value: bytes | None, k: int | None = None) -> None:
        key = b"key-%02d" % (n % KEYS if k is None else k)

        def ok(md: object) -> None:
            with lock:
                acked[md.offset] = (key, value)  # type: ignore[attr-defined]

        def failed(exc: BaseException) -> None:
            with lock:
                failures.append(f"{n}: {exc!r}")

        producer.send(TOPIC, value=value, key=key, partition=0).add_callback(ok).add_errback(failed)

    # A record without a key is refused, and nothing is appended for it.
    refused = producer.send(TOPIC, value=b"no key", partition=0)
    producer.flush(timeout=WAIT_S)
    with pytest.raises(KafkaError) as e:
        refused.get(timeout=WAIT_S)
    assert "INVALID_RECORD" in repr(e.value) or "InvalidRecord" in type(e.value).__name__

    n = 0
    for _ in range(400):
        send(n, b"value-%06d" % n)
        n += 1
        if n % 50 == 0:
            time.sleep(0.05)
    producer.flush(timeout=WAIT_S)
    assert cluster.nodes[first_leader].kill() == -signal.SIGKILL
    for _ in range(400):  # the producer finds the new leader
        send(n, b"value-%06d" % n)
        n += 1
        if n % 50 == 0:
            time.sleep(0.05)
    producer.flush(timeout=WAIT_S)
    cluster.start_stopped()
    cluster.wait("the full ISR again", cluster.full_isr_leader)
    deleted = [b"key-%02d" % k for k in range(3)]
    for k in range(3):  # tombstones for three keys
        send(k, None)
    for _ in range(100):  # more writes, none to the deleted keys
        send(n, b"value-%06d" % n, 3 + n % (KEYS - 3))
        n += 1
    producer.flush(timeout=WAIT_S)
    producer.close()
    assert not failures, failures[:5]

    expected: dict[bytes, tuple[int, bytes]] = {}
    for offset in sorted(acked):
        key, value = acked[offset]
        if value is None:
            expected.pop(key, None)
        else:
            expected[key] = (offset, value)
    assert not set(deleted) & set(expected)
    hw = max(acked) + 1

    def compacted_everywhere() -> bool | None:
        leader = cluster.full_isr_leader()
        if leader is None:
            return None
        files = {i: {0: cluster.replica_files(i)} for i in NODE_IDS}
        report = compare_compacted_replicas(files, {0: (leader, hw)})[0]
        if not report.identical or report.lagging:
            return None
        for i in NODE_IDS:
            rows, _end, problems = parse_rows(files[i][0], hw)
            assert not problems, problems
            live = {k: (o, v) for o, k, v in rows}
            live = {k: ov for k, ov in live.items() if ov[1] is not None}
            if live != expected or any(k in deleted for _o, k, _v in rows):
                return None  # not yet: tombstones wait for their horizon
            if len(rows) > 3 * KEYS:
                return None  # not compacted yet
            for o, k, v in rows:
                assert acked.get(o) == (k, v), f"node {i}: offset {o} holds {(k, v)}"
        return True

    cluster.wait("every replica compacted to the last value per key", compacted_everywhere)
    for i in NODE_IDS:
        assert cluster.log_events(i, "log_cleaned"), f"node {i} never cleaned"

    consumer = Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(TOPIC, 0)])
    seen: list[int] = []
    deadline = time.monotonic() + WAIT_S
    while (not seen or seen[-1] < max(o for o, _ in expected.values())) and (
        time.monotonic() < deadline
    ):
        for records in consumer.poll(500).values():
            seen += [r.offset for r in records]
    consumer.close()
    assert seen == sorted(set(seen)), "a consumer saw an offset twice or going backwards"
    assert {o for o, _v in expected.values()} <= set(seen)
