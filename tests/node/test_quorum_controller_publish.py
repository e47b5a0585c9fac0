"""What a restarting controller publishes to a broker that starts watching while it
replays its log: the image as a snapshot, then only records the snapshot lacks.

Found by chaos (chase-leader-term with librdkafka at 3,000 records/s): a broker watching
during its controller's replay got a snapshot and then, again, the replayed records
it already held; re-registering broker 1 at an older epoch failed its image's check,
the metadata watch thread died, and the broker sent AlterPartition with its old broker
epoch (14, registered: 52) for the rest of the run: partitions never fully replicated."""

from __future__ import annotations

import random
from pathlib import Path

from seglog.node.quorum_controller import QuorumController
from seglog.replication.metadata_image import MetadataImage
from seglog.replication.metadata_records import (
    MetadataRecord,
    RegisterBrokerRecord,
    TopicRecord,
    encode_entry,
)
from seglog.storage.log_config import LogConfig


def entry(i: int) -> list[MetadataRecord]:
    """Entry i: broker 1 registering again at epoch i (epochs must rise), a topic."""
    return [RegisterBrokerRecord(1, i, "127.0.0.1", 9000 + i), TopicRecord(f"t{i}", f"id-{i}")]


def test_a_listener_added_during_replay_gets_each_record_once(tmp_path: Path) -> None:
    qc = QuorumController(1, {1: ("127.0.0.1", 1)}, tmp_path, LogConfig(), random.Random(0))
    qc.load(clean=True)
    assert qc._raft is not None
    qc._raft._commit = 6  # replaying up to 6: nothing is published before it
    seen: list[tuple[MetadataImage, list[MetadataRecord]]] = []
    early: list[list[MetadataRecord]] = []
    qc.add_listener(lambda _image, records: early.append(list(records)))

    for i in (1, 2, 3):
        qc._apply(i, 1, encode_entry(entry(i)))
    # The broker starts watching mid-replay: its snapshot holds entries 1-3.
    snapshot: list[MetadataRecord] = []

    def broker(image: MetadataImage, records: list[MetadataRecord]) -> None:
        if not records:
            snapshot.extend(image.to_records())
        seen.append((image, list(records)))

    qc.add_listener(broker)
    for i in (4, 5, 6):
        qc._apply(i, 1, encode_entry(entry(i)))

    # The broker's image: its snapshot, then what it was given after it.
    rebuilt = MetadataImage()
    for r in snapshot:
        rebuilt.apply(r)  # would fail on a record given twice (epochs must rise)
    updates = [records for _image, records in seen[1:]]
    assert updates == [entry(4) + entry(5) + entry(6)]
    for r in updates[0]:
        rebuilt.apply(r)
    assert rebuilt.to_records() == qc.image.to_records()
    # The listener that watched from the start gets everything once, at the end.
    assert early == [[], [r for i in range(1, 7) for r in entry(i)]]
    # After the replay, every listener gets each new record.
    qc._apply(7, 1, encode_entry(entry(7)))
    assert seen[-1][1] == entry(7) and early[-1] == entry(7)
