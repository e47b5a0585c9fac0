"""Visits per page per one-minute window, from `page_visits` to `page_visit_counts`.

    python -m seglog.pipeline.examples.generate_page_visits --bootstrap-server 127.0.0.1:9192
    python -m seglog.pipeline.examples.page_visits --bootstrap-server 127.0.0.1:9192 \
        [--available-now] [--checkpoint DIR] [--watermark "1 minute"]

Reads the JSON events `{"page", "user", "ts"}` (ts: epoch ms, the event time) as
a stream, counts them per page in tumbling one-minute event-time windows, and
writes each window's count once, when the watermark (latest event time minus
`--watermark`) has passed the window's end: key = page, value =
`{"window_start", "window_end", "page", "count"}` (times as ISO-8601 UTC).
Windows newer than the watermark stay open until later events arrive.

`--available-now` processes what the topic holds and exits (Trigger.AvailableNow);
otherwise the query runs every `--interval` until interrupted. Restarting with
the same `--checkpoint` continues where the last run stopped.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from seglog.pipeline import register
from seglog.pipeline.examples.generate_page_visits import ensure_topic

EVENT_SCHEMA = "page string, user string, ts long"


def spark_session(shuffle_partitions: int = 4) -> SparkSession:
    spark = (
        SparkSession.builder.appName("seglog-page-visits")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        # Few state-store partitions: the default 200 makes every trigger slow.
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    register(spark)
    return spark


def window_counts(events: DataFrame, watermark: str) -> DataFrame:
    """seglog rows of page-visit JSON → (key, value) rows of per-window counts."""
    parsed = events.select(F.from_json(F.col("value").cast("string"), EVENT_SCHEMA).alias("e"))
    counts = (
        parsed.select("e.page", F.timestamp_millis("e.ts").alias("event_time"))
        .where(F.col("page").isNotNull())
        .withWatermark("event_time", watermark)
        .groupBy(F.window("event_time", "1 minute"), "page")
        .count()
    )
    iso = "yyyy-MM-dd'T'HH:mm:ss'Z'"
    return counts.select(
        F.col("page").alias("key"),
        F.to_json(
            F.struct(
                F.date_format("window.start", iso).alias("window_start"),
                F.date_format("window.end", iso).alias("window_end"),
                "page",
                "count",
            )
        ).alias("value"),
    )


def start(
    spark: SparkSession,
    bootstrap: str,
    checkpoint: str,
    *,
    available_now: bool = False,
    interval: str = "10 seconds",
    input_topic: str = "page_visits",
    output_topic: str = "page_visit_counts",
    watermark: str = "1 minute",
    max_offsets_per_trigger: int | None = None,
) -> StreamingQuery:
    ensure_topic(bootstrap, input_topic)
    ensure_topic(bootstrap, output_topic)
    reader = (
        spark.readStream.format("seglog")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", input_topic)
        .option("startingOffsets", "earliest")
    )
    if max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    writer = (
        window_counts(reader.load(), watermark)
        .writeStream.format("seglog")
        .option("bootstrap.servers", bootstrap)
        .option("topic", output_topic)
        .option("checkpointLocation", checkpoint)
        .outputMode("append")
        .queryName("page_visit_counts")
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=interval)
    return writer.start()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-server", required=True, help="host:port of a seglog node")
    parser.add_argument("--available-now", action="store_true", help="process what is there, exit")
    parser.add_argument("--checkpoint", default="checkpoints/page_visits")
    parser.add_argument("--interval", default="10 seconds", help="trigger interval when running")
    parser.add_argument("--input-topic", default="page_visits")
    parser.add_argument("--output-topic", default="page_visit_counts")
    parser.add_argument("--watermark", default="1 minute", help="allowed event lateness")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None)
    args = parser.parse_args(argv)
    spark = spark_session()
    spark.sparkContext.setLogLevel("WARN")
    query = start(
        spark,
        args.bootstrap_server,
        args.checkpoint,
        available_now=args.available_now,
        interval=args.interval,
        input_topic=args.input_topic,
        output_topic=args.output_topic,
        watermark=args.watermark,
        max_offsets_per_trigger=args.max_offsets_per_trigger,
    )
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    progress = query.lastProgress
    if progress:
        print(f"last batch {progress['batchId']}: {progress['numInputRows']} input rows")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
