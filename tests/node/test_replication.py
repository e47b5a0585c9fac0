"""Replication with real node processes: three nodes on loopback, each a broker and a
Raft voter, a topic with RF=3 and min.insync.replicas=2, and an idempotent acks=-1
Producer under steady load while partition leaders are killed (SIGKILL once, five
times in a row chasing the new leader), shut down (SIGTERM) or frozen (SIGSTOP for
longer than replica.lag.time.max.ms and the broker session, then SIGCONT).

After each disruption the cluster is healed (every node up, every ISR full) and:
* every acknowledged record is read back exactly once, at the (partition, offset) its
  acknowledgement named; no value appears twice; nothing was read that was never sent;
* a Consumer that tailed the partitions during the disruption saw only records that are
  still there afterwards, unchanged (it never saw data above the high watermark that a
  later truncation removed);
* the three replicas' `.log` segment bytes, concatenated, are byte-identical and end
  exactly at the high watermark (ListOffsets LATEST).

Also: acks=-1 with two of three nodes down fails with NOT_ENOUGH_REPLICAS and appends
nothing; records above the high watermark are invisible to consumers (read_uncommitted)
until the followers have them.

Each test gets a fresh cluster, so a node broken by one test cannot fail the next. Every
wait is bounded and stops early when a node thread died; nothing asserts on timing.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import grpc
import pytest

from seglog.client.admin import Admin, NewTopic
from seglog.client.consumer import Consumer, TopicPartition
from seglog.client.errors import KafkaError, KafkaTimeoutError, error_class
from seglog.client.producer import Producer
from seglog.harness.cluster import NODE_IDS, ThreeNodeCluster, topic_of
from seglog.proto import client_pb2 as pb
from seglog.proto import errors_pb2
from seglog.storage.record_batch import BATCH_SCAN, LOG_OVERHEAD, NewRecord, build_batch

E = errors_pb2.ErrorCode

SESSION_TIMEOUT_MS = 1500
LAG_TIME_MAX_MS = 3000
WAIT_S = 45.0  # any one bounded wait
PARTITIONS = 3
RATE = 150  # records per second, spread round-robin over the partitions
PROGRESS = 30  # acknowledgements on the disrupted partition that prove it works again
REQUEST_TIMEOUT_MS = 5000  # a frozen leader holds a request until this passes
DELIVERY_TIMEOUT_MS = 120_000
TOPIC_CONFIGS = {
    "min.insync.replicas": "2",
    "retention.ms": "-1",
    "segment.bytes": "65536",  # several segments per replica: rolls differ, bytes must not
}

NotEnoughReplicasError = error_class("NOT_ENOUGH_REPLICAS")


def value_of(n: int) -> bytes:
    return b"v%08d" % n


def number_of(value: bytes) -> int:
    assert value[:1] == b"v" and len(value) == 9, value
    return int(value[1:])


# --- the cluster ------------------------------------------------------------------------


class Cluster(ThreeNodeCluster):
    """The three voters (seglog.harness.cluster) with replication settings, nodes
    that can be frozen (SIGSTOP), and partition probes. Every wait stops early when a
    node thread died."""

    session_timeout_ms = SESSION_TIMEOUT_MS
    wait_s = WAIT_S
    start_timeout_s = WAIT_S
    tail_lines = 20

    def __init__(self, root: Path) -> None:
        super().__init__(
            root,
            {
                "replica.lag.time.max.ms": str(LAG_TIME_MAX_MS),
                "default.replication.factor": "3",
                "min.insync.replicas": "2",
            },
        )
        self.frozen: set[int] = set()

    # processes

    def running(self) -> list[int]:
        return [i for i in super().running() if i not in self.frozen]

    def kill(self, node_id: int) -> None:
        assert self.nodes[node_id].kill() == -signal.SIGKILL

    def terminate(self, node_id: int) -> None:
        code = self.nodes[node_id].stop(signal.SIGTERM)
        assert code == 0, f"node {node_id} exited with {code} on SIGTERM\n{self.tails()}"

    def freeze(self, node_id: int) -> None:
        proc = self.nodes[node_id].proc
        assert proc is not None
        self.frozen.add(node_id)
        os.killpg(proc.pid, signal.SIGSTOP)  # the broker and its controller process

    def thaw(self, node_id: int) -> None:
        proc = self.nodes[node_id].proc
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGCONT)
        self.frozen.discard(node_id)

    def stop_all(self) -> None:
        for i in list(self.frozen):
            self.thaw(i)
        super().stop_all()

    # RPCs

    def partitions(self, node_id: int, topic: str) -> dict[int, pb.PartitionMetadata] | None:
        t = topic_of(self.metadata(node_id, [topic]), topic)
        return None if t is None else {p.partition: p for p in t.partitions}

    # waiting

    def check_while_waiting(self, what: str) -> None:
        crashes = self.crashes()
        if crashes:
            raise AssertionError(f"while waiting for {what}: a node thread died\n" + crashes[0])

    def healthy(self, topics: list[str]) -> bool | None:
        """Every node up, three unfenced brokers on each, and each node's view of every
        partition of `topics`: a leader, the full ISR, the same leader epoch everywhere."""
        if not self.all_up_and_unfenced():
            return None
        for topic in topics:
            views = [self.partitions(i, topic) for i in NODE_IDS]
            if any(v is None or not v for v in views):
                return None
            for v in views:
                assert v is not None
                for p in v.values():
                    if p.leader_id not in NODE_IDS or sorted(p.isr_nodes) != list(NODE_IDS):
                        return None
            first = views[0]
            assert first is not None
            for v in views[1:]:
                assert v is not None
                if {k: (p.leader_id, p.leader_epoch) for k, p in v.items()} != {
                    k: (p.leader_id, p.leader_epoch) for k, p in first.items()
                }:
                    return None
        return True

    def heal(self, topics: Sequence[str] = ()) -> None:
        for i in list(self.frozen):
            self.thaw(i)
        self.start_stopped()
        self.wait(
            f"every node up, unfenced, and full ISRs of {list(topics)} everywhere",
            lambda: self.healthy(list(topics)),
        )

    def leader_of(self, topic: str, partition: int, among: list[int] | None = None) -> int:
        """The partition's leader as the given nodes (default: the running ones) agree,
        and running itself."""

        def probe() -> int | None:
            nodes = among if among is not None else self.running()
            leaders = set()
            for i in nodes:
                v = self.partitions(i, topic)
                if v is None or partition not in v:
                    return None
                leaders.add(v[partition].leader_id)
            if len(leaders) != 1:
                return None
            leader = leaders.pop()
            return leader if leader in self.running() else None

        return self.wait(f"an agreed, running leader of {topic}-{partition}", probe)

    def create_topic(self, name: str, partitions: int, configs: dict[str, str]) -> None:
        with Admin(self.bootstrap, request_timeout_ms=int(WAIT_S * 1000)) as admin:
            admin.create_topics([NewTopic(name, partitions, 3, configs)])
        self.heal([name])

    def controller(self) -> int:
        def probe() -> int | None:
            ids = set()
            for i in self.running():
                md = self.metadata(i, [])
                if md is None:
                    return None
                ids.add(md.controller_id)
            return ids.pop() if len(ids) == 1 and ids <= set(self.running()) else None

        return self.wait("an agreed active controller", probe)

    # the replicas' files

    def replica_bytes(self, node_id: int, topic: str, partition: int) -> bytes | None:
        """The node's `.log` segments of the partition, concatenated in offset order."""
        for d in self.nodes[node_id].log_dirs:
            pdir = d / f"{topic}-{partition}"
            if pdir.is_dir():
                try:
                    return b"".join(f.read_bytes() for f in sorted(pdir.glob("*.log")))
                except OSError:
                    return None
        return None


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A fresh cluster per test: a node broken by one test cannot fail the next."""
    c = Cluster(tmp_path / "cluster")
    try:
        c.start_all()
        c.heal()
        yield c
    finally:
        c.stop_all()


def next_offset_of(data: bytes) -> int:
    """The offset after the last whole batch of concatenated segment bytes."""
    pos, nxt = 0, 0
    while pos + BATCH_SCAN.size <= len(data):
        base, length, _magic, last_delta = BATCH_SCAN.unpack_from(data, pos)
        size = length + LOG_OVERHEAD
        if pos + size > len(data):
            break
        nxt = base + last_delta + 1
        pos += size
    assert pos == len(data), f"a torn batch at byte {pos} of {len(data)}"
    return nxt


# --- the load ---------------------------------------------------------------------------


class Load:
    """An idempotent acks=-1 Producer sending numbered values round-robin over the
    partitions at RATE records/s from a background thread, recording every
    acknowledgement (value -> (partition, offset)) and every failure; and a Consumer
    tailing the partitions meanwhile, recording what it saw."""

    def __init__(self, cluster: Cluster, topic: str, partitions: int, rate: int = RATE) -> None:
        self.topic = topic
        self.partitions = partitions
        self.rate = rate
        self.producer = Producer(
            cluster.bootstrap,
            acks=-1,
            linger_ms=5,
            request_timeout_ms=REQUEST_TIMEOUT_MS,
            delivery_timeout_ms=DELIVERY_TIMEOUT_MS,
        )
        assert self.producer.idempotent
        self.consumer = Consumer(
            bootstrap_servers=cluster.bootstrap,
            auto_offset_reset="earliest",
            request_timeout_ms=REQUEST_TIMEOUT_MS,
        )
        self.consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        self.lock = threading.Lock()
        self.sent = 0
        self.acked: dict[int, tuple[int, int]] = {}
        self.failed: dict[int, str] = {}
        self.send_errors: list[str] = []
        self.tailed: dict[tuple[int, int], bytes] = {}
        self.tail_anomalies: list[str] = []
        self._acks_per_partition = [0] * partitions
        self._stop_sending = threading.Event()
        self._stop_tailing = threading.Event()
        self._sender = threading.Thread(target=self._send_loop, name="load-send", daemon=True)
        self._tailer = threading.Thread(target=self._tail_loop, name="load-tail", daemon=True)

    def __enter__(self) -> Load:
        self._sender.start()
        self._tailer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _on_ack(self, n: int, md: object) -> None:
        with self.lock:
            self.acked[n] = (md.partition, md.offset)  # type: ignore[attr-defined]
            self._acks_per_partition[md.partition] += 1  # type: ignore[attr-defined]

    def _on_fail(self, n: int, exc: BaseException) -> None:
        with self.lock:
            self.failed[n] = f"{type(exc).__name__}: {exc}"

    def _send_loop(self) -> None:
        n = 0
        start = time.monotonic()
        while not self._stop_sending.is_set():
            due = int((time.monotonic() - start) * self.rate)
            while n < due and not self._stop_sending.is_set():
                try:
                    f = self.producer.send(
                        self.topic, value=value_of(n), partition=n % self.partitions
                    )
                except KafkaError as e:
                    self.send_errors.append(f"{n}: {type(e).__name__}: {e}")
                    self._stop_sending.wait(0.1)
                    continue
                f.add_callback(self._on_ack, n).add_errback(self._on_fail, n)
                n += 1
                with self.lock:
                    self.sent = n
            self._stop_sending.wait(0.01)

    def _tail_loop(self) -> None:
        expected = dict.fromkeys(range(self.partitions), 0)
        while not self._stop_tailing.is_set():
            try:
                got = self.consumer.poll(200)
            except KafkaError as e:
                self.tail_anomalies.append(f"poll raised {type(e).__name__}: {e}")
                self._stop_tailing.wait(0.2)
                continue
            for tp, records in got.items():
                for r in records:
                    if r.offset != expected[tp.partition]:
                        self.tail_anomalies.append(
                            f"p{tp.partition}: offset {r.offset} after {expected[tp.partition] - 1}"
                        )
                    expected[tp.partition] = r.offset + 1
                    key = (tp.partition, r.offset)
                    seen = self.tailed.get(key)
                    if seen is not None and seen != r.value:
                        self.tail_anomalies.append(f"{key}: {seen!r} then {r.value!r}")
                    self.tailed[key] = r.value

    def acks_on(self, partition: int) -> int:
        with self.lock:
            return self._acks_per_partition[partition]

    def wait_progress(self, cluster: Cluster, partition: int, more: int = PROGRESS) -> None:
        """Until `more` further records of `partition` were acknowledged."""
        target = self.acks_on(partition) + more
        cluster.wait(
            f"{more} more acknowledgements on {self.topic}-{partition} "
            f"(failed so far: {len(self.failed)})",
            lambda: True if self.acks_on(partition) >= target else None,
        )

    def stop(self) -> None:
        """Stop sending, wait for every result, then stop tailing."""
        if self._stop_sending.is_set():
            return
        self._stop_sending.set()
        self._sender.join(timeout=WAIT_S)
        try:
            self.producer.flush(timeout=DELIVERY_TIMEOUT_MS / 1000 + 10)
        finally:
            self.producer.close(timeout=10)
            time.sleep(0.5)  # let the tail catch up a little; it is not required to
            self._stop_tailing.set()
            self._tailer.join(timeout=WAIT_S)
            self.consumer.close()


# --- checking the outcome -----------------------------------------------------------------


def read_all(cluster: Cluster, topic: str, partitions: int) -> tuple[dict[int, int], dict]:
    """(high watermark per partition, {(partition, offset): value}) read from the
    beginning up to each partition's high watermark by a fresh Consumer."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    consumer = Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest")
    out: dict[tuple[int, int], bytes] = {}
    try:
        consumer.assign(tps)
        ends = {tp.partition: off for tp, off in consumer.end_offsets(tps).items()}
        consumer.seek_to_beginning()
        deadline = time.monotonic() + WAIT_S
        while any(consumer.position(tp) < ends[tp.partition] for tp in tps):
            assert time.monotonic() < deadline, (
                f"could not read up to {ends}: at "
                f"{ {tp.partition: consumer.position(tp) for tp in tps} }"
            )
            for tp, records in consumer.poll(500).items():
                for r in records:
                    key = (tp.partition, r.offset)
                    assert key not in out, f"{key} returned twice"
                    assert r.offset < ends[tp.partition], (
                        f"{key} read at or above the high watermark {ends[tp.partition]}"
                    )
                    out[key] = r.value
    finally:
        consumer.close()
    return ends, out


def check_outcome(
    cluster: Cluster, load: Load, extra: dict[bytes, tuple[int, int] | None] | None = None
) -> dict[str, int]:
    """After healing: every acknowledged record exactly once where its acknowledgement
    said, the tail saw only what stayed, and the replicas' files are identical. `extra`:
    values written outside the load, with the (partition, offset) they were acknowledged
    at (None: not acknowledged, so they may or may not be there)."""
    extra = extra or {}
    topic, partitions = load.topic, load.partitions
    cluster.heal([topic])
    assert not cluster.crashes(), cluster.crashes()[0]
    assert not load.send_errors, load.send_errors[:5]
    unresolved = load.sent - len(load.acked) - len(load.failed)
    assert unresolved == 0, f"{unresolved} sends never resolved"
    assert not load.failed, (
        f"{len(load.failed)} of {load.sent} records failed (idempotent producer, "
        f"delivery timeout {DELIVERY_TIMEOUT_MS} ms): "
        f"{sorted(load.failed.items())[:5]}"
    )
    assert load.acked, "nothing was acknowledged"

    hw, records = read_all(cluster, topic, partitions)
    # Every offset below the HW holds a record (no control batches: not transactional).
    for p in range(partitions):
        offsets = sorted(o for (q, o) in records if q == p)
        assert offsets == list(range(hw[p])), f"p{p}: offsets are not 0..{hw[p] - 1}"
    # No value twice; nothing that was never sent.
    where: dict[int, tuple[int, int]] = {}
    found_extra: dict[bytes, tuple[int, int]] = {}
    for key, value in records.items():
        if value in extra:
            assert value not in found_extra, f"{value!r} at {found_extra[value]} and {key}"
            found_extra[value] = key
            continue
        n = number_of(value)
        assert n not in where, f"value {n} at {where[n]} and again at {key} (a duplicate)"
        assert n < load.sent, f"value {n} was never sent (sent {load.sent})"
        where[n] = key
    # Every acknowledged record, exactly where its acknowledgement said.
    lost = sorted(n for n in load.acked if n not in where)
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {lost[:10]}"
    moved = [(n, load.acked[n], where[n]) for n in load.acked if load.acked[n] != where[n]]
    assert not moved, f"{len(moved)} records not at their acknowledged offset: {moved[:5]}"
    for value, acked_at in extra.items():
        if acked_at is not None:
            assert found_extra.get(value) == acked_at, (value, acked_at, found_extra.get(value))
    # The tailing consumer saw nothing that later vanished or changed.
    assert not load.tail_anomalies, load.tail_anomalies[:10]
    changed = [(k, v, records.get(k)) for k, v in load.tailed.items() if records.get(k) != v]
    assert not changed, f"the tail saw records that are not in the log: {changed[:5]}"

    # The replicas' files: identical bytes, ending at the HW.
    def identical() -> bool | None:
        for p in range(partitions):
            copies = [cluster.replica_bytes(i, topic, p) for i in NODE_IDS]
            if any(c is None for c in copies) or len(set(copies)) != 1:
                return None
            assert copies[0] is not None
            if next_offset_of(copies[0]) != hw[p]:
                return None
        return True

    cluster.wait(f"identical replica files ending at the HW {hw}", identical)
    assert sum(hw.values()) == len(records) >= len(load.acked)
    counts = {
        "extra_stored": len(found_extra),
        "sent": load.sent,
        "acked": len(load.acked),
        "stored": len(records),
        "tailed": len(load.tailed),
    }
    print(f"{topic}: {counts}")  # shown with pytest -s
    return counts


def new_leader(cluster: Cluster, topic: str, partition: int, old: int) -> int:
    """The partition's new leader once the running nodes agree it is not `old`."""
    survivors = [i for i in cluster.running() if i != old]

    def probe() -> int | None:
        leaders = set()
        for i in survivors:
            v = cluster.partitions(i, topic)
            if v is None:
                return None
            leaders.add(v[partition].leader_id)
        if len(leaders) != 1:
            return None
        leader = leaders.pop()
        return leader if leader in survivors else None

    return cluster.wait(f"a new leader of {topic}-{partition} other than {old}", probe)


# --- failover under load ----------------------------------------------------------------


def test_sigkill_leader_once(cluster: Cluster) -> None:
    topic = "kill-once"
    cluster.create_topic(topic, PARTITIONS, TOPIC_CONFIGS)
    with Load(cluster, topic, PARTITIONS) as load:
        load.wait_progress(cluster, 0)
        victim = cluster.leader_of(topic, 0)
        cluster.kill(victim)
        leader = new_leader(cluster, topic, 0, victim)
        assert leader != victim
        load.wait_progress(cluster, 0)
        cluster.start(victim)
        cluster.heal([topic])
        load.wait_progress(cluster, 0)
    check_outcome(cluster, load)


@pytest.mark.long  # five kill-restart rounds (~40 s); one round: test_sigkill_leader_once
def test_sigkill_chasing_the_leader_five_times(cluster: Cluster) -> None:
    topic = "kill-chase"
    cluster.create_topic(topic, PARTITIONS, TOPIC_CONFIGS)
    victims = []
    with Load(cluster, topic, PARTITIONS) as load:
        load.wait_progress(cluster, 0)
        for _ in range(5):
            victim = cluster.leader_of(topic, 0)
            victims.append(victim)
            cluster.kill(victim)
            new_leader(cluster, topic, 0, victim)
            load.wait_progress(cluster, 0)
            cluster.start(victim)
            cluster.heal([topic])  # back in the ISR before the next kill
        load.wait_progress(cluster, 0)
    check_outcome(cluster, load)
    # Chasing the leader: each kill hit the leader the previous one produced.
    assert all(a != b for a, b in zip(victims, victims[1:], strict=False)), victims


def test_sigterm_leader(cluster: Cluster) -> None:
    topic = "term-leader"
    cluster.create_topic(topic, PARTITIONS, TOPIC_CONFIGS)
    with Load(cluster, topic, PARTITIONS) as load:
        load.wait_progress(cluster, 0)
        victim = cluster.leader_of(topic, 0)
        cluster.terminate(victim)  # controlled shutdown: leadership moves before exit
        new_leader(cluster, topic, 0, victim)
        load.wait_progress(cluster, 0)
        cluster.start(victim)
        cluster.heal([topic])
        load.wait_progress(cluster, 0)
    check_outcome(cluster, load)


def test_sigstop_leader_past_lag_and_session_then_sigcont(cluster: Cluster) -> None:
    """The frozen leader wakes up still believing it leads, with a produce request
    waiting in its socket: it must not acknowledge it unless it is really committed, and
    it must truncate to the new leader's log."""
    topic = "stop-leader"
    cluster.create_topic(topic, PARTITIONS, TOPIC_CONFIGS)
    stale_value = b"written-to-the-frozen-leader"
    stale: dict[str, object] = {}

    def write_to_frozen(victim: int) -> None:
        try:
            stale["answer"] = raw_produce(cluster, victim, topic, 0, [stale_value], acks=-1)
        except grpc.RpcError as e:
            stale["error"] = str(e.code())

    with Load(cluster, topic, PARTITIONS) as load:
        load.wait_progress(cluster, 0)
        victim = cluster.leader_of(topic, 0)
        others = [p for p in range(PARTITIONS) if p != 0]
        frozen_at = time.monotonic()
        cluster.freeze(victim)
        writer = threading.Thread(target=write_to_frozen, args=(victim,), daemon=True)
        try:
            new_leader(cluster, topic, 0, victim)
            # The rest of the cluster keeps taking writes meanwhile.
            load.wait_progress(cluster, others[0])
            # Frozen past replica.lag.time.max.ms and the broker session (with margin).
            hold = max(LAG_TIME_MAX_MS, SESSION_TIMEOUT_MS) / 1000 + 1.0
            time.sleep(max(0.0, frozen_at + hold - time.monotonic()))
            fenced = cluster.brokers(next(i for i in NODE_IDS if i != victim))
            assert fenced is not None and fenced[victim] is True, fenced
            writer.start()  # queued in the frozen node's socket until the thaw
            time.sleep(0.3)
        finally:
            cluster.thaw(victim)
        writer.join(timeout=WAIT_S)
        cluster.heal([topic])  # the old leader truncates, follows, and rejoins the ISR
        load.wait_progress(cluster, 0)
    answer = stale.get("answer")
    acked_at = None
    if isinstance(answer, pb.PartitionProduceResponse) and answer.error_code == 0:
        acked_at = (0, int(answer.base_offset))
    print(f"the write to the frozen leader: {stale}")
    check_outcome(cluster, load, {stale_value: acked_at})


@pytest.mark.parametrize("request_timeout_ms", [2_000, 60_000])
def test_producer_leaves_a_frozen_leader(cluster: Cluster, request_timeout_ms: int) -> None:
    """With a long request timeout too: the frozen node answers no keepalive ping, so
    the call to it fails in about two seconds rather than at request.timeout.ms."""
    topic = f"frozen-leader-{request_timeout_ms}"
    cluster.create_topic(topic, 1, TOPIC_CONFIGS)
    victim = cluster.leader_of(topic, 0)
    with Producer(
        cluster.bootstrap, acks=-1, linger_ms=0, request_timeout_ms=request_timeout_ms
    ) as producer:
        producer.send(topic, value=b"before", partition=0).get(timeout=30)
        cluster.freeze(victim)
        try:
            leader = new_leader(cluster, topic, 0, victim)
            # Well within a 60 s request timeout; two 2 s timeouts with margin.
            future = producer.send(topic, value=b"during", partition=0)
            try:
                md = future.get(timeout=15)
            except KafkaTimeoutError:
                pytest.fail(
                    f"no acknowledgement within 15 s although node {leader} leads "
                    f"{topic}-0; the Producer still thinks node "
                    f"{producer._metadata.leader_for(TopicPartition(topic, 0))} leads it"
                )
            assert md.offset == 1
        finally:
            cluster.thaw(victim)


def test_former_leader_restarts_again_after_a_failover(cluster: Cluster) -> None:
    topic = "restart-twice"
    cluster.create_topic(topic, 1, TOPIC_CONFIGS)
    first = cluster.leader_of(topic, 0)
    with Producer(cluster.bootstrap, acks=-1, linger_ms=0) as producer:
        for i in range(5):
            producer.send(topic, value=b"epoch0-%d" % i, partition=0).get(timeout=30)
        cluster.kill(first)
        second = new_leader(cluster, topic, 0, first)
        for i in range(5):  # batches of the new leader epoch
            producer.send(topic, value=b"epoch1-%d" % i, partition=0).get(timeout=30)
    cluster.start(first)
    cluster.heal([topic])
    cluster.wait(
        f"node {first} holds node {second}'s log",
        lambda: (
            True
            if cluster.replica_bytes(first, topic, 0) == cluster.replica_bytes(second, topic, 0)
            else None
        ),
    )
    cluster.terminate(first)  # a clean restart this time; SIGKILL fails the same way
    cluster.start(first)
    cluster.heal([topic])
    assert not cluster.crashes(), cluster.crashes()[0]


# --- durability rules ---------------------------------------------------------------------


def raw_produce(
    cluster: Cluster, node_id: int, topic: str, partition: int, values: list[bytes], acks: int
) -> pb.PartitionProduceResponse:
    batch = build_batch([NewRecord(v) for v in values], now_ms=int(time.time() * 1000))
    request = pb.ProduceRequest(acks=acks, timeout_ms=5000)
    request.topics.add(name=topic).partitions.add(partition=partition, records=batch)
    # A node learns a new topic when it applies the metadata: until then it answers
    # UNKNOWN_TOPIC_OR_PARTITION, which clients retry (bounded).
    deadline = time.monotonic() + 15
    while True:
        answer = cluster.stub(node_id).Produce(request, timeout=15).topics[0].partitions[0]
        if answer.error_code != E.UNKNOWN_TOPIC_OR_PARTITION or time.monotonic() > deadline:
            return answer
        time.sleep(0.1)


def raw_fetch(
    cluster: Cluster, node_id: int, topic: str, partition: int, offset: int
) -> pb.FetchPartitionResponse:
    request = pb.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20)
    request.topics.add(name=topic).partitions.add(
        partition=partition,
        current_leader_epoch=-1,
        fetch_offset=offset,
        last_fetched_epoch=-1,
        partition_max_bytes=1 << 20,
    )
    response = cluster.stub(node_id).Fetch(request, timeout=10)
    return response.topics[0].partitions[0]


def list_latest(cluster: Cluster, node_id: int, topic: str, partition: int) -> int:
    request = pb.ListOffsetsRequest(replica_id=-1)
    request.topics.add(name=topic).partitions.add(
        partition=partition, current_leader_epoch=-1, timestamp=-1
    )
    p = cluster.stub(node_id).ListOffsets(request, timeout=10).topics[0].partitions[0]
    assert p.error_code == 0, p
    return int(p.offset)


def test_acks_all_with_two_of_three_nodes_down_is_not_enough_replicas(cluster: Cluster) -> None:
    topic = "two-down"
    cluster.create_topic(topic, PARTITIONS, TOPIC_CONFIGS)
    # The partition led by the active controller: the controller stays up and commits
    # both ISR shrinks while it still has a majority (itself and the second follower).
    controller = cluster.controller()
    views = cluster.partitions(controller, topic)
    assert views is not None
    partition = next((p for p, v in views.items() if v.leader_id == controller), None)
    if partition is None:
        pytest.skip(f"no partition of {topic} is led by the controller {controller}")
    leader = controller
    # An idempotent Producer with a producer id from before the shutdowns (InitProducerId
    # needs the controller quorum, which one node alone is not).
    idempotent = Producer(
        cluster.bootstrap, acks=-1, linger_ms=0, request_timeout_ms=2000, delivery_timeout_ms=5000
    )
    for i in range(5):
        idempotent.send(topic, value=b"before-%d" % i, partition=partition).get(timeout=30)
    followers = [i for i in NODE_IDS if i != leader]

    for down, f in enumerate(followers, start=1):
        cluster.terminate(f)  # controlled shutdown: out of the ISR before it exits
        left = sorted(set(NODE_IDS) - set(followers[:down]))

        def shrunk(left: list[int] = left) -> bool | None:
            v = cluster.partitions(leader, topic)
            return True if v is not None and sorted(v[partition].isr_nodes) == left else None

        cluster.wait(f"ISR {left} of {topic}-{partition} on the leader {leader}", shrunk)
    assert cluster.running() == [leader]
    bytes_before = cluster.replica_bytes(leader, topic, partition)
    assert bytes_before is not None and next_offset_of(bytes_before) == 5

    # The raw request: NOT_ENOUGH_REPLICAS, and nothing appended.
    answer = raw_produce(cluster, leader, topic, partition, [b"refused"], acks=-1)
    assert answer.error_code == E.NOT_ENOUGH_REPLICAS, answer
    # The Producer without retries: the error as is.
    with Producer(cluster.bootstrap, acks=-1, retries=0, linger_ms=0) as producer:
        assert not producer.idempotent
        f = producer.send(topic, value=b"refused-client", partition=partition)
        with pytest.raises(NotEnoughReplicasError):
            f.get(timeout=30)
    # The idempotent Producer retries it until its delivery timeout, then names it.
    try:
        assert idempotent.idempotent
        f = idempotent.send(topic, value=b"refused-idempotent", partition=partition)
        with pytest.raises(KafkaTimeoutError) as info:
            f.get(timeout=30)
        assert isinstance(info.value.__cause__, NotEnoughReplicasError), repr(info.value)
        assert "NOT_ENOUGH_REPLICAS" in str(info.value)
    finally:
        idempotent.close(timeout=5)
    # Nothing was appended.
    assert cluster.replica_bytes(leader, topic, partition) == bytes_before
    assert list_latest(cluster, leader, topic, partition) == 5

    cluster.heal([topic])
    hw, records = read_all(cluster, topic, PARTITIONS)
    assert hw[partition] == 5
    assert [records[(partition, o)] for o in range(5)] == [b"before-%d" % i for i in range(5)]


def test_consumers_never_see_data_above_the_high_watermark(cluster: Cluster) -> None:
    topic = "above-hw"
    cluster.create_topic(topic, 1, TOPIC_CONFIGS)
    leader = cluster.leader_of(topic, 0)
    first = raw_produce(cluster, leader, topic, 0, [b"c%d" % i for i in range(5)], acks=-1)
    assert first.error_code == 0, first
    hw0 = 5
    assert list_latest(cluster, leader, topic, 0) == hw0

    consumer = Consumer(bootstrap_servers=cluster.bootstrap, auto_offset_reset="earliest")
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        seen: list[tuple[int, bytes]] = []
        deadline = time.monotonic() + WAIT_S
        while len(seen) < hw0:
            assert time.monotonic() < deadline, seen
            seen += [(r.offset, r.value) for r in consumer.poll(500).get(tp, [])]
        assert seen == [(i, b"c%d" % i) for i in range(hw0)]

        # Both followers frozen: no quorum anywhere, so the ISR cannot shrink and the HW
        # cannot move; acks=1 appends to the leader's log only.
        followers = [i for i in NODE_IDS if i != leader]
        for f in followers:
            cluster.freeze(f)
        try:
            above = raw_produce(cluster, leader, topic, 0, [b"u%d" % i for i in range(5)], acks=1)
            assert above.error_code == 0 and above.base_offset == hw0, above
            on_disk = cluster.replica_bytes(leader, topic, 0)
            assert on_disk is not None and next_offset_of(on_disk) == hw0 + 5
            # Fetch, ListOffsets and the Consumer all stop at the HW.
            r = raw_fetch(cluster, leader, topic, 0, hw0)
            assert (r.error_code, r.high_watermark, r.records) == (0, hw0, b""), r
            r = raw_fetch(cluster, leader, topic, 0, 0)
            assert r.error_code == 0 and r.high_watermark == hw0, r
            assert next_offset_of(r.records) == hw0
            assert list_latest(cluster, leader, topic, 0) == hw0
            assert consumer.poll(500) == {}
            assert consumer.position(tp) == hw0
        finally:
            for f in followers:
                cluster.thaw(f)

        # Thawed: the followers fetch, the HW passes the records, the consumer gets them
        # (unless a leader change truncated them away, which acks=1 allows).
        epoch0 = (cluster.partitions(leader, topic) or {})[0].leader_epoch
        cluster.heal([topic])
        after = cluster.partitions(leader, topic)
        assert after is not None
        if after[0].leader_epoch == epoch0 and after[0].leader_id == leader:
            got: list[tuple[int, bytes]] = []
            deadline = time.monotonic() + WAIT_S
            while len(got) < 5:
                assert time.monotonic() < deadline, got
                got += [(r.offset, r.value) for r in consumer.poll(500).get(tp, [])]
            assert got == [(hw0 + i, b"u%d" % i) for i in range(5)]
    finally:
        consumer.close()
