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
  on a later in-flight request (confluentinc/librdkafka issue 4953): its epoch is one
  for the whole producer, and the bump renumbers every partition's unacknowledged
  messages from sequence 0, written ones included. Kafka's Java producer renumbers only
  the partition with the gap, and retries a batch under the epoch and sequence it was
  first sent with (TransactionManager.bumpIdempotentProducerEpoch, RecordAccumulator).
  With librdkafka's eos log kept as history (`epoch_bump` and `renumbered` events,
  chaos/implicit_acks.py), each such duplicate is tied to the bump that renumbered it
  and the broker answer that set it off (`epoch_bump_causes`), so the report says
  whether that answer was one a Kafka broker gives.
* `new_producer_id`: the copies come from different producer ids. The client sent the
  record again under a new identity.
* `unknown`: a copy's batch is not in the leader's files, for example below the log
  start, or the position came from an acknowledgement that was never written.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
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
    # not in the report: every duplicate's copies, for the origins asked (keep_all)
    all_copies: dict[str, list[list[CopyHeader | Position]]] = field(default_factory=dict)

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
    keep_all: Sequence[str] = (),
) -> DuplicateOrigins:
    """`duplicates`: each duplicated record's positions; `leader_segments`: node ->
    partition -> segments; `leaders`: partition -> the leader whose files to read;
    `keep_all`: origins whose every duplicate's copies are kept (`all_copies`), not
    only the first examples."""
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
        found = [
            c if c is not None else pos for c, pos in zip(copies, sorted(positions), strict=True)
        ]
        shown = result.examples.setdefault(origin, [])
        if len(shown) < MAX_EXAMPLES:
            shown.append(found)
        if origin in keep_all:
            result.all_copies.setdefault(origin, []).append(found)
    return result


def _cause_text(bump: Mapping[str, Any]) -> str:
    cause = bump.get("cause")
    if not cause:
        return str(bump.get("reason", "reason not logged"))
    return (
        f"{bump['reason']}: {cause['error']} from node {cause['broker']} for partition "
        f"{cause['partition']} (base sequence {cause['base_seq']}, librdkafka expected "
        f"{cause['next_seq']}) after {cause['previous_error']} for sequences "
        f"{cause['previous_seqs'][0]}..{cause['previous_seqs'][1]} "
        f"(actions {cause['previous_actions']})"
    )


def epoch_bump_causes(
    copies: Sequence[Sequence[CopyHeader | Position]], eos: Iterable[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """For `epoch_bump` duplicates (their copies' headers), the librdkafka bump that
    renumbered each: the partition's `renumbered` event for the later copy's producer id
    and epoch, and the producer's `epoch_bump` to that epoch with its cause. One entry
    per bump, with the duplicates it made; a copy whose bump was not logged counts
    under `unexplained`."""
    bumps: dict[tuple[int, int], Mapping[str, Any]] = {}  # (pid, to epoch) -> bump
    renumbered: dict[tuple[int, int, int], Mapping[str, Any]] = {}
    for e in eos:
        if e.get("type") == "epoch_bump":
            bumps[(int(e["producer_id"]), int(e["from_epoch"]) + 1)] = e
        elif e.get("type") == "renumbered":
            renumbered[(int(e["producer_id"]), int(e["to_epoch"]), int(e["partition"]))] = e
    out: dict[tuple[int, int], dict[str, Any]] = {}
    unexplained = 0
    for shown in copies:
        later = [c for c in shown[1:] if isinstance(c, CopyHeader)]
        first = shown[0]
        for c in later:
            bump = bumps.get((c.producer_id, c.producer_epoch))
            r = renumbered.get((c.producer_id, c.producer_epoch, c.partition))
            if bump is None or r is None:
                unexplained += 1
                continue
            entry = out.setdefault(
                (c.producer_id, c.producer_epoch),
                {
                    "process": bump["process"],
                    "producer_id": c.producer_id,
                    "epochs": [c.producer_epoch - 1, c.producer_epoch],
                    "t": bump.get("t"),
                    "reason": bump.get("reason"),
                    "cause": bump.get("cause"),
                    "explained": _cause_text(bump),
                    "duplicates": 0,
                    "examples": [],
                },
            )
            entry["duplicates"] += 1
            if len(entry["examples"]) < MAX_EXAMPLES:
                entry["examples"].append(
                    {
                        "partition": c.partition,
                        "first_copy": asdict(first) if isinstance(first, CopyHeader) else first,
                        "renumbered_copy": asdict(c),
                        # librdkafka's message id of the copy: the new epoch's sequence
                        # 0 is message `msgid`, whose value is `sequence_0_value`
                        "msgid": int(r["msgid"]) + c.sequence,
                        "sequence_0_value": r.get("value"),
                    }
                )
    result = list(out.values())
    if unexplained:
        result.append({"unexplained": unexplained})
    return result


def attach_duplicate_origins(
    result: CheckResult,
    leader_segments: Mapping[int, Mapping[int, Sequence[tuple[str, bytes]]]],
    leaders: Mapping[int, int],
    extra: dict[str, Any],
    eos: Iterable[Mapping[str, Any]] = (),
) -> None:
    """After a run's check: the origins' counts into `result` (the summary line) and
    their examples into `extra` (report.json and report.md). A failure to read the
    headers becomes a note; the duplicates stay counted either way. `eos`: the run's
    history events, of which the `epoch_bump` and `renumbered` ones explain the
    `epoch_bump` duplicates (a note per bump)."""
    if not result.duplicate_positions or not leader_segments:
        return
    try:
        origins = duplicate_origins(
            result.duplicate_positions, leader_segments, leaders, keep_all=("epoch_bump",)
        )
    except Exception as e:  # noqa: BLE001 - the counts stand without their origins
        result.notes.append(f"could not read the duplicates' batch headers: {e!r}")
        return
    result.duplicated_by = {k: n for k, n in origins.counts.items() if n}
    extra["duplicate_origins"] = origins.to_dict()
    bumped = origins.all_copies.get("epoch_bump", [])
    if not bumped:
        return
    causes = epoch_bump_causes(bumped, eos)
    extra["duplicate_origins"]["epoch_bump_causes"] = causes
    for c in causes:
        if "unexplained" in c:
            result.notes.append(
                f"{c['unexplained']} epoch_bump duplicate(s) without librdkafka's bump "
                "in the history (its eos log was not kept, or the line did not parse)"
            )
            continue
        result.notes.append(
            f"{c['duplicates']} epoch_bump duplicate(s) renumbered by {c['process']}'s "
            f"epoch bump {c['epochs'][0]}->{c['epochs'][1]} (producer id "
            f"{c['producer_id']}): {c['explained']}"
        )
