"""The gRPC Transactions service (proto/transactions.proto) and SegLog's transactional
InitProducerId: thin translations to the node's one transaction coordinator
(txn_runtime.py, the same the Kafka listener's node/kafka/txn_apis.py calls), the
group coordinator (TxnOffsetCommit) and the partition leaders (DescribeProducers,
WriteTxnMarkers). ACLs as Kafka's: WRITE on the transactional id for a
transaction's requests, DESCRIBE on it to describe or list, READ on the group and
topics for TxnOffsetCommit, READ on the topic for DescribeProducers, CLUSTER_ACTION
for WriteTxnMarkers."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

import grpc

from seglog.proto import client_pb2 as pb
from seglog.proto import transactions_pb2 as tpb
from seglog.proto import transactions_pb2_grpc

from ..groups.listener_results import (
    ANSWER_TIMEOUT_S,
    commit_errors,
    commit_partitions,
    wait_answer,
)
from ..groups.offsets_records import OFFSETS_TOPIC
from ..grpc_errors import code
from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType
from ..security.grpc_auth import grpc_principal
from .offsets_verification import txn_offset_commit as verified_txn_offset_commit
from .partition_producers import MARKER_TIMEOUT_MS, active_producers, marker_appends
from .txn_runtime import wait_txn_answer
from .txn_shard import TxnResult
from .verification_sender import REQUEST_TIMEOUT_MS

if TYPE_CHECKING:
    from ..node_services import NodeServices

TXN_ID = ResourceType.TRANSACTIONAL_ID
DENIED = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
R = TypeVar("R")
# A TxnOffsetCommit's verification (at most the sender's 30 s) and then its append.
TXN_OFFSET_COMMIT_TIMEOUT_S = ANSWER_TIMEOUT_S + REQUEST_TIMEOUT_MS / 1000


def _allowed(
    node: NodeServices, context: grpc.ServicerContext, op: AclOperation, rtype: ResourceType,
    name: str,
) -> bool:  # fmt: skip
    if node.authorizer is None:
        return True
    principal, host = grpc_principal(context)
    return node.authorizer.authorize(principal, host, op, rtype, name)


def _message(error: str, transactional_id: str) -> str:
    return "" if error == "NONE" else f"{error} for transactional id {transactional_id!r}"


def _error_response(error: str, transactional_id: str) -> tpb.TxnErrorResponse:
    """The answer of a call whose only outcome is its error (AddOffsetsToTxn, EndTxn)."""
    return tpb.TxnErrorResponse(
        error_code=code(error), error_message=_message(error, transactional_id)
    )


def init_transactional_producer(
    node: NodeServices, request: pb.InitProducerIdRequest, context: grpc.ServicerContext
) -> pb.InitProducerIdResponse:
    """InitProducerId with a transactional id, at its coordinator: the epoch is bumped
    (older producers with the id are fenced); an open transaction of the id is aborted
    first and the answer is CONCURRENT_TRANSACTIONS, which the client retries."""
    tid = request.transactional_id
    if not _allowed(node, context, AclOperation.WRITE, TXN_ID, tid):
        r = TxnResult(DENIED)
    else:
        r = wait_txn_answer(
            node.transactions.request(
                tid, "init_producer_id", request.transaction_timeout_ms,
                request.producer_id, request.producer_epoch,
            )
        )  # fmt: skip
    return pb.InitProducerIdResponse(
        error_code=code(r.error),
        error_message=_message(r.error, tid),
        producer_id=r.producer_id,
        producer_epoch=r.producer_epoch,
    )


def _pairs(topics: Iterable[tpb.TxnTopic]) -> list[tuple[str, int]]:
    return [(t.name, p) for t in topics for p in t.partitions]


def _results(errors: Iterable[tuple[tuple[str, int], str]]) -> list[tpb.TxnPartitionError]:
    return [
        tpb.TxnPartitionError(
            topic=t, partition=p, error_code=code(e),
            error_message="" if e == "NONE" else f"{e} for {t}-{p}",
        )
        for (t, p), e in errors
    ]  # fmt: skip


class TransactionsServicer(transactions_pb2_grpc.TransactionsServicer):
    def __init__(self, node: NodeServices, slots: threading.BoundedSemaphore) -> None:
        self.node = node
        # Shared with the group calls (node/groups/grpc_servicer.py): the calls that
        # wait for a coordinator's replicated write, bounded together, so gRPC workers
        # remain for the follower fetches that replication needs.
        self._slots = slots

    def _wait(self, context: grpc.ServicerContext, wait: Callable[[], R]) -> R:
        if not self._slots.acquire(blocking=False):
            context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                "too many coordinator calls already wait on this node; retry",
            )
        try:
            return wait()
        finally:
            self._slots.release()

    def _txn_call(
        self, context: grpc.ServicerContext, tid: str, method: str, *args: object
    ) -> TxnResult:
        if not _allowed(self.node, context, AclOperation.WRITE, TXN_ID, tid):
            return TxnResult(DENIED)
        return self._wait(
            context, lambda: wait_txn_answer(self.node.transactions.request(tid, method, *args))
        )

    # --- at the transaction coordinator ---------------------------------------------

    def AddPartitionsToTxn(
        self, request: tpb.AddPartitionsToTxnRequest, context: grpc.ServicerContext
    ) -> tpb.AddPartitionsToTxnResponse:
        wanted = _pairs(request.topics)
        denied = {
            tp for tp in wanted
            if not _allowed(self.node, context, AclOperation.WRITE, ResourceType.TOPIC, tp[0])
        }  # fmt: skip
        if denied:  # Kafka: the others are not attempted
            errors = [
                (tp, "TOPIC_AUTHORIZATION_FAILED" if tp in denied else "OPERATION_NOT_ATTEMPTED")
                for tp in wanted
            ]
        else:
            r = self._txn_call(
                context, request.transactional_id, "add_partitions",
                request.producer_id, request.producer_epoch, wanted,
            )  # fmt: skip
            errors = [(tp, r.error) for tp in wanted]
        return tpb.AddPartitionsToTxnResponse(results=_results(errors))

    def AddOffsetsToTxn(
        self, request: tpb.AddOffsetsToTxnRequest, context: grpc.ServicerContext
    ) -> tpb.TxnErrorResponse:
        if not _allowed(
            self.node, context, AclOperation.READ, ResourceType.GROUP, request.group_id
        ):
            r = TxnResult("GROUP_AUTHORIZATION_FAILED")
        else:
            r = self._txn_call(
                context, request.transactional_id, "add_offsets",
                request.producer_id, request.producer_epoch, request.group_id,
            )  # fmt: skip
        return _error_response(r.error, request.transactional_id)

    def EndTxn(
        self, request: tpb.EndTxnRequest, context: grpc.ServicerContext
    ) -> tpb.TxnErrorResponse:
        r = self._txn_call(
            context, request.transactional_id, "end_txn",
            request.producer_id, request.producer_epoch, request.committed,
        )  # fmt: skip
        return _error_response(r.error, request.transactional_id)

    def DescribeTransactions(
        self, request: tpb.DescribeTransactionsRequest, context: grpc.ServicerContext
    ) -> tpb.DescribeTransactionsResponse:
        response = tpb.DescribeTransactionsResponse()
        for tid in request.transactional_ids:
            state = response.transaction_states.add(
                transactional_id=tid, coordinator_id=self.node.node_id, transaction_start_time_ms=-1
            )
            if not _allowed(self.node, context, AclOperation.DESCRIBE, TXN_ID, tid):
                error, meta = DENIED, None
            else:
                error, meta = self.node.transactions.describe(tid)
            state.error_code, state.error_message = code(error), _message(error, tid)
            if meta is None:
                continue
            by_topic: dict[str, list[int]] = {}
            for topic, partition in sorted(meta.partitions):
                by_topic.setdefault(topic, []).append(partition)
            state.transaction_state = meta.state.kafka_name
            state.transaction_timeout_ms = meta.timeout_ms
            state.transaction_start_time_ms = meta.start_ms
            state.producer_id, state.producer_epoch = meta.producer_id, meta.producer_epoch
            for t, ps in by_topic.items():
                state.topics.add(name=t, partitions=ps)
        return response

    def ListTransactions(
        self, request: tpb.ListTransactionsRequest, context: grpc.ServicerContext
    ) -> tpb.ListTransactionsResponse:
        error, found, unknown = self.node.transactions.list_transactions(
            set(request.state_filters), set(request.producer_id_filters)
        )
        return tpb.ListTransactionsResponse(
            error_code=code(error),
            unknown_state_filters=unknown,
            transaction_states=[
                tpb.ListedTransaction(
                    transactional_id=m.transactional_id,
                    producer_id=m.producer_id,
                    transaction_state=m.state.kafka_name,
                )
                for m in found
                if _allowed(self.node, context, AclOperation.DESCRIBE, TXN_ID, m.transactional_id)
            ],
        )

    # --- at the group coordinator -----------------------------------------------------

    def TxnOffsetCommit(
        self, request: tpb.TxnOffsetCommitRequest, context: grpc.ServicerContext
    ) -> tpb.TxnOffsetCommitResponse:
        partitions = commit_partitions(request.topics)
        keys = [(p.topic, p.partition) for p in partitions]
        errors: dict[tuple[str, int], str]
        if not _allowed(self.node, context, AclOperation.WRITE, TXN_ID, request.transactional_id):
            errors = dict.fromkeys(keys, DENIED)
        elif not _allowed(
            self.node, context, AclOperation.READ, ResourceType.GROUP, request.group_id
        ):
            errors = dict.fromkeys(keys, "GROUP_AUTHORIZATION_FAILED")
        else:
            denied = {
                tp for tp in keys
                if not _allowed(self.node, context, AclOperation.READ, ResourceType.TOPIC, tp[0])
            }  # fmt: skip
            errors = dict.fromkeys(denied, "TOPIC_AUTHORIZATION_FAILED")
            rest = [p for p in partitions if (p.topic, p.partition) not in denied]
            if rest:
                # KIP-890: verified with the transaction coordinator first (this
                # service's thread waits, as for its Produce).
                future = verified_txn_offset_commit(
                    self.node,
                    request.transactional_id,
                    request.group_id,
                    (request.producer_id, request.producer_epoch),
                    request.generation_id,
                    request.member_id,
                    request.group_instance_id or None,
                    rest,
                )
                got = self._wait(context, lambda: wait_answer(future, TXN_OFFSET_COMMIT_TIMEOUT_S))
                errors.update(commit_errors(got, rest))
        return tpb.TxnOffsetCommitResponse(
            results=_results((tp, errors.get(tp, "NONE")) for tp in keys)
        )

    # --- at a partition leader --------------------------------------------------------

    def DescribeProducers(
        self, request: tpb.DescribeProducersRequest, context: grpc.ServicerContext
    ) -> tpb.DescribeProducersResponse:
        response = tpb.DescribeProducersResponse()
        rm = self.node.replica_manager
        for topic, partition in _pairs(request.topics):
            entry = response.partitions.add(topic=topic, partition=partition)
            if not _allowed(self.node, context, AclOperation.READ, ResourceType.TOPIC, topic):
                error, found = "TOPIC_AUTHORIZATION_FAILED", []
            else:
                error, found = active_producers(rm, topic, partition)
            entry.error_code = code(error)
            if error != "NONE":
                entry.error_message = f"{error} for {topic}-{partition} on node {self.node.node_id}"
            for e in found:
                entry.active_producers.add(**vars(e))
        return response

    def WriteTxnMarkers(
        self, request: tpb.WriteTxnMarkersRequest, context: grpc.ServicerContext
    ) -> tpb.WriteTxnMarkersResponse:
        """Markers appended as leader with acks=all (an admin's abort of a hanging
        transaction: Kafka's Admin.abortTransaction sends this to the leader)."""
        keys: list[tuple[str, int]] = []
        items: list[tuple[tuple[str, int], Any]] = []
        markers = []
        for m in request.markers:
            append = marker_appends(
                m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch
            )
            for tp in _pairs(m.topics):
                keys.append(tp)
                items.append((tp, append))
                markers.append(m)
        if not _allowed(self.node, context, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER,
                        CLUSTER_NAME):  # fmt: skip
            return tpb.WriteTxnMarkersResponse(
                results=_results((tp, "CLUSTER_AUTHORIZATION_FAILED") for tp in keys)
            )
        rm = self.node.replica_manager
        errors = []
        if items:
            started = rm.start_produce_all(items, -1, MARKER_TIMEOUT_MS)
            results = self._wait(context, lambda: rm.await_produced(started))
            for tp, m, r in zip(keys, markers, results, strict=True):
                if r.error_name == "NONE" and tp[0] == OFFSETS_TOPIC:
                    # The group coordinator's pending TxnOffsetCommits become visible or go.
                    self.node.groups.on_txn_marker(tp[1], m.producer_id, m.transaction_result)
                errors.append((tp, r.error_name))
        return tpb.WriteTxnMarkersResponse(results=_results(errors))
