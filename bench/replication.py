"""Replication benchmark: three real node processes on loopback (each a broker and a Raft
voter, as `seglog local up` runs them), topics with RF=3 and min.insync.replicas=2, every
produce with acks=-1 (all), 1 KiB records.

Phases, in this order:

1. produce_raw (the node): pre-built, pre-serialized ProduceRequests of ~1 MiB (RecordBatch
   v2 batches of ~16 KiB, no compression) sent by raw Produce RPCs, each request to the
   leader of the partitions it carries (--partitions spread over the three leaders),
   --in-flight calls outstanding per leader. An answer comes once both followers fetched
   the data (the high watermark passed it). Timed for --seconds after a warm-up.
2. produce_client: the Producer client end to end (send() of 1 KiB values, acks=all,
   idempotent, otherwise its defaults: linger.ms 5, batch.size 16384), flush included.
3. latency: the Producer again, paced at 25% of the records/s produce_client reached
   (--latency-fraction, or --latency-rate records/s), one record at a time; per record
   the time from send() to its acknowledgement (the future's callback). p50/p99 over
   --seconds after a warm-up. Each phase starts with sync(2), so that it does not pay
   for the writeback of the previous phase's data.
4. failover: --kills times: a fresh topic (1 partition, RF=3); an idempotent Producer
   (acks=all, linger.ms 0, defaults otherwise) sends one record every 5 ms to it; the
   partition's leader is SIGKILLed; unavailability is the time from SIGKILL to the first
   acknowledgement of a record sent after it. The node is restarted and the next kill
   waits until it is back in the ISR everywhere; the topic is then deleted. From the
   survivors' JSON logs each kill also gets when the dead broker was fenced, when the new
   leader applied its leadership and, when the leader was also the active controller, when
   a new controller was elected (ms after SIGKILL, wall clock).
   (Each kill gets its own topic, deleted afterwards, so that every kill starts from the
   same state: three in-sync replicas and an empty log.)

p99 is nearest-rank: for fewer than 100 kills it is the slowest one. MB/s here are MiB/s
(2^20 bytes) of RecordBatch bytes acknowledged. The failover figures include the broker
session timeout (--session-timeout-ms, as in `seglog local up`): a dead broker is
only noticed when its heartbeats stop for that long.

The last stdout line is one JSON object; everything before it is progress.

    python bench/replication.py [--quick] [--kills N] [--seconds S] [--partitions N]
                                [--in-flight N] [--phases a,b,...] [--profile-node]
                                [--session-timeout-ms MS] [--dir D] [--keep]

--profile-node runs every node under cProfile (bench/node.py's launcher) and prints where
their time went, merged over the three nodes, after the throughput phases (the failover
phase is skipped then: killed nodes write no profile); such figures are inflated.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from seglog.bench import options
from seglog.bench.cluster import (
    NODE_IDS,
    WAIT_S,
    Cluster,
    add_kafka_listeners,
    report_profiles,
    wait_for,
)
from seglog.bench.measure import (
    MIB,
    PRODUCE_METHOD,
    Batches,
    CpuMeter,
    check_produce,
    pace,
    percentile,
    produce_for,
    run_lanes_together,
    say,
    settle_disk,
    summary_ms,
)
from seglog.client.producer import Producer
from seglog.harness.local_cluster import LOCAL_DEFAULTS
from seglog.proto import client_pb2 as pb

TOPIC_RAW = "repl-raw"
TOPIC_CLIENT = "repl-client"
TOPIC_LATENCY = "repl-latency"
PHASES = ("produce_raw", "produce_client", "latency", "failover")
PROBE_INTERVAL_S = 0.005
TARGET_MB_S = 100.0
TARGET_P99_MS = 20.0
TARGET_FAILOVER_MEDIAN_MS = 1000.0
METER = CpuMeter()

# --- phase 1: raw produce ----------------------------------------------------------------------


def raw_requests(
    batches: Batches, partitions: list[int], request_bytes: int, distinct: int
) -> list[tuple[bytes, int, int]]:
    """Serialized acks=-1 ProduceRequests of ~request_bytes each over `partitions` (whole
    batches spread evenly): (request, batch bytes carried, records carried)."""
    one = len(batches.build(0))
    per_partition = max(1, request_bytes // one // len(partitions))
    out = []
    index = 0
    for _ in range(distinct):
        request = pb.ProduceRequest(acks=-1, timeout_ms=30_000)
        topic = request.topics.add(name=TOPIC_RAW)
        carried = 0
        for p in partitions:
            data = b"".join(batches.build(index + k) for k in range(per_partition))
            index += per_partition
            topic.partitions.add(partition=p, records=data)
            carried += len(data)
        records = per_partition * len(partitions) * batches.records_per_batch
        out.append((request.SerializeToString(), carried, records))
    return out


def measure_produce_raw(
    cluster: Cluster, batches: Batches, args: argparse.Namespace
) -> tuple[float, float, list[float]]:
    """(MiB/s, records/s, per-request latencies in ms) with --in-flight calls per leader."""
    by_leader: dict[int, list[int]] = {}
    for p, leader in sorted(cluster.leaders(TOPIC_RAW).items()):
        by_leader.setdefault(leader, []).append(p)
    say(f"  partitions by leader: {by_leader}")
    lanes: list[tuple[Callable[..., Any], list[tuple[bytes, int, int]]]] = []
    for leader, parts in by_leader.items():
        requests = raw_requests(batches, parts, args.request_bytes, distinct=4)
        produce = cluster.channel(leader).unary_unary(
            PRODUCE_METHOD, response_deserializer=pb.ProduceResponse.FromString
        )
        lanes += [(produce, requests)] * args.in_flight

    def timed(seconds: float, label: str | None) -> tuple[float, float, list[float]]:
        moved = [0] * len(lanes)
        records = [0] * len(lanes)
        latencies: list[list[float]] = [[] for _ in lanes]
        failures: list[BaseException] = []

        def lane(i: int, end: float) -> None:
            produce, requests = lanes[i]
            k = i
            try:
                while time.perf_counter() < end:
                    data, carried, n = requests[k % len(requests)]
                    k += 1
                    t = time.perf_counter()
                    check_produce(produce(data, timeout=60))
                    latencies[i].append((time.perf_counter() - t) * 1000)
                    moved[i] += carried
                    records[i] += n
            except BaseException as e:  # noqa: BLE001 - reported by the main thread
                failures.append(e)

        elapsed = run_lanes_together(len(lanes), lane, seconds, METER, label)
        if failures:
            raise failures[0]
        return (
            sum(moved) / MIB / elapsed,
            sum(records) / elapsed,
            [x for lat in latencies for x in lat],
        )

    timed(min(1.0, args.seconds / 4), None)  # warm-up: connections, page cache, fetchers
    return timed(args.seconds, "produce_raw")


# --- phase 2 and 3: the Producer ---------------------------------------------------------------


def measure_producer(
    cluster: Cluster, batches: Batches, seconds: float
) -> tuple[float, float, int]:
    """MiB/s of batch bytes acknowledged (the Producer's bytes_sent) and records/s, flush
    included."""
    producer = Producer(cluster.bootstrap, acks="all")
    assert producer.idempotent
    return produce_for(producer, TOPIC_CLIENT, batches, seconds, METER)


def measure_latency(
    cluster: Cluster, batches: Batches, rate: float, seconds: float, linger_ms: int | None
) -> tuple[list[float], float]:
    """Per-record send()-to-acknowledgement latencies (ms) at `rate` records/s, after an
    untimed warm-up; and the rate achieved."""
    extra = {} if linger_ms is None else {"linger_ms": linger_ms}
    producer = Producer(cluster.bootstrap, acks="all", **extra)
    latencies: list[float] = []
    failures: list[BaseException] = []
    lock = threading.Lock()

    def done(t0: float, keep: bool, _md: object) -> None:
        if keep:
            with lock:
                latencies.append((time.perf_counter() - t0) * 1000)

    try:
        producer.send(TOPIC_LATENCY, value=batches.value(0)).get(timeout=30)
        warmup = min(1.0, seconds / 4)
        interval = 1.0 / rate
        start = time.perf_counter()
        measure_from = start + warmup
        end = measure_from + seconds

        def send(n: int, t0: float) -> None:
            f = producer.send(TOPIC_LATENCY, value=batches.value(n))
            f.add_callback(done, t0, t0 >= measure_from)
            f.add_errback(failures.append)

        METER.start()
        n = pace(rate, start, end, send)
        producer.flush(timeout=60)
        METER.stop("latency")
        achieved = sum(1 for i in range(n) if start + i * interval >= measure_from) / seconds
    finally:
        producer.close(timeout=30)
    if failures:
        raise RuntimeError(f"{len(failures)} records failed: {failures[0]!r}")
    return latencies, achieved


# --- phase 4: failover -------------------------------------------------------------------------


class Probe:
    """One record every PROBE_INTERVAL_S to partition 0 of a topic, with the send time of
    each and the time of each acknowledgement."""

    def __init__(self, producer: Producer, topic: str) -> None:
        self.producer = producer
        self.topic = topic
        self.lock = threading.Lock()
        self.acks: list[tuple[float, float]] = []  # (sent, acknowledged), perf_counter
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="probe", daemon=True)

    def _run(self) -> None:
        n = 0
        while not self._stop.is_set():
            sent = time.perf_counter()
            f = self.producer.send(self.topic, value=b"probe-%d" % n, partition=0)
            f.add_callback(self._acked, sent)
            f.add_errback(lambda e: self.failures.append(repr(e)))
            n += 1
            self._stop.wait(PROBE_INTERVAL_S)

    def _acked(self, sent: float, _md: object) -> None:
        with self.lock:
            self.acks.append((sent, time.perf_counter()))

    def start(self) -> Probe:
        self._thread.start()
        return self

    def first_ack_sent_after(self, t0: float) -> float | None:
        with self.lock:
            times = [acked for sent, acked in self.acks if sent >= t0]
        return min(times) if times else None

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        self.producer.flush(timeout=120)


def one_kill(cluster: Cluster, producer: Producer, k: int) -> dict[str, Any]:
    topic = f"repl-failover-{k}"
    cluster.create_topics([topic], 1)
    probe = Probe(producer, topic).start()
    sample: dict[str, Any] = {"kill": k}
    try:
        wait_for(
            "the probe's first acknowledgements",
            lambda: True if probe.first_ack_sent_after(0.0) is not None else None,
        )
        leader = cluster.leaders(topic)[0]
        sample.update(killed=leader, was_controller=leader == cluster.controller())
        kill_wall = time.time()
        t0 = time.perf_counter()
        cluster.nodes[leader].kill()
        acked = wait_for(
            "an acknowledgement after the kill", lambda: probe.first_ack_sent_after(t0)
        )
        sample["unavailable_ms"] = round((acked - t0) * 1000, 1)
        new = sample["new_leader"] = cluster.leaders(topic)[0]
        # Where the time went, from the survivors' JSON logs (wall clock, 1 ms resolution).
        survivors = [i for i in NODE_IDS if i != leader]
        marks = {
            "controller_elected_ms": cluster.event_after(
                survivors, "became_active_controller", kill_wall
            ),
            "fenced_ms": cluster.event_after(survivors, "broker_fenced", kill_wall, broker=leader),
            "leader_elected_ms": cluster.event_after(
                [new], "became_leader", kill_wall, topic=topic, partition=0
            ),
        }
        for key, ts in marks.items():
            sample[key] = None if ts is None else round((ts - kill_wall) * 1000, 1)
    finally:
        probe.stop()
    if probe.failures:
        raise RuntimeError(f"probe records failed: {probe.failures[:3]}")
    t1 = time.perf_counter()
    cluster.nodes[sample["killed"]].start(timeout_s=WAIT_S)
    wait_for(f"node {sample['killed']} back in the ISR", lambda: cluster.healthy([topic]))
    sample["rejoin_s"] = round(time.perf_counter() - t1, 2)
    cluster.delete_topics([topic])
    return sample


# --- main --------------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short phases and 3 kills")
    parser.add_argument("--seconds", type=float, default=None, help="per timed phase (8)")
    parser.add_argument("--kills", type=int, default=None, help="failover kills (20)")
    parser.add_argument("--partitions", type=int, default=6, help="of the throughput topics")
    parser.add_argument("--in-flight", type=int, default=2, help="raw calls in flight per leader")
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--batch-bytes", type=int, default=16384)
    parser.add_argument("--request-bytes", type=int, default=MIB)
    parser.add_argument("--latency-fraction", type=float, default=0.25)
    parser.add_argument(
        "--latency-rate", type=float, default=None, help="records/s (instead of the fraction)"
    )
    parser.add_argument(
        "--latency-linger-ms", type=int, default=None, help="the latency Producer's (its default)"
    )
    # Failure detection as `seglog local up` configures it.
    parser.add_argument(
        "--session-timeout-ms", type=int, default=int(LOCAL_DEFAULTS["broker.session.timeout.ms"])
    )
    parser.add_argument(
        "--heartbeat-interval-ms",
        type=int,
        default=int(LOCAL_DEFAULTS["broker.heartbeat.interval.ms"]),
    )
    parser.add_argument(
        "--election-timeout-ms",
        type=int,
        default=int(LOCAL_DEFAULTS["controller.quorum.election.timeout.ms"]),
    )
    parser.add_argument(
        "--lag-time-max-ms", type=int, default=int(LOCAL_DEFAULTS["replica.lag.time.max.ms"])
    )
    parser.add_argument(
        "--replica-fetch-protocol",
        choices=["kafka", "grpc"],
        default="kafka",
        help="how followers fetch (replica.fetch.protocol; kafka: over a PLAINTEXT listener "
        "each node gets, as `seglog local up` runs them)",
    )
    options.add_phases(parser, PHASES)
    options.add_profile_node(parser)
    options.add_options(parser, "--dir", "--keep", "--seed", "--plot")
    args = parser.parse_args(argv)
    options.quick_or_full(args, seconds=(1.5, 8.0), kills=(3, 20))
    if args.kills < 0:
        parser.error("--kills must be at least 0")
    phases = options.known_names(parser, "--phases", args.phases, PHASES)
    if args.profile_node and "failover" in phases:
        phases.remove("failover")
    if "failover" in phases and args.kills == 0:
        phases.remove("failover")
    args.phases = phases
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    phases = set(args.phases)
    root = options.work_dir(args.dir, "seglog-replication-bench-")
    profile_dir = root / "profiles" if args.profile_node else None
    if profile_dir is not None:
        profile_dir.mkdir()
    overrides = {
        "broker.session.timeout.ms": str(args.session_timeout_ms),
        "broker.heartbeat.interval.ms": str(args.heartbeat_interval_ms),
        "controller.quorum.election.timeout.ms": str(args.election_timeout_ms),
        "replica.fetch.backoff.ms": LOCAL_DEFAULTS["replica.fetch.backoff.ms"],
        "replica.lag.time.max.ms": str(args.lag_time_max_ms),
        "min.insync.replicas": "2",
        "default.replication.factor": "3",
        "log.initial.task.delay.ms": "30000",
        "replica.fetch.protocol": args.replica_fetch_protocol,
    }
    cluster = Cluster(root / "cluster", overrides, profile_dir)
    if args.replica_fetch_protocol == "kafka":
        add_kafka_listeners(cluster)  # the followers' Kafka listener
    batches = Batches(args.record_bytes, args.batch_bytes, args.seed)
    results: dict[str, Any] = dict.fromkeys(
        (
            "produce_raw_mb_s",
            "produce_raw_records_s",
            "produce_client_mb_s",
            "produce_client_records_s",
            "latency_rate_records_s",
        )
    )
    raw_latency: list[float] = []
    latency: list[float] = []
    kills: list[dict[str, Any]] = []
    profile_lines: list[str] = []
    say(
        f"seglog replication bench: RF=3, acks=-1, min.insync.replicas=2, "
        f"replica.fetch.protocol={args.replica_fetch_protocol}, "
        f"{args.record_bytes} B records, {args.seconds:g} s per phase, phases {args.phases}, "
        f"{args.kills if 'failover' in phases else 0} kills, {os.cpu_count()} CPUs"
    )
    try:
        for i in NODE_IDS:
            cluster.nodes[i].start(timeout_s=WAIT_S)
        wait_for("three unfenced brokers on every node", cluster.healthy)
        METER.pids = cluster.pids()
        say(f"cluster up: {cluster.bootstrap}; data in {root}")
        throughput_topics = [TOPIC_RAW, TOPIC_CLIENT, TOPIC_LATENCY]
        cluster.create_topics(throughput_topics, args.partitions)

        if "produce_raw" in phases:
            say(f"produce_raw: ~{args.request_bytes / MIB:.2f} MiB requests, acks=-1 ...")
            mb_s, rps, raw_latency = measure_produce_raw(cluster, batches, args)
            results["produce_raw_mb_s"], results["produce_raw_records_s"] = mb_s, rps
            say(
                f"  produce_raw: {mb_s:,.1f} MiB/s, {rps:,.0f} records/s; per request "
                f"p50 {percentile(raw_latency, 50):.1f} ms, "
                f"p99 {percentile(raw_latency, 99):.1f} ms"
            )
        if "produce_client" in phases or ("latency" in phases and not args.latency_rate):
            settle_disk()
            say("produce_client (Producer, acks=all, idempotent) ...")
            mb_s, rps, n = measure_producer(cluster, batches, args.seconds)
            results["produce_client_mb_s"], results["produce_client_records_s"] = mb_s, rps
            say(f"  produce_client: {mb_s:,.1f} MiB/s, {rps:,.0f} records/s ({n:,} records)")
        if "latency" in phases:
            rate = args.latency_rate or max(
                1.0, results["produce_client_records_s"] * args.latency_fraction
            )
            settle_disk()
            say(f"latency: Producer paced at {rate:,.0f} records/s ...")
            latency, achieved = measure_latency(
                cluster, batches, rate, args.seconds, args.latency_linger_ms
            )
            results["latency_rate_records_s"] = achieved
            s = summary_ms(latency)
            say(f"  latency per record: {s}")
        if args.profile_node:
            cluster.stop_all()
            profile_lines = report_profiles(profile_dir, args.profile_top)  # type: ignore[arg-type]
        if "failover" in phases:
            cluster.delete_topics(throughput_topics)
            settle_disk()
            say(f"failover: {args.kills} SIGKILLs of a partition leader ...")
            producer = Producer(cluster.bootstrap, acks="all", linger_ms=0)
            try:
                for k in range(args.kills):
                    sample = one_kill(cluster, producer, k)
                    kills.append(sample)
                    say(
                        f"  kill {k}: node {sample['killed']}"
                        + (" (the controller)" if sample["was_controller"] else "")
                        + f" -> {sample['new_leader']}: unavailable "
                        f"{sample['unavailable_ms']:.0f} ms (controller elected "
                        f"{sample['controller_elected_ms']}, fenced {sample['fenced_ms']}, "
                        f"leader elected {sample['leader_elected_ms']} ms); rejoined in "
                        f"{sample['rejoin_s']} s"
                    )
            finally:
                producer.close(timeout=30)
        log_bytes = sum(f.stat().st_size for f in root.rglob("*.log") if f.is_file())
        failed = False
    except BaseException:
        failed = True  # keep the nodes' logs and data to diagnose from
        raise
    finally:
        codes = cluster.stop_all()
        if any(c not in (0, -signal.SIGKILL) for c in codes):
            say(f"WARNING: node exit codes {codes}")
        if args.keep or failed:
            say(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    for line in profile_lines:
        say(line)

    unavailable = [k["unavailable_ms"] for k in kills]
    failover = None
    if unavailable:
        failover = {
            "median_ms": round(statistics.median(unavailable), 1),
            "p99_ms": round(percentile(unavailable, 99), 1),
            "min_ms": round(min(unavailable), 1),
            "max_ms": round(max(unavailable), 1),
            "kills": len(unavailable),
            "controller_kills": sum(1 for k in kills if k["was_controller"]),
            "median_ms_leader_only": _median(
                [k["unavailable_ms"] for k in kills if not k["was_controller"]]
            ),
            "median_ms_leader_and_controller": _median(
                [k["unavailable_ms"] for k in kills if k["was_controller"]]
            ),
            # From the nodes' logs: SIGKILL -> the dead broker fenced by the controller,
            # -> the new leader applied its leadership; the rest is the client noticing.
            "median_fenced_ms": _median([k["fenced_ms"] for k in kills if k["fenced_ms"]]),
            "median_leader_elected_ms": _median(
                [k["leader_elected_ms"] for k in kills if k["leader_elected_ms"]]
            ),
            "median_client_after_election_ms": _median(
                [
                    k["unavailable_ms"] - k["leader_elected_ms"]
                    for k in kills
                    if k["leader_elected_ms"]
                ]
            ),
        }
    lat = summary_ms(latency)
    raw_lat = summary_ms(raw_latency)

    def target(value: float | None, goal: float, at_most: bool) -> dict[str, Any]:
        met = value is not None and (value <= goal if at_most else value >= goal)
        return {"value": value, "target": goal, "met": met}

    result: dict[str, Any] = {
        "benchmark": "replication",
        **{k: (round(v, 1) if isinstance(v, float) else v) for k, v in results.items()},
        "latency": lat,
        "produce_raw_request_latency": raw_lat,
        "failover": failover,
        "failover_kills": kills,
        "targets": {
            "produce_raw_mb_s": target(results["produce_raw_mb_s"], TARGET_MB_S, False),
            "produce_client_mb_s": target(results["produce_client_mb_s"], TARGET_MB_S, False),
            "latency_p99_ms": target(lat["p99_ms"] if lat else None, TARGET_P99_MS, True),
            "failover_median_ms": target(
                failover["median_ms"] if failover else None, TARGET_FAILOVER_MEDIAN_MS, True
            ),
        },
        "cpu_cores": METER.readings,
        "anomalies": cluster.anomalies,
        "log_bytes": log_bytes,
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "params": {
            "quick": args.quick,
            "seconds": args.seconds,
            "phases": args.phases,
            "kills": args.kills,
            "partitions": args.partitions,
            "in_flight_per_leader": args.in_flight,
            "record_bytes": args.record_bytes,
            "batch_bytes": len(batches.build(0)),
            "records_per_batch": batches.records_per_batch,
            "request_bytes": args.request_bytes,
            "latency_fraction": args.latency_fraction,
            "latency_rate": args.latency_rate,
            "latency_linger_ms": args.latency_linger_ms,
            "replication_factor": 3,
            "min_insync_replicas": 2,
            "acks": -1,
            "broker_session_timeout_ms": args.session_timeout_ms,
            "broker_heartbeat_interval_ms": args.heartbeat_interval_ms,
            "controller_quorum_election_timeout_ms": args.election_timeout_ms,
            "replica_lag_time_max_ms": args.lag_time_max_ms,
            "profiled": args.profile_node,
        },
        "units": "MiB/s (2^20 bytes of RecordBatch per second); records/s; milliseconds",
        "notes": [
            "three node processes and this client share the machine's CPUs",
            "latency: the Producer (linger.ms "
            f"{5 if args.latency_linger_ms is None else args.latency_linger_ms}) paced at "
            "latency_rate records/s or latency_fraction of the produce_client records/s, "
            "per record from send() to the acknowledgement; sync(2) before each phase",
            "failover: SIGKILL of the partition leader to the first acknowledgement of a "
            "record sent after it; bounded below by broker.session.timeout.ms (the "
            "controller fences a broker only when its heartbeats stop for that long), plus "
            "a controller election when the leader was also the active controller",
            "each failover kill uses a fresh topic (3 in-sync replicas), deleted afterwards",
            "wall-clock on a shared machine: figures are noisy"
            + ("; the nodes ran under cProfile (inflated times)" if args.profile_node else ""),
        ],
    }
    if args.plot is not None:
        plot(args.plot, latency, unavailable, results.get("latency_rate_records_s"))
        say(f"plot: {args.plot}")
    print(json.dumps(result), flush=True)
    return 0


def plot(
    path: Path, latency: list[float], unavailable: list[float], rate: float | int | None
) -> None:
    """The paced phase's latency CDF and the failover kills' unavailability CDF, each
    with its target."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, values, goal, goal_label, xlabel, title in (
        (
            left,
            latency,
            TARGET_P99_MS,
            f"p99 target {TARGET_P99_MS:g} ms",
            "ms from send() to the acknowledgement (log)",
            f"acks=all latency per record at {rate or 0:,.0f} records/s",
        ),
        (
            right,
            unavailable,
            TARGET_FAILOVER_MEDIAN_MS,
            f"median target {TARGET_FAILOVER_MEDIAN_MS:g} ms",
            "ms from the leader's SIGKILL to the next acknowledgement",
            f"partition failover, {len(unavailable)} kills",
        ),
    ):
        if values:
            xs = sorted(values)
            ax.step(xs, [(i + 1) / len(xs) for i in range(len(xs))], where="post")
        ax.axvline(goal, color="grey", linestyle="--", label=goal_label)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("share")
        ax.set_title(title)
        ax.legend(fontsize=8, loc="lower right")
    left.set_xscale("log")
    options.save_plot(fig, path)


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 1) if values else None


if __name__ == "__main__":
    sys.exit(main())
