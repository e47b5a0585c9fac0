"""The coordinator's state as `__consumer_offsets` records, and back (Kafka's
GroupCoordinatorRecordHelpers): a classic group's GroupMetadata record, a committed
offset's OffsetCommit record, and their tombstones."""

from __future__ import annotations

from . import offsets_records as rec
from .coordinator_actions import Record
from .group_messages import TopicPartition
from .group_state import ClassicGroup, GroupState, Member


def group_metadata_record(group: ClassicGroup) -> Record:
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


def group_tombstone(group_id: str) -> Record:
    return rec.encode_key(rec.GroupMetadataKey(group_id)), None


def offset_commit_record(group_id: str, tp: TopicPartition, value: rec.OffsetCommitValue) -> Record:
    return rec.encode_key(rec.OffsetCommitKey(group_id, tp[0], tp[1])), rec.encode_value(value)


def offset_tombstone(group_id: str, tp: TopicPartition) -> Record:
    return rec.encode_key(rec.OffsetCommitKey(group_id, tp[0], tp[1])), None


def classic_group_from_record(
    group_id: str, value: rec.GroupMetadataValue, now_ms: int
) -> ClassicGroup:
    """The group a loaded GroupMetadata record describes: with members it is Stable at
    its last generation (their sessions start now), without, Empty."""
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
    return group
