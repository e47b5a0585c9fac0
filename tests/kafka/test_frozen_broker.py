"""A node whose broker process freezes while its controller process runs on (what a
deadlock, a process stuck on a disk or a wedged loop looks like from outside, issue
39): the controller process stops relaying the broker's heartbeats, the broker is fenced
within broker.session.timeout.ms, every partition it led fails over, confluent-kafka's
acks=all produce to every partition succeeds within 5 s of the freeze, and after SIGCONT
the broker is unfenced and back in every ISR. With `seglog local up`'s failure-detection
profile. On main at 176dae4 the node was never fenced and nothing failed over."""

from __future__ import annotations

import os
import signal
import time

import pytest
from kafka_cluster import KafkaCluster
from three_node_cluster import NODE_IDS, topic_of

from seglog.node.local_cluster import LOCAL_DEFAULTS

ck = pytest.importorskip("confluent_kafka")

TOPIC = "frozen"
PARTITIONS = 6
SESSION_MS = int(LOCAL_DEFAULTS["broker.session.timeout.ms"])
ELECTION_MS = int(LOCAL_DEFAULTS["controller.quorum.election.timeout.ms"])
PRODUCE_WITHIN_S = 5.0
REQUEST_TIMEOUT_MS = 1500  # a frozen leader never answers: librdkafka gives up and retries


class LocalProfileCluster(KafkaCluster):
    session_timeout_ms = SESSION_MS


def leaders(cluster: KafkaCluster, asked: int) -> dict[int, tuple[int, tuple[int, ...]]] | None:
    """partition -> (leader, isr) in `asked`'s Metadata (None: no answer)."""
    t = topic_of(cluster.metadata(asked, [TOPIC]), TOPIC)
    if t is None:
        return None
    return {p.partition: (p.leader_id, tuple(sorted(p.isr_nodes))) for p in t.partitions}


def test_frozen_broker_with_live_controller_fails_over_and_rejoins(tmp_path):
    from confluent_kafka.admin import AdminClient, NewTopic

    profile = {k: v for k, v in LOCAL_DEFAULTS.items() if k != "num.partitions"}
    cluster = LocalProfileCluster(tmp_path / "cluster", profile)
    victim_proc = None
    try:
        cluster.start_all()
        b = cluster.kafka_bootstrap
        admin = AdminClient({"bootstrap.servers": b})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
        full = tuple(NODE_IDS)
        before = cluster.wait(
            "leaders with full ISRs",
            lambda: (
                (m := leaders(cluster, 1))
                and len(m) == PARTITIONS
                and all(lead > 0 and isr == full for lead, isr in m.values())
                and m
            ),
        )
        victim = before[0][0]
        led = sorted(p for p, (lead, _) in before.items() if lead == victim)
        survivor = next(i for i in NODE_IDS if i != victim)
        producer = ck.Producer(
            {
                "bootstrap.servers": b,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 0,
                # A request to the frozen leader is never answered: give it up after
                # this and retry (librdkafka then asks for the partition's new leader).
                "request.timeout.ms": REQUEST_TIMEOUT_MS,
                "socket.timeout.ms": REQUEST_TIMEOUT_MS,
                "message.timeout.ms": 30_000,
            }
        )
        for p in range(PARTITIONS):
            producer.produce(TOPIC, value=b"warm", partition=p)
        assert producer.flush(30) == 0

        victim_proc = cluster.nodes[victim].proc
        assert victim_proc is not None
        os.kill(victim_proc.pid, signal.SIGSTOP)  # the broker only: its controller runs on
        frozen_at = time.monotonic()

        delivered: dict[int, float] = {}
        failed: list[object] = []

        def on_delivery(err, msg):  # noqa: ANN202
            if err is None:
                delivered[msg.partition()] = time.monotonic() - frozen_at
            else:
                failed.append((msg.partition(), err))

        for p in range(PARTITIONS):
            producer.produce(TOPIC, value=b"after-freeze", partition=p, on_delivery=on_delivery)
        failed_over_s: float | None = None
        while time.monotonic() - frozen_at < 20:
            producer.poll(0.05)
            m = leaders(cluster, survivor)
            if (
                failed_over_s is None
                and m is not None
                and all(m[p][0] not in (victim, -1) for p in led)
            ):
                failed_over_s = time.monotonic() - frozen_at
            if failed_over_s is not None and len(delivered) + len(failed) == PARTITIONS:
                break
        assert not failed, failed
        assert failed_over_s is not None, f"partitions {led} never left node {victim}"
        # Fenced a session after its pulses stopped (at most a third of a session old),
        # then one election per partition by the controller.
        assert failed_over_s <= (SESSION_MS + 2 * ELECTION_MS) / 1000, failed_over_s
        assert sorted(delivered) == list(range(PARTITIONS)), delivered
        slowest = max(delivered.values())
        assert slowest <= PRODUCE_WITHIN_S, delivered
        print(f"failed over in {failed_over_s:.2f} s; slowest acks=all produce {slowest:.2f} s")
        fenced = cluster.brokers(survivor)
        assert fenced is not None and fenced[victim], fenced
        own_log = cluster.log_events(victim, "broker_not_serving")
        assert own_log, "the victim's controller process did not log broker_not_serving"

        os.kill(victim_proc.pid, signal.SIGCONT)
        victim_proc = None
        # Unfenced, and back in every ISR once it caught up.
        cluster.wait(
            "the thawed broker unfenced and in every ISR",
            lambda: (
                cluster.brokers(survivor) == dict.fromkeys(NODE_IDS, False)
                and (m := leaders(cluster, survivor))
                and all(isr == full for _, isr in m.values())
                or None
            ),
            timeout_s=30,
        )
        assert cluster.log_events(victim, "broker_serving")
        for p in range(PARTITIONS):
            producer.produce(TOPIC, value=b"after-thaw", partition=p)
        assert producer.flush(30) == 0
        assert cluster.crashes() == []
    finally:
        if victim_proc is not None and victim_proc.poll() is None:
            os.kill(victim_proc.pid, signal.SIGCONT)
        cluster.stop_all()


def test_a_broker_whose_disk_stops_answering_fences_itself_and_rejoins(tmp_path, monkeypatch):
    """The broker's disk blocks (the fault seam's write_block: writes neither fail nor
    return) while every process runs: a produce to a partition it leads hangs in its
    segment write. Past the stall bound (max(session, 5 s)) the broker says so
    (`broker_stalled`, seglog_broker_stalled 1) and its controller process fences it at
    once, so its leaderships move and the retried produce succeeds; once the disk
    answers it is unfenced and back in every ISR."""
    import json
    import urllib.request

    from confluent_kafka.admin import AdminClient, NewTopic
    from prometheus_client.parser import text_string_to_metric_families

    from seglog.node.remote_controller import STALL_BOUND_MIN_S

    faults = tmp_path / "faults.json"
    faults.write_text("{}")
    monkeypatch.setenv("SEGLOG_FAULT_INJECTION_FILE", str(faults))

    def set_faults(**f: object) -> None:
        tmp = faults.with_suffix(".tmp")
        tmp.write_text(json.dumps(f))
        os.replace(tmp, faults)

    profile = {k: v for k, v in LOCAL_DEFAULTS.items() if k != "num.partitions"}
    cluster = LocalProfileCluster(
        tmp_path / "cluster", {**profile, "metrics.port": "0", "metrics.host": "127.0.0.1"}
    )
    try:
        cluster.start_all()
        b = cluster.kafka_bootstrap
        admin = AdminClient({"bootstrap.servers": b})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
        full = tuple(NODE_IDS)
        before = cluster.wait(
            "leaders with full ISRs",
            lambda: (
                (m := leaders(cluster, 1))
                and len(m) == PARTITIONS
                and all(lead > 0 and isr == full for lead, isr in m.values())
                and m
            ),
        )
        victim = before[0][0]
        led = sorted(p for p, (lead, _) in before.items() if lead == victim)
        survivor = next(i for i in NODE_IDS if i != victim)
        port = next(
            int(e["metrics_port"]) for e in cluster.log_events(victim, "node_started")
        )

        def stalled_gauge() -> float:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                text = r.read().decode()
            for family in text_string_to_metric_families(text):
                for s in family.samples:
                    if s.name == "seglog_broker_stalled":
                        return float(s.value)
            raise AssertionError("no seglog_broker_stalled")

        assert stalled_gauge() == 0
        producer = ck.Producer(
            {
                "bootstrap.servers": b,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 0,
                "request.timeout.ms": REQUEST_TIMEOUT_MS,
                "socket.timeout.ms": REQUEST_TIMEOUT_MS,
                "message.timeout.ms": 30_000,
            }
        )
        set_faults(write_block=True, node_ids=[victim])
        blocked_at = time.monotonic()
        delivered: dict[int, float] = {}
        failed: list[object] = []

        def on_delivery(err, msg):  # noqa: ANN202
            if err is None:
                delivered[msg.partition()] = time.monotonic() - blocked_at
            else:
                failed.append((msg.partition(), err))

        for p in range(PARTITIONS):
            producer.produce(TOPIC, value=b"blocked-disk", partition=p, on_delivery=on_delivery)
        bound_s = max(STALL_BOUND_MIN_S, SESSION_MS / 1000)
        failed_over_s = None
        saw_gauge = False
        while time.monotonic() - blocked_at < bound_s + 15:
            producer.poll(0.1)
            m = leaders(cluster, survivor)
            if failed_over_s is None and m and all(m[p][0] not in (victim, -1) for p in led):
                failed_over_s = time.monotonic() - blocked_at
            if failed_over_s is not None and not saw_gauge:
                saw_gauge = stalled_gauge() == 1
            if saw_gauge and len(delivered) + len(failed) == PARTITIONS:
                break
        assert not failed, failed
        assert failed_over_s is not None, f"partitions {led} never left node {victim}"
        # The stall bound, then a pulse and the controlled shutdown's commit.
        assert bound_s <= failed_over_s <= bound_s + 2.0, failed_over_s
        assert saw_gauge, "seglog_broker_stalled never said 1 on the stalled broker"
        assert sorted(delivered) == list(range(PARTITIONS)), delivered
        print(f"self-fenced {failed_over_s:.2f} s after the disk blocked; {delivered}")
        assert cluster.log_events(victim, "broker_stalled")
        assert cluster.log_events(victim, "broker_fenced_itself")

        set_faults()
        cluster.wait(
            "the broker unfenced and in every ISR once its disk answers",
            lambda: (
                cluster.brokers(survivor) == dict.fromkeys(NODE_IDS, False)
                and (m := leaders(cluster, survivor))
                and all(isr == full for _, isr in m.values())
                or None
            ),
            timeout_s=30,
        )
        assert stalled_gauge() == 0
        assert cluster.log_events(victim, "broker_serving_again")
        for p in range(PARTITIONS):
            producer.produce(TOPIC, value=b"after", partition=p)
        assert producer.flush(30) == 0
        assert cluster.crashes() == []
    finally:
        set_faults()
        cluster.stop_all()


def test_a_frozen_controller_process_sends_clients_to_the_new_leaders(tmp_path):
    """The other gray failure: a node's controller process freezes while its broker
    serves. Its heartbeats stop, so the active controller fences the broker and moves its
    leaderships, but the broker's metadata comes from that frozen process: it would go
    on taking produces as a leader whose followers have left (each timing out). Its
    controller's pulses stop too, so after a session it refuses produces
    (NOT_LEADER_OR_FOLLOWER, `controller_process_silent`) and confluent-kafka's acks=all
    produce to every partition succeeds within 5 s of the freeze; thawed, the broker
    is unfenced and back in every ISR."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from seglog.chaos.targets import child_pid

    profile = {k: v for k, v in LOCAL_DEFAULTS.items() if k != "num.partitions"}
    cluster = LocalProfileCluster(tmp_path / "cluster", profile)
    frozen: int | None = None
    try:
        cluster.start_all()
        b = cluster.kafka_bootstrap
        admin = AdminClient({"bootstrap.servers": b})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3)])[TOPIC].result(30)
        full = tuple(NODE_IDS)
        before = cluster.wait(
            "leaders with full ISRs",
            lambda: (
                (m := leaders(cluster, 1))
                and len(m) == PARTITIONS
                and all(lead > 0 and isr == full for lead, isr in m.values())
                and m
            ),
        )
        victim = before[0][0]
        survivor = next(i for i in NODE_IDS if i != victim)
        producer = ck.Producer(
            {
                "bootstrap.servers": b,
                "acks": "all",
                "enable.idempotence": True,
                "linger.ms": 0,
                "request.timeout.ms": REQUEST_TIMEOUT_MS,
                "socket.timeout.ms": REQUEST_TIMEOUT_MS,
                # librdkafka's default metadata refresh (5 min): only the stale
                # leader's answer can send it elsewhere in time.
                "message.timeout.ms": 30_000,
            }
        )
        for p in range(PARTITIONS):
            producer.produce(TOPIC, value=b"warm", partition=p)
        assert producer.flush(30) == 0
        broker_proc = cluster.nodes[victim].proc
        assert broker_proc is not None
        frozen = child_pid(broker_proc.pid, b"seglog.node.controller_process")
        assert frozen is not None, "no controller process under the broker"
        os.kill(frozen, signal.SIGSTOP)
        frozen_at = time.monotonic()
        delivered: dict[int, float] = {}
        failed: list[object] = []

        def on_delivery(err, msg, key):  # noqa: ANN202
            if err is None:
                delivered[key] = time.monotonic() - frozen_at
            else:
                failed.append((msg.partition(), err))

        # Records sent at the freeze and after the fence (a session on): all delivered
        # within 5 s of the freeze.
        sends = (0.0, 1.0, 2.0)
        for at in sends:
            while time.monotonic() - frozen_at < at:
                producer.poll(0.05)
            for p in range(PARTITIONS):
                key = int(at * 10) * PARTITIONS + p
                producer.produce(
                    TOPIC,
                    value=b"frozen-ctl",
                    partition=p,
                    on_delivery=lambda err, msg, key=key: on_delivery(err, msg, key),
                )
        total = len(sends) * PARTITIONS
        while len(delivered) + len(failed) < total and time.monotonic() - frozen_at < 20:
            producer.poll(0.05)
        assert not failed, failed
        assert len(delivered) == total, delivered
        slowest = max(delivered.values())
        print(f"slowest acks=all produce {slowest:.2f} s after the controller froze")
        assert slowest <= PRODUCE_WITHIN_S, delivered
        assert cluster.log_events(victim, "controller_process_silent")

        os.kill(frozen, signal.SIGCONT)
        frozen = None
        cluster.wait(
            "the broker unfenced and in every ISR once its controller runs",
            lambda: (
                cluster.brokers(survivor) == dict.fromkeys(NODE_IDS, False)
                and (m := leaders(cluster, survivor))
                and all(isr == full for _, isr in m.values())
                or None
            ),
            timeout_s=30,
        )
        for p in range(PARTITIONS):
            producer.produce(TOPIC, value=b"after", partition=p)
        assert producer.flush(30) == 0
        assert cluster.crashes() == []
    finally:
        if frozen is not None:
            os.kill(frozen, signal.SIGCONT)
        cluster.stop_all()
