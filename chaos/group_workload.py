"""Consumer groups under chaos: `python -m seglog.chaos groups --seed N --duration S
[--out DIR]`.

A local 3-node cluster (`seglog local up`); a topic of 12 partitions (RF=3,
min.insync.replicas=2); confluent-kafka idempotent producers (acks=all) writing
numbered records; three confluent-kafka consumers in one group (range assignor) that
commit what they consumed, synchronously, every few records; a watcher that keeps
fetching the group's committed offsets. Meanwhile the group's coordinator (the leader
of its `__consumer_offsets` partition, as DescribeGroups names it) is SIGKILLed with
its controller process, then started again, over and over. After healing, the
producers stop and the consumers read on until they have caught up.

Checked:
* at-least-once: every record whose delivery was acknowledged was consumed by the group
  (a failover may deliver some twice: the classic protocol resumes from the last
  committed offset);
* committed positions never go back: every value the watcher fetched for a partition is
  at least the one it fetched before, and every commit the coordinator acknowledged is
  at most the offset finally committed for its partition;
* the group is Stable with three members at the end, and commits were acknowledged
  after each kill (the group found each new coordinator).

The report (report.md, summary.json) goes to the run directory. Exit code 0 when every
check holds, 1 when one fails, 2 on a harness error."""

from __future__ import annotations

import json
import random
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from .implicit_acks import ImplicitAckRecorder
from .local_target import LocalTarget

PARTITIONS = 12
CONSUMERS = 3
COMMIT_EVERY = 20
GROUP = "chaos-group"


def _log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)


class GroupChaos:
    def __init__(self, target: LocalTarget, topic: str, seed: int, rate: float) -> None:
        self.target = target
        self.topic = topic
        self.seed = seed
        self.rng = random.Random(seed)
        self.rate = rate
        self.stop_producing = threading.Event()
        self.stop_consuming = threading.Event()
        self.lock = threading.Lock()
        self.acknowledged: set[bytes] = set()
        self.produce_failures = 0
        # librdkafka's implicit acknowledgements (chaos/implicit_acks.py)
        self.implicit_acks: list[dict[str, Any]] = []
        self.consumed: set[bytes] = set()
        self.duplicates = 0
        self.commits_acked: dict[int, int] = {}
        self.commit_times: list[float] = []
        self.commit_failures = 0
        self.watched: dict[int, list[int]] = defaultdict(list)
        self.backwards: list[str] = []
        self.kills: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.threads: list[threading.Thread] = []

    # --- clients ------------------------------------------------------------------

    def producer(self, index: int) -> None:
        from confluent_kafka import Producer

        recorder = ImplicitAckRecorder(f"p{index}", self.implicit_acks.append)
        p = Producer(
            {
                "bootstrap.servers": self.target.kafka_bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "message.timeout.ms": 120_000,
                # librdkafka's implicit acknowledgements, held against what was consumed
                # (chaos/implicit_acks.py).
                "debug": "eos",
                "log_level": 7,
                "logger": recorder.logger(),
            }
        )

        def delivered(err: Any, msg: Any) -> None:
            with self.lock:
                if err is None:
                    self.acknowledged.add(msg.value())
                else:
                    self.produce_failures += 1

        n = 0
        rng = random.Random(f"{self.seed}-p{index}")
        while not self.stop_producing.is_set():
            value = b"p%d-%08d" % (index, n)
            # The partition is chosen here, not by librdkafka's partitioner: the
            # recorder maps an implicit ack's per-partition message ids to values.
            partition = rng.randrange(PARTITIONS)
            p.produce(self.topic, value, partition=partition, on_delivery=delivered)
            recorder.sent(partition, value.decode())
            n += 1
            p.poll(0)
            time.sleep(1 / self.rate)
        p.flush(120)

    def consumer(self, index: int) -> None:
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        c = Consumer(
            {
                "bootstrap.servers": self.target.kafka_bootstrap,
                "group.id": GROUP,
                "client.id": f"chaos-consumer-{index}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 10_000,
                "heartbeat.interval.ms": 1_000,
                "partition.assignment.strategy": "range",
            }
        )
        c.subscribe([self.topic])
        pending: dict[int, int] = {}
        since_commit = 0
        try:
            while not self.stop_consuming.is_set():
                m = c.poll(0.1)
                if m is None or m.error():
                    continue
                with self.lock:
                    if m.value() in self.consumed:
                        self.duplicates += 1
                    self.consumed.add(m.value())
                pending[m.partition()] = m.offset() + 1
                since_commit += 1
                if since_commit < COMMIT_EVERY:
                    continue
                offsets = [TopicPartition(self.topic, p, o) for p, o in pending.items()]
                try:
                    done = c.commit(offsets=offsets, asynchronous=False) or []
                except KafkaException:
                    with self.lock:
                        self.commit_failures += 1
                    continue
                with self.lock:
                    for tp in done:
                        if tp.error is None:
                            old = self.commits_acked.get(tp.partition, 0)
                            self.commits_acked[tp.partition] = max(old, tp.offset)
                    self.commit_times.append(time.monotonic())
                pending = {}
                since_commit = 0
        finally:
            c.close()

    def watcher(self) -> None:
        """Fetch the committed offsets again and again: none may ever go back."""
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        c = Consumer({"bootstrap.servers": self.target.kafka_bootstrap, "group.id": GROUP})
        tps = [TopicPartition(self.topic, p) for p in range(PARTITIONS)]
        try:
            while not self.stop_consuming.is_set():
                try:
                    got = c.committed(tps, timeout=10)
                except KafkaException:
                    time.sleep(0.5)
                    continue
                with self.lock:
                    for tp in got:
                        if tp.error is not None or tp.offset < 0:
                            continue
                        seen = self.watched[tp.partition]
                        if seen and tp.offset < seen[-1]:
                            self.backwards.append(
                                f"partition {tp.partition}: {tp.offset} after {seen[-1]}"
                            )
                        if not seen or seen[-1] != tp.offset:
                            seen.append(tp.offset)
                time.sleep(0.3)
        finally:
            c.close()

    def start(self, producers: int) -> None:
        for i in range(producers):
            self.threads.append(threading.Thread(target=self.producer, args=(i,), daemon=True))
        for i in range(CONSUMERS):
            self.threads.append(threading.Thread(target=self.consumer, args=(i,), daemon=True))
        self.threads.append(threading.Thread(target=self.watcher, daemon=True))
        for t in self.threads:
            t.start()

    # --- faults -------------------------------------------------------------------

    def coordinator(self) -> int | None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.target.kafka_bootstrap})
        try:
            group = admin.describe_consumer_groups([GROUP])[GROUP].result(10)
        except Exception:  # noqa: BLE001 - no answer now: no coordinator known
            return None
        return None if group.coordinator is None else int(group.coordinator.id)

    def kill_coordinator(self, down_s: float) -> None:
        node = self.coordinator()
        if node is None or self.target.is_down(node):
            _log("[groups] no coordinator to kill now")
            return
        _log(f"[groups] SIGKILL coordinator node {node}")
        at = time.monotonic()
        self.target.kill(node, "KILL")
        time.sleep(down_s)
        _log(f"[groups] start node {node}")
        self.target.start(node)
        self.kills.append({"node": node, "at": at, "down_s": down_s})


def run_groups(
    seed: int, duration: float, out: Path, *, rate: float = 100.0, producers: int = 2
) -> tuple[int, dict[str, Any]]:
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    target = LocalTarget(out / "cluster", seed)
    topic = f"chaos-groups-{seed}"
    summary: dict[str, Any] = {"scenario": "groups-kill-coordinator", "seed": seed}
    chaos = GroupChaos(target, topic, seed, rate)
    try:
        _log(f"[groups] cluster up in {out}")
        target.up()
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": target.kafka_bootstrap})
        admin.create_topics([NewTopic(topic, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[
            topic
        ].result(60)
        chaos.start(producers)
        time.sleep(8)  # the group forms (Kafka's 3 s initial rebalance delay) and commits
        deadline = time.monotonic() + duration
        while time.monotonic() < deadline:
            chaos.kill_coordinator(down_s=chaos.rng.choice((2.0, 5.0, 8.0)))
            time.sleep(chaos.rng.uniform(4.0, 10.0))
        healed = target.heal()
        for node in target.node_ids:
            if target.is_down(node):
                target.start(node)
        _log(f"[groups] healed: {healed}; stopping the producers")
        chaos.stop_producing.set()
        for t in chaos.threads[:producers]:
            t.join(150)
        # The consumers read on until every acknowledged record is in (bounded).
        drain_deadline = time.monotonic() + 120
        while time.monotonic() < drain_deadline:
            with chaos.lock:
                missing = len(chaos.acknowledged - chaos.consumed)
            if missing == 0:
                break
            time.sleep(1)
        time.sleep(3)  # a last round of commits and fetches
        group = None
        try:
            # (the AdminClient must outlive its futures)
            group = admin.describe_consumer_groups([GROUP])[GROUP].result(30)
        except Exception as e:  # noqa: BLE001 - reported as a failed check
            chaos.errors.append(f"DescribeGroups failed at the end: {type(e).__name__} {e}")
        chaos.stop_consuming.set()
        for t in chaos.threads[producers:]:
            t.join(60)
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": target.kafka_bootstrap, "group.id": GROUP})
        final = {
            tp.partition: tp.offset
            for tp in c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
        }
        c.close()
    except Exception as e:  # noqa: BLE001 - a harness error, reported
        chaos.errors.append(f"harness: {type(e).__name__}: {e}")
        group, final = None, {}
    finally:
        chaos.stop_producing.set()
        chaos.stop_consuming.set()
        try:
            target.down()
        except Exception as e:  # noqa: BLE001
            chaos.errors.append(f"down: {e}")
    lost = sorted(chaos.acknowledged - chaos.consumed)
    implicit = [v for e in chaos.implicit_acks for v in e["values"]]
    implicit_missing = sorted(v for v in implicit if v.encode() not in chaos.consumed)
    behind = {
        p: (final.get(p), acked)
        for p, acked in chaos.commits_acked.items()
        if final.get(p, -1) < acked
    }
    resumed_after = [
        k for k in chaos.kills if any(t > k["at"] + k["down_s"] for t in chaos.commit_times)
    ]
    checks = {
        "at_least_once (every acknowledged record consumed)": not lost,
        "every implicitly acknowledged record consumed": not implicit_missing,
        "committed positions never went back (watcher)": not chaos.backwards,
        "no acknowledged commit above the final committed offset": not behind,
        "commits acknowledged after every coordinator kill": bool(chaos.kills)
        and len(resumed_after) == len(chaos.kills),
        "group Stable with 3 members at the end": group is not None
        and group.state.name == "STABLE"
        and len(group.members) == CONSUMERS,
    }
    summary.update(
        {
            "duration_s": duration,
            "kills": [{"node": k["node"], "down_s": k["down_s"]} for k in chaos.kills],
            "acknowledged_records": len(chaos.acknowledged),
            "produce_failures": chaos.produce_failures,
            "consumed_records": len(chaos.consumed),
            "redelivered_records": chaos.duplicates,
            "lost_records": len(lost),
            "lost_examples": [v.decode() for v in lost[:5]],
            "implicit_acks": len(implicit),
            "implicit_ack_missing": len(implicit_missing),
            "implicit_ack_missing_examples": implicit_missing[:5],
            "commits_acknowledged": len(chaos.commit_times),
            "commit_failures": chaos.commit_failures,
            "committed_final": final,
            "watched_values": sum(len(v) for v in chaos.watched.values()),
            "went_back": chaos.backwards[:10],
            "behind_final": behind,
            "errors": chaos.errors,
            "checks": checks,
        }
    )
    ok = all(checks.values()) and not chaos.errors
    summary["result"] = "PASS" if ok else "FAIL"
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    (out / "report.md").write_text(report(summary))
    _log(f"[groups] {summary['result']}: {json.dumps(checks)}")
    if chaos.errors and any(e.startswith("harness") for e in chaos.errors):
        return 2, summary
    return (0 if ok else 1), summary


def report(s: dict[str, Any]) -> str:
    kills = ", ".join(f"node {k['node']} down {k['down_s']:g} s" for k in s["kills"])
    lines = [
        f"# Chaos: consumer groups, coordinator SIGKILLed (seed {s['seed']})",
        "",
        f"Result: **{s['result']}**",
        "",
        f"A local 3-node cluster, a 12-partition topic (RF=3, min.insync.replicas=2), "
        f"idempotent acks=all producers, three confluent-kafka consumers in one group "
        f"committing synchronously every {COMMIT_EVERY} records, and a watcher fetching "
        f"the committed offsets. For {s['duration_s']:g} s the group's coordinator was "
        f"SIGKILLed (with its controller process) and started again: "
        f"{len(s['kills'])} kills "
        f"({kills}).",
        "",
        "| check | holds |",
        "|---|---|",
    ]
    lines += [f"| {name} | {'yes' if ok else '**no**'} |" for name, ok in s["checks"].items()]
    lines += [
        "",
        "| figure | value |",
        "|---|---|",
        f"| records acknowledged to producers | {s['acknowledged_records']} |",
        f"| records consumed by the group | {s['consumed_records']} |",
        f"| records delivered again (after a failover or rebalance) | {s['redelivered_records']} |",
        f"| acknowledged records never consumed | {s['lost_records']} |",
        f"| records librdkafka acknowledged implicitly | {s['implicit_acks']} |",
        f"| of those, never consumed | {s['implicit_ack_missing']} |",
        f"| commits acknowledged / failed | {s['commits_acknowledged']} / {s['commit_failures']} |",
        f"| committed offsets the watcher saw change | {s['watched_values']} |",
        "",
    ]
    if s["errors"]:
        lines += ["Errors:", ""] + [f"- {e}" for e in s["errors"]] + [""]
    return "\n".join(lines)
