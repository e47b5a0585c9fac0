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
        self._offset = array("q")  # -1: none (an invoke)
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


def read_columns(path: Path) -> ColumnHistory:
    """read_history's events as a ColumnHistory, streamed: a torn last line (a crash
    mid-write) or any unreadable line is skipped, as read_history does."""
    h = ColumnHistory()
    loads = json.loads
    kind_a, t_a, proc_a = h._kind.append, h._t.append, h._process.append
    value_a, part_a, off_a = h._value.append, h._partition.append, h._offset.append
    group_a, key_a = h._group.append, h._key.append
    proc_id, group_id, key_id = h.processes.id, h.groups.id, h.keys.id
    encode = h.values.encode
    invoke_m, ok_m, poll_m = _INVOKE_LINE.fullmatch, _OK_LINE.fullmatch, _POLL_LINE.fullmatch
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            head = line[9:11]
            if head == "in" and (m := invoke_m(line)):
                t, proc, prod, seq, other, part, key = m.groups()
                kind_a(INVOKE)
                off_a(-1)
                group_a(-1)
                key_a(-1 if key is None else key_id(key))
            elif head == "ok" and (m := ok_m(line)):
                t, proc, prod, seq, other, part, off = m.groups()[:7]
                kind_a(OK)
                off_a(int(off))
                group_a(-1)
                key_a(-1)
            elif head == "po" and (m := poll_m(line)):
                t, proc, part, off, prod, seq, other, group = m.groups()
                kind_a(POLL)
                off_a(int(off))
                group_a(-1 if group is None else group_id(group))
                key_a(-1)
            else:
                if not line:
                    continue
                try:
                    e = loads(line)
                except json.JSONDecodeError:
                    continue
                h.add(e)
                continue
            t_a(float(t))
            proc_a(proc_id(proc))
            value_a((int(prod) << SEQ_BITS) | int(seq) if prod is not None else encode(other))
            p = int(part)
            if p >= 1 << 22 or (head != "in" and int(off) > SEQ_MASK):
                raise ValueError(f"partition or offset out of range in {line}")
            part_a(p)
    return h.freeze()
