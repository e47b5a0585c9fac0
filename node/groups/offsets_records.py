"""The records of `__consumer_offsets`, byte for byte as Kafka writes them.

Every key and value starts with an INT16 version. Keys: OffsetCommitKey (versions
0-1: group, topic, partition) and GroupMetadataKey (version 2: group). Values:
OffsetCommitValue (Kafka writes version 3, or 1 when an expire timestamp is set) and
GroupMetadataValue (Kafka writes version 3). A null value is a tombstone: the cleaner
drops the key once compacted. The schemas are built from kafka-python's protocol
types, so a Kafka engineer reads the same fields in `dump-log --offsets-decoder`."""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import Any

from kafka.protocol.old.types import Array, Bytes, Int32, Int64, Schema, String

OFFSETS_TOPIC = "__consumer_offsets"

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY = 1
GROUP_METADATA_VALUE_VERSION = 3

_STR = String("utf-8")
_VERSION = struct.Struct(">h")

_OFFSET_COMMIT_KEY = Schema(("group", _STR), ("topic", _STR), ("partition", Int32))
_GROUP_METADATA_KEY = Schema(("group", _STR))

_OFFSET_COMMIT_VALUE = {
    0: Schema(("offset", Int64), ("metadata", _STR), ("commit_timestamp", Int64)),
    1: Schema(
        ("offset", Int64),
        ("metadata", _STR),
        ("commit_timestamp", Int64),
        ("expire_timestamp", Int64),
    ),
    2: Schema(("offset", Int64), ("metadata", _STR), ("commit_timestamp", Int64)),
    3: Schema(
        ("offset", Int64),
        ("leader_epoch", Int32),
        ("metadata", _STR),
        ("commit_timestamp", Int64),
    ),
}


def _member_schema(version: int) -> Schema:
    fields: list[tuple[str, object]] = [("member_id", _STR)]
    if version >= 3:
        fields.append(("group_instance_id", _STR))
    fields += [("client_id", _STR), ("client_host", _STR)]
    if version >= 1:
        fields.append(("rebalance_timeout", Int32))
    fields += [("session_timeout", Int32), ("subscription", Bytes), ("assignment", Bytes)]
    return Schema(*fields)


def _group_value_schema(version: int) -> Schema:
    fields: list[tuple[str, object]] = [
        ("protocol_type", _STR),
        ("generation", Int32),
        ("protocol", _STR),
        ("leader", _STR),
    ]
    if version >= 2:
        fields.append(("current_state_timestamp", Int64))
    fields.append(("members", Array(_member_schema(version))))
    return Schema(*fields)


_GROUP_METADATA_VALUE = {v: _group_value_schema(v) for v in range(4)}


class OffsetsRecordError(ValueError):
    """A key or value of `__consumer_offsets` that is not one of Kafka's schemas."""


@dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1


@dataclass(frozen=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberMetadata, ...]


Key = OffsetCommitKey | GroupMetadataKey
Value = OffsetCommitValue | GroupMetadataValue


def encode_key(key: Key) -> bytes:
    if isinstance(key, OffsetCommitKey):
        return _VERSION.pack(OFFSET_COMMIT_KEY_VERSION) + _OFFSET_COMMIT_KEY.encode(
            (key.group, key.topic, key.partition)
        )
    return _VERSION.pack(GROUP_METADATA_KEY_VERSION) + _GROUP_METADATA_KEY.encode((key.group,))


def encode_offset_commit(value: OffsetCommitValue) -> bytes:
    if value.expire_timestamp >= 0:
        return _VERSION.pack(OFFSET_COMMIT_VALUE_VERSION_WITH_EXPIRY) + _OFFSET_COMMIT_VALUE[
            1
        ].encode((value.offset, value.metadata, value.commit_timestamp, value.expire_timestamp))
    return _VERSION.pack(OFFSET_COMMIT_VALUE_VERSION) + _OFFSET_COMMIT_VALUE[3].encode(
        (value.offset, value.leader_epoch, value.metadata, value.commit_timestamp)
    )


def encode_group_metadata(value: GroupMetadataValue) -> bytes:
    v = GROUP_METADATA_VALUE_VERSION
    members = [
        (
            m.member_id,
            m.group_instance_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout,
            m.session_timeout,
            m.subscription,
            m.assignment,
        )
        for m in value.members
    ]
    return _VERSION.pack(v) + _GROUP_METADATA_VALUE[v].encode(
        (
            value.protocol_type,
            value.generation,
            value.protocol,
            value.leader,
            value.current_state_timestamp,
            members,
        )
    )


def encode_value(value: Value) -> bytes:
    if isinstance(value, OffsetCommitValue):
        return encode_offset_commit(value)
    return encode_group_metadata(value)


def _split(data: bytes, what: str) -> tuple[int, io.BytesIO]:
    if len(data) < 2:
        raise OffsetsRecordError(f"{what} of {len(data)} bytes has no version")
    return _VERSION.unpack_from(data)[0], io.BytesIO(data[2:])


def _finish(stream: io.BytesIO, what: str, version: int) -> None:
    rest = len(stream.getbuffer()) - stream.tell()
    if rest:
        raise OffsetsRecordError(f"{what} version {version} has {rest} trailing bytes")


def decode_key(data: bytes) -> Key:
    version, stream = _split(data, "key")
    try:
        if version in (0, 1):
            group, topic, partition = _OFFSET_COMMIT_KEY.decode(stream)
            key: Key = OffsetCommitKey(group, topic, partition)
        elif version == 2:
            (group,) = _GROUP_METADATA_KEY.decode(stream)
            key = GroupMetadataKey(group)
        else:
            raise OffsetsRecordError(f"unknown key version {version} (offsets: 0-1, groups: 2)")
    except (struct.error, ValueError, UnicodeDecodeError) as e:
        if isinstance(e, OffsetsRecordError):
            raise
        raise OffsetsRecordError(f"key version {version} does not decode: {e}") from None
    _finish(stream, "key", version)
    return key


def _decode_value(data: bytes, what: str, schemas: dict[int, Schema]) -> tuple[int, dict[str, Any]]:
    """A value's version and its fields by name, by the schema of that version."""
    version, stream = _split(data, what)
    schema = schemas.get(version)
    if schema is None:
        raise OffsetsRecordError(f"{what} version {version} is not served (0-3)")
    try:
        fields = dict(zip(schema.names, schema.decode(stream), strict=True))
    except (struct.error, ValueError, UnicodeDecodeError) as e:
        raise OffsetsRecordError(f"{what} v{version} does not decode: {e}") from None
    _finish(stream, what, version)
    return version, fields


def decode_offset_commit(data: bytes) -> OffsetCommitValue:
    _, fields = _decode_value(data, "OffsetCommitValue", _OFFSET_COMMIT_VALUE)
    return OffsetCommitValue(
        fields["offset"],
        fields.get("leader_epoch", -1),
        fields["metadata"] or "",
        fields["commit_timestamp"],
        fields.get("expire_timestamp", -1),
    )


def decode_group_metadata(data: bytes) -> GroupMetadataValue:
    version, fields = _decode_value(data, "GroupMetadataValue", _GROUP_METADATA_VALUE)
    names = _member_schema(version).names
    members = []
    for raw in fields["members"]:
        m = dict(zip(names, raw, strict=True))
        members.append(
            MemberMetadata(
                m["member_id"],
                m.get("group_instance_id"),
                m["client_id"],
                m["client_host"],
                m.get("rebalance_timeout", m["session_timeout"]),
                m["session_timeout"],
                bytes(m["subscription"] or b""),
                bytes(m["assignment"] or b""),
            )
        )
    return GroupMetadataValue(
        fields["protocol_type"],
        fields["generation"],
        fields["protocol"],
        fields["leader"],
        fields.get("current_state_timestamp", -1),
        tuple(members),
    )


def decode_value(key: Key, data: bytes | None) -> Value | None:
    """The value for `key`; None for a tombstone."""
    if data is None:
        return None
    if isinstance(key, OffsetCommitKey):
        return decode_offset_commit(data)
    return decode_group_metadata(data)


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: over UTF-16 code units, in 32-bit two's complement."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def kafka_abs(n: int) -> int:
    """Kafka's Utils.abs: Integer.MIN_VALUE maps to 0 (Math.abs would leave it negative)."""
    return 0 if n == -(1 << 31) else abs(n)


def partition_for(group_id: str, partitions: int) -> int:
    """The `__consumer_offsets` partition that holds a group (its coordinator leads it)."""
    return kafka_abs(java_string_hash(group_id)) % partitions


# --- kafka-dump-log --offsets-decoder ------------------------------------------------


def _consumer_subscription(data: bytes) -> object:
    """A ConsumerProtocolSubscription's topics and user data (every version starts
    with them); the raw bytes in hex if it is not one."""
    from kafka.protocol.old.consumer_protocol import ConsumerProtocolMemberMetadata_v0

    try:
        m = ConsumerProtocolMemberMetadata_v0.decode(io.BytesIO(data))
        return {"version": m.version, "topics": list(m.topics), "userData": _hex(m.user_data)}
    except Exception:  # noqa: BLE001 - not the consumer protocol: shown raw
        return data.hex()


def _consumer_assignment(data: bytes) -> object:
    from kafka.protocol.old.consumer_protocol import ConsumerProtocolMemberAssignment_v0

    if not data:
        return None
    try:
        a = ConsumerProtocolMemberAssignment_v0.decode(io.BytesIO(data))
        return {
            "version": a.version,
            "assignedPartitions": [
                {"topic": t, "partitions": list(ps)} for t, ps in a.assigned_partitions
            ],
            "userData": _hex(a.user_data),
        }
    except Exception:  # noqa: BLE001 - not the consumer protocol: shown raw
        return data.hex()


def _hex(data: bytes | None) -> str | None:
    return None if data is None else bytes(data).hex()


def describe_record(key: bytes | None, value: bytes | None) -> str:
    """One `__consumer_offsets` record as kafka-dump-log's --offsets-decoder prints it:
    `key: {"type":..,"data":{..}} payload: {"version":..,"data":{..}}` (`<DELETE>` for
    a tombstone); what does not decode is named with the reason."""
    import json

    if key is None:
        return "key: null payload: unknown (a record without a key)"
    try:
        k = decode_key(key)
    except OffsetsRecordError as e:
        return f"key: unknown ({e}) payload: unknown"
    key_version = _VERSION.unpack_from(key)[0]
    if isinstance(k, OffsetCommitKey):
        key_data: dict[str, object] = {"group": k.group, "topic": k.topic, "partition": k.partition}
    else:
        key_data = {"group": k.group}
    key_text = json.dumps({"type": str(key_version), "data": key_data}, separators=(",", ":"))
    if value is None:
        return f"key: {key_text} payload: <DELETE>"
    try:
        v = decode_value(k, value)
    except OffsetsRecordError as e:
        return f"key: {key_text} payload: unknown ({e})"
    version = _VERSION.unpack_from(value)[0]
    data: dict[str, object]
    if isinstance(v, OffsetCommitValue):
        data = {"offset": v.offset}
        if version >= 3:
            data["leaderEpoch"] = v.leader_epoch
        data["metadata"] = v.metadata
        data["commitTimestamp"] = v.commit_timestamp
        if version == 1:
            data["expireTimestamp"] = v.expire_timestamp
    else:
        assert isinstance(v, GroupMetadataValue)
        consumer = v.protocol_type == "consumer"
        data = {
            "protocolType": v.protocol_type,
            "generation": v.generation,
            "protocol": v.protocol,
            "leader": v.leader,
            "currentStateTimestamp": v.current_state_timestamp,
            "members": [
                {
                    "memberId": m.member_id,
                    "groupInstanceId": m.group_instance_id,
                    "clientId": m.client_id,
                    "clientHost": m.client_host,
                    "rebalanceTimeout": m.rebalance_timeout,
                    "sessionTimeout": m.session_timeout,
                    "subscription": _consumer_subscription(m.subscription)
                    if consumer
                    else m.subscription.hex(),
                    "assignment": _consumer_assignment(m.assignment)
                    if consumer
                    else m.assignment.hex(),
                }
                for m in v.members
            ],
        }
    payload = json.dumps({"version": str(version), "data": data}, separators=(",", ":"))
    return f"key: {key_text} payload: {payload}"
