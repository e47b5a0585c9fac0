"""Visits per page and one-minute window, declared for `spark-pipelines run`.

- `page_visit_events`: a streaming table fed by the `seglog` source (one row per
  record of the input topic, the JSON event parsed; offsets kept in the pipeline's
  checkpoint, so a restarted run reads each record once);
- `visits_per_page_window`: a materialised view, the count of events per page and
  tumbling one-minute event-time window, recomputed from the streaming table;
- `page_visit_counts_sink`: a seglog sink; a streaming flow (reading the topic
  itself) writes each window's
  count to it once, when the watermark has passed the window's end (key = page,
  value = JSON `{window_start, window_end, page, count}`).

The `spark.seglog.*` values of the pipeline's configuration name the cluster and topics.
"""

from pyspark import pipelines as dp
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from seglog.pipeline import register

spark = SparkSession.active()
register(spark)  # the `seglog` format must be known before any flow resolves it

BOOTSTRAP = spark.conf.get("spark.seglog.bootstrap.servers", "127.0.0.1:9192")
INPUT_TOPIC = spark.conf.get("spark.seglog.input.topic", "page_visits")
OUTPUT_TOPIC = spark.conf.get("spark.seglog.output.topic", "page_visit_counts")
WATERMARK = spark.conf.get("spark.seglog.watermark", "1 minute")
EVENT_SCHEMA = "page string, user string, ts long"
ISO = "yyyy-MM-dd'T'HH:mm:ss'Z'"


def events(records: DataFrame) -> DataFrame:
    """seglog rows of page-visit JSON → (partition, offset, page, user, event_time)."""
    event = F.from_json(F.col("value").cast("string"), EVENT_SCHEMA)
    return records.select(
        "partition",
        "offset",
        event.page.alias("page"),
        event.user.alias("user"),
        F.timestamp_millis(event.ts).alias("event_time"),
    )


def input_stream() -> DataFrame:
    return (
        spark.readStream.format("seglog")
        .option("bootstrap.servers", BOOTSTRAP)
        .option("subscribe", INPUT_TOPIC)
        .option("startingOffsets", "earliest")
        .load()
    )


@dp.table(comment="page-visit events, one row per record of the input topic")
def page_visit_events() -> DataFrame:
    return events(input_stream())


@dp.materialized_view(comment="visits per page and one-minute event-time window")
def visits_per_page_window() -> DataFrame:
    return (
        spark.read.table("page_visit_events")
        .where(F.col("page").isNotNull())
        .groupBy(F.window("event_time", "1 minute"), "page")
        .count()
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "page",
            "count",
        )
    )


dp.create_sink(
    "page_visit_counts_sink",
    format="seglog",
    options={"bootstrap.servers": BOOTSTRAP, "topic": OUTPUT_TOPIC},
)


@dp.append_flow(target="page_visit_counts_sink")
def window_counts_to_seglog() -> DataFrame:
    counts = (
        # Its own read of the topic (and its own checkpoint in the pipeline's storage).
        events(input_stream())
        .where(F.col("page").isNotNull())
        .withWatermark("event_time", WATERMARK)
        .groupBy(F.window("event_time", "1 minute"), "page")
        .count()
    )
    value = F.to_json(
        F.struct(
            F.date_format("window.start", ISO).alias("window_start"),
            F.date_format("window.end", ISO).alias("window_end"),
            "page",
            "count",
        )
    )
    return counts.select(F.col("page").alias("key"), value.alias("value"))
