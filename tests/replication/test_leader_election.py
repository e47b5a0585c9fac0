"""The operator's leader elections (KIP-460) as the controller decides them: pure
functions over a metadata image."""

from __future__ import annotations

import pytest

from seglog.controller.cluster_control import (
    PREFERRED,
    UNCLEAN,
    ControlError,
    elect_leaders_records,
)
from seglog.controller.metadata_image import MetadataImage
from seglog.controller.metadata_records import (
    BrokerFenceRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)


def image(partitions: dict[int, tuple[tuple[int, ...], tuple[int, ...], int]], fenced=()):
    """Brokers 1-3 (those in `fenced` fenced) and topic t: partition -> (replicas, isr,
    leader)."""
    im = MetadataImage()
    for b in (1, 2, 3):
        im.apply(RegisterBrokerRecord(b, 10 + b, "h", 9000 + b))
        im.apply(BrokerFenceRecord(b, 10 + b, b in fenced))
    im.apply(TopicRecord("t", "tid"))
    for p, (replicas, isr, leader) in partitions.items():
        im.apply(PartitionRecord("tid", p, replicas, isr, leader, 5, 7))
    return im


def apply_all(im: MetadataImage, records: list) -> MetadataImage:
    for r in records:
        im.apply(r)
    return im


def test_preferred_moves_leadership_to_the_first_replica_in_the_isr() -> None:
    im = image({0: ((1, 2, 3), (1, 2, 3), 2), 1: ((2, 3, 1), (2, 3, 1), 2)})
    records, results = elect_leaders_records(im, PREFERRED, [("t", 0), ("t", 1)])
    assert results == {("t", 0): "NONE", ("t", 1): "ELECTION_NOT_NEEDED"}
    state = apply_all(im, records).topics["t"].partitions[0]
    assert (state.leader, state.isr, state.leader_epoch, state.partition_epoch) == (
        1,
        (1, 2, 3),
        6,
        8,
    )


def test_preferred_is_refused_when_the_first_replica_is_out_of_sync_or_fenced() -> None:
    im = image({0: ((1, 2, 3), (2, 3), 2), 1: ((3, 1, 2), (1, 2, 3), 1)}, fenced=(3,))
    records, results = elect_leaders_records(im, PREFERRED, [("t", 0), ("t", 1)])
    assert records == []
    assert results == {
        ("t", 0): "PREFERRED_LEADER_NOT_AVAILABLE",
        ("t", 1): "PREFERRED_LEADER_NOT_AVAILABLE",
    }


def test_unclean_gives_a_leaderless_partition_a_replica_outside_the_isr() -> None:
    # The only ISR member (1) is fenced: a clean election is impossible.
    im = image({0: ((1, 2, 3), (1,), -1), 1: ((2, 3, 1), (2, 3), 2)}, fenced=(1,))
    records, results = elect_leaders_records(im, UNCLEAN, [("t", 0), ("t", 1)])
    assert results == {("t", 0): "NONE", ("t", 1): "ELECTION_NOT_NEEDED"}
    state = apply_all(im, records).topics["t"].partitions[0]
    assert state.leader == 2 and state.isr == (2,)


def test_unclean_with_no_live_replica_is_refused() -> None:
    im = image({0: ((1, 2), (1,), -1)}, fenced=(1, 2))
    records, results = elect_leaders_records(im, UNCLEAN, [("t", 0)])
    assert (records, results) == ([], {("t", 0): "ELIGIBLE_LEADERS_NOT_AVAILABLE"})


def test_all_partitions_reports_only_what_needed_an_election() -> None:
    im = image({0: ((1, 2, 3), (1, 2, 3), 1), 1: ((1, 2, 3), (1, 2, 3), 3)})
    records, results = elect_leaders_records(im, PREFERRED, None)
    assert results == {("t", 1): "NONE"} and len(records) == 1


def test_unknown_partitions_and_election_types_are_named() -> None:
    im = image({0: ((1,), (1,), 1)})
    _, results = elect_leaders_records(im, PREFERRED, [("t", 9), ("nope", 0)])
    assert results == {
        ("t", 9): "UNKNOWN_TOPIC_OR_PARTITION",
        ("nope", 0): "UNKNOWN_TOPIC_OR_PARTITION",
    }
    with pytest.raises(ControlError, match="unknown election type"):
        elect_leaders_records(im, "random", None)
