"""DeleteRecords (API 21) on the Kafka listener: each partition's log start offset moves
on its leader (this node; a client sends each partition to its leader), the followers
adopt it from their next fetch answer, and the answer comes once the low watermark —
the least start offset of the live replicas — reaches the request, or REQUEST_TIMED_OUT
after the request's timeout. The wait runs on a delayed thread (a Deferred)."""

from __future__ import annotations

from collections.abc import Callable

from ..partition_requests import OffsetResult
from ..security.acls import AclOperation, ResourceType
from ..security.kafka_gate import allowed
from ..security.node_authorizer import NodeAuthorizer
from .codec import KafkaRequest, Part, encode_response, response_class
from .deferred import Deferred
from .errors import error_code
from .node_api import KafkaNode

MAX_TIMEOUT_MS = 60_000  # a request's TimeoutMs is capped at this (it holds a thread)


def delete_records(
    node: KafkaNode, request: KafkaRequest, authorizer: Callable[[], NodeAuthorizer | None]
) -> list[Part] | Deferred:
    """Kafka's checks in its order: DELETE on the topic, the partition in the metadata
    (else UNKNOWN_TOPIC_OR_PARTITION), then the leader's own (NOT_LEADER_OR_FOLLOWER,
    OFFSET_OUT_OF_RANGE, POLICY_VIOLATION for a topic without cleanup.policy=delete)."""
    req = request.body
    image = node.metadata_image()
    auth = authorizer()
    refused: dict[tuple[str, int], OffsetResult] = {}
    wanted: list[tuple[tuple[str, int], int]] = []
    for t in req.topics:
        may_delete = allowed(auth, AclOperation.DELETE, ResourceType.TOPIC, t.name)
        for p in t.partitions:
            tp = (t.name, p.partition_index)
            if not may_delete:
                refused[tp] = OffsetResult(error_name="TOPIC_AUTHORIZATION_FAILED")
            elif image.partition(*tp) is None:
                refused[tp] = OffsetResult(error_name="UNKNOWN_TOPIC_OR_PARTITION")
            elif node.replica_manager.hosted(tp) is None:
                refused[tp] = OffsetResult(error_name="NOT_LEADER_OR_FOLLOWER")
            else:
                wanted.append((tp, p.offset))
    timeout_ms = min(max(req.timeout_ms, 0), MAX_TIMEOUT_MS)

    def answer() -> list[Part]:
        def alive(broker_id: int) -> bool:
            b = node.metadata_image().brokers.get(broker_id)
            return b is not None and not b.fenced

        done = dict(
            zip(
                (tp for tp, _ in wanted),
                node.replica_manager.delete_records(wanted, timeout_ms, alive),
                strict=True,
            )
        )
        done.update(refused)
        cls = response_class(request)
        T = cls.DeleteRecordsTopicResult
        P = T.DeleteRecordsPartitionResult
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                r = done[(t.name, p.partition_index)]
                parts.append(
                    P(
                        partition_index=p.partition_index,
                        low_watermark=r.offset if r.error_name == "NONE" else -1,
                        error_code=error_code(r.error_name),
                    )
                )
            topics.append(T(name=t.name, partitions=parts))
        return encode_response(request, cls(throttle_time_ms=0, topics=topics))

    return Deferred(answer) if wanted else answer()
