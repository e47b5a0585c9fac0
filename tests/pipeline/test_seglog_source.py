"""The `seglog` and `seglog-files` Spark data sources against real node processes.

One local[2] SparkSession serves the whole module (Spark's start-up is the slow
part); each test uses its own topics. Records carry recent timestamps so the
node's retention leaves them alone unless a test asks otherwise.
"""

from __future__ import annotations

import calendar
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
if shutil.which("java") is None:
    pytest.skip("Spark needs Java", allow_module_level=True)

from pyspark.sql import SparkSession
from pyspark.sql.pandas.types import to_arrow_schema

from seglog.client.admin import Admin, NewTopic
from seglog.client.cluster import TopicPartition
from seglog.client.consumer import Consumer
from seglog.client.partitioner import partition_for_key
from seglog.client.producer import Producer
from seglog.harness.node_process import NodeProcess
from seglog.pipeline import register
from seglog.pipeline.examples import generate_page_visits, page_visits
from seglog.pipeline.offsets import (
    DataLossError,
    OffsetRange,
    offsets_json,
    parse_offsets_json,
    rate_limit,
    split_ranges,
)
from seglog.pipeline.options import SourceOptions
from seglog.pipeline.range_reader import fetch_config, read_range
from seglog.pipeline.schema import arrow_schema, spark_schema
from seglog.pipeline.shared_metadata import shared_metadata
from seglog.pipeline.source import ReadAllAvailable, SeglogStreamReader

T0 = (int(time.time()) - 600) * 1000  # ten minutes ago: well inside retention

# The retention task every 500 ms from the start, deleted files removed at once.
RETENTION_OVERRIDES = {
    "log.retention.check.interval.ms": "500",
    "log.initial.task.delay.ms": "0",
    "log.segment.delete.delay.ms": "0",
    "log.cleaner.backoff.ms": "200",  # compaction rounds often, for the equality test
}


# --- fixtures and helpers --------------------------------------------------------------


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    # Python workers run this interpreter, so they import the seglog under test (the
    # default, a bare `python3`, may import another installation first).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("seglog-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "1g")
        # Short runs: the C1 compiler alone and the serial GC start Spark several times faster.
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .config("spark.sql.codegen.wholeStage", "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    """One node for the module, with a fast retention task (see test_fail_on_data_loss)."""
    node = NodeProcess(tmp_path_factory.mktemp("cluster"), overrides=RETENTION_OVERRIDES)
    node.start()
    try:
        yield node
    finally:
        node.stop()


def create_topic(bootstrap: str, name: str, partitions: int, **configs: str) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, 1, configs)])


Row = tuple  # (topic, partition, offset, key, value, timestamp_ms, timestamp_type, headers)


def produce(
    bootstrap: str, topic: str, count: int, start: int = 0, batch_size: int = 16384, **send: object
) -> list[Row]:
    """`count` keyed records with headers and distinct timestamps; what the node stored."""
    out = []
    with Producer(bootstrap, linger_ms=5, batch_size=batch_size) as producer:
        futures = []
        for i in range(start, start + count):
            key = f"k{i}".encode() if i % 5 else None  # some null keys
            headers = [("n", str(i).encode()), ("empty", None)] if i % 2 else []
            value = f"value-{i}".encode()
            future = producer.send(
                topic, value=value, key=key, headers=headers, timestamp_ms=T0 + i, **send
            )
            futures.append((future, key, value, T0 + i, headers))
        producer.flush()
        for future, key, value, ts, headers in futures:
            md = future.get(10)
            out.append((topic, md.partition, md.offset, key, value, ts, 0, tuple(headers)))
    return out


def spark_rows(df: object) -> list[Row]:
    cols = df.columns  # type: ignore[attr-defined]
    out = []
    for r in df.collect():  # type: ignore[attr-defined]
        headers = tuple((h.key, h.value) for h in r.headers) if "headers" in cols else ()
        ts_ms = int(r.timestamp.timestamp() * 1000 + 0.5)
        out.append(
            (r.topic, r.partition, r.offset, r.key, r.value, ts_ms, r.timestampType, headers)
        )
    return sorted(out, key=lambda x: (x[0], x[1], x[2]))


def source(spark: SparkSession, bootstrap: str, **options: str) -> object:
    reader = spark.read.format("seglog").option("bootstrap.servers", bootstrap)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def stream_to_files(
    spark: SparkSession, bootstrap: str, topic: str, out: Path, checkpoint: Path, **options: str
) -> object:
    """One AvailableNow run of topic → parquet files; the finished query."""
    reader = (
        spark.readStream.format("seglog")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
    )
    for k, v in options.items():
        reader = reader.option(k, v)
    query = (
        reader.load()
        .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
        .writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    assert not query.isActive, "the AvailableNow query did not finish"
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    return query


def consume_all(bootstrap: str, topic: str, partitions: int) -> list:
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        records: list = []
        deadline = time.monotonic() + 30
        while len(records) < sum(ends.values()) and time.monotonic() < deadline:
            for recs in consumer.poll(timeout_ms=500).values():
                records.extend(recs)
    return records


# --- pure parts: no Spark job -------------------------------------------------------------


def test_arrow_schema_is_what_spark_expects() -> None:
    for headers in (False, True):
        assert arrow_schema(headers).equals(to_arrow_schema(spark_schema(headers), timezone="UTC"))


def test_offsets_json_round_trip_and_errors() -> None:
    offsets = parse_offsets_json('{"b": {"1": 5, "0": -2}, "a": {"0": -1}}', "startingOffsets")
    assert offsets == {
        TopicPartition("b", 1): 5,
        TopicPartition("b", 0): -2,
        TopicPartition("a", 0): -1,
    }
    assert offsets_json(offsets) == '{"a":{"0":-1},"b":{"0":-2,"1":5}}'
    for bad in ('{"a": [0]}', '{"a": {"x": 1}}', '{"a": {"0": -3}}', "nope"):
        with pytest.raises(ValueError, match="startingOffsets"):
            parse_offsets_json(bad, "startingOffsets")


def test_min_partitions_split_and_rate_limit() -> None:
    big, small = OffsetRange("t", 0, 0, 900), OffsetRange("t", 1, 0, 100)
    ranges = split_ranges([big, small, OffsetRange("t", 2, 7, 7)], min_partitions=10)
    assert len(ranges) == 10 and sum(r.size for r in ranges) == 1000
    assert [r for r in ranges if r.partition == 1] == [small]
    pieces = [(r.start, r.end) for r in ranges if r.partition == 0]
    assert pieces[0][0] == 0 and pieces[-1][1] == 900
    assert all(a[1] == b[0] for a, b in zip(pieces, pieces[1:], strict=False))
    assert len(split_ranges([big], max_records_per_partition=100)) == 9

    t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)
    assert rate_limit(100, {t0: 0, t1: 0}, {t0: 300, t1: 100}) == {t0: 75, t1: 25}
    assert rate_limit(100, {t0: 0, t1: 50}, {t0: 10, t1: 50}) == {t0: 10, t1: 50}
    # A share below one rounds up so that no partition starves (as in Spark).
    assert rate_limit(1, {t0: 0, t1: 0}, {t0: 1000, t1: 1}) == {t0: 1, t1: 1}


# --- batch reads -----------------------------------------------------------------------


def test_batch_read_returns_exactly_what_was_produced(spark, cluster) -> None:
    create_topic(cluster.bootstrap, "batch", 3)
    produced = produce(cluster.bootstrap, "batch", 90)
    df = source(
        spark, cluster.bootstrap, subscribe="batch", includeHeaders="true", minPartitions="6"
    )
    assert df.schema == spark_schema(include_headers=True)
    assert df.rdd.getNumPartitions() == 6  # three partitions split in two
    assert spark_rows(df) == sorted(produced, key=lambda x: (x[0], x[1], x[2]))

    # Without includeHeaders, the schema and rows are Spark's Kafka ones.
    plain = source(spark, cluster.bootstrap, assign='{"batch": [1]}')
    assert plain.columns == [f.name for f in spark_schema().fields]
    assert spark_rows(plain) == sorted(
        (r[:7] + ((),) for r in produced if r[1] == 1), key=lambda x: x[2]
    )


def consumer_rows(bootstrap: str, topic: str, partitions: int) -> list[Row]:
    rows = [
        (
            r.topic,
            r.partition,
            r.offset,
            r.key,
            r.value,
            r.timestamp,
            r.timestamp_type,
            tuple(r.headers),
        )
        for r in consume_all(bootstrap, topic, partitions)
    ]
    return sorted(rows, key=lambda x: (x[0], x[1], x[2]))


@pytest.mark.long
def test_batch_read_equals_consumer_on_compressed_compacted_and_trimmed(spark, cluster) -> None:
    """The vectorised reader against the record-by-record Consumer, row for row, where
    the log is not a plain run of batches: compressed batches of every codec,
    compaction's gaps, and a log start moved by retention."""
    b = cluster.bootstrap
    create_topic(b, "eq-codecs", 2)
    for codec in ("gzip", "lz4", "zstd", "snappy"):
        with Producer(b, compression_type=codec, linger_ms=5) as producer:
            for i in range(40):
                headers = [("codec", codec.encode())] if i % 3 else []
                producer.send(
                    "eq-codecs",
                    value=b"%s-%d" % (codec.encode(), i) * (i % 7),
                    key=b"k%d" % i if i % 4 else None,
                    headers=headers,
                )
    compacted = {
        "cleanup.policy": "compact",
        "segment.bytes": "1024",
        "segment.ms": "1000",
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": "100000",
    }
    create_topic(b, "eq-compacted", 1, **compacted)
    create_topic(b, "eq-trimmed", 1, **{"segment.bytes": "1024", "retention.bytes": "2048"})
    with Producer(b, linger_ms=0, batch_size=512) as producer:
        for i in range(300):
            producer.send("eq-compacted", value=b"v%d" % i, key=b"key-%d" % (i % 10))
            producer.send("eq-trimmed", value=b"t%d" % i, key=b"key-%d" % i)
    tp_c, tp_t = TopicPartition("eq-compacted", 0), TopicPartition("eq-trimmed", 0)
    deadline = time.monotonic() + 60
    with Consumer(bootstrap_servers=b) as consumer:
        while not (
            len(consume_all(b, "eq-compacted", 1)) < consumer.end_offsets([tp_c])[tp_c] - 20
            and consumer.beginning_offsets([tp_t])[tp_t] > 0
        ):
            assert time.monotonic() < deadline, "compaction or retention did not run"
            time.sleep(0.5)
    for topic, partitions in (("eq-codecs", 2), ("eq-compacted", 1), ("eq-trimmed", 1)):
        for _attempt in range(3):  # compaction may run again between the two reads
            before = consumer_rows(b, topic, partitions)
            read = spark_rows(source(spark, b, subscribe=topic, includeHeaders="true"))
            if before == consumer_rows(b, topic, partitions):
                break
        assert before, topic
        assert read == before, topic


def test_starting_and_ending_offsets(spark, cluster) -> None:
    create_topic(cluster.bootstrap, "ranges", 2)
    produced = produce(cluster.bootstrap, "ranges", 40, partition=0)
    produced += produce(cluster.bootstrap, "ranges", 30, start=40, partition=1)
    df = source(
        spark,
        cluster.bootstrap,
        subscribe="ranges",
        startingOffsets='{"ranges": {"0": 5, "1": -2}}',
        endingOffsets='{"ranges": {"0": 12, "1": -1}}',
    )
    got = {(r[1], r[2]) for r in spark_rows(df)}
    assert got == {(0, o) for o in range(5, 12)} | {(1, o) for o in range(30)}

    with pytest.raises(Exception, match="can't be latest for batch"):
        source(spark, cluster.bootstrap, subscribe="ranges", startingOffsets="latest").collect()
    with pytest.raises(Exception, match="must name every partition"):
        source(
            spark, cluster.bootstrap, subscribe="ranges", endingOffsets='{"ranges": {"0": 3}}'
        ).collect()


# --- streaming reads ---------------------------------------------------------------------


def test_stream_restarted_from_checkpoint_writes_each_record_once(spark, cluster, tmp_path):
    create_topic(cluster.bootstrap, "stream", 2)
    produced = produce(cluster.bootstrap, "stream", 50)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    stream_to_files(spark, cluster.bootstrap, "stream", out, checkpoint)
    first = spark.read.parquet(str(out)).count()
    assert first == 50

    produced += produce(cluster.bootstrap, "stream", 30, start=50)
    stream_to_files(spark, cluster.bootstrap, "stream", out, checkpoint)
    rows = spark.read.parquet(str(out)).collect()
    assert sorted((r.partition, r.offset, r.value) for r in rows) == sorted(
        (p[1], p[2], p[4].decode()) for p in produced
    )
    # The checkpoint holds Spark's Kafka offsets JSON.
    offsets_dir = checkpoint / "offsets"
    last = max(offsets_dir.iterdir(), key=lambda f: int(f.name) if f.name.isdigit() else -1)
    ends = {str(p): 0 for p in range(2)}
    for p in produced:
        ends[str(p[1])] = max(ends[str(p[1])], p[2] + 1)
    assert json.loads(last.read_text().splitlines()[-1]) == {"stream": ends}


def test_max_offsets_per_trigger(spark, cluster, tmp_path) -> None:
    create_topic(cluster.bootstrap, "limited", 1)
    produce(cluster.bootstrap, "limited", 35)
    query = stream_to_files(
        spark,
        cluster.bootstrap,
        "limited",
        tmp_path / "out",
        tmp_path / "checkpoint",
        maxOffsetsPerTrigger="10",
    )
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sizes == [10, 10, 10, 5]
    assert spark.read.parquet(str(tmp_path / "out")).count() == 35


def test_fail_on_data_loss(spark, cluster, tmp_path) -> None:
    bootstrap = cluster.bootstrap
    create_topic(bootstrap, "lossy", 1, **{"segment.bytes": "1024", "retention.ms": "-1"})
    produce(bootstrap, "lossy", 20)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    stream_to_files(spark, bootstrap, "lossy", out, checkpoint)

    # More small segments; then retention (time, 1 ms) deletes everything, rolling the
    # active segment too as Kafka does, and after that 10 records are kept.
    produce(bootstrap, "lossy", 200, start=20, batch_size=512)
    tp = TopicPartition("lossy", 0)
    with Admin(bootstrap) as admin, Consumer(bootstrap_servers=bootstrap) as consumer:
        admin.alter_configs("lossy", set={"retention.ms": "1"})
        deadline = time.monotonic() + 30
        while consumer.beginning_offsets([tp])[tp] < 220:
            assert time.monotonic() < deadline, "retention did not run"
            time.sleep(0.2)
        admin.alter_configs("lossy", set={"retention.ms": "-1"})
        produce(bootstrap, "lossy", 10, start=220)
        time.sleep(1.5)  # three retention rounds: the new records stay
        assert consumer.beginning_offsets([tp])[tp] == 220
    log_start = 220

    # An executor that finds its offsets gone (retention ran after planning).
    options = {"bootstrap.servers": bootstrap, "assign": '{"lossy": [0]}'}
    strict = SourceOptions.parse(options, streaming=False)
    with pytest.raises(DataLossError, match=rf"offsets \[5, {log_start}\) are no longer"):
        list(read_range(OffsetRange("lossy", 0, 5, 220), strict))
    lenient = SourceOptions.parse({**options, "failOnDataLoss": "false"}, streaming=False)
    batches = read_range(OffsetRange("lossy", 0, 5, log_start + 3), lenient)
    assert [o for b in batches for o in b.column("offset").to_pylist()] == [
        log_start,
        log_start + 1,
        log_start + 2,
    ]

    with pytest.raises(Exception) as failed:
        stream_to_files(spark, bootstrap, "lossy", out, checkpoint)
    message = str(failed.value)
    assert "topic 'lossy' partition 0" in message
    assert f"offsets [20, {log_start}) are no longer available" in message
    assert "failOnDataLoss" in message

    # A batch read starting below the log start fails the same way...
    with pytest.raises(Exception, match=r"offsets \[3, \d+\) are no longer available"):
        source(spark, bootstrap, subscribe="lossy", startingOffsets='{"lossy": {"0": 3}}').count()

    # ...and with failOnDataLoss=false the stream skips ahead to what is left.
    stream_to_files(spark, bootstrap, "lossy", out, checkpoint, failOnDataLoss="false")
    offsets = sorted(r.offset for r in spark.read.parquet(str(out)).collect())
    assert offsets == list(range(20)) + list(range(220, 230))


def test_stream_reader_offsets_without_spark(cluster) -> None:
    """The driver-side calls as Spark makes them, including PySpark < 4.2's
    latestOffset() without arguments, and a pattern subscription."""
    bootstrap = cluster.bootstrap
    create_topic(bootstrap, "compat", 2)
    produce(bootstrap, "compat", 40, partition=0)
    produce(bootstrap, "compat", 20, start=40, partition=1)
    options = {
        "bootstrap.servers": bootstrap,
        "subscribePattern": "comp.t",
        "startingOffsets": "earliest",
        "maxOffsetsPerTrigger": "30",
    }
    reader = SeglogStreamReader(SourceOptions.parse(options, streaming=True))
    try:
        start = reader.initialOffset()
        assert start == {"compat": {"0": 0, "1": 0}}
        # 30 offsets shared in proportion to the backlogs (40 and 20).
        end = reader.latestOffset()
        assert end == {"compat": {"0": 20, "1": 10}}
        ranges = reader.partitions(start, end)
        assert [(r.partition, r.start, r.end) for r in ranges] == [(0, 0, 20), (1, 0, 10)]
        # No start given: the cap counts from the end planned last.
        assert reader.latestOffset() == {"compat": {"0": 40, "1": 20}}

        reader.prepareForTriggerAvailableNow()
        produce(bootstrap, "compat", 5, start=60, partition=0)
        everything = {"compat": {"0": 40, "1": 20}}
        assert reader.latestOffset(everything, ReadAllAvailable()) == everything
    finally:
        reader.stop()


def test_tasks_of_one_process_share_metadata(cluster) -> None:
    """Spark runs the tasks of a query (and of the next micro-batch) in reused Python
    workers: a task after the first finds the leader known and asks for no metadata,
    and still reads exactly its range."""
    bootstrap = cluster.bootstrap
    create_topic(bootstrap, "shared-metadata", 1)
    produce(bootstrap, "shared-metadata", 30)
    options = SourceOptions.parse(
        {"bootstrap.servers": bootstrap, "subscribe": "shared-metadata"}, streaming=False
    )

    def offsets(start: int, end: int) -> list[int]:
        r = OffsetRange("shared-metadata", 0, start, end)
        return [o for b in read_range(r, options) for o in b.column("offset").to_pylist()]

    assert offsets(0, 10) == list(range(10))
    metadata = shared_metadata(bootstrap, fetch_config(options).request_timeout_ms)
    asked_at = metadata._updated_at
    assert asked_at > 0, "the first task did not use the process's metadata"
    assert offsets(10, 30) == list(range(10, 30))
    assert metadata._updated_at == asked_at


def test_min_offsets_per_trigger_waits_until_enough_or_max_trigger_delay(cluster) -> None:
    bootstrap = cluster.bootstrap
    create_topic(bootstrap, "trickle", 1)
    produce(bootstrap, "trickle", 5)
    options = {
        "bootstrap.servers": bootstrap,
        "subscribe": "trickle",
        "startingOffsets": "earliest",
        "minOffsetsPerTrigger": "10",
        "maxTriggerDelay": "30s",
    }
    assert SourceOptions.parse(options, streaming=True).max_trigger_delay_ms == 30_000
    with pytest.raises(ValueError, match="maxTriggerDelay must be a duration"):
        SourceOptions.parse({**options, "maxTriggerDelay": "soon"}, streaming=True)
    reader = SeglogStreamReader(SourceOptions.parse(options, streaming=True))
    now = [1000.0]
    reader.clock = lambda: now[0]
    reader._last_trigger = now[0]
    try:
        start = reader.initialOffset()
        limit = reader.getDefaultReadLimit()
        assert reader.latestOffset(start, limit) == start  # 5 < 10: no micro-batch
        produce(bootstrap, "trickle", 5, start=5)
        assert reader.latestOffset(start, limit) == {"trickle": {"0": 10}}  # 10 new: go
        produce(bootstrap, "trickle", 2, start=10)
        after = {"trickle": {"0": 10}}
        assert reader.latestOffset(after, limit) == after  # 2 new, 0 s waited
        now[0] += 29
        assert reader.latestOffset(after, limit) == after
        now[0] += 2  # maxTriggerDelay passed since the last micro-batch: take the 2
        assert reader.latestOffset(after, limit) == {"trickle": {"0": 12}}
    finally:
        reader.stop()


# --- writes ------------------------------------------------------------------------------


def test_batch_write_partitions_and_keys(spark, cluster) -> None:
    bootstrap = cluster.bootstrap
    create_topic(bootstrap, "written", 4)
    explicit = [(f"e{i}", f"explicit-{i}", i % 4) for i in range(12)]
    keyed = [(f"key-{i}", f"keyed-{i}", None) for i in range(20)]
    df = spark.createDataFrame(explicit + keyed, "key string, value string, partition int")
    df = df.selectExpr(
        "key",
        "CAST(value AS BINARY) AS value",
        "partition",
        "'written' AS topic",
        "array(named_struct('key', 'origin', 'value', CAST('spark' AS BINARY))) AS headers",
    )
    df.write.format("seglog").option("bootstrap.servers", bootstrap).mode("append").save()

    records = consume_all(bootstrap, "written", 4)
    assert len(records) == 32
    by_value = {r.value.decode(): r for r in records}
    for key, value, partition in explicit:
        assert by_value[value].partition == partition and by_value[value].key == key.encode()
    for key, value, _ in keyed:
        assert by_value[value].partition == partition_for_key(key.encode(), 4)
    assert all(r.headers == [("origin", b"spark")] for r in records)

    with pytest.raises(Exception, match="required attribute 'value'"):
        spark.createDataFrame([("k",)], "key string").write.format("seglog").option(
            "bootstrap.servers", bootstrap
        ).option("topic", "written").mode("append").save()


def test_page_visits_example_streams_window_counts(spark, cluster, tmp_path) -> None:
    """Streaming read, event-time windows and a streaming write, via the example."""
    bootstrap = cluster.bootstrap
    generate_page_visits.ensure_topic(bootstrap, "visits")
    end_ms = (int(time.time()) // 60) * 60_000
    events = generate_page_visits.make_events(300, 5, seed=7, end_ms=end_ms)
    generate_page_visits.produce(bootstrap, "visits", events)
    query = page_visits.start(
        spark,
        bootstrap,
        str(tmp_path / "checkpoint"),
        available_now=True,
        input_topic="visits",
        output_topic="visit_counts",
    )
    query.awaitTermination(180)
    assert query.exception() is None, query.exception()

    expected: dict[tuple[int, str], int] = {}
    for e in events:
        window = e["ts"] // 60_000 * 60_000
        expected[(window, e["page"])] = expected.get((window, e["page"]), 0) + 1
    watermark = max(e["ts"] for e in events) - 60_000
    got = {}
    for r in consume_all(bootstrap, "visit_counts", 3):
        v = json.loads(r.value)
        start_ms = calendar.timegm(time.strptime(v["window_start"], "%Y-%m-%dT%H:%M:%SZ")) * 1000
        assert r.key == v["page"].encode()
        got[(start_ms, v["page"])] = v["count"]
    # Windows that closed before the watermark are emitted once, with their full count.
    closed = {k: n for k, n in expected.items() if k[0] + 60_000 <= watermark}
    assert closed and got == closed


# --- offline files -----------------------------------------------------------------------


def test_seglog_files_equals_batch_read(spark, node) -> None:
    bootstrap = node.bootstrap
    create_topic(bootstrap, "offline", 2, **{"segment.bytes": "1024"})
    create_topic(bootstrap, "other", 1)
    produce(bootstrap, "offline", 120, batch_size=512)
    produce(bootstrap, "other", 5)
    online = spark_rows(source(spark, bootstrap, subscribe="offline", includeHeaders="true"))
    assert len(online) == 120
    node.stop()

    dirs = ",".join(str(d) for d in node.log_dirs)
    before = {p: p.stat().st_mtime_ns for d in node.log_dirs for p in d.rglob("*")}
    files = (
        spark.read.format("seglog-files")
        .option("topics", "offline")
        .option("includeHeaders", "true")
        .option("maxBytesPerPartition", "1000")  # one input partition per segment
        .load(dirs)
    )
    assert files.rdd.getNumPartitions() > 2
    assert spark_rows(files) == online
    everything = spark.read.format("seglog-files").load(dirs)
    assert everything.count() == 125
    after = {p: p.stat().st_mtime_ns for d in node.log_dirs for p in d.rglob("*")}
    assert after == before, "reading must not touch the files"
