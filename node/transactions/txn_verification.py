"""A partition leader's side of KIP-890's verification, without I/O: Kafka's
AddPartitionsToTxnManager (one AddPartitionsToTxn VerifyOnly request in flight per
coordinator node, the questions that arrive meanwhile batched into the next one, one
question per transactional id per node) and the error mapping of
ReplicaManager.handleProduceAppend. Bounded: at most `max_pending` questions wait or
fly at once, and each has a deadline after which it is answered NETWORK_EXCEPTION
(Kafka's answer to a request that timed out); a late answer is dropped. Time is an
input; the shell (verification_sender.py) sends the batches and calls back.

docs/transactions.md, "Verification of transactional appends"."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from seglog.storage.record_batch import BatchHeader, iter_batches

TopicPartition = tuple[str, int]
NONE = "NONE"
NETWORK_EXCEPTION = "NETWORK_EXCEPTION"
COORDINATOR_NOT_AVAILABLE = "COORDINATOR_NOT_AVAILABLE"
INVALID_PRODUCER_EPOCH = "INVALID_PRODUCER_EPOCH"
INVALID_TXN_STATE = "INVALID_TXN_STATE"
NOT_ENOUGH_REPLICAS = "NOT_ENOUGH_REPLICAS"
INVALID_PRODUCER_ID_MAPPING = "INVALID_PRODUCER_ID_MAPPING"
TRANSACTION_ABORTABLE = "TRANSACTION_ABORTABLE"


class TransactionSupportedOperation(Enum):
    """What the asking request's version lets its client hear (Kafka's
    AddPartitionsToTxnManager.TransactionSupportedOperation). ADD_PARTITION, KIP-890
    part 2's (Produce v12, TxnOffsetCommit v5), is not served."""

    DEFAULT_ERROR = "DEFAULT_ERROR"  # knows no TRANSACTION_ABORTABLE: INVALID_TXN_STATE
    GENERIC_ERROR_SUPPORTED = "GENERIC_ERROR_SUPPORTED"  # hears TRANSACTION_ABORTABLE


DEFAULT_ERROR = TransactionSupportedOperation.DEFAULT_ERROR
GENERIC_ERROR_SUPPORTED = TransactionSupportedOperation.GENERIC_ERROR_SUPPORTED


def produce_supported_operation(version: int) -> TransactionSupportedOperation:
    """Kafka's produceRequestVersionToTransactionSupportedOperation: Produce v11 adds
    TRANSACTION_ABORTABLE (KIP-890)."""
    return GENERIC_ERROR_SUPPORTED if version > 10 else DEFAULT_ERROR


def txn_offset_commit_supported_operation(version: int) -> TransactionSupportedOperation:
    """Kafka's txnOffsetCommitRequestVersionToTransactionSupportedOperation:
    TxnOffsetCommit v4 adds TRANSACTION_ABORTABLE (KIP-890)."""
    return GENERIC_ERROR_SUPPORTED if version > 3 else DEFAULT_ERROR


# Coordinator errors a client of Produce v3-v11 would not retry as it should: Kafka
# answers them NOT_ENOUGH_REPLICAS (retriable, and it triggers no metadata refresh).
# CONCURRENT_TRANSACTIONS too, for transaction version 1 (the only one served here).
_RETRIABLE = frozenset(
    {
        NETWORK_EXCEPTION,
        "COORDINATOR_LOAD_IN_PROGRESS",
        COORDINATOR_NOT_AVAILABLE,
        "NOT_COORDINATOR",
        "CONCURRENT_TRANSACTIONS",
    }
)


def produce_error(error: str) -> tuple[str, str | None]:
    """A partition's failed verification as its Produce answer: (error, message).
    TRANSACTION_ABORTABLE (Produce v11+) has no message of its own in Kafka
    (ReplicaManager.handleProduceAppend: no custom exception, so a null ErrorMessage)."""
    if error == INVALID_TXN_STATE:
        return error, "Partition was not added to the transaction"
    if error == TRANSACTION_ABORTABLE:
        return error, None
    if error in _RETRIABLE:
        return NOT_ENOUGH_REPLICAS, (
            "Unable to verify the partition has been added to the transaction. "
            f"Underlying error: {error}"
        )
    return error, f"Verification of the partition in its transaction failed: {error}"


# TxnOffsetCommit's answer to a failed verification of the group's `__consumer_offsets`
# partition (Kafka's GroupMetadataManager.maybeConvertOffsetCommitError, the same as for
# a failed offsets append): NETWORK_EXCEPTION, which older clients would not retry as
# they should, becomes COORDINATOR_LOAD_IN_PROGRESS (retried without a new lookup).
_OFFSET_COMMIT_ERRORS = {
    NETWORK_EXCEPTION: "COORDINATOR_LOAD_IN_PROGRESS",
    "UNKNOWN_TOPIC_OR_PARTITION": COORDINATOR_NOT_AVAILABLE,
    NOT_ENOUGH_REPLICAS: COORDINATOR_NOT_AVAILABLE,
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND": COORDINATOR_NOT_AVAILABLE,
    "REQUEST_TIMED_OUT": COORDINATOR_NOT_AVAILABLE,
    "NOT_LEADER_OR_FOLLOWER": "NOT_COORDINATOR",
    "KAFKA_STORAGE_ERROR": "NOT_COORDINATOR",
    "MESSAGE_TOO_LARGE": "INVALID_COMMIT_OFFSET_SIZE",
    "RECORD_LIST_TOO_LARGE": "INVALID_COMMIT_OFFSET_SIZE",
    "INVALID_FETCH_SIZE": "INVALID_COMMIT_OFFSET_SIZE",
}


def txn_offset_commit_error(error: str) -> str:
    """A failed verification as TxnOffsetCommit's answer for every partition of the
    commit. Not in the transaction (AddOffsetsToTxn never sent) is TRANSACTION_ABORTABLE
    from v4, INVALID_TXN_STATE before (coordinator_error_at_leader: v0-3 are Kafka's
    DEFAULT_ERROR versions); fenced is INVALID_PRODUCER_EPOCH; the coordinator's other errors
    (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS,
    INVALID_PRODUCER_ID_MAPPING, ...) are answered as they are."""
    return _OFFSET_COMMIT_ERRORS.get(error, error)


def coordinator_error_at_leader(
    error: str, operation: TransactionSupportedOperation = DEFAULT_ERROR
) -> str:
    """A coordinator's per-partition answer as the leader reads it (Kafka's
    AddPartitionsToTxnManager): producers expect INVALID_PRODUCER_EPOCH, and a client of
    a DEFAULT_ERROR version (Produce before v11, TxnOffsetCommit before v4) knows
    TRANSACTION_ABORTABLE as INVALID_TXN_STATE."""
    if error == "PRODUCER_FENCED":
        return INVALID_PRODUCER_EPOCH
    if error == TRANSACTION_ABORTABLE and operation is DEFAULT_ERROR:
        return INVALID_TXN_STATE
    return error


@dataclass(frozen=True)
class TxnBatches:
    """The transactional batches of one Produce: their producer, and per partition the
    base sequence of its first transactional batch."""

    producer_id: int
    producer_epoch: int
    first_sequences: dict[TopicPartition, int]


class MixedProducers(ValueError):
    """Transactional batches of more than one producer in one Produce."""


def transactional_batches(items: Iterable[tuple[TopicPartition, bytes]]) -> TxnBatches | None:
    """The transactional batches of a Produce's partitions, or None when there are none.
    Malformed bytes are left to the append to refuse. Raises MixedProducers when the
    batches name several producers (Kafka: INVALID_PRODUCER_ID_MAPPING)."""
    producers: set[tuple[int, int]] = set()
    firsts: dict[TopicPartition, int] = {}
    for tp, data in items:
        for h in _headers(data):
            if h.has_producer_id and h.is_transactional and not h.is_control:
                producers.add((h.producer_id, h.producer_epoch))
                firsts.setdefault(tp, h.base_sequence)
    if not firsts:
        return None
    if len(producers) > 1:
        raise MixedProducers(
            f"transactional records contained more than one producer id: {sorted(producers)}"
        )
    ((pid, epoch),) = producers
    return TxnBatches(pid, epoch, firsts)


def _headers(data: bytes) -> list[BatchHeader]:
    """The batch headers, unchecked (the append checks the CRCs); malformed bytes end
    the list, for the append to refuse."""
    out: list[BatchHeader] = []
    try:
        for _pos, h in iter_batches(data, validate=False):
            out.append(h)
    except Exception:  # noqa: BLE001 - malformed: the append refuses it
        return out
    return out


@dataclass(frozen=True)
class Question:
    """One Produce's (or TxnOffsetCommit's) question to a transactional id's
    coordinator. Its `operation` is its own: Kafka keeps one per node's batch, the
    first question's, so a v10 Produce batched behind a v11 one would hear an error
    its client does not know."""

    token: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]
    deadline_ms: int
    operation: TransactionSupportedOperation = DEFAULT_ERROR


@dataclass(frozen=True)
class Answer:
    """The unverified partitions of a question and why, as the leader reads the
    coordinator (empty: every partition is in the transaction)."""

    token: int
    errors: dict[TopicPartition, str]


@dataclass(frozen=True)
class Send:
    """One AddPartitionsToTxn VerifyOnly request to a coordinator node."""

    node: int
    batch_id: int
    questions: tuple[Question, ...]


@dataclass
class _Node:
    queued: dict[str, Question] = field(default_factory=dict)
    in_flight: int | None = None  # the batch id sent and not answered yet
    flying: dict[str, Question] = field(default_factory=dict)


class TxnVerifications:
    def __init__(self, max_pending: int) -> None:
        if max_pending < 1:
            raise ValueError(f"max_pending must be at least 1, got {max_pending}")
        self.max_pending = max_pending
        self._nodes: dict[int, _Node] = {}
        self._batch_ids = itertools.count(1)

    @property
    def pending(self) -> int:
        return sum(len(n.queued) + len(n.flying) for n in self._nodes.values())

    def verify(self, q: Question, coordinator: int) -> list[Answer]:
        """Queue `q` for the coordinator node (-1: none known). Answers now: `q` itself
        when it cannot be asked, or an older question of the same transactional id it
        replaces (Kafka: NETWORK_EXCEPTION at the same epoch, INVALID_PRODUCER_EPOCH
        to the lower epoch)."""
        if coordinator < 0:
            return [_all(q, COORDINATOR_NOT_AVAILABLE)]
        if self.pending >= self.max_pending:
            return [_all(q, COORDINATOR_NOT_AVAILABLE)]  # back-pressure: retriable
        node = self._nodes.setdefault(coordinator, _Node())
        out: list[Answer] = []
        old = node.queued.get(q.transactional_id)
        if old is not None:
            if old.producer_epoch > q.producer_epoch:
                return [_all(q, INVALID_PRODUCER_EPOCH)]
            error = INVALID_PRODUCER_EPOCH if old.producer_epoch < q.producer_epoch else None
            out.append(_all(old, error or NETWORK_EXCEPTION))
        node.queued[q.transactional_id] = q
        return out

    def ready(self) -> list[Send]:
        """The requests to send now: every node with questions and none in flight."""
        out = []
        for node_id, node in self._nodes.items():
            if node.in_flight is None and node.queued:
                batch_id = next(self._batch_ids)
                node.in_flight, node.flying, node.queued = batch_id, node.queued, {}
                out.append(Send(node_id, batch_id, tuple(node.flying.values())))
        return out

    def on_response(
        self,
        coordinator: int,
        batch_id: int,
        results: Mapping[str, Mapping[TopicPartition, str]] | None,
        error: str = NONE,
    ) -> list[Answer]:
        """A batch's outcome: per transactional id the coordinator's per-partition
        errors, or `error` for all (the request failed: NETWORK_EXCEPTION, or the
        answer's top-level error)."""
        node = self._nodes.get(coordinator)
        if node is None or node.in_flight != batch_id:
            return []
        flying, node.flying, node.in_flight = node.flying, {}, None
        out = []
        for q in flying.values():
            if error != NONE or results is None:
                out.append(_all(q, error if error != NONE else NETWORK_EXCEPTION))
                continue
            got = results.get(q.transactional_id)
            if got is None:  # the coordinator left it out: not verified
                out.append(_all(q, NETWORK_EXCEPTION))
                continue
            errors = {
                tp: coordinator_error_at_leader(got.get(tp, NETWORK_EXCEPTION), q.operation)
                for tp in q.partitions
            }
            out.append(Answer(q.token, {tp: e for tp, e in errors.items() if e != NONE}))
        if not node.queued:
            del self._nodes[coordinator]
        return out

    def expire(self, now_ms: int) -> list[Answer]:
        """Questions past their deadline, answered NETWORK_EXCEPTION (the coordinator
        could not be asked in time); an answer arriving later for them is dropped."""
        out = []
        for node in self._nodes.values():
            for waiting in (node.queued, node.flying):
                for tid, q in list(waiting.items()):
                    if now_ms >= q.deadline_ms:
                        del waiting[tid]
                        out.append(_all(q, NETWORK_EXCEPTION))
        return out

    def next_deadline(self) -> int | None:
        deadlines = [
            q.deadline_ms
            for n in self._nodes.values()
            for waiting in (n.queued, n.flying)
            for q in waiting.values()
        ]
        return min(deadlines) if deadlines else None


def _all(q: Question, error: str) -> Answer:
    return Answer(q.token, dict.fromkeys(q.partitions, error))
