"""A Kafka-style producer over gRPC, shaped like kafka-python's KafkaProducer.

`send()` partitions and queues a record in the accumulator and returns a future;
a background sender thread packs every sendable partition led by one node into a
single Produce request (up to `max_request_size`), keeps up to
`max_in_flight_requests_per_connection` requests in flight per node, and retries
retriable failures until `delivery_timeout_ms`.

Ordering. gRPC gives no order between concurrent calls (a node runs them on a
thread pool), so the sender never has two requests in flight for one partition;
instead one request may carry up to five consecutive batches of a partition (a
Kafka leader appends them atomically, and five is the leader's deduplication
window). A failed request of a partition is retried, with the very same bytes,
before anything newer of that partition is sent.

Idempotence (Kafka 3.x defaults and rules). `acks` defaults to 'all' and
idempotence is on unless a setting conflicts with it: acks other than 'all',
retries=0 or more than 5 requests in flight. Such a setting silently disables
idempotence when `enable_idempotence` was left at its default (None), and is a
KafkaConfigurationError when `enable_idempotence=True` was passed explicitly.
The producer id comes from InitProducerId before the first batch; sequences are
assigned per partition when a batch is closed for sending and wrap at 2^31-1.
When a sequenced batch fails for good with an outcome the node may have applied
(delivery timeout after an unanswered attempt) or with a sequence-state error
(OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, UNKNOWN_PRODUCER_ID), its
futures fail and the producer takes a fresh producer id, so later sends work.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import grpc

from seglog.proto import client_pb2 as pb
from seglog.proto import errors_pb2
from seglog.storage.compression import CompressionType
from seglog.storage.record_batch import (
    HEADER_SIZE,
    increment_sequence,
)

from .accumulator import ProducerBatch, RecordAccumulator, abort_error, estimate_record_size
from .cluster import (
    AUTHENTICATION_ERRORS,
    FATAL_ERRORS,
    ClusterMetadata,
    Connections,
    PartitionInfo,
    TopicPartition,
    call,
)
from .errors import (
    IllegalStateError,
    KafkaConfigurationError,
    KafkaError,
    KafkaTimeoutError,
    NodeNotReadyError,
    error_class,
    for_code,
)
from .future import FutureRecordMetadata, failed_future
from .partitioner import Partitioner, as_partitioner
from .security import ClientSecurity

_log = logging.getLogger(__name__)
E = errors_pb2.ErrorCode

MessageTooLargeError = error_class("MESSAGE_TOO_LARGE")
# A leader's idempotence window: a retried request may hold at most this many
# batches of a partition, or its first batch could have left the window.
MAX_BATCHES_PER_PARTITION_REQUEST = 5
MAX_IN_FLIGHT_FOR_IDEMPOTENCE = 5
# Errors after which the node may have appended the data (no answer, or an
# answer that says "written, but not as acknowledged as you asked").
_OUTCOME_UNKNOWN = {
    E.REQUEST_TIMED_OUT,
    E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    E.KAFKA_STORAGE_ERROR,
    E.UNKNOWN_SERVER_ERROR,
}
# The node's producer state disagrees with ours: only a new producer id helps.
_SEQUENCE_STATE = {
    "OUT_OF_ORDER_SEQUENCE_NUMBER",
    "INVALID_PRODUCER_EPOCH",
    "UNKNOWN_PRODUCER_ID",
}
_TOO_LARGE = {"MESSAGE_TOO_LARGE", "RECORD_LIST_TOO_LARGE"}

Serializer = Callable[[Any], bytes | None]


class _GrpcFuture(Protocol):
    def add_done_callback(self, fn: Callable[[Any], None]) -> None: ...
    def result(self, timeout: float | None = None) -> Any: ...
    def cancel(self) -> bool: ...


@dataclass(eq=False)
class PartitionSend:
    """The consecutive batches of one partition that travel in one request, with
    their encoded bytes: a retry resends exactly these bytes."""

    tp: TopicPartition
    batches: list[ProducerBatch]
    data: bytes
    producer_id: int
    producer_epoch: int
    base_sequence: int
    deadline: float  # monotonic: the oldest batch's creation + delivery timeout
    attempts: int = 0
    retry_at: float = 0.0
    # Some attempt ended without a clear "not written" (timeout, lost response).
    maybe_written: bool = False

    @property
    def record_count(self) -> int:
        return sum(b.record_count for b in self.batches)


@dataclass(eq=False)
class InFlightRequest:
    node_id: int
    sends: dict[TopicPartition, PartitionSend]
    future: _GrpcFuture | None = None
    sent_at: float = field(default_factory=time.monotonic)


class Producer:
    """`Producer(bootstrap_servers, acks='all', ...)`; see the module docstring.

    Parameters carry Kafka's producer config names in kafka-python's spelling and
    Kafka 3.x defaults. Extra: `allow_auto_create_topics` (Kafka's
    allow.auto.create.topics, default True: the node may create a topic on
    first use when its auto.create.topics.enable allows it).
    """

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] = "127.0.0.1:9192",
        *,
        acks: int | str = "all",
        linger_ms: int = 5,
        batch_size: int = 16384,
        max_request_size: int = 1048576,
        compression_type: str | None = None,
        enable_idempotence: bool | None = None,
        retries: int = 2147483647,
        retry_backoff_ms: int = 100,
        request_timeout_ms: int = 30000,
        delivery_timeout_ms: int = 120000,
        max_in_flight_requests_per_connection: int = 5,
        buffer_memory: int = 33554432,
        max_block_ms: int = 60000,
        partitioner: object = None,
        key_serializer: Serializer | None = None,
        value_serializer: Serializer | None = None,
        allow_auto_create_topics: bool = True,
        metadata_max_age_ms: int = 300000,
        **security: str | None,
    ) -> None:
        client_security = ClientSecurity.from_options(security)
        self.acks = _parse_acks(acks)
        _check_int("linger_ms", linger_ms, 0)
        _check_int("batch_size", batch_size, 0)
        _check_int("max_request_size", max_request_size, HEADER_SIZE + 1)
        _check_int("retries", retries, 0)
        _check_int("retry_backoff_ms", retry_backoff_ms, 0)
        _check_int("request_timeout_ms", request_timeout_ms, 1)
        _check_int("delivery_timeout_ms", delivery_timeout_ms, 1)
        _check_int(
            "max_in_flight_requests_per_connection", max_in_flight_requests_per_connection, 1
        )
        _check_int("buffer_memory", buffer_memory, 1)
        _check_int("max_block_ms", max_block_ms, 0)
        _check_int("metadata_max_age_ms", metadata_max_age_ms, 0)
        if delivery_timeout_ms < linger_ms + request_timeout_ms:
            raise KafkaConfigurationError(
                f"delivery_timeout_ms ({delivery_timeout_ms}) must be at least linger_ms + "
                f"request_timeout_ms ({linger_ms} + {request_timeout_ms})"
            )
        try:
            self.compression = CompressionType.from_name(compression_type)
        except ValueError as e:
            raise KafkaConfigurationError(str(e)) from None
        for name, fn in (
            ("key_serializer", key_serializer),
            ("value_serializer", value_serializer),
        ):
            if fn is not None and not callable(fn):
                raise KafkaConfigurationError(f"{name} must be callable, got {fn!r}")
        self.idempotent = _resolve_idempotence(
            enable_idempotence, self.acks, retries, max_in_flight_requests_per_connection
        )
        self.linger_ms = linger_ms
        self.batch_size = batch_size
        self.max_request_size = max_request_size
        self.retries = retries
        self.retry_backoff_s = retry_backoff_ms / 1000
        self.request_timeout_ms = request_timeout_ms
        self.delivery_timeout_s = delivery_timeout_ms / 1000
        self.max_in_flight = max_in_flight_requests_per_connection
        self.buffer_memory = buffer_memory
        self.max_block_s = max_block_ms / 1000
        self.allow_auto_create_topics = allow_auto_create_topics
        self._key_serializer = key_serializer
        self._value_serializer = value_serializer
        self._partitioner: Partitioner = as_partitioner(partitioner)
        self._on_new_batch = getattr(self._partitioner, "on_new_batch", None)

        self._metadata = ClusterMetadata(
            bootstrap_servers,
            Connections(client_security),
            request_timeout_ms=request_timeout_ms,
            metadata_max_age_ms=metadata_max_age_ms,
        )
        self._topics: set[str] = set()
        self._topics_lock = threading.Lock()
        self._metadata_wait_lock = threading.Lock()
        # Bumped after every refresh this producer makes; send() caches per topic.
        self._metadata_version = 0
        self._topic_cache: dict[str, _TopicInfo] = {}
        self._accumulator = RecordAccumulator(
            batch_size=batch_size, linger_ms=linger_ms, buffer_memory=buffer_memory
        )
        self._closed = False
        self._close_lock = threading.Lock()
        self._sender = Sender(self)
        self._sender.start()

    # --- sending -----------------------------------------------------------------------

    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> FutureRecordMetadata:
        """Queue one record; the future resolves to its RecordMetadata once the node
        acknowledged it (acks=1/all) or it was sent (acks=0, offset -1).

        Blocks up to max_block_ms for the topic's metadata and for buffer memory, then
        raises KafkaTimeoutError. A record too large for max_request_size or
        buffer_memory yields a failed future (MessageTooLargeError).
        """
        if self._closed:
            raise IllegalStateError("cannot send after the producer is closed")
        if not isinstance(topic, str) or not topic:
            raise ValueError(f"topic must be a non-empty str, got {topic!r}")
        if partition is not None and (not isinstance(partition, int) or partition < 0):
            raise ValueError(f"partition must be a non-negative int, got {partition!r}")
        if timestamp_ms is None:
            timestamp_ms = int(time.time() * 1000)
        elif not isinstance(timestamp_ms, int) or timestamp_ms < 0:
            raise ValueError(f"timestamp_ms must be a non-negative int, got {timestamp_ms!r}")
        # The common shapes (bytes or None, no serializer, no headers) without calls.
        key_bytes = (
            key
            if key is None or (type(key) is bytes and self._key_serializer is None)
            else _serialize("key", key, self._key_serializer)
        )
        value_bytes = (
            value
            if value is None or (type(value) is bytes and self._value_serializer is None)
            else _serialize("value", value, self._value_serializer)
        )
        header_list = _check_headers(headers) if headers else ()

        deadline = time.monotonic() + self.max_block_s
        info = self._topic_cache.get(topic)
        if info is None or info.version != self._metadata_version or partition is not None:
            info = self._topic_info(topic, partition, deadline)
        ids, available = info.ids, info.available
        chosen = partition
        if chosen is None:
            chosen = self._choose(topic, key_bytes, ids, available)

        size = estimate_record_size(key_bytes, value_bytes, header_list)
        if size + HEADER_SIZE > self.max_request_size or size > self.buffer_memory:
            return failed_future(
                MessageTooLargeError(
                    f"the record is about {size + HEADER_SIZE} bytes serialized, larger than "
                    f"max_request_size {self.max_request_size} or buffer_memory "
                    f"{self.buffer_memory}"
                )
            )
        self._accumulator.reserve(size, deadline - time.monotonic())
        sizes = (
            len(key_bytes) if key_bytes is not None else -1,
            len(value_bytes) if value_bytes is not None else -1,
            _header_size(header_list) if header_list else -1,
        )
        record = (timestamp_ms, key_bytes, value_bytes, header_list)
        sticky = partition is None and key_bytes is None and self._on_new_batch is not None
        try:
            now = time.monotonic()
            result = self._accumulator.append(
                info.tps[chosen], record, size, size, sizes, now, sticky
            )
            if result.aborted:
                # KIP-480: an unkeyed record would open a batch; let the partitioner move on.
                assert self._on_new_batch is not None
                self._on_new_batch(topic, chosen, ids, available)
                chosen = self._choose(topic, key_bytes, ids, available)
                result = self._accumulator.append(info.tps[chosen], record, size, size, sizes, now)
        except BaseException:
            self._accumulator.release(size)
            raise
        if result.batch_full or result.new_batch:
            self._sender.wakeup()
        assert result.future is not None
        return result.future

    def _choose(self, topic: str, key: bytes | None, ids: list[int], available: list[int]) -> int:
        chosen = self._partitioner.partition(topic, key, ids, available)
        if chosen not in ids:
            raise ValueError(f"partitioner chose partition {chosen!r}, not one of {ids}")
        return chosen

    def flush(self, timeout: float | None = None) -> None:
        """Send everything queued now, and wait until each of those records has a
        result (success or failure). KafkaTimeoutError after `timeout` seconds."""
        if self._closed and not self._sender.is_alive():
            return
        self._accumulator.begin_flush()
        self._sender.wakeup()
        try:
            self._accumulator.await_flush_completion(timeout)
        finally:
            self._accumulator.end_flush()

    def close(self, timeout: float | None = None) -> None:
        """Stop accepting records, deliver the queued ones, stop the sender. After
        `timeout` seconds, records still undelivered fail and close returns."""
        if threading.current_thread() is self._sender:
            # From a callback: the sender cannot wait for itself (Kafka: close(0)).
            self._closed = True
            self._accumulator.close()
            self._sender.force_close()
            return
        with self._close_lock:
            if self._closed and not self._sender.is_alive():
                self._metadata.close()
                return
            self._closed = True
            self._accumulator.close()
            self._sender.initiate_close()
            self._sender.join(timeout)
            if self._sender.is_alive():
                _log.warning("producer close timed out after %ss; aborting the rest", timeout)
                self._sender.force_close()
                # The sender may be inside one blocking call (metadata, InitProducerId).
                self._sender.join(self.request_timeout_ms / 1000 + 5)
            self._metadata.close()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- metadata ----------------------------------------------------------------------

    def partitions_for(self, topic: str) -> set[int]:
        """The topic's partition ids (waits up to max_block_ms for its metadata)."""
        return set(self._wait_on_metadata(topic, None, time.monotonic() + self.max_block_s))

    def _topic_info(self, topic: str, partition: int | None, deadline: float) -> _TopicInfo:
        """The topic's partitions as send() needs them, cached until the next refresh."""
        info = self._topic_cache.get(topic)
        version = self._metadata_version  # read before the metadata it tags
        if info is None or info.version != version:
            if info is None:
                with self._topics_lock:
                    self._topics.add(topic)  # the sender keeps its metadata fresh
            parts = self._metadata.partitions_for(topic)
            if not parts or (partition is not None and partition not in parts):
                parts = self._wait_on_metadata(topic, partition, deadline)
            info = _TopicInfo(version, parts)
            self._topic_cache[topic] = info
        if partition is not None and partition not in info.tps:
            self._metadata_version += 1  # a stale view: look again
            return self._topic_info(topic, partition, deadline)
        return info

    def _metadata_refreshed(self) -> None:
        self._metadata_version += 1

    def _topics_snapshot(self) -> list[str]:
        with self._topics_lock:
            return sorted(self._topics)

    def _wait_on_metadata(
        self, topic: str, partition: int | None, deadline: float
    ) -> dict[int, PartitionInfo]:
        parts = self._metadata.partitions_for(topic)
        if parts and (partition is None or partition in parts):
            return parts
        with self._topics_lock:
            self._topics.add(topic)
        last_error: KafkaError | None = None
        while True:
            remaining = deadline - time.monotonic()
            # One thread refreshes at a time; the others find its result.
            if self._metadata_wait_lock.acquire(timeout=max(remaining, 0)):
                try:
                    parts = self._metadata.partitions_for(topic)
                    if not parts or (partition is not None and partition not in parts):
                        self._metadata.refresh(
                            self._topics_snapshot(),
                            allow_auto_topic_creation=self.allow_auto_create_topics,
                        )
                        self._metadata_refreshed()
                except FATAL_ERRORS:
                    raise  # a wrong password or address does not get better by waiting
                except KafkaError as e:
                    last_error = e
                finally:
                    self._metadata_wait_lock.release()
            parts = self._metadata.partitions_for(topic)
            if parts and (partition is None or partition in parts):
                return parts
            topic_error = self._metadata.topic_error(topic)
            if topic_error is not None and not topic_error.retriable:
                raise topic_error
            last_error = topic_error or last_error
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                what = (
                    f"partition {partition} of topic {topic!r} (it has {len(parts)})"
                    if parts
                    else f"topic {topic!r}"
                )
                raise KafkaTimeoutError(
                    f"{what} not present in metadata after {self.max_block_s * 1000:.0f} ms"
                    + (f"; last error: {last_error}" if last_error else "")
                )
            time.sleep(min(self.retry_backoff_s or 0.05, remaining))

    # --- introspection -----------------------------------------------------------------

    def metrics(self) -> dict[str, float]:
        m = dict(self._sender.counters)
        m["buffer_available_bytes"] = self._accumulator.available_memory
        m["buffer_total_bytes"] = self.buffer_memory
        m["records_queued"] = self._accumulator.queued_records()
        m["requests_in_flight"] = self._sender.in_flight_count()
        m["producer_id"] = self._sender.producer_id
        return m

    @property
    def closed(self) -> bool:
        return self._closed


class Sender(threading.Thread):
    """The producer's I/O thread. All sender state is touched by this thread only;
    gRPC completion callbacks just queue the finished request and wake it."""

    def __init__(self, producer: Producer) -> None:
        super().__init__(name="seglog-producer-sender", daemon=True)
        self.p = producer
        self.acc = producer._accumulator
        self.metadata = producer._metadata
        self._wake = threading.Event()
        self._completions: deque[InFlightRequest] = deque()
        self._in_flight: dict[int, set[InFlightRequest]] = {}
        self._muted: set[TopicPartition] = set()  # a request for it is on the wire
        self._retry: dict[TopicPartition, PartitionSend] = {}  # waiting to be resent
        self._next_seq: dict[TopicPartition, int] = {}
        # Per partition: (producer id, epoch, last sequence) of the last acknowledged send.
        self._acked: dict[TopicPartition, tuple[int, int, int]] = {}
        self.producer_id = -1
        self.producer_epoch = -1
        self._pid_retry_at = 0.0
        self._metadata_retry_at = 0.0
        self._drain_rotation = itertools.count()
        self._running = True
        self._force = False
        self.counters: dict[str, int] = {
            "records_sent": 0,
            "batches_sent": 0,
            "requests_sent": 0,
            "bytes_sent": 0,
            "retries": 0,
            "records_failed": 0,
            "producer_id_resets": 0,
        }
        self._request_timeout_s = producer.request_timeout_ms / 1000
        self._in_flight_total = 0
        self._calls = _CallThreads()

    # --- control from other threads ----------------------------------------------------

    def wakeup(self) -> None:
        if not self._wake.is_set():  # set already: Event.set's lock and notify for nothing
            self._wake.set()

    def initiate_close(self) -> None:
        self._running = False
        self.wakeup()

    def force_close(self) -> None:
        self._force = True
        self._running = False
        self.wakeup()

    def in_flight_count(self) -> int:
        return self._in_flight_total

    # --- main loop -----------------------------------------------------------------------

    def run(self) -> None:
        while self._running:
            self._run_once_safely()
        # Closing: deliver what is queued (everything is sendable now) unless forced.
        while not self._force and self._has_pending():
            self._run_once_safely()
        self._abort_everything(abort_error("close() timed out"))
        self._calls.stop()

    def _run_once_safely(self) -> None:
        try:
            self._run_once()
        except Exception:  # noqa: BLE001 - logged; the sender thread must go on
            _log.exception("unexpected error in the producer's sender thread")
            time.sleep(self.p.retry_backoff_s or 0.05)

    def _has_pending(self) -> bool:
        return bool(
            self.acc.has_undrained()
            or self._retry
            or any(self._in_flight.values())
            or self._completions
        )

    def _run_once(self) -> None:
        self._wake.clear()
        self._handle_completions()
        now = time.monotonic()
        self._expire(now)
        delays: list[float] = [1.0]
        if self.p.idempotent and self.producer_id < 0 and self.acc.has_undrained():
            if now >= self._pid_retry_at and not self._init_producer_id():
                self._pid_retry_at = time.monotonic() + (self.p.retry_backoff_s or 0.05)
            delays.append(max(self._pid_retry_at - now, 0.001))
        if self.metadata.stale() and now >= self._metadata_retry_at:
            self._refresh_metadata()
        delays.append(self._send_ready(time.monotonic()))
        if not self._completions:
            self._wake.wait(max(min(delays), 0))

    # --- producer id ---------------------------------------------------------------------

    def _init_producer_id(self) -> bool:
        # A fresh id (-1/-1) rather than an epoch bump: sends still in flight under the
        # old id keep working, and the new id starts every partition at sequence 0.
        request = pb.InitProducerIdRequest(producer_id=-1, producer_epoch=-1)
        try:
            response = call(
                self.metadata.any_stub().InitProducerId, request, self._request_timeout_s
            )
            if response.error_code != E.NONE:
                raise for_code(response.error_code, response.error_message)
        except KafkaError as e:
            (_log.debug if e.retriable else _log.warning)("InitProducerId failed: %s", e)
            if e.invalid_metadata:
                self.metadata.request_update()
            if not e.retriable:
                self._fail_batches(self.acc.take_all(), e)
            return False
        assert response.producer_id >= 0 and response.producer_epoch >= 0
        self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch
        self._next_seq.clear()
        _log.debug("producer id %d epoch %d", self.producer_id, self.producer_epoch)
        return True

    def _reset_producer_id(self, reason: BaseException) -> None:
        if self.producer_id < 0:
            return
        _log.warning("resetting producer id %d after a failed batch: %s", self.producer_id, reason)
        self.producer_id = self.producer_epoch = -1
        self._next_seq.clear()
        self.counters["producer_id_resets"] += 1

    # --- metadata ------------------------------------------------------------------------

    def _refresh_metadata(self) -> None:
        topics = self.p._topics_snapshot()
        self._metadata_retry_at = time.monotonic() + (self.p.retry_backoff_s or 0.05)
        if not topics:
            return
        try:
            self.metadata.refresh(topics)
            self.p._metadata_refreshed()
        except KafkaError as e:
            _log.debug("metadata refresh failed: %s", e)

    # --- draining and sending ----------------------------------------------------------

    def _send_ready(self, now: float) -> float:
        """Send what can be sent; return the seconds until something else may be."""
        delay = 1.0
        blocked = self._muted | self._retry.keys()
        fresh: list[TopicPartition] = []
        lingering: list[TopicPartition] = []
        if not self.p.idempotent or self.producer_id >= 0:
            fresh, lingering, linger_delay = self.acc.ready(now, blocked)
            if linger_delay is not None:
                delay = min(delay, linger_delay)
        retry_now: list[TopicPartition] = []
        for tp, s in self._retry.items():
            if tp in self._muted:
                continue
            if s.retry_at <= now:
                retry_now.append(tp)
            else:
                delay = min(delay, s.retry_at - now)
        by_node: dict[int, list[TopicPartition]] = {}
        for tp in retry_now + fresh:
            leader = self.metadata.leader_for(tp)
            if leader < 0 or self.metadata.address(leader) is None:
                self.metadata.request_update()
                delay = min(delay, self.p.retry_backoff_s or 0.05)
                continue
            by_node.setdefault(leader, []).append(tp)
        # As Kafka's drain: a request that goes to a node anyway also takes the
        # lingering batches of the node's other partitions (fewer, fuller requests).
        riders: dict[int, set[TopicPartition]] = {}
        for tp in lingering:
            leader = self.metadata.leader_for(tp)
            if leader in by_node:
                riders.setdefault(leader, set()).add(tp)
        rotation = next(self._drain_rotation)
        for node_id, tps in by_node.items():
            if tps:
                k = rotation % len(tps)
                tps[:] = tps[k:] + tps[:k]  # fairness: no partition always comes first
            early = riders.get(node_id, set())
            tps.extend(early)
            in_flight = self._in_flight.setdefault(node_id, set())
            # Stop once only riders are left: they alone do not warrant a request.
            while tps and not early.issuperset(tps) and len(in_flight) < self.p.max_in_flight:
                sends = self._collect(tps, now, early)
                if not sends:
                    break
                self._dispatch(node_id, sends)
        return delay

    def _collect(
        self, tps: list[TopicPartition], now: float, early: Container[TopicPartition] = ()
    ) -> dict[TopicPartition, PartitionSend]:
        """Fill one request from `tps` (removing what it takes) up to max_request_size;
        partitions in `early` may send a batch that still lingers."""
        budget = self.p.max_request_size
        sends: dict[TopicPartition, PartitionSend] = {}
        remaining: list[TopicPartition] = []
        for i, tp in enumerate(tps):
            if budget <= HEADER_SIZE:
                remaining.extend(tps[i:])
                break
            s = self._retry.get(tp)
            if s is not None:
                if sends and len(s.data) > budget:
                    remaining.append(tp)
                    continue
            else:
                batches = self.acc.drain(
                    tp,
                    now,
                    budget,
                    MAX_BATCHES_PER_PARTITION_REQUEST,
                    first=not sends,
                    early=tp in early,
                )
                if not batches:
                    if sends:
                        remaining.append(tp)  # did not fit: try it in the next request
                    continue
                s = self._sequence(tp, batches)
            sends[tp] = s
            budget -= len(s.data)
        tps[:] = remaining
        return sends

    def _sequence(self, tp: TopicPartition, batches: list[ProducerBatch]) -> PartitionSend:
        """Encode freshly drained batches; with idempotence, give them the partition's
        next sequence numbers under the current producer id."""
        pid, epoch, seq = -1, -1, -1
        if self.p.idempotent:
            assert self.producer_id >= 0
            pid, epoch = self.producer_id, self.producer_epoch
            seq = self._next_seq.get(tp, 0)
        base_seq = seq
        compression = self.p.compression
        parts: list[bytes] = []
        for batch in batches:
            parts.append(batch.encode(compression, pid, epoch, seq))
            if pid >= 0:
                seq = increment_sequence(seq, batch.record_count)
        if pid >= 0:
            self._next_seq[tp] = seq
        deadline = min(b.created for b in batches) + self.p.delivery_timeout_s
        return PartitionSend(tp, batches, b"".join(parts), pid, epoch, base_seq, deadline)

    def _dispatch(self, node_id: int, sends: dict[TopicPartition, PartitionSend]) -> None:
        request = pb.ProduceRequest(acks=self.p.acks, timeout_ms=self.p.request_timeout_ms)
        by_topic: dict[str, pb.TopicProduceData] = {}
        for tp, s in sends.items():
            t = by_topic.get(tp.topic)
            if t is None:
                t = by_topic[tp.topic] = request.topics.add(name=tp.topic)
            t.partitions.add(partition=tp.partition, records=s.data)
            self._retry.pop(tp, None)
            self._muted.add(tp)
        r = InFlightRequest(node_id, sends)
        self._in_flight.setdefault(node_id, set()).add(r)
        self._in_flight_total += 1
        self.counters["requests_sent"] += 1
        try:
            stub = self.metadata.stub_for(node_id)
            # A little beyond the request's own timeout, so the node's answer wins.
            r.future = self.start_produce(stub, request, self._request_timeout_s + 1.0)
        except KafkaError as e:
            r.future = _FailedCall(e)
        r.future.add_done_callback(lambda _f, r=r: self._on_call_done(r))

    def start_produce(self, stub: Any, request: pb.ProduceRequest, timeout_s: float) -> Any:
        """Start one Produce call; tests replace this to simulate a lost response."""
        return self._calls.submit(stub.Produce, request, timeout_s)

    def _on_call_done(self, r: InFlightRequest) -> None:
        # A gRPC thread: hand over to the sender thread.
        self._completions.append(r)
        self._wake.set()

    # --- responses -----------------------------------------------------------------------

    def _handle_completions(self) -> None:
        while self._completions:
            r = self._completions.popleft()
            in_flight = self._in_flight.get(r.node_id)
            if in_flight is None or r not in in_flight:
                continue  # aborted by a forced close
            in_flight.discard(r)
            self._in_flight_total -= 1
            for tp in r.sends:
                self._muted.discard(tp)
            try:
                response = _result(r.future, self._request_timeout_s)
            except KafkaError as e:
                if e.invalid_metadata:
                    self.metadata.request_update()
                # A refused session token (and a failed new login) means the node never
                # ran the call: nothing was appended, the sequences may be used again.
                unknown = not isinstance(e, AUTHENTICATION_ERRORS)
                for s in r.sends.values():
                    self._on_error(s, e, outcome_unknown=unknown)
                continue
            if self.p.acks == 0:
                # Kafka resolves acks=0 sends once written to the socket; a gRPC call
                # tells only when it ends, so that is when they resolve (offset -1),
                # and a flush() after them has really sent them.
                for s in r.sends.values():
                    self._complete_send(s, -1, -1, -1)
                continue
            answers = {(t.name, p.partition): p for t in response.topics for p in t.partitions}
            for tp, s in r.sends.items():
                answer = answers.get((tp.topic, tp.partition))
                if answer is None:
                    self._on_error(
                        s, KafkaError(f"the Produce response has no answer for {tp}"), True
                    )
                elif answer.error_code in (E.NONE, E.DUPLICATE_SEQUENCE_NUMBER):
                    self._on_success(s, answer)
                else:
                    error = for_code(answer.error_code, answer.error_message)
                    if error.invalid_metadata:
                        self.metadata.request_update()
                    self._on_error(s, error, answer.error_code in _OUTCOME_UNKNOWN)

    def _on_success(self, s: PartitionSend, answer: pb.PartitionProduceResponse) -> None:
        if s.producer_id >= 0:
            last_seq = increment_sequence(s.base_sequence, s.record_count - 1)
            previous = self._acked.get(s.tp)
            if previous is not None and previous[:2] == (s.producer_id, s.producer_epoch):
                # One send per partition at a time: acknowledgements follow the sequences.
                assert s.base_sequence == increment_sequence(previous[2], 1), (
                    f"{s.tp}: acknowledged sequence {s.base_sequence} after {previous[2]}"
                )
            self._acked[s.tp] = (s.producer_id, s.producer_epoch, last_seq)
        self._complete_send(
            s, answer.base_offset, answer.log_append_time_ms, answer.log_start_offset
        )

    def _complete_send(
        self, s: PartitionSend, base_offset: int, log_append_time: int, log_start_offset: int
    ) -> None:
        offset = base_offset
        for batch in s.batches:
            batch.complete(offset, log_append_time, log_start_offset)
            if offset >= 0:
                offset += batch.record_count  # one append: the batches are contiguous
            self.acc.deallocate(batch)
        self.counters["records_sent"] += s.record_count
        self.counters["batches_sent"] += len(s.batches)
        self.counters["bytes_sent"] += len(s.data)

    def _on_error(self, s: PartitionSend, error: KafkaError, outcome_unknown: bool) -> None:
        now = time.monotonic()
        s.attempts += 1
        s.maybe_written |= outcome_unknown
        backoff = self.p.retry_backoff_s
        if error.retriable and s.attempts <= self.p.retries and not self._force:
            if now + backoff < s.deadline:
                _log.debug("retrying %s (attempt %d): %s", s.tp, s.attempts, error)
                s.retry_at = now + backoff
                self._retry[s.tp] = s
                self.counters["retries"] += 1
                return
            timeout = KafkaTimeoutError(
                f"{s.record_count} record(s) for {s.tp.topic}-{s.tp.partition} not delivered "
                f"within delivery_timeout_ms; last error: {error}"
            )
            timeout.__cause__ = error
            error = timeout
        if error.message in _TOO_LARGE and len(s.batches) > 1 and not s.maybe_written:
            # The node refused the whole append and wrote nothing: send the batches one
            # by one, so only a batch that is too large on its own fails.
            self._unsequence(s)
            return
        self._fail_send(s, error)

    def _unsequence(self, s: PartitionSend) -> None:
        """Give back a send the node never applied: its batches return to the queue head
        and get sequences again when drained."""
        for batch in s.batches:
            batch.solo = True
        if s.producer_id >= 0 and s.producer_id == self.producer_id:
            self._next_seq[s.tp] = s.base_sequence
        self.acc.reenqueue(s.tp, s.batches)

    def _fail_send(self, s: PartitionSend, error: BaseException) -> None:
        _log.warning("failed to deliver %d record(s) to %s: %s", s.record_count, s.tp, error)
        self._fail_batches(s.batches, error)
        if s.producer_id < 0:
            return
        cause = error.__cause__ if isinstance(error, KafkaTimeoutError) else error
        state_error = isinstance(cause, KafkaError) and cause.message in _SEQUENCE_STATE
        if s.maybe_written or state_error:
            # The node's last sequence for this partition is now unknown to us.
            self._reset_producer_id(error)
        elif s.producer_id == self.producer_id:
            # Not written: nothing of this partition was sequenced after it, so the next
            # batch may reuse its sequence.
            self._next_seq[s.tp] = s.base_sequence

    def _fail_batches(self, batches: Sequence[ProducerBatch], error: BaseException) -> None:
        for batch in batches:
            if batch.done:
                continue
            batch.fail(error)
            self.acc.deallocate(batch)
            self.counters["records_failed"] += batch.record_count

    def _expire(self, now: float) -> None:
        expired = self.acc.expire(now, self.p.delivery_timeout_s)
        if expired:
            self._fail_batches(
                expired,
                KafkaTimeoutError(
                    f"records expired after delivery_timeout_ms "
                    f"({self.p.delivery_timeout_s * 1000:.0f} ms) without being sent"
                ),
            )
        for tp, s in list(self._retry.items()):
            if now >= s.deadline:
                del self._retry[tp]
                self._fail_send(
                    s,
                    KafkaTimeoutError(
                        f"{s.record_count} record(s) for {tp.topic}-{tp.partition} not "
                        f"delivered within delivery_timeout_ms"
                    ),
                )

    def _abort_everything(self, error: KafkaError) -> None:
        for in_flight in self._in_flight.values():
            for r in in_flight:
                if r.future is not None:
                    r.future.cancel()
                self._fail_batches([b for s in r.sends.values() for b in s.batches], error)
            in_flight.clear()
        self._in_flight_total = 0
        for s in self._retry.values():
            self._fail_batches(s.batches, error)
        self._retry.clear()
        self._muted.clear()
        self._fail_batches(self.acc.take_all(), error)


class _CallThreads:
    """Long-lived daemon threads that make blocking Produce calls, one call each at a
    time, as many as there are requests in flight.

    Why not `stub.Produce.future()`: gRPC then completes calls on a channel thread that
    it starts whenever the channel's count of calls in flight rises from zero and that
    ends when it falls back to zero, so with a few requests in flight a thread was
    started for most requests (the before flame graph in docs/perf/producer.md)."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[
            tuple[concurrent.futures.Future[Any], Callable[..., Any], Any, float] | None
        ] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._idle = 0
        self._stopped = False

    def submit(
        self, fn: Callable[..., Any], request: Any, timeout_s: float
    ) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        with self._lock:
            if self._stopped:
                raise IllegalStateError("the producer's sender is stopped")
            start = self._idle == 0
            if start:
                self._threads += 1
            else:
                self._idle -= 1
        self._queue.put((future, fn, request, timeout_s))
        if start:
            threading.Thread(target=self._work, name="seglog-producer-call", daemon=True).start()
        return future

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, fn, request, timeout_s = item
            result: Any = None
            error: BaseException | None = None
            running = future.set_running_or_notify_cancel()
            if running:
                try:
                    result = fn(request, timeout=timeout_s)
                except BaseException as e:  # noqa: BLE001 - handed to the sender
                    error = e
            # Idle before the sender hears of the result, so that the request it sends
            # next reuses this thread rather than starting another.
            with self._lock:
                self._idle += 1
            if running:
                if error is None:
                    future.set_result(result)
                else:
                    future.set_exception(error)

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
            n = self._threads
        for _ in range(n):
            self._queue.put(None)


class _FailedCall:
    """A call that could not even start (no address for the node)."""

    def __init__(self, error: KafkaError) -> None:
        self.error = error

    def add_done_callback(self, fn: Callable[[Any], None]) -> None:
        fn(self)

    def result(self, timeout: float | None = None) -> Any:
        raise self.error

    def cancel(self) -> bool:
        return False


def _result(future: Any, timeout_s: float) -> pb.ProduceResponse:
    """The finished call's response; transport failures as the client's retriable errors."""
    try:
        return call(lambda _request, timeout: future.result(), None, timeout_s)
    except KafkaError:
        raise
    except (grpc.FutureCancelledError, concurrent.futures.CancelledError):
        raise NodeNotReadyError("the Produce call was cancelled") from None
    except Exception as e:
        # Whatever went wrong, the outcome is unknown: the caller retries (same bytes).
        raise NodeNotReadyError(f"the Produce call failed: {e!r}") from e


# --- helpers ---------------------------------------------------------------------------


def _parse_acks(acks: int | str) -> int:
    if acks == "all":
        return -1
    if isinstance(acks, str) and acks.lstrip("-").isdigit():
        acks = int(acks)
    if isinstance(acks, bool) or acks not in (0, 1, -1):
        raise KafkaConfigurationError(f"acks must be 0, 1, -1 or 'all', got {acks!r}")
    return int(acks)


def _check_int(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise KafkaConfigurationError(f"{name} must be an int >= {minimum}, got {value!r}")


def _resolve_idempotence(enable: bool | None, acks: int, retries: int, max_in_flight: int) -> bool:
    """Kafka 3.x: an explicit enable_idempotence=True with a conflicting setting is an
    error; the default (None) quietly turns idempotence off on a conflict."""
    if enable is not None and not isinstance(enable, bool):
        raise KafkaConfigurationError(f"enable_idempotence must be a bool, got {enable!r}")
    conflicts = []
    if acks != -1:
        conflicts.append(f"acks={acks} (idempotence needs acks='all')")
    if retries == 0:
        conflicts.append("retries=0 (idempotence needs retries > 0)")
    if max_in_flight > MAX_IN_FLIGHT_FOR_IDEMPOTENCE:
        conflicts.append(
            f"max_in_flight_requests_per_connection={max_in_flight} "
            f"(idempotence needs at most {MAX_IN_FLIGHT_FOR_IDEMPOTENCE})"
        )
    if enable is True and conflicts:
        raise KafkaConfigurationError(
            "enable_idempotence=True conflicts with " + ", ".join(conflicts)
        )
    return enable is not False and not conflicts


def _serialize(what: str, obj: Any, serializer: Serializer | None) -> bytes | None:
    if obj is None:
        return None
    if serializer is not None:
        obj = serializer(obj)
        if obj is None:
            return None
    if isinstance(obj, bytes):
        return obj
    if isinstance(obj, bytearray | memoryview):
        return bytes(obj)
    raise TypeError(f"{what} must be bytes (or set {what}_serializer), got {type(obj).__name__}")


def _check_headers(
    headers: Sequence[tuple[str, bytes | None]] | None,
) -> tuple[tuple[str, bytes | None], ...]:
    if not headers:
        return ()
    out = []
    for item in headers:
        if not (isinstance(item, tuple | list) and len(item) == 2 and isinstance(item[0], str)):
            raise TypeError(f"headers must be (str, bytes | None) pairs, got {item!r}")
        hvalue = item[1]
        if hvalue is not None and not isinstance(hvalue, bytes):
            if not isinstance(hvalue, bytearray | memoryview):
                raise TypeError(f"header {item[0]!r} value must be bytes or None")
            hvalue = bytes(hvalue)
        out.append((item[0], hvalue))
    return tuple(out)


def _header_size(headers: Sequence[tuple[str, bytes | None]]) -> int:
    if not headers:
        return -1
    return sum(len(k.encode("utf-8")) + (len(v) if v else 0) for k, v in headers)


class _TopicInfo:
    __slots__ = ("version", "ids", "available", "tps")

    def __init__(self, version: int, parts: dict[int, PartitionInfo]) -> None:
        self.version = version
        self.ids = sorted(parts)
        self.available = [p for p in self.ids if parts[p].leader >= 0]
        self.tps = {p: TopicPartition(parts[p].topic, p) for p in self.ids}
