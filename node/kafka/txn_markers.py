"""WriteTxnMarkers (27) on the Kafka listener: a transaction coordinator asks this
node to append a COMMIT or ABORT marker of a producer to each partition it leads
(Kafka's control batch with an EndTransactionMarker, docs/transactions.md). Each
marker is appended as leader with acks=all; the answer, per partition, comes once the
high watermark passed it (or with the error that refused it: a stale producer epoch
INVALID_PRODUCER_EPOCH, an older coordinator epoch TRANSACTION_COORDINATOR_FENCED).
Only the cluster may ask: CLUSTER_ACTION, as Kafka."""

from __future__ import annotations

from typing import Any, Protocol

from seglog.storage.disk_and_clock import plain_monotonic_s

from ..groups.offsets_records import OFFSETS_TOPIC
from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType
from ..security.kafka_gate import allowed
from ..transactions.partition_producers import MARKER_TIMEOUT_MS, marker_appends
from .codec import KafkaRequest, Part, encode_response, response_class
from .deferred import Deferred, Done, OnLoop
from .errors import error_code
from .node_api import KafkaNode

CLUSTER = ResourceType.CLUSTER

Key = tuple[int, str, int]  # marker index, topic, partition


class KafkaApis(Protocol):
    """What the transaction APIs need of the listener's handlers (handlers.py)."""

    node: KafkaNode

    @property
    def authorizer(self) -> Any: ...


def write_txn_markers(apis: KafkaApis, request: KafkaRequest) -> list[Part] | Deferred:
    req = request.body
    if not allowed(apis.authorizer, AclOperation.CLUSTER_ACTION, CLUSTER, CLUSTER_NAME):
        errors = {k: "CLUSTER_AUTHORIZATION_FAILED" for k in _keys(req)}
        return _response(request, errors, {})
    rm = apis.node.replica_manager
    items = []
    keys = []
    for i, m in enumerate(req.markers):
        append = marker_appends(
            m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch
        )
        for t in m.topics:
            for p in t.partition_indexes:
                items.append(((t.name, p), append))
                keys.append((i, t.name, p))
    if not items:
        return _response(request, {}, {})
    started = rm.start_produce_all(items, -1, MARKER_TIMEOUT_MS)

    def answer(_: object = None) -> list[Part]:
        results = dict(zip(keys, (r.error_name for r in rm.await_produced(started)), strict=True))
        for (i, topic, partition), error in results.items():
            if error == "NONE" and topic == OFFSETS_TOPIC:
                # The group coordinator's pending TxnOffsetCommits become visible or go.
                m = req.markers[i]
                apis.node.groups.on_txn_marker(partition, m.producer_id, m.transaction_result)
        return _response(request, {}, results)

    def begin(done: Done) -> None:
        on_loop: OnLoop[None] = OnLoop(done, answer, started.deadline - plain_monotonic_s())
        rm.when_produced(started, on_loop.finish_threadsafe)

    return Deferred(answer, begin)


def _keys(req: Any) -> list[Key]:
    return [(i, t.name, p) for i, m in enumerate(req.markers) for t in m.topics
            for p in t.partition_indexes]  # fmt: skip


def _response(request: KafkaRequest, refused: dict[Key, str], done: dict[Key, str]) -> list[Part]:
    cls = response_class(request)
    topic_cls = cls.WritableTxnMarkerResult.WritableTxnMarkerTopicResult
    partition_cls = topic_cls.WritableTxnMarkerPartitionResult
    markers = []
    for i, m in enumerate(request.body.markers):
        topics = []
        for t in m.topics:
            partitions = []
            for p in t.partition_indexes:
                name = refused.get((i, t.name, p)) or done.get((i, t.name, p), "NONE")
                partitions.append(partition_cls(partition_index=p, error_code=error_code(name)))
            topics.append(topic_cls(name=t.name, partitions=partitions))
        markers.append(cls.WritableTxnMarkerResult(producer_id=m.producer_id, topics=topics))
    return encode_response(request, cls(markers=markers))
