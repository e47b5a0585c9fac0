"""One Spark task's read: exactly the offsets [start, end) of one topic-partition,
fetched as raw batches from the partition's leader (`partition_fetch.py`),
CRC-checked and decoded batch-wise into Arrow (`arrow_decode.py`), handed to
Spark as `pyarrow.RecordBatch`es. No Python object is made per record.

An offset retention removed (the fetch answers OFFSET_OUT_OF_RANGE), a gap
before the log start, or a partition that ends before `end` (truncated) is data
loss: an error naming the topic, partition and missing offsets under
failOnDataLoss, otherwise skipped. Gaps above the log start (control batches,
compaction) are normal and skipped silently.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pyarrow as pa

from seglog.client.admin import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, Admin
from seglog.client.cluster import TopicPartition
from seglog.client.errors import KafkaError, error_class
from seglog.storage.errors import StorageError
from seglog.storage.record_batch import BatchHeader, check_batch, iter_batches

from .arrow_decode import decode_batches
from .offsets import OffsetRange, missing_range_message, report_data_loss
from .options import SourceOptions
from .partition_fetch import FetchAnswer, FetchConfig, PartitionFetcher
from .schema import record_batch

_log = logging.getLogger(__name__)

CorruptMessageError = error_class("CORRUPT_MESSAGE")
# The `kafka.*` options an executor's fetches honour, with their defaults here: one
# partition per task, so fetches are larger than a consumer's 1 MiB default.
_FETCH_OPTIONS = {
    "max_partition_fetch_bytes": 8 * 1024 * 1024,
    "fetch_max_wait_ms": 500,
    "request_timeout_ms": 30_000,
}
_RETRY_BACKOFF_S = (0.05, 1.0)  # first and largest wait between failed fetches


def fetch_config(options: SourceOptions) -> FetchConfig:
    given = options.consumer_config
    return FetchConfig(**{k: int(given.get(k, v)) for k, v in _FETCH_OPTIONS.items()})


def read_range(r: OffsetRange, options: SourceOptions) -> Iterator[pa.RecordBatch]:
    if r.size <= 0:
        return
    fetcher = PartitionFetcher(options.bootstrap_servers, r.tp, fetch_config(options))
    reader = RangeReader(fetcher, r, options)
    try:
        yield from reader.batches()
    finally:
        reader.close()


class RangeReader:
    def __init__(self, fetcher: PartitionFetcher, r: OffsetRange, options: SourceOptions) -> None:
        self.fetcher = fetcher
        self.range = r
        self.tp = TopicPartition(r.topic, r.partition)
        self.options = options
        self.fail = options.fail_on_data_loss
        self.poll_timeout_s = options.poll_timeout_ms / 1000
        self._admin: Admin | None = None

    def close(self) -> None:
        self.fetcher.close()
        if self._admin is not None:
            self._admin.close()

    @property
    def admin(self) -> Admin:
        """ListOffsets, only on the rare paths (lost or truncated data)."""
        if self._admin is None:
            self._admin = Admin(bootstrap_servers=self.options.bootstrap_servers)
        return self._admin

    def batches(self) -> Iterator[pa.RecordBatch]:
        end = self.range.end
        pos = self.range.start  # the next offset this task owes Spark
        stalled_since = time.monotonic()
        failures = 0
        while pos < end:
            try:
                answer = self.fetcher.fetch(pos)
            except KafkaError as e:
                if not e.retriable:
                    raise
                failures += 1
                self._backoff(pos, stalled_since, failures, str(e))
                continue
            if answer.error == "OFFSET_OUT_OF_RANGE":
                pos = self._skip_lost(pos)
                continue
            if answer.error is not None:
                error = error_class(answer.error)(
                    f"{self.tp.topic}-{self.tp.partition}: {answer.message}"
                )
                if not error.retriable:
                    raise error
                failures += 1
                self._backoff(pos, stalled_since, failures, str(error))
                continue
            failures = 0
            framed = self._frame(answer)
            if not framed:
                pos = self._nothing_fetched(pos, answer, stalled_since)
                continue
            stalled_since = time.monotonic()
            next_offset = framed[-1][1].next_offset
            if next_offset < end:
                self.fetcher.prefetch(next_offset)  # travels while this answer is decoded
            batch = self._decode(pos, answer, framed)
            if batch is not None:
                yield batch
            pos = max(pos, min(next_offset, end))

    def _frame(self, answer: FetchAnswer) -> list[tuple[int, BatchHeader]]:
        """The whole batches of the answer (a partial one at the end is cut by the size
        limit: the next fetch starts there)."""
        try:
            return list(iter_batches(answer.records, validate=False))
        except StorageError as e:
            raise CorruptMessageError(
                f"{self.tp.topic}-{self.tp.partition} at or after offset {answer.offset}: {e}"
            ) from e

    def _decode(
        self, pos: int, answer: FetchAnswer, framed: list[tuple[int, BatchHeader]]
    ) -> pa.RecordBatch | None:
        end = self.range.end
        data = answer.records
        wanted = [
            (p, h)
            for p, h in framed
            if not h.is_control and h.next_offset > pos and h.base_offset < end
        ]
        try:
            for p, _h in wanted:
                check_batch(data, p)  # the CRC, once per batch
            cols = decode_batches(data, wanted, pos, end, self.options.include_headers)
        except StorageError as e:
            raise CorruptMessageError(
                f"{self.tp.topic}-{self.tp.partition} at or after offset {pos}: {e}"
            ) from e
        if not len(cols):
            return None
        first = int(cols.offsets[0])
        if first > pos and answer.log_start_offset > pos:
            report_data_loss(
                self.fail,
                missing_range_message(
                    self.tp, pos, min(first, answer.log_start_offset), answer.log_start_offset
                ),
            )
        return record_batch(self.range.topic, self.range.partition, cols)

    def _nothing_fetched(self, pos: int, answer: FetchAnswer, stalled_since: float) -> int:
        if answer.records:
            raise CorruptMessageError(
                f"{self.tp.topic}-{self.tp.partition} offset {pos}: the first batch does not "
                f"fit in kafka.max.partition.fetch.bytes "
                f"({self.fetcher.config.max_partition_fetch_bytes}); raise it"
            )
        if 0 <= answer.high_watermark <= pos:
            # The leader says the partition ends here; ListOffsets confirms before loss.
            confirmed = self._list(LATEST_TIMESTAMP)
            if confirmed <= pos:
                return self._truncated(pos, confirmed)
        if time.monotonic() - stalled_since > self.poll_timeout_s:
            raise TimeoutError(
                f"cannot fetch offset {pos} of topic {self.tp.topic!r} partition "
                f"{self.tp.partition} within kafkaConsumer.pollTimeoutMs "
                f"({self.poll_timeout_s * 1000:.0f} ms)"
            )
        return pos

    def _backoff(self, pos: int, stalled_since: float, failures: int, why: str) -> None:
        if time.monotonic() - stalled_since > self.poll_timeout_s:
            raise TimeoutError(
                f"cannot fetch offset {pos} of topic {self.tp.topic!r} partition "
                f"{self.tp.partition} within kafkaConsumer.pollTimeoutMs "
                f"({self.poll_timeout_s * 1000:.0f} ms): {why}"
            )
        first, most = _RETRY_BACKOFF_S
        time.sleep(min(most, first * 2 ** min(failures - 1, 10)))

    def _list(self, spec: int) -> int:
        return self.admin.list_offsets({self.tp: spec})[self.tp].offset

    def _skip_lost(self, pos: int) -> int:
        """The fetch at `pos` was out of range: retention moved the log start past
        it, or the log was truncated below it."""
        log_start = self._list(EARLIEST_TIMESTAMP)
        if log_start > pos:
            report_data_loss(
                self.fail,
                missing_range_message(self.tp, pos, min(log_start, self.range.end), log_start),
            )
            _log.warning("skipping lost offsets [%d, %d) of %s", pos, log_start, self.tp)
            return log_start
        return self._truncated(pos)

    def _truncated(self, pos: int, hw: int | None = None) -> int:
        hw = self._list(LATEST_TIMESTAMP) if hw is None else hw
        report_data_loss(
            self.fail,
            f"topic {self.tp.topic!r} partition {self.tp.partition}: offsets "
            f"[{pos}, {self.range.end}) were planned but the partition now ends at "
            f"offset {hw} (it was truncated or recreated)",
        )
        return self.range.end
