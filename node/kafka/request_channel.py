"""Kafka's request channel: the bounded queue between a listener's processors and
its handler threads (a full channel blocks the processor, which stops reading)."""

from __future__ import annotations

import queue
import threading

from .codec import KafkaRequest
from .connection import Connection, Slot

Work = tuple[Connection, KafkaRequest, Slot]


class RequestChannel:
    """The bounded queue between the processors and the handlers."""

    def __init__(self, capacity: int) -> None:
        self._queue: queue.Queue[Work | None] = queue.Queue(capacity)

    def put(self, work: Work, stopped: threading.Event) -> bool:
        # Bounded by `stopped`: a full channel is retried until there is room or shutdown.
        while not stopped.is_set():
            try:
                self._queue.put(work, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def get(self) -> Work | None:
        return self._queue.get()

    def close(self, handlers: int) -> None:
        for _ in range(handlers):
            try:
                self._queue.put_nowait(None)
            except queue.Full:
                break

    def size(self) -> int:
        return self._queue.qsize()
