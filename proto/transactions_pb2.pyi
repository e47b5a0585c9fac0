from . import errors_pb2 as _errors_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TxnTopic(_message.Message):
    __slots__ = ("name", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[int]] = ...) -> None: ...

class TxnPartitionError(_message.Message):
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

class TxnErrorResponse(_message.Message):
    __slots__ = ("error_code", "error_message")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ...) -> None: ...

class AddPartitionsToTxnRequest(_message.Message):
    __slots__ = ("transactional_id", "producer_id", "producer_epoch", "topics")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    producer_id: int
    producer_epoch: int
    topics: _containers.RepeatedCompositeFieldContainer[TxnTopic]
    def __init__(self, transactional_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[TxnTopic, _Mapping]]] = ...) -> None: ...

class AddPartitionsToTxnResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[TxnPartitionError]
    def __init__(self, results: _Optional[_Iterable[_Union[TxnPartitionError, _Mapping]]] = ...) -> None: ...

class AddOffsetsToTxnRequest(_message.Message):
    __slots__ = ("transactional_id", "producer_id", "producer_epoch", "group_id")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    producer_id: int
    producer_epoch: int
    group_id: str
    def __init__(self, transactional_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., group_id: _Optional[str] = ...) -> None: ...

class EndTxnRequest(_message.Message):
    __slots__ = ("transactional_id", "producer_id", "producer_epoch", "committed")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    producer_id: int
    producer_epoch: int
    committed: bool
    def __init__(self, transactional_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., committed: _Optional[bool] = ...) -> None: ...

class TxnOffsetCommitPartition(_message.Message):
    __slots__ = ("partition_index", "committed_offset", "committed_leader_epoch", "committed_metadata")
    PARTITION_INDEX_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_OFFSET_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_LEADER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    COMMITTED_METADATA_FIELD_NUMBER: _ClassVar[int]
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int
    committed_metadata: str
    def __init__(self, partition_index: _Optional[int] = ..., committed_offset: _Optional[int] = ..., committed_leader_epoch: _Optional[int] = ..., committed_metadata: _Optional[str] = ...) -> None: ...

class TxnOffsetCommitTopic(_message.Message):
    __slots__ = ("name", "partitions")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    name: str
    partitions: _containers.RepeatedCompositeFieldContainer[TxnOffsetCommitPartition]
    def __init__(self, name: _Optional[str] = ..., partitions: _Optional[_Iterable[_Union[TxnOffsetCommitPartition, _Mapping]]] = ...) -> None: ...

class TxnOffsetCommitRequest(_message.Message):
    __slots__ = ("transactional_id", "group_id", "producer_id", "producer_epoch", "generation_id", "member_id", "group_instance_id", "topics")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    GROUP_INSTANCE_ID_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    group_id: str
    producer_id: int
    producer_epoch: int
    generation_id: int
    member_id: str
    group_instance_id: str
    topics: _containers.RepeatedCompositeFieldContainer[TxnOffsetCommitTopic]
    def __init__(self, transactional_id: _Optional[str] = ..., group_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., generation_id: _Optional[int] = ..., member_id: _Optional[str] = ..., group_instance_id: _Optional[str] = ..., topics: _Optional[_Iterable[_Union[TxnOffsetCommitTopic, _Mapping]]] = ...) -> None: ...

class TxnOffsetCommitResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[TxnPartitionError]
    def __init__(self, results: _Optional[_Iterable[_Union[TxnPartitionError, _Mapping]]] = ...) -> None: ...

class DescribeTransactionsRequest(_message.Message):
    __slots__ = ("transactional_ids",)
    TRANSACTIONAL_IDS_FIELD_NUMBER: _ClassVar[int]
    transactional_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, transactional_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class TransactionState(_message.Message):
    __slots__ = ("error_code", "error_message", "transactional_id", "transaction_state", "transaction_timeout_ms", "transaction_start_time_ms", "producer_id", "producer_epoch", "topics", "coordinator_id")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_STATE_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_START_TIME_MS_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_ID_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    error_message: str
    transactional_id: str
    transaction_state: str
    transaction_timeout_ms: int
    transaction_start_time_ms: int
    producer_id: int
    producer_epoch: int
    topics: _containers.RepeatedCompositeFieldContainer[TxnTopic]
    coordinator_id: int
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., transactional_id: _Optional[str] = ..., transaction_state: _Optional[str] = ..., transaction_timeout_ms: _Optional[int] = ..., transaction_start_time_ms: _Optional[int] = ..., producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., topics: _Optional[_Iterable[_Union[TxnTopic, _Mapping]]] = ..., coordinator_id: _Optional[int] = ...) -> None: ...

class DescribeTransactionsResponse(_message.Message):
    __slots__ = ("transaction_states",)
    TRANSACTION_STATES_FIELD_NUMBER: _ClassVar[int]
    transaction_states: _containers.RepeatedCompositeFieldContainer[TransactionState]
    def __init__(self, transaction_states: _Optional[_Iterable[_Union[TransactionState, _Mapping]]] = ...) -> None: ...

class ListTransactionsRequest(_message.Message):
    __slots__ = ("state_filters", "producer_id_filters")
    STATE_FILTERS_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FILTERS_FIELD_NUMBER: _ClassVar[int]
    state_filters: _containers.RepeatedScalarFieldContainer[str]
    producer_id_filters: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, state_filters: _Optional[_Iterable[str]] = ..., producer_id_filters: _Optional[_Iterable[int]] = ...) -> None: ...

class ListedTransaction(_message.Message):
    __slots__ = ("transactional_id", "producer_id", "transaction_state")
    TRANSACTIONAL_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_STATE_FIELD_NUMBER: _ClassVar[int]
    transactional_id: str
    producer_id: int
    transaction_state: str
    def __init__(self, transactional_id: _Optional[str] = ..., producer_id: _Optional[int] = ..., transaction_state: _Optional[str] = ...) -> None: ...

class ListTransactionsResponse(_message.Message):
    __slots__ = ("error_code", "unknown_state_filters", "transaction_states")
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    UNKNOWN_STATE_FILTERS_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_STATES_FIELD_NUMBER: _ClassVar[int]
    error_code: _errors_pb2.ErrorCode
    unknown_state_filters: _containers.RepeatedScalarFieldContainer[str]
    transaction_states: _containers.RepeatedCompositeFieldContainer[ListedTransaction]
    def __init__(self, error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., unknown_state_filters: _Optional[_Iterable[str]] = ..., transaction_states: _Optional[_Iterable[_Union[ListedTransaction, _Mapping]]] = ...) -> None: ...

class DescribeProducersRequest(_message.Message):
    __slots__ = ("topics",)
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    topics: _containers.RepeatedCompositeFieldContainer[TxnTopic]
    def __init__(self, topics: _Optional[_Iterable[_Union[TxnTopic, _Mapping]]] = ...) -> None: ...

class ProducerState(_message.Message):
    __slots__ = ("producer_id", "producer_epoch", "last_sequence", "last_timestamp", "coordinator_epoch", "current_txn_start_offset")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    LAST_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    CURRENT_TXN_START_OFFSET_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int
    def __init__(self, producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., last_sequence: _Optional[int] = ..., last_timestamp: _Optional[int] = ..., coordinator_epoch: _Optional[int] = ..., current_txn_start_offset: _Optional[int] = ...) -> None: ...

class PartitionProducers(_message.Message):
    __slots__ = ("topic", "partition", "error_code", "error_message", "active_producers")
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    PARTITION_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_PRODUCERS_FIELD_NUMBER: _ClassVar[int]
    topic: str
    partition: int
    error_code: _errors_pb2.ErrorCode
    error_message: str
    active_producers: _containers.RepeatedCompositeFieldContainer[ProducerState]
    def __init__(self, topic: _Optional[str] = ..., partition: _Optional[int] = ..., error_code: _Optional[_Union[_errors_pb2.ErrorCode, str]] = ..., error_message: _Optional[str] = ..., active_producers: _Optional[_Iterable[_Union[ProducerState, _Mapping]]] = ...) -> None: ...

class DescribeProducersResponse(_message.Message):
    __slots__ = ("partitions",)
    PARTITIONS_FIELD_NUMBER: _ClassVar[int]
    partitions: _containers.RepeatedCompositeFieldContainer[PartitionProducers]
    def __init__(self, partitions: _Optional[_Iterable[_Union[PartitionProducers, _Mapping]]] = ...) -> None: ...

class WritableTxnMarker(_message.Message):
    __slots__ = ("producer_id", "producer_epoch", "transaction_result", "topics", "coordinator_epoch")
    PRODUCER_ID_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_EPOCH_FIELD_NUMBER: _ClassVar[int]
    TRANSACTION_RESULT_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_EPOCH_FIELD_NUMBER: _ClassVar[int]
    producer_id: int
    producer_epoch: int
    transaction_result: bool
    topics: _containers.RepeatedCompositeFieldContainer[TxnTopic]
    coordinator_epoch: int
    def __init__(self, producer_id: _Optional[int] = ..., producer_epoch: _Optional[int] = ..., transaction_result: _Optional[bool] = ..., topics: _Optional[_Iterable[_Union[TxnTopic, _Mapping]]] = ..., coordinator_epoch: _Optional[int] = ...) -> None: ...

class WriteTxnMarkersRequest(_message.Message):
    __slots__ = ("markers",)
    MARKERS_FIELD_NUMBER: _ClassVar[int]
    markers: _containers.RepeatedCompositeFieldContainer[WritableTxnMarker]
    def __init__(self, markers: _Optional[_Iterable[_Union[WritableTxnMarker, _Mapping]]] = ...) -> None: ...

class WriteTxnMarkersResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[TxnPartitionError]
    def __init__(self, results: _Optional[_Iterable[_Union[TxnPartitionError, _Mapping]]] = ...) -> None: ...
