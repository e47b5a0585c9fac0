"""Kafka's ConsumerProtocol bytes: the subscription a member sends in JoinGroup and
the assignment the leader hands out in SyncGroup, encoded with kafka-python's
`kafka.protocol` (generated from Kafka's schemas), so seglog's consumers and Kafka's
clients read each other's metadata in one group."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .cluster import TopicPartition

# kafka-python's codec is imported where it is used: `import kafka` loads its whole
# client (~70 ms), which every process importing seglog's Admin would otherwise pay
# (Spark starts one Python process per query plan that does).

PROTOCOL_TYPE = "consumer"
# The newest versions Kafka defines: v1 added owned partitions (cooperative
# rebalancing), v2 the generation, v3 the rack. Older readers parse the prefix.
SUBSCRIPTION_VERSION = 3
ASSIGNMENT_VERSION = 3
NO_GENERATION = -1


@dataclass(frozen=True)
class Subscription:
    """One member's ConsumerProtocolSubscription, decoded."""

    topics: tuple[str, ...]
    owned_partitions: frozenset[TopicPartition] = frozenset()
    generation_id: int = NO_GENERATION
    user_data: bytes | None = None
    rack_id: str | None = None
    group_instance_id: str | None = field(default=None, compare=False)


def _by_topic(tps: Iterable[TopicPartition]) -> list[tuple[str, list[int]]]:
    grouped: dict[str, list[int]] = {}
    for tp in tps:
        grouped.setdefault(tp.topic, []).append(tp.partition)
    return [(t, sorted(ps)) for t, ps in sorted(grouped.items())]


def encode_subscription(sub: Subscription) -> bytes:
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

    owned = [
        ConsumerProtocolSubscription.TopicPartition(topic=t, partitions=ps)
        for t, ps in _by_topic(sub.owned_partitions)
    ]
    return bytes(
        ConsumerProtocolSubscription(
            version=SUBSCRIPTION_VERSION,
            topics=sorted(sub.topics),
            user_data=sub.user_data,
            owned_partitions=owned,
            generation_id=sub.generation_id,
            rack_id=sub.rack_id,
        ).encode()
    )


def decode_subscription(data: bytes, group_instance_id: str | None = None) -> Subscription:
    """Any version a Kafka client sends; a clear ValueError on bytes that are not one."""
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

    try:
        m = ConsumerProtocolSubscription.decode(bytes(data))
    except Exception as e:  # the codec raises struct.error, ValueError, ...
        raise ValueError(f"member metadata is not a ConsumerProtocolSubscription: {e}") from e
    owned = frozenset(
        TopicPartition(tp.topic, p) for tp in (m.owned_partitions or ()) for p in tp.partitions
    )
    generation = m.generation_id if m.generation_id is not None else NO_GENERATION
    return Subscription(
        tuple(m.topics or ()),
        owned,
        generation,
        m.user_data,
        m.rack_id,
        group_instance_id or None,
    )


def encode_assignment(
    partitions: Iterable[TopicPartition], user_data: bytes | None = None
) -> bytes:
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

    assigned = [
        ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=ps)
        for t, ps in _by_topic(partitions)
    ]
    return bytes(
        ConsumerProtocolAssignment(
            version=ASSIGNMENT_VERSION, assigned_partitions=assigned, user_data=user_data
        ).encode()
    )


def decode_assignment(data: bytes) -> list[TopicPartition]:
    """The partitions of a ConsumerProtocolAssignment; empty bytes are no assignment
    (what a coordinator hands a member the leader left out)."""
    if not data:
        return []
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment

    try:
        a = ConsumerProtocolAssignment.decode(bytes(data))
    except Exception as e:
        raise ValueError(f"member assignment is not a ConsumerProtocolAssignment: {e}") from e
    return sorted(
        (
            TopicPartition(tp.topic, p)
            for tp in (a.assigned_partitions or ())
            for p in tp.partitions
        ),
        key=lambda tp: (tp.topic, tp.partition),
    )
