"""Where a duplicated record's copies came from, read from the leader's batch headers.

A record written twice is a duplicate either way, and it is counted either way. How the
second copy got there tells whose fault it is:

* `same_epoch`: both copies carry the same producer id and epoch. The broker should
  have recognised the retry (its producer state keeps the last five batches of each
  producer), so this is the broker's failure to deduplicate.
* `older_epoch`: a later copy carries a lower producer epoch than an earlier one. The
  broker should have refused it as fenced (INVALID_PRODUCER_EPOCH): the broker's failure.
* `epoch_bump`: same producer id, and each later copy carries a higher producer epoch.
  The client renumbered records it had already written under a new epoch. No broker
  can deduplicate across epochs. librdkafka does this after OUT_OF_ORDER_SEQUENCE_NUMBER
  on a later in-flight request (confluentinc/librdkafka issue 4953).
* `new_producer_id`: the copies come from different producer ids. The client sent the
  record again under a new identity.
* `unknown`: a copy's batch is not in the leader's files, for example below the log
  start, or the position came from an acknowledgement that was never written.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from seglog.storage.record_batch import BatchHeader

from .checker import CheckResult, parse_batches

ORIGINS = ("same_epoch", "older_epoch", "epoch_bump", "new_producer_id", "unknown")
MAX_EXAMPLES = 10

Position = tuple[int, int]  # (partition, offset)


@dataclass(frozen=True)
class CopyHeader:
    """The batch header fields of one copy of a record."""

    partition: int
    offset: int
    producer_id: int
    producer_epoch: int
    sequence: int  # of this record: the batch's base sequence plus its offset delta
    leader_epoch: int


@dataclass
class DuplicateOrigins:
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ORIGINS, 0))
    examples: dict[str, list[list[CopyHeader | Position]]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """For report.json: each example copy as its header's fields, or as the bare
        [partition, offset] when its batch was not found."""
        return {
            "counts": dict(self.counts),
            "examples": {
                origin: [
                    [asdict(c) if isinstance(c, CopyHeader) else list(c) for c in copies]
                    for copies in shown
                ]
                for origin, shown in self.examples.items()
            },
        }


def copy_headers(
    segments_by_partition: Mapping[int, Sequence[tuple[str, bytes]]], positions: set[Position]
) -> dict[Position, CopyHeader]:
    """The header of each position's batch in one replica's segments."""
    out: dict[Position, CopyHeader] = {}
    wanted: dict[int, set[int]] = {}
    for p, o in positions:
        wanted.setdefault(p, set()).add(o)
    for partition, offsets in wanted.items():
        ordered = sorted(offsets)
        batches, _problems = parse_batches(segments_by_partition.get(partition, []))
        for b in batches:
            inside = ordered[
                bisect_left(ordered, b.base_offset) : bisect_right(ordered, b.last_offset)
            ]
            if not inside:
                continue
            h = BatchHeader.parse(b.data, 0)
            for o in inside:
                seq = -1 if h.base_sequence < 0 else h.base_sequence + (o - b.base_offset)
                out[(partition, o)] = CopyHeader(
                    partition, o, h.producer_id, h.producer_epoch, seq, h.partition_leader_epoch
                )
    return out


def classify(copies: Sequence[CopyHeader | None]) -> str:
    """The origin of one duplicated record from its copies, in offset order."""
    known = [c for c in copies if c is not None]
    if len(known) < 2 or len(known) < len(copies):
        return "unknown"
    if len({c.producer_id for c in known}) > 1:
        return "new_producer_id"
    pairs = list(zip(known, known[1:], strict=False))
    if any(a.producer_epoch == b.producer_epoch for a, b in pairs):
        return "same_epoch"
    if any(a.producer_epoch > b.producer_epoch for a, b in pairs):
        return "older_epoch"
    return "epoch_bump"


def duplicate_origins(
    duplicates: Sequence[Sequence[Position]],
    leader_segments: Mapping[int, Mapping[int, Sequence[tuple[str, bytes]]]],
    leaders: Mapping[int, int],
) -> DuplicateOrigins:
    """`duplicates`: each duplicated record's positions; `leader_segments`: node ->
    partition -> segments; `leaders`: partition -> the leader whose files to read."""
    result = DuplicateOrigins()
    by_node: dict[int, set[Position]] = {}
    for positions in duplicates:
        for p, o in positions:
            node = leaders.get(p)
            if node is not None:
                by_node.setdefault(node, set()).add((p, o))
    headers: dict[Position, CopyHeader] = {}
    for node, wanted in by_node.items():
        headers.update(copy_headers(leader_segments.get(node, {}), wanted))
    for positions in duplicates:
        copies = [headers.get((p, o)) for p, o in sorted(positions)]
        origin = classify(copies)
        result.counts[origin] += 1
        shown = result.examples.setdefault(origin, [])
        if len(shown) < MAX_EXAMPLES:
            shown.append(
                [
                    c if c is not None else pos
                    for c, pos in zip(copies, sorted(positions), strict=True)
                ]
            )
    return result


def attach_duplicate_origins(
    result: CheckResult,
    leader_segments: Mapping[int, Mapping[int, Sequence[tuple[str, bytes]]]],
    leaders: Mapping[int, int],
    extra: dict[str, Any],
) -> None:
    """After a run's check: the origins' counts into `result` (the summary line) and
    their examples into `extra` (report.json and report.md). A failure to read the
    headers becomes a note; the duplicates stay counted either way."""
    if not result.duplicate_positions or not leader_segments:
        return
    try:
        origins = duplicate_origins(result.duplicate_positions, leader_segments, leaders)
    except Exception as e:  # noqa: BLE001 - the counts stand without their origins
        result.notes.append(f"could not read the duplicates' batch headers: {e!r}")
        return
    result.duplicated_by = {k: n for k, n in origins.counts.items() if n}
    extra["duplicate_origins"] = origins.to_dict()
