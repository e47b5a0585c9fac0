"""The Produce error log's rate limit (node/produce_errors.py), time as an input."""

from __future__ import annotations

from seglog.node.produce_errors import LogWindows, ProduceErrorLog


def test_first_of_each_error_logged_then_one_per_interval_with_the_count_passed_over() -> None:
    w = LogWindows(interval_s=10)
    assert w.admit("NOT_LEADER_OR_FOLLOWER", 0.0) == 0
    assert w.admit("UNKNOWN_PRODUCER_ID", 1.0) == 0  # another error: its own window
    assert [w.admit("NOT_LEADER_OR_FOLLOWER", t) for t in (1.0, 5.0, 9.9)] == [None] * 3
    assert w.admit("NOT_LEADER_OR_FOLLOWER", 10.0) == 3
    assert w.admit("NOT_LEADER_OR_FOLLOWER", 12.0) is None
    assert w.admit("NOT_LEADER_OR_FOLLOWER", 25.0) == 1


def test_keys_are_bounded() -> None:
    w = LogWindows(interval_s=10, max_keys=2)
    for key in ("a", "b", "c"):
        assert w.admit(key, 0.0) == 0
    assert len(w._windows) <= 2


def test_every_report_is_counted_whether_logged_or_not() -> None:
    now = [0.0]
    log = ProduceErrorLog(interval_s=10, clock=lambda: now[0])
    counted: list[str] = []
    log.count = counted.append
    for t in (0.0, 1.0, 2.0):
        now[0] = t
        log.report("PLAINTEXT", "t", 0, "NOT_LEADER_OR_FOLLOWER", "moved")
    assert counted == ["NOT_LEADER_OR_FOLLOWER"] * 3
