"""IdleMeter (node/idle_meter.py) on a clock the test drives: the idle share of a pool
over its window, waits in progress counted up to now."""

from __future__ import annotations

import pytest

from seglog.node.idle_meter import IdleMeter


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_one_thread_idle_half_the_time() -> None:
    clock = Clock()
    meter = IdleMeter(1, window_s=10, clock=clock)
    for _ in range(4):
        meter.idle(0)
        clock.t += 1
        meter.busy(0)
        clock.t += 1
    assert meter.ratio() == pytest.approx(0.5)


def test_a_wait_in_progress_counts_up_to_now() -> None:
    clock = Clock()
    meter = IdleMeter(2, window_s=10, clock=clock)
    meter.idle(0)  # thread 0 waits the whole time, thread 1 never does
    clock.t += 4
    assert meter.ratio() == pytest.approx(0.5)
    assert meter.idle_seconds() == pytest.approx(4)


def test_the_window_forgets_older_idle_time() -> None:
    clock = Clock()
    meter = IdleMeter(1, window_s=5, clock=clock)
    meter.idle(0)
    for _ in range(10):  # idle for 10 s, sampled each second
        clock.t += 1
        meter.ratio()
    meter.busy(0)
    for _ in range(5):  # then busy for 5 s: the window holds only busy time
        clock.t += 1
        ratio = meter.ratio()
    assert ratio == pytest.approx(0.0)


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ValueError, match="at least one thread"):
        IdleMeter(0)
    with pytest.raises(ValueError, match="window must be positive"):
        IdleMeter(1, window_s=0)
