"""Rows sent one by one with seglog's Producer: the sink's path for PySpark 4.0's
streaming writers (which get Rows) and for the exactly-once mode (whose transactions
the Producer carries; txn_sink.py)."""

from __future__ import annotations

import threading
from typing import Any

from seglog.client.future import FutureRecordMetadata
from seglog.client.producer import Producer

from .options import SinkOptions


def _as_bytes(v: Any) -> bytes | None:
    return v.encode("utf-8") if isinstance(v, str) else v


class RecordSender:
    """One task's producer (its own, or `producer`): sends rows, fails fast on the
    first failed record."""

    def __init__(self, options: SinkOptions, producer: Producer | None = None) -> None:
        self.options = options
        self.producer = producer or Producer(options.bootstrap_servers, **options.producer_config)
        self.sent = 0
        self._error: BaseException | None = None
        self._lock = threading.Lock()
        self._partitions: dict[str, set[int]] = {}

    def _on_error(self, e: BaseException) -> None:
        with self._lock:
            self._error = self._error or e

    def check(self) -> None:
        if self._error is not None:
            raise RuntimeError(f"writing to seglog failed: {self._error}") from self._error

    def send_row(self, row: dict[str, Any]) -> FutureRecordMetadata:
        """A row as a dict of the sink's columns (Row.asDict, Arrow's to_pylist)."""
        return self.send(
            row.get("topic"), row.get("partition"), row.get("key"), row.get("value"),
            row.get("headers"),
        )  # fmt: skip

    def send(
        self,
        topic: str | None,
        partition: int | None,
        key: Any,
        value: Any,
        headers: list[dict[str, Any]] | None,
    ) -> FutureRecordMetadata:
        self.check()
        topic = self.options.topic or topic
        if not topic:
            raise ValueError("a row has a null topic and no topic option is set")
        if partition is not None:
            known = self._partitions.get(topic)
            if known is None:
                known = self._partitions[topic] = self.producer.partitions_for(topic)
            if partition not in known:
                raise ValueError(
                    f"partition {partition} does not exist in topic {topic!r} "
                    f"(it has partitions {sorted(known)})"
                )
        future = self.producer.send(
            topic,
            value=_as_bytes(value),
            key=_as_bytes(key),
            headers=[(h["key"], h["value"]) for h in headers] if headers else None,
            partition=partition,
        )
        future.add_errback(self._on_error)
        self.sent += 1
        return future

    def finish(self) -> int:
        try:
            self.producer.flush()
            self.check()
        finally:
            self.producer.close()
        return self.sent

    def close(self) -> None:
        self.producer.close(timeout=0)
