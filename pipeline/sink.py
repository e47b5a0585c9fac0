"""Writing a DataFrame (batch or streaming) to seglog the way Spark's Kafka sink does.

Columns: `value` (required), `key`, `headers`
(array<struct<key:string,value:binary>>), `topic` (required unless the `topic`
option is set, which then wins) and `partition` (int; null or absent: the
producer's partitioner, murmur2 of the key as in Kafka). key/value may be string
(sent as UTF-8) or binary. Other columns are ignored.

Each Spark task encodes its Arrow batches straight into RecordBatch v2 batches
(no Python object per record) and sends them with its own idempotent producer
id (acks=all by default, `batch_sender.py`); it succeeds only once every record
is acknowledged. PySpark 4.0's streaming writers get Rows, sent one by one with
the Producer. Like Kafka's
sink this is at-least-once: a retried task or micro-batch sends its rows again,
and abort() cannot take back records already written.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
)

from seglog.client.producer import Producer

from .batch_sender import send_arrow_batches
from .options import SinkOptions
from .schema import HEADER_TYPE

try:  # PySpark >= 4.1 hands streaming writers Arrow batches too
    from pyspark.sql.datasource import DataSourceStreamArrowWriter
except ImportError:  # pragma: no cover - PySpark 4.0
    DataSourceStreamArrowWriter = None  # type: ignore[assignment,misc]

_log = logging.getLogger(__name__)
_TEXT_OR_BYTES = (StringType, BinaryType)
HEADERS_TYPE = ArrayType(HEADER_TYPE).simpleString()


@dataclass
class SentRecords(WriterCommitMessage):
    records: int


def check_write_schema(schema: StructType, topic_option: str | None) -> None:
    """Spark's Kafka sink checks, with its messages."""
    fields = {f.name: f.dataType for f in schema.fields}
    if "value" not in fields:
        raise ValueError("required attribute 'value' not found in the DataFrame to write")
    for name in ("key", "value"):
        if name in fields and not isinstance(fields[name], _TEXT_OR_BYTES):
            raise ValueError(
                f"{name} attribute type must be a string or binary, got {fields[name]}"
            )
    if topic_option is None:
        if "topic" not in fields:
            raise ValueError(
                "topic option required when no 'topic' attribute is present; use the topic "
                "option for setting a topic"
            )
        if not isinstance(fields["topic"], StringType):
            raise ValueError(f"topic attribute type must be a string, got {fields['topic']}")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise ValueError(f"partition attribute type must be an int, got {fields['partition']}")
    # simpleString leaves nullability out, which Spark's check ignores too.
    if "headers" in fields and fields["headers"].simpleString() != HEADERS_TYPE:
        raise ValueError(
            "headers attribute type must be array<struct<key:string,value:binary>>, got "
            f"{fields['headers'].simpleString()}"
        )


def _as_bytes(v: Any) -> bytes | None:
    return v.encode("utf-8") if isinstance(v, str) else v


class RecordSender:
    """One task's producer: sends rows, fails fast on the first failed record."""

    def __init__(self, options: SinkOptions) -> None:
        self.options = options
        self.producer = Producer(options.bootstrap_servers, **options.producer_config)
        self.sent = 0
        self._error: BaseException | None = None
        self._lock = threading.Lock()
        self._partitions: dict[str, set[int]] = {}

    def _on_error(self, e: BaseException) -> None:
        with self._lock:
            self._error = self._error or e

    def _check(self) -> None:
        if self._error is not None:
            raise RuntimeError(f"writing to seglog failed: {self._error}") from self._error

    def send(
        self,
        topic: str | None,
        partition: int | None,
        key: Any,
        value: Any,
        headers: list[dict[str, Any]] | None,
    ) -> None:
        self._check()
        topic = self.options.topic or topic
        if not topic:
            raise ValueError("a row has a null topic and no topic option is set")
        if partition is not None:
            known = self._partitions.get(topic)
            if known is None:
                known = self._partitions[topic] = self.producer.partitions_for(topic)
            if partition not in known:
                raise ValueError(
                    f"partition {partition} does not exist in topic {topic!r} "
                    f"(it has partitions {sorted(known)})"
                )
        future = self.producer.send(
            topic,
            value=_as_bytes(value),
            key=_as_bytes(key),
            headers=[(h["key"], h["value"]) for h in headers] if headers else None,
            partition=partition,
        )
        future.add_errback(self._on_error)
        self.sent += 1

    def finish(self) -> SentRecords:
        try:
            self.producer.flush()
            self._check()
        finally:
            self.producer.close()
        return SentRecords(self.sent)

    def close(self) -> None:
        self.producer.close(timeout=0)


def send_arrow(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> SentRecords:
    """Arrow batches straight to RecordBatch v2 bytes (batch_sender.py)."""
    return SentRecords(send_arrow_batches(options, batches))


def send_rows(options: SinkOptions, rows: Iterator[Any]) -> SentRecords:
    """PySpark 4.0's streaming writers get Rows, not Arrow batches."""
    sender = RecordSender(options)
    try:
        for row in rows:
            d = row.asDict(recursive=True)
            sender.send(
                d.get("topic"), d.get("partition"), d.get("key"), d.get("value"), d.get("headers")
            )
        return sender.finish()
    except BaseException:
        sender.close()
        raise


class SeglogWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_write_schema(schema, options.topic)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return send_arrow(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        sent = sum(m.records for m in messages if isinstance(m, SentRecords))
        _log.info("wrote %d records", sent)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        _log.warning("write aborted; records already acknowledged stay in seglog")


_StreamBase: Any = DataSourceStreamArrowWriter or DataSourceStreamWriter


class SeglogStreamWriter(_StreamBase):  # type: ignore[misc]
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_write_schema(schema, options.topic)
        self.options = options

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        if DataSourceStreamArrowWriter is not None:
            return send_arrow(self.options, iterator)
        return send_rows(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """Nothing to do: every record was acknowledged before its task finished."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        _log.warning("micro-batch %d aborted; records already acknowledged stay", batchId)
