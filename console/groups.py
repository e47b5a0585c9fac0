"""A consumer group as the console shows it, computed without I/O: the lag rows of
`seglog consumer-groups --describe` (committed offset, log end, lag, owner) and the
offsets a reset would commit (refused while the group has members, as the CLI)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from seglog.client.admin import GroupInformation
from seglog.client.cluster import TopicPartition
from seglog.client.group_coordinator import OffsetAndMetadata

# The states in which a group's offsets may be reset from outside (Kafka's rule).
INACTIVE_STATES = ("Empty", "Dead")
RESET_TARGETS = ("earliest", "latest", "offset")


@dataclass(frozen=True, slots=True)
class LagRow:
    topic: str
    partition: int
    current: int | None  # the committed offset, None when none
    log_end: int | None  # the high watermark, None when the partition is gone
    lag: int | None
    member: str  # the consumer's id, "-" when unassigned
    host: str
    client_id: str


def lag_rows(
    info: GroupInformation,
    committed: Mapping[TopicPartition, OffsetAndMetadata],
    ends: Mapping[TopicPartition, int],
) -> list[LagRow]:
    """One row per partition the group committed or has assigned, sorted, with
    LAG = log end (high watermark) - committed offset."""
    owner: dict[TopicPartition, tuple[str, str, str]] = {}
    for m in info.members:
        for tp in m.member_assignment:
            owner[tp] = (m.member_id, m.client_host, m.client_id)
    rows = []
    for tp in sorted(set(owner) | set(committed), key=lambda tp: (tp.topic, tp.partition)):
        om = committed.get(tp)
        end = ends.get(tp)
        member, host, client = owner.get(tp, ("-", "-", "-"))
        rows.append(
            LagRow(
                tp.topic,
                tp.partition,
                om.offset if om is not None else None,
                end,
                end - om.offset if om is not None and end is not None else None,
                member,
                host,
                client,
            )
        )
    return rows


def refuse_reset(info: GroupInformation) -> str | None:
    """Why the group's offsets may not be reset now (the CLI's words), or None."""
    if info.state not in INACTIVE_STATES:
        return (
            f"Assignments can only be reset if the group '{info.group}' is inactive, "
            f"but the current state is {info.state}."
        )
    return None


def reset_offsets(
    target: str,
    offset: int | None,
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
) -> dict[TopicPartition, int]:
    """The offsets to commit per partition: the log start, the high watermark, or
    `offset` clamped into [log start, high watermark] as Kafka's tool does."""
    if target not in RESET_TARGETS:
        raise ValueError(f"reset target {target!r} is not one of {', '.join(RESET_TARGETS)}")
    if target == "offset" and offset is None:
        raise ValueError("a reset to an offset needs the offset")
    out = {}
    for tp, low in earliest.items():
        high = latest.get(tp)
        if high is None:
            raise ValueError(f"partition {tp.topic}-{tp.partition} has no high watermark")
        if target == "earliest":
            out[tp] = low
        elif target == "latest":
            out[tp] = high
        else:
            assert offset is not None
            out[tp] = min(max(offset, low), high)
    return out
