"""The admin client's arguments and answers (kafka-python's shapes) and ListOffsets'
special timestamps."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .cluster import TopicPartition
from .consumer_protocol import Subscription

# ListOffsets' special timestamps (Kafka's ListOffsetsRequest constants).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3


@dataclass(frozen=True, slots=True)
class NewTopic:
    """kafka-python's NewTopic: -1 means the node's num.partitions /
    default.replication.factor."""

    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    topic_configs: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class NewPartitions:
    """kafka-python's NewPartitions: the topic's partition count after the change."""

    total_count: int
    new_assignments: Sequence[Sequence[int]] | None = None


@dataclass(frozen=True, slots=True)
class CreateTopicResult:
    name: str
    topic_id: str
    num_partitions: int
    replication_factor: int


@dataclass(frozen=True, slots=True)
class PartitionDescription:
    partition: int
    leader: int  # -1: no leader
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class PartitionReassignment:
    """A running reassignment (KIP-455): replicas = target + removing_replicas."""

    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    topic_id: str
    partitions: tuple[PartitionDescription, ...]
    is_internal: bool = False

    @property
    def replication_factor(self) -> int:
        return len(self.partitions[0].replicas) if self.partitions else 0


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str
    source: int  # Kafka's DescribeConfigs source ids: 1 topic, 4 static broker, 5 default
    is_default: bool
    read_only: bool = False
    is_sensitive: bool = False


@dataclass(frozen=True, slots=True)
class BrokerDescription:
    node_id: int
    host: str
    port: int
    fenced: bool = False


@dataclass(frozen=True, slots=True)
class ClusterDescription:
    cluster_id: str
    controller_id: int
    brokers: tuple[BrokerDescription, ...]


@dataclass(frozen=True, slots=True)
class OffsetResult:
    """One partition's ListOffsets answer; offset -1: no record at or after the timestamp."""

    offset: int
    timestamp: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str  # Kafka's: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead


@dataclass(frozen=True, slots=True)
class MemberInformation:
    """kafka-python's MemberInformation, the consumer protocol bytes decoded
    (None when a member's bytes are not the consumer protocol's)."""

    member_id: str
    client_id: str
    client_host: str
    member_metadata: Subscription | None
    member_assignment: tuple[TopicPartition, ...]
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class GroupInformation:
    """kafka-python's GroupInformation, with the coordinator that answered."""

    error_code: int
    group: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberInformation, ...]
    coordinator: BrokerDescription | None = None
