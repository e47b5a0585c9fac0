"""One Spark task's writes: Arrow batches of rows → RecordBatch v2 batches
(`arrow_encode`) → Produce requests to each partition's leader. No Python
object per record.

Idempotent (a producer id from InitProducerId, a sequence per partition), so a
request retried after a lost answer is not written twice. One request per
leader is in flight at a time: the next Arrow batch is encoded while the last
one travels, and a partition's batches reach the leader in sequence order.

With a transactional id (the sink's exactly-once mode, txn_sink.py) the producer id
and epoch come from the transaction coordinator (InitProducerId with the id, which
fences an earlier producer with it), each partition is added to the transaction
(AddPartitionsToTxn) before its first batch is queued, and the batches carry the
transactional attribute: seglog's client TransactionManager does the coordinator's
part.

Kafka producer configs honoured (`kafka.<name>`): acks (default all),
enable.idempotence (default true), batch.size (default 512 KiB here: larger
batches are what makes a bulk write fast), max.request.size (default 4 MiB),
compression.type, buffer.memory (encoded bytes waiting for their leader, 32 MiB),
request.timeout.ms, delivery.timeout.ms, retry.backoff.ms.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import grpc
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from seglog.client.cluster import TopicPartition, call
from seglog.client.errors import KafkaError, KafkaTimeoutError, error_class, for_code
from seglog.client.group_coordinator import OffsetAndMetadata
from seglog.client.transaction_manager import (
    ConsumerGroupMetadata,
    PreparedTxnState,
    TransactionManager,
)
from seglog.proto import client_pb2 as pb
from seglog.proto import errors_pb2
from seglog.storage.compression import CompressionType, compress
from seglog.storage.record_batch import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    assemble_batch,
    increment_sequence,
)

from .arrow_encode import as_binary, encode_records, partitions_for_keys
from .options import SinkOptions
from .shared_metadata import shared_metadata

DEFAULT_BATCH_BYTES = 512 * 1024
DEFAULT_REQUEST_BYTES = 4 * 1024 * 1024
DEFAULT_BUFFER_BYTES = 32 * 1024 * 1024  # Kafka's buffer.memory default
_TRANSACTIONAL = 0x10  # the batch attribute of a transaction's records
_RECORD_OVERHEAD = 12  # length, attributes, deltas and lengths of a small record


@dataclass
class EncodedBatch:
    tp: TopicPartition
    data: bytes
    records: int


@dataclass
class _Request:
    node: int
    batches: list[EncodedBatch]
    future: Any
    sent_at: float


@dataclass
class _Pending:
    """Batches not yet acknowledged, per partition, in sequence order."""

    queue: dict[TopicPartition, list[EncodedBatch]] = field(default_factory=dict)

    def add(self, b: EncodedBatch) -> None:
        self.queue.setdefault(b.tp, []).append(b)

    def empty(self) -> bool:
        return not any(self.queue.values())


class BatchSender:
    def __init__(self, options: SinkOptions, transactional_id: str | None = None) -> None:
        cfg = options.producer_config
        self.options = options
        acks = str(cfg.get("acks", "all")).strip().lower()
        self.acks = -1 if acks in ("all", "-1") else int(acks)
        if self.acks not in (-1, 0, 1):
            raise ValueError(f"kafka.acks must be all, -1, 0 or 1, got {acks!r}")
        self.idempotent = bool(cfg.get("enable_idempotence", self.acks == -1))
        if self.idempotent and self.acks != -1:
            raise ValueError("kafka.enable.idempotence=true needs kafka.acks=all")
        self.batch_bytes = int(cfg.get("batch_size", DEFAULT_BATCH_BYTES)) or DEFAULT_BATCH_BYTES
        self.request_bytes = int(cfg.get("max_request_size", DEFAULT_REQUEST_BYTES))
        self.buffer_bytes = int(cfg.get("buffer_memory", DEFAULT_BUFFER_BYTES))
        self.codec = CompressionType.from_name(cfg.get("compression_type"))
        self.request_timeout_s = int(cfg.get("request_timeout_ms", 30_000)) / 1000
        self.delivery_timeout_s = int(cfg.get("delivery_timeout_ms", 120_000)) / 1000
        self.backoff_s = int(cfg.get("retry_backoff_ms", 100)) / 1000
        # Shared with the process's other tasks (and kept open after close()); the
        # producer id and sequences below are this task's own.
        self.metadata = shared_metadata(
            options.bootstrap_servers, int(cfg.get("request_timeout_ms", 30_000))
        )
        self.producer_id, self.producer_epoch = NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        self.sequences: dict[TopicPartition, int] = {}
        self.sticky: dict[str, int] = {}
        self.pending = _Pending()
        self.in_flight: dict[int, _Request] = {}
        self.sent = 0
        self._rng = random.Random()
        self.first_partition: TopicPartition | None = None  # of the first batch queued
        self.max_block_s = int(cfg.get("max_block_ms", 60_000)) / 1000
        self.txn: TransactionManager | None = None
        self.transactional_id = transactional_id
        if transactional_id is not None:
            if not self.idempotent:
                raise ValueError("a transactional write needs kafka.enable.idempotence=true")
            self.txn = TransactionManager(
                transactional_id,
                int(cfg.get("transaction_timeout_ms", 60_000)),
                self.metadata,
                self.request_timeout_s,
                self.backoff_s,
                self._set_producer,
            )

    def _set_producer(self, producer_id: int, producer_epoch: int) -> None:
        # A new id or epoch starts every partition's sequence at 0.
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self.sequences.clear()

    # --- transactions (a transactional id only) -------------------------------------

    def _transactions(self) -> TransactionManager:
        if self.txn is None:
            raise RuntimeError("this BatchSender has no transactional id")
        return self.txn

    def init_transactions(self) -> None:
        """Fences (and has the coordinator abort) an earlier producer with the id."""
        self._transactions().init_transactions(self.max_block_s)

    def begin_transaction(self) -> None:
        self._transactions().begin()

    def send_offsets_to_transaction(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], group_id: str
    ) -> None:
        self._transactions().send_offsets(
            offsets, ConsumerGroupMetadata(group_id), self.max_block_s
        )

    def prepare_transaction(self) -> PreparedTxnState:
        """Every batch acknowledged (a failure raises), the transaction left open."""
        return self._transactions().prepare(lambda: self._pump(block=True))

    def abort_transaction(self) -> None:
        """After a failure: what is in flight is answered first (so that nothing of
        this epoch lands after the ABORT marker), then EndTxn(abort)."""

        def settle() -> None:
            try:
                self._pump(block=True)
            except (KafkaError, RuntimeError, grpc.RpcError):
                self.pending.queue.clear()

        self._transactions().end(False, settle, self.max_block_s)

    # --- rows → batches ------------------------------------------------------------

    def write(self, batch: pa.RecordBatch) -> None:
        """Encode one Arrow batch of rows and start sending it."""
        n = batch.num_rows
        if n == 0:
            return
        names = batch.schema.names
        if self.options.topic is not None:
            self._write_topic(self.options.topic, batch, np.arange(n))
        else:
            topics = batch.column(names.index("topic"))
            if topics.null_count:
                raise ValueError("a row has a null topic and no topic option is set")
            encoded = pc.dictionary_encode(topics)
            codes = np.asarray(encoded.indices)
            for code, topic in enumerate(encoded.dictionary.to_pylist()):
                self._write_topic(topic, batch, np.flatnonzero(codes == code))
        # Bounded like the producer's buffer.memory: past it, wait for the leaders.
        queued = sum(len(b.data) for q in self.pending.queue.values() for b in q)
        self._pump(block=queued > self.buffer_bytes)

    def _partitions(self, topic: str) -> list[int]:
        parts = self.metadata.partitions_for(topic)
        if parts is None or self.metadata.stale():
            self.metadata.refresh([topic])
            parts = self.metadata.partitions_for(topic)
        if not parts:
            error = self.metadata.topic_error(topic)
            raise ValueError(f"cannot write to topic {topic!r}: {error or 'it does not exist'}")
        return sorted(parts)

    def _write_topic(self, topic: str, batch: pa.RecordBatch, rows: np.ndarray) -> None:
        names = batch.schema.names
        sub = batch.take(pa.array(rows)) if len(rows) != batch.num_rows else batch
        n = sub.num_rows
        keys = as_binary(sub.column(names.index("key")) if "key" in names else None, n)
        values = as_binary(sub.column(names.index("value")), n)
        ids = self._partitions(topic)
        # Keyed rows: murmur2 over all partition ids, as Kafka's partitioner; -1: no key.
        slot = partitions_for_keys(keys, len(ids))
        partition = np.where(slot >= 0, np.asarray(ids, np.int64)[np.maximum(slot, 0)], -1)
        if "partition" in names:
            given = sub.column(names.index("partition"))
            chosen = np.asarray(given.fill_null(-1), np.int64)
            unknown = set(np.unique(chosen[chosen >= 0]).tolist()) - set(ids)
            if unknown:
                raise ValueError(
                    f"partition {min(unknown)} does not exist in topic {topic!r} "
                    f"(it has partitions {ids})"
                )
            partition = np.where(chosen >= 0, chosen, partition)
        if (partition < 0).any():
            # Unkeyed rows: one partition per Arrow batch (Kafka's sticky partitioner
            # moves on when a batch is closed), a different one each time.
            current = self.sticky.get(topic)
            pool = [p for p in ids if p != current] or ids
            self.sticky[topic] = choice = self._rng.choice(pool)
            partition = np.where(partition < 0, choice, partition)
        headers = None
        if "headers" in names:
            column = sub.column(names.index("headers"))
            if pc.sum(pc.fill_null(pc.list_value_length(column), 0)).as_py():
                headers = [
                    [(h["key"], h["value"]) for h in row or ()] for row in column.to_pylist()
                ]
        order = np.argsort(partition, kind="stable")
        bounds = np.flatnonzero(np.diff(partition[order])) + 1
        for group in np.split(order, bounds):
            tp = TopicPartition(topic, int(partition[group[0]]))
            take = pa.array(group)
            self._encode(
                tp,
                keys.take(take),
                values.take(take),
                [headers[i] for i in group] if headers is not None else None,
            )

    def _encode(
        self, tp: TopicPartition, keys: pa.Array, values: pa.Array, headers: list | None
    ) -> None:
        if self.txn is not None:
            self.txn.add_partition(tp, self.max_block_s)  # before its first batch is queued
        if self.first_partition is None:
            self.first_partition = tp
        n = len(keys)
        size = (
            np.asarray(pc.fill_null(pc.binary_length(keys), 0), np.int64)
            + np.asarray(pc.fill_null(pc.binary_length(values), 0), np.int64)
            + _RECORD_OVERHEAD
        )
        batch_no = (np.cumsum(size) - size) // self.batch_bytes
        first = np.flatnonzero(np.diff(batch_no, prepend=-1))  # each batch's first row
        index = np.arange(n) - np.repeat(first, np.diff(np.append(first, n)))
        data, starts = encode_records(keys, values, index, headers)
        now = int(time.time() * 1000)
        for lo, hi in zip(first.tolist(), [*first[1:].tolist(), n], strict=True):
            count = hi - lo
            section = data[int(starts[lo]) : int(starts[hi])]
            seq = NO_SEQUENCE
            if self.idempotent:
                self._ensure_producer_id()
                seq = self.sequences.get(tp, 0)
                self.sequences[tp] = increment_sequence(seq, count)
            encoded = assemble_batch(
                compress(self.codec, section),
                base_offset=0,
                partition_leader_epoch=-1,
                attributes=int(self.codec) | (_TRANSACTIONAL if self.txn is not None else 0),
                last_offset_delta=count - 1,
                base_timestamp=now,
                max_timestamp=now,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                base_sequence=seq,
                records_count=count,
            )
            self.pending.add(EncodedBatch(tp, encoded, count))

    def _ensure_producer_id(self) -> None:
        if self.producer_id >= 0:
            return
        request = pb.InitProducerIdRequest(producer_id=-1, producer_epoch=-1)
        deadline = time.monotonic() + self.delivery_timeout_s
        while True:
            try:
                response = call(
                    self.metadata.any_stub().InitProducerId, request, self.request_timeout_s
                )
                if response.error_code:
                    raise for_code(response.error_code, response.error_message)
                break
            except KafkaError as e:
                if not e.retriable or time.monotonic() > deadline:
                    raise
                self.metadata.request_update()
                time.sleep(self.backoff_s)
        self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch

    # --- batches → leaders --------------------------------------------------------

    def _pump(self, block: bool) -> None:
        """Collect finished requests and send what is pending, one request per leader
        at a time; with `block`, until everything is acknowledged."""
        deadline = time.monotonic() + self.delivery_timeout_s
        while True:
            for node, r in list(self.in_flight.items()):
                if block or r.future.done():
                    del self.in_flight[node]
                    self._complete(r)
            self._send_pending()
            if not block or (not self.in_flight and self.pending.empty()):
                return
            if time.monotonic() > deadline:
                raise KafkaTimeoutError(
                    "records not delivered within kafka.delivery.timeout.ms "
                    f"({self.delivery_timeout_s * 1000:.0f} ms)"
                )
            if not self.in_flight:
                time.sleep(self.backoff_s)  # only retries are left: wait before them

    def _send_pending(self) -> None:
        by_node: dict[int, list[EncodedBatch]] = {}
        sizes: dict[int, int] = {}
        for tp, queue in self.pending.queue.items():
            if not queue:
                continue
            info = self.metadata.partition(tp)
            if info is None or info.leader < 0:
                self.metadata.refresh([tp.topic])
                info = self.metadata.partition(tp)
                if info is None or info.leader < 0:
                    continue
            if info.leader in self.in_flight:
                continue
            out = by_node.setdefault(info.leader, [])
            # A partition's batches go in order; the request stays under its size.
            while queue and (
                not out or sizes.get(info.leader, 0) + len(queue[0].data) <= self.request_bytes
            ):
                b = queue.pop(0)
                out.append(b)
                sizes[info.leader] = sizes.get(info.leader, 0) + len(b.data)
        for node, batches in by_node.items():
            request = pb.ProduceRequest(
                acks=self.acks,
                timeout_ms=int(self.request_timeout_s * 1000),
                # KIP-890: the leader verifies a transactional batch with this id.
                transactional_id=self.transactional_id or "",
            )
            topics: dict[str, pb.TopicProduceData] = {}
            per_tp: dict[TopicPartition, list[bytes]] = {}
            for b in batches:
                per_tp.setdefault(b.tp, []).append(b.data)
            for tp, datas in per_tp.items():
                t = topics.get(tp.topic)
                if t is None:
                    t = topics[tp.topic] = request.topics.add(name=tp.topic)
                t.partitions.add(partition=tp.partition, records=b"".join(datas))
            stub = self.metadata.stub_for(node)
            future = stub.Produce.future(request, timeout=self.request_timeout_s + 1.0)
            self.in_flight[node] = _Request(node, batches, future, time.monotonic())

    def _complete(self, r: _Request) -> None:
        try:
            response = call(lambda _q, timeout: r.future.result(), None, self.request_timeout_s)
        except (KafkaError, grpc.RpcError):
            self.metadata.request_update()
            self._retry(r.batches)
            return
        errors: dict[TopicPartition, tuple[str, str]] = {}
        for t in response.topics:
            for p in t.partitions:
                if p.error_code:
                    name = errors_pb2.ErrorCode.Name(p.error_code)
                    errors[TopicPartition(t.name, p.partition)] = (name, p.error_message)
        retry = []
        for b in r.batches:
            failure = errors.get(b.tp)
            if failure is None or failure[0] == "DUPLICATE_SEQUENCE_NUMBER":
                self.sent += b.records
                continue
            error = error_class(failure[0])(f"{b.tp.topic}-{b.tp.partition}: {failure[1]}")
            if not error.retriable:
                raise RuntimeError(f"writing to seglog failed: {error}") from error
            retry.append(b)
        if retry:
            self.metadata.request_update()
            self._retry(retry)

    def _retry(self, batches: list[EncodedBatch]) -> None:
        """Back to the head of their partitions' queues, in sequence order, after the
        retry backoff."""
        time.sleep(self.backoff_s)
        for tp in {b.tp for b in batches}:
            mine = [b for b in batches if b.tp == tp]
            self.pending.queue[tp] = mine + self.pending.queue.get(tp, [])

    def finish(self) -> int:
        try:
            self._pump(block=True)
        finally:
            self.close()
        return self.sent

    def close(self) -> None:
        for r in self.in_flight.values():
            r.future.cancel()
        self.in_flight.clear()


def send_arrow_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> int:
    sender = BatchSender(options)
    try:
        for batch in batches:
            sender.write(batch)
        return sender.finish()
    except BaseException:
        sender.close()
        raise
