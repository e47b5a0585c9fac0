"""The `seglog` sink's exactly-once mode (`transactionalIdPrefix`) against a real node.

The first tests drive the tasks' and the driver's halves (pipeline/txn_sink.py)
without Spark, to stop the driver exactly between two commits; the Spark tests run
a streaming query restarted from its checkpoint after a simulated driver crash, with
a task that fails once, in both modes, and a batch write whose job fails. One
local[2] SparkSession (tasks may fail twice) serves the module.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

pytest.importorskip("pyspark")

from seglog.client.admin import Admin, NewTopic
from seglog.client.cluster import TopicPartition
from seglog.client.consumer import Consumer
from seglog.client.producer import Producer
from seglog.client.transaction_manager import (
    PreparedTxnState,
    ProducerFencedError,
    end_transaction,
)
from seglog.harness.node_process import NodeProcess
from seglog.pipeline.options import SinkOptions
from seglog.pipeline.shared_metadata import shared_metadata
from seglog.pipeline.txn_sink import (
    PreparedWrite,
    SkippedWrite,
    TaskIdentity,
    end_prepared,
    write_transaction,
)

# Timed-out transactions are looked for every 200 ms (Kafka: every 10 s).
OVERRIDES = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    """One node for the module, as tests/pipeline/test_seglog_source.py runs it."""
    node = NodeProcess(tmp_path_factory.mktemp("cluster"), overrides=OVERRIDES)
    node.start()
    try:
        yield node
    finally:
        node.stop()


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, 1)])


def read_values(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[bytes]:
    """Every value of `topic` a consumer with `isolation` reads (up to the end, or the
    last stable offset with read_committed)."""
    with Consumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", isolation_level=isolation
    ) as consumer:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        ends = consumer.end_offsets(tps)
        values: list[bytes] = []
        deadline = time.monotonic() + 30
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, f"{topic}: not read to {ends} in time"
            for records in consumer.poll(timeout_ms=300).values():
                values.extend(r.value for r in records)
    return values


def rows(values: list[str]) -> list[pa.RecordBatch]:
    """What Spark hands a sink task: Arrow batches (two here, the second empty)."""
    batch = pa.RecordBatch.from_arrays([pa.array(values, pa.string())], names=["value"])
    return [batch, batch.slice(0, 0)]


# --- the two phases without Spark -----------------------------------------------------


def test_driver_dies_between_two_commits_and_the_batch_is_run_again(cluster) -> None:
    bootstrap = cluster.bootstrap
    create_topic(bootstrap, "eos-direct", 2)
    options = SinkOptions.parse(
        {"bootstrap.servers": bootstrap, "topic": "eos-direct", "transactionalIdPrefix": "q1"}
    )
    batch0 = {0: [f"b0-t0-{i}" for i in range(10)], 1: [f"b0-t1-{i}" for i in range(10)]}

    # Micro-batch 0: both tasks prepare; the driver commits task 0's transaction and dies.
    first = {p: write_transaction(options, TaskIdentity(p, "query-a", 0), rows(vs))
             for p, vs in batch0.items()}  # fmt: skip
    assert all(isinstance(m, PreparedWrite) and m.records == 10 for m in first.values())
    assert end_prepared(options, [first[0]], True, "test") == 10

    # Restarted from the checkpoint, Spark runs micro-batch 0 again with the same rows:
    # task 0 finds its transaction committed, task 1 fences its first attempt's.
    again = {p: write_transaction(options, TaskIdentity(p, "query-a", 0), rows(vs))
             for p, vs in batch0.items()}  # fmt: skip
    assert isinstance(again[0], SkippedWrite) and again[0].batch_id == 0
    assert isinstance(again[1], PreparedWrite)
    stale = first[1]
    assert isinstance(stale, PreparedWrite) and isinstance(again[1], PreparedWrite)
    assert again[1].epoch > stale.epoch
    metadata = shared_metadata(bootstrap)
    with pytest.raises(ProducerFencedError):  # the first attempt's data cannot be committed
        end_transaction(
            metadata, PreparedTxnState(stale.transactional_id, stale.producer_id, stale.epoch),
            True, 10,
        )  # fmt: skip
    end_prepared(options, list(again.values()), True, "test")
    # A commit repeated after a lost answer is answered as the first was.
    end_prepared(options, [again[1]], True, "test")

    # Micro-batch 1, then another query with the same prefix (its markers are its own).
    batch1 = {0: ["b1-t0"], 1: ["b1-t1"]}
    end_prepared(options, [write_transaction(options, TaskIdentity(p, "query-a", 1), rows(vs))
                           for p, vs in batch1.items()], True, "test")  # fmt: skip
    other = write_transaction(options, TaskIdentity(0, "query-b", 0), rows(["other-query"]))
    assert isinstance(other, PreparedWrite)
    end_prepared(options, [other], True, "test")

    expected = [v for b in (batch0, batch1) for vs in b.values() for v in vs] + ["other-query"]
    committed = read_values(bootstrap, "eos-direct", 2, "read_committed")
    assert sorted(v.decode() for v in committed) == sorted(expected)
    # The aborted first attempt of task 1 is in the log, for read_uncommitted readers.
    uncommitted = Counter(v.decode() for v in read_values(bootstrap, "eos-direct", 2,
                                                          "read_uncommitted"))  # fmt: skip
    assert all(uncommitted[v] == 2 for v in batch0[1])


def test_transaction_open_past_its_timeout_is_not_committed(cluster) -> None:
    bootstrap = cluster.bootstrap
    create_topic(bootstrap, "eos-timeout", 1)
    options = SinkOptions.parse({
        "bootstrap.servers": bootstrap, "topic": "eos-timeout", "transactionalIdPrefix": "slow",
        "kafka.transaction.timeout.ms": "1000",
    })  # fmt: skip
    prepared = write_transaction(options, TaskIdentity(0, "query-t", 0), rows(["late"]))
    time.sleep(2.5)  # longer than the transaction's timeout: its coordinator aborts it
    with pytest.raises(RuntimeError, match="1 of 1 transactions could not be committed.*slow-0"):
        end_prepared(options, [prepared], True, "committing micro-batch 0")
    assert read_values(bootstrap, "eos-timeout", 1, "read_committed") == []
    # Run again, the micro-batch is written: its marker was aborted with it.
    again = write_transaction(options, TaskIdentity(0, "query-t", 0), rows(["late"]))
    assert isinstance(again, PreparedWrite)
    end_prepared(options, [again], True, "test")
    assert read_values(bootstrap, "eos-timeout", 1, "read_committed") == [b"late"]


def test_rows_of_pyspark_4_0_streaming_writers(cluster) -> None:
    """PySpark 4.0 hands streaming writers Rows: they go through the Producer."""
    from pyspark.sql import Row

    bootstrap = cluster.bootstrap
    create_topic(bootstrap, "eos-rows", 1)
    options = SinkOptions.parse(
        {"bootstrap.servers": bootstrap, "topic": "eos-rows", "transactionalIdPrefix": "rows"}
    )
    task = TaskIdentity(0, "query-r", 0)
    written = [Row(value="r1", key="k"), Row(value="r2", key=None)]
    first = write_transaction(options, task, written, arrow=False)
    assert isinstance(first, PreparedWrite) and first.records == 2
    end_prepared(options, [first], True, "test")
    assert isinstance(write_transaction(options, task, written, arrow=False), SkippedWrite)
    assert read_values(bootstrap, "eos-rows", 1, "read_committed") == [b"r1", b"r2"]


def test_option_errors(cluster) -> None:
    base = {"bootstrap.servers": cluster.bootstrap, "topic": "t"}
    with pytest.raises(ValueError, match="transactional.id.*transactionalIdPrefix"):
        SinkOptions.parse({**base, "kafka.transactional.id": "x"})
    with pytest.raises(ValueError, match="timeout.ms needs transactionalIdPrefix"):
        SinkOptions.parse({**base, "kafka.transaction.timeout.ms": "1000"})
    with pytest.raises(ValueError, match="needs kafka.acks=all, got '1'"):
        SinkOptions.parse({**base, "transactionalIdPrefix": "p", "kafka.acks": "1"})
    with pytest.raises(ValueError, match="must not be empty"):
        SinkOptions.parse({**base, "transactionalIdPrefix": " "})


# --- with Spark ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark() -> Iterator[object]:
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java")
    from pyspark.sql import SparkSession

    from seglog.pipeline import register

    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2,2]")  # a failed task is tried once more
        .appName("seglog-eos-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        .config("spark.sql.codegen.wholeStage", "false")
        # Arrow batches of two rows to the sink: a task has sent some when it fails.
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "2")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()


def produce(bootstrap: str, topic: str, values: list[str]) -> None:
    with Producer(bootstrap, linger_ms=5) as producer:
        for i, v in enumerate(values):
            producer.send(topic, value=v.encode(), partition=i % 2)
        producer.flush()


def run_query(spark, bootstrap: str, out: str, checkpoint: Path, sink: dict[str, str]) -> None:
    """Everything new in `eos-in` to `out`, Trigger.AvailableNow; the task with `in-7`
    fails once in micro-batch 0."""
    from pyspark.sql.functions import udf

    def partition_for(value: bytes) -> int | None:
        """None (the partitioner) but for `in-7` in a task's first attempt: partition
        99, which does not exist, so the sink fails that attempt after it sent the rows
        of its earlier Arrow batches (Spark tries the task again). Defined here so that
        Spark pickles it by value, not as this module's."""
        from pyspark import TaskContext

        return 99 if value == b"in-7" and TaskContext.get().attemptNumber() == 0 else None

    f = udf(partition_for, "int")
    stream = (
        spark.readStream.format("seglog")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", "eos-in")
        .option("startingOffsets", "earliest")
        .load()
        .select("value", f("value").alias("partition"))
        .writeStream.format("seglog")
        .option("bootstrap.servers", bootstrap)
        .option("topic", out)
        .option("checkpointLocation", str(checkpoint))
        .options(**sink)
        .trigger(availableNow=True)
        .start()
    )
    stream.awaitTermination(120)
    assert stream.exception() is None, stream.exception()


def test_stream_restarted_after_a_driver_crash_writes_each_record_once(
    spark, cluster, tmp_path
) -> None:
    bootstrap = cluster.bootstrap
    create_topic(bootstrap, "eos-in", 2)
    modes = {
        "eos-out": {"transactionalIdPrefix": "eos-query"},
        "alo-out": {},  # at least once, Spark's Kafka sink's guarantee
    }
    for out in modes:
        create_topic(bootstrap, out, 2)
    produce(bootstrap, "eos-in", [f"in-{i}" for i in range(20)])
    for out, sink in modes.items():
        run_query(spark, bootstrap, out, tmp_path / out, sink)  # micro-batch 0
    produce(bootstrap, "eos-in", [f"in-{i}" for i in range(20, 30)])
    for out, sink in modes.items():
        run_query(spark, bootstrap, out, tmp_path / out, sink)  # micro-batch 1
        # The driver died after the sink's commit, before Spark's commit log recorded
        # micro-batch 1: the restart runs it again.
        commits = tmp_path / out / "commits"
        (commits / "1").unlink()
        (commits / ".1.crc").unlink(missing_ok=True)  # Hadoop's checksum beside it
        run_query(spark, bootstrap, out, tmp_path / out, sink)
    expected = sorted(f"in-{i}".encode() for i in range(30))
    assert sorted(read_values(bootstrap, "eos-out", 2, "read_committed")) == expected
    # The failed first attempt had sent rows: its transaction was aborted.
    assert len(read_values(bootstrap, "eos-out", 2, "read_uncommitted")) > 30
    at_least_once = Counter(read_values(bootstrap, "alo-out", 2, "read_committed"))
    assert set(at_least_once) == set(expected)
    # The re-run micro-batch 1 is written twice (a retried task may add more).
    assert {v for v, n in at_least_once.items() if n > 1} >= {
        f"in-{i}".encode() for i in range(20, 30)
    }


def test_batch_write_commits_each_task_or_aborts_them_all(spark, cluster) -> None:
    from pyspark.sql.functions import udf

    bootstrap = cluster.bootstrap
    create_topic(bootstrap, "eos-batch", 2)
    df = spark.createDataFrame([(f"in-{i}",) for i in range(20)], "value string").repartition(2)
    writer = (
        df.write.format("seglog")
        .option("bootstrap.servers", bootstrap)
        .option("topic", "eos-batch")
        .option("transactionalIdPrefix", "eos-batch-job")
        .mode("append")
    )
    writer.save()
    assert sorted(read_values(bootstrap, "eos-batch", 2, "read_committed")) == sorted(
        f"in-{i}".encode() for i in range(20)
    )

    def always_fails_on(value: str) -> str:
        if value == "in-7":
            time.sleep(5)  # after the other task prepared its transaction
            raise RuntimeError("injected failure")
        return value

    f = udf(always_fails_on, "string")
    failing = (
        df.select(f("value").alias("value"))
        .write.format("seglog")
        .option("bootstrap.servers", bootstrap)
        .option("topic", "eos-batch")
        .option("transactionalIdPrefix", "eos-batch-job")
        .mode("append")
    )
    with pytest.raises(Exception, match="injected failure"):
        failing.save()
    # The task that succeeded was aborted with the job: nothing new is committed, and no
    # transaction is left open (read_committed readers reach the end).
    assert len(read_values(bootstrap, "eos-batch", 2, "read_committed")) == 20
    with Admin(bootstrap) as admin:
        states = {d.transactional_id: d.state for d in admin.describe_transactions(
            ["eos-batch-job-0", "eos-batch-job-1"])}  # fmt: skip
    assert "Ongoing" not in states.values() and "CompleteAbort" in states.values(), states
