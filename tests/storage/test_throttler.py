"""The cleaner's I/O throttle with a fake clock."""

from __future__ import annotations

from seglog.storage.throttler import Throttler


class Clock:
    def __init__(self) -> None:
        self.ms = 0.0

    def now(self) -> float:
        return self.ms

    def sleep(self, ms: float) -> None:
        self.ms += ms


def test_sleeps_to_hold_the_rate() -> None:
    c = Clock()
    t = Throttler(1000.0, check_interval_ms=100, clock_ms=c.now, sleep_ms=c.sleep)  # 1 KB/s
    total = 0
    for _ in range(100):
        c.ms += 10  # the work itself takes 10 ms per 100 bytes
        t.maybe_throttle(100)
        total += 100
    # 10 KB at 1 KB/s: about 10 s, whatever the work took
    assert 9_500 <= c.ms <= 10_500


def test_no_sleep_below_the_rate_or_when_unlimited() -> None:
    c = Clock()
    t = Throttler(1e6, check_interval_ms=100, clock_ms=c.now, sleep_ms=c.sleep)
    for _ in range(50):
        c.ms += 10
        assert t.maybe_throttle(100) == 0.0
    u = Throttler(1.7976931348623157e308, clock_ms=c.now, sleep_ms=c.sleep)
    assert u.unlimited and u.maybe_throttle(10**12) == 0.0
