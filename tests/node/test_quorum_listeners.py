"""The quorum controller's metadata listeners while a restarting controller replays its
log: records are applied to the image at once but published only once the replay has
caught up with the commit index. A listener added meanwhile (a broker's metadata watch
connecting during the replay) must get them once: in its first image, not again as a
delta. It got both, and the broker's image refused the RegisterBrokerRecord it already
held ("broker 2 epoch must rise"), which killed its metadata watch for good (found by
the many-partitions chaos scenario under load)."""

from __future__ import annotations

import random
from pathlib import Path

from seglog.controller.metadata_image import MetadataImage
from seglog.controller.metadata_records import (
    MetadataRecord,
    RegisterBrokerRecord,
    encode_entry,
)
from seglog.controller.raft import RaftNode
from seglog.node.controller.quorum_controller import QuorumController
from seglog.storage.log_config import LogConfig


def test_a_listener_added_during_the_replay_gets_each_record_once(tmp_path: Path) -> None:
    qc = QuorumController(
        1, {1: ("127.0.0.1", 1)}, tmp_path, LogConfig.defaults(), random.Random(0)
    )
    raft = RaftNode(1, [1], rng=random.Random(0))
    raft._commit = 3  # the replay runs up to index 3 (white-box: not started)
    qc._raft = raft
    register = [
        RegisterBrokerRecord(broker_id=b, broker_epoch=b, host="127.0.0.1", port=9000 + b)
        for b in (1, 2, 3)
    ]
    seen: list[tuple[bool, list[MetadataRecord]]] = []
    watcher_image = MetadataImage()  # what a broker's watch builds from what it is given

    def watch(image: MetadataImage, records: list[MetadataRecord]) -> None:
        nonlocal watcher_image
        if not records:  # a snapshot
            watcher_image = MetadataImage()
            for r in image.to_records():
                watcher_image.apply(r)
        else:
            for r in records:
                watcher_image.apply(r)  # raises for a broker epoch applied twice
        seen.append((not records, list(records)))

    qc._apply(1, 1, encode_entry([register[0]]))
    qc._apply(2, 1, encode_entry([register[1]]))
    qc.add_listener(watch)  # mid-replay: nothing yet, the first image waits
    assert seen == []
    qc._apply(3, 1, encode_entry([register[2]]))
    assert seen == [(True, [])]
    assert sorted(watcher_image.brokers) == [1, 2, 3]
    # From then on, deltas.
    qc._apply(4, 1, encode_entry([RegisterBrokerRecord(2, 7, "127.0.0.1", 9002)]))
    assert seen[-1] == (False, [RegisterBrokerRecord(2, 7, "127.0.0.1", 9002)])
    assert watcher_image.brokers[2].broker_epoch == 7
    # A listener added when nothing is pending gets its snapshot at once.
    late: list[bool] = []
    qc.add_listener(lambda _image, records: late.append(not records))
    assert late == [True]
