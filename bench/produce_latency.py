"""Where an acks=all produce's time goes: client, leader, replication round trip.

Three real nodes on loopback (bench/cluster.py's cluster: RF=3,
min.insync.replicas=2), each with a /metrics endpoint, 1 KiB incompressible values.

1. sequential round trips, one record at a time, acks=1 and acks=all alternated in
   blocks: raw gRPC Produce calls (no client library) and seglog's `Producer`
   (`send().get()`, linger_ms=0). acks=all minus acks=1 is what replication adds on
   an idle cluster; Producer minus raw is what the client adds.
2. paced: the `Producer` (acks=all, linger_ms=0) at each of --rates records/s for
   --seconds, on topics of each of --partitions partitions. Per run: the client's
   latency percentiles, the requests it sent, and from the nodes' own request
   metrics (kafka_network_requestmetrics_*) the mean Produce total / local / remote
   time (remote: the wait for the ISR) and the Fetch requests the leaders answered,
   with the CPU cores the node processes and this process used.

The last line is JSON. `--plot out.png` draws the paced runs' latency CDFs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from seglog.bench import cluster as bench_cluster
from seglog.bench import measure
from seglog.bench.options import add_options, positive_ints, save_plot, work_dir
from seglog.client.producer import Producer
from seglog.harness.local_cluster import LOCAL_DEFAULTS
from seglog.harness.ports import free_port
from seglog.proto import client_pb2 as pb
from seglog.proto import client_pb2_grpc

ROOT = Path(__file__).resolve().parents[1]
RECORD_BYTES = 1024
REQUEST_METRIC = "kafka_network_requestmetrics_"
GC_METRIC = "python_gc_collection_seconds"
TIMES = ("totaltimems", "localtimems", "remotetimems")


def percentiles(values: Sequence[float]) -> dict[str, Any]:
    if not values:
        return {"p50_ms": None, "p90_ms": None, "p99_ms": None, "count": 0}
    return {
        "p50_ms": round(measure.percentile(values, 50), 2),
        "p90_ms": round(measure.percentile(values, 90), 2),
        "p99_ms": round(measure.percentile(values, 99), 2),
        "count": len(values),
    }


class NodeMetrics:
    """The request-metrics sums and counts of every node, read over HTTP."""

    def __init__(self, ports: dict[int, int]) -> None:
        self.ports = ports

    def read(self) -> dict[tuple[int, str, str, str], float]:
        out: dict[tuple[int, str, str, str], float] = {}
        for node, port in self.ports.items():
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                text = r.read().decode()
            for family in text_string_to_metric_families(text):
                if family.name == GC_METRIC:
                    for sample in family.samples:
                        part = sample.name.rsplit("_", 1)[-1]
                        if part in ("sum", "count"):
                            key = (node, "gc", sample.labels["generation"], part)
                            out[key] = out.get(key, 0.0) + sample.value
                    continue
                kind = family.name.removeprefix(REQUEST_METRIC)
                if kind == family.name or kind not in TIMES:
                    continue
                for sample in family.samples:
                    part = sample.name.rsplit("_", 1)[-1]  # sum or count
                    api = sample.labels.get("request")
                    if part in ("sum", "count") and api in ("Produce", "Fetch"):
                        key = (node, api, kind, part)  # summed over the listeners
                        out[key] = out.get(key, 0.0) + sample.value
        return out

    @staticmethod
    def breakdown(
        before: dict[tuple[int, str, str, str], float],
        after: dict[tuple[int, str, str, str], float],
    ) -> dict[str, Any]:
        """Requests and mean times (ms) over all nodes between two readings."""

        def delta(api: str, kind: str, part: str) -> float:
            return sum(
                v - before.get(k, 0.0)
                for k, v in after.items()
                if k[1] == api and k[2] == kind and k[3] == part
            )

        out: dict[str, Any] = {}
        for api in ("Produce", "Fetch"):
            n = delta(api, "totaltimems", "count")
            out[api] = {"requests": int(n)} | {
                f"{kind.removesuffix('timems')}_ms_mean": (
                    round(delta(api, kind, "sum") / n, 2) if n else None
                )
                for kind in TIMES
            }
        # The nodes' garbage-collector passes (node/gc_pauses.py): every thread waits them out.
        out["gc"] = {
            f"generation_{gen}": {
                "passes": int(delta("gc", gen, "count")),
                "seconds": round(delta("gc", gen, "sum"), 4),
            }
            for gen in ("0", "1", "2")
        }
        return out


def sequential_raw(cluster: Any, topic: str, n: int, blocks: int) -> dict[str, Any]:
    """One-record Produce calls straight to the leader, acks=1 and acks=-1 alternated."""
    leader = cluster.leaders(topic)[0]
    stub = client_pb2_grpc.SegLogStub(cluster.channel(leader))
    batches = measure.Batches(RECORD_BYTES, RECORD_BYTES, 7)
    times: dict[int, list[float]] = {1: [], -1: []}
    index = 0
    for _ in range(blocks):
        for acks in (1, -1):
            for _ in range(n // blocks):
                request = pb.ProduceRequest(acks=acks, timeout_ms=30_000)
                request.topics.add(name=topic).partitions.add(
                    partition=0, records=batches.build(index, 1)
                )
                index += 1
                t0 = time.perf_counter()
                response = stub.Produce(request)
                times[acks].append((time.perf_counter() - t0) * 1000)
                measure.check_produce(response)
    return {"acks=1": percentiles(times[1]), "acks=all": percentiles(times[-1])}


def sequential_producer(bootstrap: str, topic: str, n: int, blocks: int) -> dict[str, Any]:
    value = os.urandom(RECORD_BYTES)
    producers = {acks: Producer(bootstrap, acks=acks, linger_ms=0) for acks in ("1", "all")}
    times: dict[str, list[float]] = {"1": [], "all": []}
    try:
        for p in producers.values():
            p.send(topic, value=value).get(timeout=30)  # metadata, producer id
        for _ in range(blocks):
            for acks, p in producers.items():
                for _ in range(n // blocks):
                    t0 = time.perf_counter()
                    p.send(topic, value=value).get(timeout=30)
                    times[acks].append((time.perf_counter() - t0) * 1000)
    finally:
        for p in producers.values():
            p.close(timeout=30)
    return {"acks=1": percentiles(times["1"]), "acks=all": percentiles(times["all"])}


def paced(
    cluster: Any, metrics: NodeMetrics, topic: str, rate: int, seconds: float
) -> tuple[dict[str, Any], list[float]]:
    values = [os.urandom(RECORD_BYTES) for _ in range(256)]
    producer = Producer(cluster.bootstrap, acks="all", linger_ms=0)
    latencies: list[float] = []
    failures: list[BaseException] = []
    try:
        producer.send(topic, value=values[0]).get(timeout=30)
        sent_before = producer.metrics()["requests_sent"]
        before = metrics.read()
        meter = measure.CpuMeter()
        meter.pids = cluster.pids()
        meter.start()

        def send(n: int, t0: float) -> None:
            f = producer.send(topic, value=values[n % len(values)])
            f.add_callback(lambda _md: latencies.append((time.perf_counter() - t0) * 1000))
            f.add_errback(failures.append)

        start = time.perf_counter()
        n = measure.pace(rate, start, start + seconds, send)
        producer.flush(timeout=60)
        meter.stop("paced")
        after = metrics.read()
        requests = producer.metrics()["requests_sent"] - sent_before
    finally:
        producer.close(timeout=30)
    if failures:
        raise RuntimeError(f"{len(failures)} records failed: {failures[0]!r}")
    result = {
        "rate": rate,
        "achieved_rate": round(n / seconds),
        "client": percentiles(latencies),
        "client_requests": int(requests),
        "records_per_request": round(n / requests, 1) if requests else None,
        "nodes": NodeMetrics.breakdown(before, after),
        "cpu_cores": meter.readings["paced"],
    }
    return result, latencies


def plot(path: Path, curves: dict[str, list[float]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4.5))
    for label, values in curves.items():
        ordered = sorted(values)
        if ordered:
            ax.plot(ordered, [(i + 1) / len(ordered) for i in range(len(ordered))], label=label)
    ax.set_xscale("log")
    ax.set_xlabel("produce latency, ms (send to acknowledgement, acks=all)")
    ax.set_ylabel("fraction of records")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    save_plot(fig, path, dpi=110)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="1000,5000,10000", help="records/s, comma list")
    parser.add_argument("--partitions", default="1,6", help="topics' partitions, comma list")
    parser.add_argument("--seconds", type=float, default=4.0, help="per paced run")
    parser.add_argument("--sequential", type=int, default=400, help="round trips per kind")
    add_options(parser, "--plot", "--dir")
    args = parser.parse_args(argv)
    args.rates = positive_ints(parser, "--rates", args.rates)
    args.partitions = positive_ints(parser, "--partitions", args.partitions)
    if args.seconds <= 0 or args.sequential < 4:
        parser.error("--seconds must be positive and --sequential at least 4")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    root = work_dir(args.dir, "seglog-produce-latency-")
    overrides = {
        "replica.fetch.backoff.ms": LOCAL_DEFAULTS["replica.fetch.backoff.ms"],
        "min.insync.replicas": "2",
        "default.replication.factor": "3",
        "log.initial.task.delay.ms": "30000",
    }
    cluster = bench_cluster.Cluster(root / "cluster", overrides, None)
    ports = {}
    for i, node in cluster.nodes.items():
        ports[i] = free_port()
        with open(node.config_path, "a") as f:
            f.write(f"metrics.port={ports[i]}\n")
    metrics = NodeMetrics(ports)
    load_before = os.getloadavg()
    result: dict[str, Any] = {"benchmark": "produce_latency"}
    curves: dict[str, list[float]] = {}
    try:
        for i in bench_cluster.NODE_IDS:
            cluster.nodes[i].start(timeout_s=bench_cluster.WAIT_S)
        bench_cluster.wait_for("three unfenced brokers on every node", cluster.healthy)
        topics = {p: f"latency-{p}p" for p in args.partitions}
        for p, topic in topics.items():
            cluster.create_topics([topic], p)
        measure.say(f"cluster up ({cluster.bootstrap}); sequential round trips ...")
        first = topics[args.partitions[0]]
        blocks = 4
        result["sequential_raw"] = sequential_raw(cluster, first, args.sequential, blocks)
        measure.say(f"  raw gRPC Produce: {result['sequential_raw']}")
        result["sequential_producer"] = sequential_producer(
            cluster.bootstrap, first, args.sequential, blocks
        )
        measure.say(f"  Producer send().get(): {result['sequential_producer']}")
        runs = []
        for p, topic in topics.items():
            for rate in args.rates:
                run, latencies = paced(cluster, metrics, topic, rate, args.seconds)
                run["partitions"] = p
                runs.append(run)
                curves[f"{p} partition(s), {rate}/s"] = latencies
                nodes = run["nodes"]
                measure.say(
                    f"  paced {rate}/s on {p} partition(s): client {run['client']}, "
                    f"{run['records_per_request']} records/request; nodes: Produce "
                    f"total {nodes['Produce']['total_ms_mean']} ms (remote "
                    f"{nodes['Produce']['remote_ms_mean']}), Fetch answered "
                    f"{nodes['Fetch']['requests']}; cpu {run['cpu_cores']}"
                )
        result["paced"] = runs
    finally:
        cluster.stop_all()
        shutil.rmtree(root, ignore_errors=True)
    if args.plot is not None and curves:
        plot(args.plot, curves)
        measure.say(f"plot: {args.plot}")
    result["load_average"] = {"before": load_before, "after": os.getloadavg()}
    result["params"] = {
        "record_bytes": RECORD_BYTES,
        "rates": args.rates,
        "partitions": args.partitions,
        "seconds": args.seconds,
        "sequential": args.sequential,
    }
    result["cpu_count"] = os.cpu_count()
    result["python"] = sys.version.split()[0]
    result["notes"] = [
        "nodes.*: means over all three nodes from their kafka_network_requestmetrics "
        "histograms; Produce remote = the acks=all wait for the ISR",
        "cpu_cores: node processes together (not their controller processes) and this one",
        "wall-clock on a 2-core machine: run one benchmark at a time",
    ]
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
