"""What the benchmarks measure with: progress lines, the gRPC channel options of the
node, percentiles and latency summaries, pacing at a rate, a sync between phases, the
CPU the nodes and this process burn per timed window, and the record batches (with
their checks) the raw produce phases send."""

from __future__ import annotations

import math
import os
import random
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from seglog.proto import client_pb2 as pb
from seglog.storage.record_batch import NewRecord, build_batch

MIB = 1024 * 1024
MAX_MESSAGE_BYTES = 64 * MIB  # the node's own limit (node/server.py)
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
]
PRODUCE_METHOD = "/seglog.v1.SegLog/Produce"


def say(msg: str) -> None:
    print(msg, flush=True)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def summary_ms(values: Sequence[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {
        "p50_ms": round(percentile(values, 50), 2),
        "p99_ms": round(percentile(values, 99), 2),
        "mean_ms": round(statistics.fmean(values), 2),
        "max_ms": round(max(values), 2),
        "count": len(values),
    }


def produce_for(
    producer: Any, topic: str, batches: Batches, seconds: float, meter: CpuMeter
) -> tuple[float, float, int]:
    """`producer`'s send() of `batches`' values to `topic` for `seconds`, flush included,
    after one acknowledged send (metadata, warm-up); closes it. MiB/s of batch bytes
    sent (the Producer's bytes_sent), records/s, records; CPU under "produce_client"."""
    values = [batches.value(i) for i in range(512)]
    try:
        producer.send(topic, value=values[0]).get(timeout=30)
        base_bytes = producer.metrics()["bytes_sent"]
        n = 0
        meter.start()
        start = time.perf_counter()
        end = start + seconds
        while True:
            for v in values[:64]:
                producer.send(topic, value=v)
            n += 64
            if time.perf_counter() >= end:
                break
            values.append(values.pop(0))
        producer.flush(timeout=120)
        elapsed = time.perf_counter() - start
        meter.stop("produce_client")
        metrics = producer.metrics()
        if metrics["records_failed"]:
            raise RuntimeError(f"{int(metrics['records_failed'])} records failed")
        sent = metrics["bytes_sent"] - base_bytes
    finally:
        producer.close(timeout=30)
    return sent / MIB / elapsed, n / elapsed, n


def librdkafka_produce_until(
    producer: Any,
    end: float,
    produce_one: Callable[[int], None],
    n: int,
    undelivered: str,
    limit: int | None = None,
) -> int:
    """produce_one(n), n counting up, in rounds of 256 until perf_counter time `end`
    or n reaching `limit` (polling while librdkafka's queue is full), then a flush; the
    count reached. Raises RuntimeError(`undelivered`) when the flush leaves messages
    without an outcome."""
    while time.perf_counter() < end and (limit is None or n < limit):
        for _ in range(256 if limit is None else min(256, limit - n)):
            try:
                produce_one(n)
                n += 1
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    if producer.flush(120) != 0:
        raise RuntimeError(undelivered)
    return n


def producer_time_split(metrics: dict[str, float], digits: int) -> dict[str, float]:
    """seglog's Producer's own split of a record's time, from its metrics() (Kafka's
    producer metrics): waiting for its batch to be sent, then the Produce call."""
    return {
        "record_queue_time_avg_ms": round(metrics["record-queue-time-avg"], digits),
        "request_latency_avg_ms": round(metrics["request-latency-avg"], digits),
        "records_per_request_avg": round(metrics["records-per-request-avg"], digits),
    }


def settle_disk() -> None:
    """sync(2) before a phase, so that it does not pay for the writeback of the data
    the previous phase left dirty in the page cache."""
    started = time.monotonic()
    os.sync()
    say(f"  (sync: {time.monotonic() - started:.1f} s)")


def pace(rate: float, start: float, end: float, send: Callable[[int, float], None]) -> int:
    """Call send(n, t0) for n = 0, 1, ... at `rate` per second from perf_counter time
    `start` until `end` (t0: when the call was made); the number of calls."""
    interval = 1.0 / rate
    n = 0
    while True:
        due = start + n * interval
        now = time.perf_counter()
        if due > now:
            time.sleep(due - now)
        t0 = time.perf_counter()
        if t0 >= end:
            return n
        send(n, t0)
        n += 1


class CpuMeter:
    """CPU cores busy (user+sys seconds per wall second) of the server processes `pids`
    together (from /proc, Linux only; None without pids) and of this process, per timed
    window; `name` is the servers' key in each reading."""

    def __init__(self, name: str = "nodes_cores") -> None:
        self.name = name
        self.pids: list[int] = []
        self.readings: dict[str, dict[str, float | None]] = {}
        self._start: tuple[float, float | None, float] | None = None

    def _servers_cpu_s(self) -> float | None:
        if not self.pids:
            return None
        total = 0.0
        for pid in self.pids:
            try:
                text = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                return None
            fields = text[text.rindex(")") + 2 :].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return total

    def start(self) -> None:
        self._start = (time.perf_counter(), self._servers_cpu_s(), time.process_time())

    def stop(self, label: str) -> None:
        assert self._start is not None
        wall0, servers0, own0 = self._start
        wall = time.perf_counter() - wall0
        servers1 = self._servers_cpu_s()
        servers = None if servers0 is None or servers1 is None else (servers1 - servers0) / wall
        self.readings[label] = {
            self.name: None if servers is None else round(servers, 2),
            "client_cores": round((time.process_time() - own0) / wall, 2),
        }


def run_lanes_together(
    lanes: int,
    lane: Callable[[int, float], None],
    seconds: float,
    meter: CpuMeter,
    label: str | None,
) -> float:
    """`lane(i, end)` on `lanes` threads released at once; each starts no new call once
    time.perf_counter() passes `end`, `seconds` after the release. The CPU of the window
    goes to `meter` under `label` (None: an untimed warm-up). The seconds from the
    release until the last lane ended."""
    barrier = threading.Barrier(lanes + 1)
    end = [0.0]

    def run(i: int) -> None:
        barrier.wait()
        lane(i, end[0])

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(lanes)]
    for t in threads:
        t.start()
    if label is not None:
        meter.start()
    start = time.perf_counter()
    end[0] = start + seconds
    barrier.wait()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    if label is not None:
        meter.stop(label)
    return elapsed


class Batches:
    """Batches of `record_bytes` records, as many as fit in `batch_bytes` (as a producer
    closes them), values from a seeded random pool so nothing compresses by accident."""

    def __init__(self, record_bytes: int, batch_bytes: int, seed: int) -> None:
        self.pool = random.Random(seed).randbytes(4 * MIB)
        self.record_bytes = record_bytes
        self.now_ms = int(time.time() * 1000)
        n = 1
        while len(self.build(0, n + 1)) <= batch_bytes:
            n += 1
        self.records_per_batch = n

    def value(self, i: int) -> bytes:
        start = (i * 7919 % ((len(self.pool) - self.record_bytes) // 64)) * 64
        return self.pool[start : start + self.record_bytes]

    def build(self, index: int, n: int | None = None) -> bytes:
        n = self.records_per_batch if n is None else n
        records = [NewRecord(self.value(index * n + j)) for j in range(n)]
        return build_batch(records, now_ms=self.now_ms)


def check_produce(response: pb.ProduceResponse) -> None:
    for t in response.topics:
        for p in t.partitions:
            if p.error_code != 0:
                raise RuntimeError(f"produce to {t.name}-{p.partition} failed: {p}")
