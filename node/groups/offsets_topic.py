"""The group coordinator in a node: the I/O shell around the pure `GroupCoordinator`.

It follows the metadata: when this node becomes leader of a `__consumer_offsets`
partition it starts a shard and loads it (once the partition's high watermark has
reached the log end the new leader found, every record below it is replayed; until
then the shard's groups answer COORDINATOR_LOAD_IN_PROGRESS); when it stops leading
one, the shard is unloaded. The coordinator's appends go to the replica manager with
acks=all and the shard's leader epoch (an append under any other epoch is refused),
in the order the coordinator made them; one waiter thread per partition awaits them
in that order (so answers are applied in log order, as the replay after a failover
would) and reports each back. A ticker thread drives the timers.

Both front ends (the Kafka handlers and the gRPC GroupCoordinator servicer) call
`submit`, which hands back a Future of the coordinator's answer."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from seglog.controller.metadata_image import MetadataImage
from seglog.controller.metadata_records import MetadataRecord

# The plain wall clock, not the faulted one: the group coordinator's timers and commit
# stamps stay off the node's clock faults (docs/disk-and-clock-faults.md, Clocks).
from seglog.storage.disk_and_clock import plain_wall_ms as now_ms
from seglog.storage.log_txns import marker_of
from seglog.storage.record_batch import BatchHeader, NewRecord, build_batch, decode_records
from seglog.storage.txn_verification import VerificationGuard

from ..coordinator_shell import (
    CoordinatorShell,
    follow_leadership,
    led_partitions,
)
from ..event_log import EventLogger
from ..replica_manager import ReplicaManager
from .coordinator_actions import Action, Append, Respond
from .group_config import GroupConfig
from .group_coordinator import GroupCoordinator
from .group_coordinator_shard import CoordinatorShard
from .group_errors import (
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    NOT_COORDINATOR,
)
from .group_messages import (
    CommitPartition,
    ConsumerHeartbeat,
    ErrorResult,
    JoinRequest,
    ListedGroup,
    OffsetCommitRequest,
    Result,
    SyncRequest,
)
from .offsets_records import OFFSETS_TOPIC, OffsetsRecordError

_log = EventLogger("group_coordinator")

TICK_S = 0.1
OFFSETS_COMMIT_TIMEOUT_MS = 5_000  # Kafka's offsets.commit.timeout.ms

Call = Callable[[CoordinatorShard, int, int], list[Action]]  # shard, request id, now


class GroupCoordinatorRuntime(CoordinatorShell[Result]):
    def __init__(
        self,
        node_id: int,
        replica_manager: ReplicaManager,
        config: GroupConfig,
    ) -> None:
        super().__init__("group", TICK_S)
        self.topic = OFFSETS_TOPIC
        self.events, self.load_failed_event = _log, "load_groups_failed"
        self.node_id = node_id
        self.replica_manager = replica_manager
        self.config = config
        self.coordinator = GroupCoordinator(config, random.Random())
        # Whether this node's metadata has the offsets topic yet: a group request that
        # comes (from a client that learnt the coordinator elsewhere) before it has
        # is answered COORDINATOR_NOT_AVAILABLE — retriable — not NOT_COORDINATOR.
        self._offsets_topic_known = False
        self._topic_sizes: dict[str, int] = {}  # partition counts, for KIP-848's assignors

    # --- lifecycle (coordinator_shell.CoordinatorShell: start, shutdown, the ticker) ---

    def committed_offsets(self, limit: int) -> list[tuple[str, tuple[str, int], int]]:
        """(group, partition, committed offset) of the groups this node coordinates (the
        shards it has loaded), at most `limit` of them, for the lag metric."""
        out: list[tuple[str, tuple[str, int], int]] = []
        with self._lock:
            for shard in self.coordinator.shards.values():
                if shard.loading is not None:
                    continue
                for group, offsets in shard.offsets.items():
                    for tp, value in offsets.items():
                        if len(out) >= limit:
                            return out
                        out.append((group, tp, value.offset))
        return out

    def _tick(self) -> list[Action]:
        return self.coordinator.tick(now_ms())

    # --- following the metadata -----------------------------------------------------

    def on_metadata(self, image: MetadataImage, _records: list[MetadataRecord]) -> None:
        """Load the partitions this node now leads, unload those it no longer does
        (called after the replica manager applied the same image)."""
        sizes = {name: len(t.partitions) for name, t in image.topics.items()}
        led = led_partitions(image, OFFSETS_TOPIC, self.node_id)
        with self._lock:
            out, to_load = follow_leadership(
                self.coordinator, led or {}, lambda p: _log.info("unload_groups", partition=p)
            )
            self._offsets_topic_known = led is not None  # with its shards, atomically
            self._topic_sizes = sizes
            self._carry_out(out)
        self._start_loads(to_load)

    def _replay(
        self, shard: CoordinatorShard, data: bytes, batches: Sequence[tuple[int, BatchHeader]]
    ) -> int | None:
        """Decode one read's records, then replay them into the shard under the lock."""
        # (key, value, producer id of a transactional record) or a marker
        # (producer id, commit): TxnOffsetCommit's records wait for their marker.
        batch: list[tuple[bytes, bytes | None, int | None] | tuple[int, bool]] = []
        for pos, header in batches:
            if header.is_control:
                marker = marker_of(memoryview(data), pos, header)
                if marker is not None:
                    batch.append((header.producer_id, marker.kind == "COMMIT"))
                continue
            txn = header.producer_id if header.is_transactional else None
            for r in decode_records(data, pos, header):
                if r.key is None:
                    _log.error(
                        "offsets_record_without_key",
                        partition=shard.partition,
                        offset=r.offset,
                    )
                    continue
                batch.append((r.key, r.value, txn))
        with self._lock:
            if not self._current(shard):
                return None
            for item in batch:
                try:
                    if len(item) == 2:
                        shard.complete_txn(*item)
                    else:
                        shard.replay(*item)
                except OffsetsRecordError as e:
                    _log.error("offsets_record_undecodable", partition=shard.partition, why=str(e))
        return len(batch)

    def _loaded(self, shard: CoordinatorShard, records: int, ms: int) -> None:
        """Replayed once the HW reached the log end this leader found (everything a
        previous leader acknowledged is then below it): the groups are served."""
        with self._lock:
            if not self._current(shard) or shard.loading is None:
                return
            shard.finish_loading(now_ms())
        _log.info(
            "loaded_groups",
            partition=shard.partition,
            leader_epoch=shard.leader_epoch,
            records=records,
            groups=len(shard.groups),
            ms=ms,
        )

    # --- requests -------------------------------------------------------------------

    def submit(self, group_id: str, call: Call) -> Future[Result]:
        """Run `call` on the group's shard; the Future holds its answer (an
        ErrorResult when the group is not served here)."""
        answer: Future[Result] = Future()
        with self._lock:
            shard, error = self.coordinator.shard_for(group_id)
            if shard is None:
                if error == NOT_COORDINATOR and not self._offsets_topic_known:
                    error = COORDINATOR_NOT_AVAILABLE
                answer.set_result(ErrorResult(error))
                return answer
            rid = self._park(answer)
            if rid is None:
                answer.set_result(ErrorResult(COORDINATOR_NOT_AVAILABLE))
                return answer
            self._carry_out(call(shard, rid, now_ms()))
        return answer

    # The requests, by Kafka's API names (each answer is a Future of the result).

    def join_group(self, req: JoinRequest) -> Future[Result]:
        return self.submit(req.group_id, lambda s, rid, now: s.join(rid, req, now))

    def sync_group(self, req: SyncRequest) -> Future[Result]:
        return self.submit(req.group_id, lambda s, rid, now: s.sync(rid, req, now))

    def heartbeat(
        self, group_id: str, generation: int, member_id: str, instance: str | None
    ) -> Future[Result]:
        return self.submit(
            group_id,
            lambda s, rid, now: s.heartbeat(rid, group_id, generation, member_id, instance, now),
        )

    def consumer_group_heartbeat(self, req: ConsumerHeartbeat) -> Future[Result]:
        return self.submit(
            req.group_id,
            lambda s, rid, now: s.consumer_heartbeat(rid, req, self._topic_sizes, now),
        )

    def consumer_group_describe(self, group_id: str) -> Future[Result]:
        return self.submit(group_id, lambda s, rid, _now: s.describe_consumer_group(rid, group_id))

    def leave_group(self, group_id: str, members: list[tuple[str, str | None]]) -> Future[Result]:
        return self.submit(group_id, lambda s, rid, now: s.leave(rid, group_id, members, now))

    def offset_commit(
        self,
        group_id: str,
        generation: int,
        member_id: str,
        instance: str | None,
        partitions: list[CommitPartition],
        retention_ms: int = -1,
    ) -> Future[Result]:
        return self.submit(
            group_id,
            lambda s, rid, now: s.commit(
                rid, group_id, generation, member_id, instance, partitions, now, retention_ms
            ),
        )

    def offset_fetch(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> Future[Result]:
        return self.submit(
            group_id, lambda s, rid, _now: s.fetch_offsets(rid, group_id, partitions)
        )

    def describe_group(self, group_id: str) -> Future[Result]:
        return self.submit(group_id, lambda s, rid, _now: s.describe(rid, group_id))

    def delete_group(self, group_id: str) -> Future[Result]:
        return self.submit(group_id, lambda s, rid, now: s.delete_group(rid, group_id, now))

    def offset_delete(self, group_id: str, partitions: list[tuple[str, int]]) -> Future[Result]:
        return self.submit(
            group_id, lambda s, rid, _now: s.delete_offsets(rid, group_id, partitions)
        )

    def txn_offset_commit(
        self,
        group_id: str,
        producer: tuple[int, int],
        generation: int,
        member_id: str,
        instance: str | None,
        partitions: list[CommitPartition],
        guard: VerificationGuard | None = None,
    ) -> Future[Result]:
        """TxnOffsetCommit: offsets pending in the producer's transaction, appended
        with `guard` when the partition's verification needed one
        (node/transactions/offsets_verification.py)."""
        req = OffsetCommitRequest(group_id, generation, member_id, instance, tuple(partitions))
        return self.submit(
            group_id, lambda s, rid, now: s.txn_commit(rid, req, producer, now, guard)
        )

    def offsets_partition(self, group_id: str) -> tuple[int, str]:
        """The group's `__consumer_offsets` partition, and the error its requests are
        answered with when this node does not serve it (Kafka's validateGroupStatus)."""
        with self._lock:
            shard, error = self.coordinator.shard_for(group_id)
            if shard is None:
                if error == NOT_COORDINATOR and not self._offsets_topic_known:
                    error = COORDINATOR_NOT_AVAILABLE
                return -1, error
            return shard.partition, error

    def pending_txn_offsets(self, group_id: str) -> set[tuple[str, int]]:
        """The group's partitions whose offsets wait in an open transaction
        (OffsetFetch's require_stable answers them UNSTABLE_OFFSET_COMMIT)."""
        with self._lock:
            shard, _error = self.coordinator.shard_for(group_id)
            if shard is None:
                return set()
            held = shard.offset_manager.pending.values()
            return {tp for by_group in held for tp in by_group.get(group_id, {})}

    def on_txn_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        """A COMMIT/ABORT marker was written to `__consumer_offsets`-`partition`
        (WriteTxnMarkers): the producer's pending offsets there become visible or go."""
        with self._lock:
            shard = self.coordinator.shards.get(partition)
            if shard is not None:
                shard.complete_txn(producer_id, commit)

    def list_groups(self, states: set[str]) -> tuple[str, list[ListedGroup]]:
        with self._lock:
            return self.coordinator.list_groups(states)

    def is_loading(self, group_id: str) -> bool:
        with self._lock:
            return self.coordinator.shard_for(group_id)[1] == COORDINATOR_LOAD_IN_PROGRESS

    def _carry_out(self, actions: list[Action]) -> None:
        """Under the lock: answers resolve their Futures; appends are made now, in
        order, and awaited on the write pool."""
        for a in actions:
            if isinstance(a, Respond):
                self._resolve(a.request_id, a.result)
            else:
                self._append(a)

    def _append(self, a: Append) -> None:
        records = [NewRecord(value, key) for key, value in a.records]
        if a.producer is None:
            data = build_batch(records, now_ms=now_ms())
        else:  # TxnOffsetCommit: a batch of the producer's transaction
            pid, epoch = a.producer
            data = build_batch(
                records, now_ms=now_ms(), producer_id=pid, producer_epoch=epoch,
                base_sequence=0, is_transactional=True,
            )  # fmt: skip
        tp = (OFFSETS_TOPIC, a.partition)
        self._append_and_report(
            self.replica_manager, tp, a.leader_epoch, a.write_id, data, OFFSETS_COMMIT_TIMEOUT_MS,
            a.guard,
        )  # fmt: skip
