"""Kafka's transaction APIs on the Kafka listener (docs/transactions.md), each a thin
translation to the node's transaction coordinator (node/transactions/) and back:
InitProducerId with a transactional id, AddPartitionsToTxn (v0-3: one transaction per
request, as clients of transaction version 1 send it), AddOffsetsToTxn, EndTxn,
TxnOffsetCommit (at the group coordinator),
DescribeTransactions, ListTransactions, and DescribeProducers (a partition leader's
producer state). ACLs as Kafka: WRITE on the transactional id for the requests of a
transaction, DESCRIBE on it to describe or list one, READ on the topic for
DescribeProducers. Before the versions that know PRODUCER_FENCED (KIP-588) a fenced
producer hears INVALID_PRODUCER_EPOCH."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from ..groups.listener_results import commit_errors, commit_partitions, wait_answer
from ..security.acls import AclOperation, ResourceType
from ..security.group_acls import GROUP_DENIED
from ..security.kafka_gate import allowed
from ..transactions.partition_producers import active_producers
from ..transactions.txn_shard import COORDINATOR_NOT_AVAILABLE, TxnResult
from .codec import KafkaRequest, Part, encode_response, partition_errors, response_class
from .errors import error_code
from .txn_markers import KafkaApis

TXN_ID = ResourceType.TRANSACTIONAL_ID
TOPIC = ResourceType.TOPIC
ANSWER_TIMEOUT_S = 30.0
DENIED = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
# The first version of each API that may answer PRODUCER_FENCED.
FENCED_SINCE = {22: 4, 24: 2, 25: 2, 26: 2, 28: 3}


def _answer(future: Future[TxnResult]) -> TxnResult:
    try:
        return future.result(timeout=ANSWER_TIMEOUT_S)
    except TimeoutError:
        return TxnResult(COORDINATOR_NOT_AVAILABLE)


def _code(request: KafkaRequest, error: str) -> int:
    if error == "PRODUCER_FENCED" and request.api_version < FENCED_SINCE[request.api_key]:
        error = "INVALID_PRODUCER_EPOCH"
    return error_code(error)


def _call(
    apis: KafkaApis, request: KafkaRequest, tid: str, method: str, *args: object
) -> TxnResult:
    """A transaction request, if the caller may WRITE its transactional id."""
    if not allowed(apis.authorizer, AclOperation.WRITE, TXN_ID, tid):
        return TxnResult(DENIED)
    return _answer(apis.node.transactions.request(tid, method, *args))


def init_producer_id(apis: KafkaApis, request: KafkaRequest) -> list[Part]:
    req = request.body
    pid = getattr(req, "producer_id", -1)
    epoch = getattr(req, "producer_epoch", -1)
    r = _call(
        apis,
        request,
        req.transactional_id,
        "init_producer_id",
        req.transaction_timeout_ms,
        pid,
        epoch,
    )
    cls = response_class(request)
    body = cls(
        throttle_time_ms=0,
        error_code=_code(request, r.error),
        producer_id=r.producer_id,
        producer_epoch=r.producer_epoch,
    )
    return encode_response(request, body)


def add_partitions_to_txn(apis: KafkaApis, request: KafkaRequest) -> list[Part]:
    req = request.body
    cls = response_class(request)
    tid = req.v3_and_below_transactional_id
    wanted = [(t.name, p) for t in req.v3_and_below_topics for p in t.partitions]
    denied = {tp for tp in wanted if not allowed(apis.authorizer, AclOperation.WRITE, TOPIC, tp[0])}
    errors: dict[tuple[str, int], str]
    if denied:
        # Kafka: the others are not attempted.
        errors = {tp: "TOPIC_AUTHORIZATION_FAILED" if tp in denied else "OPERATION_NOT_ATTEMPTED"
                  for tp in wanted}  # fmt: skip
    else:
        r = _call(
            apis,
            request,
            tid,
            "add_partitions",
            req.v3_and_below_producer_id,
            req.v3_and_below_producer_epoch,
            wanted,
        )
        errors = {tp: r.error for tp in wanted}
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


def add_offsets_to_txn(apis: KafkaApis, request: KafkaRequest) -> list[Part]:
    req = request.body
    if not allowed(apis.authorizer, AclOperation.READ, ResourceType.GROUP, req.group_id):
        return _error_only(request, "GROUP_AUTHORIZATION_FAILED")
    return _error_only(request, _producer_call(apis, request, "add_offsets", req.group_id).error)


def end_txn(apis: KafkaApis, request: KafkaRequest) -> list[Part]:
    return _error_only(
        request, _producer_call(apis, request, "end_txn", request.body.committed).error
    )


def _producer_call(apis: KafkaApis, request: KafkaRequest, method: str, arg: object) -> TxnResult:
    """`_call` with the request's transactional id, producer id and epoch, then `arg`."""
    req = request.body
    return _call(
        apis, request, req.transactional_id, method, req.producer_id, req.producer_epoch, arg
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
    from ..transactions.txn_records import TxnState

    req = request.body
    cls = response_class(request)
    known = {s.kafka_name for s in TxnState}
    wanted = set(req.state_filters or ())
    unknown = sorted(wanted - known)
    error, found = apis.node.transactions.list_transactions(
        wanted & known, set(req.producer_id_filters or ())
    )
    if wanted and not wanted & known:
        found = []  # only unknown states asked for: none match
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


def txn_offset_commit(apis: KafkaApis, request: KafkaRequest) -> list[Part]:
    """TxnOffsetCommit at the group's coordinator: the offsets are written in the
    producer's transaction and visible once its COMMIT marker lands (docs/transactions.md).
    ACLs as Kafka: WRITE on the transactional id, READ on the group and each topic."""
    req = request.body
    v = request.api_version
    partitions = commit_partitions(req.topics, leader_epochs=v >= 2)
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
            future = apis.node.groups.txn_offset_commit(
                req.group_id,
                (req.producer_id, req.producer_epoch),
                req.generation_id if v >= 3 else -1,
                req.member_id if v >= 3 else "",
                (req.group_instance_id or None) if v >= 3 else None,
                allowed_parts,
            )
            errors.update(commit_errors(wait_answer(future), allowed_parts))
    cls = response_class(request)
    topic_cls = cls.TxnOffsetCommitResponseTopic
    topics = partition_errors(
        req.topics,
        topic_cls,
        topic_cls.TxnOffsetCommitResponsePartition,
        lambda t, p: _code(request, errors.get((t, p), "NONE")),
    )
    return encode_response(request, cls(throttle_time_ms=0, topics=topics))
