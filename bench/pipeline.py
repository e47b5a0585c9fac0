"""Pipeline benchmark: rows per second a Spark batch read of a seglog topic delivers,
against the Python Consumer reading the same topic in the same run.

Phases, in order (only the marked parts are timed):

1. a node process on loopback (its own temp dir) unless --bootstrap-server is given;
   a topic of --partitions partitions filled with --records records of
   --record-bytes (keyed, recent timestamps) by the idempotent Producer.
2. Spark start-up and one warm-up read of the topic (untimed: JVM start, class
   loading and Python worker start-up are paid once per session, not per read).
3. --repeat rounds, each of:
   a. consumer [timed]: one Consumer assigned every partition, from the beginning,
      polled until it holds every record (each becomes a ConsumerRecord);
   b. spark count [timed]: `df.count()` of a `seglog` batch read;
   c. spark materialise [timed]: the same read written to Spark's `noop` sink,
      which turns every row into a JVM row and drops it.

4. sink [timed, --repeat rounds]: the rows (key, value), cached in Spark, written to a
   second topic with the `seglog` sink; against the Python Producer's rate in phase 1.

`spark_rows_per_s` is 3c, best round; `ratio` is spark_rows_per_s / consumer_rows_per_s
(best rounds; every round's figures are under `samples`).
Spark runs local[--cores] on this machine: executors and the node share the CPUs.
Figures are wall-clock on a shared machine: noisy. The last stdout line is one
JSON object; everything before it is progress.

    python bench/pipeline.py [--records 500000] [--partitions 4] [--record-bytes 100]
                             [--cores 2] [--repeat 3] [--bootstrap-server H:P] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from seglog.client.admin import Admin, NewTopic
from seglog.client.cluster import TopicPartition
from seglog.client.consumer import Consumer
from seglog.client.producer import Producer

TOPIC = "bench-pipeline"
SINK_TOPIC = "bench-pipeline-sink"


def say(msg: str) -> None:
    print(msg, flush=True)


class LocalNode:
    """A `seglog node` child process on a free loopback port, in `data_dir`."""

    def __init__(self, data_dir: Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
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


def fill_topic(bootstrap: str, partitions: int, records: int, record_bytes: int) -> None:
    with Admin(bootstrap) as admin:
        if TOPIC in admin.list_topics():
            admin.delete_topics([TOPIC])
            if SINK_TOPIC in admin.list_topics():
                admin.delete_topics([SINK_TOPIC])
            time.sleep(1)
        admin.create_topics([NewTopic(TOPIC, partitions, 1)])
    payload = os.urandom(record_bytes)
    with Producer(bootstrap, linger_ms=20, batch_size=256 * 1024) as producer:
        for i in range(records):
            producer.send(TOPIC, value=payload, key=b"k%d" % (i % 1000))
        producer.flush()


def consumer_read(bootstrap: str, partitions: int) -> tuple[int, float]:
    tps = [TopicPartition(TOPIC, p) for p in range(partitions)]
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


def spark_session(cores: int, quick: bool) -> object:
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
    parser.add_argument("--records", type=int, default=None, help="records (500000)")
    parser.add_argument("--partitions", type=int, default=None, help="partitions (4)")
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--cores", type=int, default=2, help="Spark local[N]")
    parser.add_argument("--bootstrap-server", default=None, help="use a running cluster")
    parser.add_argument("--repeat", type=int, default=None, help="timed rounds, best kept (3)")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args(argv)
    if args.repeat is None:
        args.repeat = 1 if args.quick else 3
    if args.records is None:
        args.records = 20_000 if args.quick else 500_000
    if args.partitions is None:
        args.partitions = 2 if args.quick else 4
    return args


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
        say(
            f"producing {args.records} records of {args.record_bytes} bytes "
            f"to {args.partitions} partitions"
        )
        t = time.perf_counter()
        fill_topic(bootstrap, args.partitions, args.records, args.record_bytes)
        seconds = time.perf_counter() - t
        producer_rate = args.records / seconds
        say(f"  produced in {seconds:.1f}s = {producer_rate:,.0f} rows/s (Python Producer)")

        say(f"starting Spark local[{args.cores}]")
        t = time.perf_counter()
        spark = spark_session(args.cores, args.quick)
        df = (
            spark.read.format("seglog")  # type: ignore[attr-defined]
            .option("bootstrap.servers", bootstrap)
            .option("subscribe", TOPIC)
            .load()
        )
        warm = df.count()
        assert warm == args.records, (warm, args.records)
        say(f"  started and warmed up in {time.perf_counter() - t:.1f}s")

        # Interleaved rounds, best of each: the machine's other load drifts.
        consumer_rates, count_rates, spark_rates = [], [], []
        for round_no in range(1, args.repeat + 1):
            n, seconds = consumer_read(bootstrap, args.partitions)
            assert n == args.records, (n, args.records)
            consumer_rates.append(n / seconds)
            say(f"[{round_no}] consumer: {n} records in {seconds:.2f}s = {n / seconds:,.0f} rows/s")

            t = time.perf_counter()
            counted = df.count()
            seconds = time.perf_counter() - t
            assert counted == args.records, (counted, args.records)
            count_rates.append(counted / seconds)
            say(
                f"[{round_no}] spark count: {counted} rows in {seconds:.2f}s "
                f"= {counted / seconds:,.0f} rows/s"
            )

            t = time.perf_counter()
            df.write.format("noop").mode("overwrite").save()
            seconds = time.perf_counter() - t
            spark_rates.append(args.records / seconds)
            say(
                f"[{round_no}] spark materialise: {args.records} rows in {seconds:.2f}s "
                f"= {args.records / seconds:,.0f} rows/s"
            )
        consumer_rate, spark_rate = max(consumer_rates), max(spark_rates)

        # The sink: the same rows, cached in Spark first, written to a second topic.
        with Admin(bootstrap) as admin:
            admin.create_topics([NewTopic(SINK_TOPIC, args.partitions, 1)])
        rows = df.select("key", "value").cache()
        assert rows.count() == args.records
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
            sink_rates.append(args.records / seconds)
            say(
                f"[{round_no}] spark sink: {args.records} rows in {seconds:.2f}s "
                f"= {args.records / seconds:,.0f} rows/s"
            )
        with Consumer(bootstrap_servers=bootstrap) as consumer:
            tps = [TopicPartition(SINK_TOPIC, p) for p in range(args.partitions)]
            written = sum(consumer.end_offsets(tps).values())
        assert written == args.records * args.repeat, (written, args.records * args.repeat)
        load = os.getloadavg()

        import pyspark

        result = {
            "spark_rows_per_s": round(spark_rate, 1),
            "spark_count_rows_per_s": round(max(count_rates), 1),
            "consumer_rows_per_s": round(consumer_rate, 1),
            "ratio": round(spark_rate / consumer_rate, 3),
            "sink_rows_per_s": round(max(sink_rates), 1),
            "producer_rows_per_s": round(producer_rate, 1),
            "sink_ratio": round(max(sink_rates) / producer_rate, 3),
            "load_average": [round(x, 2) for x in load],
            "samples": {
                "consumer_rows_per_s": [round(r, 1) for r in consumer_rates],
                "spark_count_rows_per_s": [round(r, 1) for r in count_rates],
                "spark_rows_per_s": [round(r, 1) for r in spark_rates],
                "sink_rows_per_s": [round(r, 1) for r in sink_rates],
            },
            "records": args.records,
            "partitions": args.partitions,
            "record_bytes": args.record_bytes,
            "spark_master": f"local[{args.cores}]",
            "cpu_count": os.cpu_count(),
            "python": platform.python_version(),
            "pyspark": pyspark.__version__,
            "quick": args.quick,
            "notes": [
                "spark_rows_per_s: seglog batch read written to the noop sink (every row "
                "materialised in the JVM); spark_count_rows_per_s: df.count()",
                "consumer_rows_per_s: one Python Consumer over all partitions, same topic",
                "sink_rows_per_s: the rows (key, value), cached in Spark, written to a second "
                "topic with the seglog sink; producer_rows_per_s: the Python Producer filling "
                "the topic (linger.ms 20, batch.size 256 KiB), once",
                "load_average: os.getloadavg() at the end of the timed rounds",
                "Spark timings exclude session start-up and one warm-up read",
                "rounds alternate consumer and Spark reads; each figure is the best round",
                "the node, the executors and this process share the machine's CPUs",
                "wall-clock on a shared machine: figures are noisy"
                + ("; --quick runs the JVM with C1 only" if args.quick else ""),
            ],
        }
    finally:
        if spark is not None:
            spark.stop()  # type: ignore[attr-defined]
        if node is not None:
            node.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
