"""Which long-polling fetches a change wakes (Kafka's fetch purgatory, keyed by
partition): a waiting fetch watches its own partitions, so an append or a
high-watermark move wakes only the fetches that name that partition.

Waking every waiting fetch on every change made each node's follower sessions
re-scan and go back to sleep for every high-watermark move of the partitions the
node itself follows, and for every append to partitions those sessions do not hold
(docs/perf/produce-latency.md).

A waiter is armed before each look at its partitions and waits only if nothing
woke it since: a change after the arming is never missed. A follower's session keeps
one waiter for its life (it watches what the session holds, changed incrementally as
the session is); a sessionless fetch watches its partitions for one call.

A high-watermark move wakes consumers' fetches only: it makes records readable to a
consumer, but a follower reads up to the log end and its fetch answers on new records
(min.bytes), so waking its session just had it look and sleep again. The follower
learns the new high watermark with its next answer, as in Kafka.

Every waiter also collects which of its partitions changed (appends, high-watermark
and log-start moves) until `rearm` takes them: a follower's session reads only those,
not each of the thousands of partitions it holds on each fetch (node/session_fetch.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable

TopicPartition = tuple[str, int]


class FetchWaiter:
    __slots__ = ("_event", "_on_wake", "partitions", "retired", "hw_moves", "_changed")

    def __init__(self, hw_moves: bool = True, on_wake: Callable[[], None] | None = None) -> None:
        """`hw_moves`: whether a high-watermark move wakes it (a consumer's fetch) or
        only new records do (a follower's session). `on_wake`: instead of a thread
        blocking in FetchWakeups.wait, a fetch parked on an event loop is called (from
        the waking thread, under the wakeups' lock: it must only schedule) at the
        first wake after each arm."""
        self._event = threading.Event()
        self._on_wake = on_wake
        self.hw_moves = hw_moves
        self.partitions: set[TopicPartition] = set()  # what it watches (FetchWakeups')
        # Forgotten for good (its session was evicted, its fetch ended): a late watch
        # from a fetch still running must not register it again.
        self.retired = False
        # Its partitions that changed since FetchWakeups.rearm took them, whether or not
        # the change woke it; None: all of them may have (metadata moved). Under the
        # wakeups' lock.
        self._changed: set[TopicPartition] | None = set()

    def arm(self) -> None:
        """Before a look at its partitions: a wake-up from now on ends the next wait."""
        self._event.clear()

    def woken(self) -> bool:
        return self._event.is_set()

    def _note(self, tp: TopicPartition) -> None:
        """`tp` changed in a way that does not wake this waiter."""
        if self._changed is not None:
            self._changed.add(tp)

    def _wake(self, tp: TopicPartition | None) -> None:
        if tp is None:
            self._changed = None
        else:
            self._note(tp)
        if self._on_wake is not None and not self._event.is_set():
            self._event.set()
            self._on_wake()
            return
        self._event.set()


class FetchWakeups:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_partition: dict[TopicPartition, set[FetchWaiter]] = {}
        # Each waiter watching at least one partition, so wake_all need not walk every
        # partition of every session.
        self._waiters: set[FetchWaiter] = set()
        self._in_wait = 0
        self._parked: set[FetchWaiter] = set()  # fetches parked on an event loop

    def watch(self, waiter: FetchWaiter, partitions: Iterable[TopicPartition]) -> None:
        with self._lock:
            if waiter.retired:
                return
            for tp in partitions:
                if tp not in waiter.partitions:
                    waiter.partitions.add(tp)
                    self._by_partition.setdefault(tp, set()).add(waiter)
            if waiter.partitions:
                self._waiters.add(waiter)
            if waiter._on_wake is not None:
                self._parked.add(waiter)

    def unwatch(self, waiter: FetchWaiter, partitions: Iterable[TopicPartition]) -> None:
        with self._lock:
            for tp in partitions:
                self._drop(waiter, tp)
            if not waiter.partitions:
                self._waiters.discard(waiter)

    def forget(self, waiter: FetchWaiter) -> None:
        """The waiter watches nothing any more, and never will (its fetch ended, its
        session went)."""
        with self._lock:
            waiter.retired = True
            for tp in list(waiter.partitions):
                self._drop(waiter, tp)
            self._waiters.discard(waiter)
            self._parked.discard(waiter)

    def park(self, waiter: FetchWaiter, on_wake: Callable[[], None]) -> None:
        """A waiter (a follower's session) parks on an event loop: `on_wake` (called
        under this lock: it must only schedule) at its first wake since its last arm —
        at once if one came already."""
        with self._lock:
            waiter._on_wake = on_wake
            self._parked.add(waiter)
            if waiter.woken():
                on_wake()

    def rearm(self, waiter: FetchWaiter) -> set[TopicPartition] | None:
        """A session's arm before its next look: its partitions that changed since the
        last rearm (None: any may have), so that look reads only those, not every
        partition of a follower's session — a session holds all the partitions a
        follower follows from this leader (thousands), a change names a few."""
        with self._lock:
            waiter._event.clear()
            changed, waiter._changed = waiter._changed, set()
            return changed

    def unpark(self, waiter: FetchWaiter) -> None:
        with self._lock:
            waiter._on_wake = None
            self._parked.discard(waiter)

    def _drop(self, waiter: FetchWaiter, tp: TopicPartition) -> None:
        waiter.partitions.discard(tp)
        watchers = self._by_partition.get(tp)
        if watchers is not None:
            watchers.discard(waiter)
            if not watchers:
                del self._by_partition[tp]

    def wake(self, partitions: Iterable[TopicPartition]) -> None:
        """Records were appended to these partitions."""
        with self._lock:
            for tp in partitions:
                for waiter in self._by_partition.get(tp, ()):
                    waiter._wake(tp)

    def wake_for_hw(self, partitions: Iterable[TopicPartition]) -> None:
        """These partitions' high watermarks moved: more is readable to consumers."""
        with self._lock:
            for tp in partitions:
                for waiter in self._by_partition.get(tp, ()):
                    if waiter.hw_moves:
                        waiter._wake(tp)
                    else:
                        waiter._note(tp)

    def note_log_start(self, partitions: Iterable[TopicPartition]) -> None:
        """These partitions' log start offsets moved (retention): no fetch wakes for
        that, and a follower learns it with its session's next answer, as in Kafka."""
        with self._lock:
            for tp in partitions:
                for waiter in self._by_partition.get(tp, ()):
                    waiter._note(tp)

    def wake_all(self) -> None:
        """Metadata moved or the node is stopping: every waiting fetch looks again."""
        with self._lock:
            for waiter in self._waiters:
                waiter._wake(None)

    def wait(self, waiter: FetchWaiter, timeout_s: float) -> bool:
        """Wait until woken (since the last arm) or timeout_s; True if woken."""
        with self._lock:
            self._in_wait += 1
        try:
            return waiter._event.wait(max(timeout_s, 0.0))
        finally:
            with self._lock:
                self._in_wait -= 1
                assert self._in_wait >= 0, "a fetch left its wait twice"

    @property
    def in_wait(self) -> int:
        """Fetches long-polling right now (the fetch purgatory's size): threads in a
        wait and fetches parked on an event loop."""
        with self._lock:
            return self._in_wait + len(self._parked)

    def watched(self, tp: TopicPartition) -> int:
        """How many waiters watch the partition (for tests and checks)."""
        with self._lock:
            return len(self._by_partition.get(tp, ()))
