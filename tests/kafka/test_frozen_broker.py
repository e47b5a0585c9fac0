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
REQUEST_TIMEOUT_MS = 1500


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
                "topic.metadata.refresh.interval.ms": 1000,
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
