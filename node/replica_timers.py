"""The replica manager's timers (a part of node/replica_manager.py's ReplicaManager):
one thread ticks the partitions that have something due — parked acks=-1 produces
(their timeouts), leaders whose ISR timer is due, leaders whose ISR holds a follower
node silent for replica.lag.time.max.ms — and the followers' last fetch times the
leaders' ISR rules read. Work proportional to what is due, not to the partitions."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from seglog.replication import partition_replica as pr
from seglog.replication.isr_deadlines import IsrDeadlines
from seglog.storage import io_watch
from seglog.storage.disk_and_clock import monotonic_ms as now_ms
from seglog.storage.disk_and_clock import plain_monotonic_s

from .hosted_partition import HostedPartition, TopicPartition
from .liveness import StallWatchdog

if TYPE_CHECKING:
    from .event_loop import NodeLoop

TICK_S = 0.05
TIMER_LOOP = "replica timer loop"  # its name in the broker's stall watchdog
DUE_PER_TICK = 10_000  # partitions ticked for their ISR timers per round, at most


def serving_stall_s(loop: NodeLoop | None, now: float) -> float:
    """How long the node's serving path has been stuck at `now` (monotonic): its event
    loop late, or its oldest disk operation in flight (a gRPC fetch waits on the
    partition lock such a write holds)."""
    started = io_watch.oldest_started()
    disk = now - started if started is not None else 0.0
    return max(disk, loop.late_s(now) if loop is not None else 0.0)


class ReplicaTimers:
    # Set by ReplicaManager.__init__.
    _stopped: threading.Event
    _lock: threading.Lock
    _partitions: dict[TopicPartition, HostedPartition]
    _ticking: set[TopicPartition]
    _deadlines: IsrDeadlines[TopicPartition]
    _deadlines_lock: threading.Lock
    watchdog: StallWatchdog | None
    replica_lag_time_max_ms: int
    # How long the node's serving path has been stuck at a monotonic time (its loop late,
    # a disk operation in flight): set by the server. `_stalled_at_ms` is the last tick
    # that found it stuck for half the lag; followers are not blamed for it.
    own_stall_s: Callable[[float], float] | None
    _stalled_at_ms: int

    def partitions(self) -> list[HostedPartition]:
        raise NotImplementedError

    def _carry_out(self, hp: HostedPartition, actions: Sequence[pr.Action]) -> None:
        raise NotImplementedError

    def _tick_loop(self) -> None:
        """Timers, with work proportional to the partitions that have some: those with
        parked acks=-1 produces every tick (their timeouts), leaders whose ISR timer is
        due (`_schedule_isr`), and, when a follower node has not fetched for
        replica.lag.time.max.ms, the leaders whose ISR holds it. Idle partitions with
        live followers cost nothing."""
        while not self._stopped.wait(TICK_S):
            if self.watchdog is not None:
                self.watchdog.beat(TIMER_LOOP, plain_monotonic_s())
            t = now_ms()
            stall = self.own_stall_s
            lag_s = self.replica_lag_time_max_ms / 1000
            if stall is not None and stall(plain_monotonic_s()) > lag_s / 2:
                self._stalled_at_ms = t
            with self._deadlines_lock:
                due = set(self._deadlines.due(t, DUE_PER_TICK))
                silent = self._deadlines.silent(t, self.replica_lag_time_max_ms)
            with self._lock:
                due.update(self._ticking)
                targets = [self._partitions[p] for p in due if p in self._partitions]
            if silent:
                # Every leader with a silent follower in its ISR: a scan, but once per
                # follower's silence, not per tick.
                quiet = set(silent)
                targets += [
                    hp
                    for hp in self.partitions()
                    if hp.tp not in due and hp.replica.is_leader and quiet & hp.replica.isr
                ]
            for hp in targets:
                with hp.plog.lock:
                    actions = hp.replica.tick(t)
                    self._schedule_isr(hp)
                    if hp.replica.delayed_produce_count == 0:
                        with self._lock:  # under the partition's lock, as produce adds it
                            self._ticking.discard(hp.tp)
                self._carry_out(hp, actions)

    def _schedule_isr(self, hp: HostedPartition, at_ms: int | None = None) -> None:
        """After anything that may move its ISR timer: due at `at_ms`, or when the
        replica says (then under the partition's lock). Cheap when nothing is earlier (a busy
        partition's deadline only moves later)."""
        at = hp.replica.isr_deadline_ms(now_ms()) if at_ms is None else at_ms
        if at is None:
            return
        current = self._deadlines.scheduled(hp.tp)
        if current is not None and current <= at:
            return
        with self._deadlines_lock:
            self._deadlines.schedule(hp.tp, at)

    def _serving_since_ms(self) -> int:
        return self._stalled_at_ms

    def _session_fetch_ms(self, replica_id: int) -> int:
        # A dict read, no lock: asked on every produce and fetch.
        return self._deadlines.last_fetch_ms(replica_id, pr.NEVER)

    def _follower_fetched(self, replica_id: int) -> None:
        with self._deadlines_lock:
            self._deadlines.fetched(replica_id, now_ms())
