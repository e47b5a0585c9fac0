"""One producer's state and the checks a batch must pass against it.

Mirrors Kafka's ProducerStateEntry, BatchMetadata and ProducerAppendInfo (whose
checkProducerEpoch / checkSequence / appendDataBatch / appendEndTxnMarker are
`check_producer_epoch`, `check_sequence`, `apply_data_batch` and `apply_marker` here):
pure functions of an entry, a batch header and its origin. The map of every producer of
a partition, its expiry and its snapshots are storage/producer_state.py's
ProducerStateManager.
"""

from __future__ import annotations

import enum
import logging
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal, NamedTuple, Protocol

from seglog.storage.errors import (
    InvalidProducerEpochError,
    OutOfOrderSequenceError,
    StorageError,
    UnknownProducerIdError,
)
from seglog.storage.producer_snapshot import SnapshotEntry

# The manager's logger: these checks log as part of it, as before they moved here.
log = logging.getLogger("seglog.storage.producer_state")

MAX_SEQUENCE = 2**31 - 1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
NUM_BATCHES_TO_RETAIN = 5  # = the client's max.in.flight.requests.per.connection limit


class InvalidTxnStateError(StorageError):
    """A non-transactional write from a producer with an open transaction."""

    error_name = "INVALID_TXN_STATE"


class TransactionCoordinatorFencedError(StorageError):
    """A COMMIT/ABORT marker from a coordinator epoch older than the one last seen."""

    error_name = "TRANSACTION_COORDINATOR_FENCED"


def inc_seq(seq: int, delta: int) -> int:
    """seq + delta, wrapping from 2^31-1 to 0."""
    if seq > MAX_SEQUENCE - delta:
        return delta - (MAX_SEQUENCE - seq) - 1
    return seq + delta


def dec_seq(seq: int, delta: int) -> int:
    """seq - delta, wrapping from 0 to 2^31-1."""
    if seq < delta:
        return MAX_SEQUENCE - (delta - seq) + 1
    return seq - delta


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == MAX_SEQUENCE)


class AppendOrigin(enum.Enum):
    """Who wrote the batch; decides how much is validated (Kafka's AppendOrigin)."""

    CLIENT = "CLIENT"  # full validation
    REPLICATION = "REPLICATION"  # none: the leader already validated (also log replay)
    COORDINATOR = "COORDINATOR"  # epochs only: coordinator writes carry no sequences


@dataclass(frozen=True, slots=True)
class ControlMarker:
    """The end-transaction marker carried by a COMMIT/ABORT control batch."""

    kind: Literal["COMMIT", "ABORT"]
    coordinator_epoch: int

    def __post_init__(self) -> None:
        if self.kind not in ("COMMIT", "ABORT"):
            raise ValueError(f"marker kind must be COMMIT or ABORT, got {self.kind!r}")


class BatchInfo(Protocol):
    """The batch-header fields producer state needs (satisfied by record_batch.BatchHeader)."""

    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def last_offset_delta(self) -> int: ...
    @property
    def max_timestamp(self) -> int: ...
    @property
    def producer_id(self) -> int: ...
    @property
    def producer_epoch(self) -> int: ...
    @property
    def base_sequence(self) -> int: ...
    @property
    def last_sequence(self) -> int: ...
    @property
    def is_transactional(self) -> bool: ...
    @property
    def is_control(self) -> bool: ...
    @property
    def has_producer_id(self) -> bool: ...


class BatchMetadata(NamedTuple):
    """What is remembered of one appended batch (a named tuple: immutable, and built
    on every producer append, so cheaper than a frozen dataclass)."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return dec_seq(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


def _bounded(items: Iterable[BatchMetadata] = ()) -> deque[BatchMetadata]:
    return deque(items, maxlen=NUM_BATCHES_TO_RETAIN)


@dataclass(slots=True)
class ProducerStateEntry:
    """State of one producer id. Treat instances handed out by the manager as read-only."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    # Oldest first; bounded so appending the 6th batch drops the oldest.
    batch_metadata: deque[BatchMetadata] = field(default_factory=_bounded)
    coordinator_epoch: int = -1
    last_timestamp: int = NO_TIMESTAMP
    current_txn_first_offset: int | None = None

    def __post_init__(self) -> None:
        items = list(self.batch_metadata)
        if len(items) > NUM_BATCHES_TO_RETAIN:
            raise ValueError(f"at most {NUM_BATCHES_TO_RETAIN} batches, got {len(items)}")
        self.batch_metadata = _bounded(items)

    @property
    def is_empty(self) -> bool:
        return not self.batch_metadata

    @property
    def first_seq(self) -> int:
        return self.batch_metadata[0].first_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batch_metadata[-1].last_seq if self.batch_metadata else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        return self.batch_metadata[0].first_offset if self.batch_metadata else -1

    @property
    def last_data_offset(self) -> int:
        return self.batch_metadata[-1].last_offset if self.batch_metadata else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batch_metadata[-1].offset_delta if self.batch_metadata else 0

    def maybe_update_producer_epoch(self, epoch: int) -> bool:
        # Sequences restart with a new epoch, so the old batches can no longer match.
        if epoch != self.producer_epoch:
            self.batch_metadata.clear()
            self.producer_epoch = epoch
            return True
        return False

    def add_batch(
        self, epoch: int, last_seq: int, last_offset: int, offset_delta: int, timestamp: int
    ) -> None:
        if epoch != self.producer_epoch:
            self.maybe_update_producer_epoch(epoch)
        self.batch_metadata.append(BatchMetadata(last_seq, last_offset, offset_delta, timestamp))
        self.last_timestamp = timestamp
        assert len(self.batch_metadata) <= NUM_BATCHES_TO_RETAIN

    def batch_with_sequence_range(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for meta in self.batch_metadata:
            # last_seq first: it is stored, first_seq is computed.
            if meta.last_seq == last_seq and meta.first_seq == first_seq:
                return meta
        return None

    def find_duplicate_batch(self, batch: BatchInfo) -> BatchMetadata | None:
        if batch.producer_epoch != self.producer_epoch:
            return None
        return self.batch_with_sequence_range(batch.base_sequence, batch.last_sequence)

    def copy(self) -> ProducerStateEntry:
        # Every append copies an entry: skip __init__ and __post_init__ (which would
        # build the deque twice); deque.copy keeps the bound.
        clone = object.__new__(ProducerStateEntry)
        clone.producer_id = self.producer_id
        clone.producer_epoch = self.producer_epoch
        window = self.batch_metadata
        if type(window) is deque and window.maxlen == NUM_BATCHES_TO_RETAIN:
            clone.batch_metadata = window.copy()
        else:
            clone.batch_metadata = _bounded(window)
        clone.coordinator_epoch = self.coordinator_epoch
        clone.last_timestamp = self.last_timestamp
        clone.current_txn_first_offset = self.current_txn_first_offset
        return clone

    def to_snapshot_entry(self) -> SnapshotEntry:
        # Only the newest batch is persisted (Kafka's format has room for one).
        return SnapshotEntry(
            producer_id=self.producer_id,
            epoch=self.producer_epoch,
            last_sequence=self.last_seq,
            last_offset=self.last_data_offset,
            offset_delta=self.last_offset_delta,
            timestamp=self.last_timestamp,
            coordinator_epoch=self.coordinator_epoch,
            current_txn_first_offset=(
                -1 if self.current_txn_first_offset is None else self.current_txn_first_offset
            ),
        )

    @classmethod
    def from_snapshot_entry(cls, e: SnapshotEntry) -> ProducerStateEntry:
        batches = (
            [BatchMetadata(e.last_sequence, e.last_offset, e.offset_delta, e.timestamp)]
            if e.last_offset >= 0
            else []
        )
        return cls(
            producer_id=e.producer_id,
            producer_epoch=e.epoch,
            batch_metadata=_bounded(batches),
            coordinator_epoch=e.coordinator_epoch,
            last_timestamp=e.timestamp,
            current_txn_first_offset=(
                e.current_txn_first_offset if e.current_txn_first_offset >= 0 else None
            ),
        )


@dataclass(frozen=True, slots=True)
class DuplicateBatch:
    """A client retry of a batch already in the log: append nothing, answer success with these."""

    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction closed by a marker (the Log needs it for `.txnindex` once it has one)."""

    producer_id: int
    first_offset: int
    last_offset: int  # offset of the marker
    is_aborted: bool


class ProducerAppendInfo:
    """Validated, not yet committed producer-state changes of one append.

    Accumulates across all batches (and producers) of the append, each batch validated
    against the state left by the previous one. Commit with ProducerStateManager.update.
    """

    __slots__ = (
        "origin",
        "_base_version",
        "_entries",
        "_started_txns",
        "_completed_txns",
        "_committed",
        "_transactional_pids",
    )

    def __init__(self, origin: AppendOrigin, base_version: int) -> None:
        self.origin = origin
        self._base_version = base_version
        self._entries: dict[int, ProducerStateEntry] = {}
        self._started_txns: list[tuple[int, int]] = []
        self._completed_txns: list[CompletedTxn] = []
        self._committed = False
        # Producers with a transactional batch or marker in this append: their pending
        # verification (storage/txn_verification.py) is spent once it is committed.
        # (None until one is seen: the produce hot path allocates nothing for it.)
        self._transactional_pids: set[int] | None = None

    @property
    def updated_entries(self) -> Mapping[int, ProducerStateEntry]:
        return MappingProxyType(self._entries)

    @property
    def started_txns(self) -> list[tuple[int, int]]:
        """(producer_id, first_offset) of every transaction this append opens."""
        return list(self._started_txns)

    @property
    def completed_txns(self) -> list[CompletedTxn]:
        return list(self._completed_txns)

    @property
    def is_empty(self) -> bool:
        return not self._entries

    def __repr__(self) -> str:
        return (
            f"ProducerAppendInfo(origin={self.origin.name}, entries={list(self._entries.values())},"
            f" completed_txns={self._completed_txns})"
        )


# ------------------------------------------------------------------ append checks


def _refuse(origin: AppendOrigin, error: type[StorageError], message: str, level: int) -> None:
    """Raise `error`, unless the batch is replicated: the leader accepted it, and a
    follower / replay must mirror the log, not judge it (then `message` is logged)."""
    if origin is AppendOrigin.REPLICATION:
        log.log(level, "%s", message)
    else:
        raise error(message)


def check_producer_epoch(
    entry: ProducerStateEntry, epoch: int, offset: int, origin: AppendOrigin
) -> None:
    if epoch >= entry.producer_epoch:
        return
    message = (
        f"epoch of producer {entry.producer_id} at offset {offset} is {epoch}, "
        f"which is smaller than the last seen epoch {entry.producer_epoch}"
    )
    _refuse(origin, InvalidProducerEpochError, message, logging.WARNING)


def check_sequence(entry: ProducerStateEntry, batch: BatchInfo) -> None:
    pid, first_seq = entry.producer_id, batch.base_sequence
    if entry.producer_epoch == NO_PRODUCER_EPOCH:
        # Unknown producer (new, expired, or removed with its batches). Kafka >= 2.5
        # accepts any sequence here (KIP-360); seglog refuses all but 0, as Kafka
        # 1.0-2.4 did, because a client that sees sequence n+1 acknowledged takes it
        # as proof that n was written (librdkafka's implicit ack) when n may have been
        # refused before any append. The client bumps its epoch and resends from 0.
        if first_seq != 0:
            raise UnknownProducerIdError(
                f"unknown producer id {pid} (epoch {batch.producer_epoch}) at offset "
                f"{batch.base_offset}: this partition has no state for it and its batch "
                f"starts at sequence {first_seq}, not 0, so an earlier batch may be missing"
            )
        return
    if batch.producer_epoch != entry.producer_epoch:
        if first_seq != 0:
            raise OutOfOrderSequenceError(
                f"invalid sequence number for new epoch {batch.producer_epoch} of producer "
                f"{pid} at offset {batch.base_offset}: received sequence {first_seq}, "
                f"expected sequence 0 (current epoch {entry.producer_epoch})"
            )
        return
    last_seq = entry.last_seq
    if not in_sequence(last_seq, first_seq):
        expected = 0 if last_seq == NO_SEQUENCE else inc_seq(last_seq, 1)
        raise OutOfOrderSequenceError(
            f"out of order sequence number for producer {pid} at offset "
            f"{batch.base_offset}: received sequence {first_seq}, expected sequence "
            f"{expected} (last appended sequence {last_seq})"
        )


def apply_data_batch(entry: ProducerStateEntry, batch: BatchInfo, origin: AppendOrigin) -> bool:
    """Validate and apply a data batch to `entry`; True if it opens a transaction."""
    if batch.producer_epoch < entry.producer_epoch:
        check_producer_epoch(entry, batch.producer_epoch, batch.base_offset, origin)
    if origin is AppendOrigin.CLIENT:
        check_sequence(entry, batch)
    if entry.current_txn_first_offset is not None and not batch.is_transactional:
        raise InvalidTxnStateError(
            f"expected a transactional write from producer {entry.producer_id} at offset "
            f"{batch.base_offset}: its transaction opened at offset "
            f"{entry.current_txn_first_offset} is still open"
        )
    entry.add_batch(
        batch.producer_epoch,
        batch.last_sequence,
        batch.last_offset,
        batch.last_offset - batch.base_offset,
        batch.max_timestamp,
    )
    if batch.is_transactional and entry.current_txn_first_offset is None:
        entry.current_txn_first_offset = batch.base_offset
        return True
    return False


def apply_marker(
    entry: ProducerStateEntry,
    batch: BatchInfo,
    marker: ControlMarker,
    origin: AppendOrigin,
) -> CompletedTxn | None:
    check_producer_epoch(entry, batch.producer_epoch, batch.base_offset, origin)
    if entry.coordinator_epoch > marker.coordinator_epoch:
        message = (
            f"invalid coordinator epoch for producer {entry.producer_id} at offset "
            f"{batch.base_offset}: {marker.coordinator_epoch} (zombie), "
            f"{entry.coordinator_epoch} (current)"
        )
        _refuse(origin, TransactionCoordinatorFencedError, message, logging.INFO)
    completed = None
    if entry.current_txn_first_offset is not None:
        # Markers of empty transactions do not affect the LSO or the txn index.
        completed = CompletedTxn(
            entry.producer_id,
            entry.current_txn_first_offset,
            batch.base_offset,
            marker.kind == "ABORT",
        )
    # Markers carry no sequence: the batch window survives unless the epoch changed.
    entry.maybe_update_producer_epoch(batch.producer_epoch)
    entry.coordinator_epoch = marker.coordinator_epoch
    entry.current_txn_first_offset = None
    entry.last_timestamp = batch.max_timestamp
    return completed
