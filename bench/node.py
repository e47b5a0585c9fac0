"""Node benchmark: produce and consume MB/s with 1 KiB records against one real node
process on loopback, each as a ratio to the raw gRPC ceiling measured in the same run.

Phases, in this order (each timed for --seconds, wall clock):

1. ceiling: a trivial gRPC service in a second process (the same server options as the
   node: a thread pool of 16, 64 MiB message limit, its malloc thresholds) with two
   unary methods on raw bytes, no protobuf: `Put` takes 1 MiB and answers 2 bytes (the
   produce direction), `Get` takes 8 bytes and answers 1 MiB (the consume direction).
   Measured before and after the node phases; the higher of the two runs is the
   ceiling (the harder ratio).
   floor: the same process also answers the node's own Produce and Fetch messages
   (protobuf, as the node's servicer parses and builds them) without storing or reading
   anything: produce_floor sends produce_raw's requests and gets one answer per
   partition; consume_floor sends consume_raw's requests and gets whole batches cut
   from a prebuilt stream. What a node on this stack (grpcio's Python server, protobuf
   messages) could reach if its own work cost nothing; measured after the first
   ceiling run.
2. produce_raw (the node): pre-built, pre-serialized ProduceRequests, each carrying
   ~1 MiB of RecordBatch v2 (batches of ~16 KiB, 1 KiB records, no compression) spread
   over every partition, acks=1, sent by raw Produce RPCs.
3. produce_client: the Producer client end to end (send() of 1 KiB values, acks=1,
   defaults otherwise: linger.ms 5, batch.size 16384), including the final flush().
4. consume_raw (the node): raw Fetch RPCs of ~1 MiB each (max_wait_ms 0), positions
   advanced by reading batch headers only; wraps to offset 0 at the end of a partition.
5. consume_client: the Consumer client end to end (poll() loop from the beginning,
   defaults otherwise), counting key+value bytes of the records it returns.

The raw and ceiling phases keep --in-flight calls outstanding on one channel (one
connection, as a client has to a node), one thread per call slot. The client phases use
the clients' own concurrency. Produce MB/s counts RecordBatch bytes acknowledged (the
Producer's bytes_sent); consume_raw counts record-batch bytes returned; consume_client
counts key + value bytes (about 3% less than batch bytes for 1 KiB records).

The last stdout line is one JSON object; everything before it is progress.

    python bench/node.py [--seconds S] [--quick] [--partitions N] [--in-flight N]
                         [--phases a,b,...] [--profile-node] [--dir D] [--keep]

--profile-node runs the node under cProfile (every thread, via a launcher that wraps
threading.Thread.run; no node code changes) and prints where its time went; the
figures of such a run are inflated by the profiler.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from pathlib import Path

import grpc

from seglog.bench import options
from seglog.bench.cluster import ProfiledNode, profile_report
from seglog.bench.measure import (
    CHANNEL_OPTIONS,
    MIB,
    PRODUCE_METHOD,
    Batches,
    CpuMeter,
    check_produce,
    produce_for,
    run_lanes_together,
    say,
)
from seglog.client.admin import Admin, NewTopic
from seglog.client.consumer import Consumer, TopicPartition
from seglog.client.producer import Producer
from seglog.node import allocator
from seglog.proto import client_pb2 as pb
from seglog.storage.record_batch import BATCH_SCAN, LOG_OVERHEAD

# Issue 20's targets: the node's raw paths at 0.6 of the gRPC ceiling, the clients at 0.3.
TARGET_RAW_RATIO = 0.6
TARGET_CLIENT_RATIO = 0.3
ECHO_SERVICE = "seglogbench.Echo"
FETCH_METHOD = "/seglog.v1.SegLog/Fetch"
FLOOR_PRODUCE = f"/{ECHO_SERVICE}/Produce"
FLOOR_FETCH = f"/{ECHO_SERVICE}/Fetch"
TOPIC_RAW = "bench-raw"
TOPIC_CLIENT = "bench-client"
PHASES = ("ceiling", "floor", "produce_raw", "produce_client", "consume_raw", "consume_client")


# --- the ceiling: a trivial gRPC service in a second process --------------------------------


def serve_echo(batches: Batches) -> int:
    """Child mode: serve Put/Get (and the floor's Produce/Fetch) on a free loopback
    port, print the port, run until stdin closes or SIGTERM. The node's malloc
    thresholds too (node/allocator.py), so the ceiling is what the node's own process
    settings allow."""
    allocator.tune_malloc()
    payload = random.Random(7).randbytes(MIB)
    floor = FloorService(batches)
    handlers = {
        "Put": grpc.unary_unary_rpc_method_handler(lambda request, context: b"ok"),
        "Get": grpc.unary_unary_rpc_method_handler(lambda request, context: payload),
        "Produce": grpc.unary_unary_rpc_method_handler(
            floor.produce,
            request_deserializer=pb.ProduceRequest.FromString,
            response_serializer=pb.ProduceResponse.SerializeToString,
        ),
        "Fetch": grpc.unary_unary_rpc_method_handler(
            floor.fetch,
            request_deserializer=pb.FetchRequest.FromString,
            response_serializer=pb.FetchResponse.SerializeToString,
        ),
    }
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="grpc"),
        options=[*CHANNEL_OPTIONS, ("grpc.so_reuseport", 0)],
    )
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(ECHO_SERVICE, handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    print(port, flush=True)
    done.wait()
    server.stop(grace=1).wait(3)
    return 0


class FloorService:
    """The node's Produce and Fetch with the node's own work taken out: the same
    protobuf messages parsed and built, nothing stored or read. An answer per
    partition, as the servicer gives; a fetch answer carries whole batches up to the
    partition's byte limit (at least one), cut from a prebuilt stream, so the bytes
    are copied into the message as the node copies a segment read."""

    def __init__(self, batches: Batches) -> None:
        one = batches.build(0)
        self.stream = one * max(1, (4 * MIB) // len(one))
        self.batch_bytes = len(one)

    def produce(self, request: pb.ProduceRequest, context: object) -> pb.ProduceResponse:
        response = pb.ProduceResponse()
        for t in request.topics:
            tr = response.topics.add(name=t.name)
            for p in t.partitions:
                # A non-zero offset, so the answer is encoded at the node's size.
                tr.partitions.add(partition=p.partition, base_offset=len(p.records))
        return response

    def fetch(self, request: pb.FetchRequest, context: object) -> pb.FetchResponse:
        response = pb.FetchResponse()
        budget = request.max_bytes
        for t in request.topics:
            tr = response.topics.add(name=t.name)
            for p in t.partitions:
                limit = min(p.partition_max_bytes, budget, len(self.stream))
                cut = max(1, limit // self.batch_bytes) * self.batch_bytes
                budget -= cut
                tr.partitions.add(
                    partition=p.partition, high_watermark=1 << 62, records=self.stream[:cut]
                )
        return response


@contextlib.contextmanager
def echo_process(args: Sequence[str] = ()) -> Iterator[tuple[str, int]]:
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--serve-echo", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.strip().isdigit():
            raise RuntimeError(f"echo server did not start: {line!r}")
        yield f"127.0.0.1:{int(line)}", proc.pid
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


METER = CpuMeter("server_cores")


def run_lanes(
    lanes: int, seconds: float, make_call: Callable[[int], Callable[[], int]], label: str
) -> float:
    """`lanes` threads, each repeating its call (which returns the bytes it moved) for
    `seconds` after an untimed warm-up of the same shape; MiB/s over the time until the
    last call ended. CPU use of the timed part goes to METER under `label`."""
    calls = [make_call(i) for i in range(lanes)]

    def timed(duration: float, label: str | None) -> float:
        totals = [0] * lanes

        def lane(i: int, end: float) -> None:
            n = 0
            call = calls[i]
            while time.perf_counter() < end:
                n += call()
            totals[i] = n

        elapsed = run_lanes_together(lanes, lane, duration, METER, label)
        return sum(totals) / MIB / elapsed

    timed(min(1.0, seconds / 4), None)  # warm-up: connection, allocations, page cache
    return timed(seconds, label)


def measure_ceiling(address: str, lanes: int, seconds: float, label: str) -> tuple[float, float]:
    payload = random.Random(3).randbytes(MIB)
    with grpc.insecure_channel(address, CHANNEL_OPTIONS) as channel:
        put = channel.unary_unary(f"/{ECHO_SERVICE}/Put")
        get = channel.unary_unary(f"/{ECHO_SERVICE}/Get")

        def make_put(_i: int) -> Callable[[], int]:
            def call() -> int:
                put(payload, timeout=30)
                return len(payload)

            return call

        def make_get(_i: int) -> Callable[[], int]:
            def call() -> int:
                return len(get(b"12345678", timeout=30))

            return call

        return (
            run_lanes(lanes, seconds, make_put, f"ceiling_put_{label}"),
            run_lanes(lanes, seconds, make_get, f"ceiling_get_{label}"),
        )


# --- the node -----------------------------------------------------------------------------

# --- raw produce --------------------------------------------------------------------------


def produce_requests(
    batches: Batches, partitions: int, request_bytes: int, distinct: int
) -> list[tuple[bytes, int]]:
    """Serialized ProduceRequests of ~request_bytes each (whole batches spread evenly over
    the partitions), with the batch bytes each carries."""
    one = len(batches.build(0))
    per_partition = max(1, request_bytes // one // partitions)
    out = []
    index = 0
    for _ in range(distinct):
        request = pb.ProduceRequest(acks=1, timeout_ms=30_000)
        topic = request.topics.add(name=TOPIC_RAW)
        carried = 0
        for p in range(partitions):
            data = b"".join(batches.build(index + k) for k in range(per_partition))
            index += per_partition
            topic.partitions.add(partition=p, records=data)
            carried += len(data)
        out.append((request.SerializeToString(), carried))
    return out


def measure_produce_raw(
    address: str,
    requests: list[tuple[bytes, int]],
    lanes: int,
    seconds: float,
    method: str = PRODUCE_METHOD,
    label: str = "produce_raw",
) -> float:
    with grpc.insecure_channel(address, CHANNEL_OPTIONS) as channel:
        produce = channel.unary_unary(method, response_deserializer=pb.ProduceResponse.FromString)

        def make_call(lane: int) -> Callable[[], int]:
            state = {"i": lane}

            def call() -> int:
                data, carried = requests[state["i"] % len(requests)]
                state["i"] += lanes
                check_produce(produce(data, timeout=60))
                return carried

            return call

        return run_lanes(lanes, seconds, make_call, label)


def fill(address: str, requests: list[tuple[bytes, int]], total_bytes: int) -> None:
    """Untimed: enough data for the consume phases when produce_raw is not run."""
    with grpc.insecure_channel(address, CHANNEL_OPTIONS) as channel:
        produce = channel.unary_unary(
            PRODUCE_METHOD, response_deserializer=pb.ProduceResponse.FromString
        )
        done, i = 0, 0
        while done < total_bytes:
            data, carried = requests[i % len(requests)]
            check_produce(produce(data, timeout=60))
            done += carried
            i += 1


# --- raw fetch ----------------------------------------------------------------------------


def next_offset(records: bytes, current: int) -> int:
    """The offset after the last whole batch in a fetch answer (headers only)."""
    pos, end, nxt = 0, len(records), current
    while pos + BATCH_SCAN.size <= end:
        base, length, _magic, last_delta = BATCH_SCAN.unpack_from(records, pos)
        size = length + LOG_OVERHEAD
        if pos + size > end:
            break
        nxt = base + last_delta + 1
        pos += size
    return nxt


def fetch_once(
    fetch: Callable[..., pb.FetchResponse],
    topic_name: str,
    positions: dict[int, int],
    max_bytes: int,
    per_partition: int,
) -> int:
    """One raw Fetch (max_wait_ms 0) of `positions`' partitions from their positions,
    advanced by reading batch headers only; the record bytes it returned."""
    request = pb.FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes)
    topic = request.topics.add(name=topic_name)
    for p, offset in positions.items():
        topic.partitions.add(
            partition=p,
            current_leader_epoch=-1,
            fetch_offset=offset,
            last_fetched_epoch=-1,
            partition_max_bytes=per_partition,
        )
    got = 0
    for t in fetch(request, timeout=60).topics:
        for pr in t.partitions:
            if pr.error_code != 0:
                raise RuntimeError(f"fetch {t.name}-{pr.partition}: {pr}")
            got += len(pr.records)
            nxt = next_offset(pr.records, positions[pr.partition])
            # At the end of the partition: read it again (page cache).
            positions[pr.partition] = nxt if nxt < pr.high_watermark else 0
    return got


def measure_fetch_raw(
    address: str,
    partitions: int,
    lanes: int,
    seconds: float,
    request_bytes: int,
    method: str = FETCH_METHOD,
    label: str = "consume_raw",
) -> float:
    lanes = min(lanes, partitions)
    with grpc.insecure_channel(address, CHANNEL_OPTIONS) as channel:
        fetch = channel.unary_unary(
            method,
            request_serializer=pb.FetchRequest.SerializeToString,
            response_deserializer=pb.FetchResponse.FromString,
        )

        def make_call(lane: int) -> Callable[[], int]:
            mine = list(range(lane, partitions, lanes))
            positions = dict.fromkeys(mine, 0)
            per_partition = max(1, request_bytes // len(mine))

            def call() -> int:
                return fetch_once(fetch, TOPIC_RAW, positions, request_bytes, per_partition)

            return call

        return run_lanes(lanes, seconds, make_call, label)


# --- clients ------------------------------------------------------------------------------


def measure_producer_client(
    bootstrap: str, batches: Batches, seconds: float
) -> tuple[float, float, int]:
    """MiB/s of batch bytes sent (the Producer's bytes_sent) and records/s, flush included."""
    return produce_for(Producer(bootstrap, acks=1), TOPIC_CLIENT, batches, seconds, METER)


def measure_consumer_client(
    bootstrap: str, partitions: int, seconds: float
) -> tuple[float, float, int]:
    """MiB/s of key+value bytes returned by poll() and records/s, from the beginning."""
    tps = [TopicPartition(TOPIC_RAW, p) for p in range(partitions)]
    consumer = Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest")
    try:
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        consumer.poll(5000, max_records=1)  # connection, first fetch (untimed)
        consumer.seek_to_beginning()
        n, nbytes = 0, 0
        METER.start()
        start = time.perf_counter()
        end = start + seconds
        while time.perf_counter() < end:
            got = consumer.poll(200)
            for records in got.values():
                n += len(records)
                for r in records:
                    nbytes += max(r.serialized_key_size, 0) + max(r.serialized_value_size, 0)
            if not got and all(consumer.position(tp) >= ends[tp] for tp in tps):
                consumer.seek_to_beginning()  # read it again (page cache)
        elapsed = time.perf_counter() - start
        METER.stop("consume_client")
    finally:
        consumer.close()
    return nbytes / MIB / elapsed, n / elapsed, n


def report_profile(path: Path, top: int) -> list[str]:
    if not path.exists():
        return [f"(no profile written at {path})"]
    return profile_report([path], top, "node profile", "all threads")


# --- main ---------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=None, help="per timed phase (8)")
    parser.add_argument("--quick", action="store_true", help="short phases, for a smoke run")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--in-flight", type=int, default=4, help="raw/ceiling calls in flight")
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--batch-bytes", type=int, default=16384)
    parser.add_argument("--request-bytes", type=int, default=MIB)
    options.add_phases(parser, PHASES)
    options.add_profile_node(parser)
    options.add_options(parser, "--dir", "--keep", "--plot", "--seed")
    parser.add_argument("--serve-echo", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    options.quick_or_full(args, seconds=(1.0, 8.0))
    args.phases = options.known_names(parser, "--phases", args.phases, PHASES)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    batches = Batches(args.record_bytes, args.batch_bytes, args.seed)
    if args.serve_echo:
        return serve_echo(batches)
    phases = set(args.phases)
    lanes, seconds = args.in_flight, args.seconds
    results: dict[str, float | int | None] = dict.fromkeys(
        (
            "ceiling_put_mb_s",
            "ceiling_get_mb_s",
            "produce_floor_mb_s",
            "consume_floor_mb_s",
            "produce_raw_mb_s",
            "produce_client_mb_s",
            "produce_client_records_s",
            "consume_raw_mb_s",
            "consume_client_mb_s",
            "consume_client_records_s",
        )
    )
    ceiling_runs: list[tuple[float, float]] = []

    echo_args = [
        f"--record-bytes={args.record_bytes}",
        f"--batch-bytes={args.batch_bytes}",
        f"--seed={args.seed}",
    ]
    requests = produce_requests(batches, args.partitions, args.request_bytes, distinct=8)

    def echo_phases(label: str, floor: bool) -> None:
        """The ceiling (if asked for) and, with `floor`, the floor, in one echo process."""
        if not floor and "ceiling" not in phases:
            return
        with echo_process(echo_args) as (address, pid):
            METER.pids = [pid]
            if "ceiling" in phases:
                put, get = measure_ceiling(address, lanes, seconds, label)
                ceiling_runs.append((put, get))
                say(f"  ceiling ({label}): Put 1 MiB {put:,.0f} MiB/s; Get 1 MiB {get:,.0f} MiB/s")
            if floor:
                produce = measure_produce_raw(
                    address, requests, lanes, seconds, FLOOR_PRODUCE, "produce_floor"
                )
                fetch = measure_fetch_raw(
                    address,
                    args.partitions,
                    lanes,
                    seconds,
                    args.request_bytes,
                    FLOOR_FETCH,
                    "consume_floor",
                )
                results["produce_floor_mb_s"], results["consume_floor_mb_s"] = produce, fetch
                say(
                    f"  floor (node messages, no storage): Produce {produce:,.0f} MiB/s; "
                    f"Fetch {fetch:,.0f} MiB/s"
                )

    say(
        f"seglog node bench: {seconds:g} s per phase, {args.partitions} partitions, "
        f"{args.record_bytes} B records, {lanes} raw calls in flight, {os.cpu_count()} CPUs"
    )
    echo_phases("before", floor="floor" in phases)

    request_size = len(requests[0][0])
    root = options.work_dir(args.dir, "seglog-node-bench-")
    profile_path = root / "node.prof" if args.profile_node else None
    node = ProfiledNode(root / "cluster", overrides={"log.initial.task.delay.ms": "30000"})
    node.profile_path = profile_path
    profile_lines: list[str] = []
    try:
        node.start()
        assert node.proc is not None
        METER.pids = [node.proc.pid]
        bootstrap = node.bootstrap
        say(f"node on {bootstrap}, data in {root}" + (" (profiled)" if args.profile_node else ""))
        with Admin(bootstrap) as admin:
            admin.create_topics(
                [
                    NewTopic(TOPIC_RAW, args.partitions, 1),
                    NewTopic(TOPIC_CLIENT, args.partitions, 1),
                ]
            )
        if "produce_raw" in phases:
            say(
                f"produce_raw: {request_size / MIB:.2f} MiB requests, "
                f"{batches.records_per_batch} records per batch ..."
            )
            mb_s = measure_produce_raw(bootstrap, requests, lanes, seconds)
            results["produce_raw_mb_s"] = mb_s
            say(f"  produce_raw: {mb_s:,.1f} MiB/s")
        elif phases & {"consume_raw", "consume_client"}:
            say("fill (untimed) ...")
            fill(bootstrap, requests, 64 * MIB)
        if "produce_client" in phases:
            say("produce_client (Producer, acks=1) ...")
            mb_s, rps, n = measure_producer_client(bootstrap, batches, seconds)
            results["produce_client_mb_s"] = mb_s
            results["produce_client_records_s"] = rps
            say(f"  produce_client: {mb_s:,.1f} MiB/s, {rps:,.0f} records/s ({n:,} records)")
        if "consume_raw" in phases:
            say("consume_raw (Fetch) ...")
            mb_s = measure_fetch_raw(bootstrap, args.partitions, lanes, seconds, args.request_bytes)
            results["consume_raw_mb_s"] = mb_s
            say(f"  consume_raw: {mb_s:,.1f} MiB/s")
        if "consume_client" in phases:
            say("consume_client (Consumer) ...")
            mb_s, rps, n = measure_consumer_client(bootstrap, args.partitions, seconds)
            results["consume_client_mb_s"] = mb_s
            results["consume_client_records_s"] = rps
            say(f"  consume_client: {mb_s:,.1f} MiB/s, {rps:,.0f} records/s ({n:,} records)")
        log_bytes = sum(f.stat().st_size for f in root.rglob("*.log") if f.is_file())
    finally:
        code = node.stop()
        if code != 0:
            say(f"WARNING: node exited with {code}")
        if profile_path is not None:
            profile_lines = report_profile(profile_path, args.profile_top)
        if args.keep:
            say(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)

    echo_phases("after", floor=False)
    for line in profile_lines:
        say(line)

    put = max((r[0] for r in ceiling_runs), default=None)
    get = max((r[1] for r in ceiling_runs), default=None)
    results["ceiling_put_mb_s"], results["ceiling_get_mb_s"] = put, get

    def ratio(value: float | int | None, base: float | None) -> float | None:
        if value is None or not base:
            return None
        return round(value / base, 3)

    ratios = {
        "produce_raw_ratio": ratio(results["produce_raw_mb_s"], put),
        "produce_client_ratio": ratio(results["produce_client_mb_s"], put),
        "consume_raw_ratio": ratio(results["consume_raw_mb_s"], get),
        "consume_client_ratio": ratio(results["consume_client_mb_s"], get),
    }
    floors = {
        "produce_floor_ratio": ratio(results["produce_floor_mb_s"], put),
        "consume_floor_ratio": ratio(results["consume_floor_mb_s"], get),
        # How much of what the stack allows the node reaches.
        "produce_raw_of_floor": ratio(results["produce_raw_mb_s"], results["produce_floor_mb_s"]),
        "consume_raw_of_floor": ratio(results["consume_raw_mb_s"], results["consume_floor_mb_s"]),
    }

    def target(value: float | None, goal: float) -> dict[str, object]:
        return {"value": value, "target": goal, "met": value is not None and value >= goal}

    result: dict[str, object] = {
        "benchmark": "node",
        **{k: (round(v, 1) if isinstance(v, float) else v) for k, v in results.items()},
        "ceiling_mb_s": None if put is None else round(put, 1),
        "ceiling_runs": [[round(a, 1), round(b, 1)] for a, b in ceiling_runs],
        **ratios,
        **floors,
        "targets": {
            name: target(value, TARGET_RAW_RATIO if "raw" in name else TARGET_CLIENT_RATIO)
            for name, value in ratios.items()
        },
        "cpu_cores": METER.readings,
        "log_bytes": log_bytes,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "params": {
            "seconds": seconds,
            "quick": args.quick,
            "phases": args.phases,
            "partitions": args.partitions,
            "in_flight": lanes,
            "record_bytes": args.record_bytes,
            "batch_bytes_limit": args.batch_bytes,
            "batch_bytes": len(batches.build(0)),
            "records_per_batch": batches.records_per_batch,
            "produce_request_bytes": request_size,
            "fetch_request_bytes": args.request_bytes,
            "acks": 1,
            "compression": "none",
            "profiled": args.profile_node,
        },
        "units": "MiB/s (2^20 bytes per second); records per second",
        "notes": [
            "ceiling_put_mb_s: unary calls carrying 1 MiB of raw bytes (no protobuf) to a "
            "trivial service in another process; ceiling_get_mb_s: 1 MiB answers; the higher "
            "of the before/after runs; ceiling_mb_s is the Put figure",
            "produce ratios are to ceiling_put_mb_s, consume ratios to ceiling_get_mb_s",
            "produce_floor_mb_s/consume_floor_mb_s: the node's own Produce/Fetch messages "
            "answered by the ceiling's process without storing or reading (protobuf and "
            "gRPC only); *_raw_of_floor: the node's rate as a share of that",
            "produce_raw/consume_raw measure the node (pre-serialized requests, raw stubs); "
            "produce_client/consume_client the Producer/Consumer end to end",
            "consume_client counts key+value bytes; the other figures count batch bytes",
            "both processes share the machine's CPUs: the client side competes with the node; "
            "cpu_cores gives user+sys cores busy per timed window (server = node or echo "
            "process, client = this process)",
            "wall-clock on a shared machine: figures are noisy"
            + ("; the node ran under cProfile (inflated times)" if args.profile_node else ""),
        ],
    }
    if args.plot is not None:
        plot(args.plot, results, put, get)
        say(f"plot: {args.plot}")
    print(json.dumps(result), flush=True)
    return 0


def plot(
    path: Path, results: dict[str, float | int | None], put: float | None, get: float | None
) -> None:
    """Each phase's MiB/s beside its gRPC ceiling, with issue 20's target for it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    phases = [
        ("produce_raw", put, TARGET_RAW_RATIO),
        ("produce_client", put, TARGET_CLIENT_RATIO),
        ("consume_raw", get, TARGET_RAW_RATIO),
        ("consume_client", get, TARGET_CLIENT_RATIO),
    ]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    xs = list(range(len(phases)))
    w = 0.27
    floors = {
        "produce_raw": results.get("produce_floor_mb_s"),
        "consume_raw": results.get("consume_floor_mb_s"),
    }
    for x, (name, ceiling, goal) in zip(xs, phases, strict=True):
        value = results.get(f"{name}_mb_s") or 0.0
        ax.bar(x - w, value, w, color="tab:blue", label="seglog" if x == 0 else None)
        floor = floors.get(name)
        if floor:
            ax.bar(
                x,
                floor,
                w,
                color="tab:green",
                alpha=0.6,
                label="node messages, no storage" if x == 0 else None,
            )
        if ceiling:
            ax.bar(x + w, ceiling, w, color="lightgrey", label="gRPC ceiling" if x == 0 else None)
            ax.hlines(
                goal * ceiling,
                x - 1.5 * w,
                x + 1.5 * w,
                colors="tab:red",
                linestyles="--",
                label="target" if x == 0 else None,
            )
            ax.annotate(f"{value / ceiling:.2f}", (x - w, value), ha="center", va="bottom")
    ax.set_xticks(xs, [name for name, _c, _g in phases])
    ax.set_ylabel("MiB/s")
    ax.set_title("one node, 1 KiB records: rate and share of the gRPC ceiling")
    ax.legend(fontsize=8)
    options.save_plot(fig, path)


if __name__ == "__main__":
    sys.exit(main())
