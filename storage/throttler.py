"""A byte-rate throttle (Kafka's Throttler), as the cleaner uses for
`log.cleaner.io.max.bytes.per.second`: callers report the bytes they read or
wrote; whenever the bytes of the current period (300 ms) are ahead of the rate,
the caller sleeps until they are not. The clock and the sleep are arguments, so
the logic is tested without waiting."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from .disk_and_clock import plain_monotonic_s

CHECK_INTERVAL_MS = 300
MIN_SLEEP_MS = 1.0


class Throttler:
    def __init__(
        self,
        bytes_per_second: float,
        *,
        check_interval_ms: int = CHECK_INTERVAL_MS,
        clock_ms: Callable[[], float] | None = None,
        sleep_ms: Callable[[float], None] | None = None,
    ) -> None:
        self.rate = bytes_per_second
        self.check_interval_ms = check_interval_ms
        self._clock = clock_ms or (lambda: plain_monotonic_s() * 1000)
        self._sleep = sleep_ms or (lambda ms: time.sleep(ms / 1000))
        self._lock = threading.Lock()
        self._period_start = self._clock()
        self._observed = 0.0
        self.slept_ms = 0.0

    @property
    def unlimited(self) -> bool:
        return self.rate <= 0 or self.rate >= 1e300

    def maybe_throttle(self, observed: float) -> float:
        """Account `observed` bytes; sleeps (and returns) the milliseconds needed to keep
        the rate over the current period. Shared by several threads: the sleep happens
        under the lock, so all of them wait, as in Kafka."""
        if self.unlimited:
            return 0.0
        with self._lock:
            self._observed += observed
            elapsed = self._clock() - self._period_start
            needed = self._observed / (self.rate / 1000)
            sleep = needed - elapsed
            if sleep >= MIN_SLEEP_MS:
                self._sleep(sleep)
                self.slept_ms += sleep
                elapsed += sleep
            else:
                sleep = 0.0
            if elapsed >= self.check_interval_ms:
                # A new period: time spent idle before it earns no burst allowance.
                self._period_start = self._clock()
                self._observed = 0.0
            return sleep


__all__ = ["Throttler"]
