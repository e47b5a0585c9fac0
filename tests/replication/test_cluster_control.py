"""The controller's AlterPartition decision (cluster_control), as the quorum controller
and both simulators run it: epochs of the leader and the partition, and KIP-903's broker
epoch of every ISR member."""

from __future__ import annotations

import random

import pytest

from seglog.controller.cluster_control import (
    ControlError,
    IsrChange,
    alter_partitions_records,
    create_partitions_records,
    create_topic_records,
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
    decode_entry,
    encode_entry,
)
from seglog.storage.log_config import LogConfig

DEFAULTS = LogConfig.defaults()


def commit(image: MetadataImage, records: list[MetadataRecord]) -> None:
    for r in decode_entry(encode_entry(records)):
        image.apply(r)


def register(image: MetadataImage, broker: int, offset: int) -> int:
    epoch = next_broker_epoch(image, broker, offset)
    record = RegisterBrokerRecord(broker, epoch, "localhost", 9092, None)
    commit(image, register_broker_records(image, record, DEFAULTS))
    commit(image, [BrokerFenceRecord(broker, epoch, False)])
    return epoch


@pytest.fixture
def image() -> MetadataImage:
    image = MetadataImage()
    for b in (1, 2, 3):
        register(image, b, b * 10)
    commit(
        image,
        create_topic_records(
            image,
            "t",
            1,
            3,
            {},
            broker_defaults=DEFAULTS,
            new_topic_id=lambda: "id-t",
            rng=random.Random(0),
        ),
    )
    return image


def shrink_then_expand(image: MetadataImage, follower: int, epoch: int) -> tuple[str, str]:
    """Leader drops `follower`, then asks to add it back naming broker epoch `epoch`."""
    state = image.partition("t", 0)
    assert state is not None
    leader = state.leader
    epochs = {b: image.brokers[b].broker_epoch for b in image.brokers}
    rest = tuple(r for r in state.isr if r != follower)
    records, answers = alter_partitions_records(
        image,
        leader,
        epochs[leader],
        [IsrChange("t", 0, state.leader_epoch, state.partition_epoch, rest, ())],
    )
    assert answers == [("NONE", "")]
    commit(image, records)
    state = image.partition("t", 0)
    assert state is not None
    isr = tuple(r for r in state.replicas if r in {*state.isr, follower})
    change = IsrChange(
        "t",
        0,
        state.leader_epoch,
        state.partition_epoch,
        isr,
        tuple(epoch if r == follower else epochs[r] for r in isr),
    )
    records, answers = alter_partitions_records(image, leader, epochs[leader], [change])
    commit(image, records)
    return answers[0]


def test_an_isr_expansion_naming_the_registered_broker_epoch_is_accepted(
    image: MetadataImage,
) -> None:
    state = image.partition("t", 0)
    assert state is not None
    follower = state.replicas[1]
    assert shrink_then_expand(image, follower, image.brokers[follower].broker_epoch) == (
        "NONE",
        "",
    )
    after = image.partition("t", 0)
    assert after is not None and follower in after.isr


def test_a_stale_broker_epoch_is_rejected_with_ineligible_replica(image: MetadataImage) -> None:
    """KIP-903: the follower restarted (a new registration) after the leader saw it fetch;
    the leader's expansion names the old incarnation's epoch and must be refused."""
    state = image.partition("t", 0)
    assert state is not None
    follower = state.replicas[1]
    old_epoch = image.brokers[follower].broker_epoch
    new_epoch = register(image, follower, 100)
    assert new_epoch > old_epoch
    error, message = shrink_then_expand(image, follower, old_epoch)
    assert error == "INELIGIBLE_REPLICA"
    assert f"broker epoch {old_epoch}" in message and str(new_epoch) in message
    after = image.partition("t", 0)
    assert after is not None and follower not in after.isr
    # Unknown (-1) is not checked, as Kafka's older AlterPartition versions.
    assert shrink_then_expand(image, follower, -1)[0] == "NONE"


def test_a_fenced_or_unregistered_member_is_ineligible(image: MetadataImage) -> None:
    state = image.partition("t", 0)
    assert state is not None
    follower = state.replicas[2]
    commit(image, fence_broker_records(image, follower, DEFAULTS))
    epoch = image.brokers[follower].broker_epoch
    error, message = shrink_then_expand(image, follower, epoch)
    assert error == "INELIGIBLE_REPLICA" and f"broker {follower} is fenced" in message


def test_the_senders_own_stale_epoch_fails_the_whole_request(image: MetadataImage) -> None:
    state = image.partition("t", 0)
    assert state is not None
    leader_epoch = image.brokers[state.leader].broker_epoch
    change = IsrChange("t", 0, state.leader_epoch, state.partition_epoch, state.isr, ())
    with pytest.raises(ControlError) as e:
        alter_partitions_records(image, state.leader, leader_epoch - 1, [change])
    assert e.value.error_name == "STALE_BROKER_EPOCH"
    with pytest.raises(ControlError) as e:
        alter_partitions_records(image, 9, 1, [change])
    assert e.value.error_name == "BROKER_NOT_AVAILABLE"


def test_epoch_errors_use_the_proto_error_names(image: MetadataImage) -> None:
    state = image.partition("t", 0)
    assert state is not None
    epoch = image.brokers[state.leader].broker_epoch
    changes = [
        IsrChange("t", 0, state.leader_epoch - 1, state.partition_epoch, state.isr, ()),
        IsrChange("t", 0, state.leader_epoch, state.partition_epoch + 1, state.isr, ()),
        IsrChange("t", 0, state.leader_epoch, state.partition_epoch, state.isr[1:], ()),
        IsrChange("t", 0, state.leader_epoch, state.partition_epoch, state.isr, (1,)),
        IsrChange("t", 5, state.leader_epoch, state.partition_epoch, state.isr, ()),
    ]
    _records, answers = alter_partitions_records(image, state.leader, epoch, changes)
    assert [a[0] for a in answers] == [
        "FENCED_LEADER_EPOCH",
        "INVALID_UPDATE_VERSION",
        "INVALID_REQUEST",
        "INVALID_REQUEST",
        "UNKNOWN_TOPIC_OR_PARTITION",
    ]
    from seglog.proto import errors_pb2

    for name, _ in answers:
        errors_pb2.ErrorCode.Value(name)  # every name is one of the proto's


def test_a_reregistration_fences_the_old_incarnation_out_of_the_isr(
    image: MetadataImage,
) -> None:
    """A broker back from a crash may have lost its unflushed tail: its new registration
    takes the old incarnation out of every ISR and its leaderships elsewhere."""
    state = image.partition("t", 0)
    assert state is not None
    leader = state.leader
    register(image, leader, 200)
    after = image.partition("t", 0)
    assert after is not None
    assert after.leader != leader and leader not in after.isr
    assert after.leader_epoch == state.leader_epoch + 1
    with pytest.raises(ControlError) as e:
        register_broker_records(image, RegisterBrokerRecord(leader, 1, "h", 1, None), DEFAULTS)
    assert e.value.error_name == "STALE_BROKER_EPOCH"


# --- CreateTopics' and CreatePartitions' explicit replica assignments ---------------------


@pytest.fixture
def fenced_3() -> MetadataImage:
    """Brokers 1-3 registered, 3 fenced."""
    image = MetadataImage()
    for b in (1, 2, 3):
        epoch = register(image, b, b * 10)
    commit(image, [BrokerFenceRecord(3, epoch, True)])
    return image


def create_manual(
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


def test_manual_replicas_in_the_given_order_the_first_unfenced_one_leads(fenced_3):
    records = create_manual(fenced_3, "m", [(0, (1, 2)), (1, (3, 2))])
    parts = [r for r in records if isinstance(r, PartitionRecord)]
    assert [(p.replicas, p.isr, p.leader) for p in parts] == [
        ((1, 2), (1, 2), 1),
        ((3, 2), (2,), 2),  # 3 is fenced: not in the ISR, not the leader
    ]


@pytest.mark.parametrize(
    "assignments",
    [
        [(0, (1, 9))],  # not registered
        [(0, (2, 2))],  # twice
        [(0, (1, 2)), (1, (3,))],  # replication factor
        [(0, (1,)), (2, (2,))],  # a gap
        [(0, (1,)), (0, (2,))],  # a partition twice
        [(0, (3,))],  # every replica fenced
        [(0, ())],  # no replica
    ],
)
def test_manual_assignments_kafka_refuses(fenced_3, assignments):
    with pytest.raises(ControlError) as refused:
        create_manual(fenced_3, "bad", assignments)
    assert refused.value.error_name == "INVALID_REPLICA_ASSIGNMENT"


def test_manual_assignment_counts_must_be_minus_one(fenced_3):
    for partitions, rf in ((1, -1), (-1, 1)):
        with pytest.raises(ControlError) as refused:
            create_manual(fenced_3, "bad", [(0, (1,))], partitions, rf)
        assert refused.value.error_name == "INVALID_REQUEST"


def test_create_partitions_places_each_new_partition_where_asked(fenced_3):
    commit(fenced_3, create_manual(fenced_3, "m", [(0, (1, 2))]))
    grown = create_partitions_records(fenced_3, "m", 3, random.Random(1), [(2, 1), (3, 2)])
    assert [(r.partition, r.replicas, r.isr, r.leader) for r in grown] == [  # type: ignore[union-attr]
        (1, (2, 1), (2, 1), 2),
        (2, (3, 2), (2,), 2),
    ]
    for wrong in ([(2, 1)], [(2,), (1,)], [(1, 1), (2, 1)]):  # count, rf, twice
        with pytest.raises(ControlError) as refused:
            create_partitions_records(fenced_3, "m", 3, random.Random(1), wrong)
        assert refused.value.error_name == "INVALID_REPLICA_ASSIGNMENT"
