"""The records of `__transaction_state`, byte for byte as Kafka writes them.

Key: INT16 version 0, then TransactionLogKey (TransactionalId). Value: INT16 version,
then TransactionLogValue; Kafka writes version 0 (non-flexible) for clients of
transaction version 1, as seglog does: ProducerId int64, ProducerEpoch int16,
TransactionTimeoutMs int32, TransactionStatus int8, TransactionPartitions (nullable
array of Topic string + PartitionIds int32 array), TransactionLastUpdateTimestampMs
int64, TransactionStartTimestampMs int64. A null value is a tombstone (an expired
transactional id). The schemas are kafka-python's protocol types. Version 1 (flexible,
KIP-890's transaction version 2) is refused with an error naming it."""

from __future__ import annotations

import enum
import io
import struct
from dataclasses import dataclass

from kafka.protocol.old.types import Array, Int8, Int16, Int32, Int64, Schema, String

from ..groups.offsets_records import partition_for as _offsets_partition_for

TRANSACTION_STATE_TOPIC = "__transaction_state"
KEY_VERSION = 0
VALUE_VERSION = 0

_STR = String("utf-8")
_VERSION = struct.Struct(">h")
_KEY = Schema(("transactional_id", _STR))
_VALUE = Schema(
    ("producer_id", Int64),
    ("producer_epoch", Int16),
    ("transaction_timeout_ms", Int32),
    ("transaction_status", Int8),
    ("transaction_partitions", Array(("topic", _STR), ("partition_ids", Array(Int32)))),
    ("transaction_last_update_timestamp_ms", Int64),
    ("transaction_start_timestamp_ms", Int64),
)


class TxnState(enum.IntEnum):
    """Kafka's TransactionState, with the ids its log stores."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """Kafka's name (DescribeTransactions, ListTransactions' state filter)."""
        return "".join(part.capitalize() for part in self.name.split("_"))


class TxnRecordError(ValueError):
    """A key or value of `__transaction_state` that is not one of Kafka's schemas."""


@dataclass(frozen=True)
class TxnLogValue:
    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]]
    last_update_ms: int
    start_ms: int


def partition_for(transactional_id: str, partitions: int) -> int:
    """The `__transaction_state` partition holding a transactional id: Kafka's
    abs(hashCode) % transaction.state.log.num.partitions, as for groups."""
    return _offsets_partition_for(transactional_id, partitions)


def encode_key(transactional_id: str) -> bytes:
    return _VERSION.pack(KEY_VERSION) + _KEY.encode([transactional_id])


def decode_key(data: bytes) -> str:
    if len(data) < 2:
        raise TxnRecordError(f"transaction log key of {len(data)} bytes has no version")
    (version,) = _VERSION.unpack_from(data)
    if version != KEY_VERSION:
        raise TxnRecordError(f"unknown transaction log key version {version}")
    buf = io.BytesIO(data[2:])
    try:
        (transactional_id,) = _KEY.decode(buf)
    except Exception as e:
        raise TxnRecordError(f"undecodable transaction log key: {e}") from e
    if transactional_id is None or buf.read():
        raise TxnRecordError("transaction log key without a transactional id or with extra bytes")
    return str(transactional_id)


def encode_value(value: TxnLogValue) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(value.partitions):
        by_topic.setdefault(topic, []).append(partition)
    return _VERSION.pack(VALUE_VERSION) + _VALUE.encode(
        [
            value.producer_id,
            value.producer_epoch,
            value.transaction_timeout_ms,
            int(value.state),
            list(by_topic.items()),
            value.last_update_ms,
            value.start_ms,
        ]
    )


def decode_value(data: bytes | None) -> TxnLogValue | None:
    """None for a tombstone."""
    if data is None:
        return None
    if len(data) < 2:
        raise TxnRecordError(f"transaction log value of {len(data)} bytes has no version")
    (version,) = _VERSION.unpack_from(data)
    if version != VALUE_VERSION:
        raise TxnRecordError(
            f"transaction log value version {version} is not served (seglog reads and "
            f"writes version {VALUE_VERSION}, Kafka's for transaction version 1)"
        )
    buf = io.BytesIO(data[2:])
    try:
        pid, epoch, timeout, status, topics, updated, started = _VALUE.decode(buf)
        state = TxnState(status)
    except Exception as e:
        raise TxnRecordError(f"undecodable transaction log value: {e}") from e
    if buf.read():
        raise TxnRecordError("transaction log value with bytes after its fields")
    partitions = frozenset((t, p) for t, ids in topics or () for p in ids)
    return TxnLogValue(pid, epoch, timeout, state, partitions, updated, started)
