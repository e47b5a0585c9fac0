"""Long-polling fetches wake on changes in their own partitions only (Kafka's fetch
purgatory keyed by partition): the waiter registry alone, then follower sessions and
consumer fetches against a real ReplicaManager over real logs."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from replica_manager_fixtures import leading

from seglog.controller.metadata_image import PartitionState
from seglog.node import session_fetch
from seglog.node.fetch_session import FetchSessionCache
from seglog.node.fetch_wakeups import FetchWaiter, FetchWakeups
from seglog.node.partition_requests import FetchSpec
from seglog.node.replica_manager import ReplicaManager
from seglog.storage.log_config import LogConfig
from seglog.storage.partition_metadata import new_topic_id
from seglog.storage.record_batch import NewRecord, build_batch

A, B = ("t", 0), ("t", 1)


def test_a_wake_reaches_only_the_waiters_of_that_partition() -> None:
    wakeups = FetchWakeups()
    on_a, on_b, on_both = FetchWaiter(), FetchWaiter(), FetchWaiter()
    wakeups.watch(on_a, [A])
    wakeups.watch(on_b, [B])
    wakeups.watch(on_both, [A, B])
    for w in (on_a, on_b, on_both):
        w.arm()
    wakeups.wake([A])
    assert (on_a.woken(), on_b.woken(), on_both.woken()) == (True, False, True)
    assert wakeups.watched(A) == 2 and wakeups.watched(B) == 2
    wakeups.unwatch(on_both, [A])
    wakeups.forget(on_a)
    assert wakeups.watched(A) == 0 and wakeups.watched(B) == 2
    for w in (on_a, on_b, on_both):
        w.arm()
    wakeups.wake([A])
    assert not any(w.woken() for w in (on_a, on_b, on_both))
    wakeups.wake_all()  # metadata moved: everyone still watching looks again
    assert (on_a.woken(), on_b.woken(), on_both.woken()) == (False, True, True)


def test_a_wake_before_arming_is_dropped_and_one_after_is_never_missed() -> None:
    wakeups = FetchWakeups()
    w = FetchWaiter()
    wakeups.watch(w, [A])
    wakeups.wake([A])
    w.arm()  # the look that follows sees that change itself
    t0 = time.monotonic()
    assert wakeups.wait(w, 0.2) is False
    assert time.monotonic() - t0 >= 0.19
    w.arm()
    wakeups.wake([A])  # between the look and the wait
    t0 = time.monotonic()
    assert wakeups.wait(w, 5.0) is True
    assert time.monotonic() - t0 < 1.0
    assert wakeups.in_wait == 0


def test_an_evicted_session_stops_watching_for_good() -> None:
    wakeups = FetchWakeups()
    evicted: list[Any] = []

    def evict(session: Any) -> None:
        evicted.append(session)
        wakeups.forget(session.waiter)

    cache = FetchSessionCache(slots=1, on_evict=evict)
    first = cache.open(2)
    wakeups.watch(first.waiter, [A, B])
    second = cache.open(3)
    assert evicted == [first] and len(cache) == 1 and second is not first
    assert wakeups.watched(A) == 0 and wakeups.watched(B) == 0
    # A fetch of the evicted session still running cannot register it again.
    wakeups.watch(first.waiter, [A])
    assert wakeups.watched(A) == 0 and first.waiter.partitions == set()


# --- against a real ReplicaManager ------------------------------------------------------


PARTITIONS = 8


@pytest.fixture
def leader(tmp_path: Path) -> Iterator[ReplicaManager]:
    """Node 1 leading partitions 0-3 with follower 2 in the ISR, and 4-7 alone."""
    with leading(tmp_path, [(1, 2) if p < 4 else (1,) for p in range(PARTITIONS)]) as rm:
        yield rm


def count_waits(rm: ReplicaManager) -> list[int]:
    """Wrap the manager's wait to count how often a fetch went back to sleep."""
    waits = [0]
    inner = rm._wait_for_data

    def counted(waiter: Any, remaining: float) -> None:
        waits[0] += 1
        inner(waiter, remaining)

    rm._wait_for_data = counted  # type: ignore[method-assign]
    return waits


def produce(rm: ReplicaManager, p: int, value: bytes) -> None:
    result = rm.produce(("t", p), build_batch([NewRecord(value)]), acks=1)
    assert result.error_name == "NONE", result


def in_thread(fn: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    t = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    t.start()
    return t, out


def consumer_fetch(rm: ReplicaManager, tp: tuple[str, int]) -> tuple[threading.Thread, list[Any]]:
    """A consumer's fetch from offset 0 of `tp`, long-polling up to 5 s in a thread."""
    return in_thread(
        lambda: rm.fetch(
            [FetchSpec(tp[0], tp[1], 0, 0, 1 << 20)],
            replica_id=-1,
            max_wait_ms=5_000,
            min_bytes=1,
            max_bytes=1 << 20,
        )
    )


def wait_until_waiting(rm: ReplicaManager, n: int) -> None:
    deadline = time.monotonic() + 5
    while rm.waiting_fetches() < n and time.monotonic() < deadline:
        time.sleep(0.005)
    assert rm.waiting_fetches() == n


def test_a_follower_session_sleeps_through_other_partitions_appends(leader: ReplicaManager) -> None:
    rm = leader
    full = [FetchSpec("t", p, 0, 0, 1 << 20, -1) for p in (0, 1)]
    sid, first = rm.fetch_in_session(
        0, 0, full, [], replica_id=2, max_wait_ms=0, min_bytes=1, max_bytes=10 << 20
    )
    assert sid > 0 and {r.partition for r in first} == {0, 1}
    waits = count_waits(rm)
    t, out = in_thread(
        lambda: rm.fetch_in_session(
            sid, 1, [], [], replica_id=2, max_wait_ms=5_000, min_bytes=1, max_bytes=10 << 20
        )
    )
    wait_until_waiting(rm, 1)
    for i in range(5):  # partitions outside the session: appends and HW moves
        produce(rm, 2, b"not yours %d" % i)
        produce(rm, 5, b"not yours either %d" % i)
    time.sleep(0.1)
    assert t.is_alive() and waits[0] == 1, f"woken {waits[0] - 1} times for other partitions"
    started = time.monotonic()
    produce(rm, 1, b"yours")
    t.join(timeout=5)
    assert not t.is_alive()
    assert time.monotonic() - started < 1.0  # woken by the append, not by a timeout
    _sid, answered = out[0]
    assert [(r.partition, bool(r.records)) for r in answered] == [(1, True)]


def test_a_consumer_fetch_wakes_when_its_partition_becomes_readable(leader: ReplicaManager) -> None:
    rm = leader
    waits = count_waits(rm)
    t, out = consumer_fetch(rm, ("t", 5))
    wait_until_waiting(rm, 1)
    for i in range(5):
        produce(rm, 6, b"elsewhere %d" % i)
    time.sleep(0.1)
    assert t.is_alive() and waits[0] == 1, f"woken {waits[0] - 1} times for partition 6"
    started = time.monotonic()
    produce(rm, 5, b"here")  # a single replica: the HW moves with the append
    t.join(timeout=5)
    assert not t.is_alive() and time.monotonic() - started < 1.0
    (result,) = out[0]
    assert result.partition == 5 and result.records and result.high_watermark == 1


def test_hw_moves_wake_consumers_not_follower_sessions() -> None:
    wakeups = FetchWakeups()
    consumer, session = FetchWaiter(), FetchWaiter(hw_moves=False)
    for w in (consumer, session):
        wakeups.watch(w, [A])
        w.arm()
    wakeups.wake_for_hw([A])
    assert (consumer.woken(), session.woken()) == (True, False)
    wakeups.wake([A])  # records appended: both look
    assert session.woken()


def test_a_follower_session_sleeps_through_a_hw_move_a_consumer_wakes_for(
    leader: ReplicaManager,
) -> None:
    rm = leader
    tp = ("u", 0)
    rm._apply(
        tp, new_topic_id(), PartitionState((1, 2, 3), (1, 2, 3), 1, 0, 0), LogConfig.defaults()
    )
    produce_to = lambda value: rm.produce(tp, build_batch([NewRecord(value)]), acks=1)  # noqa: E731
    assert produce_to(b"first").error_name == "NONE"
    spec = lambda offset: FetchSpec("u", 0, offset, 0, 1 << 20, -1)  # noqa: E731
    # Replica 3 fetches the record in its session and reports offset 1; replica 2 has
    # not fetched, so the high watermark stays at 0.
    sid, _ = rm.fetch_in_session(
        0, 0, [spec(0)], [], replica_id=3, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20
    )
    rm.fetch_in_session(
        sid, 1, [spec(1)], [], replica_id=3, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20
    )
    assert rm._partitions[tp].plog.log.high_watermark == 0
    waits = count_waits(rm)
    follower, answered = in_thread(
        lambda: rm.fetch_in_session(
            sid, 2, [], [], replica_id=3, max_wait_ms=5_000, min_bytes=1, max_bytes=1 << 20
        )
    )
    consumer, consumed = consumer_fetch(rm, tp)
    wait_until_waiting(rm, 2)
    assert waits[0] == 2
    # Replica 2 catches up: the high watermark moves to 1.
    rm.fetch([spec(1)], replica_id=2, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20)
    assert rm._partitions[tp].plog.log.high_watermark == 1
    consumer.join(timeout=5)
    assert not consumer.is_alive(), "the consumer's fetch slept through the HW move"
    ((result,),) = consumed
    assert result.records and result.high_watermark == 1
    time.sleep(0.1)
    assert follower.is_alive() and waits[0] == 2, f"the follower woke {waits[0] - 2} times"
    started = time.monotonic()
    assert produce_to(b"second").error_name == "NONE"
    follower.join(timeout=5)
    assert not follower.is_alive() and time.monotonic() - started < 1.0
    _sid, results = answered[0]
    # The answer carries the new record and the high watermark it missed.
    assert [(r.partition, bool(r.records), r.high_watermark) for r in results] == [(0, True, 1)]


def test_a_woken_waiter_names_what_woke_it_and_metadata_names_everything() -> None:
    wakeups = FetchWakeups()
    session = FetchWaiter(hw_moves=False)
    wakeups.watch(session, [A, B])
    wakeups.wake([A, ("t", 9)])  # 9: not watched
    assert wakeups.rearm(session) == {A} and not session.woken()
    assert wakeups.rearm(session) == set()  # taken once
    wakeups.wake([B])
    wakeups.wake_all()  # metadata moved: any partition may have
    assert session.woken() and wakeups.rearm(session) is None


def count_marks(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """The partitions a session's looks examine from now on, in order."""
    looked: list[tuple[str, int]] = []
    real_mark = session_fetch.mark

    def counting_mark(hp: Any) -> tuple[int, ...]:
        looked.append(hp.tp)
        return real_mark(hp)

    monkeypatch.setattr(session_fetch, "mark", counting_mark)
    return looked


def test_a_parked_sessions_look_after_a_wake_reads_only_the_partitions_that_woke_it(
    leader: ReplicaManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A follower's session holds every partition it follows from this leader; the
    look after a wake reads the one that changed, not all of them again."""
    rm = leader
    specs = [FetchSpec("t", p, 0, 0, 1 << 20, -1) for p in (0, 1, 2)]  # replica 2's
    steps = rm.park_session_fetch(0, 0, specs, [], replica_id=2, min_bytes=1, max_bytes=1 << 24)
    assert not steps.look()  # the fetch's first look, at all three: nothing to send
    looked = count_marks(monkeypatch)
    woke: list[int] = []
    rm.wakeups.park(steps.session.waiter, lambda: woke.append(1))
    produce(rm, 1, b"yours")
    assert woke == [1]
    assert steps.look()
    assert looked == [("t", 1)]
    assert steps.out[("t", 1)].records
    rm.wakeups.unpark(steps.session.waiter)


def session_fetch_now(
    rm: ReplicaManager,
    sid: int,
    epoch: int,
    specs: list[FetchSpec],
    replica: int,
    max_bytes: int = 10 << 20,
) -> list[tuple[int, bool, int]]:
    """A follower's fetch in session `sid` that does not wait: (partition, records?,
    HW) of each partition answered."""
    _sid, answered = rm.fetch_in_session(
        sid, epoch, specs, [], replica_id=replica, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes
    )
    return sorted((r.partition, bool(r.records), r.high_watermark) for r in answered)


def test_a_sessions_next_fetch_reads_only_its_partitions_that_changed(
    leader: ReplicaManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kafka's leader examines every partition of a session on each fetch; here a
    fetch reads those appended to, those whose HW moved and those at a new position,
    and every one at most once a second (FULL_LOOK_INTERVAL_S)."""
    rm = leader
    topic_id = new_topic_id()
    for p in range(4):
        state = PartitionState((1, 2, 3), (1, 2, 3), 1, 0, 0)
        rm._apply(("u", p), topic_id, state, LogConfig.defaults())
    spec = lambda p, offset: FetchSpec("u", p, offset, 0, 1 << 20, -1)  # noqa: E731
    sid3, _ = rm.fetch_in_session(
        0,
        0,
        [spec(p, 0) for p in range(4)],
        [],
        replica_id=3,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=10 << 20,
    )
    sid2, _ = rm.fetch_in_session(
        0, 0, [spec(1, 0)], [], replica_id=2, max_wait_ms=0, min_bytes=1, max_bytes=10 << 20
    )
    looked = count_marks(monkeypatch)
    assert session_fetch_now(rm, sid3, 1, [], 3) == [] and looked == []  # nothing changed

    for p in (1, 2):
        assert rm.produce(("u", p), build_batch([NewRecord(b"r")]), acks=1).error_name == "NONE"
    assert session_fetch_now(rm, sid3, 2, [], 3) == [(1, True, 0), (2, True, 0)]
    assert sorted(looked) == [("u", 1), ("u", 2)]
    # Replica 3 reports both records; replica 2 takes u-1's record and reports it: u-1's
    # HW moves to 1, which replica 3's session learns on its next fetch without naming it.
    assert session_fetch_now(rm, sid3, 3, [spec(1, 1), spec(2, 1)], 3) == []
    assert session_fetch_now(rm, sid2, 1, [], 2) == [(1, True, 0)]
    # (An answer carries the HW from before its fetch moved it, as in Kafka.)
    assert session_fetch_now(rm, sid2, 2, [spec(1, 1)], 2) == []
    assert session_fetch_now(rm, sid2, 3, [], 2) == [(1, False, 1)]
    assert rm._partitions[("u", 1)].plog.log.high_watermark == 1
    looked.clear()
    assert session_fetch_now(rm, sid3, 4, [], 3) == [(1, False, 1)]
    assert looked == [("u", 1)]

    # A full look is due once a second: it reads every partition of the session.
    looked.clear()
    session = rm._sessions.get(sid3, 5, 3)
    session.next_epoch -= 1  # (given back: the fetch below takes epoch 5)
    session.full_look_due = 0.0
    assert session_fetch_now(rm, sid3, 5, [], 3) == []
    assert sorted(looked) == [("u", p) for p in range(4)]


def one_of_two_partitions_read(rm: ReplicaManager) -> tuple[list[FetchSpec], int, int]:
    """A follower's session on partitions 0 and 1, both appended to, and a fetch with
    max.bytes room for one: the session's specs, its id and the partition read."""
    held = [FetchSpec("t", p, 0, 0, 1 << 20, -1) for p in (0, 1)]
    sid, _ = rm.fetch_in_session(
        0, 0, held, [], replica_id=2, max_wait_ms=0, min_bytes=1, max_bytes=10 << 20
    )
    produce(rm, 0, b"x" * 500)
    produce(rm, 1, b"y" * 500)
    first = session_fetch_now(rm, sid, 1, [], 2, max_bytes=100)
    read = [p for p, records, _hw in first if records]
    assert len(read) == 1, first  # which one: the order of a set of changes
    return held, sid, read[0]


def test_a_partition_a_fetch_left_unread_is_read_by_the_next(
    leader: ReplicaManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fetch whose max.bytes ran out before a partition leaves it unread; its follower
    names no new position for it, and the session's next fetch reads it."""
    rm = leader
    held, sid, p = one_of_two_partitions_read(rm)
    looked = count_marks(monkeypatch)
    second = session_fetch_now(rm, sid, 2, [replace(held[p], fetch_offset=1)], 2)
    assert second == [(1 - p, True, 0)]
    assert ("t", 1 - p) in looked


def test_a_partition_left_unread_is_read_first_though_another_was_appended_to_again(
    leader: ReplicaManager,
) -> None:
    """With max.bytes room for one partition and one partition appended to before every
    fetch, the other is still read: what a fetch left unread goes first in the next."""
    rm = leader
    held, sid, p = one_of_two_partitions_read(rm)
    produce(rm, p, b"z" * 500)  # the partition read is appended to again
    second = session_fetch_now(rm, sid, 2, [replace(held[p], fetch_offset=1)], 2, max_bytes=100)
    assert [q for q, records, _hw in second if records] == [1 - p]


def test_hw_and_log_start_moves_are_noted_for_a_session_without_waking_it() -> None:
    wakeups = FetchWakeups()
    session = FetchWaiter(hw_moves=False)
    wakeups.watch(session, [A, B])
    wakeups.rearm(session)
    wakeups.wake_for_hw([A])
    wakeups.note_log_start([B, ("t", 9)])  # 9: not watched
    assert not session.woken() and wakeups.rearm(session) == {A, B}
