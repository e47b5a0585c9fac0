"""A Kafka-style producer over gRPC, shaped like kafka-python's KafkaProducer.

`send()` partitions and queues a record in the accumulator (accumulator.py) and
returns a future; a background sender thread (sender.py) packs every sendable
partition led by one node into a single Produce request (up to
`max_request_size`), keeps up to `max_in_flight_requests_per_connection` requests
in flight per node, and retries retriable failures until `delivery_timeout_ms`.
Ordering and sequence numbers are the sender's; see its docstring.

Transactions (kafka-python's names; docs/transactions.md): with `transactional_id`,
`init_transactions()` once, then `begin_transaction()`, sends, optionally
`send_offsets_to_transaction(offsets, consumer.group_metadata())`, and
`commit_transaction()` or `abort_transaction()`. A newer producer with the same id
fences this one: its calls raise ProducerFencedError (transaction_manager.py).

Idempotence (Kafka 3.x defaults and rules). `acks` defaults to 'all' and
idempotence is on unless a setting conflicts with it: acks other than 'all',
retries=0 or more than 5 requests in flight. Such a setting silently disables
idempotence when `enable_idempotence` was left at its default (None), and is a
KafkaConfigurationError when `enable_idempotence=True` was passed explicitly.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from seglog.storage.compression import CompressionType
from seglog.storage.record_batch import HEADER_SIZE

from .accumulator import RecordAccumulator, estimate_record_size
from .cluster import FATAL_ERRORS, ClusterMetadata, Connections, PartitionInfo, TopicPartition
from .consumer_args import offsets_arg
from .errors import (
    IllegalStateError,
    KafkaConfigurationError,
    KafkaError,
    KafkaTimeoutError,
    error_class,
)
from .future import FutureRecordMetadata, failed_future
from .partitioner import Partitioner, PartitionIds, as_partitioner
from .security import ClientSecurity
from .sender import Sender
from .transaction_manager import ConsumerGroupMetadata, PreparedTxnState, TransactionManager

_log = logging.getLogger(__name__)

MessageTooLargeError = error_class("MESSAGE_TOO_LARGE")
MAX_IN_FLIGHT_FOR_IDEMPOTENCE = 5

Serializer = Callable[[Any], bytes | None]


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
        metrics_num_samples: int = 2,
        metrics_sample_window_ms: int = 30000,
        transactional_id: str | None = None,
        transaction_timeout_ms: int = 60000,
        **security: str | None,
    ) -> None:
        client_security = ClientSecurity.from_options(security)
        if transactional_id is not None:
            if not isinstance(transactional_id, str) or not transactional_id:
                raise KafkaConfigurationError(
                    f"transactional_id must be a non-empty str, got {transactional_id!r}"
                )
            if enable_idempotence is False:
                raise KafkaConfigurationError(
                    "transactional_id needs idempotence: enable_idempotence=False conflicts"
                )
            enable_idempotence = True  # a conflicting setting is an error, as in Kafka
        _check_int("transaction_timeout_ms", transaction_timeout_ms, 1)
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
        _check_int("metrics_num_samples", metrics_num_samples, 1)
        _check_int("metrics_sample_window_ms", metrics_sample_window_ms, 1)
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
        self.transactional = transactional_id is not None
        # Sent with each Produce: the leader verifies a transaction's first batch in a
        # partition with the transactional id's coordinator (KIP-890).
        self.transactional_id = transactional_id or ""
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
        self.metrics_num_samples = metrics_num_samples
        self.metrics_sample_window_s = metrics_sample_window_ms / 1000
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
        self._sender = Sender(
            self,
            self._accumulator,
            self._metadata,
            topics=self._topics_snapshot,
            on_metadata_refreshed=self._metadata_refreshed,
        )
        self._txn: TransactionManager | None = None
        if transactional_id is not None:
            self._txn = TransactionManager(
                transactional_id,
                transaction_timeout_ms,
                self._metadata,
                request_timeout_ms / 1000,
                self.retry_backoff_s,
                self._sender.set_producer,
            )
            self._sender.on_batch_failed = self._txn.batch_failed
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
        if self._txn is not None:
            self._txn.check_send()
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

        if self._txn is not None:
            self._txn.add_partition(info.tps[chosen], deadline - time.monotonic())
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
                if self._txn is not None:
                    self._txn.add_partition(info.tps[chosen], deadline - time.monotonic())
                result = self._accumulator.append(info.tps[chosen], record, size, size, sizes, now)
        except BaseException:
            self._accumulator.release(size)
            raise
        if result.batch_full or result.new_batch:
            self._sender.wakeup()
        assert result.future is not None
        return result.future

    def _choose(
        self, topic: str, key: bytes | None, ids: PartitionIds, available: PartitionIds
    ) -> int:
        chosen = self._partitioner.partition(topic, key, ids, available)
        if chosen not in ids.members:
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

    # --- transactions ------------------------------------------------------------------

    def _transactions(self, what: str) -> TransactionManager:
        if self._txn is None:
            raise IllegalStateError(f"{what} needs a Producer with a transactional_id")
        if self._closed:
            raise IllegalStateError(f"{what} after the producer is closed")
        return self._txn

    def init_transactions(self) -> None:
        """Take this transactional id's producer id and a new epoch, fencing every older
        producer with the id (an open transaction of it is aborted first). Waits up to
        max_block_ms."""
        self._transactions("init_transactions()").init_transactions(self.max_block_s)

    def begin_transaction(self) -> None:
        self._transactions("begin_transaction()").begin()

    def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, object], consumer_group_metadata: object
    ) -> None:
        """Commit a consumer's offsets in this transaction (consume-transform-produce):
        `consumer_group_metadata` is `Consumer.group_metadata()` (the member and
        generation are checked) or a group id. The offsets become the group's committed
        offsets when the transaction commits, and never if it aborts."""
        txn = self._transactions("send_offsets_to_transaction()")
        if isinstance(consumer_group_metadata, str):
            group = ConsumerGroupMetadata(consumer_group_metadata)
        elif isinstance(consumer_group_metadata, ConsumerGroupMetadata):
            group = consumer_group_metadata
        else:
            raise TypeError(
                f"consumer_group_metadata must be Consumer.group_metadata() or a group id "
                f"str, got {consumer_group_metadata!r}"
            )
        if not group.group_id:
            raise ValueError("consumer_group_metadata has an empty group id")
        txn.send_offsets(offsets_arg(offsets), group, self.max_block_s)

    def commit_transaction(self) -> None:
        """Deliver every record of the transaction, then commit it (EndTxn). A record
        that failed makes this raise; abort_transaction() then."""
        txn = self._transactions("commit_transaction()")
        txn.end(True, self.flush, self.max_block_s)

    def prepare_transaction(self) -> PreparedTxnState:
        """Kafka's prepareTransaction (KIP-939): deliver every record of the transaction
        and leave it open, returning what `end_transaction` (transaction_manager.py)
        needs to commit or abort it from another process. Close the producer after it;
        the transaction times out after transaction_timeout_ms if nobody ends it."""
        txn = self._transactions("prepare_transaction()")
        return txn.prepare(self.flush)

    def abort_transaction(self) -> None:
        """End the transaction aborted: no read_committed consumer sees its records."""
        txn = self._transactions("abort_transaction()")
        txn.end(False, self._flush_quietly, self.max_block_s)

    def _flush_quietly(self) -> None:
        self.flush(self.max_block_s)

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
        """The producer's counters (records_sent, requests_sent, ...), its buffer, and
        Kafka's producer-metrics that split a record's time: record-queue-time-avg/-max
        (ms a batch waited in the accumulator until drained into a request),
        request-latency-avg/-max (ms from a Produce's send to the node's answer) and
        records-per-request-avg, over the last metrics_num_samples windows of
        metrics_sample_window_ms each."""
        m = dict(self._sender.counters)
        m["buffer_available_bytes"] = self._accumulator.available_memory
        m["buffer_total_bytes"] = self.buffer_memory
        m["records_queued"] = self._accumulator.queued_records()
        m["requests_in_flight"] = self._sender.in_flight_count()
        m["producer_id"] = self._sender.producer_id
        # Kafka's producer-metrics of the same names (ms; NaN with nothing in the window).
        sender, now = self._sender, time.monotonic()
        for name, stat in (
            ("request-latency", sender.request_latency_ms),
            ("record-queue-time", sender.record_queue_time_ms),
        ):
            m[f"{name}-avg"] = stat.avg(now)
            m[f"{name}-max"] = stat.max(now)
        m["records-per-request-avg"] = sender.records_per_request.avg(now)
        return m

    @property
    def closed(self) -> bool:
        return self._closed


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
        self.ids = PartitionIds(sorted(parts))
        self.available = PartitionIds(p for p in self.ids if parts[p].leader >= 0)
        self.tps = {p: TopicPartition(parts[p].topic, p) for p in self.ids}
