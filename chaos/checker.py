"""Jepsen's queue invariants over a chaos history, and the replicas' byte check.

`check_history(events)` (events as `workload.read_history` returns them):

* lost        an acknowledged value that no consumer ever read
* duplicated  a value found at two (partition, offset) positions (reads and the
              acknowledgement's own position): idempotence forbids it
* conflicts   a (partition, offset) that holds two values (reads, acknowledgements)
* phantom     a read value whose send definitely failed, or that nobody sent
* skipped     a consumer's next offset in a partition is beyond the one expected
              (its last read + 1, or the offset of a recorded seek)
* backwards   a consumer read an offset below the one expected without a seek
              (skipped and backwards: a consumer's polls skipping or not monotonic)
* nonmonotonic_send  two sends of one producer to one partition acknowledged at
              offsets out of their send order (an idempotent producer keeps order)
* commit_backwards   a group's committed offset for a partition went back: an
              acknowledged commit below one acknowledged before it, or an observer
              reading a committed offset below what it read before
* lost_commits       an acknowledged commit that a committed-offset read started
              after its acknowledgement no longer sees (it reads a lower offset)
* duplicated_commits a group member polled a record below an offset the group had
              committed (acknowledged) before the poll: consumed again after its commit
* implicit_ack_missing  a value librdkafka reported delivered on a later batch's success
              (an `implicit_ack` event, chaos/implicit_acks.py) that no consumer read

Commit events, from a group workload: `commit` (an acknowledged commit: process,
group, partition, offset = the next offset to read, t = when acknowledged) and
`committed` (a read of the group's committed offset: process, group, partition,
offset, t0 = when the read started); a `poll` may carry the consumer's `group`.

An `ok` without an offset is acknowledged at a position the client was not told:
librdkafka's idempotent producer reports records that a later batch's success
acknowledged implicitly (their own response was lost) as delivered with no offset. Such
a value must still be read (lost otherwise); only the checks by position skip it.

Timeouts and network errors are indeterminate (the workload records `definite`
only for errors that guarantee nothing was written), so reading such a value is
fine, and not reading it is not a loss.

`compare_replicas(files, offsets)`: after healing, every replica's log must be
byte-identical to the leader's below the high watermark. Each replica's segment
files are cut at the HW's byte position (the end of the last batch below it) and
the prefixes compared batch by batch, reporting the first differing offset.

`compare_compacted_replicas(files, offsets)`: for compacted topics each replica
cleans its own log, so bytes differ; below the HW, every offset both replicas
still hold must carry the same key and value, offsets must only grow, and a
replica that reached the HW must hold the same live value (the last non-null
value) for every key as the leader.
"""

from __future__ import annotations

import bisect
import hashlib
import struct
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from seglog.storage.errors import StorageError
from seglog.storage.record_batch import decode_records, iter_batches

# The examples kept per violation kind (the counts are exact).
MAX_EXAMPLES = 20
MAX_DUPLICATE_POSITIONS = 100_000  # duplicated values whose origin is looked up


@dataclass
class Violations:
    lost: list[dict[str, Any]] = field(default_factory=list)
    duplicated: list[dict[str, Any]] = field(default_factory=list)
    conflicts: list[dict[str, Any]] = field(default_factory=list)
    phantom: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, Any]] = field(default_factory=list)
    backwards: list[dict[str, Any]] = field(default_factory=list)
    divergent: list[dict[str, Any]] = field(default_factory=list)
    nonmonotonic_send: list[dict[str, Any]] = field(default_factory=list)
    commit_backwards: list[dict[str, Any]] = field(default_factory=list)
    lost_commits: list[dict[str, Any]] = field(default_factory=list)
    duplicated_commits: list[dict[str, Any]] = field(default_factory=list)
    implicit_ack_missing: list[dict[str, Any]] = field(default_factory=list)


INVARIANTS = (
    "lost",
    "duplicated",
    "conflicts",
    "phantom",
    "skipped",
    "backwards",
    "divergent",
    "nonmonotonic_send",
    "commit_backwards",
    "lost_commits",
    "duplicated_commits",
    "implicit_ack_missing",
)


@dataclass
class CheckResult:
    sent: int = 0
    acknowledged: int = 0
    acknowledged_without_offset: int = 0  # of those, acknowledged at no known position
    failed_definite: int = 0
    indeterminate: int = 0  # failed without certainty, or no outcome at all
    indeterminate_read: int = 0  # of those, found in the log (written after all)
    read_records: int = 0
    distinct_values_read: int = 0
    lost: int = 0
    duplicated: int = 0
    conflicts: int = 0
    phantom: int = 0
    skipped: int = 0
    backwards: int = 0
    divergent: int = 0  # partitions whose caught-up replicas differ below the HW
    nonmonotonic_send: int = 0
    commit_backwards: int = 0
    lost_commits: int = 0
    duplicated_commits: int = 0
    implicit_ack_missing: int = 0
    implicit_acks: int = 0  # values librdkafka acknowledged implicitly (any outcome)
    commits: int = 0  # acknowledged commits in the history
    lagging: int = 0  # replicas short of the HW after healing (liveness, not safety)
    unreconciled: int = 0  # of those, replicas whose tail differs from the leader's
    final_read_complete: bool | None = None
    # Every duplicated value's positions (bounded), for chaos/duplicate_origins.py;
    # not in report.json, which has the examples and the origins' counts.
    duplicate_positions: list[list[tuple[int, int]]] = field(default_factory=list, repr=False)
    duplicated_by: dict[str, int] = field(default_factory=dict)  # origin -> count
    examples: Violations = field(default_factory=Violations)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed_invariants()

    def failed_invariants(self) -> list[str]:
        return [n for n in INVARIANTS if getattr(self, n)]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        del d["duplicate_positions"]
        d["ok"] = self.ok
        d["failed_invariants"] = self.failed_invariants()
        return d


def skipped_example(
    consumer: str, partition: int, expected: int, got: int, missing: int, t: Any
) -> dict[str, Any]:
    """The example of a poll that jumped past acknowledged records (both checkers)."""
    return {
        "consumer": consumer,
        "partition": partition,
        "expected": expected,
        "got": got,
        "missing": missing,
        "t": t,
    }


def unplaced_lost_example(value: str, invoke: Mapping[str, Any] | None) -> dict[str, Any]:
    """The example of an unread value acknowledged without an offset (both checkers)."""
    partition = None if invoke is None else invoke.get("partition")
    return {"value": value, "partition": partition, "offset": None, "held_instead": []}


def _keep(bucket: list[dict[str, Any]], item: dict[str, Any]) -> None:
    if len(bucket) < MAX_EXAMPLES:
        bucket.append(item)


def check_implicit_acks(
    r: CheckResult,
    events: Iterable[Mapping[str, Any]],
    were_read: Callable[[Sequence[str]], Sequence[bool]],
) -> None:
    """implicit_ack_missing: every value of an `implicit_ack` event must have been read."""
    for e in events:
        values = list(e["values"])
        r.implicit_acks += len(values)
        for value, read in zip(values, were_read(values), strict=True):
            if not read:
                r.implicit_ack_missing += 1
                _keep(
                    r.examples.implicit_ack_missing,
                    {
                        "value": value,
                        "process": e.get("process"),
                        "partition": e.get("partition"),
                        "msgids": e.get("msgids"),
                        "t": e.get("t"),
                    },
                )


def _is_compacted(events: Sequence[Mapping[str, Any]]) -> bool:
    for e in events:
        if e.get("type") == "meta":
            policy = str((e.get("topic_configs") or {}).get("cleanup.policy", ""))
            return "compact" in policy
    return False


def check_history(
    events: Iterable[Mapping[str, Any]], *, compacted: bool | None = None
) -> CheckResult:
    """The invariants above. On a compacted topic (`compacted`, default: as the
    history's meta event says) the cleaner may remove a value once a later record with
    the same key is in the partition: such a value unread is not lost, and a consumer
    may jump over offsets, unless it jumps over a value still required (the last of
    its key)."""
    events = list(events)
    if compacted is None:
        compacted = _is_compacted(events)
    r = CheckResult()
    key_of: dict[str, str] = {}
    jumps: list[tuple[str, int, int, int, Any]] = []
    invoked: dict[str, Mapping[str, Any]] = {}
    acked: dict[str, tuple[int, int]] = {}
    unplaced: set[str] = set()  # acknowledged without an offset
    failed: dict[str, Mapping[str, Any]] = {}
    # value -> positions; (partition, offset) -> values; each with where it was seen
    positions: dict[str, set[tuple[int, int]]] = defaultdict(set)
    values_at: dict[tuple[int, int], set[str]] = defaultdict(set)
    seen_by: dict[tuple[int, int], dict[str, str]] = defaultdict(dict)
    read_values: set[str] = set()
    # (consumer, partition) -> the offset its next read must have
    expected: dict[tuple[str, int], int] = {}
    # (producer, partition) -> its values in send order
    send_order: dict[tuple[str, int], list[str]] = defaultdict(list)
    commit_events: list[Mapping[str, Any]] = []
    implicit: list[Mapping[str, Any]] = []
    for e in events:
        kind = e.get("type")
        if kind in ("commit", "committed") or (kind == "poll" and "group" in e):
            commit_events.append(e)
        if kind == "invoke":
            invoked[e["value"]] = e
            if "partition" in e:
                send_order[(str(e.get("process")), int(e["partition"]))].append(e["value"])
            if "key" in e:
                key_of[e["value"]] = e["key"]
        elif kind == "ok" and e.get("offset") is None:
            unplaced.add(e["value"])
        elif kind == "ok":
            value, pos = e["value"], (int(e["partition"]), int(e["offset"]))
            acked[value] = pos
            positions[value].add(pos)
            values_at[pos].add(value)
            seen_by[pos].setdefault(value, f"ack by {e.get('process')}")
        elif kind == "fail":
            failed[e["value"]] = e
        elif kind == "implicit_ack":
            implicit.append(e)
        elif kind == "seek":
            if e.get("offset") is None:  # where it restarts is unknown: the next read says
                expected.pop((e["process"], int(e["partition"])), None)
            else:
                expected[(e["process"], int(e["partition"]))] = int(e["offset"])
        elif kind == "poll":
            r.read_records += 1
            value, p, o = e["value"], int(e["partition"]), int(e["offset"])
            read_values.add(value)
            positions[value].add((p, o))
            values_at[(p, o)].add(value)
            seen_by[(p, o)].setdefault(value, f"read by {e.get('process')}")
            key = (e["process"], p)
            want = expected.get(key)
            if want is not None and o > want and compacted:
                jumps.append((key[0], p, want, o, e.get("t")))
            elif want is not None and o > want:
                r.skipped += 1
                _keep(
                    r.examples.skipped,
                    {
                        "consumer": key[0],
                        "partition": p,
                        "expected": want,
                        "got": o,
                        "missing": o - want,
                        "t": e.get("t"),
                    },
                )
            elif want is not None and o < want:
                r.backwards += 1
                _keep(
                    r.examples.backwards,
                    {
                        "consumer": key[0],
                        "partition": p,
                        "expected": want,
                        "got": o,
                        "t": e.get("t"),
                    },
                )
            expected[key] = o + 1
    unplaced.difference_update(acked)  # an ack with a position says more
    r.sent = len(invoked)
    r.acknowledged = len(acked) + len(unplaced)
    r.acknowledged_without_offset = len(unplaced)
    r.distinct_values_read = len(read_values)
    r.failed_definite = sum(1 for f in failed.values() if f.get("definite"))
    outcome_unknown = {
        v
        for v in invoked
        if v not in acked and v not in unplaced and not (v in failed and failed[v].get("definite"))
    }
    r.indeterminate = len(outcome_unknown)
    r.indeterminate_read = len(outcome_unknown & read_values)
    _check_send_order(r, send_order, acked)
    _check_commits(r, commit_events)

    # (partition, key) -> the highest offset known to hold that key (acked or read)
    newest: dict[tuple[int, str], int] = {}
    for value, where in positions.items():
        k = key_of.get(value)
        if k is not None:
            for p, o in where:
                newest[(p, k)] = max(newest.get((p, k), -1), o)

    def superseded(value: str, pos: tuple[int, int]) -> bool:
        k = key_of.get(value)
        return compacted and k is not None and newest.get((pos[0], k), -1) > pos[1]

    required: dict[int, list[int]] = defaultdict(list)
    for value, pos in acked.items():
        if not superseded(value, pos):
            required[pos[0]].append(pos[1])
    for offsets in required.values():
        offsets.sort()
    for consumer, p, want, got, t in jumps:
        offsets = required.get(p, [])
        over = bisect.bisect_left(offsets, got) - bisect.bisect_left(offsets, want)
        if over:
            r.skipped += 1
            _keep(r.examples.skipped, skipped_example(consumer, p, want, got, over, t))
    for value, pos in sorted(acked.items(), key=lambda kv: kv[1]):
        if value not in read_values and not superseded(value, pos):
            r.lost += 1
            _keep(
                r.examples.lost,
                {
                    "value": value,
                    "partition": pos[0],
                    "offset": pos[1],
                    "held_instead": sorted(values_at[pos] - {value}),
                },
            )
    for value in sorted(unplaced - read_values):
        r.lost += 1
        _keep(r.examples.lost, unplaced_lost_example(value, invoked.get(value)))
    check_implicit_acks(r, implicit, lambda values: [v in read_values for v in values])
    for value, where in positions.items():
        if len(where) > 1:
            r.duplicated += 1
            _keep(r.examples.duplicated, {"value": value, "positions": sorted(where)})
            if len(r.duplicate_positions) < MAX_DUPLICATE_POSITIONS:
                r.duplicate_positions.append(sorted(where))
    for pos, values in sorted(values_at.items()):
        if len(values) > 1:
            r.conflicts += 1
            _keep(
                r.examples.conflicts,
                {
                    "partition": pos[0],
                    "offset": pos[1],
                    "values": {v: seen_by[pos].get(v, "") for v in sorted(values)},
                },
            )
    for value in sorted(read_values):
        f = failed.get(value)
        if f is not None and f.get("definite"):
            r.phantom += 1
            _keep(
                r.examples.phantom,
                {"value": value, "error": f.get("error"), "positions": sorted(positions[value])},
            )
        elif value not in invoked:
            r.phantom += 1
            _keep(
                r.examples.phantom,
                {"value": value, "error": "never sent", "positions": sorted(positions[value])},
            )
    return r


def _check_send_order(
    r: CheckResult, send_order: Mapping[tuple[str, int], list[str]], acked: Mapping[str, tuple]
) -> None:
    """nonmonotonic_send: acknowledged offsets must grow in each producer's send order."""
    for (producer, partition), values in send_order.items():
        previous: tuple[str, int] | None = None
        for value in values:
            pos = acked.get(value)
            if pos is None or pos[0] != partition:
                continue
            if previous is not None and pos[1] <= previous[1]:
                r.nonmonotonic_send += 1
                _keep(
                    r.examples.nonmonotonic_send,
                    {
                        "producer": producer,
                        "partition": partition,
                        "sent_first": {"value": previous[0], "offset": previous[1]},
                        "sent_after": {"value": value, "offset": pos[1]},
                    },
                )
            previous = (value, pos[1])


def _check_commits(r: CheckResult, events: Sequence[Mapping[str, Any]]) -> None:
    """commit_backwards, lost_commits and duplicated_commits (module docstring)."""
    # (group, partition) -> acknowledged commits as (t, offset, process), history order
    acks: dict[tuple[str, int], list[tuple[float, int, str]]] = defaultdict(list)
    highest: dict[tuple[str, int], tuple[int, str]] = {}
    seen: dict[tuple[str, str, int], int] = {}  # (observer, group, partition) -> offset

    def committed_before(gp: tuple[str, int], t: float) -> tuple[int, str] | None:
        """The highest commit of `gp` acknowledged before time `t`."""
        best: tuple[int, str] | None = None
        for at, offset, process in acks.get(gp, ()):
            if at < t and (best is None or offset > best[0]):
                best = (offset, process)
        return best

    for e in events:
        kind = e["type"]
        gp = (str(e.get("group", "")), int(e["partition"]))
        offset = int(e["offset"])
        if kind == "commit":
            r.commits += 1
            top = highest.get(gp)
            if top is not None and offset < top[0]:
                r.commit_backwards += 1
                _keep(
                    r.examples.commit_backwards,
                    {
                        "group": gp[0],
                        "partition": gp[1],
                        "committed": offset,
                        "by": e.get("process"),
                        "after": top[0],
                        "committed_by": top[1],
                        "t": e.get("t"),
                    },
                )
            else:
                highest[gp] = (offset, str(e.get("process")))
            acks[gp].append((float(e.get("t", 0.0)), offset, str(e.get("process"))))
        elif kind == "committed":
            key = (str(e.get("process")), *gp)
            before = seen.get(key)
            if before is not None and offset < before:
                r.commit_backwards += 1
                _keep(
                    r.examples.commit_backwards,
                    {
                        "group": gp[0],
                        "partition": gp[1],
                        "observer": key[0],
                        "read": offset,
                        "read_before": before,
                        "t": e.get("t"),
                    },
                )
            seen[key] = offset if before is None else max(offset, before)
            best = committed_before(gp, float(e.get("t0", e.get("t", 0.0))))
            if best is not None and offset < best[0]:
                r.lost_commits += 1
                _keep(
                    r.examples.lost_commits,
                    {
                        "group": gp[0],
                        "partition": gp[1],
                        "acknowledged": best[0],
                        "committed_by": best[1],
                        "read": offset,
                        "observer": key[0],
                        "t": e.get("t"),
                    },
                )
        else:  # a group member's poll
            best = committed_before(gp, float(e.get("t", 0.0)))
            if best is not None and offset < best[0]:
                r.duplicated_commits += 1
                _keep(
                    r.examples.duplicated_commits,
                    {
                        "group": gp[0],
                        "partition": gp[1],
                        "offset": offset,
                        "value": e.get("value"),
                        "consumer": e.get("process"),
                        "committed": best[0],
                        "committed_by": best[1],
                        "t": e.get("t"),
                    },
                )


# --- replicas ---------------------------------------------------------------------------

# partition -> [(segment file name, bytes)] (targets.ReplicaFiles)
ReplicaFiles = Mapping[int, list[tuple[str, bytes]]]


@dataclass(frozen=True)
class Batch:
    base_offset: int
    last_offset: int
    data: bytes


def parse_batches(segments: Iterable[tuple[str, bytes]]) -> tuple[list[Batch], list[str]]:
    """Every whole batch of the segments in order, and problems (torn tails, batches
    out of order). Only the 12-byte prefix and lastOffsetDelta are parsed: the
    comparison is of bytes, so a corrupt CRC shows up as a difference."""
    batches: list[Batch] = []
    problems: list[str] = []
    for name, data in segments:
        pos = 0
        while pos + 12 <= len(data):
            base, length = struct.unpack_from(">qi", data, pos)
            end = pos + 12 + length
            if length < 49 or end > len(data):
                problems.append(f"{name}: unreadable batch at byte {pos} ({len(data) - pos} left)")
                break
            (delta,) = struct.unpack_from(">i", data, pos + 23)
            batch = Batch(base, base + delta, bytes(data[pos:end]))
            if batches and batch.base_offset != batches[-1].last_offset + 1:
                problems.append(
                    f"{name}: batch at offset {batch.base_offset} follows "
                    f"{batches[-1].last_offset} (byte {pos})"
                )
            batches.append(batch)
            pos = end
        if 0 < len(data) - pos < 12:
            problems.append(f"{name}: {len(data) - pos} trailing bytes")
    return batches, problems


@dataclass
class ReplicaReport:
    node: int
    batches_below_hw: int
    hw_byte_position: int  # bytes of whole batches below the HW
    first_offset: int | None
    next_offset: int | None  # the offset after its last batch below the HW
    sha256: str
    problems: list[str]


@dataclass
class PartitionReport:
    partition: int
    leader: int
    high_watermark: int
    identical: bool
    lagging: list[int]
    replicas: list[ReplicaReport]
    first_difference: dict[str, Any] | None = None
    # Lagging replicas whose tail differs from the leader's: a replica outside the
    # ISR may hold batches of an old epoch until it fetches again and truncates, so
    # this is reported, but only a replica that reached the HW must be identical.
    unreconciled: dict[int, dict[str, Any]] = field(default_factory=dict)


def compare_replicas(
    files: Mapping[int, ReplicaFiles], high_watermarks: Mapping[int, tuple[int, int]]
) -> list[PartitionReport]:
    """`files`: node -> partition -> segments; `high_watermarks`: partition ->
    (leader, HW). Compares each replica's bytes below the HW with the leader's."""
    out = []
    for partition, (leader, hw) in sorted(high_watermarks.items()):
        below: dict[int, list[Batch]] = {}
        reports: dict[int, ReplicaReport] = {}
        for node, by_partition in sorted(files.items()):
            batches, problems = parse_batches(by_partition.get(partition, []))
            kept = [b for b in batches if b.base_offset < hw]
            if kept and kept[-1].last_offset >= hw:
                problems.append(f"batch {kept[-1].base_offset}-{kept[-1].last_offset} spans the HW")
            prefix = b"".join(b.data for b in kept)
            below[node] = kept
            reports[node] = ReplicaReport(
                node=node,
                batches_below_hw=len(kept),
                hw_byte_position=len(prefix),
                first_offset=kept[0].base_offset if kept else None,
                next_offset=kept[-1].last_offset + 1 if kept else None,
                sha256=hashlib.sha256(prefix).hexdigest(),
                problems=problems,
            )
        reference = below.get(leader, [])
        followers = []
        for node, kept in below.items():
            if node == leader:
                continue
            diff = _first_difference(reference, kept)
            followers.append((node, diff, (kept[-1].last_offset + 1 if kept else 0) < hw))
        out.append(_partition_report(partition, leader, hw, reports, followers))
    return out


def _partition_report(
    partition: int,
    leader: int,
    hw: int,
    reports: Mapping[int, ReplicaReport],
    followers: list[tuple[int, dict[str, Any] | None, bool]],
) -> PartitionReport:
    """The partition's verdict from each follower's (node, first difference from the
    leader or None, short of the HW): a difference counts against a replica that
    reached the HW, and is only reported (unreconciled) for one that lags."""
    identical = True
    lagging = []
    first_difference = None
    unreconciled: dict[int, dict[str, Any]] = {}
    for node, diff, short in followers:
        if short:
            lagging.append(node)
        if diff is not None and short:
            unreconciled[node] = diff
        elif diff is not None:
            identical = False
            if first_difference is None:
                first_difference = {"node": node, **diff}
    # A torn or out-of-order batch in a live replica's files is damage too.
    if any(rep.problems for rep in reports.values()):
        identical = False
    return PartitionReport(
        partition,
        leader,
        hw,
        identical,
        lagging,
        list(reports.values()),
        first_difference,
        unreconciled,
    )


def _first_difference(reference: list[Batch], other: list[Batch]) -> dict[str, Any] | None:
    """Where `other` stops matching the leader's batches; a replica that is merely
    short (lagging) matches as far as it goes."""
    by_base = {b.base_offset: b for b in reference}
    start = other[0].base_offset if other else None
    if reference and start is not None and start < reference[0].base_offset:
        return {"offset": start, "why": "starts below the leader's first batch"}
    for b in other:
        ref = by_base.get(b.base_offset)
        if ref is None:
            return {"offset": b.base_offset, "why": "no leader batch starts at this offset"}
        if ref.data != b.data:
            at = next(
                (i for i, (x, y) in enumerate(zip(ref.data, b.data, strict=False)) if x != y),
                min(len(ref.data), len(b.data)),
            )
            return {
                "offset": b.base_offset,
                "why": f"batch bytes differ at byte {at} of the batch",
                "leader_batch": [ref.base_offset, ref.last_offset, len(ref.data)],
                "replica_batch": [b.base_offset, b.last_offset, len(b.data)],
            }
    if other and reference:
        # Gaps: the follower skipped batches the leader has.
        mine = {b.base_offset for b in other}
        for ref in reference:
            if other[0].base_offset <= ref.base_offset <= other[-1].base_offset:
                if ref.base_offset not in mine:
                    return {"offset": ref.base_offset, "why": "leader batch missing on replica"}
    return None


# (offset, key, value) of one record
Row = tuple[int, bytes | None, bytes | None]


def parse_rows(
    segments: Iterable[tuple[str, bytes]], high_watermark: int
) -> tuple[list[Row], int | None, list[str]]:
    """Records below the HW of a (maybe cleaned) replica, the offset after its last
    batch below the HW, and problems (a bad CRC or framing, offsets going backwards)."""
    rows: list[Row] = []
    problems: list[str] = []
    next_offset: int | None = None
    last = -1
    for name, data in segments:
        try:
            for pos, h in iter_batches(data):
                if h.base_offset >= high_watermark:
                    break
                if h.base_offset <= last:
                    problems.append(f"{name}: batch at offset {h.base_offset} follows {last}")
                last = h.last_offset
                next_offset = h.last_offset + 1
                if not h.is_control:
                    rows += [
                        (r.offset, r.key, r.value)
                        for r in decode_records(data, pos, h)
                        if r.offset < high_watermark
                    ]
        except StorageError as e:
            problems.append(f"{name}: {e}")
    return rows, next_offset, problems


def _live_values(rows: list[Row]) -> dict[bytes | None, tuple[int, bytes]]:
    last: dict[bytes | None, Row] = {}
    for row in rows:
        last[row[1]] = row
    return {k: (o, v) for k, (o, _k, v) in last.items() if v is not None}


def compare_compacted_replicas(
    files: Mapping[int, ReplicaFiles], high_watermarks: Mapping[int, tuple[int, int]]
) -> list[PartitionReport]:
    """compare_replicas for compacted topics: records, not bytes (see the module doc)."""
    out = []
    for partition, (leader, hw) in sorted(high_watermarks.items()):
        parsed: dict[int, list[Row]] = {}
        ends: dict[int, int | None] = {}
        reports: dict[int, ReplicaReport] = {}
        for node, by_partition in sorted(files.items()):
            rows, end, problems = parse_rows(by_partition.get(partition, []), hw)
            parsed[node], ends[node] = rows, end
            live = sorted(_live_values(rows).items(), key=lambda kv: kv[1][0])
            reports[node] = ReplicaReport(
                node=node,
                batches_below_hw=len(rows),
                hw_byte_position=0,
                first_offset=rows[0][0] if rows else None,
                next_offset=end,
                sha256=hashlib.sha256(repr(live).encode()).hexdigest(),
                problems=problems,
            )
        reference = parsed.get(leader, [])
        by_offset = {o: (k, v) for o, k, v in reference}
        leader_live = _live_values(reference)
        followers = []
        for node, rows in parsed.items():
            if node == leader:
                continue
            diff = None
            for o, k, v in rows:
                if o in by_offset and by_offset[o] != (k, v):
                    diff = {"offset": o, "why": "record differs from the leader's"}
                    break
            short = (ends[node] or 0) < hw
            if diff is None and not short and _live_values(rows) != leader_live:
                mine = _live_values(rows)
                key = next(
                    k for k in set(mine) | set(leader_live) if mine.get(k) != leader_live.get(k)
                )
                diff = {
                    "offset": (mine.get(key) or leader_live.get(key) or (None,))[0],
                    "why": f"key {key!r} has another live value than on the leader",
                }
            followers.append((node, diff, short))
        out.append(_partition_report(partition, leader, hw, reports, followers))
    return out


def apply_replica_check(result: CheckResult, reports: list[PartitionReport]) -> None:
    for rep in reports:
        if not rep.identical:
            result.divergent += 1
            _keep(result.examples.divergent, asdict(rep))
        result.lagging += len(rep.lagging)
        result.unreconciled += len(rep.unreconciled)
        if rep.lagging:
            result.notes.append(
                f"partition {rep.partition}: replicas {rep.lagging} "
                f"below the HW {rep.high_watermark}"
                + (f"; unreconciled tails {rep.unreconciled}" if rep.unreconciled else "")
            )
