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

from collections.abc import Sequence

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
_ARROW_HEADER = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
_ARROW_HEADERS = pa.list_(pa.field("element", _ARROW_HEADER))
_ARROW_BASE = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", _ARROW_TS),
    pa.field("timestampType", pa.int32()),
]

# Rows per Arrow batch handed to Spark: big enough to amortise the per-batch
# cost, small enough that a worker holds a few MiB, not a whole partition.
DEFAULT_ROWS_PER_BATCH = 8192
DEFAULT_BYTES_PER_BATCH = 8 * 1024 * 1024

Headers = Sequence[tuple[str, bytes | None]]


def spark_schema(include_headers: bool = False) -> StructType:
    return StructType(BASE_FIELDS + ([HEADERS_FIELD] if include_headers else []))


def arrow_schema(include_headers: bool = False) -> pa.Schema:
    fields = _ARROW_BASE + ([pa.field("headers", _ARROW_HEADERS)] if include_headers else [])
    return pa.schema(fields)


class ArrowRows:
    """Collects the records of one topic-partition column by column and hands
    them out as `pyarrow.RecordBatch`es of the Kafka schema.

    Records arrive in bulk, a column at a time (`extend`): per-record Python
    work is what limits a reader, so nothing here loops over records."""

    def __init__(
        self,
        topic: str,
        partition: int,
        include_headers: bool = False,
        max_rows: int = DEFAULT_ROWS_PER_BATCH,
        max_bytes: int = DEFAULT_BYTES_PER_BATCH,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.include_headers = include_headers
        self.max_rows = max_rows
        self.max_bytes = max_bytes
        self.schema = arrow_schema(include_headers)
        self._clear()

    def _clear(self) -> None:
        self.offsets: list[int] = []
        self.timestamps: list[int] = []
        self.timestamp_types: list[int] = []
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        self.headers: list[Headers] = []
        self.bytes = 0

    def __len__(self) -> int:
        return len(self.offsets)

    @property
    def full(self) -> bool:
        return len(self.offsets) >= self.max_rows or self.bytes >= self.max_bytes

    def extend(
        self,
        offsets: Sequence[int],
        timestamps_ms: Sequence[int],
        timestamp_types: Sequence[int],
        keys: Sequence[bytes | None],
        values: Sequence[bytes | None],
        headers: Sequence[Headers],
        size_bytes: int,
    ) -> None:
        """Equal-length columns of consecutive records; `size_bytes` roughly their
        key and value bytes (it decides when a batch is full)."""
        self.offsets += offsets
        self.timestamps += timestamps_ms
        self.timestamp_types += timestamp_types
        self.keys += keys
        self.values += values
        if self.include_headers:
            self.headers += headers
        self.bytes += size_bytes

    def flush(self) -> pa.RecordBatch:
        """The rows collected so far as one batch; starts a new one."""
        n = len(self.offsets)
        columns = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.repeat(pa.scalar(self.topic, pa.string()), n),
            pa.repeat(pa.scalar(self.partition, pa.int32()), n),
            pa.array(self.offsets, pa.int64()),
            # Kafka's timestamps are epoch milliseconds; Spark's are microseconds.
            pa.array(self.timestamps, pa.timestamp("ms", tz="UTC")).cast(_ARROW_TS),
            pa.array(self.timestamp_types, pa.int32()),
        ]
        if self.include_headers:
            # (key, value) tuples convert straight to the header structs.
            columns.append(pa.array(self.headers, _ARROW_HEADERS))
        batch = pa.RecordBatch.from_arrays(columns, schema=self.schema)
        self._clear()
        return batch
