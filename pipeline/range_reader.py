"""One Spark task's read: exactly the offsets [start, end) of one topic-partition,
fetched from the partition's leader with the seglog Consumer, handed to Spark as
Arrow record batches.

The consumer runs with auto_offset_reset='none', so an offset retention removed
surfaces as OffsetOutOfRangeError instead of a silent jump; that, a gap before
the log start, or a partition that ends before `end` (truncated) is data loss:
an error naming the topic, partition and missing offsets under failOnDataLoss,
otherwise skipped. Gaps above the log start (control batches, compaction) are
normal and skipped silently.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from seglog.client.consumer import (
    Consumer,
    ConsumerRecord,
    OffsetOutOfRangeError,
    TopicPartition,
)

from .offsets import OffsetRange, missing_range_message, report_data_loss
from .options import SourceOptions
from .schema import ArrowRows

_log = logging.getLogger(__name__)

# Executors read one partition per consumer: larger fetches than the consumer's
# defaults (1 MiB, 500 records) cut round trips; `kafka.*` options override them.
EXECUTOR_DEFAULTS: dict[str, Any] = {
    "client_id": "seglog-spark-executor",
    "max_partition_fetch_bytes": 4 * 1024 * 1024,
    "max_poll_records": 10_000,
}
_POLL_SLICE_MS = 1000


def _offset(record: ConsumerRecord) -> int:
    return record.offset


def read_range(r: OffsetRange, options: SourceOptions) -> Iterator[pa.RecordBatch]:
    if r.size <= 0:
        return
    config = {**EXECUTOR_DEFAULTS, **options.consumer_config}
    consumer = Consumer(
        bootstrap_servers=options.bootstrap_servers, auto_offset_reset="none", **config
    )
    try:
        yield from RangeReader(consumer, r, options).batches()
    finally:
        consumer.close()


class RangeReader:
    def __init__(self, consumer: Consumer, r: OffsetRange, options: SourceOptions) -> None:
        self.consumer = consumer
        self.range = r
        self.tp = TopicPartition(r.topic, r.partition)
        self.fail = options.fail_on_data_loss
        self.poll_timeout_s = options.poll_timeout_ms / 1000
        self.rows = ArrowRows(r.topic, r.partition, options.include_headers)

    def batches(self) -> Iterator[pa.RecordBatch]:
        tp, end = self.tp, self.range.end
        self.consumer.assign([tp])
        self.consumer.seek(tp, self.range.start)
        pos = self.range.start  # the next offset this task owes Spark
        stalled_since = time.monotonic()
        while pos < end:
            try:
                records = self.consumer.poll(timeout_ms=_POLL_SLICE_MS).get(tp)
            except OffsetOutOfRangeError:
                pos = self._skip_lost(pos)
                continue
            if not records:
                # Offsets no record holds (control batches) move the position only.
                moved = min(self.consumer.position(tp), end)
                if moved > pos:
                    pos, stalled_since = moved, time.monotonic()
                    continue
                pos = self._check_stalled(pos, stalled_since)
                continue
            stalled_since = time.monotonic()
            past_end = records[-1].offset >= end
            if past_end:
                records = records[: bisect.bisect_left(records, end, key=_offset)]
            if records:
                self._check_gaps(pos, records)
                self._add(records)
                pos = records[-1].offset + 1
                if self.rows.full:
                    yield self.rows.flush()
            pos = end if past_end else max(pos, min(self.consumer.position(tp), end))
        if len(self.rows):
            yield self.rows.flush()

    def _add(self, records: list[ConsumerRecord]) -> None:
        # ConsumerRecord is a tuple: zip(*) turns the records into columns at C speed.
        cols = list(zip(*records, strict=True))
        self.rows.extend(
            offsets=cols[3],
            timestamps_ms=cols[4],
            timestamp_types=cols[5],
            keys=cols[6],
            values=cols[7],
            headers=cols[8],
            size_bytes=sum(cols[10]) + sum(cols[11]),  # serialized key and value sizes
        )

    def _check_gaps(self, pos: int, records: list[ConsumerRecord]) -> None:
        first = records[0].offset
        if first > pos:
            self._check_gap(pos, first)
        if records[-1].offset - first + 1 == len(records):
            return  # consecutive offsets: the usual case
        for prev, rec in zip(records, records[1:], strict=False):
            if rec.offset > prev.offset + 1:
                self._check_gap(prev.offset + 1, rec.offset)

    def _log_start(self) -> int:
        return self.consumer.beginning_offsets([self.tp])[self.tp]

    def _skip_lost(self, pos: int) -> int:
        """The fetch at `pos` was out of range: retention moved the log start past
        it, or the log was truncated below it."""
        log_start = self._log_start()
        if log_start > pos:
            report_data_loss(
                self.fail,
                missing_range_message(self.tp, pos, min(log_start, self.range.end), log_start),
            )
            _log.warning("skipping lost offsets [%d, %d) of %s", pos, log_start, self.tp)
            new_pos = log_start
        else:
            new_pos = self._truncated(pos)
        if new_pos < self.range.end:
            self.consumer.seek(self.tp, new_pos)
        return new_pos

    def _check_gap(self, pos: int, next_offset: int) -> None:
        """Records resumed at `next_offset`: data loss only if the log start passed `pos`."""
        log_start = self._log_start()
        if log_start > pos:
            report_data_loss(
                self.fail,
                missing_range_message(self.tp, pos, min(next_offset, log_start), log_start),
            )

    def _truncated(self, pos: int, hw: int | None = None) -> int:
        hw = self.consumer.end_offsets([self.tp])[self.tp] if hw is None else hw
        report_data_loss(
            self.fail,
            f"topic {self.tp.topic!r} partition {self.tp.partition}: offsets "
            f"[{pos}, {self.range.end}) were planned but the partition now ends at "
            f"offset {hw} (it was truncated or recreated)",
        )
        return self.range.end

    def _check_stalled(self, pos: int, stalled_since: float) -> int:
        hw = self.consumer.highwater(self.tp)
        if hw is not None and hw <= pos:
            # A fetch said so; a ListOffsets confirms before calling it loss.
            confirmed = self.consumer.end_offsets([self.tp])[self.tp]
            if confirmed <= pos:
                return self._truncated(pos, confirmed)
        if time.monotonic() - stalled_since > self.poll_timeout_s:
            raise TimeoutError(
                f"cannot fetch offset {pos} of topic {self.tp.topic!r} partition "
                f"{self.tp.partition} within kafkaConsumer.pollTimeoutMs "
                f"({self.poll_timeout_s * 1000:.0f} ms)"
            )
        return pos
