"""Pipeline benchmark: rows per second a Spark batch read of a seglog topic delivers,
against the Python Consumer reading the same topic in the same run; the seglog sink
against the Python Producer; and a streaming query's end-to-end latency.

Phases, in order (only the marked parts are timed):

1. a node process on loopback (its own temp dir) unless --bootstrap-server is given.
2. for each size in --records (default 500000 and 2000000): a topic of --partitions
   partitions filled with that many records of --record-bytes (keyed, recent
   timestamps) by the idempotent Producer [timed: producer_rows_per_s, first size];
   one warm-up Spark read of it (untimed: JVM start, class loading, Python worker
   start-up are paid once per session, not per read); then --repeat rounds of:
   a. consumer [timed]: one Consumer assigned every partition, from the beginning,
      polled until it holds every record (each becomes a ConsumerRecord);
   b. spark count [timed]: `df.count()` of a `seglog` batch read;
   c. spark materialise [timed]: the same read written to Spark's `noop` sink,
      which turns every row into a JVM row and drops it.
   Every Spark query pays a fixed cost (planning in a Python process Spark starts
   for it, task scheduling, Python workers handing over): about 0.2-0.5 s here. The
   larger size shows the rate once that cost is spread over enough rows.
3. sink [timed, --repeat rounds]: the rows (key, value) of the first size, cached in
   Spark, written to a second topic with the `seglog` sink; against the Python
   Producer's rate in phase 2.
4. streaming [--stream-seconds, 0 skips]: a Producer thread sends --stream-rate
   records/s (100-byte values, in 10 ms steps) to a fresh topic; a streaming query
   reads it with the `seglog` source and writes every row with the `seglog` sink to
   another topic, carrying the record's produce timestamp in the key. The sink stamps
   each record with the time it wrote it (CreateTime), so latency = sink timestamp -
   produce timestamp, per record, read back with a Consumer once the query stops
   (records produced in the first --stream-warmup seconds are left out). Spark's
   progress JSON of every micro-batch (numInputRows, processedRowsPerSecond,
   durationMs) is summarised.

`spark_rows_per_s` and `ratio` are those of the largest size (3c against 2a, best
rounds); `by_records` holds every size's figures, every round is under `samples`.
Spark runs local[--cores] on this machine: executors and the node share the CPUs.
Figures are wall-clock on a shared machine: noisy; the load average is printed.
The last stdout line is one JSON object; everything before it is progress.

    python bench/pipeline.py [--records 500000,2000000] [--partitions 4]
                             [--record-bytes 100] [--cores 2] [--repeat 3]
                             [--stream-seconds 30] [--stream-rate 10000]
                             [--bootstrap-server H:P] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from seglog.bench.options import positive_ints, quick_or_full
from seglog.client.admin import Admin, NewTopic
from seglog.client.cluster import TopicPartition
from seglog.client.consumer import Consumer
from seglog.client.producer import Producer
from seglog.harness.ports import free_ports

TOPIC = "bench-pipeline"
SINK_TOPIC = "bench-pipeline-sink"
STREAM_TOPIC = "bench-pipeline-stream"
STREAM_SINK_TOPIC = "bench-pipeline-stream-sink"


def say(msg: str) -> None:
    print(msg, flush=True)


class LocalNode:
    """A `seglog node` child process on a free loopback port, in `data_dir`."""

    def __init__(self, data_dir: Path) -> None:
        self.port = free_ports(1)[0]  # below the ephemeral range (chaos.targets says why)
        self.bootstrap = f"127.0.0.1:{self.port}"
        config = data_dir / "server.properties"
        config.write_text(
            f"node.id=1\nlisteners=GRPC://127.0.0.1:{self.port}\n"
            f"log.dirs={data_dir / 'logs'}\nnum.partitions=1\n"
        )
        self.log = open(data_dir / "node.log", "ab")  # noqa: SIM115 - the child's output
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "seglog.cli", "node", "--config", str(config)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self._wait_healthy(60)

    def _wait_healthy(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        with grpc.insecure_channel(self.bootstrap) as channel:
            stub = health_pb2_grpc.HealthStub(channel)
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError("the node exited during start-up")
                try:
                    r = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=1)
                    if r.status == health_pb2.HealthCheckResponse.SERVING:
                        return
                except grpc.RpcError:
                    pass
                time.sleep(0.1)
        raise TimeoutError(f"node not healthy within {timeout_s}s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()


def fresh_topic(bootstrap: str, topic: str, partitions: int) -> None:
    with Admin(bootstrap) as admin:
        if topic in admin.list_topics():
            admin.delete_topics([topic])
            time.sleep(1)
        admin.create_topics([NewTopic(topic, partitions, 1)])


def fill_topic(
    bootstrap: str, topic: str, partitions: int, records: int, record_bytes: int
) -> None:
    fresh_topic(bootstrap, topic, partitions)
    payload = os.urandom(record_bytes)
    with Producer(bootstrap, linger_ms=20, batch_size=256 * 1024) as producer:
        for i in range(records):
            producer.send(topic, value=payload, key=b"k%d" % (i % 1000))
        producer.flush()


def consumer_read(bootstrap: str, topic: str, partitions: int) -> tuple[int, float]:
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    with Consumer(
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        max_poll_records=10_000,
        max_partition_fetch_bytes=4 * 1024 * 1024,
    ) as consumer:
        consumer.assign(tps)
        total = sum(consumer.end_offsets(tps).values())
        start = time.perf_counter()
        consumer.seek_to_beginning()
        n = 0
        while n < total:
            for recs in consumer.poll(timeout_ms=1000).values():
                n += len(recs)
        return n, time.perf_counter() - start


def spark_session(cores: int, quick: bool) -> Any:
    from pyspark.sql import SparkSession

    # Python workers run this interpreter, so they import the seglog being measured
    # (the default, a bare `python3`, may import another installation first).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName("seglog-bench-pipeline")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(cores))
    )
    if quick:  # a smoke run: start fast rather than run fast
        builder = builder.config(
            "spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
        )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    from seglog.pipeline import register

    register(spark)
    return spark


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--records", default=None, help="record counts, comma-separated (500000,2000000)"
    )
    parser.add_argument("--partitions", type=int, default=None, help="partitions (4)")
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--cores", type=int, default=2, help="Spark local[N]")
    parser.add_argument("--bootstrap-server", default=None, help="use a running cluster")
    parser.add_argument("--repeat", type=int, default=None, help="timed rounds, best kept (3)")
    parser.add_argument(
        "--stream-seconds", type=float, default=None, help="streaming phase length (30; 0 skips)"
    )
    parser.add_argument("--stream-rate", type=int, default=10_000, help="records/s produced")
    parser.add_argument(
        "--stream-warmup", type=float, default=None, help="seconds left out of latencies (5)"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args(argv)
    quick_or_full(
        args,
        repeat=(1, 3),
        records=("20000", "500000,2000000"),
        partitions=(2, 4),
        stream_seconds=(8.0, 30.0),
        stream_warmup=(2.0, 5.0),
    )
    args.sizes = sorted(set(positive_ints(parser, "--records", str(args.records))))
    if args.stream_seconds and args.stream_warmup >= args.stream_seconds:
        parser.error("--stream-warmup must be shorter than --stream-seconds")
    if args.stream_rate <= 0:
        parser.error(f"--stream-rate must be positive, got {args.stream_rate}")
    return args


def batch_read_rounds(
    spark: Any, bootstrap: str, topic: str, records: int, args: argparse.Namespace
) -> dict[str, Any]:
    """Phase 2 for one size: warm-up, then consumer / count / materialise rounds."""
    df = (
        spark.read.format("seglog")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
    )
    warm = df.count()
    assert warm == records, (warm, records)
    consumer_rates, count_rates, spark_rates = [], [], []
    # Interleaved rounds, best of each: the machine's other load drifts.
    for round_no in range(1, args.repeat + 1):
        tag = f"[{records} #{round_no}]"
        n, seconds = consumer_read(bootstrap, topic, args.partitions)
        assert n == records, (n, records)
        consumer_rates.append(n / seconds)
        say(f"{tag} consumer: {n} records in {seconds:.2f}s = {n / seconds:,.0f} rows/s")

        t = time.perf_counter()
        counted = df.count()
        seconds = time.perf_counter() - t
        assert counted == records, (counted, records)
        count_rates.append(counted / seconds)
        say(
            f"{tag} spark count: {counted} rows in {seconds:.2f}s = {counted / seconds:,.0f} rows/s"
        )

        t = time.perf_counter()
        df.write.format("noop").mode("overwrite").save()
        seconds = time.perf_counter() - t
        spark_rates.append(records / seconds)
        say(
            f"{tag} spark materialise: {records} rows in {seconds:.2f}s "
            f"= {records / seconds:,.0f} rows/s"
        )
    consumer_rate, spark_rate = max(consumer_rates), max(spark_rates)
    return {
        "records": records,
        "spark_rows_per_s": round(spark_rate, 1),
        "spark_count_rows_per_s": round(max(count_rates), 1),
        "consumer_rows_per_s": round(consumer_rate, 1),
        "ratio": round(spark_rate / consumer_rate, 3),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "samples": {
            "consumer_rows_per_s": [round(r, 1) for r in consumer_rates],
            "spark_count_rows_per_s": [round(r, 1) for r in count_rates],
            "spark_rows_per_s": [round(r, 1) for r in spark_rates],
        },
    }


def sink_rounds(
    spark: Any, bootstrap: str, topic: str, records: int, args: argparse.Namespace
) -> list[float]:
    """Phase 3: the rows of `topic`, cached in Spark, written to SINK_TOPIC."""
    fresh_topic(bootstrap, SINK_TOPIC, args.partitions)
    df = (
        spark.read.format("seglog")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
    )
    rows = df.select("key", "value").cache()
    assert rows.count() == records
    sink_rates = []
    for round_no in range(1, args.repeat + 1):
        t = time.perf_counter()
        (
            rows.write.format("seglog")
            .option("bootstrap.servers", bootstrap)
            .option("topic", SINK_TOPIC)
            .mode("append")
            .save()
        )
        seconds = time.perf_counter() - t
        sink_rates.append(records / seconds)
        say(
            f"[sink #{round_no}] {records} rows in {seconds:.2f}s = {records / seconds:,.0f} rows/s"
        )
    rows.unpersist()
    with Consumer(bootstrap_servers=bootstrap) as consumer:
        tps = [TopicPartition(SINK_TOPIC, p) for p in range(args.partitions)]
        written = sum(consumer.end_offsets(tps).values())
    assert written == records * args.repeat, (written, records * args.repeat)
    return sink_rates


class PacedProducer(threading.Thread):
    """Sends `rate` records/s to `topic` in 10 ms steps until stopped; each record's
    timestamp (CreateTime) is its send time."""

    STEP_S = 0.01

    def __init__(self, bootstrap: str, topic: str, rate: int, record_bytes: int) -> None:
        super().__init__(name="bench-paced-producer", daemon=True)
        self.bootstrap, self.topic, self.rate = bootstrap, topic, rate
        self.payload = os.urandom(record_bytes)
        self.stop_event = threading.Event()
        self.sent = 0
        self.started_at = 0.0
        self.stopped_at = 0.0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with Producer(self.bootstrap, linger_ms=5, batch_size=64 * 1024) as producer:
                self.started_at = time.monotonic()
                while not self.stop_event.is_set():
                    due = int((time.monotonic() - self.started_at) * self.rate)
                    while self.sent < due:
                        producer.send(self.topic, value=self.payload, key=b"k%d" % self.sent)
                        self.sent += 1
                    time.sleep(self.STEP_S)
                self.stopped_at = time.monotonic()
                producer.flush()
        except Exception as e:  # noqa: BLE001 - reported by the caller
            self.error = e


def percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    i = min(len(sorted_values) - 1, max(0, round(q / 100 * (len(sorted_values) - 1))))
    return sorted_values[i]


def streaming_latency(
    spark: Any, bootstrap: str, args: argparse.Namespace, tmp: Path
) -> dict[str, Any]:
    """Phase 4: produce at --stream-rate, seglog source -> seglog sink, latencies."""
    from pyspark.sql import functions as F

    fresh_topic(bootstrap, STREAM_TOPIC, args.partitions)
    fresh_topic(bootstrap, STREAM_SINK_TOPIC, args.partitions)
    source = (
        spark.readStream.format("seglog")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", STREAM_TOPIC)
        .option("startingOffsets", "earliest")
        .load()
    )
    # The produce timestamp travels in the key (epoch ms as text); the sink stamps
    # each record with its own write time.
    out = source.select(
        F.unix_millis("timestamp").cast("string").alias("key"),
        F.col("value"),
    )
    query = (
        out.writeStream.format("seglog")
        .option("bootstrap.servers", bootstrap)
        .option("topic", STREAM_SINK_TOPIC)
        .option("checkpointLocation", str(tmp / "stream-checkpoint"))
        .start()
    )
    producer = PacedProducer(bootstrap, STREAM_TOPIC, args.stream_rate, args.record_bytes)
    try:
        # Producing starts once the query has run its first (empty) micro-batch.
        deadline = time.monotonic() + 120
        while not query.recentProgress and time.monotonic() < deadline:
            assert query.isActive, query.exception()
            time.sleep(0.2)
        say(f"streaming: producing {args.stream_rate} records/s for {args.stream_seconds:.0f}s")
        warmup_until_ms = time.time() * 1000 + args.stream_warmup * 1000
        producer.start()
        time.sleep(args.stream_seconds)
        producer.stop_event.set()
        producer.join(60)
        if producer.error is not None:
            raise producer.error
        produced = producer.sent
        # Let the query catch up with the last records.
        tps = [TopicPartition(STREAM_SINK_TOPIC, p) for p in range(args.partitions)]
        with Consumer(bootstrap_servers=bootstrap) as c:
            deadline = time.monotonic() + 120
            while sum(c.end_offsets(tps).values()) < produced:
                assert query.isActive, query.exception()
                assert time.monotonic() < deadline, "the streaming query did not catch up"
                time.sleep(0.2)
        progress = list(query.recentProgress)
    finally:
        producer.stop_event.set()
        query.stop()
    produce_rate = produced / max(producer.stopped_at - producer.started_at, 1e-9)

    latencies: list[float] = []
    n = 0
    with Consumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", max_poll_records=10_000
    ) as consumer:
        consumer.assign(tps)
        total = sum(consumer.end_offsets(tps).values())
        while n < total:
            for recs in consumer.poll(timeout_ms=1000).values():
                for r in recs:
                    n += 1
                    produced_ms = int(r.key)
                    if produced_ms >= warmup_until_ms:
                        latencies.append(r.timestamp - produced_ms)
    assert n == produced, (n, produced)  # every record once (no task retried here)
    latencies.sort()

    batches = [p for p in progress if p.get("numInputRows", 0) > 0]
    trigger_ms = sorted(p["durationMs"].get("triggerExecution", 0) for p in batches)
    rates = sorted(p.get("processedRowsPerSecond", 0.0) for p in batches)
    say(
        f"streaming: {produced} records ({produce_rate:,.0f}/s), latency p50 "
        f"{percentile(latencies, 50):.0f} ms p99 {percentile(latencies, 99):.0f} ms over "
        f"{len(latencies)} records; {len(batches)} micro-batches"
    )
    return {
        "produced": produced,
        "produce_rows_per_s": round(produce_rate, 1),
        "target_rows_per_s": args.stream_rate,
        "seconds": args.stream_seconds,
        "measured_records": len(latencies),
        "latency_ms": {
            "p50": percentile(latencies, 50),
            "p90": percentile(latencies, 90),
            "p99": percentile(latencies, 99),
            "max": latencies[-1] if latencies else None,
        },
        "micro_batches": {
            "count": len(batches),
            "rows_per_batch_p50": percentile(sorted(p["numInputRows"] for p in batches), 50),
            "trigger_execution_ms_p50": percentile(trigger_ms, 50),
            "trigger_execution_ms_p99": percentile(trigger_ms, 99),
            "trigger_execution_ms_max": trigger_ms[-1] if trigger_ms else None,
            "processed_rows_per_s_p50": round(percentile(rates, 50), 1),
            "processed_rows_per_s_max": round(rates[-1], 1) if rates else None,
            "duration_ms_p50": {
                k: percentile(sorted(p["durationMs"].get(k, 0) for p in batches), 50)
                for k in ("addBatch", "latestOffset", "queryPlanning", "walCommit", "commitOffsets")
            },
        },
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="seglog-bench-pipeline-"))
    node = None
    spark = None
    try:
        if args.bootstrap_server:
            bootstrap = args.bootstrap_server
        else:
            say(f"starting a node in {tmp}")
            node = LocalNode(tmp)
            bootstrap = node.bootstrap

        producer_rate = None
        topics = {}
        for records in args.sizes:
            topic = f"{TOPIC}-{records}"
            say(
                f"producing {records} records of {args.record_bytes} bytes "
                f"to {args.partitions} partitions of {topic}"
            )
            t = time.perf_counter()
            fill_topic(bootstrap, topic, args.partitions, records, args.record_bytes)
            seconds = time.perf_counter() - t
            if producer_rate is None:
                producer_rate = records / seconds
            say(f"  produced in {seconds:.1f}s = {records / seconds:,.0f} rows/s (Python Producer)")
            topics[records] = topic
        assert producer_rate is not None

        say(f"starting Spark local[{args.cores}]")
        t = time.perf_counter()
        spark = spark_session(args.cores, args.quick)
        say(f"  started in {time.perf_counter() - t:.1f}s")

        by_records = [batch_read_rounds(spark, bootstrap, topics[n], n, args) for n in args.sizes]
        largest = by_records[-1]
        smallest = args.sizes[0]
        sink_rates = sink_rounds(spark, bootstrap, topics[smallest], smallest, args)
        sink_load = os.getloadavg()
        streaming = (
            streaming_latency(spark, bootstrap, args, tmp) if args.stream_seconds > 0 else None
        )

        import pyspark

        result = {
            "spark_rows_per_s": largest["spark_rows_per_s"],
            "spark_count_rows_per_s": largest["spark_count_rows_per_s"],
            "consumer_rows_per_s": largest["consumer_rows_per_s"],
            "ratio": largest["ratio"],
            "records": largest["records"],
            "ratio_by_records": {str(b["records"]): b["ratio"] for b in by_records},
            "sink_rows_per_s": round(max(sink_rates), 1),
            "sink_records": smallest,
            "producer_rows_per_s": round(producer_rate, 1),
            "sink_ratio": round(max(sink_rates) / producer_rate, 3),
            "streaming": streaming,
            "load_average": [round(x, 2) for x in sink_load],
            "by_records": by_records,
            "samples": {"sink_rows_per_s": [round(r, 1) for r in sink_rates]},
            "partitions": args.partitions,
            "record_bytes": args.record_bytes,
            "spark_master": f"local[{args.cores}]",
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
            "pyspark": pyspark.__version__,
            "quick": args.quick,
            "notes": [
                "spark_rows_per_s: seglog batch read written to the noop sink (every row "
                "materialised in the JVM); spark_count_rows_per_s: df.count(); top-level "
                "figures are the largest size's, by_records has every size",
                "consumer_rows_per_s: one Python Consumer over all partitions, same topic",
                "sink_rows_per_s: the rows (key, value) of the smallest size, cached in Spark, "
                "written to a second topic with the seglog sink; producer_rows_per_s: the "
                "Python Producer filling the smallest size's topic (linger.ms 20, "
                "batch.size 256 KiB), once",
                "streaming.latency_ms: sink record timestamp (write time) - source record "
                "timestamp (send time), per record, warm-up left out; micro_batches: Spark's "
                "progress JSON of the batches that read rows",
                "load_average: os.getloadavg() after each size's rounds (by_records) and "
                "after the sink rounds (top level)",
                "Spark timings exclude session start-up and one warm-up read per size",
                "rounds alternate consumer and Spark reads; each figure is the best round",
                "the node, the executors and this process share the machine's CPUs",
                "wall-clock on a shared machine: figures are noisy"
                + ("; --quick runs the JVM with C1 only" if args.quick else ""),
            ],
        }
    finally:
        if spark is not None:
            spark.stop()
        if node is not None:
            node.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
