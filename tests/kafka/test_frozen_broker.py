"""A node that hangs rather than dies (issue 39), on real processes with `seglog local
up`'s failure-detection profile and confluent-kafka (its default metadata refresh):

* the broker process freezes while its controller process runs on (a deadlock, a
  process stuck on a disk, a wedged loop, from outside): the controller process stops
  relaying its heartbeats, it is fenced within broker.session.timeout.ms, every
  partition it led fails over, an acks=all produce to every partition succeeds within
  5 s of the freeze, and after SIGCONT it is unfenced and back in every ISR. On main at
  176dae4 the node was never fenced and nothing failed over;
* its disk stops answering (the fault seam's write_block): past the stall bound the
  broker says so and is fenced at once, and rejoins once the disk answers;
* its controller process freezes while the broker serves: the broker stops taking
  produces once its controller has been silent for a session, so clients find the new
  leaders (17 s without that, on the old code), and neither its Metadata nor its
  refusals name itself as their leader (5-8 s, 1 run in 2-3, while they did);
* the broker process beside the active controller freezes: Kafka's Metadata names a
  live broker as the controller, and librdkafka's CreateTopics is answered (it timed
  out after 10 s while controller_id named the frozen broker); so is seglog's own
  Admin's, which skips a fenced controller's broker (it gave up after its 5 s timeout,
  calling the frozen one).
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from seglog.chaos.targets import CONTROLLER_MODULE
from seglog.harness.cluster import NODE_IDS, topic_of
from seglog.harness.kafka_cluster import KafkaCluster, KafkaConnection, produce_request
from seglog.harness.local_cluster import LOCAL_DEFAULTS
from seglog.storage.record_batch import NewRecord, build_batch

ck = pytest.importorskip("confluent_kafka")

TOPIC = "frozen"
PARTITIONS = 6
SESSION_MS = int(LOCAL_DEFAULTS["broker.session.timeout.ms"])
ELECTION_MS = int(LOCAL_DEFAULTS["controller.quorum.election.timeout.ms"])
PRODUCE_WITHIN_S = 5.0
REQUEST_TIMEOUT_MS = 1500  # a frozen leader never answers: librdkafka gives up and retries
FULL = tuple(NODE_IDS)


class LocalProfileCluster(KafkaCluster):
    session_timeout_ms = SESSION_MS


def leaders(cluster: KafkaCluster, asked: int) -> dict[int, tuple[int, tuple[int, ...]]] | None:
    """partition -> (leader, isr) in `asked`'s Metadata (None: no answer)."""
    t = topic_of(cluster.metadata(asked, [TOPIC]), TOPIC)
    if t is None:
        return None
    return {p.partition: (p.leader_id, tuple(sorted(p.isr_nodes))) for p in t.partitions}


class Run:
    """A started cluster with the topic led and replicated everywhere, a producer that
    wrote to every partition, and the node leading partition 0 (the victim)."""

    def __init__(self, cluster: LocalProfileCluster) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        self.cluster = cluster
        cluster.start_all()
        self.admin = AdminClient({"bootstrap.servers": cluster.kafka_bootstrap})
        self.admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
        before = cluster.wait(
            "leaders with full ISRs",
            lambda: (
                (m := leaders(cluster, 1))
                and len(m) == PARTITIONS
                and all(lead > 0 and isr == FULL for lead, isr in m.values())
                and m
            ),
        )
        self.victim = before[0][0]
        self.led = sorted(p for p, (lead, _) in before.items() if lead == self.victim)
        self.survivor = next(i for i in NODE_IDS if i != self.victim)
        self.producer = ck.Producer(
            {
                "bootstrap.servers": cluster.kafka_bootstrap,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 0,
                "request.timeout.ms": REQUEST_TIMEOUT_MS,
                "socket.timeout.ms": REQUEST_TIMEOUT_MS,
                "message.timeout.ms": 30_000,
            }
        )
        self.produce_to_all(b"warm")
        self.since = time.monotonic()
        self.delivered: dict[int, float] = {}  # key -> seconds after `since`
        self.failed: list[object] = []

    def produce_to_all(self, value: bytes) -> None:
        for p in range(PARTITIONS):
            self.producer.produce(TOPIC, value=value, partition=p)
        assert self.producer.flush(30) == 0

    def send_all(self, value: bytes, first_key: int = 0) -> None:
        """One record to every partition, its delivery timed from `since`."""
        for p in range(PARTITIONS):
            key = first_key + p

            def done(err, msg, key=key):  # noqa: ANN202
                if err is None:
                    self.delivered[key] = time.monotonic() - self.since
                else:
                    self.failed.append((msg.partition(), err))

            self.producer.produce(TOPIC, value=value, partition=p, on_delivery=done)

    def failed_over(self) -> bool:
        m = leaders(self.cluster, self.survivor)
        return m is not None and all(m[p][0] not in (self.victim, -1) for p in self.led)

    def wait_failover_and_deliveries(self, total: int, bound_s: float) -> float | None:
        """Until every partition the victim led has another leader and `total`
        records are answered (at most `bound_s`); returns when it failed over."""
        failed_over_s = None
        while time.monotonic() - self.since < bound_s:
            self.producer.poll(0.05)
            if failed_over_s is None and self.failed_over():
                failed_over_s = time.monotonic() - self.since
            if failed_over_s is not None and len(self.delivered) + len(self.failed) >= total:
                break
        assert not self.failed, self.failed
        assert len(self.delivered) == total, self.delivered
        return failed_over_s

    def wait_rejoined(self, what: str) -> None:
        """The victim unfenced and back in every ISR; it takes a write to each partition."""
        self.cluster.wait(
            what,
            lambda: (
                self.cluster.brokers(self.survivor) == dict.fromkeys(NODE_IDS, False)
                and (m := leaders(self.cluster, self.survivor))
                and all(isr == FULL for _, isr in m.values())
                or None
            ),
            timeout_s=30,
        )
        self.produce_to_all(b"after")
        assert self.cluster.crashes() == []


@contextmanager
def local_run(root: Path, overrides: dict[str, str] | None = None) -> Iterator[Run]:
    profile = {k: v for k, v in LOCAL_DEFAULTS.items() if k != "num.partitions"}
    cluster = LocalProfileCluster(root, {**profile, **(overrides or {})})
    try:
        yield Run(cluster)
    finally:
        cluster.stop_all()


def test_frozen_broker_with_live_controller_fails_over_and_rejoins(tmp_path):
    with local_run(tmp_path / "cluster") as run:
        cluster, victim = run.cluster, run.victim
        proc = cluster.nodes[victim].proc
        assert proc is not None
        os.kill(proc.pid, signal.SIGSTOP)  # the broker only: its controller runs on
        try:
            run.since = time.monotonic()
            run.send_all(b"after-freeze")
            failed_over_s = run.wait_failover_and_deliveries(PARTITIONS, 20)
            assert failed_over_s is not None, f"partitions {run.led} never left node {victim}"
            # Fenced a session after its pulses stopped (at most a third of a session
            # old), then one election per partition by the controller.
            assert failed_over_s <= (SESSION_MS + 2 * ELECTION_MS) / 1000, failed_over_s
            slowest = max(run.delivered.values())
            assert slowest <= PRODUCE_WITHIN_S, run.delivered
            print(f"failed over in {failed_over_s:.2f} s; slowest acks=all {slowest:.2f} s")
            fenced = cluster.brokers(run.survivor)
            assert fenced is not None and fenced[victim], fenced
            assert cluster.log_events(victim, "broker_not_serving")
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        run.wait_rejoined("the thawed broker unfenced and in every ISR")
        assert cluster.log_events(victim, "broker_serving")


def disk_faults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., None]:
    """The nodes' fault file (storage/disk_and_clock.py's FaultInjector, re-read at most
    every 50 ms): returns a function that replaces its faults."""
    faults = tmp_path / "faults.json"
    faults.write_text("{}")
    monkeypatch.setenv("SEGLOG_FAULT_INJECTION_FILE", str(faults))

    def set_faults(**f: object) -> None:
        tmp = faults.with_suffix(".tmp")
        tmp.write_text(json.dumps(f))
        os.replace(tmp, faults)

    return set_faults


def test_a_broker_whose_disk_stops_answering_fences_itself_and_rejoins(tmp_path, monkeypatch):
    """A produce to a partition the victim leads hangs in its segment write. Past the
    stall bound (max(session, 5 s)) the broker says so (`broker_stalled`,
    seglog_broker_stalled 1) and its controller process fences it at once, so its
    leaderships move and the retried produce succeeds."""
    from prometheus_client.parser import text_string_to_metric_families

    from seglog.node.controller.remote_controller import STALL_BOUND_MIN_S

    set_faults = disk_faults(tmp_path, monkeypatch)
    metrics = {"metrics.port": "0", "metrics.host": "127.0.0.1"}
    with local_run(tmp_path / "cluster", metrics) as run:
        cluster, victim = run.cluster, run.victim
        port = next(int(e["metrics_port"]) for e in cluster.log_events(victim, "node_started"))

        def stalled_gauge() -> float:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                text = r.read().decode()
            for family in text_string_to_metric_families(text):
                for s in family.samples:
                    if s.name == "seglog_broker_stalled":
                        return float(s.value)
            raise AssertionError("no seglog_broker_stalled")

        assert stalled_gauge() == 0
        # From the fault on: any write of the victim's (a follower's append) may be the
        # first to hang, before the produces below.
        blocked_at = time.monotonic()
        set_faults(write_block=True, node_ids=[victim])
        try:
            time.sleep(0.2)  # the nodes re-read the file at most every 50 ms
            run.since = time.monotonic()
            run.send_all(b"blocked-disk")
            bound_s = max(STALL_BOUND_MIN_S, SESSION_MS / 1000)
            failed_over_s = run.wait_failover_and_deliveries(PARTITIONS, bound_s + 15)
            assert failed_over_s is not None, f"partitions {run.led} never left node {victim}"
            # The stall bound, then a pulse and the controlled shutdown's commit.
            assert bound_s <= failed_over_s + (run.since - blocked_at), failed_over_s
            assert failed_over_s <= bound_s + 2.0, failed_over_s
            assert stalled_gauge() == 1
            print(f"self-fenced {failed_over_s:.2f} s after the disk blocked; {run.delivered}")
            assert cluster.log_events(victim, "broker_stalled")
            assert cluster.log_events(victim, "broker_fenced_itself")
        finally:
            set_faults()
        run.wait_rejoined("the broker unfenced and in every ISR once its disk answers")
        assert stalled_gauge() == 0
        assert cluster.log_events(victim, "broker_serving_again")


def test_a_leader_stuck_on_its_disk_does_not_shrink_its_isrs_to_itself(tmp_path, monkeypatch):
    """Its followers cannot fetch while its loop hangs in a segment write, but that is
    the leader's stall, not theirs: with a lag (2 s) shorter than the stall bound (5 s)
    the old node shrank the ISRs of its other partitions to itself first, so its
    self-fence found no leader to elect and those partitions stayed offline (CI caught
    the race at the local profile's 5 s lag). The write goes to a topic created last,
    whose lock the write holds, so the timers reach the earlier partitions first."""
    from confluent_kafka.admin import NewTopic

    from seglog.node.controller.remote_controller import STALL_BOUND_MIN_S

    set_faults = disk_faults(tmp_path, monkeypatch)
    with local_run(tmp_path / "cluster", {"replica.lag.time.max.ms": "2000"}) as run:
        cluster, victim = run.cluster, run.victim
        others = [i for i in NODE_IDS if i != victim]
        run.admin.create_topics([NewTopic("stuck", 1, replica_assignment=[[victim, *others]])])[
            "stuck"
        ].result(30)
        cluster.wait(
            "stuck-0 led by the victim with a full ISR",
            lambda: (
                (t := topic_of(cluster.metadata(run.survivor, ["stuck"]), "stuck"))
                and t.partitions
                and t.partitions[0].leader_id == victim
                and tuple(sorted(t.partitions[0].isr_nodes)) == FULL
                or None
            ),
        )
        set_faults(write_block=True, node_ids=[victim])
        try:
            time.sleep(0.2)
            run.since = time.monotonic()
            delivered: list[object] = []
            run.producer.produce(
                "stuck", value=b"hangs", partition=0, on_delivery=lambda e, m: delivered.append(e)
            )
            bound_s = max(STALL_BOUND_MIN_S, SESSION_MS / 1000)
            while time.monotonic() - run.since < bound_s + 10 and not (
                run.failed_over() and delivered
            ):
                run.producer.poll(0.05)
            m = leaders(cluster, run.survivor)
            assert run.failed_over(), f"{run.led} of {TOPIC} left without a leader: {m}"
            assert delivered == [None], delivered  # stuck-0 failed over too, its record taken
            assert cluster.log_events(victim, "broker_fenced_itself")
        finally:
            set_faults()
        run.wait_rejoined("the broker unfenced and in every ISR once its disk answers")


def assert_answers_without_itself(cluster: KafkaCluster, victim: int, led: list[int]) -> None:
    """The broker whose controller process is silent does not name itself as the leader
    of what it led, in Metadata (Kafka's and gRPC's) and in a refused Produce's KIP-951 hint:
    naming itself, it sent librdkafka back to be refused, with no metadata refresh,
    for 5-8 s (before this check; 1 run in 2-3)."""
    from kafka.protocol.metadata import MetadataRequest

    with KafkaConnection(cluster.kafka_ports[victim]) as conn:
        _body, m = conn.request(
            MetadataRequest[12](
                topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)],
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            )
        )
        assert victim not in [b.node_id for b in m.brokers], m.brokers
        named = {p.partition_index: p.leader_id for p in m.topics[0].partitions}
        assert all(named[p] != victim for p in led), named
        batch = build_batch([NewRecord(b"refused")], base_offset=0)
        _body, r = conn.request(produce_request(TOPIC, led[0], batch, version=11))
        answer = r.responses[0].partition_responses[0]
        assert answer.error_code == 6, answer  # NOT_LEADER_OR_FOLLOWER
        hint = answer.current_leader
        assert hint is None or hint.leader_id != victim, hint
    # seglog's own clients ask over gRPC: the same answer there.
    grpc_named = leaders(cluster, victim)
    assert grpc_named is not None and all(grpc_named[p][0] != victim for p in led), grpc_named


def test_a_frozen_controller_process_sends_clients_to_the_new_leaders(tmp_path):
    """Its heartbeats stop, so the active controller fences the broker and moves its
    leaderships, but the broker's metadata comes from the frozen process: it would go on
    taking produces as a leader whose followers have left, each timing out. Records
    sent at the freeze and after the fence are all delivered within 5 s of it."""
    from seglog.harness.processes import child_pid

    with local_run(tmp_path / "cluster") as run:
        cluster, victim = run.cluster, run.victim
        broker = cluster.nodes[victim].proc
        assert broker is not None
        frozen = child_pid(broker.pid, CONTROLLER_MODULE)
        assert frozen is not None, "no controller process under the broker"
        os.kill(frozen, signal.SIGSTOP)
        try:
            run.since = time.monotonic()
            sends = (0.0, 1.0, 2.0)
            for i, at in enumerate(sends):
                while time.monotonic() - run.since < at:
                    run.producer.poll(0.05)
                run.send_all(b"frozen-controller", i * PARTITIONS)
            run.wait_failover_and_deliveries(len(sends) * PARTITIONS, 20)
            slowest = max(run.delivered.values())
            print(f"slowest acks=all produce {slowest:.2f} s after the controller froze")
            assert cluster.log_events(victim, "controller_process_silent")
            assert_answers_without_itself(cluster, victim, run.led)
            assert slowest <= PRODUCE_WITHIN_S, run.delivered
        finally:
            os.kill(frozen, signal.SIGCONT)
        run.wait_rejoined("the broker unfenced and in every ISR once its controller runs")


def test_admin_requests_are_answered_while_the_active_controllers_broker_is_frozen(tmp_path):
    """The broker process beside the active controller freezes; that controller runs on
    and stays active. Kafka's brokers name a live broker as Metadata's controller (any
    broker forwards admin requests to the active controller), and so must seglog's: a
    controller_id that names the frozen broker, which no answer lists, leaves
    librdkafka's admin requests waiting for a broker it has no address for."""
    from confluent_kafka.admin import AdminClient, NewTopic
    from kafka.protocol.metadata import MetadataRequest

    from seglog.client.admin import Admin as SeglogAdmin
    from seglog.client.admin import NewTopic as SeglogNewTopic

    with local_run(tmp_path / "cluster") as run:
        cluster = run.cluster
        grpc_md = cluster.metadata(run.survivor)
        assert grpc_md is not None
        active = grpc_md.controller_id
        other = next(i for i in NODE_IDS if i != active)
        proc = cluster.nodes[active].proc
        assert proc is not None
        os.kill(proc.pid, signal.SIGSTOP)  # the broker only: its controller stays active
        try:
            cluster.wait(
                "the frozen broker fenced",
                lambda: (b := cluster.brokers(other)) is not None and b[active] or None,
            )
            again = cluster.metadata(other)
            assert again is not None and again.controller_id == active, "the controller moved"
            with KafkaConnection(cluster.kafka_ports[other]) as conn:
                _body, m = conn.request(
                    MetadataRequest[12](
                        topics=[],
                        allow_auto_topic_creation=False,
                        include_topic_authorized_operations=False,
                    )
                )
            listed = [b.node_id for b in m.brokers]
            assert active not in listed, listed
            assert m.controller_id in listed, (m.controller_id, listed)
            admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{cluster.kafka_ports[other]}"})
            started = time.monotonic()
            admin.create_topics([NewTopic("while-frozen", 2, 2)])["while-frozen"].result(10)
            print(f"CreateTopics answered in {time.monotonic() - started:.2f} s")
            # seglog's own AdminClient sends admin writes to the active controller's
            # node as gRPC Metadata names it: not while that broker is fenced.
            own = SeglogAdmin(f"127.0.0.1:{cluster.nodes[other].port}", request_timeout_ms=5_000)
            try:
                started = time.monotonic()
                own.create_topics([SeglogNewTopic("while-frozen-grpc", 2, 2)])
                print(f"seglog's CreateTopics answered in {time.monotonic() - started:.2f} s")
            finally:
                own.close()
        finally:
            os.kill(proc.pid, signal.SIGCONT)
        run.wait_rejoined("the thawed broker unfenced and in every ISR")
