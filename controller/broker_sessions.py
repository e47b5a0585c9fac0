"""The active controller's judgement of broker liveness (Kafka's BrokerHeartbeatManager):
who was heard from when, and whose session has run out. Time comes in as an argument,
so the controller process and the tests drive the same object.

A controller only judges sessions while it serves heartbeats. A controller that is
shutting down stops its listener before its Raft leadership ends; if it went on
judging, every broker's heartbeat would be refused and, one session later, it would
fence a healthy broker on its way out. The chaos runs saw exactly that on every
failure of the active controller's node (docs/chaos-reports/2026-11-29-controller-shutdown-fence/):
the fence moved leaderships, shrank ISRs below min.insync.replicas and, with
librdkafka's producer, led to an epoch bump that wrote acknowledged records twice.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

# At most this many brokers are tracked: a cluster's broker ids, far below it.
MAX_BROKERS = 100_000


class BrokerSessions:
    def __init__(self, session_timeout_s: float) -> None:
        if session_timeout_s <= 0:
            raise ValueError(f"broker.session.timeout.ms must be positive: {session_timeout_s} s")
        self.session_timeout_s = session_timeout_s
        self._last_heard: dict[int, float] = {}  # broker id -> when (caller's clock)
        self._judging = True

    @property
    def judging(self) -> bool:
        """False once the controller began shutting down: nobody's session expires."""
        return self._judging

    def activate(
        self,
        brokers: Iterable[int],
        now: float,
        former: int | None = None,
        former_last_heard: float | None = None,
    ) -> None:
        """Sessions are not replicated: a new active controller gives every broker a
        fresh one, except the former controller's own broker (combined mode), which was
        last heard of when its Raft messages stopped. That it lost the controllership is
        a sign it died, and waiting a whole session from now would add an election
        timeout to every failover of its partitions."""
        self._last_heard = {b: now for b in brokers}
        assert len(self._last_heard) <= MAX_BROKERS
        if former is not None and former in self._last_heard and former_last_heard is not None:
            self._last_heard[former] = min(now, former_last_heard)

    def heard(self, broker_id: int, now: float) -> None:
        """A heartbeat or a registration from the broker."""
        if broker_id not in self._last_heard and len(self._last_heard) >= MAX_BROKERS:
            raise ValueError(f"more than {MAX_BROKERS} brokers: broker id {broker_id}")
        self._last_heard[broker_id] = now

    def forget(self, broker_id: int) -> None:
        """The broker shut down in order: it is fenced already, no session to judge."""
        self._last_heard.pop(broker_id, None)

    def stalled(self, seconds: float) -> None:
        """The controller did not run for `seconds` (CPU starved, a long apply):
        heartbeats that arrived meanwhile still wait in its queue, so the stall is not
        the brokers' silence. Every session moves on by it."""
        if seconds <= 0:
            return
        for b in self._last_heard:
            self._last_heard[b] += seconds

    def begin_shutdown(self) -> None:
        """The controller stops serving heartbeats: from now on it judges no one."""
        self._judging = False

    def expired(self, now: float, unfenced: Collection[int]) -> list[int]:
        """The unfenced brokers whose session ran out, in id order."""
        if not self._judging:
            return []
        return sorted(
            b
            for b, seen in self._last_heard.items()
            if b in unfenced and now - seen > self.session_timeout_s
        )
