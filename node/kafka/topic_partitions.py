"""DescribeTopicPartitions (KIP-966, API 75 v0): the Metadata answer's partitions, paged.
Topics are answered in name order from the request's cursor, at most
ResponsePartitionLimit partitions (and at most max.request.partition.size.limit, Kafka's
2000) per answer; NextCursor names where the next page starts. An empty topic list
means every topic the caller may DESCRIBE. seglog keeps no eligible leader replicas
(ELR): those lists are answered empty, as by a Kafka cluster with ELR disabled."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from seglog.storage.partition_metadata import topic_id_to_uuid

from ..groups.offsets_records import OFFSETS_TOPIC
from ..transactions.txn_records import TRANSACTION_STATE_TOPIC
from .codec import KafkaRequest, Part, encode_response, response_class
from .errors import error_code
from .metadata import answered_brokers, partition_leadership
from .node_api import KafkaNode

MAX_REQUEST_PARTITION_SIZE_LIMIT = 2000  # Kafka's max.request.partition.size.limit
ZERO_UUID = uuid.UUID(int=0)  # Kafka's Uuid.ZERO_UUID: no id told


def describe_topic_partitions(
    node: KafkaNode,
    listener: str,
    request: KafkaRequest,
    may_describe: Callable[[str], bool],
    topic_operations: Callable[[str], set[int]],
) -> list[Part]:
    req = request.body
    cls = response_class(request)
    T = cls.DescribeTopicPartitionsResponseTopic
    image = node.metadata_image()
    every = not req.topics
    start_topic = req.cursor.topic_name if req.cursor is not None else ""
    names = sorted(
        {n for n in (image.topics if every else (t.name for t in req.topics)) if n >= start_topic}
    )
    invalid = None
    if req.cursor is not None and not every and req.cursor.topic_name not in names:
        invalid = f"the topic list does not hold the cursor's topic {req.cursor.topic_name!r}"
    elif req.cursor is not None and req.cursor.partition_index < 0:
        invalid = f"the cursor's partition {req.cursor.partition_index} is not valid"
    if invalid is not None:
        topics = [
            T(error_code=error_code("INVALID_REQUEST"), name=t.name, topic_id=ZERO_UUID)
            for t in req.topics
        ]
        return encode_response(request, cls(throttle_time_ms=0, topics=topics, next_cursor=None))
    remaining = max(min(MAX_REQUEST_PARTITION_SIZE_LIMIT, req.response_partition_limit), 1)
    live = answered_brokers(node, image, listener)
    topics: list[Any] = []
    refused: list[Any] = []
    next_cursor = None
    for name in names:
        if not may_describe(name):
            if not every:  # never the topic's id, nor whether it exists
                refused.append(
                    T(
                        error_code=error_code("TOPIC_AUTHORIZATION_FAILED"),
                        name=name,
                        topic_id=ZERO_UUID,
                    )
                )
            continue
        if remaining == 0:
            next_cursor = cls.Cursor(topic_name=name, partition_index=0)
            break
        topic = image.topics.get(name)
        if topic is None:
            topics.append(
                T(
                    error_code=error_code("UNKNOWN_TOPIC_OR_PARTITION"),
                    name=name,
                    topic_id=ZERO_UUID,
                    is_internal=name in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC),
                )
            )
            continue
        first = req.cursor.partition_index if name == start_topic and req.cursor else 0
        indexes = sorted(p for p in topic.partitions if p >= first)
        page, rest = indexes[:remaining], indexes[remaining:]
        partitions = []
        for p in page:
            state = topic.partitions[p]
            partitions.append(
                T.DescribeTopicPartitionsResponsePartition(
                    **partition_leadership(p, state, live),
                    eligible_leader_replicas=[],
                    last_known_elr=[],
                    # Kafka: replicas of brokers that are not registered at all.
                    offline_replicas=[r for r in state.replicas if r not in image.brokers],
                )
            )
        topics.append(
            T(
                error_code=0,
                name=name,
                topic_id=topic_id_to_uuid(topic.topic_id),
                is_internal=name in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC),
                partitions=partitions,
                # KIP-430's bit field (this codec takes it as an int here).
                topic_authorized_operations=sum(1 << op for op in topic_operations(name)),
            )
        )
        if rest:
            next_cursor = cls.Cursor(topic_name=name, partition_index=rest[0])
            break
        remaining -= len(page)
    body = cls(throttle_time_ms=0, topics=topics + refused, next_cursor=next_cursor)
    return encode_response(request, body)
