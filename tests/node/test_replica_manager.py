"""The replica manager against metadata images, in process (no gRPC): a topic deleted
and created again under the same name, within one metadata update, replaces the old
incarnation's replica and log."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

from seglog.controller.metadata_image import MetadataImage
from seglog.controller.metadata_records import (
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from seglog.node.log_manager import LogManager
from seglog.node.replica_manager import ReplicaManager
from seglog.storage.log import now_ms
from seglog.storage.log_config import BrokerLogSettings, LogConfig
from seglog.storage.partition_metadata import new_topic_id
from seglog.storage.record_batch import NewRecord, build_batch

TP = ("t", 0)


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[ReplicaManager]:
    logs = LogManager(
        (tmp_path,),
        LogConfig.defaults(),
        BrokerLogSettings.defaults(),
        clock=now_ms,
        rng=random.Random(0),
    )
    logs.load()
    m = ReplicaManager(1, logs, lambda _topic: LogConfig.defaults())
    try:
        yield m
    finally:
        m.shutdown()


def test_a_topic_deleted_and_created_again_in_one_update_starts_afresh(manager) -> None:
    image = MetadataImage()
    old_id, new_id = new_topic_id(), new_topic_id()
    first = [
        TopicRecord("t", old_id),
        PartitionRecord(old_id, 0, (1, 2, 3), (1, 2, 3), 1, 0, 0),
        PartitionChangeRecord(old_id, 0, 2, (1, 2, 3), 1, 1),  # leader epoch 1
    ]
    for r in first:
        image.apply(r)
    manager.on_metadata(image, first)
    hp = manager.hosted(TP)
    assert hp is not None and hp.topic_id == old_id and hp.replica.leader_epoch == 1
    with hp.plog.lock:
        hp.plog.log.append_as_follower(build_batch([NewRecord(b"old")]))
    # Replayed together, as by a node that restarts: the deletion and the new topic,
    # whose leader epoch (0) is below the old incarnation's.
    second = [
        RemoveTopicRecord(old_id),
        TopicRecord("t", new_id),
        PartitionRecord(new_id, 0, (1, 2, 3), (1, 2, 3), 1, 0, 0),
    ]
    for r in second:
        image.apply(r)
    manager.on_metadata(image, second)
    hp = manager.hosted(TP)
    assert hp is not None and hp.topic_id == new_id
    assert hp.replica.is_leader and hp.replica.leader_epoch == 0
    assert hp.plog.log.log_end_offset == 0  # none of the old incarnation's data
    assert hp.plog.log.topic_id == new_id
