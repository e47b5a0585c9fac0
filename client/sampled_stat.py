"""Kafka's windowed client statistics: what its `*-avg` and `*-max` metrics read.

Kafka's metrics library (org.apache.kafka.common.metrics.stats.SampledStat, with Avg
and Max) records values into `metrics.num.samples` windows of
`metrics.sample.window.ms` each. A new window starts when the newest is that old. A
reading combines only the windows younger than num_samples × window, so it covers the
last 30-60 s by default, not the client's whole life. A reading with no value in those
windows is NaN, as in Kafka, not 0, which would look like a measurement."""

from __future__ import annotations

import math
import threading
from collections import deque


class _Window:
    __slots__ = ("start", "count", "total", "max")

    def __init__(self, start: float) -> None:
        self.start = start
        self.count = 0
        self.total = 0.0
        self.max = -math.inf


class SampledStat:
    """Avg and Max over the last `num_samples` windows of `window_s` seconds. Time
    (monotonic seconds) is an input. Recorded by one thread and read by any: a lock
    guards the windows."""

    __slots__ = ("_window_s", "_expire_s", "_windows", "_lock")

    def __init__(self, num_samples: int = 2, window_s: float = 30.0) -> None:
        if num_samples < 1 or window_s <= 0:
            raise ValueError(
                f"num_samples must be at least 1 and window_s positive, "
                f"got {num_samples} and {window_s}"
            )
        self._window_s = window_s
        self._expire_s = num_samples * window_s
        self._windows: deque[_Window] = deque(maxlen=num_samples)
        self._lock = threading.Lock()

    def record(self, value: float, now: float) -> None:
        with self._lock:
            windows = self._windows
            if not windows or now - windows[-1].start >= self._window_s:
                windows.append(_Window(now))  # the oldest falls out (maxlen)
            w = windows[-1]
            w.count += 1
            w.total += value
            if value > w.max:
                w.max = value

    def _live(self, now: float) -> list[_Window]:
        # A window is made by a record, so every window holds at least one value.
        return [w for w in self._windows if now - w.start < self._expire_s]

    def avg(self, now: float) -> float:
        with self._lock:
            live = self._live(now)
            count = sum(w.count for w in live)
            return sum(w.total for w in live) / count if count else math.nan

    def max(self, now: float) -> float:
        with self._lock:
            live = self._live(now)
            return max(w.max for w in live) if live else math.nan
