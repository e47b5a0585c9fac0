"""The producer's I/O thread (Kafka's Sender): it drains the accumulator into Produce
requests, keeps them in flight, and settles each batch's future from the answers.

Ordering. gRPC gives no order between concurrent calls (a node runs them on a
thread pool), so the sender never has two requests in flight for one partition;
instead one request may carry up to five consecutive batches of a partition (a
Kafka leader appends them atomically, and five is the leader's deduplication
window). A failed request of a partition is retried, with the very same bytes,
before anything newer of that partition is sent.

Idempotence. The producer id comes from InitProducerId before the first batch;
sequences are assigned per partition when a batch is closed for sending and wrap at
2^31-1. When a sequenced batch fails for good with an outcome the node may have
applied (delivery timeout after an unanswered attempt) or with a sequence-state
error (OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH, UNKNOWN_PRODUCER_ID),
its futures fail and the sender takes a fresh producer id, so later sends work.
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
from seglog.storage.record_batch import HEADER_SIZE, increment_sequence

from .accumulator import ProducerBatch, RecordAccumulator, abort_error
from .cluster import AUTHENTICATION_ERRORS, ClusterMetadata, TopicPartition, call
from .errors import (
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    NodeNotReadyError,
    for_code,
)
from .sampled_stat import SampledStat

_log = logging.getLogger("seglog.client.producer")  # the producer's logger, as before the split
E = errors_pb2.ErrorCode

# A leader's idempotence window: a retried request may hold at most this many
# batches of a partition, or its first batch could have left the window.
MAX_BATCHES_PER_PARTITION_REQUEST = 5
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
    answered_at: float = 0.0  # when the call ended (its thread), for request-latency


class SenderConfig(Protocol):
    """The producer's settings the sender works by (the Producer has them all)."""

    acks: int
    idempotent: bool
    transactional: bool  # the producer id comes from init_transactions(), not the sender
    transactional_id: str  # "" when not transactional
    retries: int
    retry_backoff_s: float
    max_in_flight: int
    max_request_size: int
    compression: CompressionType
    delivery_timeout_s: float
    request_timeout_ms: int
    metrics_num_samples: int
    metrics_sample_window_s: float


class Sender(threading.Thread):
    """The producer's I/O thread. All sender state is touched by this thread only;
    gRPC completion callbacks just queue the finished request and wake it."""

    def __init__(
        self,
        config: SenderConfig,
        accumulator: RecordAccumulator,
        metadata: ClusterMetadata,
        *,
        topics: Callable[[], list[str]],
        on_metadata_refreshed: Callable[[], None],
    ) -> None:
        super().__init__(name="seglog-producer-sender", daemon=True)
        self.p = config
        self.acc = accumulator
        self.metadata = metadata
        # The producer's topics to keep metadata of, and whom to tell of a refresh.
        self._topics = topics
        self._on_metadata_refreshed = on_metadata_refreshed
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
        # A transactional producer's transaction hears of each failed batch (its thread)
        # and says what the batch fails with (ProducerFencedError when fenced).
        self.on_batch_failed: Callable[[BaseException], BaseException] | None = None
        self._request_timeout_s = config.request_timeout_ms / 1000
        # Kafka's producer-metrics that split a record's time: in the accumulator until
        # drained (record-queue-time), then the Produce call (request-latency); ms.
        self.record_queue_time_ms = self._stat()
        self.request_latency_ms = self._stat()
        self.records_per_request = self._stat()
        self._in_flight_total = 0
        self._calls = _CallThreads()

    def _stat(self) -> SampledStat:
        return SampledStat(self.p.metrics_num_samples, self.p.metrics_sample_window_s)

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
        if (
            self.p.idempotent
            and not self.p.transactional
            and self.producer_id < 0
            and self.acc.has_undrained()
        ):
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

    def set_producer(self, producer_id: int, producer_epoch: int) -> None:
        """A transactional producer's id and epoch (init_transactions, or the bump after
        an abort), given while nothing of it is queued or in flight; sequences restart."""
        self._next_seq.clear()
        self.producer_id, self.producer_epoch = producer_id, producer_epoch
        self.wakeup()

    def _reset_producer_id(self, reason: BaseException) -> None:
        if self.producer_id < 0 or self.p.transactional:
            # A transactional producer keeps its id: the transaction is aborted and the
            # epoch bumped by its TransactionManager (on_batch_failed).
            return
        _log.warning("resetting producer id %d after a failed batch: %s", self.producer_id, reason)
        self.producer_id = self.producer_epoch = -1
        self._next_seq.clear()
        self.counters["producer_id_resets"] += 1

    # --- metadata ------------------------------------------------------------------------

    def _refresh_metadata(self) -> None:
        topics = self._topics()
        self._metadata_retry_at = time.monotonic() + (self.p.retry_backoff_s or 0.05)
        if not topics:
            return
        try:
            self.metadata.refresh(topics)
            self._on_metadata_refreshed()
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
                for batch in batches:
                    self.record_queue_time_ms.record((now - batch.created) * 1000, now)
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
            parts.append(batch.encode(compression, pid, epoch, seq, self.p.transactional))
            if pid >= 0:
                seq = increment_sequence(seq, batch.record_count)
        if pid >= 0:
            self._next_seq[tp] = seq
        deadline = min(b.created for b in batches) + self.p.delivery_timeout_s
        return PartitionSend(tp, batches, b"".join(parts), pid, epoch, base_seq, deadline)

    def _dispatch(self, node_id: int, sends: dict[TopicPartition, PartitionSend]) -> None:
        request = pb.ProduceRequest(
            acks=self.p.acks,
            timeout_ms=self.p.request_timeout_ms,
            transactional_id=self.p.transactional_id,
        )
        by_topic: dict[str, pb.TopicProduceData] = {}
        for tp, s in sends.items():
            t = by_topic.get(tp.topic)
            if t is None:
                t = by_topic[tp.topic] = request.topics.add(name=tp.topic)
            t.partitions.add(partition=tp.partition, records=s.data)
            self._retry.pop(tp, None)
            self._muted.add(tp)
        r = InFlightRequest(node_id, sends)
        self.records_per_request.record(sum(s.record_count for s in sends.values()), r.sent_at)
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
        r.answered_at = time.monotonic()
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
            # A node's answer, whatever it says (Kafka records it on every response).
            self.request_latency_ms.record((r.answered_at - r.sent_at) * 1000, r.answered_at)
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
        if batches and self.on_batch_failed is not None:
            error = self.on_batch_failed(error)
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
