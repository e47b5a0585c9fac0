"""The vocabulary of a partition replica (replication/partition_replica.py): Kafka's
error names, the log protocol it drives, its configuration, the requests and answers it
exchanges, the actions it hands its shell, and the state it keeps per follower."""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from seglog.storage.errors import StorageError
from seglog.storage.file_slice import FileSlice
from seglog.storage.leader_epoch_cache import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    LeaderEpochCache,
)
from seglog.storage.log import FetchDataInfo, LogAppendInfo, TimestampAndOffset
from seglog.storage.producer_state import AppendOrigin, ControlMarker
from seglog.storage.txn_index import AbortedTxn
from seglog.storage.txn_verification import VerificationGuard

NONE = "NONE"
OFFSET_OUT_OF_RANGE = "OFFSET_OUT_OF_RANGE"
NOT_LEADER_OR_FOLLOWER = "NOT_LEADER_OR_FOLLOWER"
REQUEST_TIMED_OUT = "REQUEST_TIMED_OUT"
NOT_ENOUGH_REPLICAS = "NOT_ENOUGH_REPLICAS"
NOT_ENOUGH_REPLICAS_AFTER_APPEND = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
INVALID_REQUIRED_ACKS = "INVALID_REQUIRED_ACKS"
FENCED_LEADER_EPOCH = "FENCED_LEADER_EPOCH"
UNKNOWN_LEADER_EPOCH = "UNKNOWN_LEADER_EPOCH"
OFFSET_NOT_AVAILABLE = "OFFSET_NOT_AVAILABLE"
INVALID_REQUEST = "INVALID_REQUEST"
INVALID_UPDATE_VERSION = "INVALID_UPDATE_VERSION"
INELIGIBLE_REPLICA = "INELIGIBLE_REPLICA"
OPERATION_NOT_ATTEMPTED = "OPERATION_NOT_ATTEMPTED"
NEW_LEADER_ELECTED = "NEW_LEADER_ELECTED"
UNKNOWN_TOPIC_OR_PARTITION = "UNKNOWN_TOPIC_OR_PARTITION"
OUT_OF_ORDER_SEQUENCE_NUMBER = "OUT_OF_ORDER_SEQUENCE_NUMBER"
UNKNOWN_PRODUCER_ID = "UNKNOWN_PRODUCER_ID"

# "Long ago" for follower timestamps: clocks here may start at 0, where Kafka's 0 would
# wrongly look recent.
NEVER = -(2**62)

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
NO_REPLICA = -1  # replica_id of a consumer


class ReplicaInvariantError(AssertionError):
    """A replication invariant broke: a bug, never a runtime condition."""


def check(condition: bool, message: Callable[[], str]) -> None:
    """The message is built only on failure: these checks sit on hot paths."""
    if not condition:
        raise ReplicaInvariantError(message())


# --- the log this replica drives ------------------------------------------------------


class ReplicaLog(Protocol):
    """What a replica needs from its log; `seglog.storage.log.Log` satisfies it as is."""

    @property
    def log_end_offset(self) -> int: ...
    @property
    def log_start_offset(self) -> int: ...
    @property
    def high_watermark(self) -> int: ...
    @property
    def epoch_cache(self) -> LeaderEpochCache: ...
    @property
    def last_stable_offset(self) -> int: ...

    def append_as_leader(
        self,
        data: bytes | bytearray | memoryview,
        leader_epoch: int,
        *,
        time_ms: int | None = ...,
        origin: AppendOrigin = ...,
        verification_guard: VerificationGuard | None = ...,
    ) -> LogAppendInfo: ...
    def append_as_follower(
        self, data: bytes | bytearray | memoryview, *, time_ms: int | None = ...
    ) -> LogAppendInfo: ...
    def append_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        marker: ControlMarker,
        leader_epoch: int,
        *,
        time_ms: int | None = ...,
    ) -> LogAppendInfo: ...
    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        upper_bound: int | None = ...,
        min_one_batch: bool = ...,
    ) -> FetchDataInfo: ...
    def read_slice(
        self,
        offset: int,
        max_bytes: int,
        *,
        upper_bound: int | None = ...,
        min_one_batch: bool = ...,
    ) -> FileSlice: ...
    def truncate_to(self, offset: int, *, time_ms: int | None = ...) -> bool: ...
    def truncate_fully_and_start_at(self, offset: int, *, time_ms: int | None = ...) -> None: ...
    def update_high_watermark(self, offset: int) -> int: ...
    def maybe_increment_log_start_offset(self, offset: int) -> bool: ...
    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None: ...
    def collect_aborted_transactions(
        self, fetch_offset: int, upper_bound: int
    ) -> list[AbortedTxn]: ...
    @property
    def durable_offset(self) -> int: ...
    @property
    def awaits_flush(self) -> bool: ...


# --- configuration ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplicaConfig:
    min_insync_replicas: int = 1
    replica_lag_time_max_ms: int = 30_000
    replica_fetch_backoff_ms: int = 1_000
    replica_fetch_max_bytes: int = 1_048_576
    # A follower request without an answer after this long is given up (then backoff).
    replica_request_timeout_ms: int = 30_000
    # An unanswered AlterPartition is sent again after this long.
    alter_partition_retry_ms: int = 5_000
    # Bound on parked acks=-1 produces; beyond it a produce is refused before appending.
    max_delayed_produces: int = 10_000
    # Kafka >= 3.7 (KAFKA-15583) keeps the HW still while the ISR is below min ISR (7.4);
    # False gives the older behaviour, under which NOT_ENOUGH_REPLICAS_AFTER_APPEND occurs.
    stall_hw_under_min_isr: bool = True


# --- messages -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """A follower's fetch for this partition (7.2 step 2)."""

    replica_id: int
    fetch_offset: int
    current_leader_epoch: int = -1  # -1: no fencing check
    last_fetched_epoch: int = -1  # -1: no divergence check (Kafka's empty Optional)
    log_start_offset: int = -1
    max_bytes: int = 1_048_576
    replica_epoch: int = -1  # the follower's broker epoch (KIP-903); -1 unknown
    correlation_id: int = 0
    # A waiting fetch's later read (Kafka's readFromPurgatory): the follower's state
    # was updated when the fetch arrived and is not updated again.
    from_purgatory: bool = False


@dataclass(frozen=True, slots=True)
class FetchResponse:
    error: str
    correlation_id: int = 0
    fetch_offset: int = -1
    # Recorded before the read (7.2 leader step 2).
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes = b""
    diverging_epoch: EpochEndOffset | None = None


@dataclass(frozen=True, slots=True)
class OffsetsForLeaderEpochRequest:
    replica_id: int
    leader_epoch: int
    current_leader_epoch: int = -1
    correlation_id: int = 0


@dataclass(frozen=True, slots=True)
class OffsetsForLeaderEpochResponse:
    error: str
    leader_epoch: int = UNDEFINED_EPOCH
    end_offset: int = UNDEFINED_EPOCH_OFFSET
    correlation_id: int = 0


@dataclass(frozen=True, slots=True)
class ListOffsetsRequest:
    timestamp: int  # LATEST_TIMESTAMP, EARLIEST_TIMESTAMP, or a timestamp >= 0
    replica_id: int = NO_REPLICA  # >= 0: a follower (LATEST then means the LEO)
    current_leader_epoch: int = -1
    correlation_id: int = 0
    read_committed: bool = False  # a client's READ_COMMITTED: LATEST is the LSO


@dataclass(frozen=True, slots=True)
class ListOffsetsResponse:
    error: str
    offset: int = -1
    timestamp: int = -1
    leader_epoch: int = -1
    correlation_id: int = 0


@dataclass(frozen=True, slots=True)
class ConsumerFetchResponse:
    error: str
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes | FileSlice = b""  # a FileSlice when read with zero_copy
    last_stable_offset: int = -1
    # READ_COMMITTED: the aborted transactions overlapping the records (None otherwise)
    aborted: list[AbortedTxn] | None = None


@dataclass(frozen=True, slots=True)
class AlterPartitionResponse:
    """The controller's answer; on NONE it carries the partition as now registered."""

    error: str
    request_id: int
    leader_epoch: int = -1
    partition_epoch: int = -1
    isr: tuple[int, ...] = ()


FollowerRequest = FetchRequest | OffsetsForLeaderEpochRequest | ListOffsetsRequest
FollowerResponse = FetchResponse | OffsetsForLeaderEpochResponse | ListOffsetsResponse


@dataclass(frozen=True, slots=True)
class Outbound:
    """A follower request and the node it goes to (this partition's leader)."""

    destination: int
    request: FollowerRequest


# --- actions for the shell -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProduceCompleted:
    """Answer produce `request_id` (for acks=0 the shell sends nothing, 7.5)."""

    request_id: int
    error: str
    acks: int
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    # Why a refused batch was refused (the storage error's text); empty otherwise.
    error_message: str = field(default="", compare=False)
    # KIP-467: the refused records' indexes in the batch and why (INVALID_RECORD).
    record_errors: tuple[tuple[int, str], ...] = field(default=(), compare=False)


@dataclass(frozen=True, slots=True)
class SendAlterPartition:
    """Ask the controller to change the ISR (7.3); its answer is an AlterPartitionResponse."""

    request_id: int
    leader_id: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    broker_epochs: tuple[int, ...]  # per new_isr member, -1 unknown (KIP-903)


@dataclass(frozen=True, slots=True)
class HighWatermarkUpdated:
    """The HW moved: consumers long-polling this partition may have data."""

    high_watermark: int


@dataclass(frozen=True, slots=True)
class FlushLog:
    """flush.messages, deferred (Log.defer_message_flushes): fsync the log up to what
    it demands off the loop, then call `on_flushed` — answers (leader) or the next
    fetch (follower) wait for it."""


FLUSH_LOG = FlushLog()

Action = ProduceCompleted | SendAlterPartition | HighWatermarkUpdated | FlushLog


# --- internal state -------------------------------------------------------------------


class Role(enum.Enum):
    NONE = "none"  # no metadata yet, or no longer a replica
    LEADER = "leader"
    FOLLOWER = "follower"


@dataclass(slots=True)
class FollowerState:
    """What the leader knows about one follower (7.1)."""

    leo: int = -1  # unknown until its first fetch in this leadership
    log_start_offset: int = -1
    last_fetch_time_ms: int = NEVER
    last_fetch_leader_leo: int = -1
    last_caught_up_time_ms: int = NEVER
    broker_epoch: int = -1


@dataclass(slots=True)
class _DelayedProduce:
    request_id: int
    required_offset: int
    deadline_ms: int
    base_offset: int
    log_append_time: int
    durable_offset: int = 0  # deferred flush.messages: fsynced up to here first


@dataclass(slots=True)
class _PendingIsrChange:
    request: SendAlterPartition
    maximal_isr: frozenset[int]
    sent_ms: int
    rejected: bool = False  # answered with an error: wait for metadata, do not resend


def storage_error_name(exc: StorageError) -> str:
    return getattr(exc, "error_name", "UNKNOWN_SERVER_ERROR")
