"""Replication throttle benchmark: a reassignment's new replica catches up at the
throttled rate, within 20 %.

Three nodes (each a broker and a Raft voter) on loopback; node 1 has
leader.replication.throttled.rate = R and node 3 follower.replication.throttled.rate
= R (bytes/s, --rate-kb). Two topics of one partition each are placed on node 1
and filled with --size-mb of records (acks=1, untimed), then reassigned at the same
time, so each gets a new replica that must catch up:
* `lead`: [1] -> [1, 2], leader.replication.throttled.replicas=0:1 (node 1 throttles
  what it sends to node 2);
* `follow`: [1] -> [1, 3], follower.replication.throttled.replicas=0:3 (node 3
  throttles what it fetches).
The new replica's bytes on disk are sampled every 0.25 s; the rate is the slope
from --settle-s on (the quota, as Kafka's, lets a first burst of up to
replication.quota.window.num - 1 windows' worth through; the nodes run with 3
windows of 1 s) to --until-s. The last stdout line is one JSON object,
with the load average (a shared machine skews wall-clock rates).

    python bench/reassign.py [--rate-kb 384] [--size-mb 16] [--settle-s 6] [--until-s 24]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from seglog.client.admin import Admin, NewTopic
from seglog.client.cluster import TopicPartition
from seglog.client.errors import KafkaError
from seglog.client.producer import Producer
from seglog.harness.node_process import NodeProcess
from seglog.harness.ports import quorum_ports

ROOT = Path(__file__).resolve().parent.parent

TARGET_ERROR = 0.20
WAIT_S = 60.0


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def wait_for(what: str, probe, timeout_s: float = WAIT_S):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.1)


def disk_bytes(node: NodeProcess, topic: str) -> int:
    total = 0
    for d in node.log_dirs:
        pdir = d / f"{topic}-0"
        if pdir.is_dir():
            total += sum(f.stat().st_size for f in pdir.glob("*.log"))
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate-kb", type=int, default=384, help="throttle, KiB/s")
    ap.add_argument("--size-mb", type=int, default=16, help="data per topic, MiB")
    ap.add_argument("--settle-s", type=float, default=6.0)
    ap.add_argument("--until-s", type=float, default=24.0)
    args = ap.parse_args()
    rate = args.rate_kb * 1024
    if args.size_mb * (1 << 20) < rate * args.until_s * 1.2:
        raise SystemExit("--size-mb is too small to last until --until-s at --rate-kb")

    root = Path(tempfile.mkdtemp(prefix="seglog-bench-reassign-"))
    ports, cports, voters = quorum_ports((1, 2, 3))
    common = {
        "controller.quorum.voters": voters,
        "broker.session.timeout.ms": "3000",
        "broker.heartbeat.interval.ms": "500",
        "auto.leader.rebalance.enable": "false",
        # Kafka's quota window: 3 samples of 1 s, so the first burst (up to two
        # windows' worth) settles within seconds; fetches of at most 256 KiB.
        "replication.quota.window.num": "3",
        "replica.fetch.max.bytes": str(256 << 10),
    }
    per_node = {
        1: {"leader.replication.throttled.rate": str(rate)},
        2: {},
        3: {"follower.replication.throttled.rate": str(rate)},
    }
    nodes = {
        i: NodeProcess(root, i, ports[i], {**common, **per_node[i]}, cports[i]) for i in ports
    }
    try:
        starters = [threading.Thread(target=n.start, args=(60.0,)) for n in nodes.values()]
        for t in starters:
            t.start()
        for t in starters:
            t.join()
        bootstrap = ",".join(n.bootstrap for n in nodes.values())
        topics = {"lead": (2, "leader", "0:1"), "follow": (3, "follower", "0:3")}
        with Admin(bootstrap, request_timeout_ms=30_000) as admin:
            wait_for("three brokers", lambda: len(admin.describe_cluster().brokers) == 3)
            config = {"segment.bytes": str(8 << 20)}
            admin.create_topics([NewTopic(t, 1, 1, config) for t in topics])
            admin.alter_partition_reassignments({TopicPartition(t, 0): [1] for t in topics})

            def on_node_1() -> bool:
                try:
                    described = admin.describe_topics(list(topics))
                except KafkaError:
                    return False  # the node asked has not applied the creation yet
                return all(
                    d.partitions[0].replicas == (1,) and d.partitions[0].leader == 1
                    for d in described
                )

            wait_for("both topics on node 1", on_node_1)
            say(f"filling {len(topics)} x {args.size_mb} MiB")
            value = os.urandom(1000)
            with Producer(bootstrap, acks=1, linger_ms=20, batch_size=256 * 1024) as producer:
                for t in topics:
                    for _ in range(args.size_mb * (1 << 20) // 1000):
                        producer.send(t, value=value, partition=0)
                producer.flush(timeout=120)
            sizes = {t: disk_bytes(nodes[1], t) for t in topics}
            for t, (_dest, side, entry) in topics.items():
                admin.alter_configs(t, set={f"{side}.replication.throttled.replicas": entry})
            say("reassigning")
            start = time.monotonic()
            admin.alter_partition_reassignments(
                {TopicPartition(t, 0): [1, dest] for t, (dest, _s, _e) in topics.items()}
            )
            samples: dict[str, list[tuple[float, int]]] = {t: [] for t in topics}
            while time.monotonic() - start < args.until_s:
                now = time.monotonic() - start
                for t, (dest, _s, _e) in topics.items():
                    samples[t].append((now, disk_bytes(nodes[dest], t)))
                time.sleep(0.25)
        results = {}
        for t, (_dest, side, _e) in topics.items():
            window = [(s, b) for s, b in samples[t] if s >= args.settle_s]
            (t0, b0), (t1, b1) = window[0], window[-1]
            measured = (b1 - b0) / (t1 - t0)
            results[f"{side}_throttle"] = {
                "configured_bytes_s": rate,
                "measured_bytes_s": round(measured),
                "ratio": round(measured / rate, 3),
                "bytes_at_settle": b0,
                "source_bytes": sizes[t],
                "met": abs(measured / rate - 1) <= TARGET_ERROR,
            }
            say(f"{t}: {measured / 1024:.0f} KiB/s against {args.rate_kb} KiB/s")
    finally:
        for n in nodes.values():
            n.stop()
        shutil.rmtree(root, ignore_errors=True)
    print(
        json.dumps(
            {
                "bench": "reassign",
                "load_avg": os.getloadavg(),
                "params": vars(args),
                "targets": {k: {"target_error": TARGET_ERROR, **v} for k, v in results.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
