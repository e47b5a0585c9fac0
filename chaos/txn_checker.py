"""The transactional history's checker, after Jepsen's Kafka test (jepsen.tests.kafka):
a history in, anomalies out; no I/O.

The history (chaos/txn_workload.py writes it, JSON lines) holds:

* `txn` events, one per transaction: its `process` (one transactional producer, whose
  transactions run one after another), `id`, `outcome` ("committed": commit_transaction
  returned; "aborted": abort_transaction returned; "unknown": neither), `begin` (when its
  first operation began), `commit_at` (when commit_transaction was invoked, or None),
  `reads` ([partition, offset, value, t] polled read_committed inside the transaction,
  before its sends: consume-transform-produce) and `writes` ([partition, value, offset]:
  the offset from the delivery report, None without one);
* `read` events of the observer and of the final read (`process` "observer"/"final"):
  a read_committed consumer's records in the order it polled them (`partition`, `offset`,
  `value`, `t`), and `reset` events where such a reader started a partition over (its
  position was lost: what it passed before says nothing about what follows).

A value is written once, by one transaction. A transaction whose outcome is unknown
counts as committed once any of its values was read (Jepsen's rule for indefinite
operations): then all of it must be there.

Anomalies (Jepsen's names; each a list of plain dicts naming values, offsets and txns):

* `lost`: a value of a committed transaction the final read did not return although it
  reached the end of every partition (`final` event `complete`).
* `G1a` (aborted read): a read of a value whose transaction aborted.
* `G1b` (intermediate read): a read of a transaction's value before that transaction
  asked to commit (or one that never asked), or a reader that read part of a committed
  transaction's writes to a partition and passed over the rest without reading it.
* `duplicate`: one value at two offsets; `inconsistent`: one offset read with two values.
* `G0` (write cycle) and `G1c` (cyclic information flow): cycles in the dependency graph
  of the committed transactions: wr (the reader of a value depends on its writer),
  process order (a producer's transactions one after another) and, with `ww_deps`, ww
  (the next write to the same partition by offset depends on the one before). A cycle
  with a wr edge is G1c, one without is G0. Kafka gives transactions no write isolation:
  two concurrent transactions may interleave their writes in two partitions in opposite
  orders, a ww cycle Kafka allows (Jepsen's Redpanda analysis, 2022, "write cycles"). So
  the chaos run's verdict uses the graph without ww edges (wr and process order only),
  and reports the ww-inclusive cycles as information.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

KINDS = ("lost", "G1a", "G1b", "duplicate", "inconsistent", "G0", "G1c")
# Readers that read every partition from the start, in offset order, without a group.
SEQUENTIAL_READERS = ("observer", "final")
MAX_EXAMPLES = 20


@dataclass
class TxnCheck:
    anomalies: dict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: {k: [] for k in KINDS}
    )
    counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not any(self.anomalies.values())

    def found(self) -> list[str]:
        return [k for k in KINDS if self.anomalies[k]]

    def summary(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "anomalies": {k: len(v) for k, v in self.anomalies.items()},
            "examples": {k: v[:MAX_EXAMPLES] for k, v in self.anomalies.items() if v},
            "counts": self.counts,
            "notes": self.notes,
        }


@dataclass
class _Txn:
    id: str
    process: str
    outcome: str
    begin: float
    commit_at: float | None
    reads: list[tuple[int, int, str, float]]
    writes: list[tuple[int, str, int | None]]


def _txns(events: list[dict[str, Any]]) -> list[_Txn]:
    out = []
    for e in events:
        if e.get("type") != "txn":
            continue
        out.append(
            _Txn(
                id=e["id"],
                process=e["process"],
                outcome=e["outcome"],
                begin=float(e["begin"]),
                commit_at=e.get("commit_at"),
                reads=[(int(p), int(o), str(v), float(t)) for p, o, v, t in e.get("reads", [])],
                writes=[(int(p), str(v), None if o is None else int(o)) for p, v, o in e["writes"]],
            )
        )
    return out


def check(history: Iterable[dict[str, Any]], ww_deps: bool = False) -> TxnCheck:
    events = list(history)
    result = TxnCheck()
    txns = _txns(events)
    by_id = {t.id: t for t in txns}
    writer: dict[str, _Txn] = {}
    for t in txns:
        for _p, v, _o in t.writes:
            if v in writer:
                result.notes.append(f"value {v} written by {writer[v].id} and {t.id}")
            writer[v] = t
    # Every read, from transactions and from the sequential readers: (reader, p, o, v, t).
    reads: list[tuple[str, int, int, str, float]] = []
    for t in txns:
        reads += [(t.id, p, o, v, at) for p, o, v, at in t.reads]
    for e in events:
        if e.get("type") == "read":
            reads.append((e["process"], e["partition"], e["offset"], e["value"], e["t"]))
    read_values = {v for _r, _p, _o, v, _t in reads}
    committed = {
        t.id
        for t in txns
        if t.outcome == "committed"
        or (t.outcome == "unknown" and any(v in read_values for _p, v, _o in t.writes))
    }
    _offsets(result, txns, reads)
    _aborted_and_intermediate(result, reads, writer, committed)
    _skips(result, events, writer, committed)
    _lost(result, events, txns, committed)
    _cycles(result, txns, by_id, reads, writer, committed, ww_deps)
    result.counts.update(
        {
            "transactions": len(txns),
            "committed": sum(t.outcome == "committed" for t in txns),
            "aborted": sum(t.outcome == "aborted" for t in txns),
            "unknown": sum(t.outcome == "unknown" for t in txns),
            "unknown_seen_committed": len(committed) - sum(t.outcome == "committed" for t in txns),
            "writes": len(writer),
            "reads": len(reads),
            "reads_in_transactions": sum(len(t.reads) for t in txns),
        }
    )
    return result


def _offsets(
    result: TxnCheck, txns: list[_Txn], reads: list[tuple[str, int, int, str, float]]
) -> None:
    """duplicate (a value at two places) and inconsistent (a place with two values),
    from the reads and the delivery reports together."""
    places: dict[str, set[tuple[int, int]]] = defaultdict(set)
    values: dict[tuple[int, int], set[str]] = defaultdict(set)
    for t in txns:
        for p, v, o in t.writes:
            if o is not None and t.outcome != "aborted":
                places[v].add((p, o))
                values[(p, o)].add(v)
    for _r, p, o, v, _t in reads:
        places[v].add((p, o))
        values[(p, o)].add(v)
    for v, at in sorted(places.items()):
        if len(at) > 1:
            result.anomalies["duplicate"].append({"value": v, "at": sorted(at)})
    for (p, o), vs in sorted(values.items()):
        if len(vs) > 1:
            result.anomalies["inconsistent"].append(
                {"partition": p, "offset": o, "values": sorted(vs)}
            )


def _aborted_and_intermediate(
    result: TxnCheck,
    reads: list[tuple[str, int, int, str, float]],
    writer: dict[str, _Txn],
    committed: set[str],
) -> None:
    seen: set[tuple[str, str]] = set()
    for reader, p, o, v, t in reads:
        w = writer.get(v)
        if w is None or (reader, v) in seen:
            continue  # a value nobody wrote is a note-worthy harness error, not ours to call
        seen.add((reader, v))
        where = {"reader": reader, "value": v, "partition": p, "offset": o, "writer": w.id}
        if w.outcome == "aborted":
            result.anomalies["G1a"].append(where)
        elif w.commit_at is None:
            result.anomalies["G1b"].append({**where, "why": "its transaction never committed"})
        elif t < w.commit_at:
            result.anomalies["G1b"].append(
                {
                    **where,
                    "why": "read before its transaction asked to commit",
                    "read_at": t,
                    "commit_at": w.commit_at,
                }
            )
    unwritten = sorted({v for _r, _p, _o, v, _t in reads if v not in writer})
    if unwritten:
        result.notes.append(f"{len(unwritten)} value(s) read that no transaction wrote")


def _skips(
    result: TxnCheck, events: list[dict[str, Any]], writer: dict[str, _Txn], committed: set[str]
) -> None:
    """A sequential reader passes every offset between two records it reads in a partition:
    a committed write there that it did not return, of a transaction it read another write
    of in the same partition, is an intermediate read (it saw part of the transaction)."""
    at = {
        (p, o): v
        for v, w in writer.items()
        if w.id in committed
        for p, v2, o in w.writes
        if v2 == v and o is not None
    }
    by_partition: dict[int, list[int]] = defaultdict(list)
    for p, o in at:
        by_partition[p].append(o)
    for offsets in by_partition.values():
        offsets.sort()
    last: dict[tuple[str, int], int] = {}
    # Values of each txn a reader returned, per partition (to tell a part from none).
    returned: dict[tuple[str, int], set[str]] = defaultdict(set)
    passed: list[tuple[str, int, int, str]] = []
    for e in events:
        kind = e.get("type")
        if kind == "reset" and e.get("process") in SEQUENTIAL_READERS:
            last.pop((e["process"], e["partition"]), None)
        if kind != "read" or e.get("process") not in SEQUENTIAL_READERS:
            continue
        reader, p, o = e["process"], e["partition"], e["offset"]
        w = writer.get(e["value"])
        if w is not None:
            returned[(reader, p)].add(w.id)
        before = last.get((reader, p))
        last[(reader, p)] = o
        if before is None or o <= before:
            continue
        offsets = by_partition.get(p, [])
        for i in range(bisect.bisect_right(offsets, before), bisect.bisect_left(offsets, o)):
            passed.append((reader, p, offsets[i], at[(p, offsets[i])]))
    for reader, p, o, v in passed:
        w = writer[v]
        if w.id in returned[(reader, p)]:
            result.anomalies["G1b"].append(
                {
                    "reader": reader,
                    "value": v,
                    "partition": p,
                    "offset": o,
                    "writer": w.id,
                    "why": "passed over while other writes of its transaction were read",
                }
            )


def _lost(
    result: TxnCheck, events: list[dict[str, Any]], txns: list[_Txn], committed: set[str]
) -> None:
    finals = [e for e in events if e.get("type") == "final"]
    if not finals or not finals[-1].get("complete"):
        result.notes.append("the final read did not reach every partition's end: lost unchecked")
        return
    final_values = {
        e["value"] for e in events if e.get("type") == "read" and e["process"] == "final"
    }
    for t in txns:
        if t.id not in committed:
            continue
        for p, v, o in t.writes:
            if v not in final_values:
                result.anomalies["lost"].append(
                    {"value": v, "partition": p, "offset": o, "writer": t.id, "outcome": t.outcome}
                )


def _cycles(
    result: TxnCheck,
    txns: list[_Txn],
    by_id: dict[str, _Txn],
    reads: list[tuple[str, int, int, str, float]],
    writer: dict[str, _Txn],
    committed: set[str],
    ww_deps: bool,
) -> None:
    edges: dict[str, dict[str, str]] = defaultdict(dict)  # a -> b -> kind ("wr" wins)

    def add(a: str, b: str, kind: str) -> None:
        if a != b and edges[a].get(b) != "wr":
            edges[a][b] = kind

    for reader, _p, _o, v, _t in reads:
        w = writer.get(v)
        if reader in by_id and w is not None and w.id in committed and reader in committed:
            add(w.id, reader, "wr")
    per_process: dict[str, list[_Txn]] = defaultdict(list)
    for t in txns:
        if t.id in committed:
            per_process[t.process].append(t)
    for chain in per_process.values():
        chain.sort(key=lambda t: t.begin)
        for a, b in zip(chain, chain[1:], strict=False):
            add(a.id, b.id, "process")
    if ww_deps:
        order: dict[int, list[tuple[int, str]]] = defaultdict(list)
        for t in txns:
            if t.id in committed:
                for p, _v, o in t.writes:
                    if o is not None:
                        order[p].append((o, t.id))
        for items in order.values():
            items.sort()
            for (_o1, a), (_o2, b) in zip(items, items[1:], strict=False):
                add(a, b, "ww")
    for scc in _sccs(sorted(committed), edges):
        inside = [(a, b, k) for a in scc for b, k in edges[a].items() if b in scc]
        kind = "G1c" if any(k == "wr" for _a, _b, k in inside) else "G0"
        result.anomalies[kind].append(
            {"transactions": sorted(scc)[:1000], "size": len(scc), "cycle": _a_cycle(scc, edges)}
        )


def _sccs(nodes: list[str], edges: dict[str, dict[str, str]]) -> list[set[str]]:
    """Tarjan's strongly connected components of more than one node (iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []
    counter = 0
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, {}))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, {})))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    n = stack.pop()
                    on_stack.discard(n)
                    component.add(n)
                    if n == node:
                        break
                if len(component) > 1:
                    out.append(component)
    return out


def _a_cycle(scc: set[str], edges: dict[str, dict[str, str]]) -> list[str]:
    """One cycle through the component, as "a -wr-> b" steps (breadth-first)."""
    start = min(scc)
    previous: dict[str, tuple[str, str]] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for a in frontier:
            for b, kind in sorted(edges[a].items()):
                if b not in scc:
                    continue
                if b == start:
                    steps = [f"{a} -{kind}-> {b}"]
                    while a != start:
                        pa, k = previous[a]
                        steps.append(f"{pa} -{k}-> {a}")
                        a = pa
                    return steps[::-1]
                if b not in previous:
                    previous[b] = (a, kind)
                    nxt.append(b)
        frontier = nxt
    return []
