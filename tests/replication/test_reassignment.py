"""Partition reassignment (KIP-455) as the controller decides it: pure functions over
a metadata image, each decision's records committed through their JSON encoding (as
the metadata log holds them) before the next."""

from __future__ import annotations

import pytest

from seglog.controller.cluster_control import (
    alter_partition_records,
    fence_broker_records,
    next_broker_epoch,
    register_broker_records,
)
from seglog.controller.metadata_image import MetadataImage
from seglog.controller.metadata_records import (
    BrokerFenceRecord,
    MetadataRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    decode_entry,
    encode_entry,
)
from seglog.controller.reassignment import alter_reassignments_records, list_reassignments
from seglog.storage.log_config import LogConfig

DEFAULTS = LogConfig.defaults()


def commit(image: MetadataImage, records: list[MetadataRecord]) -> None:
    for r in decode_entry(encode_entry(records)):
        image.apply(r)


@pytest.fixture
def image() -> MetadataImage:
    """Brokers 1-4; t-0 on replicas (1, 2, 3), led by 1."""
    image = MetadataImage()
    for b in (1, 2, 3, 4):
        epoch = next_broker_epoch(image, b, b * 10)
        record = RegisterBrokerRecord(b, epoch, "localhost", 9092, None)
        commit(image, register_broker_records(image, record, DEFAULTS))
        commit(image, [BrokerFenceRecord(b, epoch, False)])
    commit(
        image, [TopicRecord("t", "id-t"), PartitionRecord("id-t", 0, (1, 2, 3), (1, 2, 3), 1, 0, 0)]
    )
    return image


def reassign(image: MetadataImage, target: tuple[int, ...] | None) -> tuple[str, str]:
    records, results = alter_reassignments_records(image, [("t", 0, target)])
    commit(image, records)
    return results[("t", 0)]


def expand_isr(image: MetadataImage, isr: tuple[int, ...]) -> None:
    s = image.partition("t", 0)
    assert s is not None
    commit(
        image,
        alter_partition_records(image, "t", 0, s.leader, s.leader_epoch, s.partition_epoch, isr),
    )


def test_a_move_adds_the_new_replicas_then_completes_once_they_are_in_the_isr(
    image: MetadataImage,
) -> None:
    assert reassign(image, (2, 3, 4)) == ("NONE", "")
    s = image.partition("t", 0)
    assert s is not None
    assert (s.replicas, s.adding_replicas, s.removing_replicas) == ((2, 3, 4, 1), (4,), (1,))
    assert (s.leader, s.isr, s.leader_epoch) == (1, (1, 2, 3), 0)  # nothing moved yet
    [ongoing] = list_reassignments(image, None)
    assert (ongoing.topic, ongoing.replicas, ongoing.adding_replicas) == ("t", (2, 3, 4, 1), (4,))

    # The leader takes 4 into the ISR: that completes it, and 1 (the leader) leaves.
    expand_isr(image, (1, 2, 3, 4))
    s = image.partition("t", 0)
    assert s is not None
    assert (s.replicas, s.isr, s.adding_replicas, s.removing_replicas) == (
        (2, 3, 4),
        (2, 3, 4),
        (),
        (),
    )
    assert s.leader == 2 and s.leader_epoch == 1
    assert list_reassignments(image, None) == []


def test_a_shrink_or_reorder_within_the_isr_completes_at_once(image: MetadataImage) -> None:
    assert reassign(image, (3, 2)) == ("NONE", "")
    s = image.partition("t", 0)
    assert s is not None
    assert (s.replicas, s.isr, s.leader, s.reassigning) == ((3, 2), (2, 3), 3, False)


def test_cancel_goes_back_to_the_original_replicas(image: MetadataImage) -> None:
    assert reassign(image, (4, 2, 3)) == ("NONE", "")
    assert reassign(image, None) == ("NONE", "")
    s = image.partition("t", 0)
    assert s is not None
    # As Kafka's revert: the replicas less the adding ones, in the reassignment's order.
    assert (s.replicas, s.isr, s.leader, s.reassigning) == ((2, 3, 1), (1, 2, 3), 1, False)
    assert reassign(image, None)[0] == "NO_REASSIGNMENT_IN_PROGRESS"


def test_a_new_target_replaces_the_running_one(image: MetadataImage) -> None:
    reassign(image, (2, 3, 4))
    reassign(image, (1, 2, 4))
    s = image.partition("t", 0)
    assert s is not None
    assert (s.replicas, s.adding_replicas, s.removing_replicas) == ((1, 2, 4, 3), (4,), (3,))
    expand_isr(image, (1, 2, 3, 4))
    s = image.partition("t", 0)
    assert s is not None
    assert (s.replicas, s.isr, s.leader) == ((1, 2, 4), (1, 2, 4), 1)


def test_a_fenced_removed_leader_does_not_block_completion(image: MetadataImage) -> None:
    reassign(image, (2, 3, 4))
    commit(image, fence_broker_records(image, 1, DEFAULTS))
    s = image.partition("t", 0)
    assert s is not None and s.leader == 2 and 1 not in s.isr
    expand_isr(image, (2, 3, 4))
    s = image.partition("t", 0)
    assert s is not None
    assert (s.replicas, s.isr, s.leader, s.reassigning) == ((2, 3, 4), (2, 3, 4), 2, False)


@pytest.mark.parametrize(
    ("topic", "target", "error", "says"),
    [
        ("t", (), "INVALID_REPLICA_ASSIGNMENT", "empty"),
        ("t", (2, 2, 3), "INVALID_REPLICA_ASSIGNMENT", "twice"),
        ("t", (2, 3, 9), "INVALID_REPLICA_ASSIGNMENT", "unregistered broker(s) [9]"),
        ("nope", (1, 2, 3), "UNKNOWN_TOPIC_OR_PARTITION", "nope-0"),
    ],
)
def test_bad_requests_name_what_is_wrong(
    image: MetadataImage, topic: str, target: tuple[int, ...], error: str, says: str
) -> None:
    records, results = alter_reassignments_records(image, [(topic, 0, target)])
    assert records == []
    assert results[(topic, 0)][0] == error
    assert says in results[(topic, 0)][1]


def test_the_snapshot_keeps_a_running_reassignment(image: MetadataImage) -> None:
    reassign(image, (2, 3, 4))
    rebuilt = MetadataImage()
    commit(rebuilt, image.to_records())
    assert rebuilt.canonical() == image.canonical()
    assert rebuilt.partition("t", 0) == image.partition("t", 0)
