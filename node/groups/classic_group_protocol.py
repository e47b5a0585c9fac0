"""Kafka's classic rebalance protocol over a shard's classic groups, without I/O:
JoinGroup (with KIP-394's member id round trip and KIP-345's static members), the
rebalance that ends the join phase and starts a generation, SyncGroup (the leader's
assignment, stored with the group before anyone gets theirs), Heartbeat, LeaveGroup,
and the timers that end a join or sync phase or a member's session. The groups are
the shard's (group_metadata_manager.py); each group's states and the transitions
Kafka allows are in group_state.py."""

from __future__ import annotations

from dataclasses import replace

from .coordinator_actions import Action
from .coordinator_records import group_metadata_record
from .group_errors import (
    COORDINATOR_NOT_AVAILABLE,
    FENCED_INSTANCE_ID,
    GROUP_MAX_SIZE_REACHED,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_SESSION_TIMEOUT,
    MEMBER_ID_REQUIRED,
    NONE,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    append_error,
)
from .group_messages import (
    ErrorResult,
    HeartbeatRequest,
    JoinMember,
    JoinRequest,
    JoinResult,
    LeaveRequest,
    LeaveResult,
    SyncRequest,
    SyncResult,
)
from .group_metadata_manager import GroupMetadataManager
from .group_state import ClassicGroup, GroupState, Member


class ClassicGroupProtocol:
    """JoinGroup, SyncGroup, Heartbeat and LeaveGroup for the classic groups of
    `manager`, with its settings, random member ids and actions."""

    def __init__(self, manager: GroupMetadataManager) -> None:
        self.manager = manager
        self.config, self.rng, self.actions = manager.config, manager.rng, manager.actions

    def answer_parked(self, error: str) -> None:
        """Every JoinGroup and SyncGroup still waiting is answered `error` (the shard
        is being unloaded)."""
        for group in self.manager.groups.values():
            for m in group.members.values():
                if m.awaiting_join is not None:
                    self.actions.respond(m.awaiting_join, JoinResult(error, member_id=m.member_id))
                    m.awaiting_join = None
                if m.awaiting_sync is not None:
                    self.actions.respond(m.awaiting_sync, SyncResult(error))
                    m.awaiting_sync = None

    def _member_id(self, client_id: str) -> str:
        return f"{client_id}-{self.rng.getrandbits(128):032x}"

    # --- JoinGroup ----------------------------------------------------------------

    def join(self, request_id: int, req: JoinRequest, now_ms: int) -> list[Action]:
        group = self._group_to_join(req, now_ms)
        if isinstance(group, str):
            self.actions.respond(request_id, JoinResult(group, member_id=req.member_id))
            return self.actions.take()
        if not req.member_id:
            self._join_unknown_member(request_id, group, req, now_ms)
        else:
            self._join_known_member(request_id, group, req, now_ms)
        group.check()
        return self.actions.take()

    def _group_to_join(self, req: JoinRequest, now_ms: int) -> ClassicGroup | str:
        """The group the member joins (a new one for a new group id), or the error
        it is refused with."""
        cfg = self.config
        if not (
            cfg.group_min_session_timeout_ms
            <= req.session_timeout_ms
            <= cfg.group_max_session_timeout_ms
        ):
            return INVALID_SESSION_TIMEOUT
        consumer_group = self.manager.consumer_groups.get(req.group_id)
        if consumer_group is not None:
            if consumer_group.members:
                # A group id is of one type at a time: a classic member cannot join
                # a consumer group (Kafka without its upgrade path).
                return INCONSISTENT_GROUP_PROTOCOL
            del self.manager.consumer_groups[req.group_id]  # empty: becomes classic
        group = self.manager.groups.get(req.group_id)
        if group is None:
            if req.member_id:
                return UNKNOWN_MEMBER_ID
            group = ClassicGroup(req.group_id, state_timestamp_ms=now_ms)
            self.manager.groups[req.group_id] = group
        if group.state is GroupState.DEAD:
            return COORDINATOR_NOT_AVAILABLE
        if not group.supports(req.protocol_type, list(req.protocols)):
            return INCONSISTENT_GROUP_PROTOCOL
        return group

    def _join_unknown_member(
        self, request_id: int, group: ClassicGroup, req: JoinRequest, now_ms: int
    ) -> None:
        instance = req.group_instance_id
        if len(group.members) >= self.config.group_max_size and (
            instance is None or instance not in group.static_members
        ):
            self.actions.respond(request_id, JoinResult(GROUP_MAX_SIZE_REACHED))
            return
        new_id = self._member_id(req.client_id or "member")
        if instance is not None and instance in group.static_members:
            self._replace_static_member(request_id, group, req, new_id, now_ms)
            return
        if instance is None and req.require_known_member_id:
            # KIP-394: the member id goes back first; the member joins again with it.
            group.pending_members[new_id] = now_ms + req.session_timeout_ms
            self.actions.respond(request_id, JoinResult(MEMBER_ID_REQUIRED, member_id=new_id))
            return
        self._add_member_and_rebalance(request_id, group, req, new_id, now_ms)

    def _join_known_member(
        self, request_id: int, group: ClassicGroup, req: JoinRequest, now_ms: int
    ) -> None:
        if req.member_id in group.pending_members:
            del group.pending_members[req.member_id]
            self._add_member_and_rebalance(request_id, group, req, req.member_id, now_ms)
            return
        member = group.members.get(req.member_id)
        if member is None:
            self.actions.respond(request_id, JoinResult(UNKNOWN_MEMBER_ID, member_id=req.member_id))
            return
        if member.group_instance_id != req.group_instance_id and req.group_instance_id:
            self.actions.respond(
                request_id, JoinResult(FENCED_INSTANCE_ID, member_id=req.member_id)
            )
            return
        if group.state is GroupState.PREPARING_REBALANCE:
            self._update_member(member, req, request_id, now_ms)
            self._maybe_complete_join(group, now_ms)
        elif group.state is GroupState.COMPLETING_REBALANCE:
            if member.same_protocols(list(req.protocols)):
                # A retried JoinGroup: the same answer again.
                self.actions.respond(request_id, self._join_result(group, member.member_id))
            else:
                self._update_member(member, req, request_id, now_ms)
                self._prepare_rebalance(group, now_ms)
        elif group.state is GroupState.STABLE:
            if member.member_id == group.leader or not member.same_protocols(list(req.protocols)):
                self._update_member(member, req, request_id, now_ms)
                self._prepare_rebalance(group, now_ms)
            else:
                member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
                self.actions.respond(request_id, self._join_result(group, member.member_id))
        else:
            self.actions.respond(request_id, JoinResult(UNKNOWN_MEMBER_ID, member_id=req.member_id))

    def _update_member(
        self, member: Member, req: JoinRequest, request_id: int, now_ms: int
    ) -> None:
        if member.awaiting_join is not None and member.awaiting_join != request_id:
            # Kafka answers the older parked JoinGroup of the same member this way.
            self.actions.respond(member.awaiting_join, JoinResult(UNKNOWN_MEMBER_ID))
        member.protocols = list(req.protocols)
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.awaiting_join = request_id
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms

    def _add_member_and_rebalance(
        self, request_id: int, group: ClassicGroup, req: JoinRequest, member_id: str, now_ms: int
    ) -> None:
        member = replace(member_of(req, member_id, now_ms), awaiting_join=request_id, is_new=True)
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
        self, request_id: int, group: ClassicGroup, req: JoinRequest, new_id: str, now_ms: int
    ) -> None:
        """A known group.instance.id joins with no member id (a restarted static
        member): it takes over the old member id's place; the old one is fenced."""
        assert req.group_instance_id is not None
        old_id = group.static_members[req.group_instance_id]
        old = group.members.pop(old_id)
        if old.awaiting_join is not None:
            self.actions.respond(
                old.awaiting_join, JoinResult(FENCED_INSTANCE_ID, member_id=old_id)
            )
        if old.awaiting_sync is not None:
            self.actions.respond(old.awaiting_sync, SyncResult(FENCED_INSTANCE_ID))
        member = replace(member_of(req, new_id, now_ms), assignment=old.assignment)
        group.members[new_id] = member
        group.static_members[req.group_instance_id] = new_id
        was_leader = group.leader == old_id
        if was_leader:
            group.leader = new_id
        unchanged = old.same_subscriptions(list(req.protocols))
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
                    self.actions.respond(
                        request_id, JoinResult(append_error(error), member_id=new_id)
                    )
                elif group.generation != generation or new_id not in group.members:
                    self.actions.respond(
                        request_id, JoinResult(FENCED_INSTANCE_ID, member_id=new_id)
                    )
                else:
                    result = replace(self._join_result(group, new_id), skip_assignment=skip)
                    if was_leader and not skip:
                        result = replace(result, leader=old_id, members=())
                    self.actions.respond(request_id, result)

            if not self.actions.append([group_metadata_record(group)], stored):
                self.actions.respond(
                    request_id, JoinResult(COORDINATOR_NOT_AVAILABLE, member_id=new_id)
                )
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
                    self.actions.respond(m.awaiting_sync, SyncResult(REBALANCE_IN_PROGRESS))
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
            self.actions.append([group_metadata_record(group)], lambda _e, _n: None)
            return
        if group.leader not in group.members:
            group.leader = next(iter(group.members))
        group.protocol = group.select_protocol()
        group.transition(GroupState.COMPLETING_REBALANCE, now_ms)
        group.sync_deadline_ms = now_ms + group.max_rebalance_timeout_ms()
        group.synced = set()
        for m in group.members.values():
            assert m.awaiting_join is not None
            self.actions.respond(m.awaiting_join, self._join_result(group, m.member_id))
            m.awaiting_join = None
            m.is_new = False
            m.assignment = b""
            m.heartbeat_deadline_ms = now_ms + m.session_timeout_ms

    def _remove_member(self, group: ClassicGroup, member_id: str) -> None:
        m = group.members.pop(member_id)
        if m.group_instance_id and group.static_members.get(m.group_instance_id) == member_id:
            del group.static_members[m.group_instance_id]
        if m.awaiting_join is not None:
            self.actions.respond(
                m.awaiting_join, JoinResult(UNKNOWN_MEMBER_ID, member_id=member_id)
            )
        if m.awaiting_sync is not None:
            self.actions.respond(m.awaiting_sync, SyncResult(UNKNOWN_MEMBER_ID))
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
        group = self.manager.groups.get(req.group_id)
        error = check_member(group, req.member_id, req.group_instance_id)
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
            self.actions.respond(request_id, SyncResult(error or UNKNOWN_MEMBER_ID))
            return self.actions.take()
        member = group.members[req.member_id]
        member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
        if group.state is GroupState.STABLE:
            self.actions.respond(request_id, self._sync_result(group, member))
            return self.actions.take()
        assert group.state is GroupState.COMPLETING_REBALANCE
        if member.awaiting_sync is not None:
            self.actions.respond(member.awaiting_sync, SyncResult(REBALANCE_IN_PROGRESS))
        member.awaiting_sync = request_id
        group.synced.add(member.member_id)
        if member.member_id == group.leader and group.sync_write_generation != group.generation:
            self._store_assignment(group, dict(req.assignments), now_ms)
        return self.actions.take()

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
                self.manager.groups.get(group.group_id) is group
                and group.generation == generation
                and group.state is GroupState.COMPLETING_REBALANCE
            )
            if not current:
                return  # a rebalance started meanwhile: its waiters were answered
            if error != NONE:
                for m in group.members.values():
                    m.assignment = b""
                    if m.awaiting_sync is not None:
                        self.actions.respond(m.awaiting_sync, SyncResult(append_error(error)))
                        m.awaiting_sync = None
                self._prepare_rebalance(group, now if now >= 0 else now_ms)
                return
            group.transition(GroupState.STABLE, now if now >= 0 else now_ms)
            group.sync_deadline_ms = None
            for m in group.members.values():
                if m.awaiting_sync is not None:
                    self.actions.respond(m.awaiting_sync, self._sync_result(group, m))
                    m.awaiting_sync = None

        if not self.actions.append([group_metadata_record(group)], stored):
            group.sync_write_generation = -1
            self._prepare_rebalance(group, now_ms)

    def _sync_result(self, group: ClassicGroup, member: Member) -> SyncResult:
        return SyncResult(NONE, group.protocol_type, group.protocol, member.assignment)

    # --- Heartbeat and LeaveGroup ---------------------------------------------------

    def heartbeat(self, request_id: int, req: HeartbeatRequest, now_ms: int) -> list[Action]:
        group = self.manager.groups.get(req.group_id)
        error = check_member(group, req.member_id, req.group_instance_id)
        if error is None and group is not None:
            member = group.members[req.member_id]
            if req.generation != group.generation:
                error = ILLEGAL_GENERATION
            else:
                member.heartbeat_deadline_ms = now_ms + member.session_timeout_ms
                if group.state is GroupState.PREPARING_REBALANCE:
                    error = REBALANCE_IN_PROGRESS
        self.actions.respond(request_id, ErrorResult(error or NONE))
        return self.actions.take()

    def leave(self, request_id: int, req: LeaveRequest, now_ms: int) -> list[Action]:
        group = self.manager.groups.get(req.group_id)
        if group is None:
            self.actions.respond(request_id, LeaveResult(UNKNOWN_MEMBER_ID))
            return self.actions.take()
        answers = []
        for member_id, instance in req.members:
            if instance and not member_id:
                member_id = group.static_members.get(instance, "")
            if member_id in group.pending_members:
                del group.pending_members[member_id]
                answers.append((member_id, instance, NONE))
                self._maybe_complete_join(group, now_ms)
                continue
            error = check_member(group, member_id, instance)
            answers.append((member_id, instance, error or NONE))
            if error is None:
                self._member_gone(group, member_id, now_ms)
        self.actions.respond(request_id, LeaveResult(NONE, tuple(answers)))
        group.check()
        return self.actions.take()

    # --- timers -------------------------------------------------------------------

    def tick_group(self, group: ClassicGroup, now_ms: int) -> None:
        """The group's timers due by `now_ms`: members told MEMBER_ID_REQUIRED that did
        not rejoin, ended sessions, the end of the join or the sync phase."""
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


def check_member(group: ClassicGroup | None, member_id: str, instance: str | None) -> str | None:
    """The error for a request of `member_id` (with `instance`, its group.instance.id
    if static) in `group`; None: it is the member."""
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


def member_of(req: JoinRequest, member_id: str, now_ms: int) -> Member:
    """The member a JoinGroup describes, its session starting now."""
    return Member(
        member_id,
        req.group_instance_id,
        req.client_id,
        req.client_host,
        req.session_timeout_ms,
        req.rebalance_timeout_ms,
        req.protocol_type,
        list(req.protocols),
        heartbeat_deadline_ms=now_ms + req.session_timeout_ms,
    )
