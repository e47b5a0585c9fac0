"""The groups of one shard, of either type (Kafka's GroupMetadataManager), without
I/O: the classic groups (the classic protocol rebalances them:
classic_group_protocol.py) and KIP-848's consumer groups (consumer_group.py), which
type a group id is, the groups loaded from the replayed records, ConsumerGroupHeartbeat,
and the describing and listing of both types."""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable, Iterable, Mapping

from . import offsets_records as rec
from .consumer_group import ConsumerGroup
from .coordinator_actions import Action, ShardActions
from .coordinator_records import classic_group_from_record
from .group_config import GroupConfig
from .group_errors import GROUP_ID_NOT_FOUND, NONE, UNKNOWN_MEMBER_ID
from .group_messages import (
    ConsumerHeartbeat,
    ConsumerHeartbeatResult,
    DescribedConsumerGroup,
    DescribedGroup,
    DescribedMember,
    ListedGroup,
)
from .group_state import ClassicGroup, GroupState


class GroupMetadataManager:
    """A shard's groups by id, a group id of one type at a time. `has_offsets` says
    whether a group id has committed offsets (the offset manager holds them): an
    emptied consumer group's are then kept by an empty classic group."""

    def __init__(
        self,
        config: GroupConfig,
        rng: random.Random,
        actions: ShardActions,
        has_offsets: Callable[[str], bool],
    ) -> None:
        self.config = config
        self.rng = rng
        self.actions = actions
        self._has_offsets = has_offsets
        self.groups: dict[str, ClassicGroup] = {}
        # KIP-848 groups; in memory only: a new coordinator makes their members rejoin.
        self.consumer_groups: dict[str, ConsumerGroup] = {}

    def load(
        self, groups: Mapping[str, rec.GroupMetadataValue], with_offsets: Iterable[str], now_ms: int
    ) -> None:
        """The loaded groups are served; a group id that only has offsets is an empty
        classic group holding them."""
        for group_id, value in groups.items():
            self.groups[group_id] = classic_group_from_record(group_id, value, now_ms)
        for group_id in with_offsets:
            if group_id not in self.groups:
                self.groups[group_id] = ClassicGroup(group_id, state_timestamp_ms=now_ms)

    def clear(self) -> None:
        self.groups.clear()
        self.consumer_groups.clear()

    def remove_if_empty(self, group_id: str, now_ms: int) -> None:
        """A classic group without members is Dead and forgotten (its offsets are gone)."""
        group = self.groups.get(group_id)
        if group is not None and group.is_empty():
            group.transition(GroupState.DEAD, now_ms)
            del self.groups[group_id]

    def tick(self, now_ms: int) -> None:
        """The consumer groups' timers (the classic groups' are the classic protocol's)."""
        for consumer_group in list(self.consumer_groups.values()):
            consumer_group.tick(dict(consumer_group.topic_sizes), now_ms)
            self.retire_if_empty(consumer_group, now_ms)

    # --- KIP-848: ConsumerGroupHeartbeat -------------------------------------------

    def consumer_heartbeat(
        self, request_id: int, req: ConsumerHeartbeat, topics: dict[str, int], now_ms: int
    ) -> list[Action]:
        """One ConsumerGroupHeartbeat; `topics`: the cluster's partition counts."""
        group = self.consumer_groups.get(req.group_id)
        if group is None:
            classic = self.groups.get(req.group_id)
            if classic is not None and not classic.is_empty():
                self.actions.respond(
                    request_id,
                    ConsumerHeartbeatResult(
                        GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group."
                    ),
                )
                return self.actions.take()
            if req.member_epoch != 0:
                self.actions.respond(
                    request_id,
                    ConsumerHeartbeatResult(
                        UNKNOWN_MEMBER_ID, f"{req.member_id} is not a member of {req.group_id}"
                    ),
                )
                return self.actions.take()
            if classic is not None:
                # An empty classic group (a placeholder for its offsets) becomes a
                # consumer group; the offsets stay.
                del self.groups[req.group_id]
            group = ConsumerGroup(req.group_id, self.config.consumer)
            self.consumer_groups[req.group_id] = group

        def member_id() -> str:
            return str(uuid.UUID(int=self.rng.getrandbits(128)))

        self.actions.respond(request_id, group.heartbeat(req, topics, now_ms, member_id))
        self.retire_if_empty(group, now_ms)
        return self.actions.take()

    def retire_if_empty(self, group: ConsumerGroup, now_ms: int) -> None:
        """A consumer group without members is not kept (nothing of it is persisted):
        its offsets stay, held by an empty classic group as after a reload, so they
        expire, and can be deleted, as any group's."""
        if group.members:
            return
        del self.consumer_groups[group.group_id]
        if self._has_offsets(group.group_id):
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
        self.actions.respond(request_id, result)
        return self.actions.take()

    # --- administration -------------------------------------------------------------

    def describe(self, request_id: int, group_id: str) -> list[Action]:
        group = self.groups.get(group_id)
        if group is None:
            self.actions.respond(request_id, DescribedGroup(NONE, group_id))
            return self.actions.take()
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
        self.actions.respond(
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
        return self.actions.take()

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
