"""The share of time a pool of threads spent idle, over a sliding window (Kafka's
NetworkProcessorAvgIdlePercent and RequestHandlerAvgIdlePercent, ratios 0..1).

A thread marks where it starts waiting for work (`idle`) and where it got some
(`busy`); the meter keeps the pool's cumulative idle seconds, counting a wait still in
progress up to now, and `ratio()` compares that total with the one it sampled about
`window_s` earlier. No I/O: the clock is an argument."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

from seglog.storage.disk_and_clock import plain_monotonic_s

DEFAULT_WINDOW_S = 30.0
SAMPLE_EVERY_S = 1.0  # ratio() keeps at most one sample a second: bounded memory


class IdleMeter:
    def __init__(
        self,
        threads: int,
        window_s: float = DEFAULT_WINDOW_S,
        clock: Callable[[], float] = plain_monotonic_s,
    ) -> None:
        if threads < 1:
            raise ValueError(f"an idle meter needs at least one thread, got {threads}")
        if window_s <= 0:
            raise ValueError(f"an idle meter's window must be positive, got {window_s}")
        self.threads = threads
        self.window_s = window_s
        self._clock = clock
        self._lock = threading.Lock()
        self._idle_total = 0.0  # seconds of finished waits
        self._idle_since: dict[int, float] = {}  # thread → start of its current wait
        self._samples: deque[tuple[float, float]] = deque([(clock(), 0.0)])

    def idle(self, thread: int) -> None:
        """`thread` starts waiting for work."""
        now = self._clock()
        with self._lock:
            self._idle_since[thread] = now

    def busy(self, thread: int) -> None:
        """`thread` got work (its wait, if any, ends)."""
        now = self._clock()
        with self._lock:
            start = self._idle_since.pop(thread, None)
            if start is not None:
                self._idle_total += now - start

    def idle_seconds(self) -> float:
        """Cumulative idle seconds of the pool, waits in progress included."""
        with self._lock:
            return self._cumulative(self._clock())

    def _cumulative(self, now: float) -> float:
        return self._idle_total + sum(now - s for s in self._idle_since.values())

    def ratio(self) -> float:
        """Idle share of the pool's time over the last window (since the meter was made
        while it is younger than that)."""
        now = self._clock()
        with self._lock:
            cumulative = self._cumulative(now)
            samples = self._samples
            # Keep the newest sample at least a window old as the reference.
            while len(samples) >= 2 and now - samples[1][0] >= self.window_s:
                samples.popleft()
            t0, c0 = samples[0]
            if now - samples[-1][0] >= SAMPLE_EVERY_S:
                samples.append((now, cumulative))
        elapsed = (now - t0) * self.threads
        if elapsed <= 0:
            return 1.0
        return min(1.0, max(0.0, (cumulative - c0) / elapsed))
