"""What one Fetch response brought for one partition (Kafka's CompletedFetch): its
batches framed up front, decoded into ConsumerRecords only as the consumer drains them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from seglog.storage.errors import StorageError
from seglog.storage.record_batch import (
    BatchHeader,
    RecordFields,
    decode_record_fields,
    iter_batches,
)

from .cluster import TopicPartition
from .errors import KafkaError, error_class

CorruptMessageError = error_class("CORRUPT_MESSAGE")

Deserializer = Callable[[bytes | None], Any]


class ConsumerRecord(NamedTuple):
    """kafka-python's ConsumerRecord (same fields, same order)."""

    topic: str
    partition: int
    leader_epoch: int
    offset: int
    timestamp: int
    timestamp_type: int  # 0 CreateTime, 1 LogAppendTime
    key: Any
    value: Any
    headers: list[tuple[str, bytes | None]]
    checksum: int | None
    serialized_key_size: int  # -1 for a null key
    serialized_value_size: int  # -1 for a null value
    serialized_header_size: int  # -1 without headers


def record_maker(
    tp: TopicPartition, key_d: Deserializer | None, value_d: Deserializer | None
) -> Callable[[RecordFields, BatchHeader], ConsumerRecord]:
    """Builds the partition's ConsumerRecords from decoded records, deserialized."""
    topic, partition = tp.topic, tp.partition
    new = tuple.__new__  # ConsumerRecord's fields in order, without its __new__'s call

    def make(r: RecordFields, h: BatchHeader) -> ConsumerRecord:
        offset, timestamp, key, value, record_headers = r
        if record_headers:
            headers = [(hd.key, hd.value) for hd in record_headers]
            header_size = sum(
                len(k.encode()) + (len(v) if v is not None else 0) for k, v in headers
            )
        else:
            headers, header_size = [], -1
        return new(  # type: ignore[no-any-return]
            ConsumerRecord,
            (
                topic,
                partition,
                h.partition_leader_epoch,
                offset,
                timestamp,
                (h.attributes >> 3) & 1,  # the timestamp type, without its enum
                key_d(key) if key_d is not None else key,
                value_d(value) if value_d is not None else value,
                headers,
                None,
                len(key) if key is not None else -1,
                len(value) if value is not None else -1,
                header_size,
            ),
        )

    return make


def _is_abort_marker(data: bytes, pos: int) -> bool:
    """A control batch's record key is Kafka's ControlRecordType: int16 version, int16
    type (0 ABORT, 1 COMMIT)."""
    try:
        records = decode_record_fields(data, pos)
    except StorageError:
        return False  # a corrupt marker fails where the records are decoded
    key = records[0][2] if records else None
    return key is not None and len(key) >= 4 and int.from_bytes(key[2:4], "big") == 0


class FetchedBatches:
    """The records one partition got in one Fetch response, drained lazily.

    Batches are framed up front (cheap, no CRC) to know where the next fetch
    starts; each batch is CRC-checked and decoded only when the drain reaches
    it, so a corrupt batch fails at its own position, after the good ones.
    """

    def __init__(
        self,
        tp: TopicPartition,
        data: bytes,
        fetch_offset: int,
        aborted: list[tuple[int, int]] | None = None,
    ) -> None:
        self.tp = tp
        # read_committed: the aborted transactions (producer id, first offset) the
        # records overlap, by first offset; a producer's records are dropped from its
        # aborted transaction's first offset until its ABORT marker (Kafka's rule).
        self._aborted = sorted((first, pid) for pid, first in aborted or ())
        self._aborted_pids: set[int] = set()
        self.data = data
        self.fetch_offset = fetch_offset
        self.position = fetch_offset  # the next offset the application should see
        self.batches: list[tuple[int, BatchHeader]] = []
        self.framing_error: KafkaError | None = None
        try:
            for pos, header in iter_batches(data, validate=False):
                self.batches.append((pos, header))
        except StorageError as e:
            self.framing_error = self._corrupt(e)
        last = self.batches[-1][1].next_offset if self.batches else fetch_offset
        self.next_fetch_offset = max(fetch_offset, last)
        self._batch_index = 0
        self._current: BatchHeader | None = None
        self._records: list[RecordFields] = []
        self._record_index = 0

    @property
    def useful(self) -> bool:
        """False for a lone partial batch (it was cut by the size limits)."""
        return bool(self.batches) or self.framing_error is not None

    @property
    def done(self) -> bool:
        self._settle()
        return (
            self._current is None
            and self._batch_index >= len(self.batches)
            and (self.framing_error is None)
        )

    def _corrupt(self, e: Exception) -> KafkaError:
        return CorruptMessageError(
            f"{self.tp.topic}-{self.tp.partition} at or after offset {self.position}: {e}"
        )

    def _settle(self) -> None:
        """Step past a finished batch and over batches with nothing to hand out."""
        if self._current is not None and self._record_index >= len(self._records):
            # Compaction may leave the batch's last offset beyond its last record.
            self.position = max(self.position, self._current.next_offset)
            self._current, self._records, self._record_index = None, [], 0
        while self._current is None and self._batch_index < len(self.batches):
            pos, header = self.batches[self._batch_index]
            if not (self._skipped(pos, header) or header.next_offset <= self.position):
                break
            self.position = max(self.position, header.next_offset)
            self._batch_index += 1

    def _skipped(self, pos: int, header: BatchHeader) -> bool:
        """A control batch, or a batch of an aborted transaction (read_committed)."""
        while self._aborted and self._aborted[0][0] <= header.last_offset:
            self._aborted_pids.add(self._aborted.pop(0)[1])
        if not self._aborted_pids:
            return header.is_control
        pid = header.producer_id
        if header.is_control:
            if pid in self._aborted_pids and _is_abort_marker(self.data, pos):
                self._aborted_pids.discard(pid)
            return True
        return header.is_transactional and pid in self._aborted_pids

    def take(
        self, limit: int, make: Callable[[RecordFields, BatchHeader], ConsumerRecord]
    ) -> tuple[list[ConsumerRecord], KafkaError | None]:
        """Up to `limit` records at or past `position`. On a failure (corrupt batch,
        deserializer error) the records before it are returned with the error and
        the position stays at the failing record, so the failure recurs next time."""
        out: list[ConsumerRecord] = []
        try:
            while True:
                self._settle()
                if len(out) >= limit:
                    break
                current = self._current
                if current is not None:
                    # The rest of the decoded batch, within the limit, in one tight loop;
                    # its state is written back even when a deserializer raises.
                    records = self._records
                    i, position = self._record_index, self.position
                    end = min(len(records), i + limit - len(out))
                    try:
                        while i < end:
                            record = records[i]
                            if record[0] >= position:
                                out.append(make(record, current))
                                position = record[0] + 1
                            i += 1
                    finally:
                        self._record_index, self.position = i, position
                    continue
                if self._batch_index >= len(self.batches):
                    if self.framing_error is not None:
                        return out, self.framing_error
                    break
                pos, header = self.batches[self._batch_index]
                try:
                    decoded = decode_record_fields(self.data, pos)  # checks the CRC first
                except StorageError as e:
                    return out, self._corrupt(e)
                self._batch_index += 1
                self._current, self._records, self._record_index = header, decoded, 0
        except KafkaError as e:
            return out, e
        except Exception as e:  # noqa: BLE001 - a deserializer's own failure
            error = KafkaError(
                f"cannot deserialize {self.tp.topic}-{self.tp.partition} offset "
                f"{self._records[self._record_index][0]}: {e!r}"
            )
            error.__cause__ = e
            return out, error
        return out, None
