"""KIP-227 incremental fetch sessions, the leader's side: what a follower's session
holds, so its fetches carry only the partitions whose position changed and the
answers only the partitions with something new.

A session remembers, per partition, the follower's last fetch position (a
`FetchSpec`), the leader-side state it last examined (`seen`: LEO, HW, log start,
leader epoch — while that is unchanged, re-reading would give nothing new) and
what it last told the follower (`told`: HW and log start). The cache holds at most
`max.incremental.fetch.session.cache.slots` sessions and evicts the least recently
used one; a follower whose session is gone gets FETCH_SESSION_ID_NOT_FOUND and
opens a new one with a full fetch.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from seglog.storage.disk_and_clock import plain_wall_s

from .fetch_wakeups import FetchWaiter
from .hosted_partition import TopicPartition
from .partition_requests import FetchSpec

DEFAULT_SLOTS = 1_000  # Kafka's max.incremental.fetch.session.cache.slots


class FetchSessionError(Exception):
    def __init__(self, error_name: str, message: str) -> None:
        super().__init__(message)
        self.error_name = error_name


@dataclass(slots=True)
class FetchSession:
    session_id: int
    replica_id: int
    next_epoch: int = 1
    specs: dict[TopicPartition, FetchSpec] = field(default_factory=dict)
    seen: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    told: dict[TopicPartition, tuple[int, int]] = field(default_factory=dict)
    # The follower's broker epoch (KIP-903) the session last read its partitions with.
    replica_epoch: int = -1
    # Fetch v13+ (KIP-516): each held topic's id, as the follower named it. A deleted
    # topic's partitions stay in the session until the follower forgets them by that id,
    # which the metadata no longer knows: the session answers and forgets them by it.
    topic_ids: dict[str, object] = field(default_factory=dict)
    # One fetch at a time per session: a follower never overlaps its own.
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Watches the partitions the session holds, for the session's life (fetch_wakeups).
    # New records wake it, high-watermark moves do not (node/fetch_wakeups.py).
    waiter: FetchWaiter = field(default_factory=lambda: FetchWaiter(hw_moves=False))
    # What the next fetch's first look must read besides the changes its waiter
    # collected: partitions at a new position, and those a look read without settling
    # them (`seen` not set: throttled, failed, or left for another fetch). None: every
    # partition (a new session, a new broker epoch).
    pending: set[TopicPartition] | None = None
    # Those a fetch's max.bytes (or a quota) left unread: the next fetch reads them
    # first, so a partition appended to on every fetch cannot starve the rest.
    unread: set[TopicPartition] = field(default_factory=set)
    # When a fetch's first look next reads every partition whatever changed
    # (SessionFetch.look).
    full_look_due: float = 0.0

    def update(
        self,
        specs: Sequence[FetchSpec],
        forgotten: Sequence[TopicPartition],
        topic_ids: Mapping[str, object] | None = None,
    ) -> None:
        """`forgotten` names a topic the metadata no longer knows by its id's text."""
        names = {str(i): name for name, i in self.topic_ids.items()}
        for topic, partition in forgotten:
            tp = (names.get(topic, topic), partition)
            self.specs.pop(tp, None)
            self.seen.pop(tp, None)
            self.told.pop(tp, None)
        for spec in specs:
            tp = (spec.topic, spec.partition)
            self.specs[tp] = spec
            self.seen.pop(tp, None)  # a new position: read it whatever the state
            self.read_next_fetch(tp)
        if topic_ids:
            self.topic_ids.update(topic_ids)
        if forgotten:  # bounded by the topics the session holds
            held = {topic for topic, _ in self.specs}
            self.topic_ids = {n: i for n, i in self.topic_ids.items() if n in held}

    def new_replica_epoch(self, replica_epoch: int) -> None:
        """The follower fetches with another broker epoch (it registered after the
        session opened): every partition is read again, as Kafka's leader reads all of
        a session's partitions on each fetch, so each learns the epoch. An idle one
        would otherwise keep the old epoch and its follower stay out of the ISR
        (ineligible) until its position moved."""
        if replica_epoch != self.replica_epoch:
            self.replica_epoch = replica_epoch
            self.seen.clear()
            self.pending = None

    def read_next_fetch(self, tp: TopicPartition) -> None:
        """`tp` is one the next fetch's first look must read."""
        if self.pending is not None:
            self.pending.add(tp)

    def take_pending(self) -> set[TopicPartition] | None:
        """What the fetch's first look must read (`pending`), now handed to it."""
        pending, self.pending = self.pending, set()
        return pending


class FetchSessionCache:
    def __init__(
        self,
        slots: int = DEFAULT_SLOTS,
        on_evict: Callable[[FetchSession], None] = lambda _s: None,
    ) -> None:
        assert slots >= 1
        self.slots = slots
        self._on_evict = on_evict  # called outside the cache's lock
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._ids = itertools.count(int(plain_wall_s() * 1000) % (1 << 30) + 1)
        self._lock = threading.Lock()

    def open(self, replica_id: int) -> FetchSession:
        evicted = []
        with self._lock:
            session_id = next(self._ids) % (1 << 31) or 1
            session = FetchSession(session_id, replica_id)
            self._sessions[session_id] = session
            while len(self._sessions) > self.slots:
                evicted.append(self._sessions.popitem(last=False)[1])  # the least recently used
        for old in evicted:
            self._on_evict(old)
        return session

    def get(self, session_id: int, epoch: int, replica_id: int) -> FetchSession:
        """The session for a fetch with this id and epoch; its epoch moves on."""
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None or session.replica_id != replica_id:
                raise FetchSessionError(
                    "FETCH_SESSION_ID_NOT_FOUND", f"no fetch session {session_id}"
                )
            if epoch != session.next_epoch:
                raise FetchSessionError(
                    "INVALID_FETCH_SESSION_EPOCH",
                    f"fetch session {session_id} expects epoch {session.next_epoch}, got {epoch}",
                )
            session.next_epoch += 1
            self._sessions.move_to_end(session_id)
            return session

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)
