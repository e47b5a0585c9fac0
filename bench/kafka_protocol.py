"""Kafka-protocol benchmark: three real node processes on loopback (as `seglog local up`
runs them, each with a PLAINTEXT listener beside gRPC), topics with RF=3 and
min.insync.replicas=2, acks=all, idempotent producers, 1 KiB records; confluent-kafka
(librdkafka) as the Kafka client. In the same run, for comparison, seglog's own gRPC
paths as bench/replication.py measures them.

Phases, in this order (each timed for --seconds after a warm-up; CPU is the three
node processes' user+sys seconds from /proc, as bench/replication.py counts it):

1. kafka_produce: a confluent-kafka Producer (enable.idempotence, acks=all,
   linger.ms --produce-linger-ms (20), its defaults otherwise, no compression) sends
   1 KiB values as fast as it can; MiB/s of values acknowledged, flush included.
2. kafka_latency: the same Producer with linger.ms=0, paced at --latency-fraction
   (25%) of the records/s of phase 1; p50/p99 of produce()-to-delivery-report.
3. kafka_consume: a confluent-kafka Consumer assigned to every partition reads all of
   it from the start (the sendfile path on the nodes); every produced message is
   verified on read: each acknowledged record's value (which names its sequence number
   and is a slice of a seeded pool) is read back once, intact.
4. grpc_produce_raw, grpc_producer: bench/replication.py's produce_raw (pre-built ~1 MiB
   ProduceRequests, no client cost) and produce_client (seglog's Producer).
5. grpc_consume_raw: raw gRPC Fetch RPCs of ~1 MiB (max_wait_ms 0) to every leader,
   reading grpc_produce_raw's topic (again from the start at its end).
3b. kafka_consume_raw (run after phase 3): the same with raw Kafka Fetch v12 requests
   on one socket per leader over kafka_produce's topic: the comparison for the
   consume CPU target (phase 3 is bounded by the client's per-record work, so the
   nodes' fixed background CPU weighs on its per-MiB figure).

MiB/s are 2^20 bytes of record values (Kafka phases) or record-batch bytes (gRPC raw
phases; 1 KiB records carry about 2% framing). The last stdout line is one JSON object
with the figures, the CPU-seconds per MiB of each phase, and the issue's targets.

    python bench/kafka_protocol.py [--quick] [--seconds S] [--partitions N] [--dir D]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import struct
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from seglog.bench.measure import MIB, librdkafka_produce_until, pace, say
from seglog.bench.options import (
    add_options,
    add_phases,
    add_profile_node,
    known_names,
    quick_or_full,
    work_dir,
)

ROOT = Path(__file__).resolve().parents[1]
TOPIC_KAFKA = "kafka-bench"
FETCH_METHOD = "/seglog.v1.SegLog/Fetch"
PHASES = (
    "kafka_produce",
    "kafka_latency",
    "kafka_consume",
    "kafka_consume_raw",
    "grpc_produce_raw",
    "grpc_producer",
    "grpc_consume_raw",
)


class Values:
    """1 KiB values: an 8-byte sequence number, then a slice of a seeded random pool
    chosen by it, so a read can check every byte without keeping what was sent."""

    def __init__(self, size: int, seed: int) -> None:
        self.pool = random.Random(seed).randbytes(4 * MIB)
        self.size = size

    def body(self, n: int) -> bytes:
        start = (n * 7919) % (len(self.pool) - self.size)
        return self.pool[start : start + self.size - 8]

    def value(self, n: int) -> bytes:
        return struct.pack(">Q", n) + self.body(n)

    def check(self, value: bytes) -> int:
        n = struct.unpack_from(">Q", value)[0]
        if value[8:] != self.body(n):
            raise AssertionError(f"value {n} read back damaged")
        return int(n)


def cpu_s_per_mib(meter: Any, label: str, seconds: float, mib: float) -> float | None:
    cores = meter.readings.get(label, {}).get("nodes_cores")
    if cores is None or mib <= 0:
        return None
    return round(cores * seconds / mib, 4)


def kafka_produce(
    ck: ModuleType,
    bootstrap: str,
    values: Values,
    seconds: float,
    meter: Any,
    linger_ms: int,
    config: dict[str, Any] | None = None,
    on_ack: Callable[[], None] | None = None,
):
    """`config`: librdkafka settings over the phase's own (e.g. batch.size); `on_ack`
    is called on each record's successful delivery report, the warm-up's included."""
    producer = ck.Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": linger_ms,
            **(config or {}),
        }
    )
    acked: list[int] = []
    failed: list[Any] = []

    def report(err, msg):  # noqa: ANN202
        if err is None:
            acked.append(1)
            if on_ack is not None:
                on_ack()
        else:
            failed.append(err)

    n = 0
    producer.produce(TOPIC_KAFKA, value=values.value(n), on_delivery=report)  # warm-up
    n += 1
    producer.flush(30)
    meter.start()
    start = time.perf_counter()
    n = librdkafka_produce_until(
        producer,
        start + seconds,
        lambda i: producer.produce(TOPIC_KAFKA, value=values.value(i), on_delivery=report),
        n,
        "kafka_produce: messages left undelivered",
    )
    elapsed = time.perf_counter() - start
    meter.stop("kafka_produce")
    if failed:
        raise RuntimeError(f"kafka_produce: {len(failed)} failed, e.g. {failed[0]}")
    records = len(acked) - 1
    return records * values.size / MIB / elapsed, records / elapsed, elapsed, n


def kafka_latency(
    ck: ModuleType, bootstrap: str, values: Values, first: int, rate: float, seconds: float
) -> tuple[list[float], int]:
    """Records produced at `rate` a second for `seconds` after a warm-up; each one's time
    from produce() to its delivery report (ms), and the next record number.

    The pacing sleeps (measure.pace) and a thread of its own waits in poll() for the
    delivery reports, so each is timed when librdkafka hands it over. Pacing with
    poll(t) instead busy-waits: confluent-kafka takes t in whole milliseconds, and a
    wait under 1 ms is poll(0); at 1,000 records/s that spun one of the machine's two
    cores away from the nodes (0.8-0.9 cores of client CPU against 0.13, p50 6-13 ms
    against 1.5-2.6, docs/perf/compare.md)."""
    producer = ck.Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 0}
    )
    latencies: list[float] = []
    failed: list[Any] = []
    producer.produce(TOPIC_KAFKA, value=values.value(first))
    producer.flush(30)
    stop = threading.Event()

    def serve_reports() -> None:
        while not stop.is_set():
            producer.poll(0.1)

    reporter = threading.Thread(target=serve_reports, name="delivery-reports", daemon=True)
    reporter.start()
    start = time.perf_counter()
    warm = start + min(1.0, seconds / 4)

    def send(i: int, sent_at: float) -> None:
        def report(err: Any, _msg: Any) -> None:
            if err is not None:
                failed.append(err)
            elif sent_at >= warm:
                latencies.append((time.perf_counter() - sent_at) * 1000)  # atomic

        producer.produce(TOPIC_KAFKA, value=values.value(first + 1 + i), on_delivery=report)

    try:
        sent = pace(rate, start, warm + seconds, send)
        left = producer.flush(60)
    finally:
        stop.set()
        reporter.join(timeout=5)
    if left or failed:
        raise RuntimeError(
            f"kafka_latency: {len(failed)} failed, {left} undelivered"
            + (f", e.g. {failed[0]}" if failed else "")
        )
    return latencies, first + 1 + sent


def kafka_consume(ck: ModuleType, bootstrap: str, partitions: int, values: Values, meter: Any):
    consumer = ck.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "fetch.max.bytes": 50 * MIB,
            "max.partition.fetch.bytes": 4 * MIB,
            "queued.max.messages.kbytes": 256 * 1024,
        }
    )
    ends = {
        p: consumer.get_watermark_offsets(ck.TopicPartition(TOPIC_KAFKA, p), timeout=30)[1]
        for p in range(partitions)
    }
    total = sum(ends.values())
    consumer.assign([ck.TopicPartition(TOPIC_KAFKA, p, 0) for p in range(partitions)])
    seen: set[int] = set()
    got = 0
    meter.start()
    start = time.perf_counter()
    deadline = start + 300
    while got < total and time.perf_counter() < deadline:
        for msg in consumer.consume(1000, 0.5):
            if msg.error():
                continue
            n = values.check(msg.value())
            if n in seen:
                raise AssertionError(f"value {n} read twice")
            seen.add(n)
            got += 1
    elapsed = time.perf_counter() - start
    meter.stop("kafka_consume")
    consumer.close()
    if got != total:
        raise AssertionError(f"kafka_consume: read {got} of {total} records")
    return got * values.size / MIB / elapsed, got / elapsed, elapsed, seen


def kafka_consume_raw(
    node: ModuleType,
    cluster: Any,
    kafka_ports: dict[int, int],
    seconds: float,
    meter: Any,
) -> tuple[float, float]:
    """Raw Kafka Fetch requests (v12, ~1 MiB, max_wait_ms 0) on one socket per leader,
    as grpc_consume_raw does over gRPC: the node's sendfile path without a client's
    record decoding in the way."""
    import socket

    from kafka.protocol.consumer import FetchRequest, FetchResponse

    by_leader: dict[int, list[int]] = {}
    for p, leader in sorted(cluster.leaders(TOPIC_KAFKA).items()):
        by_leader.setdefault(leader, []).append(p)
    lanes = []
    for leader, parts in by_leader.items():
        sock = socket.create_connection(("127.0.0.1", kafka_ports[leader]))
        lanes.append((sock, parts, dict.fromkeys(parts, 0)))

    def read_exact(sock: socket.socket, n: int) -> bytes:
        buf = bytearray(n)
        view, got = memoryview(buf), 0
        while got < n:
            k = sock.recv_into(view[got:])
            if not k:
                raise ConnectionError("closed")
            got += k
        return bytes(buf)

    R = FetchRequest

    def one(i: int) -> int:
        sock, parts, positions = lanes[i]
        request = R[12](
            replica_id=-1,
            max_wait_ms=0,
            min_bytes=1,
            max_bytes=MIB,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            forgotten_topics_data=[],
            rack_id="",
            topics=[
                R.FetchTopic(
                    topic=TOPIC_KAFKA,
                    partitions=[
                        R.FetchTopic.FetchPartition(
                            partition=p,
                            fetch_offset=positions[p],
                            partition_max_bytes=max(1, MIB // len(parts)),
                        )
                        for p in parts
                    ],
                )
            ],
        )
        request.with_header(correlation_id=1, client_id="bench")
        sock.sendall(bytes(request.encode(header=True, framed=True)))
        size = struct.unpack(">i", read_exact(sock, 4))[0]
        frame = read_exact(sock, size)
        response = FetchResponse.decode(frame[5:], version=12)
        got = 0
        for t in response.responses:
            for r in t.partitions:
                if r.error_code:
                    raise RuntimeError(f"fetch {t.topic}-{r.partition_index}: {r.error_code}")
                records = r.records or b""
                got += len(records)
                nxt = node.next_offset(records, positions[r.partition_index])
                positions[r.partition_index] = nxt if nxt < r.high_watermark else 0
        return got

    try:
        return run_lanes(len(lanes), one, seconds, meter, "kafka_consume_raw")
    finally:
        for sock, _parts, _positions in lanes:
            sock.close()


def run_lanes(n: int, one: Any, seconds: float, meter: Any, label: str) -> tuple[float, float]:
    """`n` threads repeating one(i) (bytes moved) for `seconds` after a warm-up:
    (MiB/s, elapsed); the timed part's CPU goes to the meter under `label`."""

    def run(duration: float, timed: bool) -> tuple[float, float]:
        end = time.perf_counter() + duration
        totals = [0] * n

        def lane(i: int) -> None:
            while time.perf_counter() < end:
                totals[i] += one(i)

        threads = [threading.Thread(target=lane, args=(i,)) for i in range(n)]
        if timed:
            meter.start()
        start = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.perf_counter() - start
        if timed:
            meter.stop(label)
        return sum(totals) / MIB / elapsed, elapsed

    run(min(1.0, seconds / 4), False)
    return run(seconds, True)


def grpc_consume_raw(
    replication: ModuleType, node: ModuleType, cluster: Any, seconds: float, meter: Any
):
    pb = replication.pb
    by_leader: dict[int, list[int]] = {}
    for p, leader in sorted(cluster.leaders(replication.TOPIC_RAW).items()):
        by_leader.setdefault(leader, []).append(p)
    lanes = []
    for leader, parts in by_leader.items():
        fetch = cluster.channel(leader).unary_unary(
            FETCH_METHOD,
            request_serializer=pb.FetchRequest.SerializeToString,
            response_deserializer=pb.FetchResponse.FromString,
        )
        lanes.append((fetch, parts, dict.fromkeys(parts, 0)))

    def one(i: int) -> int:
        fetch, parts, positions = lanes[i]
        per_partition = max(1, MIB // len(parts))
        return node.fetch_once(fetch, replication.TOPIC_RAW, positions, MIB, per_partition)

    return run_lanes(len(lanes), one, seconds, meter, "grpc_consume_raw")


def record_kafka_produce(
    results: dict[str, Any],
    meter: Any,
    mb_s: float,
    rps: float,
    elapsed: float,
) -> None:
    results["kafka_produce_mb_s"] = round(mb_s, 2)
    results["kafka_produce_records_s"] = round(rps)
    results["kafka_produce_cpu_s_per_mib"] = cpu_s_per_mib(
        meter, "kafka_produce", elapsed, mb_s * elapsed
    )
    say(f"  kafka_produce: {mb_s:.1f} MiB/s, {rps:,.0f} records/s")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short phases")
    parser.add_argument("--seconds", type=float, default=None, help="per timed phase (8)")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--latency-fraction", type=float, default=0.25)
    parser.add_argument(
        "--produce-linger-ms", type=int, default=20, help="kafka_produce's linger.ms (20)"
    )
    add_options(parser, "--dir", "--keep", "--seed")
    add_phases(parser, PHASES)
    add_profile_node(parser, top=False)
    args = parser.parse_args(argv)
    args.phases = known_names(parser, "--phases", args.phases, PHASES)
    quick_or_full(args, seconds=(1.5, 8.0))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    import confluent_kafka as ck

    from seglog.bench import cluster as bench_cluster
    from seglog.bench import measure, replication
    from seglog.bench import node as bench_node

    meter = replication.METER
    root = work_dir(args.dir, "seglog-kafka-bench-")
    overrides = bench_cluster.local_overrides()
    profile_dir = root / "profiles" if args.profile_node else None
    if profile_dir is not None:
        profile_dir.mkdir()
    cluster = bench_cluster.Cluster(root / "cluster", overrides, profile_dir)
    bootstrap = bench_cluster.add_kafka_listeners(cluster)
    kafka_ports = {
        i: int(address.rsplit(":", 1)[1])
        for i, address in zip(bench_cluster.NODE_IDS, bootstrap.split(","), strict=True)
    }
    values = Values(1024, args.seed)
    results: dict[str, Any] = {"benchmark": "kafka_protocol"}
    say(
        f"seglog Kafka-protocol bench: RF=3, acks=all, idempotent, 1 KiB records, "
        f"{args.seconds:g} s per phase, confluent-kafka {ck.__version__} "
        f"(librdkafka {ck.libversion()[0]}), {os.cpu_count()} CPUs"
    )

    def record(phase: str, label: str, mb_s: float, elapsed: float, what: str) -> None:
        """A phase's MiB/s and CPU-seconds per MiB (its meter reading `label`)."""
        results[f"{phase}_mb_s"] = round(mb_s, 2)
        results[f"{phase}_cpu_s_per_mib"] = cpu_s_per_mib(meter, label, elapsed, mb_s * elapsed)
        say(f"  {what}: {mb_s:.1f} MiB/s")

    try:
        for i in bench_cluster.NODE_IDS:
            cluster.nodes[i].start(timeout_s=bench_cluster.WAIT_S)
        bench_cluster.wait_for("three unfenced brokers", cluster.healthy)
        meter.pids = cluster.pids()
        topics = [TOPIC_KAFKA, replication.TOPIC_RAW, replication.TOPIC_CLIENT]
        cluster.create_topics(topics, args.partitions)
        say(f"cluster up: Kafka {bootstrap}, gRPC {cluster.bootstrap}; data in {root}")

        phases = set(args.phases)
        sent, rps = 0, 1000.0
        if "kafka_produce" in phases:
            measure.settle_disk()
            mb_s, rps, elapsed, sent = kafka_produce(
                ck, bootstrap, values, args.seconds, meter, args.produce_linger_ms
            )
            record_kafka_produce(results, meter, mb_s, rps, elapsed)
        if "kafka_latency" in phases:
            measure.settle_disk()
            rate = max(10.0, rps * args.latency_fraction)
            latencies, sent = kafka_latency(ck, bootstrap, values, sent, rate, args.seconds)
            results["kafka_latency_rate_records_s"] = round(rate)
            results["kafka_latency"] = measure.summary_ms(latencies)
            say(f"  kafka_latency at {rate:,.0f}/s: {results['kafka_latency']}")
        if "kafka_consume" in phases:
            measure.settle_disk()
            mb_s, rps, elapsed, seen = kafka_consume(ck, bootstrap, args.partitions, values, meter)
            results["kafka_consume_mb_s"] = round(mb_s, 2)
            results["kafka_consume_records_s"] = round(rps)
            results["kafka_consume_cpu_s_per_mib"] = cpu_s_per_mib(
                meter, "kafka_consume", elapsed, mb_s * elapsed
            )
            results["kafka_records_verified"] = len(seen)
            say(f"  kafka_consume: {mb_s:.1f} MiB/s, {len(seen):,} records verified")
        if "kafka_consume_raw" in phases:
            mb_s, elapsed = kafka_consume_raw(bench_node, cluster, kafka_ports, args.seconds, meter)
            record("kafka_consume_raw", "kafka_consume_raw", mb_s, elapsed, "kafka_consume_raw")
        batches = measure.Batches(1024, 16384, args.seed)
        if "grpc_produce_raw" in phases or "grpc_consume_raw" in phases:
            measure.settle_disk()
            rargs = argparse.Namespace(seconds=args.seconds, request_bytes=MIB, in_flight=2)
            mb_s, rps, _lat = replication.measure_produce_raw(cluster, batches, rargs)
            record("grpc_produce_raw", "produce_raw", mb_s, args.seconds, "grpc_produce_raw")
        if "grpc_producer" in phases:
            measure.settle_disk()
            mb_s, rps, _n = replication.measure_producer(cluster, batches, args.seconds)
            what = "grpc_producer (seglog's Producer)"
            record("grpc_producer", "produce_client", mb_s, args.seconds, what)
        if "grpc_consume_raw" in phases:
            mb_s, elapsed = grpc_consume_raw(replication, bench_node, cluster, args.seconds, meter)
            record("grpc_consume_raw", "grpc_consume_raw", mb_s, elapsed, "grpc_consume_raw")
        results["cpu"] = meter.readings
    finally:
        cluster.stop_all()
        if profile_dir is not None:
            for line in bench_cluster.report_profiles(profile_dir, 40):
                say(line)
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)

    def ratio(a: str, b: str) -> float | None:
        x, y = results.get(a), results.get(b)
        return None if not x or not y else round(x / y, 3)

    results["targets"] = {
        "produce_cpu_vs_grpc_raw (<= 1)": ratio(
            "kafka_produce_cpu_s_per_mib", "grpc_produce_raw_cpu_s_per_mib"
        ),
        "consume_cpu_vs_grpc_raw (<= 0.5)": ratio(
            "kafka_consume_raw_cpu_s_per_mib", "grpc_consume_raw_cpu_s_per_mib"
        ),
        "consume_cpu_confluent_vs_grpc_raw": ratio(
            "kafka_consume_cpu_s_per_mib", "grpc_consume_raw_cpu_s_per_mib"
        ),
        "produce_mb_s_vs_seglog_producer (>= 2)": ratio("kafka_produce_mb_s", "grpc_producer_mb_s"),
    }
    results["params"] = {
        "seconds": args.seconds,
        "partitions": args.partitions,
        "produce_linger_ms": args.produce_linger_ms,
        "latency_fraction": args.latency_fraction,
        "latency_linger_ms": 0,
        "replication_factor": 3,
        "min_insync_replicas": 2,
        "record_bytes": 1024,
    }
    results["cpu_count"] = os.cpu_count()
    results["python"] = platform.python_version()
    print(json.dumps(results, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
