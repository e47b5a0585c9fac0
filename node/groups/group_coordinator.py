"""Kafka's classic group coordinator without I/O.

A `GroupCoordinator` holds one `CoordinatorShard` per `__consumer_offsets` partition
this node leads. Requests come in with an id chosen by the caller and the current
time; what the coordinator decides comes back as actions: `Respond` (the answer to a
request, now or later: a JoinGroup waits for the rebalance, a SyncGroup for the
leader's assignment) and `Append` (records for the shard's partition, appended under
the leader epoch the shard was loaded at). The caller reports each append's outcome
with `on_write_done`; a commit is answered only then, and applied to the in-memory
state only if the append was replicated (the high watermark passed it). Timers
(session timeouts, the rebalance and initial delays, offset expiry) advance in `tick`.
The node's shell (offsets_topic.py) and the simulator (group_sim.py) drive these same
objects."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from . import offsets_records as rec
from .consumer_group import (
    ConsumerConfig,
    ConsumerGroup,
    ConsumerHeartbeat,
    ConsumerHeartbeatResult,
    DescribedConsumerGroup,
)
from .group_state import ClassicGroup, GroupState, Member

TopicPartition = tuple[str, int]

NONE = "NONE"
COORDINATOR_LOAD_IN_PROGRESS = "COORDINATOR_LOAD_IN_PROGRESS"
COORDINATOR_NOT_AVAILABLE = "COORDINATOR_NOT_AVAILABLE"
NOT_COORDINATOR = "NOT_COORDINATOR"
ILLEGAL_GENERATION = "ILLEGAL_GENERATION"
INCONSISTENT_GROUP_PROTOCOL = "INCONSISTENT_GROUP_PROTOCOL"
INVALID_GROUP_ID = "INVALID_GROUP_ID"
UNKNOWN_MEMBER_ID = "UNKNOWN_MEMBER_ID"
INVALID_SESSION_TIMEOUT = "INVALID_SESSION_TIMEOUT"
REBALANCE_IN_PROGRESS = "REBALANCE_IN_PROGRESS"
MEMBER_ID_REQUIRED = "MEMBER_ID_REQUIRED"
FENCED_INSTANCE_ID = "FENCED_INSTANCE_ID"
GROUP_ID_NOT_FOUND = "GROUP_ID_NOT_FOUND"
NON_EMPTY_GROUP = "NON_EMPTY_GROUP"
GROUP_SUBSCRIBED_TO_TOPIC = "GROUP_SUBSCRIBED_TO_TOPIC"
OFFSET_METADATA_TOO_LARGE = "OFFSET_METADATA_TOO_LARGE"
GROUP_MAX_SIZE_REACHED = "GROUP_MAX_SIZE_REACHED"
UNKNOWN_SERVER_ERROR = "UNKNOWN_SERVER_ERROR"
STALE_MEMBER_EPOCH = "STALE_MEMBER_EPOCH"

# Append errors that mean this node no longer leads the partition: the client must
# find the coordinator again (Kafka maps them the same way).
_NOT_COORDINATOR_ERRORS = frozenset(
    {
        "NOT_LEADER_OR_FOLLOWER",
        "FENCED_LEADER_EPOCH",
        "UNKNOWN_TOPIC_OR_PARTITION",
        "NOT_COORDINATOR",
        "KAFKA_STORAGE_ERROR",
    }
)
_UNAVAILABLE_ERRORS = frozenset(
    {
        "NOT_ENOUGH_REPLICAS",
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        "REQUEST_TIMED_OUT",
        "COORDINATOR_NOT_AVAILABLE",
    }
)

MAX_PENDING_WRITES = 10_000  # a shard's appends in flight; beyond: COORDINATOR_NOT_AVAILABLE


def append_error(error: str) -> str:
    """What a client is told when the append of its request failed."""
    if error in _NOT_COORDINATOR_ERRORS:
        return NOT_COORDINATOR
    if error in _UNAVAILABLE_ERRORS:
        return COORDINATOR_NOT_AVAILABLE
    return UNKNOWN_SERVER_ERROR


@dataclass(frozen=True)
class GroupConfig:
    """Kafka's broker settings for the classic protocol, with Kafka's defaults."""

    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = 2**31 - 1
    offsets_retention_minutes: int = 10_080
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4_096
    offsets_topic_num_partitions: int = 50
    consumer: ConsumerConfig = ConsumerConfig()  # KIP-848's group.consumer.* settings

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000


# --- requests and answers (the fields of Kafka's messages, by Kafka's names) ----------


@dataclass(frozen=True)
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    require_known_member_id: bool = True  # JoinGroup v4+
    client_id: str = ""
    client_host: str = ""
    # KIP-814 (JoinGroup v9+): a restarted static leader may be told to skip the
    # assignment instead of the whole group rebalancing.
    supports_skip_assignment: bool = False


@dataclass(frozen=True)
class JoinMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinResult:
    error: str
    generation: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: tuple[JoinMember, ...] = ()
    skip_assignment: bool = False


@dataclass(frozen=True)
class SyncRequest:
    group_id: str
    generation: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class SyncResult:
    error: str
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True)
class ErrorResult:
    error: str


@dataclass(frozen=True)
class LeaveResult:
    error: str
    members: tuple[tuple[str, str | None, str], ...] = ()  # member id, instance id, error


@dataclass(frozen=True)
class CommitPartition:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str = ""


@dataclass(frozen=True)
class CommitResult:
    errors: tuple[tuple[str, int, str], ...]  # topic, partition, error


@dataclass(frozen=True)
class FetchedOffset:
    topic: str
    partition: int
    offset: int  # -1: none committed
    leader_epoch: int
    metadata: str
    error: str = NONE


@dataclass(frozen=True)
class OffsetFetchResult:
    error: str
    offsets: tuple[FetchedOffset, ...] = ()


@dataclass(frozen=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class DescribedGroup:
    error: str
    group_id: str
    state: str = GroupState.DEAD.value
    protocol_type: str = ""
    protocol: str = ""
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


@dataclass(frozen=True)
class OffsetDeleteResult:
    error: str
    errors: tuple[tuple[str, int, str], ...] = ()


Result = (
    JoinResult
    | SyncResult
    | ErrorResult
    | LeaveResult
    | CommitResult
    | OffsetFetchResult
    | DescribedGroup
    | OffsetDeleteResult
    | ConsumerHeartbeatResult
    | DescribedConsumerGroup
)


# --- actions -------------------------------------------------------------------------


@dataclass(frozen=True)
class Respond:
    request_id: int
    result: Result


@dataclass(frozen=True)
class Append:
    """Records for `__consumer_offsets`-`partition`, to append as leader of
    `leader_epoch` only (an append under another epoch must fail), with acks=all."""

    partition: int
    leader_epoch: int
    write_id: int
    records: tuple[tuple[bytes, bytes | None], ...]


Action = Respond | Append
WriteDone = Callable[[str, int], None]  # (append error, now_ms)


@dataclass
class _Loading:
    offsets: dict[str, dict[TopicPartition, rec.OffsetCommitValue]] = field(default_factory=dict)
    groups: dict[str, rec.GroupMetadataValue] = field(default_factory=dict)


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
        self.groups: dict[str, ClassicGroup] = {}
        # KIP-848 groups; in memory only: a new coordinator makes their members rejoin.
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        self.offsets: dict[str, dict[TopicPartition, rec.OffsetCommitValue]] = {}
        self._writes: dict[int, WriteDone] = {}
        self._next_write = 0
        self._out: list[Action] = []
        self._expiring: set[tuple[str, TopicPartition | None]] = set()
        self._next_expiry_check = 0

    # --- loading ------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> None:
        """One record of the partition, in log order, while loading."""
        assert self.loading is not None, "replay after loading finished"
        k = rec.decode_key(key)
        v = rec.decode_value(k, value)
        if isinstance(k, rec.OffsetCommitKey):
            tp = (k.topic, k.partition)
            if v is None:
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

    def finish_loading(self, now_ms: int) -> None:
        """The replayed state becomes the served state: a group with members is
        Stable at its last generation (its members' sessions start now), one
        without is Empty."""
        loaded = self.loading
        assert loaded is not None
        self.loading = None
        self.offsets = {g: dict(o) for g, o in loaded.offsets.items() if o}
        for group_id, value in loaded.groups.items():
            group = ClassicGroup(
                group_id,
                generation=value.generation,
                protocol_type=value.protocol_type or None,
                protocol=value.protocol,
                leader=value.leader,
                state_timestamp_ms=value.current_state_timestamp,
            )
            for m in value.members:
                group.members[m.member_id] = Member(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.session_timeout,
                    m.rebalance_timeout,
                    value.protocol_type,
                    [(value.protocol or "", m.subscription)],
                    assignment=m.assignment,
                    heartbeat_deadline_ms=now_ms + m.session_timeout,
                )
                if m.group_instance_id:
                    group.static_members[m.group_instance_id] = m.member_id
            if group.members and group.leader in group.members:
                group.state = GroupState.STABLE
            else:
                group.members.clear()
                group.static_members.clear()
                group.leader = None
            if group.state_timestamp_ms < 0:
                group.state_timestamp_ms = now_ms
            group.check()
            self.groups[group_id] = group
        for group_id in self.offsets:
            if group_id not in self.groups:
                self.groups[group_id] = ClassicGroup(group_id, state_timestamp_ms=now_ms)

    def unload(self) -> list[Action]:
        """This node no longer leads the partition: every parked request is told
        NOT_COORDINATOR; appends still in flight are forgotten (never acknowledged)."""
        for group in self.groups.values():
            for m in group.members.values():
                if m.awaiting_join is not None:
                    self._respond(
                        m.awaiting_join, JoinResult(NOT_COORDINATOR, member_id=m.member_id)
                    )
                    m.awaiting_join = None
                if m.awaiting_sync is not None:
                    self._respond(m.awaiting_sync, SyncResult(NOT_COORDINATOR))
                    m.awaiting_sync = None
        out = self._take()
        for write in list(self._writes.values()):
            write(NOT_COORDINATOR, -1)
        self._writes.clear()
        self.groups.clear()
        self.consumer_groups.clear()
        self.offsets.clear()
        return out + self._take()

    # --- plumbing -----------------------------------------------------------------

    def _take(self) -> list[Action]:
        out, self._out = self._out, []
        return out

    def _respond(self, request_id: int, result: Result) -> None:
        self._out.append(Respond(request_id, result))

    def _append(self, records: Iterable[tuple[bytes, bytes | None]], done: WriteDone) -> bool:
        if len(self._writes) >= MAX_PENDING_WRITES:
            return False
        self._next_write += 1
        self._writes[self._next_write] = done
        self._out.append(
            Append(self.partition, self.leader_epoch, self._next_write, tuple(records))
        )
        return True

    def on_write_done(self, write_id: int, error: str, now_ms: int) -> list[Action]:
        done = self._writes.pop(write_id, None)
        if done is not None:
            done(error, now_ms)
        return self._take()

    def pending_writes(self) -> int:
        return len(self._writes)

    def _member_id(self, client_id: str) -> str:
        return f"{client_id}-{self.rng.getrandbits(128):032x}"

    def _group_record(self, group: ClassicGroup) -> tuple[bytes, bytes]:
        protocol = group.protocol or ""
        members = tuple(
            rec.MemberMetadata(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.session_timeout_ms,
                m.metadata(protocol),
                m.assignment,
            )
            for m in group.members.values()
        )
        value = rec.GroupMetadataValue(
            group.protocol_type or "",
            group.generation,
            group.protocol,
            group.leader,
            group.state_timestamp_ms,
            members,
        )
        return rec.encode_key(rec.GroupMetadataKey(group.group_id)), rec.encode_value(value)

    # --- JoinGroup ----------------------------------------------------------------

    def join(self, request_id: int, req: JoinRequest, now_ms: int) -> list[Action]:
        cfg = self.config
        protocols = list(req.protocols)
        if not (
            cfg.group_min_session_timeout_ms
            <= req.session_timeout_ms
            <= cfg.group_max_session_timeout_ms
        ):
            self._respond(request_id, JoinResult(INVALID_SESSION_TIMEOUT, member_id=req.member_id))
            return self._take()
        consumer_group = self.consumer_groups.get(req.group_id)
        if consumer_group is not None:
            if consumer_group.members:
                # A group id is of one type at a time: a classic member cannot join
                # a consumer group (Kafka without its upgrade path).
                self._respond(
                    request_id, JoinResult(INCONSISTENT_GROUP_PROTOCOL, member_id=req.member_id)
                )
                return self._take()
            del self.consumer_groups[req.group_id]  # empty: becomes classic
        group = self.groups.get(req.group_id)
        if group is None:
            if req.member_id:
                self._respond(request_id, JoinResult(UNKNOWN_MEMBER_ID, member_id=req.member_id))
                return self._take()
            group = ClassicGroup(req.group_id, state_timestamp_ms=now_ms)
            self.groups[req.group_id] = group
        if group.state is GroupState.DEAD:
            self._respond(
                request_id, JoinResult(COORDINATOR_NOT_AVAILABLE, member_id=req.member_id)
            )
            return self._take()
        if not group.supports(req.protocol_type, protocols):
            self._respond(
                request_id, JoinResult(INCONSISTENT_GROUP_PROTOCOL, member_id=req.member_id)
            )
            return self._take()
        if not req.member_id:
            self._join_unknown_member(request_id, group, req, protocols, now_ms)
        else:
            self._join_known_member(request_id, group, req, protocols, now_ms)
        group.check()
        return self._take()

    def _join_unknown_member(
        self,
        request_id: int,
        group: ClassicGroup,
        req: JoinRequest,
        protocols: list[tuple[str, bytes]],
        now_ms: int,
    ) -> None:
        instance = req.group_instance_id
        if len(group.members) >= self.config.group_max_size and (
            instance is None or instance not in group.static_members
        ):
            self._respond(request_id, JoinResult(GROUP_MAX_SIZE_REACHED))
            return
        new_id = self._member_id(req.client_id or "member")
        if instance is not None and instance in group.static_members:
            self._replace_static_member(request_id, group, req, protocols, new_id, now_ms)
            return
        if instance is None and req.require_known_member_id:
            # KIP-394: the member id goes back first; the member joins again with it.
            group.pending_members[new_id] = now_ms + req.session_timeout_ms
            self._respond(request_id, JoinResult(MEMBER_ID_REQUIRED, member_id=new_id))
            return
        self._add_member_and_rebalance(request_id, group, req, protocols, new_id, now_ms)

    def _join_known_member(
        self,
        request_id: int,
        group: ClassicGroup,
        req: JoinRequest,
        protocols: list[tuple[str, bytes]],
        now_ms: int,
    ) -> None:
        if req.member_id in group.pending_members:
            del group.pending_members[req.member_id]
            self._add_member_and_rebalance(request_id, group, req, protocols, req.member_id, now_ms)
            return
        member = group.members.get(req.member_id)
        if member is None:
            self._respond(request_id, JoinResult(UNKNOWN_MEMBER_ID, member_id=req.member_id))
            return
        if member.group_instance_id != req.group_instance_id and req.group_instance_id:
            self._respond(request_id, JoinResult(FENCED_INSTANCE_ID, member_id=req.member_id))
            return
        if group.state is GroupState.PREPARING_REBALANCE:
            self._update_member(member, req, protocols, request_id, now_ms)
            self._maybe_complete_join(group, now_ms)
        elif group.state is GroupState.COMPLETING_REBALANCE:
            if member.same_protocols(protocols):
                # A retried JoinGroup: the same answer again.
                self._respond(request_id, self._join_result(group, member.member_id))
            else:
                self._update_member(member, req, protocols, request_id, now_ms)
                self._prepare_rebalance(group, now_ms)
        elif group.state is GroupState.STABLE:
            if member.member_id == group.leader or not member.same_protocols(protocols):
                self._update_member(member, req, protocols, request_id, now_ms)
                self._prepare_rebalance(group, now_ms)
            else:
                member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
                self._respond(request_id, self._join_result(group, member.member_id))
        else:
            self._respond(request_id, JoinResult(UNKNOWN_MEMBER_ID, member_id=req.member_id))

    def _update_member(
        self,
        member: Member,
        req: JoinRequest,
        protocols: list[tuple[str, bytes]],
        request_id: int,
        now_ms: int,
    ) -> None:
        if member.awaiting_join is not None and member.awaiting_join != request_id:
            # Kafka answers the older parked JoinGroup of the same member this way.
            self._respond(member.awaiting_join, JoinResult(UNKNOWN_MEMBER_ID))
        member.protocols = protocols
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.awaiting_join = request_id
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms

    def _add_member_and_rebalance(
        self,
        request_id: int,
        group: ClassicGroup,
        req: JoinRequest,
        protocols: list[tuple[str, bytes]],
        member_id: str,
        now_ms: int,
    ) -> None:
        member = Member(
            member_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.session_timeout_ms,
            req.rebalance_timeout_ms,
            req.protocol_type,
            protocols,
            awaiting_join=request_id,
            heartbeat_deadline_ms=now_ms + req.session_timeout_ms,
            is_new=True,
        )
        if group.is_empty():
            group.protocol_type = req.protocol_type
        group.members[member_id] = member
        if req.group_instance_id:
            group.static_members[req.group_instance_id] = member_id
        if group.leader is None:
            group.leader = member_id
        if group.state is GroupState.PREPARING_REBALANCE:
            if group.initial_delay and group.join_limit_ms is not None:
                # Another member during the initial delay: wait once more, up to the limit.
                group.join_deadline_ms = min(
                    now_ms + self.config.group_initial_rebalance_delay_ms, group.join_limit_ms
                )
            self._maybe_complete_join(group, now_ms)
        else:
            self._prepare_rebalance(group, now_ms)

    def _replace_static_member(
        self,
        request_id: int,
        group: ClassicGroup,
        req: JoinRequest,
        protocols: list[tuple[str, bytes]],
        new_id: str,
        now_ms: int,
    ) -> None:
        """A known group.instance.id joins with no member id (a restarted static
        member): it takes over the old member id's place; the old one is fenced."""
        assert req.group_instance_id is not None
        old_id = group.static_members[req.group_instance_id]
        old = group.members.pop(old_id)
        if old.awaiting_join is not None:
            self._respond(old.awaiting_join, JoinResult(FENCED_INSTANCE_ID, member_id=old_id))
        if old.awaiting_sync is not None:
            self._respond(old.awaiting_sync, SyncResult(FENCED_INSTANCE_ID))
        member = Member(
            new_id,
            req.group_instance_id,
            req.client_id,
            req.client_host,
            req.session_timeout_ms,
            req.rebalance_timeout_ms,
            req.protocol_type,
            protocols,
            assignment=old.assignment,
            heartbeat_deadline_ms=now_ms + req.session_timeout_ms,
        )
        group.members[new_id] = member
        group.static_members[req.group_instance_id] = new_id
        was_leader = group.leader == old_id
        if was_leader:
            group.leader = new_id
        unchanged = old.same_subscriptions(protocols)
        if group.state is GroupState.STABLE and unchanged:
            # Nothing changed for the group: the member gets the current generation
            # (and its assignment with SyncGroup) once the new member id is stored. A
            # restarted leader gets the members with skip_assignment (KIP-814): the
            # assignment it would compute is the one the group already holds. Before
            # JoinGroup v9 it cannot be told so, and Kafka answers with the old leader
            # id and no members: the client sees itself a follower and only syncs.
            generation = group.generation
            skip = was_leader and req.supports_skip_assignment

            def stored(error: str, _now: int) -> None:
                if error != NONE:
                    self._respond(request_id, JoinResult(append_error(error), member_id=new_id))
                elif group.generation != generation or new_id not in group.members:
                    self._respond(request_id, JoinResult(FENCED_INSTANCE_ID, member_id=new_id))
                else:
                    result = replace(self._join_result(group, new_id), skip_assignment=skip)
                    if was_leader and not skip:
                        result = replace(result, leader=old_id, members=())
                    self._respond(request_id, result)

            if not self._append([self._group_record(group)], stored):
                self._respond(request_id, JoinResult(COORDINATOR_NOT_AVAILABLE, member_id=new_id))
            return
        member.awaiting_join = request_id
        if group.state is GroupState.PREPARING_REBALANCE:
            self._maybe_complete_join(group, now_ms)
        else:
            self._prepare_rebalance(group, now_ms)

    def _join_result(self, group: ClassicGroup, member_id: str) -> JoinResult:
        members: tuple[JoinMember, ...] = ()
        protocol = group.protocol or ""
        if member_id == group.leader:
            members = tuple(
                JoinMember(m.member_id, m.group_instance_id, m.metadata(protocol))
                for m in group.members.values()
            )
        return JoinResult(
            NONE,
            group.generation,
            group.protocol_type,
            group.protocol,
            group.leader or "",
            member_id,
            members,
        )

    # --- rebalancing --------------------------------------------------------------

    def _prepare_rebalance(self, group: ClassicGroup, now_ms: int) -> None:
        if group.state is GroupState.COMPLETING_REBALANCE:
            for m in group.members.values():
                if m.awaiting_sync is not None:
                    self._respond(m.awaiting_sync, SyncResult(REBALANCE_IN_PROGRESS))
                    m.awaiting_sync = None
        initial = group.state is GroupState.EMPTY
        timeout = group.max_rebalance_timeout_ms()
        group.transition(GroupState.PREPARING_REBALANCE, now_ms)
        group.sync_deadline_ms = None
        group.synced = set()
        group.initial_delay = initial and self.config.group_initial_rebalance_delay_ms > 0
        if group.initial_delay:
            group.join_limit_ms = now_ms + timeout
            group.join_deadline_ms = now_ms + min(
                self.config.group_initial_rebalance_delay_ms, timeout
            )
        else:
            group.join_limit_ms = None
            group.join_deadline_ms = now_ms + timeout
            self._maybe_complete_join(group, now_ms)

    def _maybe_complete_join(self, group: ClassicGroup, now_ms: int) -> None:
        if group.state is not GroupState.PREPARING_REBALANCE or group.initial_delay:
            return
        all_joined = not group.pending_members and all(
            m.awaiting_join is not None for m in group.members.values()
        )
        if all_joined:
            self._complete_join(group, now_ms)

    def _complete_join(self, group: ClassicGroup, now_ms: int) -> None:
        """The join phase ends: members that did not rejoin are removed, the next
        generation starts, every waiting JoinGroup is answered."""
        for m in [m for m in group.members.values() if m.awaiting_join is None]:
            self._remove_member(group, m.member_id)
        group.pending_members.clear()
        group.join_deadline_ms = None
        group.join_limit_ms = None
        group.initial_delay = False
        group.generation += 1
        if group.is_empty():
            group.protocol = None
            group.leader = None
            group.transition(GroupState.EMPTY, now_ms)
            self._append([self._group_record(group)], lambda _e, _n: None)
            return
        if group.leader not in group.members:
            group.leader = next(iter(group.members))
        group.protocol = group.select_protocol()
        group.transition(GroupState.COMPLETING_REBALANCE, now_ms)
        group.sync_deadline_ms = now_ms + group.max_rebalance_timeout_ms()
        group.synced = set()
        for m in group.members.values():
            assert m.awaiting_join is not None
            self._respond(m.awaiting_join, self._join_result(group, m.member_id))
            m.awaiting_join = None
            m.is_new = False
            m.assignment = b""
            m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms

    def _remove_member(self, group: ClassicGroup, member_id: str) -> None:
        m = group.members.pop(member_id)
        if m.group_instance_id and group.static_members.get(m.group_instance_id) == member_id:
            del group.static_members[m.group_instance_id]
        if m.awaiting_join is not None:
            self._respond(m.awaiting_join, JoinResult(UNKNOWN_MEMBER_ID, member_id=member_id))
        if m.awaiting_sync is not None:
            self._respond(m.awaiting_sync, SyncResult(UNKNOWN_MEMBER_ID))
        if group.leader == member_id:
            group.leader = next(iter(group.members), None)

    def _member_gone(self, group: ClassicGroup, member_id: str, now_ms: int) -> None:
        """A member left or its session expired: the others rebalance."""
        self._remove_member(group, member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, now_ms)
        elif group.state is GroupState.PREPARING_REBALANCE:
            if group.is_empty() and not group.pending_members:
                self._complete_join(group, now_ms)
            else:
                self._maybe_complete_join(group, now_ms)

    # --- SyncGroup ----------------------------------------------------------------

    def sync(self, request_id: int, req: SyncRequest, now_ms: int) -> list[Action]:
        group = self.groups.get(req.group_id)
        error = self._check_member(group, req.member_id, req.group_instance_id)
        if error is None and group is not None:
            if req.generation != group.generation:
                error = ILLEGAL_GENERATION
            elif (req.protocol_type and req.protocol_type != group.protocol_type) or (
                req.protocol_name and req.protocol_name != group.protocol
            ):
                error = INCONSISTENT_GROUP_PROTOCOL
            elif group.state is GroupState.PREPARING_REBALANCE:
                error = REBALANCE_IN_PROGRESS
        if error is not None or group is None:
            self._respond(request_id, SyncResult(error or UNKNOWN_MEMBER_ID))
            return self._take()
        member = group.members[req.member_id]
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if group.state is GroupState.STABLE:
            self._respond(request_id, self._sync_result(group, member))
            return self._take()
        assert group.state is GroupState.COMPLETING_REBALANCE
        if member.awaiting_sync is not None:
            self._respond(member.awaiting_sync, SyncResult(REBALANCE_IN_PROGRESS))
        member.awaiting_sync = request_id
        group.synced.add(member.member_id)
        if member.member_id == group.leader and group.sync_write_generation != group.generation:
            self._store_assignment(group, dict(req.assignments), now_ms)
        return self._take()

    def _store_assignment(
        self, group: ClassicGroup, assignments: dict[str, bytes], now_ms: int
    ) -> None:
        """The leader's assignment is stored with the group; once replicated the group
        is Stable and every waiting member gets its part."""
        generation = group.generation
        for m in group.members.values():
            m.assignment = assignments.get(m.member_id, b"")
        group.sync_write_generation = generation

        def stored(error: str, now: int) -> None:
            if group.sync_write_generation == generation:
                group.sync_write_generation = -1
            current = (
                self.groups.get(group.group_id) is group
                and group.generation == generation
                and group.state is GroupState.COMPLETING_REBALANCE
            )
            if not current:
                return  # a rebalance started meanwhile: its waiters were answered
            if error != NONE:
                for m in group.members.values():
                    m.assignment = b""
                    if m.awaiting_sync is not None:
                        self._respond(m.awaiting_sync, SyncResult(append_error(error)))
                        m.awaiting_sync = None
                self._prepare_rebalance(group, now if now >= 0 else now_ms)
                return
            group.transition(GroupState.STABLE, now if now >= 0 else now_ms)
            group.sync_deadline_ms = None
            for m in group.members.values():
                if m.awaiting_sync is not None:
                    self._respond(m.awaiting_sync, self._sync_result(group, m))
                    m.awaiting_sync = None

        if not self._append([self._group_record(group)], stored):
            group.sync_write_generation = -1
            self._prepare_rebalance(group, now_ms)

    def _sync_result(self, group: ClassicGroup, member: Member) -> SyncResult:
        return SyncResult(NONE, group.protocol_type, group.protocol, member.assignment)

    def _check_member(
        self, group: ClassicGroup | None, member_id: str, instance: str | None
    ) -> str | None:
        if group is None or group.state in (GroupState.DEAD, GroupState.EMPTY):
            return UNKNOWN_MEMBER_ID
        member = group.members.get(member_id)
        if member is None:
            if instance and instance in group.static_members:
                return FENCED_INSTANCE_ID
            return UNKNOWN_MEMBER_ID
        if instance and member.group_instance_id != instance:
            return FENCED_INSTANCE_ID
        return None

    # --- KIP-848: ConsumerGroupHeartbeat -------------------------------------------

    def consumer_heartbeat(
        self, request_id: int, req: ConsumerHeartbeat, topics: dict[str, int], now_ms: int
    ) -> list[Action]:
        """One ConsumerGroupHeartbeat; `topics`: the cluster's partition counts."""
        group = self.consumer_groups.get(req.group_id)
        if group is None:
            classic = self.groups.get(req.group_id)
            if classic is not None and not classic.is_empty():
                self._respond(
                    request_id,
                    ConsumerHeartbeatResult(
                        GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group."
                    ),
                )
                return self._take()
            if req.member_epoch != 0:
                self._respond(
                    request_id,
                    ConsumerHeartbeatResult(
                        UNKNOWN_MEMBER_ID, f"{req.member_id} is not a member of {req.group_id}"
                    ),
                )
                return self._take()
            if classic is not None:
                # An empty classic group (a placeholder for its offsets) becomes a
                # consumer group; the offsets stay.
                del self.groups[req.group_id]
            group = ConsumerGroup(req.group_id, self.config.consumer)
            self.consumer_groups[req.group_id] = group

        def member_id() -> str:
            return str(uuid.UUID(int=self.rng.getrandbits(128)))

        self._respond(request_id, group.heartbeat(req, topics, now_ms, member_id))
        self._retire_if_empty(group, now_ms)
        return self._take()

    def _retire_if_empty(self, group: ConsumerGroup, now_ms: int) -> None:
        """A consumer group without members is not kept (nothing of it is persisted):
        its offsets stay, held by an empty classic group as after a reload, so they
        expire, and can be deleted, as any group's."""
        if group.members:
            return
        del self.consumer_groups[group.group_id]
        if group.group_id in self.offsets:
            self.groups[group.group_id] = ClassicGroup(group.group_id, state_timestamp_ms=now_ms)

    def describe_consumer_group(self, request_id: int, group_id: str) -> list[Action]:
        """ConsumerGroupDescribe: a classic group, or none, is GROUP_ID_NOT_FOUND."""
        group = self.consumer_groups.get(group_id)
        if group is None:
            result = DescribedConsumerGroup(
                GROUP_ID_NOT_FOUND, group_id, f"Group {group_id} is not a consumer group."
            )
        else:
            result = group.describe()
        self._respond(request_id, result)
        return self._take()

    # --- Heartbeat and LeaveGroup ---------------------------------------------------

    def heartbeat(
        self,
        request_id: int,
        group_id: str,
        generation: int,
        member_id: str,
        instance: str | None,
        now_ms: int,
    ) -> list[Action]:
        group = self.groups.get(group_id)
        error = self._check_member(group, member_id, instance)
        if error is None and group is not None:
            member = group.members[member_id]
            if generation != group.generation:
                error = ILLEGAL_GENERATION
            else:
                member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
                if group.state is GroupState.PREPARING_REBALANCE:
                    error = REBALANCE_IN_PROGRESS
        self._respond(request_id, ErrorResult(error or NONE))
        return self._take()

    def leave(
        self,
        request_id: int,
        group_id: str,
        members: Iterable[tuple[str, str | None]],
        now_ms: int,
    ) -> list[Action]:
        group = self.groups.get(group_id)
        if group is None:
            self._respond(request_id, LeaveResult(UNKNOWN_MEMBER_ID))
            return self._take()
        answers = []
        for member_id, instance in members:
            if instance and not member_id:
                member_id = group.static_members.get(instance, "")
            if member_id in group.pending_members:
                del group.pending_members[member_id]
                answers.append((member_id, instance, NONE))
                self._maybe_complete_join(group, now_ms)
                continue
            error = self._check_member(group, member_id, instance)
            answers.append((member_id, instance, error or NONE))
            if error is None:
                self._member_gone(group, member_id, now_ms)
        self._respond(request_id, LeaveResult(NONE, tuple(answers)))
        group.check()
        return self._take()

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

        def fail(error: str) -> list[Action]:
            self._respond(
                request_id,
                CommitResult(tuple((p.topic, p.partition, error) for p in partitions)),
            )
            return self._take()

        consumer_group = self.consumer_groups.get(group_id)
        group = self.groups.get(group_id)
        if consumer_group is not None:
            # KIP-848: the generation is the member's epoch, which must be current.
            if generation >= 0 or member_id:
                epoch = consumer_group.current_epoch_of(member_id)
                if epoch is None:
                    return fail(UNKNOWN_MEMBER_ID)
                if generation != epoch:
                    return fail(STALE_MEMBER_EPOCH)
            elif consumer_group.members:
                return fail(UNKNOWN_MEMBER_ID)  # an anonymous commit into a live group
            group = ClassicGroup(group_id, state_timestamp_ms=now_ms)  # offsets' holder only
        elif group is None:
            if generation >= 0 or member_id:
                return fail(ILLEGAL_GENERATION)
            # A commit from outside any group (assign() users, admin tools).
            group = ClassicGroup(group_id, state_timestamp_ms=now_ms)
            self.groups[group_id] = group
        if group.state is GroupState.DEAD:
            return fail(COORDINATOR_NOT_AVAILABLE)
        if consumer_group is None and not (
            generation < 0 and not member_id and group.state is GroupState.EMPTY
        ):
            error = self._check_member(group, member_id, instance)
            if error is not None:
                return fail(error)
            if generation != group.generation:
                return fail(ILLEGAL_GENERATION)
            if group.state is GroupState.COMPLETING_REBALANCE:
                return fail(REBALANCE_IN_PROGRESS)
            m = group.members[member_id]
            m.heartbeat_deadline_ms = max(m.heartbeat_deadline_ms, now_ms + m.session_timeout_ms)
        errors: dict[TopicPartition, str] = {}
        records: list[tuple[bytes, bytes | None]] = []
        values: dict[TopicPartition, rec.OffsetCommitValue] = {}
        for p in partitions:
            tp = (p.topic, p.partition)
            if len(p.metadata.encode("utf-8")) > self.config.offset_metadata_max_bytes:
                errors[tp] = OFFSET_METADATA_TOO_LARGE
                continue
            expire = now_ms + retention_ms if retention_ms >= 0 else -1
            value = rec.OffsetCommitValue(p.offset, p.leader_epoch, p.metadata, now_ms, expire)
            values[tp] = value
            records.append(
                (
                    rec.encode_key(rec.OffsetCommitKey(group_id, p.topic, p.partition)),
                    rec.encode_value(value),
                )
            )

        def answer(append: str) -> None:
            out = []
            for p in partitions:
                tp = (p.topic, p.partition)
                out.append((p.topic, p.partition, errors.get(tp, append)))
            self._respond(request_id, CommitResult(tuple(out)))

        if not records:
            answer(NONE)
            return self._take()

        def stored(error: str, _now: int) -> None:
            if error == NONE:
                # In log order: the last append for a partition is its committed offset.
                self.offsets.setdefault(group_id, {}).update(values)
                if group_id not in self.groups and group_id not in self.consumer_groups:
                    self.groups[group_id] = group
                answer(NONE)
            else:
                answer(append_error(error))

        if not self._append(records, stored):
            return fail(COORDINATOR_NOT_AVAILABLE)
        return self._take()

    def fetch_offsets(
        self, request_id: int, group_id: str, partitions: list[TopicPartition] | None
    ) -> list[Action]:
        """Committed offsets (only acknowledged ones); `partitions` None: all."""
        committed = self.offsets.get(group_id, {})
        wanted = sorted(committed) if partitions is None else partitions
        out = []
        for tp in wanted:
            v = committed.get(tp)
            if v is None:
                out.append(FetchedOffset(tp[0], tp[1], -1, -1, ""))
            else:
                out.append(FetchedOffset(tp[0], tp[1], v.offset, v.leader_epoch, v.metadata))
        self._respond(request_id, OffsetFetchResult(NONE, tuple(out)))
        return self._take()

    def delete_offsets(
        self, request_id: int, group_id: str, partitions: list[TopicPartition]
    ) -> list[Action]:
        group = self.groups.get(group_id)
        if group is None:
            self._respond(request_id, OffsetDeleteResult(GROUP_ID_NOT_FOUND))
            return self._take()
        subscribed = group.subscribed_topics()
        errors: dict[TopicPartition, str] = {}
        records: list[tuple[bytes, bytes | None]] = []
        for tp in partitions:
            if subscribed is None or tp[0] in subscribed:
                errors[tp] = GROUP_SUBSCRIBED_TO_TOPIC
            elif tp in self.offsets.get(group_id, {}):
                records.append((rec.encode_key(rec.OffsetCommitKey(group_id, tp[0], tp[1])), None))

        def stored(error: str, _now: int) -> None:
            if error == NONE:
                committed = self.offsets.get(group_id, {})
                for tp in partitions:
                    if tp not in errors:
                        committed.pop(tp, None)
                if not committed:
                    self.offsets.pop(group_id, None)
            result = OffsetDeleteResult(
                NONE if error == NONE else append_error(error),
                tuple((t, p, errors.get((t, p), NONE)) for t, p in partitions),
            )
            self._respond(request_id, result)

        if not records:
            stored(NONE, -1)
        elif not self._append(records, stored):
            self._respond(request_id, OffsetDeleteResult(COORDINATOR_NOT_AVAILABLE))
        return self._take()

    # --- administration -------------------------------------------------------------

    def describe(self, request_id: int, group_id: str) -> list[Action]:
        group = self.groups.get(group_id)
        if group is None:
            self._respond(request_id, DescribedGroup(NONE, group_id))
            return self._take()
        stable = group.state is GroupState.STABLE
        protocol = group.protocol or ""
        members = tuple(
            DescribedMember(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(protocol) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        )
        self._respond(
            request_id,
            DescribedGroup(
                NONE,
                group_id,
                group.state.value,
                group.protocol_type or "",
                protocol if stable else "",
                members,
            ),
        )
        return self._take()

    def list_groups(self, states: set[str]) -> list[ListedGroup]:
        wanted = {s.lower() for s in states}
        return [
            ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
            for g in self.groups.values()
            if g.state is not GroupState.DEAD and (not wanted or g.state.value.lower() in wanted)
        ] + [
            ListedGroup(g.group_id, "consumer", g.state, "consumer")
            for g in self.consumer_groups.values()
            if not wanted or g.state.lower() in wanted
        ]

    def delete_group(self, request_id: int, group_id: str, now_ms: int) -> list[Action]:
        if group_id in self.consumer_groups:  # empty ones are not kept
            self._respond(request_id, ErrorResult(NON_EMPTY_GROUP))
            return self._take()
        group = self.groups.get(group_id)
        if group is not None and group.state is not GroupState.DEAD:
            # The timers due by now first, as Kafka's precise timer has run them: the
            # ticks come every 100 ms, and a member whose session ended just now would
            # otherwise keep the group "not empty" (librdkafka's 0081 deletes its
            # static members' groups exactly a session after closing them).
            self._tick_group(group, now_ms)
        if group is None or group.state is GroupState.DEAD:
            self._respond(request_id, ErrorResult(GROUP_ID_NOT_FOUND))
            return self._take()
        if group.state is not GroupState.EMPTY:
            self._respond(request_id, ErrorResult(NON_EMPTY_GROUP))
            return self._take()
        records = self._tombstones(group_id)

        def stored(error: str, now: int) -> None:
            if error != NONE:
                self._respond(request_id, ErrorResult(append_error(error)))
                return
            self._drop_group(group_id, now if now >= 0 else now_ms)
            self._respond(request_id, ErrorResult(NONE))

        if not self._append(records, stored):
            self._respond(request_id, ErrorResult(COORDINATOR_NOT_AVAILABLE))
        return self._take()

    def _tombstones(self, group_id: str) -> list[tuple[bytes, bytes | None]]:
        out: list[tuple[bytes, bytes | None]] = [
            (rec.encode_key(rec.OffsetCommitKey(group_id, t, p)), None)
            for t, p in sorted(self.offsets.get(group_id, {}))
        ]
        out.append((rec.encode_key(rec.GroupMetadataKey(group_id)), None))
        return out

    def _drop_group(self, group_id: str, now_ms: int) -> None:
        group = self.groups.get(group_id)
        self.offsets.pop(group_id, None)
        if group is not None and group.is_empty():
            group.transition(GroupState.DEAD, now_ms)
            del self.groups[group_id]

    # --- timers -------------------------------------------------------------------

    def tick(self, now_ms: int) -> list[Action]:
        for group in list(self.groups.values()):
            self._tick_group(group, now_ms)
        for consumer_group in list(self.consumer_groups.values()):
            consumer_group.tick(dict(consumer_group.topic_sizes), now_ms)
            self._retire_if_empty(consumer_group, now_ms)
        if now_ms >= self._next_expiry_check:
            self._next_expiry_check = now_ms + self.config.offsets_retention_check_interval_ms
            self._expire_offsets(now_ms)
        return self._take()

    def _tick_group(self, group: ClassicGroup, now_ms: int) -> None:
        for member_id, deadline in list(group.pending_members.items()):
            if now_ms >= deadline:
                del group.pending_members[member_id]
                self._maybe_complete_join(group, now_ms)
        for m in list(group.members.values()):
            if m.member_id not in group.members:
                continue
            awaiting = m.awaiting_join is not None and (
                group.state is GroupState.PREPARING_REBALANCE
            )
            if not awaiting and now_ms >= m.heartbeat_deadline_ms:
                self._member_gone(group, m.member_id, now_ms)
        if group.state is GroupState.PREPARING_REBALANCE and group.join_deadline_ms is not None:
            if now_ms >= group.join_deadline_ms:
                group.initial_delay = False
                self._complete_join(group, now_ms)
        elif (
            group.state is GroupState.COMPLETING_REBALANCE
            and group.sync_deadline_ms is not None
            and now_ms >= group.sync_deadline_ms
            and group.sync_write_generation != group.generation
        ):
            # Members that never sent SyncGroup are gone (Kafka's pending-sync timeout).
            for m in [m for m in group.members.values() if m.member_id not in group.synced]:
                self._remove_member(group, m.member_id)
            if group.is_empty():
                group.transition(GroupState.PREPARING_REBALANCE, now_ms)
                self._complete_join(group, now_ms)
            else:
                self._prepare_rebalance(group, now_ms)
        group.check()

    def _expire_offsets(self, now_ms: int) -> None:
        """offsets.retention.minutes: the offsets of a group without members expire
        that long after both their commit and the group's becoming empty (or at the
        expire timestamp their commit asked for, OffsetCommit v2-v4); a group
        with neither members nor offsets then goes too. Tombstones, like a delete."""
        retention = self.config.offsets_retention_ms
        for group_id, committed in list(self.offsets.items()):
            group = self.groups.get(group_id)
            if group is None or group.state is not GroupState.EMPTY:
                continue
            expired = [
                tp
                for tp, v in committed.items()
                if (
                    now_ms >= v.expire_timestamp
                    if v.expire_timestamp >= 0
                    else now_ms >= max(v.commit_timestamp, group.state_timestamp_ms) + retention
                )
                and (group_id, tp) not in self._expiring
            ]
            if not expired:
                continue
            everything = len(expired) == len(committed)
            records: list[tuple[bytes, bytes | None]] = [
                (rec.encode_key(rec.OffsetCommitKey(group_id, t, p)), None) for t, p in expired
            ]
            if everything:
                records.append((rec.encode_key(rec.GroupMetadataKey(group_id)), None))
            keys = [(group_id, tp) for tp in expired]
            self._expiring.update(keys)

            def stored(
                error: str,
                now: int,
                group_id: str = group_id,
                expired: list[TopicPartition] = expired,
                keys: list[tuple[str, TopicPartition]] = keys,
                everything: bool = everything,
            ) -> None:
                self._expiring.difference_update(keys)
                if error != NONE:
                    return
                committed = self.offsets.get(group_id, {})
                for tp in expired:
                    committed.pop(tp, None)
                if not committed:
                    self.offsets.pop(group_id, None)
                    g = self.groups.get(group_id)
                    if everything and g is not None and g.is_empty():
                        self._drop_group(group_id, now if now >= 0 else now_ms)

            self._append(records, stored)


class GroupCoordinator:
    """Every shard this node leads; requests go to the shard of their group."""

    def __init__(self, config: GroupConfig, rng: random.Random) -> None:
        self.config = config
        self.rng = rng
        self.shards: dict[int, CoordinatorShard] = {}

    def partition_for(self, group_id: str) -> int:
        return rec.partition_for(group_id, self.config.offsets_topic_num_partitions)

    # --- leadership -----------------------------------------------------------------

    def begin_loading(
        self, partition: int, leader_epoch: int
    ) -> tuple[CoordinatorShard, list[Action]]:
        """This node leads `partition` at `leader_epoch`: a new shard, loading (its
        groups answer COORDINATOR_LOAD_IN_PROGRESS until finish_loading)."""
        out = self.unload(partition)
        shard = CoordinatorShard(partition, leader_epoch, self.config, self.rng)
        self.shards[partition] = shard
        return shard, out

    def unload(self, partition: int) -> list[Action]:
        shard = self.shards.pop(partition, None)
        return shard.unload() if shard is not None else []

    def on_write_done(
        self, partition: int, leader_epoch: int, write_id: int, error: str, now_ms: int
    ) -> list[Action]:
        shard = self.shards.get(partition)
        if shard is None or shard.leader_epoch != leader_epoch:
            return []  # fenced: the shard that wrote it is gone
        return shard.on_write_done(write_id, error, now_ms)

    def tick(self, now_ms: int) -> list[Action]:
        out: list[Action] = []
        for shard in list(self.shards.values()):
            if shard.loading is None:
                out += shard.tick(now_ms)
        return out

    # --- routing --------------------------------------------------------------------

    def shard_for(self, group_id: str) -> tuple[CoordinatorShard | None, str]:
        """The group's shard, or the error to answer with."""
        if not group_id:
            return None, INVALID_GROUP_ID
        shard = self.shards.get(self.partition_for(group_id))
        if shard is None:
            return None, NOT_COORDINATOR
        if shard.loading is not None:
            return None, COORDINATOR_LOAD_IN_PROGRESS
        return shard, NONE

    def list_groups(self, states: set[str]) -> tuple[str, list[ListedGroup]]:
        out: list[ListedGroup] = []
        error = NONE
        for shard in self.shards.values():
            if shard.loading is not None:
                error = COORDINATOR_LOAD_IN_PROGRESS
                continue
            out += shard.list_groups(states)
        return error, sorted(out, key=lambda g: g.group_id)
