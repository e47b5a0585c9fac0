"""Scale benchmark: how a 3-node `seglog local up` cluster behaves as the partition
count grows (10, 100, 1000, 5000 by default; RF=3, min.insync.replicas=2).

For each count, on a fresh cluster (the local-up failure-detection profile: 600 ms
broker sessions, 500 ms elections):

* create_s — CreateTopics until every node's Metadata shows every partition with a
  leader and a full ISR;
* idle_cores — CPU of all node processes (brokers and their controller processes),
  in cores, over --idle-seconds with the topic idle, --settle-seconds after it was
  created;
* rss_mib, threads — per node (broker + controller process), after the produce phase;
* records_per_s, p50_ms, p99_ms — a keyed, idempotent, acks=all Producer (linger.ms 5)
  sending --records records of 200 bytes with keys spread over every partition; the
  latency of each record is send() to its acknowledgement; every record must succeed;
* controller_changes, fencings — active-controller elections after the first one and
  brokers fenced, from the nodes' JSON logs, over the whole run of that count.

It writes a plot (--plot, default docs/perf/scale.png) and prints one JSON object as
its last line. With 2 cores the client and the three nodes share the machine; quote
the load average with the figures.

    python bench/scale.py [--partitions 10,100,1000,5000] [--records N]
                          [--idle-seconds S] [--settle-seconds S] [--plot PATH] [--dir D]
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
from pathlib import Path

from seglog.bench.options import save_plot
from seglog.client.admin import Admin, NewTopic
from seglog.client.producer import Producer
from seglog.harness.local_cluster import bootstrap_servers
from seglog.harness.ports import consecutive_free_ports
from seglog.proto import client_pb2 as pb
from seglog.proto import client_pb2_grpc

ROOT = Path(__file__).resolve().parent.parent
NODES = 3
TICKS = os.sysconf("SC_CLK_TCK")


def say(*args: object) -> None:
    print(*args, file=sys.stderr, flush=True)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, round(q / 100 * len(ordered)) - 1))]


class LocalCluster:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.base = consecutive_free_ports(NODES, random.Random())
        self.bootstrap = bootstrap_servers(self.base, NODES)

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


def run_count(
    partitions: int, records: int, idle_s: float, settle_s: float, root: Path
) -> dict[str, object]:
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
        cpu0, t0 = cluster.cpu_s(), time.perf_counter()
        time.sleep(idle_s)
        idle_cores = (cluster.cpu_s() - cpu0) / (time.perf_counter() - t0)
        say(f"  idle: {idle_cores:.3f} cores")

        latencies: list[float] = []
        failures: list[BaseException] = []
        lock = threading.Lock()
        producer = Producer(cluster.bootstrap, acks="all", enable_idempotence=True, linger_ms=5)
        value = b"x" * 200
        try:
            producer.send("scale", key=b"warm", value=value).get(timeout=60)
            start = time.perf_counter()
            for n in range(records):
                t = time.perf_counter()
                f = producer.send("scale", key=b"%d" % n, value=value)

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
        finally:
            producer.close(timeout=30)
        if failures:
            raise RuntimeError(f"{len(failures)} records failed, first: {failures[0]!r}")
        mem = cluster.memory_and_threads()
        result = {
            "partitions": partitions,
            "create_s": round(create_s, 2),
            "idle_cores": round(idle_cores, 3),
            "rss_mib": {str(n): round(r, 1) for n, (r, _t) in mem.items()},
            "threads": {str(n): t for n, (_r, t) in mem.items()},
            "records_per_s": round(records / elapsed),
            "p50_ms": round(statistics.median(latencies), 1),
            "p99_ms": round(percentile(latencies, 99), 1),
            "controller_changes": max(0, cluster.events("became_active_controller") - 1),
            "fencings": cluster.events("broker_fenced"),
        }
        say(f"  {result}")
        return result
    finally:
        cluster.down()


def plot(results: list[dict[str, object]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    xs = [int(r["partitions"]) for r in results]  # type: ignore[call-overload]
    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    panels = [
        ("records_per_s", "keyed acks=all records/s"),
        ("p99_ms", "produce p99 (ms)"),
        ("idle_cores", "idle CPU of the nodes (cores)"),
        ("create_s", "create until ISRs full (s)"),
    ]
    for ax, (key, title) in zip(axes.flat, panels, strict=True):
        ax.plot(xs, [r[key] for r in results], marker="o")
        ax.set_xscale("log")
        ax.set_title(title)
        ax.set_xlabel("partitions (RF=3, 3 nodes)")
        ax.grid(True, alpha=0.3)
    fig.suptitle("seglog at scale (bench/scale.py)")
    save_plot(fig, path, dpi=90)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", default="10,100,1000,5000")
    parser.add_argument("--records", type=int, default=30_000)
    parser.add_argument("--idle-seconds", type=float, default=10.0)
    parser.add_argument("--settle-seconds", type=float, default=15.0)
    parser.add_argument("--plot", default=str(ROOT / "docs" / "perf" / "scale.png"))
    parser.add_argument("--dir", default=None, help="where the clusters' data goes")
    args = parser.parse_args()
    counts = [int(x) for x in args.partitions.split(",") if x.strip()]
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="seglog-scale-"))
    results = []
    load_before = os.getloadavg()
    for count in counts:
        root = base / f"p{count}"
        shutil.rmtree(root, ignore_errors=True)
        results.append(
            run_count(count, args.records, args.idle_seconds, args.settle_seconds, root)
        )
    if args.plot:
        plot(results, Path(args.plot))
    first = results[0]
    at_1000 = next((r for r in results if r["partitions"] == 1000), None)
    summary: dict[str, object] = {
        "bench": "scale",
        "records": args.records,
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "results": results,
        "plot": args.plot,
    }
    if at_1000 is not None:
        summary["throughput_1000_vs_first"] = round(
            float(at_1000["records_per_s"]) / float(first["records_per_s"]), 3  # type: ignore[arg-type]
        )
    if not args.dir:
        shutil.rmtree(base, ignore_errors=True)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
