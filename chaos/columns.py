"""A chaos history held as columns: an hour's soak writes 30-35 million events, too
many to hold as dicts (about 410 bytes each in read_history, 20 GB for a soak).

The high-volume events (invoke, ok, poll) become one row each in numpy columns
(37 bytes a row); every other event (meta, phase, fault, seek, fail, commit,
errors...) stays a dict in `rare`, with where it stood among the rows. A value of
the workload's form "p{producer}-{seq}" is stored as the int producer << 40 | seq;
any other value gets a negative id from a table (`Values`).

Fields the checker and the report do not use (an ok's t0 and latency) are not kept:
iterating a ColumnHistory gives the events back without them.
"""

from __future__ import annotations

import json
import math
import re
from array import array
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

INVOKE, OK, POLL = 0, 1, 2
KINDS = ("invoke", "ok", "poll")
_KIND = {name: i for i, name in enumerate(KINDS)}

SEQ_BITS = 40
SEQ_MASK = (1 << SEQ_BITS) - 1
# No leading zeros: "p0-01" must not get the id of "p0-1".
_VALUE = re.compile(r"p(0|[1-9][0-9]{0,5})-(0|[1-9][0-9]{0,11})")


class Interner:
    """Small ids for the few distinct processes, groups and keys."""

    def __init__(self, what: str, limit: int) -> None:
        self.what = what
        self.limit = limit
        self.ids: dict[Any, int] = {}
        self.items: list[Any] = []

    def id(self, x: Any) -> int:
        i = self.ids.get(x)
        if i is None:
            if len(self.items) >= self.limit:
                raise ValueError(f"more than {self.limit} distinct {self.what} in the history")
            i = self.ids[x] = len(self.items)
            self.items.append(x)
        return i


class Values:
    """Value <-> int64 id: "p{producer}-{seq}" packed, anything else from a table."""

    def __init__(self) -> None:
        self._other: dict[Any, int] = {}
        self._items: list[Any] = []

    def encode(self, v: Any) -> int:
        if type(v) is str:
            m = _VALUE.fullmatch(v)
            if m:
                return (int(m[1]) << SEQ_BITS) | int(m[2])
        i = self._other.get(v)
        if i is None:
            self._items.append(v)
            i = self._other[v] = -len(self._items)
        return i

    def decode(self, i: int) -> Any:
        i = int(i)
        return f"p{i >> SEQ_BITS}-{i & SEQ_MASK}" if i >= 0 else self._items[-i - 1]


class ColumnHistory:
    """A history: rows for invoke/ok/poll events, dicts for the rest (module doc)."""

    def __init__(self) -> None:
        self.values = Values()
        self.processes = Interner("processes", 1 << 15)
        self.groups = Interner("groups", 1 << 15)
        self.keys = Interner("keys", 1 << 31)
        self.rare: list[dict[str, Any]] = []
        self._kind = array("B")
        self._t = array("d")
        self._process = array("h")
        self._value = array("q")
        self._partition = array("i")  # -1: an invoke without a partition
        self._offset = array("q")  # -1: none (an invoke, an ok without an offset)
        self._group = array("h")  # -1: a poll outside a group
        self._key = array("i")  # -1: no key
        self._rare_at = array("q")  # rows before each rare event
        self.frozen = False

    # --- building --------------------------------------------------------------

    def add(self, e: Mapping[str, Any]) -> None:
        kind = _KIND.get(e.get("type"))  # type: ignore[arg-type]
        if kind is None:
            self.rare.append(dict(e))
            self._rare_at.append(len(self._kind))
            return
        try:
            value = self.values.encode(e["value"])
            if kind == INVOKE:
                partition = int(e["partition"]) if "partition" in e else -1
                offset = -1
            elif kind == OK and e.get("offset") is None:  # acknowledged at no known offset
                partition, offset = int(e["partition"]), -1
            else:
                partition, offset = int(e["partition"]), int(e["offset"])
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"a {e.get('type')} event without a usable {err}: {dict(e)}") from err
        if partition < -1 or offset < -1 or partition >= 1 << 22 or offset > SEQ_MASK:
            raise ValueError(f"partition or offset out of range in {dict(e)}")
        t = e.get("t")
        self._kind.append(kind)
        self._t.append(math.nan if t is None else float(t))
        self._process.append(self.processes.id(e.get("process")))
        self._value.append(value)
        self._partition.append(partition)
        self._offset.append(offset)
        self._group.append(self.groups.id(e["group"]) if kind == POLL and "group" in e else -1)
        self._key.append(self.keys.id(e["key"]) if kind == INVOKE and "key" in e else -1)

    def freeze(self) -> ColumnHistory:
        """The columns as numpy arrays (no copy); no more add() after this."""
        if not self.frozen:
            self.kind = np.frombuffer(self._kind, dtype=np.uint8)
            self.t = np.frombuffer(self._t, dtype=np.float64)
            self.process = np.frombuffer(self._process, dtype=np.int16)
            self.value = np.frombuffer(self._value, dtype=np.int64)
            self.partition = np.frombuffer(self._partition, dtype=np.int32)
            self.offset = np.frombuffer(self._offset, dtype=np.int64)
            self.group = np.frombuffer(self._group, dtype=np.int16)
            self.key = np.frombuffer(self._key, dtype=np.int32)
            self.rare_at = np.frombuffer(self._rare_at, dtype=np.int64)
            self.frozen = True
        return self

    @classmethod
    def from_events(cls, events: Iterable[Mapping[str, Any]]) -> ColumnHistory:
        h = cls()
        for e in events:
            h.add(e)
        return h.freeze()

    # --- reading ---------------------------------------------------------------

    @property
    def rows(self) -> int:
        return len(self.kind)

    def __len__(self) -> int:
        return self.rows + len(self.rare)

    def seq(self, rows: np.ndarray) -> np.ndarray:
        """The positions in the whole history of these rows."""
        return rows + np.searchsorted(self.rare_at, rows, side="right")

    def rare_seq(self, j: int) -> int:
        return int(self.rare_at[j]) + j

    def t_or_none(self, row: int) -> float | None:
        t = float(self.t[row])
        return None if math.isnan(t) else t

    def row_event(self, i: int) -> dict[str, Any]:
        e: dict[str, Any] = {"type": KINDS[self.kind[i]]}
        t = self.t_or_none(i)
        if t is not None:
            e["t"] = t
        e["process"] = self.processes.items[self.process[i]]
        e["value"] = self.values.decode(self.value[i])
        if self.partition[i] >= 0:
            e["partition"] = int(self.partition[i])
        if self.offset[i] >= 0:
            e["offset"] = int(self.offset[i])
        if self.group[i] >= 0:
            e["group"] = self.groups.items[self.group[i]]
        if self.key[i] >= 0:
            e["key"] = self.keys.items[self.key[i]]
        return e

    def __iter__(self) -> Iterator[dict[str, Any]]:
        """Every event in history order (slow for a soak: for tests and small runs)."""
        j = 0
        for i in range(self.rows):
            while j < len(self.rare) and self.rare_at[j] <= i:
                yield self.rare[j]
                j += 1
            yield self.row_event(i)
        yield from self.rare[j:]

    def max_t(self, default: float) -> float:
        """max(e.get("t", 0.0)) over every event, `default` if there is none."""
        ts = [float(e.get("t", 0.0)) for e in self.rare]
        if self.rows:
            ts.append(float(np.nan_to_num(self.t, nan=0.0).max()))
        return max(ts, default=default)


# The workload's own lines (json.dumps of its dicts, keys in its order), matched
# without building a dict; any other line (escapes, other keys or key order, numbers
# such as NaN) goes through json.loads and ColumnHistory.add, which give the same.
_NUM = r"(-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?)"
_STR = r'"([^"\\]*)"'
_INT = r"(0|[1-9][0-9]{0,17})"
_VAL = r'"(?:p(0|[1-9][0-9]{0,5})-(0|[1-9][0-9]{0,11})|([^"\\]*))"'
_INVOKE_LINE = re.compile(
    rf'\{{"type":"invoke","t":{_NUM},"process":{_STR},"value":{_VAL},"partition":{_INT}'
    rf'(?:,"key":{_STR})?\}}'
)
_OK_LINE = re.compile(
    rf'\{{"type":"ok","t":{_NUM},"process":{_STR},"value":{_VAL},"partition":{_INT},'
    rf'"offset":{_INT}(?:,"t0":{_NUM})?(?:,"latency":{_NUM})?\}}'
)
_POLL_LINE = re.compile(
    rf'\{{"type":"poll","t":{_NUM},"process":{_STR},"partition":{_INT},"offset":{_INT},'
    rf'"value":{_VAL}(?:,"group":{_STR})?\}}'
)


# Where each of the three lines' regex groups are: t, process, producer, seq, other
# value, partition, offset, group, key (None: the line has no such field).
_LAYOUT = {
    INVOKE: (0, 1, 2, 3, 4, 5, None, None, 6),
    OK: (0, 1, 2, 3, 4, 5, 6, None, None),
    POLL: (0, 1, 4, 5, 6, 2, 3, 7, None),
}
_BATCH = 1 << 13  # rows converted to columns at a time (their strings: a few MB)


class _Batch:
    """The workload lines matched since the last flush: their regex groups, turned
    into columns a batch at a time (numpy converts; Python only matches)."""

    def __init__(self, h: ColumnHistory) -> None:
        self.h = h
        self.order = bytearray()
        self.groups: dict[int, list[tuple[Any, ...]]] = {INVOKE: [], OK: [], POLL: []}

    def flush(self) -> None:
        n = len(self.order)
        if not n:
            return
        h = self.h
        kinds = np.frombuffer(bytes(self.order), dtype=np.uint8)
        t = np.empty(n, np.float64)
        proc = np.empty(n, np.int16)
        value = np.empty(n, np.int64)
        part = np.empty(n, np.int64)
        off = np.full(n, -1, np.int64)
        group = np.full(n, -1, np.int16)
        key = np.full(n, -1, np.int32)
        for kind, rows in self.groups.items():
            if not rows:
                continue
            pos = np.flatnonzero(kinds == kind)
            cols = list(zip(*rows, strict=True))
            it, ip, iprod, iseq, iother, ipart, ioff, igroup, ikey = _LAYOUT[kind]
            t[pos] = np.array(cols[it], dtype=np.float64)  # float() of each: exact
            proc[pos] = [h.processes.id(x) for x in cols[ip]]
            prods, seqs = cols[iprod], cols[iseq]
            if None in prods:
                encode = h.values.encode
                value[pos] = [
                    (int(a) << SEQ_BITS) | int(b) if a is not None else encode(o)
                    for a, b, o in zip(prods, seqs, cols[iother], strict=True)
                ]
            else:
                value[pos] = (np.array(prods, dtype=np.int64) << SEQ_BITS) | np.array(
                    seqs, dtype=np.int64
                )
            part[pos] = np.array(cols[ipart], dtype=np.int64)
            if ioff is not None:
                off[pos] = np.array(cols[ioff], dtype=np.int64)
            if igroup is not None:
                group[pos] = [-1 if g is None else h.groups.id(g) for g in cols[igroup]]
            if ikey is not None:
                key[pos] = [-1 if k is None else h.keys.id(k) for k in cols[ikey]]
            rows.clear()
        if part.max() >= 1 << 22 or off.max() > SEQ_MASK:
            raise ValueError("a partition or offset out of range in the history")
        h._kind.frombytes(kinds.tobytes())
        h._t.frombytes(t.tobytes())
        h._process.frombytes(proc.tobytes())
        h._value.frombytes(value.tobytes())
        h._partition.frombytes(part.astype(np.int32).tobytes())
        h._offset.frombytes(off.tobytes())
        h._group.frombytes(group.tobytes())
        h._key.frombytes(key.tobytes())
        self.order.clear()


def read_columns(path: Path) -> ColumnHistory:
    """read_history's events as a ColumnHistory, streamed: a torn last line (a crash
    mid-write) or any unreadable line is skipped, as read_history does."""
    h = ColumnHistory()
    batch = _Batch(h)
    order = batch.order
    invokes, oks, polls = batch.groups[INVOKE], batch.groups[OK], batch.groups[POLL]
    loads = json.loads
    invoke_m, ok_m, poll_m = _INVOKE_LINE.fullmatch, _OK_LINE.fullmatch, _POLL_LINE.fullmatch
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            head = line[9:11]
            if head == "po" and (m := poll_m(line)):
                polls.append(m.groups())
                order.append(POLL)
            elif head == "ok" and (m := ok_m(line)):
                oks.append(m.groups())
                order.append(OK)
            elif head == "in" and (m := invoke_m(line)):
                invokes.append(m.groups())
                order.append(INVOKE)
            else:
                if not line:
                    continue
                try:
                    e = loads(line)
                except json.JSONDecodeError:
                    continue
                if e.get("type") in _KIND:  # a row: the rows before it first
                    batch.flush()
                    h.add(e)
                else:  # a rare event: where it stands among the rows
                    h.rare.append(e)
                    h._rare_at.append(len(h._kind) + len(order))
                continue
            if len(order) >= _BATCH:
                batch.flush()
    batch.flush()
    return h.freeze()
