"""IsrDeadlines: the leaders' ISR timers as one deadline queue plus follower nodes'
silences (replication/isr_deadlines.py)."""

from __future__ import annotations

from seglog.replication.isr_deadlines import IsrDeadlines


def test_the_earliest_deadline_wins_and_each_key_comes_due_once() -> None:
    q: IsrDeadlines[str] = IsrDeadlines()
    assert q.schedule("a", 100)
    assert not q.schedule("a", 150)  # later: the earlier stays
    assert q.schedule("a", 50)
    q.schedule("b", 70)
    assert q.due(49, 10) == []
    assert q.due(100, 10) == ["a", "b"]
    assert q.due(1_000, 10) == []  # the superseded entry of "a" at 100 is dropped
    assert q.scheduled("a") is None


def test_due_is_bounded_and_discarded_keys_never_come() -> None:
    q: IsrDeadlines[int] = IsrDeadlines()
    for k in range(10):
        q.schedule(k, k)
    q.discard(3)
    assert q.due(100, 4) == [0, 1, 2, 4]
    assert q.due(100, 100) == [5, 6, 7, 8, 9]


def test_stale_entries_do_not_pile_up() -> None:
    q: IsrDeadlines[str] = IsrDeadlines()
    for t in range(10_000, 0, -1):  # a busy key rescheduled ever earlier
        q.schedule("busy", t)
    q.due(0, 1)
    assert len(q._heap) <= 2 * 1 + 64


def test_a_silent_node_is_reported_once_per_silence() -> None:
    q: IsrDeadlines[str] = IsrDeadlines()
    q.fetched(2, 0)
    q.fetched(3, 0)
    q.fetched(2, 900)
    assert q.silent(1_000, 1_000) == []
    assert q.silent(1_001, 1_000) == [3]
    assert q.silent(5_000, 1_000) == [2]  # 3 already reported
    q.fetched(3, 5_000)
    assert q.last_fetch_ms(3, -1) == 5_000 and q.last_fetch_ms(7, -1) == -1
    assert q.silent(6_001, 1_000) == [3]
