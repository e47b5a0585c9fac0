"""Scale benchmark: how a 3-node `seglog local up` cluster behaves as the partition
count grows (10, 100, 1000, 5000 by default; RF=3, min.insync.replicas=2).

Every cluster is started by `seglog local up` itself, so it runs with its settings: the
Kafka listener (PLAINTEXT) on one event loop per node, followers fetching over Kafka's
protocol (replica.fetch.protocol=kafka), the local failure-detection profile (600 ms
broker sessions, 500 ms elections); the JSON records the settings read back from node
1's server.properties. For each count, on a fresh cluster:

* create_s — CreateTopics until every node's Metadata shows every partition with a
  leader and a full ISR;
* idle_cores — CPU of all node processes (brokers and their controller processes),
  in cores, over --idle-seconds with the topic idle, --settle-seconds after it was
  created; idle_threads — the same window per process, with its busiest threads
  (cores, context switches per second; bench/thread_cpu.py names them with py-spy);
* per client kind of --clients, one after the other on the same topic: records_per_s,
  p50_ms, p99_ms — --records records of 200 bytes, keys spread over every partition,
  acks=all, idempotent, linger 5 ms, sent as fast as the client takes them (300,000
  by default: at 1,000 partitions a few tens of thousands of records are a burst of a
  few dozen records per partition, and its rate is the first round trip's latency
  rather than the rate the cluster sustains; docs/perf/scale.md); the latency
  of each record is send()/produce() to its acknowledgement (delivery report); every
  record must succeed. `producer`: seglog's own gRPC Producer, with its own split of a
  record's time (record_queue_time_avg_ms, request_latency_avg_ms,
  records_per_request_avg: Kafka's producer metrics); `confluent-kafka`: librdkafka on
  the Kafka listeners (its defaults otherwise);
* rss_mib, threads — per node (broker + controller process), after the produce phases;
* controller_changes, fencings — active-controller elections after the first one and
  brokers fenced, from the nodes' JSON logs, over the whole run of that count.

Issue 40's targets, reported in "targets" when the counts include them: at 1,000
partitions each client's records/s >= 0.5x its 10-partition figure, and the idle CPU
at 1,000 partitions <= 0.1 core.

It writes a plot (--plot, default docs/perf/scale.png; "" for none) and prints one JSON
object as its last line. With 2 cores the client and the three nodes share the machine;
quote the load average with the figures (the JSON has it before and after each count).

    python bench/scale.py [--partitions 10,100,1000,5000] [--records N]
                          [--clients producer,confluent-kafka] [--idle-seconds S]
                          [--settle-seconds S] [--plot PATH] [--dir D]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from seglog.bench.measure import librdkafka_produce_until, percentile, producer_time_split
from seglog.bench.thread_cpu import TICKS, busiest, cores, read_threads, thread_names
from seglog.client.admin import Admin, NewTopic
from seglog.client.producer import Producer
from seglog.harness.local_cluster import bootstrap_servers
from seglog.harness.ports import consecutive_free_ports
from seglog.node.config import NodeConfig
from seglog.proto import client_pb2 as pb
from seglog.proto import client_pb2_grpc

ROOT = Path(__file__).resolve().parent.parent
NODES = 3
CLIENTS = ("producer", "confluent-kafka")
VALUE = b"x" * 200


def say(*args: object) -> None:
    print(*args, file=sys.stderr, flush=True)


class LocalCluster:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.base = consecutive_free_ports(NODES, random.Random())
        self.bootstrap = bootstrap_servers(self.base, NODES)
        self.kafka_bootstrap = bootstrap_servers(self.base, NODES, "PLAINTEXT")

    def up(self) -> None:
        subprocess.run(
            [sys.executable, "-m", "seglog.cli", "local", "up", "--nodes", str(NODES),
             "--data-dir", str(self.root), "--base-port", str(self.base), "--detach",
             "--no-console"],  # its /metrics scrapes would count in the nodes' idle CPU
            check=True, capture_output=True, timeout=180,
        )

    def down(self) -> None:
        subprocess.run(
            [sys.executable, "-m", "seglog.cli", "local", "down", "--data-dir",
             str(self.root)],
            capture_output=True, timeout=120,
        )

    def settings(self) -> dict[str, str]:
        """How node 1 runs its data path, read back from its server.properties as the
        node reads them (defaults included)."""
        config = NodeConfig.load(self.root / "node-1" / "server.properties")
        return {
            "kafka.listener.model": config.kafka_listener_model,
            "replica.fetch.protocol": config.replica_fetch_protocol,
            "inter.broker.listener.name": config.inter_broker_listener_name,
        }

    def pids(self) -> dict[int, list[int]]:
        """node -> [broker pid, controller pid, ...]."""
        state = json.loads((self.root / "cluster.json").read_text())
        out = {}
        for i, pid in enumerate(state["pids"], start=1):
            pids = [int(pid)]
            try:
                children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
                pids += [int(c) for c in children]
            except OSError:
                pass
            out[i] = pids
        return out

    def cpu_s(self) -> float:
        total = 0
        for pids in self.pids().values():
            for pid in pids:
                try:
                    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                    total += int(fields[11]) + int(fields[12])
                except (OSError, IndexError):
                    pass
        return total / TICKS

    def memory_and_threads(self) -> dict[int, tuple[float, int]]:
        out = {}
        for node, pids in self.pids().items():
            rss, threads = 0.0, 0
            for pid in pids:
                try:
                    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                        if line.startswith("VmRSS:"):
                            rss += int(line.split()[1]) / 1024
                        elif line.startswith("Threads:"):
                            threads += int(line.split()[1])
                except OSError:
                    pass
            out[node] = (rss, threads)
        return out

    def events(self, event: str) -> int:
        n = 0
        for i in range(1, NODES + 1):
            log = self.root / f"node-{i}" / "node.log"
            n += log.read_text(errors="replace").count(f'"event":"{event}"')
        return n

    def full_isrs(self, topic: str, partitions: int) -> bool:
        for address in self.bootstrap.split(","):
            try:
                import grpc

                with grpc.insecure_channel(address) as ch:
                    md = client_pb2_grpc.SegLogStub(ch).Metadata(
                        pb.MetadataRequest(topics=[topic]), timeout=10
                    )
            except Exception:  # noqa: BLE001 - not ready yet
                return False
            t = next((t for t in md.topics if t.name == topic and not t.error_code), None)
            if t is None or len(t.partitions) != partitions:
                return False
            if any(len(p.isr_nodes) != NODES or p.leader_id < 0 for p in t.partitions):
                return False
        return True


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def latency_summary(records: int, elapsed: float, latencies: list[float]) -> dict[str, Any]:
    return {
        "records_per_s": round(records / elapsed),
        "p50_ms": round(statistics.median(latencies), 1),
        "p99_ms": round(percentile(latencies, 99), 1),
    }


def produce_producer(cluster: LocalCluster, records: int) -> dict[str, Any]:
    """seglog's gRPC Producer: `records` keyed records as fast as send() takes them."""
    latencies: list[float] = []
    failures: list[BaseException] = []
    lock = threading.Lock()
    producer = Producer(cluster.bootstrap, acks="all", enable_idempotence=True, linger_ms=5)
    try:
        producer.send("scale", key=b"warm", value=VALUE).get(timeout=60)
        start = time.perf_counter()
        for n in range(records):
            t = time.perf_counter()
            f = producer.send("scale", key=b"%d" % n, value=VALUE)

            def ok(_md: object, t: float = t) -> None:
                with lock:
                    latencies.append((time.perf_counter() - t) * 1000)

            def bad(e: BaseException) -> None:
                with lock:
                    failures.append(e)

            f.add_callback(ok)
            f.add_errback(bad)
        producer.flush(timeout=600)
        elapsed = time.perf_counter() - start
        m = producer.metrics()  # a partition's next batch waits for its request in flight
    finally:
        producer.close(timeout=30)
    if failures:
        raise RuntimeError(f"producer: {len(failures)} records failed, first: {failures[0]!r}")
    return latency_summary(records, elapsed, latencies) | producer_time_split(m, 1)


def produce_confluent(cluster: LocalCluster, records: int) -> dict[str, Any]:
    """confluent-kafka on the Kafka listeners: the same records, the same settings."""
    import confluent_kafka as ck

    latencies: list[float] = []
    failures: list[object] = []
    producer = ck.Producer(
        {
            "bootstrap.servers": cluster.kafka_bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": 5,
        }
    )
    producer.produce("scale", key=b"warm", value=VALUE)
    if producer.flush(60) != 0:
        raise RuntimeError("confluent-kafka: the warm-up record was not delivered in 60 s")

    def produce_one(n: int) -> None:
        t = time.perf_counter()

        def report(err: object, _msg: object) -> None:
            if err is not None:
                failures.append(err)
            else:
                latencies.append((time.perf_counter() - t) * 1000)

        producer.produce("scale", key=b"%d" % n, value=VALUE, on_delivery=report)

    start = time.perf_counter()
    librdkafka_produce_until(
        producer, float("inf"), produce_one, 0, "confluent-kafka: records undelivered", records
    )
    elapsed = time.perf_counter() - start
    if failures:
        raise RuntimeError(f"confluent-kafka: {len(failures)} failed, first: {failures[0]}")
    return latency_summary(records, elapsed, latencies)


PRODUCE: dict[str, Callable[[LocalCluster, int], dict[str, Any]]] = {
    "producer": produce_producer,
    "confluent-kafka": produce_confluent,
}


def run_count(
    partitions: int,
    records: int,
    idle_s: float,
    settle_s: float,
    root: Path,
    client_kinds: Sequence[str],
) -> dict[str, object]:
    load_before = loadavg()
    cluster = LocalCluster(root)
    say(f"[{partitions} partitions] starting a cluster in {root}")
    cluster.up()
    try:
        admin = Admin(cluster.bootstrap, request_timeout_ms=120_000)
        started = time.perf_counter()
        admin.create_topics([NewTopic("scale", partitions, NODES)])
        deadline = time.monotonic() + 600
        while not cluster.full_isrs("scale", partitions):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{partitions} partitions: ISRs not full within 600 s")
            time.sleep(0.2)
        create_s = time.perf_counter() - started
        say(f"  created in {create_s:.1f} s")
        time.sleep(settle_s)  # the new partitions' first fetches and checkpoints pass
        processes = [
            (node, "broker" if k == 0 else "controller", pid)
            for node, pids in cluster.pids().items()
            for k, pid in enumerate(pids)
        ]
        threads0 = {pid: read_threads(pid) for _, _, pid in processes}
        cpu0, t0 = cluster.cpu_s(), time.perf_counter()
        time.sleep(idle_s)
        idle_cores = (cluster.cpu_s() - cpu0) / (time.perf_counter() - t0)
        threads1 = {pid: read_threads(pid) for _, _, pid in processes}
        idle_window = time.perf_counter() - t0
        idle_threads = [
            {
                "node": node,
                "process": kind,
                "cores": cores(threads0[pid], threads1[pid], idle_window),
                "busiest": busiest(threads0[pid], threads1[pid], idle_window, thread_names(pid)),
            }
            for node, kind, pid in processes
        ]
        say(f"  idle: {idle_cores:.3f} cores")

        clients = {}
        for kind in client_kinds:
            clients[kind] = PRODUCE[kind](cluster, records)
            say(f"  {kind}: {clients[kind]}")
        mem = cluster.memory_and_threads()
        result = {
            "partitions": partitions,
            "settings": cluster.settings(),
            "load_average": {"before": load_before, "after": loadavg()},
            "create_s": round(create_s, 2),
            "idle_cores": round(idle_cores, 3),
            "idle_threads": idle_threads,
            "rss_mib": {str(n): round(r, 1) for n, (r, _t) in mem.items()},
            "threads": {str(n): t for n, (_r, t) in mem.items()},
            "clients": clients,
            "controller_changes": max(0, cluster.events("became_active_controller") - 1),
            "fencings": cluster.events("broker_fenced"),
        }
        say(f"  {result}")
        return result
    finally:
        cluster.down()


def plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [int(r["partitions"]) for r in results]
    kinds = list(results[0]["clients"])
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    (tput, p99), (idle, create) = axes
    for kind in kinds:
        for ax, key in ((tput, "records_per_s"), (p99, "p99_ms")):
            ax.plot(xs, [r["clients"][kind][key] for r in results], marker="o", label=kind)
    tput.set_title("keyed acks=all records/s (200 B, linger 5 ms)")
    p99.set_title("produce p99 (ms), send to ack")
    tput.legend(fontsize=8)
    p99.legend(fontsize=8)
    idle.plot(xs, [r["idle_cores"] for r in results], marker="o")
    idle.axhline(0.1, color="gray", linestyle="--", linewidth=1, label="target 0.1 core")
    idle.legend(fontsize=8)
    idle.set_title("idle CPU of the nodes (cores)")
    create.plot(xs, [r["create_s"] for r in results], marker="o")
    create.set_title("create until ISRs full (s)")
    for ax in axes.flat:
        ax.set_xscale("log")
        ax.set_xlabel("partitions (RF=3, 3 nodes)")
        ax.grid(True, alpha=0.3)
    fig.suptitle("seglog at scale, `seglog local up` (bench/scale.py)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def targets(results: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Issue 40's: each client's records/s at 1,000 partitions >= 0.5x at 10, idle
    CPU at 1,000 partitions <= 0.1 core; {value, target, met} (only those the counts
    allow)."""
    by_count = {int(r["partitions"]): r for r in results}
    out: dict[str, dict[str, Any]] = {}
    at_10, at_1000 = by_count.get(10), by_count.get(1000)
    if at_10 is not None and at_1000 is not None:
        for kind in at_1000["clients"]:
            value = round(
                at_1000["clients"][kind]["records_per_s"] / at_10["clients"][kind]["records_per_s"],
                3,
            )
            out[f"{kind}_throughput_1000_over_10"] = {
                "value": value,
                "target": ">= 0.5",
                "met": value >= 0.5,
            }
    if at_1000 is not None:
        idle = at_1000["idle_cores"]
        out["idle_cores_at_1000"] = {"value": idle, "target": "<= 0.1", "met": idle <= 0.1}
    return out


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", default="10,100,1000,5000")
    parser.add_argument(
        "--records", type=int, default=300_000, help="per client kind (300,000)"
    )
    parser.add_argument(
        "--clients", default=",".join(CLIENTS), help=f"comma list of {', '.join(CLIENTS)}"
    )
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument(
        "--settle-seconds", type=float, default=40.0, help="after the create, before idle (40)"
    )
    parser.add_argument("--plot", default=str(ROOT / "docs" / "perf" / "scale.png"))
    parser.add_argument("--dir", default=None, help="where the clusters' data goes (kept)")
    args = parser.parse_args(argv)
    try:
        args.counts = [int(x) for x in args.partitions.split(",") if x.strip()]
    except ValueError:
        parser.error(f"--partitions must be a comma list of ints, got {args.partitions!r}")
    if not args.counts or any(c < 1 for c in args.counts):
        parser.error("--partitions needs at least one count, each at least 1")
    args.clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    if not args.clients or any(c not in CLIENTS for c in args.clients):
        parser.error(f"--clients must name some of {', '.join(CLIENTS)}, got {args.clients}")
    if args.records < 1 or args.idle_seconds <= 0 or args.settle_seconds < 0:
        parser.error("--records and --idle-seconds must be positive, --settle-seconds not negative")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="seglog-scale-"))
    results = []
    load_before = loadavg()
    try:
        for count in args.counts:
            root = base / f"p{count}"
            shutil.rmtree(root, ignore_errors=True)
            results.append(
                run_count(
                    count, args.records, args.idle_seconds, args.settle_seconds, root, args.clients
                )
            )
    finally:
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)
    if args.plot:
        plot(results, Path(args.plot))
    tg = targets(results)
    for name, t in tg.items():
        print(f"target {name}: {t['value']} ({t['target']}) {'met' if t['met'] else 'NOT met'}")
    summary: dict[str, object] = {
        "bench": "scale",
        "records": args.records,
        "record_bytes": len(VALUE),
        "clients": args.clients,
        "load_average_before": load_before,
        "load_average_after": loadavg(),
        "results": results,
        "targets": tg,
        "plot": args.plot,
    }
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
