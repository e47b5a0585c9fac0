"""TxnOffsetCommit at the group coordinator with KIP-890 part 1's verification (Kafka
3.6+'s GroupCoordinator.handleTxnCommitOffsets): before the offsets are appended to the
group's `__consumer_offsets` partition as a batch of the producer's transaction, the
transaction coordinator is asked whether that partition is in the producer's ongoing
transaction (AddOffsetsToTxn put it there), through the same sender and with the same
guard as a Produce's verification (verification_sender.py). Both front ends — the
Kafka listener (node/kafka/txn_apis.py) and the gRPC Transactions service
(grpc_servicer.py) — call `txn_offset_commit`, which never blocks: it hands back a
Future of the coordinator's answer.

docs/transactions.md, "Verification of transactional appends"."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Protocol

from ..event_log import EventLogger
from ..groups.group_errors import NONE, UNKNOWN_SERVER_ERROR
from ..groups.group_messages import CommitPartition, ErrorResult, Result
from ..groups.offsets_records import OFFSETS_TOPIC
from ..groups.offsets_topic import GroupCoordinatorRuntime
from ..replica_manager import ReplicaManager
from ..security.group_acls import done_future
from .txn_verification import DEFAULT_ERROR, TransactionSupportedOperation
from .verification_sender import (
    REQUEST_TIMEOUT_MS,
    OffsetsVerified,
    VerificationSender,
    start_offsets_verification,
)

_log = EventLogger("txn_verification")


class OffsetsNode(Protocol):
    """What a TxnOffsetCommit needs of the node (NodeServices has it)."""

    @property
    def groups(self) -> GroupCoordinatorRuntime: ...
    @property
    def replica_manager(self) -> ReplicaManager: ...
    @property
    def txn_verification(self) -> VerificationSender | None: ...


def txn_offset_commit(
    node: OffsetsNode,
    transactional_id: str,
    group_id: str,
    producer: tuple[int, int],
    generation: int,
    member_id: str,
    instance: str | None,
    partitions: list[CommitPartition],
    operation: TransactionSupportedOperation = DEFAULT_ERROR,
) -> Future[Result]:
    """The group's answer to a TxnOffsetCommit, verified first: the group's status as
    Kafka checks it before verifying (not the coordinator, loading: that error for
    all), then the verification (a refusal answers every partition with
    txn_offset_commit_error's mapping; nothing is appended), then the commit with the
    verification's guard. `transaction.partition.verification.enable=false` (no
    sender) commits at once, as before. `operation`: what the request's version lets
    its client hear (the gRPC service's clients: DEFAULT_ERROR)."""
    groups = node.groups
    partition, error = groups.offsets_partition(group_id)
    if error != NONE:
        return done_future(ErrorResult(error))
    answer: Future[Result] = Future()

    def verified(outcome: OffsetsVerified) -> None:
        error, guard = outcome
        if error != NONE:
            answer.set_result(ErrorResult(error))
            return
        pid, epoch = producer
        try:
            commit = groups.txn_offset_commit(
                group_id, (pid, epoch), generation, member_id, instance, partitions, guard
            )
        except Exception:  # noqa: BLE001 - a bug: this request fails, not the sender's thread
            _log.error("txn_offset_commit_failed", exc=True, group=group_id)
            answer.set_result(ErrorResult(UNKNOWN_SERVER_ERROR))
            return
        commit.add_done_callback(lambda f: answer.set_result(_result(f)))

    now = start_offsets_verification(
        node.txn_verification,
        node.replica_manager,
        transactional_id,
        producer[0],
        producer[1],
        (OFFSETS_TOPIC, partition),
        REQUEST_TIMEOUT_MS,
        verified,
        operation,
    )
    if now is not None:
        verified(now)
    return answer


def _result(f: Future[Result]) -> Result:
    try:
        return f.result()
    except Exception:  # noqa: BLE001 - the coordinator's Future failed: answered, not lost
        return ErrorResult(UNKNOWN_SERVER_ERROR)
