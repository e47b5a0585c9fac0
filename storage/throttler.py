"""A byte-rate throttle (Kafka's Throttler), as the cleaner uses for
`log.cleaner.io.max.bytes.per.second`: callers report the bytes they read or
wrote; once per check interval the observed rate is compared with the target
and the caller sleeps long enough to bring it back. The clock and the sleep are
arguments, so the logic is tested without waiting."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

CHECK_INTERVAL_MS = 100


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
        self._clock = clock_ms or (lambda: time.monotonic() * 1000)
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
        the rate. Shared by several threads: the sleep happens under the lock, so all
        of them wait, as in Kafka."""
        if self.unlimited:
            return 0.0
        with self._lock:
            self._observed += observed
            now = self._clock()
            elapsed = now - self._period_start
            if elapsed < self.check_interval_ms or self._observed <= 0:
                return 0.0
            rate_per_ms = self.rate / 1000
            needed = self._observed / rate_per_ms
            sleep = needed - elapsed
            if sleep > 0:
                self._sleep(sleep)
                self.slept_ms += sleep
            else:
                sleep = 0.0
            self._period_start = self._clock()
            self._observed = 0.0
            return sleep


__all__ = ["Throttler"]
