"""Rows exactly as Spark's Kafka source shapes them, and Arrow record batches of
those rows.

    key binary, value binary, topic string, partition int, offset long,
    timestamp timestamp, timestampType int [, headers array<struct<key:string,value:binary>>]

Every field is nullable, as in Spark's `KafkaRecordToRowConverter`. The Arrow
schema is what PySpark's `to_arrow_schema(schema, timezone="UTC")` makes of the
Spark schema (microsecond UTC timestamps, list items named "element"): a data
source's batches must equal it field for field or Spark refuses them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from .arrow_types import HEADERS_ARROW_TYPE

if TYPE_CHECKING:
    from .arrow_decode import Columns

HEADER_TYPE = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
BASE_FIELDS = [
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
]
HEADERS_FIELD = StructField("headers", ArrayType(HEADER_TYPE))

_ARROW_TS = pa.timestamp("us", tz="UTC")
_ARROW_HEADERS = HEADERS_ARROW_TYPE
_ARROW_BASE = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", _ARROW_TS),
    pa.field("timestampType", pa.int32()),
]


def spark_schema(include_headers: bool = False) -> StructType:
    return StructType(BASE_FIELDS + ([HEADERS_FIELD] if include_headers else []))


def arrow_schema(include_headers: bool = False) -> pa.Schema:
    fields = _ARROW_BASE + ([pa.field("headers", _ARROW_HEADERS)] if include_headers else [])
    return pa.schema(fields)


def record_batch(topic: str, partition: int, cols: Columns) -> pa.RecordBatch:
    """Decoded records of one topic-partition as a batch of the Kafka schema
    (with the headers column when `cols` carries headers)."""
    n = len(cols)
    columns = [
        cols.keys,
        cols.values,
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(cols.offsets, pa.int64()),
        # Kafka's timestamps are epoch milliseconds; Spark's are microseconds.
        pa.array(cols.timestamps_ms * 1000, _ARROW_TS),
        pa.array(cols.timestamp_types, pa.int32()),
    ]
    if cols.headers is not None:
        columns.append(cols.headers)
    return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(cols.headers is not None))
