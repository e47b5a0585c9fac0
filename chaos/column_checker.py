"""checker.check_history over a ColumnHistory, with numpy: the same CheckResult
(counts, examples in the same order, notes) in some 25-40 bytes an event beyond
the columns and 2-3 µs an event, where the dict-based reference needs ~620 bytes
(its events included) and ~37 µs (docs/network-faults.md).

Each invariant is computed with sorts and group-bys over the columns; the few
anomalies found are then described exactly as check_history describes them. The
rare events (seek, fail, commit, committed, meta) are dicts, as in the reference.
"""

from __future__ import annotations

import bisect
from typing import Any

import numpy as np

from .checker import (
    MAX_DUPLICATE_POSITIONS,
    CheckResult,
    _check_commits,
    _is_compacted,
    _keep,
    check_implicit_acks,
    skipped_example,
    unplaced_lost_example,
)
from .columns import INVOKE, OK, POLL, SEQ_BITS, ColumnHistory

_I64 = np.int64


def _groups(sorted_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First and last index of each run of equal keys in a sorted array."""
    n = len(sorted_keys)
    if n == 0:
        return np.zeros(0, _I64), np.zeros(0, _I64)
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    ends = np.r_[starts[1:], n] - 1
    return starts, ends


def _lookup(table: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index, found) of keys in a sorted unique table."""
    idx = np.searchsorted(table, keys)
    idx = np.minimum(idx, max(len(table) - 1, 0))
    found = (table[idx] == keys) if len(table) else np.zeros(len(keys), bool)
    return idx, found


def _pack(partition: np.ndarray, offset: np.ndarray) -> np.ndarray:
    packed: np.ndarray = (partition.astype(_I64) << SEQ_BITS) | offset
    return packed


def _rows_of(h: ColumnHistory, kind: int) -> np.ndarray:
    """The rows of one kind, as int32 when they fit (half the memory); of the oks,
    those with an offset (the others are `_unplaced`)."""
    rows = np.flatnonzero((h.kind == kind) & (h.offset >= 0) if kind == OK else h.kind == kind)
    return rows.astype(np.int32) if h.rows < 1 << 31 else rows


def _by_value(
    h: ColumnHistory, kind: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """For the rows of one kind, per distinct value (sorted): the value, its last
    row's position, whether its rows hold more than one position, its first and
    last row."""
    rows = _rows_of(h, kind)
    order = np.argsort(h.value[rows], kind="stable")
    rows = rows[order]
    del order
    starts, ends = _groups(h.value[rows])
    values = h.value[rows[starts]]
    po = h.partition[rows].astype(_I64)
    po <<= SEQ_BITS
    po |= h.offset[rows]
    if len(starts):
        multi = np.minimum.reduceat(po, starts) != np.maximum.reduceat(po, starts)
    else:
        multi = np.zeros(0, bool)
    return values, po[ends], multi, rows[starts], rows[ends]


def check_columns(h: ColumnHistory, *, compacted: bool | None = None) -> CheckResult:
    """check_history(events) for the same events as a ColumnHistory. Its memory: the
    columns, and while it runs a few arrays of a sort's size (one int64 a row)."""
    h.freeze()
    if compacted is None:
        compacted = _is_compacted(h.rare)
    r = CheckResult()
    dec = h.values.decode
    mask = (1 << SEQ_BITS) - 1

    inv = _rows_of(h, INVOKE)
    inv_u = np.unique(h.value[inv])
    # acknowledged (a value's last ack wins)
    ack_u, ack_po, ok_multi, ack_first, _ = _by_value(h, OK)
    _send_order(r, h, inv, ack_u, ack_po)
    # acknowledged without an offset, and never with one
    unplaced = np.unique(h.value[(h.kind == OK) & (h.offset < 0)])
    unplaced = unplaced[~np.isin(unplaced, ack_u)]
    key_u = key_of = np.zeros(0, _I64)
    if compacted:  # a value's key: that of its last send with a key
        keyed = inv[h.key[inv] >= 0]
        order = np.argsort(h.value[keyed], kind="stable")
        keyed = keyed[order]
        _s, kends = _groups(h.value[keyed])
        key_u, key_of = h.value[keyed[kends]], h.key[keyed[kends]].astype(_I64)
        del keyed, order
    del inv
    jumps = _polls_in_order(r, h, compacted)
    commit_events = [e for e in h.rare if e.get("type") in ("commit", "committed")]
    _check_commits(r, commit_events)
    _duplicated_commits(r, h, commit_events)

    read_u, read_po, poll_multi, read_first, _ = _by_value(h, POLL)
    failed: dict[int, dict[str, Any]] = {}
    for e in h.rare:
        if e.get("type") == "fail":
            failed[h.values.encode(e["value"])] = e
    definite = np.array(sorted(v for v, f in failed.items() if f.get("definite")), _I64)
    r.sent = len(inv_u)
    r.acknowledged = len(ack_u) + len(unplaced)
    r.acknowledged_without_offset = len(unplaced)
    r.read_records = int(np.count_nonzero(h.kind == POLL))
    r.distinct_values_read = len(read_u)
    r.failed_definite = len(definite)
    unknown = inv_u[~np.isin(inv_u, ack_u) & ~np.isin(inv_u, unplaced) & ~np.isin(inv_u, definite)]
    r.indeterminate = len(unknown)
    r.indeterminate_read = int(np.isin(unknown, read_u).sum())
    del unknown

    # Every value's positions (acks and reads): one, or more (duplicated).
    all_u = np.union1d(ack_u, read_u)
    ia, ir = np.searchsorted(all_u, ack_u), np.searchsorted(all_u, read_u)
    multi = np.zeros(len(all_u), bool)
    multi[ia] |= ok_multi
    multi[ir] |= poll_multi
    one_po = np.full(len(all_u), -1, _I64)
    one_po[ir] = read_po
    multi[ia] |= (one_po[ia] >= 0) & (one_po[ia] != ack_po)
    one_po[ia] = ack_po
    first = np.full(len(all_u), np.iinfo(_I64).max, _I64)
    first[ia] = ack_first
    first[ir] = np.minimum(first[ir], read_first)
    del ok_multi, poll_multi, read_po, ack_first, read_first, ir
    dup = np.flatnonzero(multi)
    dup_first = first[dup]
    dup = all_u[dup]
    del first

    def positions_of(values: np.ndarray) -> dict[int, list[tuple[int, int]]]:
        out: dict[int, set[int]] = {int(v): set() for v in values}
        for rows in _rows_with(h, values):
            po = _pack(h.partition[rows], h.offset[rows])
            for v, x in zip(h.value[rows].tolist(), po.tolist(), strict=True):
                out[v].add(x)
        return {v: sorted((x >> SEQ_BITS, x & mask) for x in s) for v, s in out.items()}

    dup_positions = positions_of(dup)
    # Distinct (value, position) pairs by position: one a value, more for duplicates.
    single = ~multi
    pair_v = np.concatenate(
        [all_u[single], np.array([v for v, ps in dup_positions.items() for _ in ps], _I64)]
    )
    pair_po = np.concatenate(
        [
            one_po[single],
            np.array([(p << SEQ_BITS) | o for ps in dup_positions.values() for p, o in ps], _I64),
        ]
    )
    del single, multi, one_po, all_u
    by_pos = np.lexsort((pair_v, pair_po))
    pair_v, pair_po = pair_v[by_pos], pair_po[by_pos]
    del by_pos

    def values_at(po: int) -> list[int]:
        a, b = np.searchsorted(pair_po, [po, po + 1])
        return [int(v) for v in pair_v[a:b]]

    # compaction: a value superseded by a later offset of its key in its partition
    ack_superseded = np.zeros(len(ack_u), bool)
    if compacted:
        idx, found = _lookup(key_u, pair_v)
        pk = np.where(found, key_of[idx] if len(key_u) else -1, -1)
        with_key = pk >= 0
        pk_comp = ((pair_po[with_key] >> SEQ_BITS) << 31) | pk[with_key]
        pk_off = pair_po[with_key] & mask
        ordk = np.argsort(pk_comp, kind="stable")
        cs = pk_comp[ordk]
        gs, _ge = _groups(cs)
        newest_k = cs[gs]
        newest_o = np.maximum.reduceat(pk_off[ordk], gs) if len(gs) else pk_off
        idx, found = _lookup(key_u, ack_u)
        ak = np.where(found, key_of[idx] if len(key_u) else -1, -1)
        comp = ((ack_po >> SEQ_BITS) << 31) | np.maximum(ak, 0)
        j, f2 = _lookup(newest_k, comp)
        newest_at = np.where(f2, newest_o[j] if len(newest_k) else -1, -1)
        ack_superseded = (ak >= 0) & (newest_at > (ack_po & mask))
    required = np.sort(ack_po[~ack_superseded])
    for consumer, p, want, got, t in jumps:
        a, b = np.searchsorted(required, [(p << SEQ_BITS) | want, (p << SEQ_BITS) | got])
        over = int(b - a)
        if over:
            r.skipped += 1
            _keep(r.examples.skipped, skipped_example(consumer, p, want, got, over, t))
    del required

    # lost: by position, then in the order of the values' first acks
    lost = np.flatnonzero(~np.isin(ack_u, read_u) & ~ack_superseded)
    r.lost = len(lost)
    if len(lost):  # ties by position: in the order of the values' first acks
        first_ack = _by_value(h, OK)[3]
        lost = lost[np.lexsort((first_ack[lost], ack_po[lost]))][:20]
    for i in lost.tolist():
        po = int(ack_po[i])
        v = int(ack_u[i])
        _keep(
            r.examples.lost,
            {
                "value": dec(v),
                "partition": po >> SEQ_BITS,
                "offset": po & mask,
                "held_instead": sorted(dec(x) for x in values_at(po) if x != v),
            },
        )

    check_implicit_acks(
        r,
        [e for e in h.rare if e.get("type") == "implicit_ack"],
        lambda values: np.isin(
            np.array([h.values.encode(v) for v in values], _I64), read_u
        ).tolist(),
    )
    unread = unplaced[~np.isin(unplaced, read_u)]
    r.lost += len(unread)
    if len(unread) and len(r.examples.lost) < 20:
        # each value's last send, as the reference checker's `invoked` holds it
        sends = _rows_of(h, INVOKE)
        partition_of = {
            int(h.value[row]): int(h.partition[row])
            for row in sends[np.isin(h.value[sends], unread)].tolist()
        }
        for name, v in sorted((dec(v), v) for v in unread.tolist())[:20]:
            p = partition_of.get(v, -1)
            _keep(
                r.examples.lost,
                unplaced_lost_example(name, None if p < 0 else {"partition": p}),
            )

    # duplicated: in the order of each value's first ack or read
    r.duplicated = len(dup)
    in_order = dup[np.argsort(dup_first, kind="stable")]
    for v in in_order[:20].tolist():
        _keep(r.examples.duplicated, {"value": dec(v), "positions": dup_positions[v]})
    r.duplicate_positions = [dup_positions[v] for v in in_order[:MAX_DUPLICATE_POSITIONS].tolist()]

    # conflicts: positions holding two values, by position
    cs_, ce_ = _groups(pair_po)
    many = cs_[ce_ > cs_]
    r.conflicts = len(many)
    shown = pair_po[many[:20]]
    if len(shown):
        seen_by: dict[tuple[int, int], str] = {}
        rows = np.flatnonzero(np.isin(h.offset, shown & mask) & (h.kind != INVOKE))
        rows = rows[np.isin(_pack(h.partition[rows], h.offset[rows]), shown)]
        for row in rows.tolist():
            what = "ack" if h.kind[row] == OK else "read"
            po = (int(h.partition[row]) << SEQ_BITS) | int(h.offset[row])
            text = f"{what} by {h.processes.items[h.process[row]]}"
            seen_by.setdefault((po, int(h.value[row])), text)
        for po in shown.tolist():
            vals = sorted((dec(v), v) for v in values_at(po))
            _keep(
                r.examples.conflicts,
                {
                    "partition": po >> SEQ_BITS,
                    "offset": po & mask,
                    "values": {s: seen_by.get((po, v), "") for s, v in vals},
                },
            )

    # phantom: read values that definitely failed or that nobody sent, by value
    bad_failed = np.isin(read_u, definite)
    never = ~bad_failed & ~np.isin(read_u, inv_u)
    phantom = read_u[bad_failed | never]
    r.phantom = len(phantom)
    named = sorted((dec(v), v) for v in phantom.tolist())[:20]
    shown_pos = positions_of(np.array([v for _, v in named], _I64))
    for name, v in named:
        f = failed.get(v)
        error = f.get("error") if f is not None and f.get("definite") else "never sent"
        _keep(r.examples.phantom, {"value": name, "error": error, "positions": shown_pos[v]})
    return r


_CHUNK = 1 << 20  # rows a pass over the whole history takes at a time


def _rows_with(h: ColumnHistory, values: np.ndarray) -> list[np.ndarray]:
    """The ok and poll rows holding any of these values, in chunks."""
    out: list[np.ndarray] = []
    if not len(values):
        return out
    for a in range(0, h.rows, _CHUNK):
        sl = slice(a, a + _CHUNK)
        hit = np.isin(h.value[sl], values) & (h.kind[sl] != INVOKE) & (h.offset[sl] >= 0)
        out.append(np.flatnonzero(hit) + a)
    return out


def _send_order(
    r: CheckResult, h: ColumnHistory, inv: np.ndarray, ack_u: np.ndarray, ack_po: np.ndarray
) -> None:
    """nonmonotonic_send (checker._check_send_order): per producer and partition, the
    sends acknowledged in that partition, in send order, at growing offsets."""
    has_p = inv[h.partition[inv] >= 0]
    if not len(has_p) or not len(ack_u):
        return
    idx, found = _lookup(ack_u, h.value[has_p])
    found &= (ack_po[idx] >> SEQ_BITS) == h.partition[has_p]
    rows = has_p[found]  # sends acknowledged in their partition, in history order
    off = ack_po[idx[found]] & ((1 << SEQ_BITS) - 1)
    del idx, found
    width = int(h.partition.max()) + 1

    def group_of(x: np.ndarray) -> np.ndarray:
        key: np.ndarray = h.process[x].astype(_I64) * width + h.partition[x]
        return key

    g = group_of(rows)
    o = np.argsort(g, kind="stable")
    g, off, rows = g[o], off[o], rows[o]
    del o
    bad = np.flatnonzero((g[1:] == g[:-1]) & (off[1:] <= off[:-1])) + 1
    r.nonmonotonic_send = len(bad)
    if not len(bad):
        return
    # examples in the order of each group's first send, then in send order
    every = group_of(has_p)
    first = {k: int(has_p[np.argmax(every == k)]) for k in np.unique(g[bad]).tolist()}
    del every
    bad = bad[np.lexsort((rows[bad], [first[k] for k in g[bad].tolist()]))][:20]
    for k in bad.tolist():
        row, prev = rows[k], rows[k - 1]
        _keep(
            r.examples.nonmonotonic_send,
            {
                "producer": str(h.processes.items[h.process[row]]),
                "partition": int(h.partition[row]),
                "sent_first": {"value": h.values.decode(h.value[prev]), "offset": int(off[k - 1])},
                "sent_after": {"value": h.values.decode(h.value[row]), "offset": int(off[k])},
            },
        )


def _polls_in_order(
    r: CheckResult, h: ColumnHistory, compacted: bool
) -> list[tuple[Any, int, int, int, Any]]:
    """skipped and backwards: each consumer's reads of a partition go on from its last
    read + 1 or its last seek. On a compacted topic the forward jumps are returned
    (in history order) to be judged against the values still required."""
    seeks: dict[int, list[tuple[int, int | None]]] = {}
    for j, e in enumerate(h.rare):
        if e.get("type") == "seek":
            key = (h.processes.id(e["process"]) << 32) | int(e["partition"])
            off = e.get("offset")
            seeks.setdefault(key, []).append((int(h.rare_at[j]), None if off is None else int(off)))
    pol = _rows_of(h, POLL)
    # (consumer, partition) as one int, int32 when it fits
    width = int(h.partition.max()) + 1 if h.rows else 1
    narrow = len(h.processes.items) * width < 1 << 31
    key = h.process[pol].astype(np.int32 if narrow else _I64) * width
    key += h.partition[pol]
    order = np.argsort(key, kind="stable")
    key = key[order]
    starts, ends = _groups(key)
    group_keys = [((k // width) << 32) | (k % width) for k in key[starts].tolist()]
    del key
    fwd: list[np.ndarray] = []
    back: list[np.ndarray] = []
    wants: dict[int, int] = {}
    for g, a, b in zip(group_keys, starts.tolist(), ends.tolist(), strict=True):
        rows = pol[order[a : b + 1]].astype(_I64)  # a consumer's reads of a partition
        got = h.offset[rows]
        want = np.empty(len(rows), _I64)
        want[1:] = got[:-1] + 1
        known = np.ones(len(rows), bool)
        known[0] = False
        for at, off in seeks.get(g, ()):  # the next read after a seek must be there
            i = int(np.searchsorted(rows, at))
            if i < len(rows):
                known[i] = off is not None
                want[i] = 0 if off is None else off
        f = np.flatnonzero(known & (got > want))
        k = np.flatnonzero(known & (got < want))
        fwd.append(rows[f])
        back.append(rows[k])
        wants.update(zip(rows[f].tolist(), want[f].tolist(), strict=True))
        wants.update(zip(rows[k].tolist(), want[k].tolist(), strict=True))
    del pol, order
    fwd_rows = np.sort(np.concatenate(fwd)) if fwd else np.zeros(0, _I64)
    back_rows = np.sort(np.concatenate(back)) if back else np.zeros(0, _I64)

    def example(i: int) -> dict[str, Any]:
        return {
            "consumer": h.processes.items[h.process[i]],
            "partition": int(h.partition[i]),
            "expected": wants[i],
            "got": int(h.offset[i]),
            "t": h.t_or_none(i),
        }

    r.backwards += len(back_rows)
    for i in back_rows[:20].tolist():
        _keep(r.examples.backwards, example(i))
    if compacted:
        out = []
        for i in fwd_rows.tolist():
            ex = example(i)
            out.append((ex["consumer"], ex["partition"], ex["expected"], ex["got"], ex["t"]))
        return out
    r.skipped += len(fwd_rows)
    for i in fwd_rows[:20].tolist():
        ex = example(i)
        ex = {**ex, "missing": ex["got"] - ex["expected"]}
        ex["t"] = ex.pop("t")
        _keep(r.examples.skipped, ex)
    return []


def _duplicated_commits(
    r: CheckResult, h: ColumnHistory, commit_events: list[dict[str, Any]]
) -> None:
    """duplicated_commits (checker._check_commits): a group member's poll below the
    highest commit of its group and partition acknowledged before the poll's time
    and written before it. Only polls below the highest earlier commit at all are
    candidates; those few are judged exactly as the reference does."""
    rare_seq = {id(e): h.rare_seq(j) for j, e in enumerate(h.rare)}
    acks: dict[tuple[str, int], list[tuple[int, float, int, str]]] = {}
    for e in commit_events:
        if e["type"] == "commit":
            gp = (str(e.get("group", "")), int(e["partition"]))
            acks.setdefault(gp, []).append(
                (rare_seq[id(e)], float(e.get("t", 0.0)), int(e["offset"]), str(e.get("process")))
            )
    if not acks:
        return
    gp_ids = {gp: i for i, gp in enumerate(acks)}
    group_names = [str(g) for g in h.groups.items]
    # commits by (gp, history position), with their offsets' running max in each gp
    spread = 1 << 41  # above any offset: a gp's running max never reaches the next's
    c_key, c_max = [], []
    for gp, i in gp_ids.items():
        for s, _t, off, _p in acks[gp]:
            c_key.append((i << SEQ_BITS + 2) | s)
            c_max.append(i * spread + off)
    ck = np.array(c_key, _I64)
    cm = np.maximum.accumulate(np.array(c_max, _I64))
    by_gp = {i: acks[gp] for gp, i in gp_ids.items()}
    seqs = {i: [a[0] for a in lst] for i, lst in by_gp.items()}
    for a in range(0, h.rows, _CHUNK):  # in chunks: bounded memory
        gpol = np.flatnonzero((h.kind[a : a + _CHUNK] == POLL) & (h.group[a : a + _CHUNK] >= 0))
        if not len(gpol):
            continue
        gpol += a
        pairs = (h.group[gpol].astype(_I64) << 32) | h.partition[gpol]
        upairs, inverse = np.unique(pairs, return_inverse=True)
        ugp = np.array(
            [gp_ids.get((group_names[int(x) >> 32], int(x) & 0xFFFFFFFF), -1) for x in upairs],
            _I64,
        )
        poll_gp = ugp[inverse.reshape(-1)]
        has = poll_gp >= 0
        gpol, poll_gp = gpol[has], poll_gp[has]
        pk = (poll_gp << SEQ_BITS + 2) | h.seq(gpol)
        j = np.searchsorted(ck, pk) - 1
        jj = np.maximum(j, 0)
        same = (j >= 0) & ((ck[jj] >> SEQ_BITS + 2) == poll_gp)
        highest = np.where(same, cm[jj] - poll_gp * spread, -1)
        cand = np.flatnonzero(same & (h.offset[gpol] < highest))
        for k in cand.tolist():
            i = int(gpol[k])
            g = int(poll_gp[k])
            s = int(h.seq(np.array([i]))[0])
            t = h.t_or_none(i)
            at_t = 0.0 if t is None else t
            best: tuple[int, str] | None = None
            for _s, at, offset, process in by_gp[g][: bisect.bisect_left(seqs[g], s)]:
                if at < at_t and (best is None or offset > best[0]):
                    best = (offset, process)
            offset = int(h.offset[i])
            if best is not None and offset < best[0]:
                r.duplicated_commits += 1
                _keep(
                    r.examples.duplicated_commits,
                    {
                        "group": group_names[h.group[i]],
                        "partition": int(h.partition[i]),
                        "offset": offset,
                        "value": h.values.decode(h.value[i]),
                        "consumer": h.processes.items[h.process[i]],
                        "committed": best[0],
                        "committed_by": best[1],
                        "t": t,
                    },
                )
