"""Produce errors made visible: every partition a Produce answer refuses is counted per
error code (Kafka's `ErrorsPerSec{request=Produce,error=...}`) and logged at WARNING,
at most one line per error code and interval, so a run's report can say which errors
clients saw without one line per refused batch (docs/replication-rules.md, "Produce
errors")."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from seglog.storage.disk_and_clock import plain_monotonic_s

from .event_log import EventLogger

_log = EventLogger("produce")

LOG_INTERVAL_S = 10.0


@dataclass(slots=True)
class _Window:
    logged_at: float
    suppressed: int = 0


class LogWindows:
    """Which reports to log: the first of a key, then the first after each interval, with
    how many were passed over since. Time is an input; no I/O."""

    def __init__(self, interval_s: float = LOG_INTERVAL_S, max_keys: int = 1024) -> None:
        self.interval_s = interval_s
        self.max_keys = max_keys  # error codes are few; the bound only guards the dict
        self._windows: dict[str, _Window] = {}

    def admit(self, key: str, now: float) -> int | None:
        """None: pass this one over. Otherwise log it, with the returned count of reports
        passed over since the last line for `key`."""
        window = self._windows.get(key)
        if window is None:
            if len(self._windows) >= self.max_keys:
                self._windows.clear()
            self._windows[key] = _Window(now)
            return 0
        if now - window.logged_at < self.interval_s:
            window.suppressed += 1
            return None
        suppressed, window.logged_at, window.suppressed = window.suppressed, now, 0
        return suppressed


class ProduceErrorLog:
    """Called by both listeners for each refused partition of a Produce answer."""

    def __init__(
        self, interval_s: float = LOG_INTERVAL_S, clock: Callable[[], float] = plain_monotonic_s
    ) -> None:
        self._windows = LogWindows(interval_s)
        self._clock = clock
        self._lock = threading.Lock()
        # The node's counter (NodeMetrics.produce_error), set when metrics are on.
        self.count: Callable[[str], None] | None = None

    def report(
        self, listener: str, topic: str, partition: int, error: str, message: str = ""
    ) -> None:
        if self.count is not None:
            self.count(error)
        with self._lock:
            suppressed = self._windows.admit(error, self._clock())
        if suppressed is not None:
            _log.warning(
                "produce_error",
                listener=listener,
                topic=topic,
                partition=partition,
                error=error,
                message=message,
                same_error_not_logged=suppressed,
            )
