from . import errors_pb2 as _errors_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ResourceType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RESOURCE_UNKNOWN: _ClassVar[ResourceType]
    TOPIC: _ClassVar[ResourceType]
    BROKER: _ClassVar[ResourceType]

class AlterOp(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SET: _ClassVar[AlterOp]
    DELETE: _ClassVar[AlterOp]
RESOURCE_UNKNOWN: ResourceType
TOPIC: ResourceType
BROKER: ResourceType
SET: AlterOp
DELETE: AlterOp

class MetadataRequest(_message.Message):
    __slots__ = ("topics", "all_topics", "allow_auto_topic_creation")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    ALL_TOPICS_FIELD_NUMBER: _ClassVar[int]
    ALLOW_AUTO_TOPIC_CREATION_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    all_topics: bool
    allow_auto_topic_creation: bool
    def __init__(self, topics: _Optional[_Iterable[str]] = ..., all_topics: _Optional[bool] = ..., allow_auto_topic_creation: _Optional[bool] = ...) -> None: ...

class NodeEndpoint(_message.Message):
    __slots__ = ("node_id", "host", "port", "fenced")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    FENCED_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    host: str
    port: int
    fenced: bool
    def __init__(self, node_id: _Optional[int] = ..., host: _Optional[str] = ..., port: _Optional[int] = ..., fenced: _Optional[bool] = ...) -> None: ...

class PartitionMetadata(_message.Message):
    __slots__ = ("error_code", "partition", "leader_id", "leader_epoch", "replica_nodes", "isr_nodes", "offline_replicas", "partition_epoch")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    REPLICA_NODES_FIELD_NUMBER: _ClassVar[int]
    ISR_NODES_FIELD_NUMBER: _ClassVar[int]
    OFFLINE_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    PARTITION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    partition: int
    leader_id: int
    leader_epoch: int
    replica_nodes: _containers.RepeatedScalarFieldContainer[int]
    isr_nodes: _containers.RepeatedScalarFieldContainer[int]
    offline_replicas: _containers.RepeatedScalarFieldContainer[int]
    partition_epoch: int
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., partition: _Optional[int] = ..., leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., replica_nodes: _Optional[_Iterable[int]] = ..., isr_nodes: _Optional[_Iterable[int]] = ..., offline_replicas: _Optional[_Iterable[int]] = ..., partition_epoch: _Optional[int] = ...) -> None: ...

class TopicMetadata(_message.Message):
    __slots__ = ("error_code", "error_message", "name", "topic_id", "partitions")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    name: str
    topic_id: str
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionMetadata]
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., name: _Optional[str] = ..., topic_id: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[PartitionMetadata, _Mapping]]] = ...) -> None: ...

class MetadataResponse(_message.Message):
    __slots__ = ("brokers", "cluster_id", "controller_id", "topics")
    BROKERS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_ID_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    brokers: _containers.RepeatedCompositeFieldContainer[NodeEndpoint]
    cluster_id: str
    controller_id: int
    topics: _containers.RepeatedCompositeFieldContainer[TopicMetadata]
    def __init__(self, brokers: _Optional[_Iterable[_Union[NodeEndpoint, _Mapping]]] = ..., cluster_id: _Optional[str] = ..., controller_id: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[TopicMetadata, _Mapping]]] = ...) -> None: ...

class CreatableTopic(_message.Message):
    __slots__ = ("name", "num_partitions", "replication_factor", "configs")
    class ConfigsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    name: str
    num_partitions: int
    replication_factor: int
    configs: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., num_partitions: _Optional[int] = ..., replication_factor: _Optional[int] = ..., configs: _Optional[_Mapping[str, str]] = ...) -> None: ...

class CreateTopicsRequest(_message.Message):
    __slots__ = ("topics", "timeout_ms", "validate_only")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[CreatableTopic]
    timeout_ms: int
    validate_only: bool
    def __init__(self, topics: _Optional[_Iterable[_Union[CreatableTopic, _Mapping]]] = ..., timeout_ms: _Optional[int] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class CreateTopicResult(_message.Message):
    __slots__ = ("name", "topic_id", "error_code", "error_message", "num_partitions", "replication_factor")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TOPIC_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    NUM_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    REPLICATION_FACTOR_FIELD_NUMBER: _ClassVar[int]
    name: str
    topic_id: str
    error_code: _errors_pb2.ErrorCode
    error_message: str
    num_partitions: int
    replication_factor: int
    def __init__(self, name: _Optional[str] = ..., topic_id: _Optional[str] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., num_partitions: _Optional[int] = ..., replication_factor: _Optional[int] = ...) -> None: ...

class CreateTopicsResponse(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[CreateTopicResult]
    def __init__(self, topics: _Optional[_Iterable[_Union[CreateTopicResult, _Mapping]]] = ...) -> None: ...

class DeleteTopicsRequest(_message.Message):
    __slots__ = ("names", "timeout_ms")
    NAMES_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    names: _containers.RepeatedScalarFieldContainer[str]
    timeout_ms: int
    def __init__(self, names: _Optional[_Iterable[str]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class DeleteTopicResult(_message.Message):
    __slots__ = ("name", "error_code", "error_message")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    name: str
    error_code: _errors_pb2.ErrorCode
    error_message: str
    def __init__(self, name: _Optional[str] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class DeleteTopicsResponse(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[DeleteTopicResult]
    def __init__(self, topics: _Optional[_Iterable[_Union[DeleteTopicResult, _Mapping]]] = ...) -> None: ...

class CreatePartitionsTopic(_message.Message):
    __slots__ = ("name", "count")
    NAME_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    name: str
    count: int
    def __init__(self, name: _Optional[str] = ..., count: _Optional[int] = ...) -> None: ...

class CreateTopicPartitionsRequest(_message.Message):
    __slots__ = ("topics", "timeout_ms", "validate_only")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[CreatePartitionsTopic]
    timeout_ms: int
    validate_only: bool
    def __init__(self, topics: _Optional[_Iterable[_Union[CreatePartitionsTopic, _Mapping]]] = ..., timeout_ms: _Optional[int] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class CreatePartitionsTopicResult(_message.Message):
    __slots__ = ("name", "error_code", "error_message")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    name: str
    error_code: _errors_pb2.ErrorCode
    error_message: str
    def __init__(self, name: _Optional[str] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class CreateTopicPartitionsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[CreatePartitionsTopicResult]
    def __init__(self, results: _Optional[_Iterable[_Union[CreatePartitionsTopicResult, _Mapping]]] = ...) -> None: ...

class ConfigResource(_message.Message):
    __slots__ = ("type", "name", "config_names")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONFIG_NAMES_FIELD_NUMBER: _ClassVar[int]
    type: ResourceType
    name: str
    config_names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, type: _Optional[_Union[ResourceType, str]] = ..., name: _Optional[str] = ..., config_names: _Optional[_Iterable[str]] = ...) -> None: ...

class DescribeConfigsRequest(_message.Message):
    __slots__ = ("resources",)
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    resources: _containers.RepeatedCompositeFieldContainer[ConfigResource]
    def __init__(self, resources: _Optional[_Iterable[_Union[ConfigResource, _Mapping]]] = ...) -> None: ...

class ConfigEntry(_message.Message):
    __slots__ = ("name", "value", "read_only", "source", "is_sensitive", "is_default")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    IS_SENSITIVE_FIELD_NUMBER: _ClassVar[int]
    IS_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: str
    read_only: bool
    source: int
    is_sensitive: bool
    is_default: bool
    def __init__(self, name: _Optional[str] = ..., value: _Optional[str] = ..., read_only: _Optional[bool] = ..., source: _Optional[int] = ..., is_sensitive: _Optional[bool] = ..., is_default: _Optional[bool] = ...) -> None: ...

class DescribeConfigsResult(_message.Message):
    __slots__ = ("error_code", "error_message", "type", "name", "configs")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    type: ResourceType
    name: str
    configs: _containers.RepeatedCompositeFieldContainer[ConfigEntry]
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., type: _Optional[_Union[ResourceType, str]] = ..., name: _Optional[str] = ..., configs: _Optional[_Iterable[_Union[ConfigEntry, _Mapping]]] = ...) -> None: ...

class DescribeConfigsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[DescribeConfigsResult]
    def __init__(self, results: _Optional[_Iterable[_Union[DescribeConfigsResult, _Mapping]]] = ...) -> None: ...

class AlterableConfig(_message.Message):
    __slots__ = ("name", "op", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    op: AlterOp
    value: str
    def __init__(self, name: _Optional[str] = ..., op: _Optional[_Union[AlterOp, str]] = ..., value: _Optional[str] = ...) -> None: ...

class AlterConfigsResource(_message.Message):
    __slots__ = ("type", "name", "configs")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONFIGS_FIELD_NUMBER: _ClassVar[int]
    type: ResourceType
    name: str
    configs: _containers.RepeatedCompositeFieldContainer[AlterableConfig]
    def __init__(self, type: _Optional[_Union[ResourceType, str]] = ..., name: _Optional[str] = ..., configs: _Optional[_Iterable[_Union[AlterableConfig, _Mapping]]] = ...) -> None: ...

class AlterConfigsRequest(_message.Message):
    __slots__ = ("resources", "validate_only")
    RESOURCES_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    resources: _containers.RepeatedCompositeFieldContainer[AlterConfigsResource]
    validate_only: bool
    def __init__(self, resources: _Optional[_Iterable[_Union[AlterConfigsResource, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class AlterConfigsResult(_message.Message):
    __slots__ = ("error_code", "error_message", "type", "name")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    type: ResourceType
    name: str
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., type: _Optional[_Union[ResourceType, str]] = ..., name: _Optional[str] = ...) -> None: ...

class AlterConfigsResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[AlterConfigsResult]
    def __init__(self, results: _Optional[_Iterable[_Union[AlterConfigsResult, _Mapping]]] = ...) -> None: ...

class PartitionProduceData(_message.Message):
    __slots__ = ("partition", "records")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    partition: int
    records: bytes
    def __init__(self, partition: _Optional[int] = ..., records: _Optional[bytes] = ...) -> None: ...

class TopicProduceData(_message.Message):
    __slots__ = ("name", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionProduceData]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[PartitionProduceData, _Mapping]]] = ...) -> None: ...

class ProduceRequest(_message.Message):
    __slots__ = ("acks", "timeout_ms", "topics", "transactional_id")
    ACKS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    acks: int
    timeout_ms: int
    topics: _containers.RepeatedCompositeFieldContainer[TopicProduceData]
    transactional_id: str
    def __init__(self, acks: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[TopicProduceData, _Mapping]]] = ..., transactional_id: _Optional[str] = ...) -> None: ...

class PartitionProduceResponse(_message.Message):
    __slots__ = ("partition", "error_code", "error_message", "base_offset", "log_append_time_ms", "log_start_offset", "current_leader")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    BASE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOG_APPEND_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    CURRENT_LEADER_FIELD_NUMBER: _ClassVar[int]
    partition: int
    error_code: _errors_pb2.ErrorCode
    error_message: str
    base_offset: int
    log_append_time_ms: int
    log_start_offset: int
    current_leader: LeaderIdAndEpoch
    def __init__(self, partition: _Optional[int] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., base_offset: _Optional[int] = ..., log_append_time_ms: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., current_leader: _Optional[_Union[LeaderIdAndEpoch, _Mapping]] = ...) -> None: ...

class TopicProduceResponse(_message.Message):
    __slots__ = ("name", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionProduceResponse]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[PartitionProduceResponse, _Mapping]]] = ...) -> None: ...

class ProduceResponse(_message.Message):
    __slots__ = ("topics", "throttle_time_ms")
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[TopicProduceResponse]
    throttle_time_ms: int
    def __init__(self, topics: _Optional[_Iterable[_Union[TopicProduceResponse, _Mapping]]] = ..., throttle_time_ms: _Optional[int] = ...) -> None: ...

class FetchPartition(_message.Message):
    __slots__ = ("partition", "current_leader_epoch", "fetch_offset", "last_fetched_epoch", "log_start_offset", "partition_max_bytes")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    CURRENT_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    FETCH_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LAST_FETCHED_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    PARTITION_MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    partition: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int
    partition_max_bytes: int
    def __init__(self, partition: _Optional[int] = ..., current_leader_epoch: _Optional[int] = ..., fetch_offset: _Optional[int] = ..., last_fetched_epoch: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., partition_max_bytes: _Optional[int] = ...) -> None: ...

class FetchTopic(_message.Message):
    __slots__ = ("name", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: _containers.RepeatedCompositeFieldContainer[FetchPartition]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[FetchPartition, _Mapping]]] = ...) -> None: ...

class FetchRequest(_message.Message):
    __slots__ = ("replica_id", "replica_epoch", "max_wait_ms", "min_bytes", "max_bytes", "isolation_level", "topics", "session_id", "session_epoch", "forgotten")
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    REPLICA_EPOCH_FIELD_NUMBER: _ClassVar[int]
    MAX_WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    MIN_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_BYTES_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_LEVEL_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_EPOCH_FIELD_NUMBER: _ClassVar[int]
    FORGOTTEN_FIELD_NUMBER: _ClassVar[int]
    replica_id: int
    replica_epoch: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    isolation_level: int
    topics: _containers.RepeatedCompositeFieldContainer[FetchTopic]
    session_id: int
    session_epoch: int
    forgotten: _containers.RepeatedCompositeFieldContainer[FetchTopic]
    def __init__(self, replica_id: _Optional[int] = ..., replica_epoch: _Optional[int] = ..., max_wait_ms: _Optional[int] = ..., min_bytes: _Optional[int] = ..., max_bytes: _Optional[int] = ..., isolation_level: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[FetchTopic, _Mapping]]] = ..., session_id: _Optional[int] = ..., session_epoch: _Optional[int] = ..., forgotten: _Optional[_Iterable[_Union[FetchTopic, _Mapping]]] = ...) -> None: ...

class EpochEndOffset(_message.Message):
    __slots__ = ("epoch", "end_offset")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    end_offset: int
    def __init__(self, epoch: _Optional[int] = ..., end_offset: _Optional[int] = ...) -> None: ...

class LeaderIdAndEpoch(_message.Message):
    __slots__ = ("leader_id", "leader_epoch")
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    leader_id: int
    leader_epoch: int
    def __init__(self, leader_id: _Optional[int] = ..., leader_epoch: _Optional[int] = ...) -> None: ...

class FetchPartitionResponse(_message.Message):
    __slots__ = ("partition", "error_code", "error_message", "high_watermark", "last_stable_offset", "log_start_offset", "diverging_epoch", "current_leader", "records", "aborted_transactions")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    LAST_STABLE_OFFSET_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    DIVERGING_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CURRENT_LEADER_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    ABORTED_TRANSACTIONS_FIELD_NUMBER: _ClassVar[int]
    partition: int
    error_code: _errors_pb2.ErrorCode
    error_message: str
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    diverging_epoch: EpochEndOffset
    current_leader: LeaderIdAndEpoch
    records: bytes
    aborted_transactions: _containers.RepeatedCompositeFieldContainer[AbortedTransaction]
    def __init__(self, partition: _Optional[int] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., high_watermark: _Optional[int] = ..., last_stable_offset: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., diverging_epoch: _Optional[_Union[EpochEndOffset, _Mapping]] = ..., current_leader: _Optional[_Union[LeaderIdAndEpoch, _Mapping]] = ..., records: _Optional[bytes] = ..., aborted_transactions: _Optional[_Iterable[_Union[AbortedTransaction, _Mapping]]] = ...) -> None: ...

class AbortedTransaction(_message.Message):
    __slots__ = ("producer_id", "first_offset")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    FIRST_OFFSET_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    first_offset: int
    def __init__(self, producer_id: _Optional[int] = ..., first_offset: _Optional[int] = ...) -> None: ...

class FetchTopicResponse(_message.Message):
    __slots__ = ("name", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: _containers.RepeatedCompositeFieldContainer[FetchPartitionResponse]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[FetchPartitionResponse, _Mapping]]] = ...) -> None: ...

class FetchResponse(_message.Message):
    __slots__ = ("error_code", "topics", "throttle_time_ms", "session_id")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    THROTTLE_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    topics: _containers.RepeatedCompositeFieldContainer[FetchTopicResponse]
    throttle_time_ms: int
    session_id: int
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., topics: _Optional[_Iterable[_Union[FetchTopicResponse, _Mapping]]] = ..., throttle_time_ms: _Optional[int] = ..., session_id: _Optional[int] = ...) -> None: ...

class ListOffsetsPartition(_message.Message):
    __slots__ = ("partition", "current_leader_epoch", "timestamp")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    CURRENT_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    partition: int
    current_leader_epoch: int
    timestamp: int
    def __init__(self, partition: _Optional[int] = ..., current_leader_epoch: _Optional[int] = ..., timestamp: _Optional[int] = ...) -> None: ...

class ListOffsetsTopic(_message.Message):
    __slots__ = ("name", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: _containers.RepeatedCompositeFieldContainer[ListOffsetsPartition]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[ListOffsetsPartition, _Mapping]]] = ...) -> None: ...

class ListOffsetsRequest(_message.Message):
    __slots__ = ("replica_id", "isolation_level", "topics")
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    ISOLATION_LEVEL_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    replica_id: int
    isolation_level: int
    topics: _containers.RepeatedCompositeFieldContainer[ListOffsetsTopic]
    def __init__(self, replica_id: _Optional[int] = ..., isolation_level: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[ListOffsetsTopic, _Mapping]]] = ...) -> None: ...

class ListOffsetsPartitionResponse(_message.Message):
    __slots__ = ("partition", "error_code", "error_message", "timestamp", "offset", "leader_epoch")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    partition: int
    error_code: _errors_pb2.ErrorCode
    error_message: str
    timestamp: int
    offset: int
    leader_epoch: int
    def __init__(self, partition: _Optional[int] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., timestamp: _Optional[int] = ..., offset: _Optional[int] = ..., leader_epoch: _Optional[int] = ...) -> None: ...

class ListOffsetsTopicResponse(_message.Message):
    __slots__ = ("name", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: _containers.RepeatedCompositeFieldContainer[ListOffsetsPartitionResponse]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[ListOffsetsPartitionResponse, _Mapping]]] = ...) -> None: ...

class ListOffsetsResponse(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[ListOffsetsTopicResponse]
    def __init__(self, topics: _Optional[_Iterable[_Union[ListOffsetsTopicResponse, _Mapping]]] = ...) -> None: ...

class InitProducerIdRequest(_message.Message):
    __slots__ = ("transactional_id", "transaction_timeout_ms", "producer_id", "producer_epoch")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    transaction_timeout_ms: int
    producer_id: int
    producer_epoch: int
    def __init__(self, transactional_id: _Optional[str] = ..., transaction_timeout_ms: _Optional[int] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ...) -> None: ...

class InitProducerIdResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "producer_id", "producer_epoch")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    producer_id: int
    producer_epoch: int
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ...) -> None: ...

class OffsetForLeaderPartition(_message.Message):
    __slots__ = ("partition", "current_leader_epoch", "leader_epoch")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    CURRENT_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    partition: int
    current_leader_epoch: int
    leader_epoch: int
    def __init__(self, partition: _Optional[int] = ..., current_leader_epoch: _Optional[int] = ..., leader_epoch: _Optional[int] = ...) -> None: ...

class OffsetForLeaderTopic(_message.Message):
    __slots__ = ("name", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: _containers.RepeatedCompositeFieldContainer[OffsetForLeaderPartition]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[OffsetForLeaderPartition, _Mapping]]] = ...) -> None: ...

class OffsetsForLeaderEpochRequest(_message.Message):
    __slots__ = ("replica_id", "topics")
    REPLICA_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    replica_id: int
    topics: _containers.RepeatedCompositeFieldContainer[OffsetForLeaderTopic]
    def __init__(self, replica_id: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[OffsetForLeaderTopic, _Mapping]]] = ...) -> None: ...

class EpochEndOffsetResult(_message.Message):
    __slots__ = ("partition", "error_code", "leader_epoch", "end_offset")
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    partition: int
    error_code: _errors_pb2.ErrorCode
    leader_epoch: int
    end_offset: int
    def __init__(self, partition: _Optional[int] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., leader_epoch: _Optional[int] = ..., end_offset: _Optional[int] = ...) -> None: ...

class OffsetForLeaderTopicResult(_message.Message):
    __slots__ = ("name", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: _containers.RepeatedCompositeFieldContainer[EpochEndOffsetResult]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[EpochEndOffsetResult, _Mapping]]] = ...) -> None: ...

class OffsetsForLeaderEpochResponse(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[OffsetForLeaderTopicResult]
    def __init__(self, topics: _Optional[_Iterable[_Union[OffsetForLeaderTopicResult, _Mapping]]] = ...) -> None: ...

class DescribeReplicasRequest(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, topics: _Optional[_Iterable[str]] = ...) -> None: ...

class ReplicaState(_message.Message):
    __slots__ = ("node_id", "log_end_offset")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    LOG_END_OFFSET_FIELD_NUMBER: _ClassVar[int]
    node_id: int
    log_end_offset: int
    def __init__(self, node_id: _Optional[int] = ..., log_end_offset: _Optional[int] = ...) -> None: ...

class PartitionReplicas(_message.Message):
    __slots__ = ("topic", "partition", "leader_epoch", "high_watermark", "log_start_offset", "replicas")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    HIGH_WATERMARK_FIELD_NUMBER: _ClassVar[int]
    LOG_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    leader_epoch: int
    high_watermark: int
    log_start_offset: int
    replicas: _containers.RepeatedCompositeFieldContainer[ReplicaState]
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., leader_epoch: _Optional[int] = ..., high_watermark: _Optional[int] = ..., log_start_offset: _Optional[int] = ..., replicas: _Optional[_Iterable[_Union[ReplicaState, _Mapping]]] = ...) -> None: ...

class DescribeReplicasResponse(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionReplicas]
    def __init__(self, partitions: _Optional[_Iterable[_Union[PartitionReplicas, _Mapping]]] = ...) -> None: ...

class ElectLeadersTopic(_message.Message):
    __slots__ = ("topic", "partitions")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, topic: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...

class ElectLeadersRequest(_message.Message):
    __slots__ = ("election_type", "topics", "timeout_ms")
    ELECTION_TYPE_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    election_type: str
    topics: _containers.RepeatedCompositeFieldContainer[ElectLeadersTopic]
    timeout_ms: int
    def __init__(self, election_type: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[ElectLeadersTopic, _Mapping]]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class ElectLeadersResult(_message.Message):
    __slots__ = ("topic", "partition", "error_code", "error_message")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    error_code: _errors_pb2.ErrorCode
    error_message: str
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class ElectLeadersResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "results")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    results: _containers.RepeatedCompositeFieldContainer[ElectLeadersResult]
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., results: _Optional[_Iterable[_Union[ElectLeadersResult, _Mapping]]] = ...) -> None: ...

class PartitionReassignment(_message.Message):
    __slots__ = ("topic", "partition", "replicas", "cancel", "adding_replicas", "removing_replicas", "error_code", "error_message")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    REPLICAS_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    ADDING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    REMOVING_REPLICAS_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    replicas: _containers.RepeatedScalarFieldContainer[int]
    cancel: bool
    adding_replicas: _containers.RepeatedScalarFieldContainer[int]
    removing_replicas: _containers.RepeatedScalarFieldContainer[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., replicas: _Optional[_Iterable[int]] = ..., cancel: _Optional[bool] = ..., adding_replicas: _Optional[_Iterable[int]] = ..., removing_replicas: _Optional[_Iterable[int]] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class AlterPartitionReassignmentsRequest(_message.Message):
    __slots__ = ("partitions", "timeout_ms")
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionReassignment]
    timeout_ms: int
    def __init__(self, partitions: _Optional[_Iterable[_Union[PartitionReassignment, _Mapping]]] = ..., timeout_ms: _Optional[int] = ...) -> None: ...

class AlterPartitionReassignmentsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "results")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    results: _containers.RepeatedCompositeFieldContainer[PartitionReassignment]
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., results: _Optional[_Iterable[_Union[PartitionReassignment, _Mapping]]] = ...) -> None: ...

class ListPartitionReassignmentsRequest(_message.Message):
    __slots__ = ("partitions", "all_partitions")
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    ALL_PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionReassignment]
    all_partitions: bool
    def __init__(self, partitions: _Optional[_Iterable[_Union[PartitionReassignment, _Mapping]]] = ..., all_partitions: _Optional[bool] = ...) -> None: ...

class ListPartitionReassignmentsResponse(_message.Message):
    __slots__ = ("error_code", "error_message", "reassignments")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    REASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    reassignments: _containers.RepeatedCompositeFieldContainer[PartitionReassignment]
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., reassignments: _Optional[_Iterable[_Union[PartitionReassignment, _Mapping]]] = ...) -> None: ...
