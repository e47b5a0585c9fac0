"""The chaos workload: idempotent producers (acks=all) and consumers on one topic,
every operation written to a history file, one JSON object a line.

History events (all carry "type", "t" = wall-clock seconds, "process"):

    invoke      a send is about to be queued: value, partition
    ok          the send was acknowledged: value, partition, offset, latency
    fail        the send failed: value, partition, error, definite
    poll        a consumer read one record: partition, offset, value
    seek        a consumer's position was set (start, reset after an error): partition, offset
    poll_error  a consumer's poll raised: error
    fault       written by the fault runner: name, phase (start|end|info), node, detail
    phase       the run's phases: name (warmup, faults, heal, quiesce, final-read, done)
    meta        the first line: scenario, target, seed, topic, partitions, ...

`definite` is True only when the record certainly never reached a node: send()
raised before the record entered the accumulator, or the producer expired it
"without being sent", or the node refused it with an error that is returned
before any append (MESSAGE_TOO_LARGE, INVALID_RECORD, ...). Every timeout and
network error is indeterminate: the node may have appended the data and only the
answer was lost, so a later read of it is legal.
"""

from __future__ import annotations

import contextlib
import json
import random
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from seglog.client.cluster import TopicPartition
from seglog.client.consumer import Consumer, ConsumerRebalanceListener
from seglog.client.errors import KafkaError, KafkaTimeoutError
from seglog.client.future import RecordMetadata
from seglog.client.producer import Producer

# Errors a node returns before it appends anything, for a batch it refuses as a
# whole; with them the record was never written (unless an earlier attempt of the
# same batch went unanswered, which the producer reports as a timeout instead).
DEFINITE_ERRORS = frozenset(
    {
        "MESSAGE_TOO_LARGE",
        "RECORD_LIST_TOO_LARGE",
        "INVALID_RECORD",
        "INVALID_TOPIC_EXCEPTION",
        "TOPIC_AUTHORIZATION_FAILED",
        "INVALID_REQUIRED_ACKS",
    }
)


def classify_error(error: BaseException) -> tuple[str, bool]:
    """(description, definite) for a failed send's exception."""
    text = f"{type(error).__name__}: {error}"
    if isinstance(error, KafkaTimeoutError):
        # The accumulator expires batches that never left it with this wording;
        # every other timeout may hide an append whose answer was lost.
        return text, error.__cause__ is None and "without being sent" in str(error)
    if isinstance(error, KafkaError) and error.__cause__ is None:
        return text, error.message in DEFINITE_ERRORS
    return text, False


class History:
    """A thread-safe JSON-lines writer with bounded buffering: lines are written
    once `max_buffered` are pending (by the appending thread, so memory stays
    bounded however fast events come) and at least every `flush_interval_s`."""

    def __init__(self, path: Path, max_buffered: int = 2000, flush_interval_s: float = 0.5) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: TextIO = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self._buffer: list[str] = []
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._max = max_buffered
        self._interval = flush_interval_s
        self._closed = threading.Event()
        self._flusher = threading.Thread(target=self._flush_loop, name="history-flush", daemon=True)
        self._flusher.start()

    def append(self, event: dict[str, Any]) -> None:
        if "t" not in event:
            event["t"] = time.time()
        line = json.dumps(event, separators=(",", ":"))
        with self._lock:
            self._buffer.append(line)
            full = len(self._buffer) >= self._max
        if full:
            self.flush()

    def flush(self) -> None:
        with self._write_lock:
            with self._lock:
                lines, self._buffer = self._buffer, []
            if lines and not self._file.closed:
                self._file.write("\n".join(lines) + "\n")
                self._file.flush()

    def _flush_loop(self) -> None:
        while not self._closed.wait(self._interval):
            self.flush()

    def close(self) -> None:
        self._closed.set()
        self._flusher.join(5)
        self.flush()
        with self._write_lock:
            self._file.close()


# Values repeated across millions of events, held once (see read_history).
_SHARED_VALUES = frozenset({"type", "process", "name", "phase", "scenario", "group"})


def read_history(path: Path) -> list[dict[str, Any]]:
    """The events of a history file; a torn last line (a crash mid-write) is skipped.
    An hour's soak writes tens of millions of events: each event's keys, and values
    such as its type and process, are one shared string each instead of new ones per
    line (half the memory: about 410 instead of 870 bytes an event)."""
    events = []
    shared: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                raw = json.loads(line)
            except json.JSONDecodeError:
                continue
            event = {}
            for k, v in raw.items():
                if k in _SHARED_VALUES and isinstance(v, str):
                    v = shared.setdefault(v, v)
                event[shared.setdefault(k, k)] = v
            events.append(event)
    return events


@dataclass
class WorkloadConfig:
    bootstrap: str
    topic: str
    partitions: int
    producers: int = 3
    consumers: int = 2
    # Target sends per second of each producer; the machine may deliver fewer.
    rate: float = 60.0
    # Unresolved sends per producer, split evenly over the partitions; a partition at
    # its share gets no new send until one resolves (bounds memory while it is
    # unavailable, and makes its outage visible as zero acks on it alone).
    max_outstanding: int = 400
    request_timeout_ms: int = 8000
    delivery_timeout_ms: int = 45000
    seed: int = 0
    # > 0: every record gets one of this many keys (a compacted topic); 0: no keys.
    keys: int = 0
    # seglog's clients' security options (kafka-python's names; empty: plaintext).
    security: dict[str, str] = field(default_factory=dict)
    # Consumers in one group ("<topic>-group") that subscribe and commit what they
    # read after each poll; their polls, assignments and acknowledged commits go into
    # the history for the checker's commit invariants.
    group_consumers: int = 0


class PartitionSlots:
    """Bounded unresolved sends of one producer, per partition: a stalled partition
    fills only its own share, so the others keep their load and the report shows
    which partitions were unavailable (one shared bound stopped every partition as
    soon as any one stalled)."""

    def __init__(self, total: int, partitions: int) -> None:
        self._slots = [threading.Semaphore(max(1, total // partitions)) for _ in range(partitions)]

    def take(self, partition: int, timeout_s: float) -> bool:
        return self._slots[partition].acquire(timeout=timeout_s)

    def give(self, partition: int) -> None:
        self._slots[partition].release()


@dataclass
class _ProducerStats:
    invoked: int = 0
    acked: int = 0
    failed: int = 0


@dataclass
class WorkloadState:
    """What every workload keeps while it runs, whichever client it drives."""

    config: WorkloadConfig
    history: History
    _stop_producing: threading.Event = field(default_factory=threading.Event)
    _stop_consuming: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _producer_threads: list[threading.Thread] = field(default_factory=list)
    _producers: list[Any] = field(default_factory=list)
    _outstanding: list[PartitionSlots] = field(default_factory=list)
    _positions: dict[str, dict[int, int]] = field(default_factory=dict)
    _positions_lock: threading.Lock = field(default_factory=threading.Lock)
    stats: dict[str, _ProducerStats] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def _guard(self, fn: Callable[..., None]) -> Callable[..., None]:
        """A crashed workload thread must be visible in the report, not silent."""

        def run(*args: Any) -> None:
            try:
                fn(*args)
            except Exception as e:  # noqa: BLE001 - recorded, then the run goes on
                self.errors.append(f"{threading.current_thread().name}: {e!r}")
                self.history.append({"type": "workload_error", "error": repr(e)})

        return run

    def _thread(
        self, loop: Callable[..., None], args: tuple[Any, ...], name: str
    ) -> threading.Thread:
        """A daemon thread running `loop` guarded (an error is recorded, not lost)."""
        return threading.Thread(target=self._guard(loop), args=args, name=name, daemon=True)

    def drain(self, end_offsets: dict[int, int], timeout_s: float) -> bool:
        """Let the running consumers catch up to `end_offsets`; True when they did."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            pos = self.positions()
            running = [n for n in pos if n.startswith("c")]
            if all(pos[n].get(p, 0) >= end for n in running for p, end in end_offsets.items()):
                return True
            if not any(th.is_alive() for th in self._threads):
                return False
            time.sleep(0.5)
        return False

    def final_read(self, end_offsets: dict[int, int], timeout_s: float) -> bool:
        """A fresh consumer reads every partition from the beginning to `end_offsets`
        (Jepsen's final read); True when it got there in time."""
        th = self._thread(self._consume_loop, ("final", end_offsets), "chaos-final")
        th.start()
        th.join(timeout_s)
        if th.is_alive():
            self._stop_consuming.set()
            th.join(15)
            return False
        pos = self.positions().get("final", {})
        return all(pos.get(p, 0) >= end for p, end in end_offsets.items())

    def positions(self) -> dict[str, dict[int, int]]:
        with self._positions_lock:
            return {k: dict(v) for k, v in self._positions.items()}

    def stop(self) -> None:
        self._stop_consuming.set()
        for th in self._threads:
            th.join(15)

    def _invoked(
        self, name: str, value: str, partition: int, started: float, key: str | None = None
    ) -> None:
        """A send about to be made (history's "invoke")."""
        invoke: dict[str, Any] = {
            "type": "invoke",
            "t": started,
            "process": name,
            "value": value,
            "partition": partition,
        }
        if key is not None:
            invoke["key"] = key
        self.history.append(invoke)
        self.stats[name].invoked += 1

    def _acked(
        self,
        name: str,
        value: str,
        sent_to: int,
        partition: int,
        offset: int | None,
        started: float,
        outstanding: PartitionSlots,
    ) -> None:
        """A send to partition `sent_to` acknowledged at `offset` of `partition` (as the
        broker said; None: at no offset known)."""
        outstanding.give(sent_to)
        self.stats[name].acked += 1
        now = time.time()
        self.history.append(
            {
                "type": "ok",
                "t": now,
                "process": name,
                "value": value,
                "partition": partition,
                "offset": offset,
                "t0": started,
                "latency": round(now - started, 4),
            }
        )

    def _failed(
        self,
        name: str,
        value: str,
        partition: int,
        started: float,
        outstanding: PartitionSlots,
        error: str,
        definite: bool,
    ) -> None:
        """A send that failed: `definite` when it was surely not written."""
        outstanding.give(partition)
        self.stats[name].failed += 1
        self.history.append(
            {
                "type": "fail",
                "process": name,
                "value": value,
                "partition": partition,
                "error": error,
                "definite": definite,
                "t0": started,
            }
        )

    def _seeked(
        self, name: str, partition: int, offset: int | None, reason: str, group: str | None = None
    ) -> None:
        """A consumer's position set (start, out-of-range, assigned), as history's "seek"."""
        event: dict[str, Any] = {"type": "seek", "process": name}
        if group is not None:
            event["group"] = group
        event.update(partition=partition, offset=offset, reason=reason)
        self.history.append(event)

    def _poll_failed(self, name: str, error: str) -> None:
        self.history.append({"type": "poll_error", "process": name, "error": error[:300]})

    def _paced_sends(
        self, index: int, name: str, wait: Callable[[float], object], tick: Callable[[], object]
    ) -> Iterator[tuple[random.Random, int, str]]:
        """Producer `name`'s sends at the configured rate until stopped: (its rng, the
        partition, the value), each once a slot of that partition is free. `wait(s)`
        idles until the next send is due, `tick()` runs at every turn."""
        c = self.config
        rng = random.Random(f"{c.seed}-{name}")
        outstanding = self._outstanding[index]
        interval = 1.0 / c.rate if c.rate > 0 else 0.0
        next_at = time.monotonic()
        seq = 0
        while not self._stop_producing.is_set():
            tick()
            now = time.monotonic()
            if now < next_at:
                wait(next_at - now)
                continue
            # After a stall, do not burst to catch up: keep the rate from now on.
            next_at = max(next_at + interval, now - 1.0)
            partition = rng.randrange(c.partitions)
            if not outstanding.take(partition, 0.05):
                continue
            value = f"{name}-{seq}"
            seq += 1
            yield rng, partition, value

    def _record_commit(
        self, name: str, group: str, partition: int, offset: int, t0: float, t: float
    ) -> None:
        """An acknowledged commit (sent at t0, acknowledged at t), either client."""
        self.history.append(
            {
                "type": "commit",
                "t": t,
                "t0": t0,
                "process": name,
                "group": group,
                "partition": partition,
                "offset": offset,
            }
        )

    def _record_commit_error(
        self, name: str, group: str, error: str, t0: float, partition: int | None = None
    ) -> None:
        """A commit not acknowledged (whether it took effect is unknown), either client."""
        event: dict[str, Any] = {"type": "commit_error", "process": name, "group": group}
        if partition is not None:
            event["partition"] = partition
        event["error"] = error[:300]
        event["t0"] = t0
        self.history.append(event)

    def _consume_loop(self, name: str, until: dict[int, int] | None) -> None:
        raise NotImplementedError

    def _produce_loop(self, index: int, name: str, producer: Any) -> None:
        raise NotImplementedError

    def _group_loop(self, name: str) -> None:
        raise NotImplementedError

    def _add_producer(self, index: int, name: str, producer: Any) -> None:
        """Producer `name` (the index-th), its slots, stats and thread (not started)."""
        self._producers.append(producer)
        c = self.config
        self._outstanding.append(PartitionSlots(c.max_outstanding, c.partitions))
        self.stats[name] = _ProducerStats()
        th = self._thread(self._produce_loop, (index, name, producer), f"chaos-{name}")
        self._producer_threads.append(th)

    def _stop_sending(self, timeout_s: float) -> float:
        """Stop the producers' threads (each within 10 s); the deadline for the sends
        still in flight to get their outcomes."""
        self._stop_producing.set()
        for th in self._producer_threads:
            th.join(10)
        return time.monotonic() + timeout_s

    def _start_threads(self) -> None:
        """The readers' and group members' threads, then every thread."""
        for i in range(self.config.consumers):
            name = f"c{i}"
            self._threads.append(self._thread(self._consume_loop, (name, None), f"chaos-{name}"))
        for i in range(self.config.group_consumers):
            name = f"g{i}"
            self._threads.append(self._thread(self._group_loop, (name,), f"chaos-{name}"))
        for th in self._producer_threads + self._threads:
            th.start()


@dataclass
class Workload(WorkloadState):
    """Start with start(); stop_producers() then drain() then stop()."""

    def start(self) -> None:
        c = self.config
        for i in range(c.producers):
            name = f"p{i}"
            producer = Producer(
                c.bootstrap,
                acks="all",
                enable_idempotence=True,
                linger_ms=5,
                request_timeout_ms=c.request_timeout_ms,
                delivery_timeout_ms=c.delivery_timeout_ms,
                max_block_ms=5000,
                retry_backoff_ms=100,
                **c.security,
            )
            self._add_producer(i, name, producer)
        self._start_threads()

    # --- producing ----------------------------------------------------------------------

    def _produce_loop(self, index: int, name: str, producer: Producer) -> None:
        c = self.config
        outstanding = self._outstanding[index]
        for rng, partition, value in self._paced_sends(
            index, name, self._stop_producing.wait, lambda: None
        ):
            key = f"k{rng.randrange(c.keys)}" if c.keys > 0 else None
            started = time.time()
            self._invoked(name, value, partition, started, key)
            try:
                future = producer.send(
                    c.topic,
                    value=value.encode(),
                    key=key.encode() if key is not None else None,
                    partition=partition,
                )
            except Exception as e:  # noqa: BLE001 - any synchronous failure is recorded
                # send() raised before the record entered the accumulator: never written.
                error = f"{type(e).__name__}: {e}"
                self._failed(name, value, partition, started, outstanding, error, True)
                continue

            # Each callback keeps its own send's values (defaults), not the loop's latest.
            def acked(
                md: RecordMetadata, v: str = value, p: int = partition, t0: float = started
            ) -> None:
                self._acked(name, v, p, md.partition, md.offset, t0, outstanding)

            def failed(
                error: BaseException, v: str = value, p: int = partition, t0: float = started
            ) -> None:
                text, definite = classify_error(error)
                self._failed(name, v, p, t0, outstanding, text[:300], definite)

            future.add_callback(acked)
            future.add_errback(failed)

    def stop_producers(self, timeout_s: float = 90.0) -> None:
        """Stop sending and wait until every send has an outcome (or timeout_s)."""
        deadline = self._stop_sending(timeout_s)
        for producer in self._producers:
            try:
                producer.flush(max(0.1, deadline - time.monotonic()))
            except KafkaError as e:
                self.errors.append(f"producer flush: {e}")
        for producer in self._producers:
            # Whatever is left fails (indeterminate) and is recorded by the errbacks.
            producer.close(max(0.1, deadline - time.monotonic()))

    # --- consuming ----------------------------------------------------------------------

    def _consume_loop(self, name: str, until: dict[int, int] | None) -> None:
        """Poll every partition from the beginning until stopped, or (final reader)
        until each partition's position reaches `until`."""
        c = self.config
        tps = [TopicPartition(c.topic, p) for p in range(c.partitions)]
        consumer = Consumer(
            bootstrap_servers=c.bootstrap,
            **c.security,
            client_id=f"chaos-{name}",
            # Never move a position silently: an out-of-range position is an error we
            # record, followed by an explicit (recorded) seek.
            auto_offset_reset="none",
            request_timeout_ms=c.request_timeout_ms,
            fetch_max_wait_ms=200,
        )
        positions: dict[int, int] = {}
        with self._positions_lock:
            self._positions[name] = positions
        try:
            consumer.assign(tps)
            consumer.seek_to_beginning(*tps)
            for tp in tps:
                self._record_seek(consumer, name, tp, "start", positions)
            while not self._stop_consuming.is_set():
                if until is not None and all(
                    positions.get(p, 0) >= end for p, end in until.items()
                ):
                    break
                try:
                    batch = consumer.poll(timeout_ms=500)
                except KafkaError as e:
                    self._poll_failed(name, f"{type(e).__name__}: {e}")
                    if e.message == "OFFSET_OUT_OF_RANGE":
                        # Should not happen (positions never pass the HW); if it does,
                        # restart that partition from the beginning, recorded as a seek.
                        for tp in _out_of_range_partitions(e, c.topic, tps):
                            consumer.seek_to_beginning(tp)
                            self._record_seek(consumer, name, tp, "out-of-range", positions)
                    self._stop_consuming.wait(0.2)
                    continue
                for tp, next_offset in self._record_polls(name, batch).items():
                    positions[tp.partition] = next_offset
                if c.keys > 0:
                    # Compacted: batches the cleaner emptied move a position past the
                    # last record read, also in a poll that returned no record.
                    for tp in tps:
                        with contextlib.suppress(KafkaError):
                            positions[tp.partition] = consumer.position(tp, timeout_ms=1000)
        finally:
            consumer.close()

    def _group_loop(self, name: str) -> None:
        """A member of the topic's group: poll, record, commit what was read (sync).
        A partition newly assigned is recorded as a seek to the group's committed
        offset (where the member must start), so a start past it is `skipped` and one
        before it `backwards`; an acknowledged commit is a `commit` event."""
        c = self.config
        group = f"{c.topic}-group"
        consumer = Consumer(
            bootstrap_servers=c.bootstrap,
            **c.security,
            client_id=f"chaos-{name}",
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            request_timeout_ms=c.request_timeout_ms,
            fetch_max_wait_ms=200,
        )
        fresh: set[TopicPartition] = set()

        class Listener(ConsumerRebalanceListener):
            def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
                fresh.update(assigned)

            def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
                fresh.difference_update(revoked)

        try:
            consumer.subscribe([c.topic], listener=Listener())
            while not self._stop_consuming.is_set():
                try:
                    batch = consumer.poll(timeout_ms=500)
                except KafkaError as e:
                    self._poll_error(name, e)
                    continue
                for tp in sorted(fresh, key=lambda t: t.partition):
                    self._record_start(consumer, name, group, tp)
                fresh.clear()
                offsets = self._record_polls(name, batch, group)
                if offsets:
                    self._commit(consumer, name, group, offsets)
        finally:
            consumer.close(autocommit=False)

    def _record_polls(
        self, name: str, batch: dict[TopicPartition, list[Any]], group: str | None = None
    ) -> dict[TopicPartition, int]:
        """One `poll` event per record (with the consumer's group, if any); returns the
        next offset of each partition that had records."""
        now = time.time()
        offsets = {}
        for tp, records in batch.items():
            for r in records:
                value = r.value.decode() if isinstance(r.value, bytes) else r.value
                event = {
                    "type": "poll",
                    "t": now,
                    "process": name,
                    "partition": tp.partition,
                    "offset": r.offset,
                    "value": value,
                }
                if group is not None:
                    event["group"] = group
                self.history.append(event)
            if records:
                offsets[tp] = records[-1].offset + 1
        return offsets

    def _record_start(self, consumer: Consumer, name: str, group: str, tp: TopicPartition) -> None:
        """Where a newly assigned partition starts: the group's committed offset, else
        the log start (auto_offset_reset=earliest); None (unknown: the next read sets
        the expectation) when the coordinator cannot say."""
        offset: int | None = None
        for _ in range(3):
            try:
                committed = consumer.committed(tp)
                offset = (
                    committed
                    if isinstance(committed, int)
                    else consumer.beginning_offsets([tp])[tp]
                )
                break
            except KafkaError:
                time.sleep(0.5)
        self._seeked(name, tp.partition, offset, "assigned", group)

    def _commit(
        self, consumer: Consumer, name: str, group: str, offsets: dict[TopicPartition, int]
    ) -> None:
        t0 = time.time()
        try:
            consumer.commit(offsets)
        except KafkaError as e:  # not acknowledged: whether it took effect is unknown
            self._record_commit_error(name, group, f"{type(e).__name__}: {e}", t0)
            return
        t = time.time()
        for tp, offset in offsets.items():
            self._record_commit(name, group, tp.partition, offset, t0, t)

    def _poll_error(self, name: str, e: KafkaError) -> None:
        self._poll_failed(name, f"{type(e).__name__}: {e}")
        self._stop_consuming.wait(0.2)

    def _record_seek(
        self,
        consumer: Consumer,
        name: str,
        tp: TopicPartition,
        reason: str,
        positions: dict[int, int],
    ) -> None:
        deadline = time.monotonic() + 120
        while True:
            try:
                offset = consumer.position(tp, timeout_ms=5000)
                break
            except KafkaError:
                if time.monotonic() > deadline or self._stop_consuming.is_set():
                    raise
                time.sleep(0.5)
        positions[tp.partition] = offset
        self._seeked(name, tp.partition, offset, reason)


def _out_of_range_partitions(
    error: KafkaError, topic: str, tps: list[TopicPartition]
) -> list[TopicPartition]:
    """The partition an OFFSET_OUT_OF_RANGE names ("<topic>-<n> position ..."); all of
    them when the message does not say."""
    m = re.search(rf"{re.escape(topic)}-(\d+) position", str(error))
    if m is None:
        return tps
    return [tp for tp in tps if tp.partition == int(m.group(1))]
