"""The chaos workload with a real Kafka client (`--client librdkafka`): confluent-kafka
idempotent producers (acks=all) and assigned consumers on the cluster's Kafka
listeners, writing the same history events as `workload.Workload` (see there), so
the same checker judges them.

A send's outcome comes from librdkafka's delivery report. `definite` (the record
certainly never reached a node) is True only for errors librdkafka reports before
any attempt went out (the queue was full, the message too large for the client) or
for a node's refusal before any append (MSG_SIZE_TOO_LARGE, INVALID_RECORD, ...);
every timeout, transport error and "possibly persisted" outcome is indeterminate.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass
from typing import Any

from .workload import PartitionSlots, WorkloadState, _ProducerStats

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


def classify(error: Any) -> tuple[str, bool]:
    """(description, definite) of a delivery error."""
    name = error.name()
    return f"{name}: {error.str()}", name in _DEFINITE


@dataclass
class KafkaWorkload(WorkloadState):
    """The Workload interface (start, stop_producers, drain, final_read, stop)."""

    def start(self) -> None:
        import confluent_kafka as ck

        c = self.config
        for i in range(c.producers):
            name = f"p{i}"
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
                    "log_level": 3,
                }
            )
            self._producers.append(producer)
            self._outstanding.append(PartitionSlots(c.max_outstanding, c.partitions))
            self.stats[name] = _ProducerStats()
            th = threading.Thread(
                target=self._guard(self._produce_loop),
                args=(i, name, producer),
                name=f"chaos-{name}",
                daemon=True,
            )
            self._producer_threads.append(th)
        for i in range(c.consumers):
            th = threading.Thread(
                target=self._guard(self._consume_loop),
                args=(f"c{i}", None),
                name=f"chaos-c{i}",
                daemon=True,
            )
            self._threads.append(th)
        for th in self._producer_threads + self._threads:
            th.start()

    # --- producing ----------------------------------------------------------------------

    def _produce_loop(self, index: int, name: str, producer: Any) -> None:
        c = self.config
        rng = random.Random(f"{c.seed}-{name}")
        outstanding = self._outstanding[index]
        stats = self.stats[name]
        interval = 1.0 / c.rate if c.rate > 0 else 0.0
        next_at = time.monotonic()
        seq = 0
        while not self._stop_producing.is_set():
            producer.poll(0)
            now = time.monotonic()
            if now < next_at:
                producer.poll(min(next_at - now, 0.05))
                continue
            next_at = max(next_at + interval, now - 1.0)
            partition = rng.randrange(c.partitions)
            if not outstanding.take(partition, 0.05):
                continue
            value = f"{name}-{seq}"
            seq += 1
            started = time.time()
            self.history.append(
                {
                    "type": "invoke",
                    "t": started,
                    "process": name,
                    "value": value,
                    "partition": partition,
                }
            )
            stats.invoked += 1

            def report(
                err: Any,
                msg: Any,
                value: str = value,
                partition: int = partition,
                started: float = started,
            ) -> None:
                outstanding.give(partition)
                now = time.time()
                if err is None:
                    stats.acked += 1
                    self.history.append(
                        {
                            "type": "ok",
                            "t": now,
                            "process": name,
                            "value": value,
                            "partition": msg.partition(),
                            "offset": msg.offset(),
                            "t0": started,
                            "latency": round(now - started, 4),
                        }
                    )
                else:
                    stats.failed += 1
                    text, definite = classify(err)
                    self.history.append(
                        {
                            "type": "fail",
                            "process": name,
                            "value": value,
                            "partition": partition,
                            "error": text[:300],
                            "definite": definite,
                            "t0": started,
                        }
                    )

            try:
                producer.produce(
                    c.topic, value=value.encode(), partition=partition, on_delivery=report
                )
            except Exception as e:  # noqa: BLE001 - refused before it was queued
                outstanding.give(partition)
                stats.failed += 1
                self.history.append(
                    {
                        "type": "fail",
                        "process": name,
                        "value": value,
                        "partition": partition,
                        "error": f"{type(e).__name__}: {e}",
                        "definite": True,
                        "t0": started,
                    }
                )

    def stop_producers(self, timeout_s: float = 90.0) -> None:
        self._stop_producing.set()
        for th in self._producer_threads:
            th.join(10)
        deadline = time.monotonic() + timeout_s
        for producer in self._producers:
            left = producer.flush(max(0.1, deadline - time.monotonic()))
            if left:
                self.errors.append(f"producer flush: {left} messages without an outcome")
        for producer in self._producers:
            # Anything still queued fails now (indeterminate), reported by its callback.
            producer.purge()
            producer.flush(1)
        self._producers.clear()  # destroyed now, not while the cluster goes down

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
                self.history.append(
                    {
                        "type": "seek",
                        "process": name,
                        "partition": p,
                        "offset": 0,
                        "reason": "start",
                    }
                )
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
                        self.history.append(
                            {
                                "type": "poll_error",
                                "process": name,
                                "error": f"{err.name()}: {err.str()}"[:300],
                            }
                        )
                        if (
                            err.code() == ck.KafkaError._AUTO_OFFSET_RESET
                            and m.partition() is not None
                        ):
                            p = m.partition()
                            consumer.seek(ck.TopicPartition(c.topic, p, 0))
                            positions[p] = 0
                            self.history.append(
                                {
                                    "type": "seek",
                                    "process": name,
                                    "partition": p,
                                    "offset": 0,
                                    "reason": "out-of-range",
                                }
                            )
                        continue
                    value = m.value()
                    self.history.append(
                        {
                            "type": "poll",
                            "t": now,
                            "process": name,
                            "partition": m.partition(),
                            "offset": m.offset(),
                            "value": value.decode() if isinstance(value, bytes) else value,
                        }
                    )
                    positions[m.partition()] = m.offset() + 1
        finally:
            consumer.close()
