"""A follower's fetch in a KIP-227 session, as steps that either a thread or the
node's event loop drives: `look()` reads the session's partitions whose state changed
since it last examined them and says whether to answer now (enough bytes, an error or
a diverging epoch); `answer()` closes the fetch and gives the partitions to send —
those with records, an error, a diverging epoch or a new high watermark or log start.

ReplicaManager.fetch_in_session runs it on a gRPC thread (looks and waits);
ReplicaManager.park_session_fetch parks it on the loop, where each wake of the
session's partitions schedules one look (node/kafka/replica_fetch.py).

A look reads only what changed: the partitions the session's waiter collected since
the last look (appends, high-watermark and log-start moves: node/fetch_wakeups.py) and,
on a fetch's first look, those at a new position or left unsettled by the last fetch
(`FetchSession.pending`). Kafka's leader examines every partition of a session on each
fetch; a session holds every partition a follower follows from this leader, and that
scan, in Python, was 40% of a node's loop at 1,000 partitions (docs/perf/scale.md).
Metadata moves (leaders, epochs) and a new session or broker epoch read them all, and
so does a fetch's first look at most once a second (FULL_LOOK_INTERVAL_S): a change no
notice names is seen within that, not never."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from seglog.storage.disk_and_clock import plain_monotonic_s

from .fetch_session import FetchSession
from .fetch_wakeups import FetchWakeups
from .hosted_partition import HostedPartition, TopicPartition
from .partition_reads import PartitionReads, mark
from .partition_requests import FetchResult, FetchSpec

FULL_LOOK_INTERVAL_S = 1.0


class SessionFetch:
    def __init__(
        self,
        session: FetchSession,
        partitions: Mapping[TopicPartition, HostedPartition],
        reads: PartitionReads,
        wakeups: FetchWakeups,
        *,
        replica_id: int,
        replica_epoch: int,
        min_bytes: int,
        max_bytes: int,
        clock: Callable[[], float] = plain_monotonic_s,
    ) -> None:
        self.session = session
        self._partitions = partitions
        self._reads = reads
        self._wakeups = wakeups
        self._clock = clock
        self._first_look = True
        self.replica_id = replica_id
        self.replica_epoch = replica_epoch
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.out: dict[TopicPartition, FetchResult] = {}
        self.total = 0
        self._read: set[TopicPartition] = set()  # read once: the follower is updated

    def look(self) -> bool:
        """Arm the session's waiter and read what changed since the last look: True when
        the answer should go now (enough bytes, an error or a diverging epoch)."""
        session = self.session
        changed = self._wakeups.rearm(session.waiter)
        unread: set[TopicPartition] = set()
        if self._first_look:
            self._first_look = False
            unread, session.unread = session.unread, set()
            pending = session.take_pending()
            now = self._clock()
            if pending is None or changed is None or now >= session.full_look_due:
                changed = None
                session.full_look_due = now + FULL_LOOK_INTERVAL_S
            else:
                changed |= pending
        specs = session.specs
        out = self.out
        candidates = []
        held: Iterable[tuple[TopicPartition, FetchSpec]] = (
            specs.items() if changed is None else [(tp, specs[tp]) for tp in changed if tp in specs]
        )
        if unread:
            # What the last fetch left unread goes first: with max.bytes room for a few
            # partitions, one appended to on every fetch could come first in every look
            # and the rest never be read (Kafka rotates a session's partitions for this).
            held = sorted(held, key=lambda item: item[0] not in unread)
        for tp, spec in held:
            if tp in out and out[tp].records:
                session.read_next_fetch(tp)  # the change is the next fetch's to read
                continue
            hp = self._partitions.get(tp)
            if hp is None or session.seen.get(tp) != mark(hp):
                candidates.append(spec)
        if candidates:
            marks: list[tuple[int, ...] | None] = [None] * len(candidates)
            budget = max(self.max_bytes - self.total, 0)
            read = self._read
            again = [(spec.topic, spec.partition) in read for spec in candidates]
            results = self._reads.read(
                candidates,
                self.replica_id,
                self.replica_epoch,
                budget,
                None,
                marks,
                read_before=again,
            )
            for spec, r, m in zip(candidates, results, marks, strict=True):
                tp = (spec.topic, spec.partition)
                read.add(tp)
                failed = r.error_name != "NONE" or r.diverging_epoch is not None
                if m is not None and not failed:
                    session.seen[tp] = m
                else:
                    session.read_next_fetch(tp)  # unsettled: the next fetch reads it again
                    if not failed:
                        session.unread.add(tp)  # cut by max.bytes or a quota
                if (
                    r.records
                    or failed
                    or session.told.get(tp) != (r.high_watermark, r.log_start_offset)
                ):
                    out[tp] = r
                    self.total += len(r.records)
        return self.total >= self.min_bytes or any(
            r.error_name != "NONE" or r.diverging_epoch for r in out.values()
        )

    def answer(self) -> list[FetchResult]:
        """The partitions to send; the session now knows what it told the follower."""
        for tp, r in self.out.items():
            if r.error_name == "NONE":
                self.session.told[tp] = (r.high_watermark, r.log_start_offset)
        return list(self.out.values())
