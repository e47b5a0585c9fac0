"""A chaos history held as columns: an hour's soak writes 30-35 million events, too
many to hold as dicts (about 410 bytes each in read_history, 20 GB for a soak).

The high-volume events (invoke, ok, poll) become one row each in numpy columns
(about 41 bytes a row); every other event (meta, phase, fault, seek, fail, commit,
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

    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}
        self.items: list[Any] = []

    def id(self, x: Any) -> int:
        i = self.ids.get(x)
        if i is None:
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
        self.processes = Interner()
        self.groups = Interner()
        self.keys = Interner()
        self.rare: list[dict[str, Any]] = []
        self._kind = array("B")
        self._t = array("d")
        self._process = array("i")
        self._value = array("q")
        self._partition = array("i")  # -1: an invoke without a partition
        self._offset = array("q")  # -1: none (an invoke)
        self._group = array("i")  # -1: a poll outside a group
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
            self.process = np.frombuffer(self._process, dtype=np.int32)
            self.value = np.frombuffer(self._value, dtype=np.int64)
            self.partition = np.frombuffer(self._partition, dtype=np.int32)
            self.offset = np.frombuffer(self._offset, dtype=np.int64)
            self.group = np.frombuffer(self._group, dtype=np.int32)
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


def read_columns(path: Path) -> ColumnHistory:
    """read_history's events as a ColumnHistory, streamed: a torn last line (a crash
    mid-write) or any unreadable line is skipped, as read_history does."""
    h = ColumnHistory()
    loads = json.loads
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                e = loads(line)
            except json.JSONDecodeError:
                continue
            h.add(e)
    return h.freeze()
