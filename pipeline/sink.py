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

With the option `transactionalIdPrefix` it is exactly-once instead: each task
writes one Kafka transaction that the driver commits (txn_sink.py).
"""

from __future__ import annotations

import logging
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

from .batch_sender import send_arrow_batches
from .options import SinkOptions
from .record_sender import RecordSender
from .schema import HEADER_TYPE
from .txn_sink import current_task, end_prepared, write_transaction

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


def send_arrow(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> SentRecords:
    """Arrow batches straight to RecordBatch v2 bytes (batch_sender.py)."""
    return SentRecords(send_arrow_batches(options, batches))


def send_rows(options: SinkOptions, rows: Iterator[Any]) -> SentRecords:
    """PySpark 4.0's streaming writers get Rows, not Arrow batches."""
    sender = RecordSender(options)
    try:
        for row in rows:
            sender.send_row(row.asDict(recursive=True))
        return SentRecords(sender.finish())
    except BaseException:
        sender.close()
        raise


class SeglogWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_write_schema(schema, options.topic)
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        if self.options.transactional_id_prefix is not None:
            return write_transaction(self.options, current_task(False), iterator)
        return send_arrow(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.options.transactional_id_prefix is not None:
            sent = end_prepared(self.options, messages, True, "committing the write")
        else:
            sent = sum(m.records for m in messages if isinstance(m, SentRecords))
        _log.info("wrote %d records", sent)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.options.transactional_id_prefix is not None:
            end_prepared(self.options, messages, False, "aborting the write")
            _log.warning("write aborted; its transactions were aborted")
        else:
            _log.warning("write aborted; records already acknowledged stay in seglog")


_StreamBase: Any = DataSourceStreamArrowWriter or DataSourceStreamWriter


class SeglogStreamWriter(_StreamBase):  # type: ignore[misc]
    def __init__(self, options: SinkOptions, schema: StructType) -> None:
        check_write_schema(schema, options.topic)
        self.options = options

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        arrow = DataSourceStreamArrowWriter is not None
        if self.options.transactional_id_prefix is not None:
            return write_transaction(self.options, current_task(True), iterator, arrow)
        if arrow:
            return send_arrow(self.options, iterator)
        return send_rows(self.options, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """At least once: nothing to do, every record was acknowledged before its task
        finished. Exactly once: the tasks' transactions are committed."""
        if self.options.transactional_id_prefix is not None:
            end_prepared(self.options, messages, True, f"committing micro-batch {batchId}")

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        if self.options.transactional_id_prefix is not None:
            end_prepared(self.options, messages, False, f"aborting micro-batch {batchId}")
            _log.warning("micro-batch %d aborted; its transactions were aborted", batchId)
        else:
            _log.warning("micro-batch %d aborted; records already acknowledged stay", batchId)
