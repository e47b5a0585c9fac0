"""The chaos workload with a real Kafka client (`--client librdkafka`): confluent-kafka
idempotent producers (acks=all), assigned consumers and members of one consumer
group that commit what they read, on the cluster's Kafka listeners, writing the same
history events as `workload.Workload` (see there), so the same checker judges them.

A send's outcome comes from librdkafka's delivery report. `definite` (the record
certainly never reached a node) is True only for errors librdkafka reports before
any attempt went out (the queue was full, the message too large for the client) or
for a node's refusal before any append (MSG_SIZE_TOO_LARGE, INVALID_RECORD, ...);
every timeout, transport error and "possibly persisted" outcome is indeterminate.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Any

from .implicit_acks import ImplicitAckRecorder
from .workload import WorkloadState

_DEFINITE = frozenset(
    {
        "MSG_SIZE_TOO_LARGE",
        "_MSG_SIZE_TOO_LARGE",
        "INVALID_RECORD",
        "INVALID_REQUIRED_ACKS",
        "TOPIC_AUTHORIZATION_FAILED",
        "_QUEUE_FULL",
        "_UNKNOWN_PARTITION",
    }
)


def delivered_offset(offset: int | None) -> int | None:
    """A delivery report's offset, None when the record was acknowledged implicitly, at
    no offset librdkafka knows: librdkafka reports OFFSET_INVALID (-1001), which
    confluent-kafka's `Message.offset()` hands over as None."""
    return offset if offset is not None and offset >= 0 else None


def classify(error: Any) -> tuple[str, bool]:
    """(description, definite) of a delivery error."""
    name = error.name()
    return f"{name}: {error.str()}", name in _DEFINITE


@dataclass
class KafkaWorkload(WorkloadState):
    """The Workload interface (start, stop_producers, drain, final_read, stop)."""

    _implicit_acks: list[ImplicitAckRecorder] = field(default_factory=list)

    def start(self) -> None:
        import confluent_kafka as ck

        c = self.config
        for i in range(c.producers):
            name = f"p{i}"
            recorder = ImplicitAckRecorder(
                name, self.history.append, sys.stderr, self.history.append
            )
            producer = ck.Producer(
                {
                    "bootstrap.servers": c.bootstrap,
                    "client.id": f"chaos-{name}",
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 5,
                    "request.timeout.ms": c.request_timeout_ms,
                    "message.timeout.ms": c.delivery_timeout_ms,
                    "retry.backoff.ms": 100,
                    # librdkafka's own account of its idempotence (PID, drains, epoch
                    # bumps and the answer that caused them) goes to the run's log: a
                    # duplicate found by the checker can then be traced to its cause;
                    # its implicit acknowledgements become history events the checker
                    # holds against the log (chaos/implicit_acks.py).
                    "debug": "eos",
                    "log_level": 7,
                    "logger": recorder.logger(),
                }
            )
            self._implicit_acks.append(recorder)
            self._add_producer(i, name, producer)
        self._start_threads()

    # --- producing ----------------------------------------------------------------------

    def _produce_loop(self, index: int, name: str, producer: Any) -> None:
        c = self.config
        recorder = self._implicit_acks[index]
        outstanding = self._outstanding[index]

        def delivered(err: Any, msg: Any, value: str, partition: int, started: float) -> None:
            if err is None:
                offset = delivered_offset(msg.offset())
                self._acked(name, value, partition, msg.partition(), offset, started, outstanding)
            else:
                text, definite = classify(err)
                self._failed(name, value, partition, started, outstanding, text[:300], definite)

        # librdkafka counts poll's timeout in whole milliseconds: a shorter wait would be
        # poll(0), a busy loop that starves the nodes of CPU.
        for _rng, partition, value in self._paced_sends(
            index,
            name,
            lambda s: producer.poll(min(max(s, 0.001), 0.05)),
            lambda: producer.poll(0),
        ):
            started = time.time()
            self._invoked(name, value, partition, started)

            def report(
                err: Any,
                msg: Any,
                value: str = value,
                partition: int = partition,
                started: float = started,
            ) -> None:
                try:
                    delivered(err, msg, value, partition, started)
                except Exception as e:  # noqa: BLE001 - see ImplicitAckRecorder.emit
                    self.errors.append(f"delivery callback: {type(e).__name__}: {e}")

            try:
                producer.produce(
                    c.topic, value=value.encode(), partition=partition, on_delivery=report
                )
                recorder.sent(partition, value)
            except Exception as e:  # noqa: BLE001 - refused before it was queued
                error = f"{type(e).__name__}: {e}"
                self._failed(name, value, partition, started, outstanding, error, True)

    def stop_producers(self, timeout_s: float = 90.0) -> None:
        deadline = self._stop_sending(timeout_s)
        for producer in self._producers:
            left = producer.flush(max(0.1, deadline - time.monotonic()))
            if left:
                self.errors.append(f"producer flush: {left} messages without an outcome")
        for producer in self._producers:
            # Anything still queued fails now (indeterminate), reported by its callback.
            producer.purge()
            producer.flush(1)
        self._producers.clear()  # destroyed now, not while the cluster goes down
        for recorder in self._implicit_acks:
            self.errors.extend(f"{recorder.process}: {e}" for e in recorder.callback_errors)

    # --- consuming ----------------------------------------------------------------------

    def _consume_loop(self, name: str, until: dict[int, int] | None) -> None:
        import confluent_kafka as ck

        c = self.config
        consumer = ck.Consumer(
            {
                "bootstrap.servers": c.bootstrap,
                "client.id": f"chaos-{name}",
                "group.id": f"chaos-{name}-unused",  # required by the client; no group APIs
                "enable.auto.commit": False,
                # An out-of-range position is an error we record, never a silent jump.
                "auto.offset.reset": "error",
                "fetch.wait.max.ms": 200,
                "log_level": 3,
            }
        )
        positions: dict[int, int] = {}
        with self._positions_lock:
            self._positions[name] = positions
        try:
            consumer.assign([ck.TopicPartition(c.topic, p, 0) for p in range(c.partitions)])
            for p in range(c.partitions):
                positions[p] = 0
                self._seeked(name, p, 0, "start")
            while not self._stop_consuming.is_set():
                if until is not None and all(
                    positions.get(p, 0) >= end for p, end in until.items()
                ):
                    break
                msgs = consumer.consume(500, 0.5)
                now = time.time()
                for m in msgs:
                    err = m.error()
                    if err is not None:
                        if err.code() == ck.KafkaError._PARTITION_EOF:
                            continue
                        self._poll_failed(name, f"{err.name()}: {err.str()}")
                        if (
                            err.code() == ck.KafkaError._AUTO_OFFSET_RESET
                            and m.partition() is not None
                        ):
                            p = m.partition()
                            consumer.seek(ck.TopicPartition(c.topic, p, 0))
                            positions[p] = 0
                            self._seeked(name, p, 0, "out-of-range")
                        continue
                    self._record_poll(name, m, now)
                    positions[m.partition()] = m.offset() + 1
        finally:
            consumer.close()

    def _record_poll(self, name: str, m: Any, now: float, group: str | None = None) -> None:
        """One `poll` event for a message read (with the consumer's group, if any)."""
        value = m.value()
        event = {
            "type": "poll",
            "t": now,
            "process": name,
            "partition": m.partition(),
            "offset": m.offset(),
            "value": value.decode() if isinstance(value, bytes) else value,
        }
        if group is not None:
            event["group"] = group
        self.history.append(event)

    # --- a consumer group ---------------------------------------------------------------

    def _group_loop(self, name: str) -> None:
        """A member of the topic's group ("<topic>-group", Kafka's classic protocol):
        consume, record, commit what was read synchronously. As in `Workload`, a newly
        assigned partition is recorded as a seek to the group's committed offset (the
        log start when nothing is committed), an acknowledged commit as `commit`."""
        import confluent_kafka as ck

        c = self.config
        group = f"{c.topic}-group"
        consumer = ck.Consumer(
            {
                "bootstrap.servers": c.bootstrap,
                "client.id": f"chaos-{name}",
                "group.id": group,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": 10_000,
                "heartbeat.interval.ms": 1_000,
                "fetch.wait.max.ms": 200,
                "log_level": 3,
            }
        )
        # Partitions this member holds now. A batch may still carry records of a
        # partition revoked while it was being collected: they are recorded (they were
        # read) but never committed, since the partition's new owner commits it now.
        owned: set[int] = set()

        def on_assign(consumer: Any, partitions: list[Any]) -> None:
            for tp in partitions:
                owned.add(tp.partition)
                self._record_group_start(consumer, name, group, tp.partition)

        def on_revoke(consumer: Any, partitions: list[Any]) -> None:
            owned.difference_update(tp.partition for tp in partitions)

        try:
            consumer.subscribe([c.topic], on_assign=on_assign, on_revoke=on_revoke)
            while not self._stop_consuming.is_set():
                msgs = consumer.consume(500, 0.2)
                now = time.time()
                offsets: dict[int, int] = {}
                for m in msgs:
                    err = m.error()
                    if err is not None:
                        self._poll_failed(name, f"{err.name()}: {err.str()}")
                        continue
                    self._record_poll(name, m, now, group)
                    offsets[m.partition()] = m.offset() + 1
                mine = {p: o for p, o in offsets.items() if p in owned}
                if mine:
                    self._group_commit(consumer, name, group, mine)
        finally:
            consumer.close()

    def _record_group_start(self, consumer: Any, name: str, group: str, partition: int) -> None:
        """Where a newly assigned partition starts (None when the cluster cannot say
        now: the member's next read sets the expectation)."""
        import confluent_kafka as ck

        tp = ck.TopicPartition(self.config.topic, partition)
        offset: int | None = None
        try:
            got = consumer.committed([tp], timeout=10)[0]
            if got.error is None and got.offset >= 0:
                offset = got.offset
            elif got.error is None:  # nothing committed: auto.offset.reset=earliest
                offset = consumer.get_watermark_offsets(tp, timeout=5, cached=False)[0]
        except ck.KafkaException:
            offset = None
        self._seeked(name, partition, offset, "assigned", group)

    def _group_commit(self, consumer: Any, name: str, group: str, offsets: dict[int, int]) -> None:
        import confluent_kafka as ck

        topic = self.config.topic
        t0 = time.time()
        try:
            done = consumer.commit(
                offsets=[ck.TopicPartition(topic, p, o) for p, o in sorted(offsets.items())],
                asynchronous=False,
            )
        except ck.KafkaException as e:  # not acknowledged: whether it took effect is unknown
            code = e.args[0].name() if e.args else type(e).__name__
            self._record_commit_error(name, group, f"{code}: {e}", t0)
            return
        t = time.time()
        for tp in done or []:
            if tp.error is not None:
                error = f"{tp.error.name()}: {tp.error.str()}"
                self._record_commit_error(name, group, error, t0, tp.partition)
            else:
                self._record_commit(name, group, tp.partition, tp.offset, t0, t)
