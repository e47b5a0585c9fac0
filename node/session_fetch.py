"""A follower's fetch in a KIP-227 session, as steps that either a thread or the
node's event loop drives: `look()` reads the session's partitions whose state changed
since it last examined them and says whether to answer now (enough bytes, an error or
a diverging epoch); `answer()` closes the fetch and gives the partitions to send —
those with records, an error, a diverging epoch or a new high watermark or log start.

ReplicaManager.fetch_in_session runs it on a gRPC thread (looks and waits);
ReplicaManager.park_session_fetch parks it on the loop, where each wake of the
session's partitions schedules one look (node/kafka/replica_fetch.py)."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from .fetch_session import FetchSession
from .hosted_partition import HostedPartition, TopicPartition
from .partition_reads import PartitionReads, mark
from .partition_requests import FetchResult


class SessionFetch:
    def __init__(
        self,
        session: FetchSession,
        partitions: Mapping[TopicPartition, HostedPartition],
        reads: PartitionReads,
        *,
        replica_id: int,
        replica_epoch: int,
        min_bytes: int,
        max_bytes: int,
    ) -> None:
        self.session = session
        self._partitions = partitions
        self._reads = reads
        self.replica_id = replica_id
        self.replica_epoch = replica_epoch
        self.min_bytes = min_bytes
        self.max_bytes = max_bytes
        self.out: dict[TopicPartition, FetchResult] = {}
        self.total = 0
        self._read: set[TopicPartition] = set()  # read once: the follower is updated

    def look(self, woken_by: Collection[TopicPartition] | None = None) -> bool:
        """Read what changed (the caller armed the session's waiter first): True when
        the answer should go now (enough bytes, an error or a diverging epoch).
        `woken_by`: a parked fetch's look after a wake, at only the partitions that
        woke it (FetchWakeups.rearm); None, a fetch's first look, at every partition
        of the session, as Kafka's leader reads them all on each fetch."""
        session = self.session
        specs = session.specs
        out = self.out
        candidates = []
        held = (
            specs.items()
            if woken_by is None
            else [(tp, specs[tp]) for tp in woken_by if tp in specs]
        )
        for tp, spec in held:
            if tp in out and out[tp].records:
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
