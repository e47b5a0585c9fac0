"""Thousands of partitions with real node processes (three nodes, each a broker and a
Raft voter whose controller runs in a process of its own).

* 2,000 partitions, RF=3: created, every ISR full; a keyed, idempotent acks=all
  Producer writes to all of them; every acknowledged record is read back at the offset
  its acknowledgement named; no broker was fenced and the controller never changed
  while it ran; every process's thread count stayed under a fixed bound.
* Overload, then recovery: producers far beyond what the machine can serve, then the
  load stops, and the cluster must come back by itself to one agreed controller, every
  broker unfenced and every ISR full, and serve a new write to each partition.

Bounds are limits on waiting, never expectations of speed.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

import pytest

from seglog.client.admin import Admin, NewTopic
from seglog.client.consumer import Consumer, TopicPartition
from seglog.client.producer import Producer
from seglog.harness.cluster import NODE_IDS, ThreeNodeCluster, topic_of
from seglog.proto import cluster_pb2 as cpb
from seglog.proto import cluster_pb2_grpc

WAIT_S = 120.0
# Threads of one process, whatever the partition count: a broker's fixed pools (32
# gRPC workers; the Kafka listener's acceptor, 3 network, 8 io and 32 delayed-request
# threads), one fetcher per other node and a fixed set of service threads; 16 gRPC
# workers in a controller process. The old design held one thread per in-flight
# AlterPartition (2,000 at 1,000 partitions).
THREAD_BOUND = 120


class Cluster(ThreeNodeCluster):
    session_timeout_ms = 1500
    wait_s = WAIT_S
    start_timeout_s = 60.0

    def __init__(self, root: Path) -> None:
        super().__init__(
            root,
            {
                "default.replication.factor": "3",
                "min.insync.replicas": "2",
                "replica.lag.time.max.ms": "10000",
            },
        )

    def controller_pid(self, node_id: int) -> int | None:
        """The node's controller process (the broker's child)."""
        proc = self.nodes[node_id].proc
        if proc is None:
            return None
        try:
            children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        except OSError:
            return None
        return int(children[0]) if children else None

    def thread_counts(self) -> dict[str, int]:
        out = {}
        for i in NODE_IDS:
            proc = self.nodes[i].proc
            pids = {f"broker-{i}": proc.pid if proc else None, f"controller-{i}": None}
            pids[f"controller-{i}"] = self.controller_pid(i)
            for name, pid in pids.items():
                if pid is not None:
                    with contextlib.suppress(OSError):
                        out[name] = len(os.listdir(f"/proc/{pid}/task"))
        return out

    def events(self, event: str) -> list[dict[str, object]]:
        return [e for i in NODE_IDS for e in self.log_events(i, event)]

    def quorum_leaders(self) -> dict[int, int]:
        """node -> the active controller it knows (DescribeQuorum on its controller)."""
        out = {}
        for i in NODE_IDS:
            try:
                r = cluster_pb2_grpc.ControllerStub(self.controller_channel(i)).DescribeQuorum(
                    cpb.DescribeQuorumRequest(), timeout=2
                )
                out[i] = r.leader_id
            except Exception:  # noqa: BLE001 - a probe: no answer is "not yet"
                out[i] = -1
        return out

    def full_isrs(self, topic: str, partitions: int) -> bool | None:
        for i in NODE_IDS:
            t = topic_of(self.metadata(i, [topic]), topic)
            if t is None or len(t.partitions) != partitions:
                return None
            if any(len(p.isr_nodes) != 3 or p.leader_id < 0 for p in t.partitions):
                return None
        return True


@pytest.fixture
def cluster(tmp_path: Path):
    c = Cluster(tmp_path)
    try:
        c.start_all()
        c.wait("every node up and unfenced", lambda: c.all_up_and_unfenced() or None)
        yield c
    finally:
        c.stop_all()


class ThreadSampler:
    """The largest thread count seen per process while it runs."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.peak: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ThreadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            for name, n in self.cluster.thread_counts().items():
                self.peak[name] = max(self.peak.get(name, 0), n)


def test_two_thousand_partitions_create_produce_read_back(cluster: Cluster) -> None:
    partitions, records = 2000, 20_000
    admin = Admin(cluster.bootstrap, request_timeout_ms=60_000)
    with ThreadSampler(cluster) as sampler:
        admin.create_topics([NewTopic("wide", partitions, 3)])
        cluster.wait("2,000 partitions with full ISRs", lambda: cluster.full_isrs("wide", 2000))
        elections = len(cluster.events("became_active_controller"))
        acks: dict[tuple[int, int], bytes] = {}
        failures: list[BaseException] = []
        producer = Producer(
            cluster.bootstrap, acks="all", enable_idempotence=True, linger_ms=5
        )
        try:
            futures = [
                (producer.send("wide", key=b"k%d" % n, value=b"v%08d" % n), b"v%08d" % n)
                for n in range(records)
            ]
            producer.flush(WAIT_S)
            for future, value in futures:
                try:
                    md = future.get(0)
                    acks[(md.partition, md.offset)] = value
                except Exception as e:  # noqa: BLE001 - every failure is reported below
                    failures.append(e)
        finally:
            producer.close(5)
        assert not failures, f"{len(failures)} records failed, first: {failures[0]!r}"
        assert len(acks) == records
        touched = {p for p, _o in acks}
        assert len(touched) > partitions * 0.95, "keys spread over (nearly) all partitions"
        read: dict[tuple[int, int], bytes] = {}
        consumer = Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest")
        try:
            consumer.assign([TopicPartition("wide", p) for p in range(partitions)])
            deadline = time.monotonic() + WAIT_S
            while len(read) < records and time.monotonic() < deadline:
                for _tp, rs in consumer.poll(1000).items():
                    for r in rs:
                        read[(r.partition, r.offset)] = r.value
        finally:
            consumer.close()
    assert read == acks, (
        f"read {len(read)} of {len(acks)} acknowledged records; "
        f"missing {len(set(acks) - set(read))}, unexpected {len(set(read) - set(acks))}"
    )
    assert len(cluster.events("became_active_controller")) == elections, "controller changed"
    assert cluster.events("broker_fenced") == [], "a broker was fenced"
    assert cluster.crashes() == []
    assert sampler.peak, "threads were sampled"
    assert max(sampler.peak.values()) <= THREAD_BOUND, sampler.peak


def test_overload_then_recover(cluster: Cluster) -> None:
    partitions = 1000
    admin = Admin(cluster.bootstrap, request_timeout_ms=60_000)
    admin.create_topics([NewTopic("hot", partitions, 3)])
    cluster.wait("1,000 partitions with full ISRs", lambda: cluster.full_isrs("hot", partitions))
    stop = threading.Event()
    sent = [0]

    def flood() -> None:
        # Short delivery timeouts and no flush: records pile up beyond what the
        # cluster serves, and the ones not served in time fail; that is the point.
        p = Producer(
            cluster.bootstrap,
            acks="all",
            linger_ms=0,
            delivery_timeout_ms=5_000,
            request_timeout_ms=3_000,
        )
        try:
            n = 0
            while not stop.is_set():
                try:
                    p.send("hot", key=b"%d" % n, value=b"x" * 500)
                    n += 1
                except Exception:  # noqa: BLE001 - a full buffer: keep pushing
                    time.sleep(0.01)
            sent[0] += n
        finally:
            p.close(0)

    threads = [threading.Thread(target=flood, daemon=True) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(12)  # more than twice the delivery timeout: records fail and the flood goes on
    stop.set()
    for t in threads:
        t.join(30)
    assert sent[0] > 0

    def recovered() -> bool | None:
        leaders = cluster.quorum_leaders()
        if len(set(leaders.values())) != 1 or -1 in leaders.values():
            return None
        if not cluster.all_up_and_unfenced():
            return None
        return cluster.full_isrs("hot", partitions)

    cluster.wait("one controller, every broker unfenced, every ISR full", recovered, 90)
    producer = Producer(cluster.bootstrap, acks="all", enable_idempotence=True)
    try:
        futures = [producer.send("hot", value=b"after", partition=p) for p in range(partitions)]
        producer.flush(WAIT_S)
        offsets = [f.get(0) for f in futures]
    finally:
        producer.close(5)
    assert sorted(md.partition for md in offsets) == list(range(partitions))
    assert cluster.crashes() == []
