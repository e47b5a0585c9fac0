"""What the Raft simulator's nodes hold: the replicated state machine (batches of
metadata records applied to a `MetadataImage`) and the disk that survives a crash
(exactly what the node's Readies persisted)."""

from __future__ import annotations

from dataclasses import dataclass, field

from seglog.controller.metadata_image import MetadataImage
from seglog.controller.metadata_records import (
    TOPIC_RESOURCE,
    ConfigRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    decode_entry,
)
from seglog.controller.raft import Entry, PersistentState, Ready, Snapshot

# ---- the replicated state machine: batches of metadata records ---------------------------


def _admissible(image: MetadataImage, r: MetadataRecord) -> bool:
    """Whether a record still fits the image. KRaft's active controller decides on its
    uncommitted in-memory state, so it never proposes a misfit; our simulated clients
    decide on a possibly stale applied image, so the state machine skips misfits —
    deterministically, so every node skips the same ones."""
    match r:
        case RegisterBrokerRecord():
            old = image.brokers.get(r.broker_id)
            return old is None or r.broker_epoch > old.broker_epoch
        case TopicRecord():
            return r.name not in image.topics and r.topic_id not in image.topic_names_by_id
        case PartitionRecord():
            return r.topic_id in image.topic_names_by_id
        case PartitionChangeRecord():
            name = image.topic_names_by_id.get(r.topic_id)
            state = image.topics[name].partitions.get(r.partition) if name else None
            return (
                state is not None
                and r.partition_epoch > state.partition_epoch
                and r.leader_epoch >= state.leader_epoch
            )
        case RemoveTopicRecord():
            return r.topic_id in image.topic_names_by_id
        case ConfigRecord():
            return r.resource_type != TOPIC_RESOURCE or r.resource_name in image.topics
        case ProducerIdsRecord():
            return r.next_producer_id > image.next_producer_id
        case _:
            return True


def apply_batch(image: MetadataImage, data: bytes) -> None:
    for r in decode_entry(data):
        if _admissible(image, r):
            image.apply(r)


def image_from_snapshot(data: bytes) -> MetadataImage:
    image = MetadataImage()
    for r in decode_entry(data):
        image.apply(r)
    return image


@dataclass(slots=True)
class SimDisk:
    """What survives a crash: exactly what the node's Readies persisted."""

    term: int = 0
    voted_for: int | None = None
    snapshot: Snapshot | None = None
    entries: list[Entry] = field(default_factory=list)

    def base(self) -> int:
        return self.snapshot.index if self.snapshot else 0

    def persist(self, rd: Ready) -> None:
        if rd.snapshot is not None:
            self.snapshot, self.entries = rd.snapshot, []
        if rd.truncate_from is not None:
            del self.entries[max(0, rd.truncate_from - self.base() - 1) :]
        if rd.entries:
            expected = self.base() + len(self.entries) + 1
            assert rd.entries[0].index == expected, (
                f"persisted log ends at {expected - 1}, Ready appends from {rd.entries[0].index}"
            )
            self.entries.extend(rd.entries)
        if rd.hard_state is not None:
            self.term, self.voted_for = rd.hard_state.term, rd.hard_state.voted_for

    def compact(self, snapshot: Snapshot) -> None:
        del self.entries[: snapshot.index - self.base()]
        self.snapshot = snapshot

    def load(self) -> PersistentState:
        return PersistentState(self.term, self.voted_for, self.snapshot, tuple(self.entries))
