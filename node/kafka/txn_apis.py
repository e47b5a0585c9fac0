"""Kafka's transaction APIs on the Kafka listener (docs/transactions.md), each a thin
translation to the node's transaction coordinator (node/transactions/) and back:
InitProducerId with a transactional id, AddPartitionsToTxn (v0-3: one transaction per
request, as clients of transaction version 1 send it; v4-5: from partition leaders,
KIP-890's VerifyOnly), AddOffsetsToTxn, EndTxn,
TxnOffsetCommit (at the group coordinator),
DescribeTransactions, ListTransactions, and DescribeProducers (a partition leader's
producer state). ACLs as Kafka: WRITE on the transactional id for the requests of a
transaction, DESCRIBE on it to describe or list one, READ on the topic for
DescribeProducers. Before the versions that know PRODUCER_FENCED (KIP-588) a fenced
producer hears INVALID_PRODUCER_EPOCH. InitProducerId v5, AddOffsetsToTxn v4, EndTxn v4
and TxnOffsetCommit v4 only say their client knows TRANSACTION_ABORTABLE (KIP-890): of
these only TxnOffsetCommit's verification can answer it (the coordinator says it to a
VerifyOnly question alone), so the others are answered as the version before."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from ..groups.group_errors import COORDINATOR_NOT_AVAILABLE
from ..groups.group_messages import CommitPartition, ErrorResult, Result
from ..groups.listener_results import (
    ANSWER_TIMEOUT_S,
    commit_errors,
    commit_partitions,
)
from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType
from ..security.group_acls import GROUP_DENIED
from ..security.kafka_gate import allowed
from ..transactions.offsets_verification import txn_offset_commit as verified_txn_offset_commit
from ..transactions.partition_producers import active_producers
from ..transactions.txn_runtime import ANSWER_TIMEOUT_S as TXN_ANSWER_TIMEOUT_S
from ..transactions.txn_runtime import wait_txn_answer
from ..transactions.txn_shard import TxnResult
from ..transactions.txn_verification import txn_offset_commit_supported_operation
from ..transactions.verification_sender import REQUEST_TIMEOUT_MS
from .codec import KafkaRequest, Part, encode_response, partition_errors, response_class
from .deferred import Deferred, from_future
from .errors import error_code
from .txn_markers import KafkaApis

TXN_ID = ResourceType.TRANSACTIONAL_ID
TOPIC = ResourceType.TOPIC
DENIED = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
# The first version of each API that may answer PRODUCER_FENCED.
FENCED_SINCE = {22: 4, 24: 2, 25: 2, 26: 2, 28: 3}
# A TxnOffsetCommit's verification (at most the sender's 30 s) and then its append.
TXN_OFFSET_COMMIT_TIMEOUT_S = ANSWER_TIMEOUT_S + REQUEST_TIMEOUT_MS / 1000


def _code(request: KafkaRequest, error: str) -> int:
    if error == "PRODUCER_FENCED" and request.api_version < FENCED_SINCE[request.api_key]:
        error = "INVALID_PRODUCER_EPOCH"
    return error_code(error)


def _call(
    apis: KafkaApis,
    request: KafkaRequest,
    answer: Callable[[TxnResult], list[Part]],
    tid: str,
    method: str,
    *args: object,
) -> list[Part] | Deferred:
    """A transaction request, if the caller may WRITE its transactional id: `answer`
    of the coordinator's result. The coordinator answers once its `__transaction_state`
    write is replicated (or a held request's wait is over), so the answer is a Deferred
    that holds no handler thread meanwhile: with several producers a thread per waiting
    request would fill `num.io.threads` and queue the requests that would end the waits
    (a leader's verification, the next transaction's AddPartitionsToTxn)."""
    if not allowed(apis.authorizer, AclOperation.WRITE, TXN_ID, tid):
        return answer(TxnResult(DENIED))
    return from_future(
        apis.node.transactions.request(tid, method, *args),
        lambda r: answer(r if r is not None else TxnResult(COORDINATOR_NOT_AVAILABLE)),
        TXN_ANSWER_TIMEOUT_S,
    )


def init_producer_id(apis: KafkaApis, request: KafkaRequest) -> list[Part] | Deferred:
    req = request.body
    pid = getattr(req, "producer_id", -1)
    epoch = getattr(req, "producer_epoch", -1)
    cls = response_class(request)

    def answer(r: TxnResult) -> list[Part]:
        body = cls(
            throttle_time_ms=0,
            error_code=_code(request, r.error),
            producer_id=r.producer_id,
            producer_epoch=r.producer_epoch,
        )
        return encode_response(request, body)

    return _call(
        apis,
        request,
        answer,
        req.transactional_id,
        "init_producer_id",
        req.transaction_timeout_ms,
        pid,
        epoch,
    )


def add_partitions_to_txn(apis: KafkaApis, request: KafkaRequest) -> list[Part] | Deferred:
    if request.api_version >= 4:
        return _add_partitions_from_broker(apis, request)
    req = request.body
    tid = req.v3_and_below_transactional_id
    wanted = [(t.name, p) for t in req.v3_and_below_topics for p in t.partitions]
    denied = {tp for tp in wanted if not allowed(apis.authorizer, AclOperation.WRITE, TOPIC, tp[0])}
    if denied:
        # Kafka: the others are not attempted.
        return _add_partitions_response(
            request,
            {tp: "TOPIC_AUTHORIZATION_FAILED" if tp in denied else "OPERATION_NOT_ATTEMPTED"
             for tp in wanted},
        )  # fmt: skip
    return _call(
        apis,
        request,
        lambda r: _add_partitions_response(request, dict.fromkeys(wanted, r.error)),
        tid,
        "add_partitions",
        req.v3_and_below_producer_id,
        req.v3_and_below_producer_epoch,
        wanted,
    )


def _add_partitions_response(
    request: KafkaRequest, errors: dict[tuple[str, int], str]
) -> list[Part]:
    """AddPartitionsToTxn v0-3's answer: each partition's error."""
    req = request.body
    cls = response_class(request)
    topic_cls = cls.AddPartitionsToTxnTopicResult
    part_cls = topic_cls.AddPartitionsToTxnPartitionResult
    results = [
        topic_cls(
            name=t.name,
            results_by_partition=[
                part_cls(
                    partition_index=p, partition_error_code=_code(request, errors[(t.name, p)])
                )
                for p in t.partitions
            ],
        )
        for t in req.v3_and_below_topics
    ]
    return encode_response(request, cls(throttle_time_ms=0, results_by_topic_v3_and_below=results))


def _add_partitions_from_broker(apis: KafkaApis, request: KafkaRequest) -> list[Part]:
    """AddPartitionsToTxn v4+: from partition leaders (KIP-890), so CLUSTER_ACTION,
    several transactions in one request. With VerifyOnly, whether each partition is in
    its producer's ongoing transaction, from the coordinator's state (nothing written);
    without it, the partitions are added. A transaction naming an unknown partition is
    not attempted (UNKNOWN_TOPIC_OR_PARTITION there, OPERATION_NOT_ATTEMPTED for the
    rest), as in Kafka."""
    req = request.body
    cls = response_class(request)
    if not allowed(
        apis.authorizer, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME
    ):
        return encode_response(
            request,
            cls(
                throttle_time_ms=0,
                error_code=error_code("CLUSTER_AUTHORIZATION_FAILED"),
                results_by_transaction=[],
            ),
        )
    image = apis.node.metadata_image()
    results = []
    for txn in req.transactions:
        wanted = [(t.name, p) for t in txn.topics for p in t.partitions]
        unknown = {tp for tp in wanted if not _exists(image, tp)}
        errors: dict[tuple[str, int], str]
        if not txn.transactional_id:
            errors = dict.fromkeys(wanted, "INVALID_REQUEST")
        elif unknown:
            errors = {
                tp: "UNKNOWN_TOPIC_OR_PARTITION" if tp in unknown else "OPERATION_NOT_ATTEMPTED"
                for tp in wanted
            }
        elif txn.verify_only:
            errors = apis.node.transactions.verify_partitions(
                txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted
            )
        else:
            r = wait_txn_answer(
                apis.node.transactions.request(
                    txn.transactional_id, "add_partitions", txn.producer_id,
                    txn.producer_epoch, wanted,
                )
            )  # fmt: skip
            errors = dict.fromkeys(wanted, r.error)
        if request.api_version < 5:  # TRANSACTION_ABORTABLE is v5's (KIP-890)
            errors = {
                tp: "INVALID_TXN_STATE" if e == "TRANSACTION_ABORTABLE" else e
                for tp, e in errors.items()
            }
        topic_cls = cls.AddPartitionsToTxnTopicResult
        part_cls = topic_cls.AddPartitionsToTxnPartitionResult
        by_topic: dict[str, list[int]] = {}
        for topic, partition in wanted:
            by_topic.setdefault(topic, []).append(partition)
        results.append(
            cls.AddPartitionsToTxnResult(
                transactional_id=txn.transactional_id,
                topic_results=[
                    topic_cls(
                        name=topic,
                        results_by_partition=[
                            part_cls(
                                partition_index=p,
                                partition_error_code=error_code(errors[(topic, p)]),
                            )
                            for p in ps
                        ],
                    )
                    for topic, ps in by_topic.items()
                ],
            )
        )
    body = cls(throttle_time_ms=0, error_code=0, results_by_transaction=results)
    return encode_response(request, body)


def _exists(image: Any, tp: tuple[str, int]) -> bool:
    topic = image.topics.get(tp[0])
    return topic is not None and tp[1] in topic.partitions


def add_offsets_to_txn(apis: KafkaApis, request: KafkaRequest) -> list[Part] | Deferred:
    req = request.body
    if not allowed(apis.authorizer, AclOperation.READ, ResourceType.GROUP, req.group_id):
        return _error_only(request, "GROUP_AUTHORIZATION_FAILED")
    return _producer_call(apis, request, "add_offsets", req.group_id)


def end_txn(apis: KafkaApis, request: KafkaRequest) -> list[Part] | Deferred:
    return _producer_call(apis, request, "end_txn", request.body.committed)


def _producer_call(
    apis: KafkaApis, request: KafkaRequest, method: str, arg: object
) -> list[Part] | Deferred:
    """`_call` with the request's transactional id, producer id and epoch, then `arg`,
    answered with the error alone."""
    req = request.body
    return _call(
        apis,
        request,
        lambda r: _error_only(request, r.error),
        req.transactional_id,
        method,
        req.producer_id,
        req.producer_epoch,
        arg,
    )


def _error_only(request: KafkaRequest, error: str) -> list[Part]:
    """The answer of an API that answers with its error alone."""
    cls = response_class(request)
    return encode_response(request, cls(throttle_time_ms=0, error_code=_code(request, error)))


def describe_transactions(apis: KafkaApis, request: KafkaRequest) -> list[Part]:
    cls = response_class(request)
    states = []
    for tid in request.body.transactional_ids:
        # Kafka's defaults for an id it cannot describe: zeros and an empty state.
        fields: dict[str, Any] = {
            "transactional_id": tid, "transaction_state": "", "transaction_timeout_ms": 0,
            "transaction_start_time_ms": 0, "producer_id": 0, "producer_epoch": 0,
            "topics": [],
        }  # fmt: skip
        if not allowed(apis.authorizer, AclOperation.DESCRIBE, TXN_ID, tid):
            error = DENIED
        else:
            error, meta = apis.node.transactions.describe(tid)
            if meta is not None:
                by_topic: dict[str, list[int]] = {}
                for topic, partition in sorted(meta.partitions):
                    by_topic.setdefault(topic, []).append(partition)
                fields.update(
                    transaction_state=meta.state.kafka_name,
                    transaction_timeout_ms=meta.timeout_ms,
                    transaction_start_time_ms=meta.start_ms,
                    producer_id=meta.producer_id,
                    producer_epoch=meta.producer_epoch,
                    topics=[
                        cls.TransactionState.TopicData(topic=t, partitions=ps)
                        for t, ps in by_topic.items()
                    ],
                )
        states.append(cls.TransactionState(error_code=error_code(error), **fields))
    return encode_response(request, cls(throttle_time_ms=0, transaction_states=states))


def list_transactions(apis: KafkaApis, request: KafkaRequest) -> list[Part]:
    req = request.body
    cls = response_class(request)
    error, found, unknown = apis.node.transactions.list_transactions(
        set(req.state_filters or ()), set(req.producer_id_filters or ())
    )
    listed = [
        cls.TransactionState(
            transactional_id=m.transactional_id,
            producer_id=m.producer_id,
            transaction_state=m.state.kafka_name,
        )
        for m in found
        if allowed(apis.authorizer, AclOperation.DESCRIBE, TXN_ID, m.transactional_id)
    ]
    body = cls(
        throttle_time_ms=0,
        error_code=error_code(error),
        unknown_state_filters=unknown,
        transaction_states=listed,
    )
    return encode_response(request, body)


def describe_producers(apis: KafkaApis, request: KafkaRequest) -> list[Part]:
    """The active producers of each partition this node leads (Kafka's DescribeProducers:
    a partition led elsewhere answers NOT_LEADER_OR_FOLLOWER)."""
    cls = response_class(request)
    rm = apis.node.replica_manager
    topics = []
    for t in request.body.topics:
        partitions = []
        for index in t.partition_indexes:
            error, message, active = "NONE", None, []
            if not allowed(apis.authorizer, AclOperation.READ, TOPIC, t.name):
                error = "TOPIC_AUTHORIZATION_FAILED"
            else:
                error, found = active_producers(rm, t.name, index)
                active = [
                    cls.TopicResponse.PartitionResponse.ProducerState(
                        producer_id=e.producer_id,
                        producer_epoch=e.producer_epoch,
                        last_sequence=e.last_sequence,
                        last_timestamp=e.last_timestamp,
                        coordinator_epoch=e.coordinator_epoch,
                        current_txn_start_offset=e.current_txn_start_offset,
                    )
                    for e in found
                ]
            if error != "NONE":
                message = f"{error} for {t.name}-{index}"
            partitions.append(
                cls.TopicResponse.PartitionResponse(
                    partition_index=index,
                    error_code=error_code(error),
                    error_message=message,
                    active_producers=active,
                )
            )
        topics.append(cls.TopicResponse(name=t.name, partitions=partitions))
    return encode_response(request, cls(throttle_time_ms=0, topics=topics))


def txn_offset_commit(apis: KafkaApis, request: KafkaRequest) -> list[Part] | Deferred:
    """TxnOffsetCommit at the group's coordinator: the offsets are written in the
    producer's transaction and visible once its COMMIT marker lands (docs/transactions.md),
    once the transaction coordinator has verified that the group's `__consumer_offsets`
    partition is in the transaction (KIP-890 part 1; node/transactions/
    offsets_verification.py): a group not in the transaction is TRANSACTION_ABORTABLE
    from v4, INVALID_TXN_STATE before, as Kafka's AddPartitionsToTxnManager maps it.
    The answer comes from a Deferred that holds no thread while the verification and
    the append wait (`begin`, on the event loop).
    ACLs as Kafka: WRITE on the transactional id, READ on the group and each topic."""
    req = request.body
    v = request.api_version
    partitions = commit_partitions(req.topics, leader_epochs=v >= 2)
    errors: dict[tuple[str, int], str]
    if not allowed(apis.authorizer, AclOperation.WRITE, TXN_ID, req.transactional_id):
        errors = dict.fromkeys(((p.topic, p.partition) for p in partitions), DENIED)
    elif not allowed(apis.authorizer, AclOperation.READ, ResourceType.GROUP, req.group_id):
        errors = dict.fromkeys(((p.topic, p.partition) for p in partitions), GROUP_DENIED)
    else:
        denied = {
            (p.topic, p.partition)
            for p in partitions
            if not allowed(apis.authorizer, AclOperation.READ, TOPIC, p.topic)
        }
        allowed_parts = [p for p in partitions if (p.topic, p.partition) not in denied]
        errors = dict.fromkeys(denied, "TOPIC_AUTHORIZATION_FAILED")
        if allowed_parts:
            future = verified_txn_offset_commit(
                apis.node,
                req.transactional_id,
                req.group_id,
                (req.producer_id, req.producer_epoch),
                req.generation_id if v >= 3 else -1,
                req.member_id if v >= 3 else "",
                (req.group_instance_id or None) if v >= 3 else None,
                allowed_parts,
                txn_offset_commit_supported_operation(v),
            )
            return _deferred_commit(request, errors, allowed_parts, future)
    return _txn_offset_commit_response(request, errors)


def _deferred_commit(
    request: KafkaRequest,
    errors: dict[tuple[str, int], str],
    partitions: list[CommitPartition],
    future: Future[Result],
) -> Deferred:
    def answer(result: Result | None) -> list[Part]:
        got = result if result is not None else ErrorResult(COORDINATOR_NOT_AVAILABLE)
        return _txn_offset_commit_response(request, errors | commit_errors(got, partitions))

    return from_future(future, answer, TXN_OFFSET_COMMIT_TIMEOUT_S)


def _txn_offset_commit_response(
    request: KafkaRequest, errors: dict[tuple[str, int], str]
) -> list[Part]:
    cls = response_class(request)
    topic_cls = cls.TxnOffsetCommitResponseTopic
    topics = partition_errors(
        request.body.topics,
        topic_cls,
        topic_cls.TxnOffsetCommitResponsePartition,
        lambda t, p: _code(request, errors.get((t, p), "NONE")),
    )
    return encode_response(request, cls(throttle_time_ms=0, topics=topics))
