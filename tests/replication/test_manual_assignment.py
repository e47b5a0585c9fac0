"""CreateTopics' and CreatePartitions' explicit replica assignments (cluster_control), as
Kafka's ReplicationControlManager checks and places them."""

from __future__ import annotations

import random

import pytest

from seglog.replication.cluster_control import (
    ControlError,
    create_partitions_records,
    create_topic_records,
    next_broker_epoch,
    register_broker_records,
)
from seglog.replication.metadata_image import MetadataImage
from seglog.replication.metadata_records import (
    BrokerFenceRecord,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
)
from seglog.storage.log_config import LogConfig

DEFAULTS = LogConfig.defaults()


def commit(image: MetadataImage, records: list[MetadataRecord]) -> None:
    for r in records:
        image.apply(r)


@pytest.fixture
def image() -> MetadataImage:
    """Brokers 1-3 registered, 3 fenced."""
    image = MetadataImage()
    for b in (1, 2, 3):
        epoch = next_broker_epoch(image, b, b * 10)
        commit(
            image,
            register_broker_records(image, RegisterBrokerRecord(b, epoch, "h", 1, None), DEFAULTS),
        )
        commit(image, [BrokerFenceRecord(b, epoch, b == 3)])
    return image


def create(
    image: MetadataImage,
    name: str,
    assignments: list[tuple[int, tuple[int, ...]]],
    partitions: int = -1,
    rf: int = -1,
) -> list[MetadataRecord]:
    return create_topic_records(
        image,
        name,
        partitions,
        rf,
        {},
        broker_defaults=DEFAULTS,
        new_topic_id=lambda: f"id-{name}",
        rng=random.Random(1),
        assignments=assignments,
    )


def test_replicas_in_the_given_order_the_first_unfenced_one_leads(image):
    records = create(image, "t", [(0, (1, 2)), (1, (3, 2))])
    parts = [r for r in records if isinstance(r, PartitionRecord)]
    assert [(p.replicas, p.isr, p.leader) for p in parts] == [
        ((1, 2), (1, 2), 1),
        ((3, 2), (2,), 2),  # 3 is fenced: not in the ISR, not the leader
    ]


@pytest.mark.parametrize(
    ("assignments", "error"),
    [
        ([(0, (1, 9))], "INVALID_REPLICA_ASSIGNMENT"),  # not registered
        ([(0, (2, 2))], "INVALID_REPLICA_ASSIGNMENT"),  # twice
        ([(0, (1, 2)), (1, (3,))], "INVALID_REPLICA_ASSIGNMENT"),  # replication factor
        ([(0, (1,)), (2, (2,))], "INVALID_REPLICA_ASSIGNMENT"),  # a gap
        ([(0, (1,)), (0, (2,))], "INVALID_REPLICA_ASSIGNMENT"),  # a partition twice
        ([(0, (3,))], "INVALID_REPLICA_ASSIGNMENT"),  # every replica fenced
        ([(0, ())], "INVALID_REPLICA_ASSIGNMENT"),  # no replica
    ],
)
def test_kafkas_refusals(image, assignments, error):
    with pytest.raises(ControlError) as refused:
        create(image, "bad", assignments)
    assert refused.value.error_name == error


def test_counts_must_be_minus_one_with_an_assignment(image):
    for partitions, rf in ((1, -1), (-1, 1)):
        with pytest.raises(ControlError) as refused:
            create(image, "bad", [(0, (1,))], partitions, rf)
        assert refused.value.error_name == "INVALID_REQUEST"


def test_create_partitions_places_each_new_partition(image):
    commit(image, create(image, "t", [(0, (1, 2))]))
    grown = create_partitions_records(image, "t", 3, random.Random(1), [(2, 1), (3, 2)])
    assert [(r.partition, r.replicas, r.isr, r.leader) for r in grown] == [  # type: ignore[union-attr]
        (1, (2, 1), (2, 1), 2),
        (2, (3, 2), (2,), 2),
    ]
    for wrong in ([(2, 1)], [(2,), (1,)], [(1, 1), (2, 1)]):  # count, rf, twice
        with pytest.raises(ControlError) as refused:
            create_partitions_records(image, "t", 3, random.Random(1), wrong)
        assert refused.value.error_name == "INVALID_REPLICA_ASSIGNMENT"
