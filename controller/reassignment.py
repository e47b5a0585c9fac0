"""Partition reassignment (KIP-455) as pure decisions: the applied image and an
operator's targets in, metadata records out; the controller commits them.

A reassignment of a partition to a target replica set runs in two steps, each one
PartitionChangeRecord:
  1. start: replicas become target + the replicas leaving (`removing_replicas`); the
     target's new members (`adding_replicas`) start as followers and catch up;
  2. complete: once every target replica is in the ISR (the leader adds them with
     AlterPartition as they catch up), replicas become the target, the ISR loses the
     removed ones, and leadership moves if the leader was removed.
A new target replaces a running reassignment; a cancel (target None) goes back to
the original replicas (Kafka's AlterPartitionReassignments with null replicas).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from seglog.controller.metadata_image import MetadataImage, PartitionState
from seglog.controller.metadata_records import MetadataRecord, PartitionChangeRecord

NONE = "NONE"


@dataclass(frozen=True, slots=True)
class OngoingReassignment:
    """One partition's running reassignment, as ListPartitionReassignments answers."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    adding_replicas: tuple[int, ...]
    removing_replicas: tuple[int, ...]


def _record(
    topic_id: str,
    partition: int,
    state: PartitionState,
    leader: int,
    isr: tuple[int, ...],
    replicas: tuple[int, ...],
    adding: tuple[int, ...],
    removing: tuple[int, ...],
) -> PartitionChangeRecord:
    replicas_changed = (replicas, adding, removing) != (
        state.replicas,
        state.adding_replicas,
        state.removing_replicas,
    )
    return PartitionChangeRecord(
        topic_id,
        partition,
        leader,
        isr,
        state.leader_epoch + 1 if leader != state.leader else state.leader_epoch,
        state.partition_epoch + 1,
        replicas if replicas_changed else None,
        adding if replicas_changed else None,
        removing if replicas_changed else None,
    )


def _leader_among(
    state: PartitionState, candidates: tuple[int, ...], isr: tuple[int, ...], usable: set[int]
) -> int:
    """The current leader when it stays a replica and usable, else the first
    candidate (target order: the preferred first) in the ISR and usable; -1 if none."""
    if state.leader in candidates and state.leader in isr and state.leader in usable:
        return state.leader
    for r in candidates:
        if r in isr and r in usable:
            return r
    return -1


def change_record(
    topic_id: str,
    partition: int,
    state: PartitionState,
    leader: int,
    isr: tuple[int, ...],
    usable: set[int],
) -> PartitionChangeRecord:
    """A leader/ISR change; when it completes a running reassignment (every target
    replica now in the ISR) the same record completes it, as Kafka's
    PartitionChangeBuilder does."""
    if state.reassigning:
        target = state.target_replicas
        if all(r in isr for r in target):
            done_isr = tuple(r for r in isr if r in target)
            new_leader = leader if leader in target and leader in usable else -1
            if new_leader < 0:
                new_leader = _leader_among(state, target, done_isr, usable)
            if new_leader >= 0:
                return _record(topic_id, partition, state, new_leader, done_isr, target, (), ())
    return _record(
        topic_id,
        partition,
        state,
        leader,
        isr,
        state.replicas,
        state.adding_replicas,
        state.removing_replicas,
    )


def _check_target(image: MetadataImage, target: Sequence[int]) -> str | None:
    """Why the target replica set is not valid (None: it is)."""
    if not target:
        return "the target replica set is empty"
    if len(set(target)) != len(target):
        return f"the target replica set {list(target)} names a broker twice"
    unknown = sorted(r for r in target if r not in image.brokers)
    if unknown:
        return f"the target replica set {list(target)} names unregistered broker(s) {unknown}"
    return None


def alter_reassignments_records(
    image: MetadataImage,
    requests: Sequence[tuple[str, int, tuple[int, ...] | None]],
) -> tuple[list[MetadataRecord], dict[tuple[str, int], tuple[str, str]]]:
    """AlterPartitionReassignments: per (topic, partition) a target replica set, or None
    to cancel the running reassignment. Returns the records and, per partition,
    (Kafka's error name, message): NONE, UNKNOWN_TOPIC_OR_PARTITION,
    INVALID_REPLICA_ASSIGNMENT, NO_REASSIGNMENT_IN_PROGRESS, INVALID_REQUEST (a
    partition named twice)."""
    usable = set(image.unfenced_brokers())
    records: list[MetadataRecord] = []
    results: dict[tuple[str, int], tuple[str, str]] = {}
    seen: set[tuple[str, int]] = set()
    for topic, p, target in requests:
        key = (topic, p)
        if key in seen:
            results[key] = ("INVALID_REQUEST", f"{topic}-{p} is named twice in the request")
            continue
        seen.add(key)
        t = image.topics.get(topic)
        state = t.partitions.get(p) if t is not None else None
        if t is None or state is None:
            results[key] = ("UNKNOWN_TOPIC_OR_PARTITION", f"no partition {topic}-{p}")
            continue
        if target is None:
            if not state.reassigning:
                results[key] = (
                    "NO_REASSIGNMENT_IN_PROGRESS",
                    f"no reassignment of {topic}-{p} is in progress",
                )
                continue
            record = cancel_record(t.topic_id, p, state, usable)
            if record is None:
                results[key] = (
                    "INVALID_REPLICA_ASSIGNMENT",
                    f"cannot cancel the reassignment of {topic}-{p}: none of its original "
                    f"replicas {list(state.original_replicas)} is in the ISR",
                )
                continue
            records.append(record)
            results[key] = (NONE, "")
            continue
        why = _check_target(image, target)
        if why is not None:
            results[key] = ("INVALID_REPLICA_ASSIGNMENT", why)
            continue
        target = tuple(target)
        if not state.reassigning and target == state.replicas:
            results[key] = (NONE, "")  # already there: nothing to do, as Kafka
            continue
        original = state.original_replicas
        adding = tuple(r for r in target if r not in original)
        removing = tuple(r for r in state.replicas if r not in target)
        started = PartitionState(
            target + removing,
            state.isr,
            state.leader,
            state.leader_epoch,
            state.partition_epoch,
            adding,
            removing,
        )
        # Complete at once when the target is all in the ISR already (a pure shrink
        # or reorder); else start: the new replicas join as followers.
        record = change_record(t.topic_id, p, started, state.leader, state.isr, usable)
        if record.replicas is None:
            record = _record(
                t.topic_id, p, state, state.leader, state.isr, started.replicas, adding, removing
            )
        records.append(record)
        results[key] = (NONE, "")
    return records, results


def cancel_record(
    topic_id: str, partition: int, state: PartitionState, usable: set[int]
) -> PartitionChangeRecord | None:
    """Back to the original replicas: the adding ones leave (and the ISR); the leader
    moves if it was one of them. None when no original replica is in the ISR."""
    original = state.original_replicas
    isr = tuple(r for r in state.isr if r in original)
    if not isr:
        return None
    leader = _leader_among(state, original, isr, usable)
    return _record(topic_id, partition, state, leader, isr, original, (), ())


def list_reassignments(
    image: MetadataImage, partitions: Sequence[tuple[str, int]] | None
) -> list[OngoingReassignment]:
    """ListPartitionReassignments: the running reassignments among `partitions`
    (None: all of them); partitions not being reassigned are left out, as Kafka."""
    out = []
    if partitions is None:
        wanted = [(t.name, p) for t in image.topics.values() for p in sorted(t.partitions)]
    else:
        wanted = list(dict.fromkeys(partitions))
    for topic, p in wanted:
        state = image.partition(topic, p)
        if state is not None and state.reassigning:
            out.append(
                OngoingReassignment(
                    topic, p, state.replicas, state.adding_replicas, state.removing_replicas
                )
            )
    return out
