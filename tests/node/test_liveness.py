"""The broker's own liveness, without processes: the stall watchdog's judgement and
the controller process's pulse gate (node/liveness.py); the real processes are in
tests/kafka/test_frozen_broker.py."""

from __future__ import annotations

import pytest

from seglog.node.liveness import (
    PulseGate,
    StallWatchdog,
    parse_pulse,
    pulse_interval_s,
    pulse_line,
    pulse_max_age_s,
)


def test_the_watchdog_names_the_loop_stalled_longest() -> None:
    w = StallWatchdog(5.0)
    assert w.stalled(0.0) is None
    w.beat("timers", 0.0)
    w.beat("disk", 1.0)
    assert w.stalled(5.0) is None
    assert w.stalled(6.5) == "timers stalled for 6.5 s (bound 5.0 s)"
    w.beat("timers", 6.5)
    assert (w.stalled(6.5) or "").startswith("disk stalled for 5.5 s")
    w.beat("disk", 6.5)
    assert w.stalled(6.5) is None
    w.forget("disk")
    assert w.stalled(7.0) is None
    with pytest.raises(ValueError, match="positive"):
        StallWatchdog(0)


def test_the_gate_opens_on_fresh_pulses_and_closes_on_silence_or_a_stall() -> None:
    g = PulseGate(0.2)
    assert not g.is_open(0.0) and g.why_closed(0.0) == "no pulse from the broker yet"
    g.pulse(1.0)
    assert g.is_open(1.2) and g.changed(1.2) is True and g.changed(1.2) is None
    assert not g.is_open(1.25) and "no pulse from the broker for 0.25 s" in g.why_closed(1.25)
    assert g.changed(1.25) is False
    g.pulse(2.0, "replica timer loop stalled for 6.0 s")
    assert not g.is_open(2.0) and g.stalled_reason is not None
    assert "cannot serve" in g.why_closed(2.0)
    g.pulse(3.0)
    assert g.is_open(3.0) and g.changed(3.0) is True


def test_pulse_lines_round_trip_and_anything_else_is_not_a_pulse() -> None:
    assert parse_pulse(pulse_line(None)) == (True, None)
    assert parse_pulse(pulse_line("disk\nstuck")) == (True, "disk stuck")
    assert parse_pulse(b"hello\n") == (False, None)


def test_a_frozen_broker_is_fenced_within_a_session_and_a_third() -> None:
    # The local profile: 600 ms sessions, 100 ms heartbeats.
    assert pulse_max_age_s(600) == pytest.approx(0.2)
    assert pulse_interval_s(600, 100) == pytest.approx(0.05)
    # Kafka's defaults: 9 s sessions, 2 s heartbeats.
    assert pulse_interval_s(9_000, 2_000) == pytest.approx(0.75)


def test_an_operation_in_flight_past_the_bound_is_a_stall() -> None:
    w = StallWatchdog(5.0)
    w.in_flight("a disk write or fsync", 10.0)
    assert w.stalled(15.0) is None
    assert w.stalled(16.0) == "a disk write or fsync in flight for 6.0 s (bound 5.0 s)"
    w.in_flight("a disk write or fsync", None)  # it returned
    assert w.stalled(16.0) is None


def test_a_disk_operation_that_does_not_return_shows_as_in_flight() -> None:
    import threading
    import time

    from seglog.storage import io_watch

    release = threading.Event()
    blocked = io_watch.watched(lambda: release.wait(10))
    assert io_watch.oldest_started() is None
    before = time.monotonic()
    t = threading.Thread(target=blocked)
    t.start()
    try:
        deadline = time.monotonic() + 5
        while io_watch.oldest_started() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        started = io_watch.oldest_started()
        assert started is not None and started >= before
    finally:
        release.set()
        t.join(5)
    assert io_watch.oldest_started() is None
