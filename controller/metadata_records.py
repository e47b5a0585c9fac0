"""The cluster metadata records, as KRaft keeps them in `__cluster_metadata-0`.

Each record is one immutable fact; the metadata image is what applying them in
order gives. Encoded as compact JSON in the value of a record inside an
ordinary RecordBatch v2, so `seglog dump-log --print-data-log` shows them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, ClassVar, get_args


@dataclass(frozen=True, slots=True)
class RegisterBrokerRecord:
    kind: ClassVar[str] = "RegisterBroker"
    broker_id: int
    broker_epoch: int
    host: str
    port: int
    rack: str | None = None
    # Every advertised listener as (name, host, port), Kafka's BrokerRegistration
    # endpoints; host/port above are the one seglog's clients use.
    endpoints: tuple[tuple[str, str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class BrokerFenceRecord:
    """Fenced (heartbeats missed or clean shutdown) or unfenced again."""

    kind: ClassVar[str] = "BrokerFence"
    broker_id: int
    broker_epoch: int
    fenced: bool


@dataclass(frozen=True, slots=True)
class TopicRecord:
    kind: ClassVar[str] = "Topic"
    name: str
    topic_id: str


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    kind: ClassVar[str] = "Partition"
    topic_id: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    # An ongoing reassignment (KIP-455): replicas = target + removing.
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class PartitionChangeRecord:
    """A new leader and/or ISR; the partition epoch always rises, the leader epoch
    rises when the leader changes. As Kafka's record, the replica fields are None
    when they do not change (a reassignment changes them: KIP-455)."""

    kind: ClassVar[str] = "PartitionChange"
    topic_id: str
    partition: int
    leader: int
    isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...] | None = None
    adding_replicas: tuple[int, ...] | None = None
    removing_replicas: tuple[int, ...] | None = None


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord:
    kind: ClassVar[str] = "RemoveTopic"
    topic_id: str


TOPIC_RESOURCE, BROKER_RESOURCE, GROUP_RESOURCE = 2, 4, 32  # Kafka's ConfigResource.Type ids


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    """A config override; value None removes it. As Kafka's record: a topic's
    (resource_type 2, the topic's name), a dynamic broker config (4; the broker's
    id, or "" for the cluster-wide default) or a group's (32, the group id)."""

    kind: ClassVar[str] = "Config"
    resource_name: str
    name: str
    value: str | None
    resource_type: int = TOPIC_RESOURCE


@dataclass(frozen=True, slots=True)
class ClientQuotaRecord:
    """Kafka's ClientQuotaRecord: one quota key of one entity ((type, name) pairs
    sorted by type; name None is the type's default), set to `value` or removed."""

    kind: ClassVar[str] = "ClientQuota"
    entity: tuple[tuple[str, str | None], ...]
    key: str
    value: float
    remove: bool = False


@dataclass(frozen=True, slots=True)
class ProducerIdsRecord:
    """A block of producer ids handed to a broker: ids below next_producer_id are taken."""

    kind: ClassVar[str] = "ProducerIds"
    broker_id: int
    broker_epoch: int
    next_producer_id: int


@dataclass(frozen=True, slots=True)
class UserScramCredentialRecord:
    """A user's SCRAM credential, as Kafka's record of the same name: the salt,
    StoredKey and ServerKey (hex), never the password. Replaces an earlier one."""

    kind: ClassVar[str] = "UserScramCredential"
    name: str
    mechanism: int  # 1: SCRAM-SHA-256, 2: SCRAM-SHA-512
    salt: str
    stored_key: str
    server_key: str
    iterations: int


@dataclass(frozen=True, slots=True)
class RemoveUserScramCredentialRecord:
    kind: ClassVar[str] = "RemoveUserScramCredential"
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class AccessControlEntryRecord:
    """One ACL binding (Kafka's codes for the enums), under a unique id."""

    kind: ClassVar[str] = "AccessControlEntry"
    id: str
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int


@dataclass(frozen=True, slots=True)
class RemoveAccessControlEntryRecord:
    kind: ClassVar[str] = "RemoveAccessControlEntry"
    id: str


MetadataRecord = (
    RegisterBrokerRecord
    | BrokerFenceRecord
    | TopicRecord
    | PartitionRecord
    | PartitionChangeRecord
    | RemoveTopicRecord
    | ConfigRecord
    | ClientQuotaRecord
    | ProducerIdsRecord
    | UserScramCredentialRecord
    | RemoveUserScramCredentialRecord
    | AccessControlEntryRecord
    | RemoveAccessControlEntryRecord
)

_BY_KIND: dict[str, type[MetadataRecord]] = {cls.kind: cls for cls in get_args(MetadataRecord)}


class MetadataRecordError(ValueError):
    pass


def encode_record(record: MetadataRecord) -> bytes:
    body = asdict(record)
    body["kind"] = record.kind
    return json.dumps(body, separators=(",", ":"), sort_keys=True).encode()


def _tuples(value: Any) -> Any:
    """JSON arrays back into the tuples the records hold (nested ones too)."""
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value


def decode_record(data: bytes) -> MetadataRecord:
    try:
        body: Any = json.loads(data)
    except ValueError as e:
        raise MetadataRecordError(f"not a metadata record: {data[:80]!r}") from e
    return record_from_json(body)


def record_from_json(body: Any) -> MetadataRecord:
    """A record from its parsed JSON object (an entry holds many: parsed once)."""
    try:
        body = dict(body)
        cls = _BY_KIND[body.pop("kind")]
    except (ValueError, KeyError, TypeError) as e:
        raise MetadataRecordError(f"not a metadata record: {str(body)[:80]!r}") from e
    kwargs = {}
    for f in fields(cls):
        if f.name not in body:
            continue
        value = body[f.name]
        kwargs[f.name] = _tuples(value)
    try:
        return cls(**kwargs)
    except TypeError as e:
        raise MetadataRecordError(f"malformed {cls.kind} record: {e}") from e


def encode_entry(records: Sequence[MetadataRecord]) -> bytes:
    """One metadata-log entry (one controller decision): a JSON array of records."""
    return b"[" + b",".join(encode_record(r) for r in records) + b"]"


def decode_entry(data: bytes) -> list[MetadataRecord]:
    if not data:
        return []  # a new Raft leader's no-op
    try:
        items: Any = json.loads(data)
    except ValueError as e:
        raise MetadataRecordError(f"not a metadata entry: {data[:80]!r}") from e
    if not isinstance(items, list):
        raise MetadataRecordError(f"a metadata entry is a JSON array, not {data[:80]!r}")
    return [record_from_json(item) for item in items]
