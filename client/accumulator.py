"""The producer's record accumulator: per-partition queues of open batches,
bounded by `buffer_memory`, handed to the sender once full or lingered.

Application threads append; the sender thread drains. A record is encoded into
its batch's records section as it is appended (the per-record work is that and a
light future handle); the batch header is framed around the section only when
drained, because the producer id, epoch and sequence go into it and are known only
then (Kafka closes a batch at drain time for the same reason).
"""

from __future__ import annotations

import functools
import threading
import time
from collections import deque
from collections.abc import Container, Sequence
from typing import NamedTuple

from seglog.storage.compression import CompressionType, compress
from seglog.storage.record_batch import (
    HEADER_SIZE,
    NO_PARTITION_LEADER_EPOCH,
    assemble_batch,
)
from seglog.storage.varint import encode_varint

from .cluster import TopicPartition
from .errors import IllegalStateError, KafkaError, KafkaTimeoutError
from .future import BatchOutcome, FutureRecordMetadata

# Worst-case varint sizes of a record's framing: length(5) attributes(1)
# timestampDelta(10) offsetDelta(5) keyLength(5) valueLength(5) headerCount(5).
_RECORD_OVERHEAD = 36
_HEADER_OVERHEAD = 10  # key length + value length varints


def estimate_record_size(
    key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]]
) -> int:
    """An upper bound of the record's encoded size inside an uncompressed batch."""
    size = _RECORD_OVERHEAD + (len(key) if key else 0) + (len(value) if value else 0)
    for hkey, hvalue in headers:
        size += _HEADER_OVERHEAD + len(hkey.encode("utf-8")) + (len(hvalue) if hvalue else 0)
    return size


def _varint_bytes(n: int) -> bytes:
    out = bytearray()
    encode_varint(n, out)
    return bytes(out)


# The zig-zag varints of 0 .. 2^14-1 (one or two bytes): a record's deltas and the
# lengths of records up to 16 KiB are looked up instead of encoded, call-free.
_SMALL = 1 << 14
_VARINTS = tuple(_varint_bytes(n) for n in range(_SMALL))


def _append_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]],
) -> None:
    """Append one v2 record to a batch's records section, copying the value once."""
    small, varints = _SMALL, _VARINTS
    head = bytearray(b"\x00")  # attributes
    head += (
        varints[timestamp_delta] if 0 <= timestamp_delta < small else _varint_bytes(timestamp_delta)
    )
    head += varints[offset_delta] if offset_delta < small else _varint_bytes(offset_delta)
    if key is None:
        head.append(0x01)  # zig-zag -1: null
    else:
        n = len(key)
        head += varints[n] if n < small else _varint_bytes(n)
        head += key
    if value is None:
        head.append(0x01)
        value_len = 0
    else:
        value_len = len(value)
        head += varints[value_len] if value_len < small else _varint_bytes(value_len)
    tail: bytes | bytearray
    if headers:
        tail = bytearray()
        encode_varint(len(headers), tail)
        for hkey, hvalue in headers:
            k = hkey.encode("utf-8")
            encode_varint(len(k), tail)
            tail += k
            if hvalue is None:
                tail.append(0x01)
            else:
                encode_varint(len(hvalue), tail)
                tail += hvalue
    else:
        tail = _NO_HEADERS
    size = len(head) + value_len + len(tail)
    out += varints[size] if size < small else _varint_bytes(size)
    out += head
    if value is not None:
        out += value
    out += tail


_NO_HEADERS = b"\x00"  # header count 0

# A record as send() hands it over: (timestamp ms, key, value, headers).
Rec = tuple[int, bytes | None, bytes | None, Sequence[tuple[str, bytes | None]]]


TRANSACTIONAL_BIT = 0x10


class ProducerBatch:
    """Records bound for one partition, sent (and retried) as one RecordBatch.

    Each record is encoded into `body` (the batch's records section) as it is
    appended: per record, that is the only work besides a light future handle. The
    header (producer id, epoch, sequence, CRC) is framed around it when drained."""

    __slots__ = (
        "tp",
        "created",
        "body",
        "count",
        "base_timestamp",
        "max_timestamp",
        "outcome",
        "size",
        "reserved",
        "closed",
        "solo",
    )

    def __init__(self, tp: TopicPartition, created: float) -> None:
        self.tp = tp
        self.created = created  # monotonic seconds: linger and delivery timeout start here
        self.body = bytearray()
        self.count = 0
        self.base_timestamp = -1
        self.max_timestamp = -1
        # The records' shared result: one lock, latch and callback list per batch.
        self.outcome = BatchOutcome(tp)
        self.size = HEADER_SIZE  # estimated encoded bytes
        self.reserved = 0  # buffer-memory bytes to give back when done
        self.closed = False  # no more appends
        self.solo = False  # must be sent alone (after a split)

    @property
    def record_count(self) -> int:
        return self.count

    @property
    def done(self) -> bool:
        return self.outcome.done

    @property
    def latch(self) -> threading.Event:
        return self.outcome.latch

    def try_append(
        self, record: Rec, size: int, batch_size: int, sizes: tuple[int, int, int]
    ) -> FutureRecordMetadata | None:
        # The first record always fits: a record larger than batch_size gets a batch alone.
        count = self.count
        if self.closed or (count and self.size + size > batch_size):
            return None
        ts, key, value, headers = record
        if count == 0:
            self.base_timestamp = self.max_timestamp = ts
        elif ts > self.max_timestamp:
            self.max_timestamp = ts
        _append_record(self.body, count, ts - self.base_timestamp, key, value, headers)
        self.count = count + 1
        self.size += size
        return FutureRecordMetadata(self.outcome, count, ts, *sizes)

    def encode(
        self,
        compression: CompressionType,
        producer_id: int,
        producer_epoch: int,
        base_sequence: int,
        transactional: bool = False,
    ) -> bytes:
        """The batch's bytes under the given producer id and sequence; `transactional`
        sets the attribute bit of a transactional producer's batch (docs/transactions.md)."""
        if not self.count:
            raise ValueError("a batch needs at least one record")
        body = bytes(self.body)  # one copy, from which the header's CRC is computed
        return assemble_batch(
            compress(compression, body),
            base_offset=0,
            partition_leader_epoch=NO_PARTITION_LEADER_EPOCH,
            # CreateTime, not control; bit 4: transactional
            attributes=int(compression) | (TRANSACTIONAL_BIT if transactional else 0),
            last_offset_delta=self.count - 1,
            base_timestamp=self.base_timestamp,
            max_timestamp=self.max_timestamp,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            records_count=self.count,
        )

    def complete(self, base_offset: int, log_append_time: int, log_start_offset: int) -> None:
        """Resolve every record: offsets base_offset + i, or -1 (acks=0 / unknown)."""
        assert not self.outcome.done, f"batch for {self.tp} completed twice"
        self.outcome.resolve(base_offset, log_append_time, log_start_offset)

    def fail(self, exception: BaseException) -> None:
        assert not self.outcome.done, f"batch for {self.tp} completed twice"
        self.outcome.fail(exception)


class AppendResult(NamedTuple):
    future: FutureRecordMetadata | None  # None: aborted, see `aborted`
    batch_full: bool  # a batch became sendable: wake the sender
    new_batch: bool  # a batch was started: the sender must time its linger
    aborted: bool  # abort_on_new_batch was set and a new batch was needed


# tuple.__new__ skips the NamedTuple's generated __new__ (a Python call per record).
_new_result = functools.partial(tuple.__new__, AppendResult)
_ABORTED = AppendResult(None, False, False, True)


class RecordAccumulator:
    def __init__(self, *, batch_size: int, linger_ms: int, buffer_memory: int) -> None:
        self.batch_size = batch_size
        self.linger_s = linger_ms / 1000
        self.buffer_memory = buffer_memory
        self._lock = threading.Lock()
        self._batches: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._incomplete: set[ProducerBatch] = set()
        self._flushes = 0
        self._closed = False
        self._memory_lock = threading.Lock()
        self._memory = threading.Condition(self._memory_lock)
        self._available = buffer_memory

    # --- buffer memory -------------------------------------------------------------

    def reserve(self, size: int, timeout_s: float) -> None:
        """Take `size` bytes of buffer memory, waiting up to `timeout_s` for the sender
        to free some; KafkaTimeoutError when it does not."""
        if size > self.buffer_memory:
            raise ValueError(f"{size} bytes can never fit in buffer_memory {self.buffer_memory}")
        with self._memory_lock:  # the common case, without the Condition's Python layer
            if self._available >= size and not self._closed:
                self._available -= size
                return
        with self._memory:
            if not self._memory.wait_for(
                lambda: self._available >= size or self._closed, max(timeout_s, 0)
            ):
                raise KafkaTimeoutError(
                    f"failed to allocate {size} bytes of buffer memory within the remaining "
                    f"max_block_ms ({self._available} of {self.buffer_memory} bytes free)"
                )
            if self._closed:
                raise IllegalStateError("producer is closed")
            self._available -= size

    def release(self, size: int) -> None:
        if size <= 0:
            return
        with self._memory:
            self._available += size
            assert self._available <= self.buffer_memory, "buffer memory released twice"
            self._memory.notify_all()

    @property
    def available_memory(self) -> int:
        return self._available

    # --- application threads ---------------------------------------------------------

    def append(
        self,
        tp: TopicPartition,
        record: Rec,
        size: int,
        reserved: int,
        sizes: tuple[int, int, int],
        now: float,
        abort_on_new_batch: bool = False,
    ) -> AppendResult:
        """Add a record to the partition's open batch, or start one. `reserved` bytes
        of buffer memory move to the batch (not taken when aborted)."""
        with self._lock:
            if self._closed:
                raise IllegalStateError("producer is closed")
            dq = self._batches.get(tp)
            if dq is None:
                dq = self._batches[tp] = deque()
            last = dq[-1] if dq else None
            if last is not None:
                future = last.try_append(record, size, self.batch_size, sizes)
                if future is not None:
                    last.reserved += reserved
                    full = last.size >= self.batch_size
                    last.closed |= full
                    return _new_result((future, full, False, False))
            if abort_on_new_batch:
                return _ABORTED
            closed_last = last is not None and not last.closed
            if last is not None:
                last.closed = True
            batch = ProducerBatch(tp, now)
            future = batch.try_append(record, size, self.batch_size, sizes)
            assert future is not None
            batch.reserved = reserved
            batch.closed = batch.size >= self.batch_size
            dq.append(batch)
            self._incomplete.add(batch)
            return _new_result((future, closed_last or batch.closed, True, False))

    # --- the sender thread -------------------------------------------------------------

    def _sendable(self, batch: ProducerBatch, dq_len: int, now: float) -> bool:
        return (
            batch.closed
            or dq_len > 1
            or now - batch.created >= self.linger_s
            or self._flushes > 0
            or self._closed
        )

    def ready(
        self, now: float, blocked: Container[TopicPartition]
    ) -> tuple[list[TopicPartition], list[TopicPartition], float | None]:
        """Partitions whose first batch may be sent now; partitions whose first batch
        still lingers; and the seconds until the next lingering batch becomes sendable
        (None: no lingering batch)."""
        ready: list[TopicPartition] = []
        lingering: list[TopicPartition] = []
        next_delay: float | None = None
        with self._lock:
            for tp, dq in self._batches.items():
                if not dq or tp in blocked:
                    continue
                head = dq[0]
                if self._sendable(head, len(dq), now):
                    ready.append(tp)
                else:
                    lingering.append(tp)
                    wait = self.linger_s - (now - head.created)
                    next_delay = wait if next_delay is None else min(next_delay, wait)
        return ready, lingering, next_delay

    def drain(
        self,
        tp: TopicPartition,
        now: float,
        max_bytes: int,
        max_batches: int,
        first: bool,
        early: bool = False,
    ) -> list[ProducerBatch]:
        """Close and take up to `max_batches` sendable batches from the head of the
        partition's queue, about `max_bytes` in all (one at least when `first`).
        `early`: the head batch goes even if it still lingers (it rides along in a
        request the node gets anyway)."""
        out: list[ProducerBatch] = []
        total = 0
        with self._lock:
            dq = self._batches.get(tp)
            while dq and len(out) < max_batches:
                batch = dq[0]
                if not (early and not out) and not self._sendable(batch, len(dq), now):
                    break
                if out and (batch.solo or out[0].solo):
                    break
                if total + batch.size > max_bytes and (out or not first):
                    break
                batch.closed = True
                dq.popleft()
                out.append(batch)
                total += batch.size
        return out

    def reenqueue(self, tp: TopicPartition, batches: Sequence[ProducerBatch]) -> None:
        """Put unsent batches back at the head, in order (they go before newer ones)."""
        with self._lock:
            dq = self._batches.setdefault(tp, deque())
            for batch in reversed(batches):
                batch.closed = True
                dq.appendleft(batch)

    def expire(self, now: float, delivery_timeout_s: float) -> list[ProducerBatch]:
        """Remove queued batches older than the delivery timeout (oldest first)."""
        expired: list[ProducerBatch] = []
        with self._lock:
            for dq in self._batches.values():
                while dq and now - dq[0].created >= delivery_timeout_s:
                    expired.append(dq.popleft())
        return expired

    def take_all(self) -> list[ProducerBatch]:
        """Every queued batch, removed (to abort them)."""
        with self._lock:
            batches = [b for dq in self._batches.values() for b in dq]
            for dq in self._batches.values():
                dq.clear()
        return batches

    def deallocate(self, batch: ProducerBatch) -> None:
        """A batch is done (its futures resolved): free its memory, end its tracking."""
        assert batch.done
        with self._lock:
            self._incomplete.discard(batch)
        self.release(batch.reserved)
        batch.reserved = 0

    def has_undrained(self) -> bool:
        with self._lock:
            return any(self._batches.values())

    def has_incomplete(self) -> bool:
        with self._lock:
            return bool(self._incomplete)

    def queued_records(self) -> int:
        with self._lock:
            return sum(b.record_count for dq in self._batches.values() for b in dq)

    # --- flush and close -------------------------------------------------------------

    def begin_flush(self) -> None:
        with self._lock:
            self._flushes += 1

    def end_flush(self) -> None:
        with self._lock:
            self._flushes -= 1
            assert self._flushes >= 0

    def await_flush_completion(self, timeout_s: float | None) -> None:
        """Wait until every batch that existed when called is done."""
        with self._lock:
            pending = list(self._incomplete)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        for batch in pending:
            remaining = None if deadline is None else max(deadline - time.monotonic(), 0)
            if not batch.latch.wait(remaining):
                raise KafkaTimeoutError(f"flush did not complete within {timeout_s}s")

    def close(self) -> None:
        """No more appends; every queued batch becomes sendable at once."""
        with self._lock:
            self._closed = True
        with self._memory:
            self._memory.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed


def abort_error(reason: str) -> KafkaError:
    return KafkaError(f"producer closed before the record was delivered: {reason}")
