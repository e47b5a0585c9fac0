"""One `__consumer_offsets` partition's groups and offsets, without I/O (Kafka's
GroupCoordinatorShard).

Requests come in with an id chosen by the caller and the current time; what the shard
decides comes back as actions (coordinator_actions.py): `Respond`, now or later, and
`Append`, records for the shard's partition under the leader epoch it was loaded at.
The caller reports each append's outcome with `on_write_done`; a commit is answered
only then, and applied to the in-memory state only if the append was replicated (the
high watermark passed it). Timers (session timeouts, the rebalance and initial delays,
offset expiry) advance in `tick`. The shard replays its partition while loading,
then serves through its parts: the groups (group_metadata_manager.py), the classic
protocol over them (classic_group_protocol.py) and the offsets
(offset_metadata_manager.py), which share its actions."""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from seglog.storage.txn_verification import VerificationGuard

from . import offsets_records as rec
from .classic_group_protocol import ClassicGroupProtocol
from .consumer_group import ConsumerGroup
from .coordinator_actions import Action, ShardActions
from .coordinator_records import group_tombstone
from .group_config import GroupConfig
from .group_errors import (
    COORDINATOR_NOT_AVAILABLE,
    GROUP_ID_NOT_FOUND,
    NON_EMPTY_GROUP,
    NONE,
    NOT_COORDINATOR,
    append_error,
)
from .group_messages import (
    CommitPartition,
    ConsumerHeartbeat,
    ErrorResult,
    HeartbeatRequest,
    JoinRequest,
    LeaveRequest,
    ListedGroup,
    OffsetCommitRequest,
    SyncRequest,
    TopicPartition,
)
from .group_metadata_manager import GroupMetadataManager
from .group_state import ClassicGroup, GroupState
from .offset_metadata_manager import OffsetMetadataManager


@dataclass
class _Loading:
    offsets: dict[str, dict[TopicPartition, rec.OffsetCommitValue]] = field(default_factory=dict)
    groups: dict[str, rec.GroupMetadataValue] = field(default_factory=dict)
    # Transactional offset commits by producer id, until their marker is replayed.
    pending: dict[int, dict[str, dict[TopicPartition, rec.OffsetCommitValue]]] = field(
        default_factory=dict
    )


class CoordinatorShard:
    """The groups of one `__consumer_offsets` partition, led at `leader_epoch`."""

    def __init__(
        self, partition: int, leader_epoch: int, config: GroupConfig, rng: random.Random
    ) -> None:
        self.partition = partition
        self.leader_epoch = leader_epoch
        self.config = config
        self.rng = rng
        self.loading: _Loading | None = _Loading()
        self.actions = ShardActions(partition, leader_epoch)
        self.group_manager = GroupMetadataManager(
            config, rng, self.actions, has_offsets=lambda group_id: group_id in self.offsets
        )
        self.classic = ClassicGroupProtocol(self.group_manager)
        self.offset_manager = OffsetMetadataManager(self.group_manager)

    @property
    def groups(self) -> dict[str, ClassicGroup]:
        return self.group_manager.groups

    @property
    def consumer_groups(self) -> dict[str, ConsumerGroup]:
        return self.group_manager.consumer_groups

    @property
    def offsets(self) -> dict[str, dict[TopicPartition, rec.OffsetCommitValue]]:
        return self.offset_manager.offsets

    # --- loading ------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None, producer_id: int | None = None) -> None:
        """One record of the partition, in log order, while loading; `producer_id`: a
        record of that producer's transaction (TxnOffsetCommit), held until its marker."""
        assert self.loading is not None, "replay after loading finished"
        k = rec.decode_key(key)
        v = rec.decode_value(k, value)
        if isinstance(k, rec.OffsetCommitKey):
            tp = (k.topic, k.partition)
            if producer_id is not None:
                if isinstance(v, rec.OffsetCommitValue):
                    held = self.loading.pending.setdefault(producer_id, {})
                    held.setdefault(k.group, {})[tp] = v
            elif v is None:
                self.loading.offsets.get(k.group, {}).pop(tp, None)
            else:
                assert isinstance(v, rec.OffsetCommitValue)
                self.loading.offsets.setdefault(k.group, {})[tp] = v
        else:
            if v is None:
                self.loading.groups.pop(k.group, None)
            else:
                assert isinstance(v, rec.GroupMetadataValue)
                self.loading.groups[k.group] = v

    def complete_txn(self, producer_id: int, commit: bool) -> None:
        """A COMMIT/ABORT marker of `producer_id` on this partition: replayed while
        loading, or appended since (WriteTxnMarkers)."""
        if self.loading is None:
            self.offset_manager.complete_txn(producer_id, commit)
            return
        for group_id, values in self.loading.pending.pop(producer_id, {}).items():
            if commit:
                self.loading.offsets.setdefault(group_id, {}).update(values)

    def txn_commit(
        self,
        request_id: int,
        req: OffsetCommitRequest,
        producer: tuple[int, int],
        now_ms: int,
        guard: VerificationGuard | None = None,
    ) -> list[Action]:
        """TxnOffsetCommit (docs/transactions.md); `guard`: its verification's (KIP-890)."""
        return self.offset_manager.commit(request_id, req, now_ms, producer, guard)

    def finish_loading(self, now_ms: int) -> None:
        """The replayed state becomes the served state: a group with members is
        Stable at its last generation (its members' sessions start now), one
        without is Empty."""
        loaded = self.loading
        assert loaded is not None
        self.loading = None
        self.offset_manager.load(loaded.offsets)
        self.offset_manager.pending = loaded.pending
        self.group_manager.load(loaded.groups, self.offsets, now_ms)

    def unload(self) -> list[Action]:
        """This node no longer leads the partition: every parked request is told
        NOT_COORDINATOR; appends still in flight are forgotten (never acknowledged)."""
        self.classic.answer_parked(NOT_COORDINATOR)
        out = self.actions.take()
        self.actions.abandon_writes()
        self.group_manager.clear()
        self.offsets.clear()
        self.offset_manager.pending.clear()
        return out + self.actions.take()

    def on_write_done(self, write_id: int, error: str, now_ms: int) -> list[Action]:
        self.actions.write_done(write_id, error, now_ms)
        return self.actions.take()

    def pending_writes(self) -> int:
        return len(self.actions.writes)

    # --- the classic protocol -------------------------------------------------------

    def join(self, request_id: int, req: JoinRequest, now_ms: int) -> list[Action]:
        return self.classic.join(request_id, req, now_ms)

    def sync(self, request_id: int, req: SyncRequest, now_ms: int) -> list[Action]:
        return self.classic.sync(request_id, req, now_ms)

    def heartbeat(
        self,
        request_id: int,
        group_id: str,
        generation: int,
        member_id: str,
        instance: str | None,
        now_ms: int,
    ) -> list[Action]:
        req = HeartbeatRequest(group_id, generation, member_id, instance)
        return self.classic.heartbeat(request_id, req, now_ms)

    def leave(
        self,
        request_id: int,
        group_id: str,
        members: Iterable[tuple[str, str | None]],
        now_ms: int,
    ) -> list[Action]:
        return self.classic.leave(request_id, LeaveRequest(group_id, tuple(members)), now_ms)

    # --- KIP-848 ----------------------------------------------------------------------

    def consumer_heartbeat(
        self, request_id: int, req: ConsumerHeartbeat, topics: dict[str, int], now_ms: int
    ) -> list[Action]:
        return self.group_manager.consumer_heartbeat(request_id, req, topics, now_ms)

    def describe_consumer_group(self, request_id: int, group_id: str) -> list[Action]:
        return self.group_manager.describe_consumer_group(request_id, group_id)

    # --- offsets ------------------------------------------------------------------

    def commit(
        self,
        request_id: int,
        group_id: str,
        generation: int,
        member_id: str,
        instance: str | None,
        partitions: list[CommitPartition],
        now_ms: int,
        retention_ms: int = -1,
    ) -> list[Action]:
        """`retention_ms` (OffsetCommit v2-v4's retention time; -1: the broker's
        offsets.retention.minutes) is stored as the commit's expire timestamp."""
        req = OffsetCommitRequest(
            group_id, generation, member_id, instance, tuple(partitions), retention_ms
        )
        return self.offset_manager.commit(request_id, req, now_ms)

    def fetch_offsets(
        self, request_id: int, group_id: str, partitions: list[TopicPartition] | None
    ) -> list[Action]:
        return self.offset_manager.fetch_offsets(request_id, group_id, partitions)

    def delete_offsets(
        self, request_id: int, group_id: str, partitions: list[TopicPartition]
    ) -> list[Action]:
        return self.offset_manager.delete_offsets(request_id, group_id, partitions)

    # --- administration -------------------------------------------------------------

    def describe(self, request_id: int, group_id: str) -> list[Action]:
        return self.group_manager.describe(request_id, group_id)

    def list_groups(self, states: set[str]) -> list[ListedGroup]:
        return self.group_manager.list_groups(states)

    def delete_group(self, request_id: int, group_id: str, now_ms: int) -> list[Action]:
        """DeleteGroups: an empty group's offsets and metadata, as tombstones."""
        if group_id in self.consumer_groups:  # empty ones are not kept
            self.actions.respond(request_id, ErrorResult(NON_EMPTY_GROUP))
            return self.actions.take()
        group = self.groups.get(group_id)
        if group is not None and group.state is not GroupState.DEAD:
            # The timers due by now first, as Kafka's precise timer has run them: the
            # ticks come every 100 ms, and a member whose session ended just now would
            # otherwise keep the group "not empty" (librdkafka's 0081 deletes its
            # static members' groups exactly a session after closing them).
            self.classic.tick_group(group, now_ms)
        if group is None or group.state is GroupState.DEAD:
            self.actions.respond(request_id, ErrorResult(GROUP_ID_NOT_FOUND))
            return self.actions.take()
        if group.state is not GroupState.EMPTY:
            self.actions.respond(request_id, ErrorResult(NON_EMPTY_GROUP))
            return self.actions.take()
        records = [*self.offset_manager.tombstones(group_id), group_tombstone(group_id)]

        def stored(error: str, now: int) -> None:
            if error != NONE:
                self.actions.respond(request_id, ErrorResult(append_error(error)))
                return
            self.offsets.pop(group_id, None)
            self.group_manager.remove_if_empty(group_id, now if now >= 0 else now_ms)
            self.actions.respond(request_id, ErrorResult(NONE))

        if not self.actions.append(records, stored):
            self.actions.respond(request_id, ErrorResult(COORDINATOR_NOT_AVAILABLE))
        return self.actions.take()

    # --- timers -------------------------------------------------------------------

    def tick(self, now_ms: int) -> list[Action]:
        for group in list(self.groups.values()):
            self.classic.tick_group(group, now_ms)
        self.group_manager.tick(now_ms)
        self.offset_manager.tick(now_ms)
        return self.actions.take()
