"""The transactional chaos workload (issue 34), after Jepsen's Kafka test: confluent-kafka
transactional producers on the cluster's Kafka listeners, each a consume-transform-produce
loop, and a read_committed observer, writing the history chaos/txn_checker.py judges.

Each worker (one transactional.id) repeats: poll a few records read_committed as a member
of one consumer group, begin a transaction, send 1-2 new values to each of 2-3 partitions
of the topic (the values unique: "<txn id>.<n>"), add the consumer's positions with
send_offsets_to_transaction, then commit — or abort (a share of them, on purpose). Its
polls come before its sends, so in a correct system a transaction reads only what
committed before it began. What commit/abort returned gives the outcome; an error that
leaves it open (a timeout, a fatal error) makes it "unknown", and the producer is made
again under the same transactional.id (init_transactions fences the old one and aborts
what it left open). After a transaction that did not commit, the consumer goes back to
the group's committed offsets, as an exactly-once application does.

The observer reads every partition from offset 0, read_committed, without a group,
recording each record. At the end every worker's transactional.id is initialised once
more (no transaction stays open), and the final read takes every partition, read_committed,
from 0 to its end once the last stable offset has reached the high watermark.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from .workload import History

OPERATION_TIMEOUT_S = 30.0
FINAL_STALL_S = 20.0
# librdkafka's send_offsets_to_transaction can block past its timeout for good when the
# group coordinator it cached went away (its issues 5456 and 5511: the coordinator
# request's timeout is never checked; a broker dropped from metadata never re-triggers
# the lookup). A fenced broker leaves Kafka's metadata, so the nemeses trigger it.
HUNG_CALL_S = OPERATION_TIMEOUT_S + 15.0


class HungCall(Exception):
    """A librdkafka call that did not return within HUNG_CALL_S."""


def bounded(call: Any, name: str, timeout_s: float = HUNG_CALL_S) -> Any:
    """`call()` on a thread of its own, waited for `timeout_s`: its result or its
    exception; HungCall if it is still inside librdkafka (the thread is left there)."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as e:  # noqa: BLE001 - handed to the caller below
            box["error"] = e

    t = threading.Thread(target=run, name=name, daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        raise HungCall(f"{name} did not return in {timeout_s:.0f} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


@dataclass
class TxnConfig:
    bootstrap: str
    topic: str
    partitions: int = 6
    workers: int = 3
    rate: float = 5.0  # transactions per second per worker
    seed: int = 0
    abort_share: float = 0.1
    max_reads: int = 20
    transaction_timeout_ms: int = 20_000


@dataclass
class TxnWorkload:
    config: TxnConfig
    history: History
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _stop_observer: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)
    _observer: threading.Thread | None = None
    _final_records: int = 0  # records the final read returned (its progress)

    def start(self) -> None:
        for i in range(self.config.workers):
            t = threading.Thread(target=self._worker, args=(i,), name=f"txn-w{i}", daemon=True)
            self._threads.append(t)
            t.start()
        self._observer = threading.Thread(target=self._observe, name="txn-observer", daemon=True)
        self._observer.start()

    def stop_workers(self, timeout_s: float = 120.0) -> list[str]:
        """Stop the workers; the names of those still running after `timeout_s`."""
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        stuck = []
        for t in self._threads:
            t.join(max(0.1, deadline - time.monotonic()))
            if t.is_alive():
                self.errors.append(f"{t.name} did not stop in {timeout_s:.0f} s")
                stuck.append(t.name)
        return stuck

    def stop(self) -> None:
        self._stop.set()
        self._stop_observer.set()
        if self._observer is not None:
            self._observer.join(30)

    # --- the transactional workers --------------------------------------------------

    def _transactional_id(self, index: int) -> str:
        return f"txnchaos-{self.config.topic}-{index}"

    def _producer(self, index: int) -> Any:
        """A producer whose init_transactions succeeded, retried until then (for at most
        90 s once the workload is stopping)."""
        import confluent_kafka as ck

        c = self.config
        started = time.monotonic()
        while True:
            producer = ck.Producer(
                {
                    "bootstrap.servers": c.bootstrap,
                    "client.id": f"txnchaos-w{index}",
                    "transactional.id": self._transactional_id(index),
                    "transaction.timeout.ms": c.transaction_timeout_ms,
                    "linger.ms": 5,
                    "log_level": 3,
                }
            )
            try:
                producer.init_transactions(OPERATION_TIMEOUT_S)
                return producer
            except ck.KafkaException as e:
                self._error(f"w{index} init_transactions: {e.args[0].name()}")
                if self._stop.is_set() and time.monotonic() > started + 90:
                    raise
                time.sleep(1)

    def _consumer(self, index: int) -> Any:
        import confluent_kafka as ck

        c = self.config
        consumer = ck.Consumer(
            {
                "bootstrap.servers": c.bootstrap,
                "client.id": f"txnchaos-c{index}",
                "group.id": f"txnchaos-{c.topic}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 10_000,
                "heartbeat.interval.ms": 1_000,
                "fetch.wait.max.ms": 100,
                "log_level": 3,
            }
        )
        consumer.subscribe([c.topic])
        return consumer

    def _worker(self, index: int) -> None:
        import confluent_kafka as ck

        c = self.config
        rng = random.Random(f"{c.seed}-w{index}")
        try:
            producer = self._producer(index)
            consumer = self._consumer(index)
        except ck.KafkaException:
            return
        n = 0
        try:
            while not self._stop.is_set():
                started = time.monotonic()
                producer = self._one(index, f"t{index}-{n}", rng, producer, consumer)
                n += 1
                self._stop.wait(max(0.0, 1.0 / c.rate - (time.monotonic() - started)))
        except Exception as e:  # noqa: BLE001 - the worker ends; the run reports it
            self._error(f"w{index} stopped: {type(e).__name__}: {e}")
        finally:
            # A fenced or failed producer raises here: said in the report, and the
            # consumer is still closed and the id still fenced below.
            try:
                producer.flush(5)
            except ck.KafkaException as e:
                self._error(f"w{index} final flush: {e.args[0].name()}: {e.args[0].str()}")
            consumer.close()
            # Whatever this id left open is aborted now (a new epoch fences it), so the
            # last stable offset can reach the high watermark.
            try:
                self._producer(index).flush(1)
            except ck.KafkaException as e:
                self._error(f"w{index} final init_transactions: {e}")

    def _one(self, index: int, txn: str, rng: random.Random, producer: Any, consumer: Any) -> Any:
        """One transaction; returns the producer to use next (a new one after an error
        that left this one unusable)."""
        import confluent_kafka as ck

        c = self.config
        begin = time.time()
        reads = []
        for m in consumer.consume(rng.randint(1, c.max_reads), 0.1):
            if m.error() is None:
                reads.append([m.partition(), m.offset(), m.value().decode(), time.time()])
        writes: list[list[Any]] = []

        def delivered(err: Any, msg: Any, record: list[Any]) -> None:
            if err is None:
                record[2] = msg.offset()

        outcome, commit_at, error, phase = "unknown", None, None, "send"
        try:
            producer.begin_transaction()
            for p in rng.sample(range(c.partitions), rng.randint(2, min(3, c.partitions))):
                for _ in range(rng.randint(1, 2)):
                    record = [p, f"{txn}.{len(writes)}", None]
                    writes.append(record)
                    producer.produce(
                        c.topic,
                        value=record[1].encode(),
                        partition=p,
                        on_delivery=lambda err, msg, record=record: delivered(err, msg, record),
                    )
            producer.poll(0)
            if reads:
                positions = consumer.position(consumer.assignment())
                group = consumer.consumer_group_metadata()
                bounded(
                    lambda: producer.send_offsets_to_transaction(
                        positions, group, OPERATION_TIMEOUT_S
                    ),
                    f"w{index} send_offsets_to_transaction",
                )
            if rng.random() < c.abort_share:
                phase = "abort"
                producer.abort_transaction(OPERATION_TIMEOUT_S)
                outcome = "aborted"
            else:
                phase = "commit"
                commit_at = time.time()
                producer.commit_transaction(OPERATION_TIMEOUT_S)
                outcome = "committed"
        except ck.KafkaException as e:
            err = e.args[0]
            error = f"{phase}: {err.name()}: {err.str()}"[:300]
            outcome, producer = self._recover(index, producer, err, phase)
        except HungCall as e:
            # The outcome is unknown; a new producer with the same transactional id
            # fences the stuck one and aborts what it left open.
            error = f"{phase}: {e} (librdkafka issues 5456/5511)"
            self._error(f"w{index}: {error}")
            outcome, producer = "unknown", self._producer(index)
        producer.poll(0)  # the delivery reports still due
        self.history.append(
            {
                "type": "txn",
                "process": f"w{index}",
                "id": txn,
                "outcome": outcome,
                "begin": begin,
                "commit_at": commit_at,
                "end": time.time(),
                "reads": reads,
                "writes": writes,
                "error": error,
            }
        )
        if outcome != "committed":
            self._rewind(index, consumer)
        return producer

    def _recover(self, index: int, producer: Any, err: Any, phase: str) -> tuple[str, Any]:
        """(outcome, producer) after a failed send/commit/abort, as librdkafka's
        transactional API documents: retry a retriable commit, abort an abortable
        transaction, make a new producer after anything else."""
        import confluent_kafka as ck

        try:
            if phase == "commit" and err.retriable():
                for _ in range(3):
                    try:
                        producer.commit_transaction(OPERATION_TIMEOUT_S)
                        return "committed", producer
                    except ck.KafkaException as again:
                        err = again.args[0]
                        if not err.retriable():
                            break
            if err.txn_requires_abort() or (phase == "abort" and err.retriable()):
                producer.abort_transaction(OPERATION_TIMEOUT_S)
                return "aborted", producer
        except ck.KafkaException as e:
            self._error(f"w{index} recovering from {phase}: {e.args[0].name()}")
        # Fatal, or retries spent: the outcome stays unknown; a new producer fences this one.
        producer.purge()
        return "unknown", self._producer(index)

    def _rewind(self, index: int, consumer: Any) -> None:
        """Back to the group's committed offsets (the log start without one)."""
        import confluent_kafka as ck

        try:
            assigned = consumer.assignment()
            if not assigned:
                return
            for tp in consumer.committed(assigned, timeout=10):
                offset = tp.offset if tp.offset >= 0 else ck.OFFSET_BEGINNING
                consumer.seek(ck.TopicPartition(tp.topic, tp.partition, offset))
        except ck.KafkaException as e:
            self._error(f"w{index} rewind: {e.args[0].name()}")

    def _error(self, text: str) -> None:
        if len(self.errors) < 1000:
            self.errors.append(text)

    # --- readers --------------------------------------------------------------------

    def _reader(self, name: str, eof: bool) -> Any:
        import confluent_kafka as ck

        c = self.config
        consumer = ck.Consumer(
            {
                "bootstrap.servers": c.bootstrap,
                "client.id": f"txnchaos-{name}",
                "group.id": f"txnchaos-{name}-unused",  # required; no group APIs are used
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "auto.offset.reset": "error",
                "enable.partition.eof": eof,
                "fetch.wait.max.ms": 200,
                "log_level": 3,
                "error_cb": lambda err: self._error(f"{name}: {err}"[:300]),
            }
        )
        consumer.assign([ck.TopicPartition(c.topic, p, 0) for p in range(c.partitions)])
        return consumer

    def _read(self, name: str, consumer: Any, timeout_s: float) -> list[Any]:
        """One consume call: records appended to the history as `read` events, an offset
        reset as a `reset` (back to 0); returns the partition-EOF events."""
        import confluent_kafka as ck

        eofs = []
        for m in consumer.consume(500, timeout_s):
            err = m.error()
            if err is None:
                value = m.value()
                if name == "final":
                    self._final_records += 1
                self.history.append(
                    {
                        "type": "read",
                        "process": name,
                        "partition": m.partition(),
                        "offset": m.offset(),
                        "value": value.decode() if value is not None else None,
                        "t": time.time(),
                    }
                )
            elif err.code() == ck.KafkaError._PARTITION_EOF:
                eofs.append(m)
            else:
                self._error(f"{name}: {err.name()}: {err.str()}"[:300])
                if err.code() == ck.KafkaError._AUTO_OFFSET_RESET and m.partition() is not None:
                    consumer.seek(ck.TopicPartition(self.config.topic, m.partition(), 0))
                    self.history.append(
                        {"type": "reset", "process": name, "partition": m.partition()}
                    )
        return eofs

    def _observe(self) -> None:
        consumer = self._reader("observer", eof=False)
        try:
            while not self._stop_observer.is_set():
                self._read("observer", consumer, 0.5)
        finally:
            consumer.close()

    def end_offsets(self, timeout_s: float) -> dict[int, int] | None:
        """Every partition's high watermark once its last stable offset reached it (no
        transaction open), or None when that did not happen in time."""
        import confluent_kafka as ck

        c = self.config
        probes = {
            level: ck.Consumer(
                {
                    "bootstrap.servers": c.bootstrap,
                    "group.id": "txnchaos-probe",
                    "isolation.level": level,
                    "log_level": 3,
                }
            )
            for level in ("read_committed", "read_uncommitted")
        }
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline:
                try:
                    got = {
                        level: {
                            p: probe.get_watermark_offsets(
                                ck.TopicPartition(c.topic, p), timeout=10, cached=False
                            )[1]
                            for p in range(c.partitions)
                        }
                        for level, probe in probes.items()
                    }
                except ck.KafkaException:
                    time.sleep(1)
                    continue
                if got["read_committed"] == got["read_uncommitted"]:
                    return got["read_uncommitted"]
                time.sleep(1)
            return None
        finally:
            for probe in probes.values():
                probe.close()

    def final_read(self, timeout_s: float) -> bool:
        """Read every partition read_committed from 0 to its end (a `final` event says
        whether every partition was read to its end offset). A reader that gets nothing
        for FINAL_STALL_S is replaced by a new one, which starts over (a `reset`)."""
        ends = self.end_offsets(timeout_s / 2)
        if ends is None:
            self.history.append({"type": "final", "complete": False, "why": "LSO below HW"})
            return False
        done: dict[int, int] = {}
        deadline = time.monotonic() + timeout_s / 2
        attempts = 0
        while time.monotonic() < deadline and len(done) < len(ends):
            attempts += 1
            if attempts > 1:
                for p in range(self.config.partitions):
                    self.history.append({"type": "reset", "process": "final", "partition": p})
            done = {}
            consumer = self._reader("final", eof=True)
            progress = time.monotonic()
            try:
                while time.monotonic() < deadline and len(done) < len(ends):
                    before = self._final_records
                    for m in self._read("final", consumer, 0.5):
                        if m.offset() >= ends[m.partition()]:
                            done[m.partition()] = m.offset()
                    if self._final_records > before or done:
                        progress = time.monotonic()
                    elif time.monotonic() - progress > FINAL_STALL_S:
                        self._error(f"final read: nothing for {FINAL_STALL_S:.0f} s, a new reader")
                        break
            finally:
                consumer.close()
        complete = len(done) == len(ends)
        self.history.append(
            {
                "type": "final",
                "complete": complete,
                "end_offsets": ends,
                "reached": done,
                "attempts": attempts,
            }
        )
        return complete
