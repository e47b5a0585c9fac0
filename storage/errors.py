"""Storage errors, each carrying the Kafka error name a node reports for it."""

from __future__ import annotations


class StorageError(Exception):
    """Base of every error the storage layer raises on purpose."""

    error_name = "UNKNOWN_SERVER_ERROR"


class CorruptRecordError(StorageError):
    """A batch failed its size, magic or CRC check."""

    error_name = "CORRUPT_MESSAGE"


class InvalidRecordError(StorageError):
    """A batch is well-formed but breaks a rule a leader enforces (e.g. baseOffset != 0).
    `record_errors` (KIP-467): the offending records' indexes in their batch and why,
    when the rule is a record's; a Produce answer (v8+) lists them."""

    def __init__(self, message: str, record_errors: tuple[tuple[int, str], ...] = ()) -> None:
        super().__init__(message)
        self.record_errors = record_errors

    error_name = "INVALID_RECORD"


class UnsupportedMagicError(CorruptRecordError):
    """A batch whose magic byte is not 2."""


class MessageTooLargeError(StorageError):
    error_name = "MESSAGE_TOO_LARGE"


class RecordListTooLargeError(StorageError):
    error_name = "RECORD_LIST_TOO_LARGE"


class OffsetOutOfRangeError(StorageError):
    error_name = "OFFSET_OUT_OF_RANGE"


class UnexpectedAppendOffsetError(StorageError):
    """A follower append whose first offset is below the log end offset."""

    error_name = "UNKNOWN_SERVER_ERROR"


class OutOfOrderSequenceError(StorageError):
    error_name = "OUT_OF_ORDER_SEQUENCE_NUMBER"


class UnknownProducerIdError(StorageError):
    """A client batch from a producer the partition has no state for, not starting at
    sequence 0: an earlier batch of it may be missing (docs/replication-rules.md)."""

    error_name = "UNKNOWN_PRODUCER_ID"


class InvalidProducerEpochError(StorageError):
    error_name = "INVALID_PRODUCER_EPOCH"


class InvalidTimestampError(StorageError):
    error_name = "INVALID_TIMESTAMP"


class InvalidConfigError(StorageError, ValueError):
    """A config value that is unknown, malformed or out of range; the message names the key."""

    error_name = "INVALID_CONFIG"


class CorruptIndexError(StorageError):
    """An index file that fails a sanity check; indexes are rebuilt from the log."""

    error_name = "CORRUPT_MESSAGE"


class CorruptSnapshotError(StorageError):
    """A producer-state snapshot with a bad version, length or CRC."""

    error_name = "CORRUPT_MESSAGE"


class CheckpointError(StorageError):
    """A checkpoint file that does not parse (Kafka then treats the log dir as failed)."""

    error_name = "KAFKA_STORAGE_ERROR"


class KafkaStorageError(StorageError):
    """An I/O failure: the log directory it happened in goes offline (Kafka's
    LogDirFailureChannel), except for a full disk (LogDirFullError)."""

    error_name = "KAFKA_STORAGE_ERROR"


class LogDirFullError(KafkaStorageError):
    """A write found no space left on the device (ENOSPC) and was undone: nothing of
    it stays in the .log, its indexes or the epoch cache, so the log directory stays
    online and the write can succeed once space returns."""
