"""The consumer's fetch pipeline: positions per assigned partition, one Fetch in
flight per leader node (sent with `stub.Fetch.future`, so the next response
travels while the application handles the current one), a bounded buffer of
fetched batches (fetched_batches.py), offset resets via ListOffsets
(offset_fetcher.py), and retries with backoff.

Not thread-safe (like Kafka's consumer): one application thread drives it;
gRPC threads only hand completed futures over through `_completed`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

import grpc

from seglog.proto import client_pb2 as pb
from seglog.proto import errors_pb2

from .backoff import Backoff
from .cluster import FATAL_ERRORS, ClusterMetadata, TopicPartition, call
from .errors import IllegalStateError, KafkaError, error_class, error_name, for_code
from .fetched_batches import ConsumerRecord, Deserializer, FetchedBatches, record_maker
from .offset_fetcher import OffsetFetcher
from .reachability import Reachability

_log = logging.getLogger("seglog.client.consumer")

E = errors_pb2.ErrorCode
OffsetOutOfRangeError = error_class("OFFSET_OUT_OF_RANGE")

EARLIEST = "earliest"
LATEST = "latest"
NONE = "none"
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2

# Completed fetches kept per partition (the one being drained plus one read
# ahead): the pipeline stays one response ahead without running away.
MAX_BUFFERED_FETCHES = 2


class OffsetAndTimestamp(NamedTuple):
    offset: int
    timestamp: int


class NoOffsetForPartitionError(IllegalStateError):
    """A partition has no position and auto_offset_reset='none'."""

    message = "NO_OFFSET_FOR_PARTITION"


@dataclass(eq=False)
class PartitionState:
    generation: int
    position: int | None = None  # the application's position: next offset it gets
    # Where draining reached; ahead of `position` only while the iterator holds
    # drained records it has not yet yielded.
    drain_position: int | None = None
    reset: str | None = None  # a pending reset to EARLIEST or LATEST
    paused: bool = False
    error: KafkaError | None = None  # sticky until the next seek
    buffers: deque[FetchedBatches] = field(default_factory=deque)
    in_flight: int = 0  # id of the fetch carrying this partition, 0: none
    retry_at: float = 0.0
    failures: int = 0
    highwater: int | None = None
    log_start_offset: int | None = None

    def fetch_offset(self) -> int | None:
        return self.buffers[-1].next_fetch_offset if self.buffers else self.drain_position

    def seek(self, offset: int | None, generation: int, reset: str | None = None) -> None:
        self.position = self.drain_position = offset
        self.reset = reset
        self.error = None
        self.buffers.clear()
        self.generation = generation  # answers to earlier fetches are now stale
        self.retry_at = 0.0
        self.failures = 0


@dataclass(eq=False)
class InFlightFetch:
    id: int
    node_id: int
    # tp -> (generation, fetch offset) as sent
    partitions: dict[TopicPartition, tuple[int, int]]
    future: grpc.Future
    timeout_s: float


@dataclass(frozen=True)
class FetchConfig:
    fetch_min_bytes: int
    fetch_max_wait_ms: int
    fetch_max_bytes: int
    max_partition_fetch_bytes: int
    request_timeout_ms: int
    auto_offset_reset: str
    retry_backoff_ms: int
    retry_backoff_max_ms: int
    key_deserializer: Deserializer | None
    value_deserializer: Deserializer | None
    isolation_level: int = 0  # 1: read_committed (records below the LSO, no aborted ones)


class Fetcher:
    def __init__(self, metadata: ClusterMetadata, config: FetchConfig) -> None:
        self.metadata = metadata
        self.config = config
        self.backoff = Backoff(config.retry_backoff_ms / 1000, config.retry_backoff_max_ms / 1000)
        self.request_timeout_s = config.request_timeout_ms / 1000
        # Insertion order is the fetch and drain order; partitions that just
        # returned records move to the end so no partition starves.
        self.states: OrderedDict[TopicPartition, PartitionState] = OrderedDict()
        self._generation = 0
        self._next_fetch_id = 0
        self._in_flight: dict[int, InFlightFetch] = {}  # by node id
        self._cond = threading.Condition()
        self._completed: deque[InFlightFetch] = deque()
        self._meta_retry_at = 0.0
        self._meta_failures = 0
        self.reachability = Reachability(self.request_timeout_s)
        # Hooks for the consumer's subscription: which topics to ask metadata
        # for (None: all), and a callback after each refresh that returns True
        # while it still misses something (so the refresh is retried).
        self.topics_of_interest: Callable[[], set[str] | None] = lambda: {
            tp.topic for tp in self.states
        }
        self.on_metadata: Callable[[], bool] = lambda: False
        self.offsets = OffsetFetcher(
            metadata,
            self.backoff,
            self.request_timeout_s,
            lambda: self.topics_of_interest(),
            config.isolation_level,
        )
        # Partitions whose start is the group's committed offset, not yet fetched:
        # not reset to auto_offset_reset meanwhile (the consumer fills and clears it).
        self.awaiting_committed: set[TopicPartition] = set()
        self._woken = False

    # --- assignment and positions ---------------------------------------------------

    def _bump(self) -> int:
        self._generation += 1
        return self._generation

    def assign(self, tps: Iterable[TopicPartition]) -> None:
        """Keep the state of partitions that stay assigned; new ones need a reset."""
        wanted = list(dict.fromkeys(tps))
        old = self.states
        self.states = OrderedDict(
            (tp, old[tp] if tp in old else PartitionState(self._bump())) for tp in wanted
        )
        self.awaiting_committed &= set(wanted)
        if any(tp not in old for tp in wanted):
            self.metadata.request_update()

    def state(self, tp: TopicPartition) -> PartitionState:
        st = self.states.get(tp)
        if st is None:
            raise IllegalStateError(f"partition {tp.topic}-{tp.partition} is not assigned")
        return st

    def seek(self, tp: TopicPartition, offset: int) -> None:
        st = self.state(tp)
        self.awaiting_committed.discard(tp)
        self._cancel_fetch(st)
        st.seek(offset, self._bump())

    def request_reset(self, tp: TopicPartition, strategy: str) -> None:
        st = self.state(tp)
        self.awaiting_committed.discard(tp)
        self._cancel_fetch(st)
        st.seek(None, self._bump(), reset=strategy)

    def rewind(self, tp: TopicPartition) -> None:
        """Forget what was drained beyond the application's position (an abandoned
        iterator chunk): refetch from the position."""
        st = self.states.get(tp)
        if st is not None and st.drain_position != st.position:
            self._cancel_fetch(st)
            st.seek(st.position, self._bump())

    def _cancel_fetch(self, st: PartitionState) -> None:
        """Its answer is stale now: cancel a (long-polling) fetch carrying the
        partition rather than wait for it. Others in it are simply fetched again."""
        if not st.in_flight:
            return
        for fetch in self._in_flight.values():
            if fetch.id == st.in_flight:
                fetch.future.cancel()

    # --- metadata -------------------------------------------------------------------

    def maybe_refresh_metadata(self, force: bool = False) -> None:
        now = time.monotonic()
        if not (force or self.metadata.stale()) or now < self._meta_retry_at:
            return
        topics = self.topics_of_interest()
        if topics is not None and not topics:
            return
        try:
            self.metadata.refresh(topics)
        except KafkaError as e:
            if isinstance(e, FATAL_ERRORS) and not getattr(e, "nothing_listens", False):
                # To the application: a wrong password, or a bootstrap list of Kafka
                # ports, does not get better by waiting; a cluster not started yet may.
                raise
            self._unreachable(now, e)
            self._meta_failures += 1
            self.metadata.request_update()
            self._meta_retry_at = now + self.backoff.delay(self._meta_failures)
            return
        self.reachability.succeeded()
        missing = self.on_metadata()
        missing = missing or any(self.metadata.leader_for(tp) < 0 for tp in self.states)
        # Keep asking while leaders are missing, but no faster than the backoff.
        self._meta_failures = self._meta_failures + 1 if missing else 0
        self._meta_retry_at = now + (self.backoff.delay(self._meta_failures) if missing else 0)
        if missing:
            self.metadata.request_update()

    def _unreachable(self, now: float, error: Exception) -> None:
        warning = self.reachability.failed(now, str(error))
        if warning is not None:
            _log.warning("consumer: %s", warning)

    def _retry_later(self, st: PartitionState, invalid_metadata: bool) -> None:
        st.failures += 1
        st.retry_at = time.monotonic() + self.backoff.delay(st.failures)
        if invalid_metadata:
            self.metadata.request_update()

    # --- offset resets --------------------------------------------------------------

    def reset_positions(self) -> None:
        """One round of ListOffsets for partitions without a position."""
        now = time.monotonic()
        wanted: dict[TopicPartition, int] = {}
        for tp, st in self.states.items():
            if st.position is not None or st.error is not None or now < st.retry_at:
                continue
            if tp in self.awaiting_committed:
                continue
            if st.reset is None:
                if self.config.auto_offset_reset == NONE:
                    st.error = NoOffsetForPartitionError(
                        f"{tp.topic}-{tp.partition} has no position and auto_offset_reset="
                        f"'none': seek() it first"
                    )
                    continue
                st.reset = self.config.auto_offset_reset
            wanted[tp] = EARLIEST_TIMESTAMP if st.reset == EARLIEST else LATEST_TIMESTAMP
        if not wanted:
            return
        results, failures = self.offsets.list_offsets_once(wanted)
        for tp, (offset, _ts) in results.items():
            self.states[tp].seek(offset, self._bump())
        for tp, error in failures.items():
            st = self.states[tp]
            if error.retriable:
                self._retry_later(st, error.invalid_metadata)
            else:
                st.error = error

    # --- sending fetches ------------------------------------------------------------

    def _fetchable(self, st: PartitionState, now: float) -> bool:
        if (
            st.paused
            or st.position is None
            or st.error is not None
            or st.in_flight
            or now < st.retry_at
            or len(st.buffers) >= MAX_BUFFERED_FETCHES
        ):
            return False
        if st.buffers and st.buffers[-1].framing_error is not None:
            return False  # nothing trustworthy to read ahead from
        return True

    def send_fetches(self) -> None:
        now = time.monotonic()
        by_node: dict[int, list[tuple[TopicPartition, PartitionState, int]]] = {}
        for tp, st in self.states.items():
            if not self._fetchable(st, now):
                continue
            info = self.metadata.partition(tp)
            if info is None or info.leader < 0:
                self.metadata.request_update()
                continue
            if info.leader in self._in_flight:
                continue
            by_node.setdefault(info.leader, []).append((tp, st, info.leader_epoch))
        for node_id, parts in by_node.items():
            try:
                stub = self.metadata.stub_for(node_id)
            except KafkaError:
                continue  # stub_for asked for a metadata update
            self._next_fetch_id += 1
            fetch_id = self._next_fetch_id
            request = pb.FetchRequest(
                replica_id=-1,
                max_wait_ms=self.config.fetch_max_wait_ms,
                min_bytes=self.config.fetch_min_bytes,
                max_bytes=self.config.fetch_max_bytes,
                isolation_level=self.config.isolation_level,
            )
            topics: dict[str, pb.FetchTopic] = {}
            sent: dict[TopicPartition, tuple[int, int]] = {}
            for tp, st, epoch in parts:
                offset = st.fetch_offset()
                assert offset is not None
                t = topics.get(tp.topic)
                if t is None:
                    t = topics[tp.topic] = request.topics.add(name=tp.topic)
                t.partitions.add(
                    partition=tp.partition,
                    current_leader_epoch=epoch,
                    fetch_offset=offset,
                    last_fetched_epoch=-1,
                    log_start_offset=-1,
                    partition_max_bytes=self.config.max_partition_fetch_bytes,
                )
                sent[tp] = (st.generation, offset)
                st.in_flight = fetch_id
            # The server may hold the request for max_wait before answering.
            timeout_s = (self.config.fetch_max_wait_ms + self.config.request_timeout_ms) / 1000
            future = stub.Fetch.future(request, timeout=timeout_s)
            fetch = InFlightFetch(fetch_id, node_id, sent, future, timeout_s)
            self._in_flight[node_id] = fetch
            future.add_done_callback(lambda _f, fetch=fetch: self._on_done(fetch))

    def _on_done(self, fetch: InFlightFetch) -> None:
        # A gRPC thread: hand over only; the application thread does the work.
        with self._cond:
            self._completed.append(fetch)
            self._cond.notify_all()

    def wait(self, timeout_s: float) -> None:
        """Until a fetch completes, at most timeout_s (capped: callers loop)."""
        with self._cond:
            if not self._completed and not self._woken and timeout_s > 0:
                self._cond.wait(min(timeout_s, 60.0))

    def wakeup(self) -> None:
        """End a wait() early: another thread has work for the application thread."""
        with self._cond:
            self._woken = True
            self._cond.notify_all()

    def next_retry_in(self) -> float | None:
        """Seconds until a backed-off partition or metadata refresh may go again."""
        now = time.monotonic()
        times = [st.retry_at for st in self.states.values() if st.retry_at > now]
        if self.metadata.stale() and self._meta_retry_at > now:
            times.append(self._meta_retry_at)
        return min(times) - now if times else None

    @property
    def in_flight_count(self) -> int:
        return len(self._in_flight)

    # --- handling responses -----------------------------------------------------------

    def process_completed(self) -> None:
        while True:
            with self._cond:
                if not self._completed:
                    return
                fetch = self._completed.popleft()
            if self._in_flight.get(fetch.node_id) is fetch:
                del self._in_flight[fetch.node_id]
            self._handle(fetch)

    def _handle(self, fetch: InFlightFetch) -> None:
        mine: dict[TopicPartition, tuple[PartitionState, int]] = {}
        for tp, (generation, offset) in fetch.partitions.items():
            st = self.states.get(tp)
            if st is None or st.in_flight != fetch.id:
                continue
            st.in_flight = 0
            if st.generation == generation:
                mine[tp] = (st, offset)
        try:
            response = call(lambda _r, timeout: fetch.future.result(), None, fetch.timeout_s)
        except grpc.FutureCancelledError:
            return
        except KafkaError as e:
            # The node is unreachable or slow: look for a (new) leader, back off.
            self._unreachable(time.monotonic(), e)
            self.metadata.request_update()
            for st, _offset in mine.values():
                self._retry_later(st, invalid_metadata=True)
            return
        self.reachability.succeeded()
        if response.error_code:
            error = for_code(response.error_code, "fetch failed")
            for tp, (st, _offset) in mine.items():
                self._partition_error(tp, st, error)
            return
        answered = set()
        for t in response.topics:
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition)
                entry = mine.get(tp)
                if entry is None or tp in answered:
                    continue
                answered.add(tp)
                st, offset = entry
                if st.fetch_offset() != offset:
                    continue  # the buffers moved on; this answer no longer fits
                if p.error_code:
                    name = error_name(p.error_code)
                    error = for_code(p.error_code, f"{tp.topic}-{tp.partition}: {p.error_message}")
                    if name == "OFFSET_OUT_OF_RANGE":
                        self._out_of_range(tp, st, offset, error)
                    else:
                        self._partition_error(tp, st, error)
                    continue
                st.failures = 0
                st.highwater = p.high_watermark
                st.log_start_offset = p.log_start_offset
                if p.records:
                    aborted = [(a.producer_id, a.first_offset) for a in p.aborted_transactions]
                    fetched = FetchedBatches(tp, p.records, offset, aborted)
                    if fetched.useful:
                        st.buffers.append(fetched)
        for tp, (st, _offset) in mine.items():
            if tp not in answered:
                self._retry_later(st, invalid_metadata=False)

    def _out_of_range(
        self, tp: TopicPartition, st: PartitionState, offset: int, error: KafkaError
    ) -> None:
        if st.buffers or offset != st.drain_position:
            # A read-ahead past data we hold (the log was truncated meanwhile):
            # finish what we have, then the fetch from the position decides.
            self._retry_later(st, invalid_metadata=False)
            return
        policy = self.config.auto_offset_reset
        if policy == NONE:
            st.error = OffsetOutOfRangeError(
                f"{tp.topic}-{tp.partition} position {offset} is out of range "
                f"(log start {st.log_start_offset}, high watermark {st.highwater}) and "
                f"auto_offset_reset='none': seek() to a valid offset"
            )
        else:
            st.seek(None, self._bump(), reset=policy)

    def _partition_error(self, tp: TopicPartition, st: PartitionState, error: KafkaError) -> None:
        if error.retriable:
            self._retry_later(st, error.invalid_metadata)
        else:
            st.error = error

    # --- draining ----------------------------------------------------------------------

    def drain(
        self, max_records: int
    ) -> tuple[dict[TopicPartition, list[ConsumerRecord]], dict[TopicPartition, int]]:
        """Buffered records, up to max_records, and the new position of each
        partition they came from. Moves `drain_position`; the caller moves `position`.

        A partition error is raised only when no records were collected: it is
        sticky (or recurs from the same batch), so the next call reports it.
        """
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        positions: dict[TopicPartition, int] = {}
        error: KafkaError | None = None
        count = 0
        for tp, st in list(self.states.items()):
            if count >= max_records:
                break
            if st.paused:
                continue
            if st.error is not None:
                error = error or st.error
                continue
            moved = False
            while st.buffers and count < max_records:
                buf = st.buffers[0]
                if buf.position != st.drain_position:
                    st.buffers.clear()  # fetched for a position we no longer hold
                    break
                make = record_maker(
                    tp, self.config.key_deserializer, self.config.value_deserializer
                )
                records, failure = buf.take(max_records - count, make)
                finished = failure is None and buf.done  # settles: may step over control batches
                moved = moved or buf.position != st.drain_position or bool(records)
                st.drain_position = buf.position
                if records:
                    out.setdefault(tp, []).extend(records)
                    count += len(records)
                if failure is not None:
                    error = error or failure
                    break
                if not finished:
                    break
                st.buffers.popleft()
            if moved:
                assert st.drain_position is not None
                if tp in out:
                    positions[tp] = st.drain_position
                    self.states.move_to_end(tp)
                else:
                    # Only skipped offsets (control batches): nothing to hand out first.
                    st.position = st.drain_position
        if error is not None and not out:
            raise error
        return out, positions

    def fetch_records(
        self, max_records: int, timeout_s: float
    ) -> tuple[dict[TopicPartition, list[ConsumerRecord]], dict[TopicPartition, int]]:
        """Records as soon as some are buffered, else wait for fetches up to timeout_s.
        The next fetches are sent before returning, so they travel while the
        application handles these records."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.maybe_refresh_metadata()
            self.reset_positions()
            self.process_completed()
            try:
                records, positions = self.drain(max_records)
            finally:
                self.send_fetches()
            if records:
                return records, positions
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return {}, {}
            retry_in = self.next_retry_in()
            self.wait(min(remaining, retry_in) if retry_in is not None else remaining)
            with self._cond:
                woken, self._woken = self._woken, False
            if woken:
                return {}, {}  # the caller has other work (a rebalance step) first

    # --- shutdown ---------------------------------------------------------------------

    def close(self) -> None:
        for fetch in list(self._in_flight.values()):
            fetch.future.cancel()
        self._in_flight.clear()
        with self._cond:
            self._completed.clear()
