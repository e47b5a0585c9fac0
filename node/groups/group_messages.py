"""The group coordinator's requests and results: the fields of Kafka's messages, by
Kafka's names, as both listeners (node/kafka/groups.py, grpc_servicer.py) hand them
in and get them back: the classic protocol's, the offsets' and administration's, and
KIP-848's ConsumerGroupHeartbeat and ConsumerGroupDescribe."""

from __future__ import annotations

from dataclasses import dataclass

from .group_errors import NONE
from .group_state import GroupState

TopicPartition = tuple[str, int]

# --- the classic protocol, offsets and administration ------------------------------


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
class HeartbeatRequest:
    group_id: str
    generation: int
    member_id: str
    group_instance_id: str | None


@dataclass(frozen=True)
class LeaveRequest:
    group_id: str
    members: tuple[tuple[str, str | None], ...]  # member id, instance id


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
class OffsetCommitRequest:
    """`generation` and `member_id` are -1 and "" for a commit from outside any group;
    `retention_ms`, OffsetCommit v2-v4's retention time (-1: the broker's
    offsets.retention.minutes), is stored as the commit's expire timestamp."""

    group_id: str
    generation: int  # a KIP-848 member's epoch
    member_id: str
    group_instance_id: str | None
    partitions: tuple[CommitPartition, ...]
    retention_ms: int = -1


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


# --- KIP-848 ----------------------------------------------------------------------


@dataclass(frozen=True)
class ConsumerHeartbeat:
    """One ConsumerGroupHeartbeat request, by Kafka's field names; `owned` is None
    when the member did not send its partitions (unchanged since the last one), and
    names topics (the shell maps topic ids). `member_id_from_client`: v1, where the
    consumer makes up its own id."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: tuple[TopicPartition, ...] | None = None
    member_id_from_client: bool = False
    client_id: str = ""
    client_host: str = ""
    # The group's own configs (Kafka 4.0's GROUP resource), else the broker's.
    session_timeout_ms: int | None = None
    heartbeat_interval_ms: int | None = None


@dataclass(frozen=True)
class ConsumerHeartbeatResult:
    error: str
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    # (topic, partitions); None: unchanged since the last answer
    assignment: tuple[tuple[str, tuple[int, ...]], ...] | None = None


@dataclass(frozen=True)
class DescribedConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    assignment: tuple[tuple[str, tuple[int, ...]], ...]
    target_assignment: tuple[tuple[str, tuple[int, ...]], ...]


@dataclass(frozen=True)
class DescribedConsumerGroup:
    """A ConsumerGroupDescribe answer for one group."""

    error: str
    group_id: str
    error_message: str | None = None
    state: str = "Dead"
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor_name: str = ""
    members: tuple[DescribedConsumerMember, ...] = ()


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
