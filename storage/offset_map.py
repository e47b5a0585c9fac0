"""The cleaner's key -> last offset map, bounded by `log.cleaner.dedupe.buffer.size`.

Like Kafka's SkimpyOffsetMap it stores no keys, only a 16-byte MD5 of each key
and an 8-byte offset: 24 bytes a slot, in an open-addressing table (linear
probing) held in numpy arrays, so its memory is the buffer it was given and
nothing per entry beyond it. It fills up to `load_factor` of its slots; the
cleaner then stops mapping and cleans in several passes.

Keys are added and looked up many at a time (one call per chunk of records):
a Python-level probe per key would cost more than the rest of the cleaning.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

BYTES_PER_ENTRY = 24  # 16-byte MD5 + 8-byte offset, as in Kafka
EMPTY = -1

U64 = npt.NDArray[np.uint64]
I64 = npt.NDArray[np.int64]


def hash_keys(keys: Sequence[bytes]) -> tuple[U64, U64]:
    """The MD5 of every key as two uint64 halves (h1 picks the slot, both compare)."""
    md5 = hashlib.md5
    digests = b"".join([md5(k).digest() for k in keys])
    both = np.frombuffer(digests, dtype="<u8").reshape(-1, 2)
    return both[:, 0], both[:, 1]


class OffsetMap:
    """An open-addressing map of key hash -> offset in at most `memory` bytes."""

    def __init__(self, memory: int, load_factor: float = 0.9) -> None:
        if not 0 < load_factor <= 1:
            raise ValueError(f"load factor {load_factor} is not in (0, 1]")
        self.slots = max(1, memory // BYTES_PER_ENTRY)
        self.max_entries = int(self.slots * load_factor)
        self._h1: U64
        self._h2: U64
        self._offsets: I64  # offset + 1; 0 marks a free slot
        self.clear()

    @property
    def memory_bytes(self) -> int:
        return self._h1.nbytes + self._h2.nbytes + self._offsets.nbytes

    @property
    def free(self) -> int:
        """How many more distinct keys fit before the map counts as full."""
        return self.max_entries - self.size

    def clear(self) -> None:
        used = getattr(self, "_used", None)
        if used is not None and self.size <= self.slots // 16:
            # A lightly used map: zero the slots written (a pass over a small log
            # does not pay for touching the whole buffer again).
            for positions in used:
                self._offsets[positions] = 0
        else:
            # Fresh zeroed arrays: the pages come from the OS untouched, so an idle
            # or lightly used map costs memory only for the slots it has written.
            self._h1 = np.zeros(self.slots, dtype=np.uint64)
            self._h2 = np.zeros(self.slots, dtype=np.uint64)
            self._offsets = np.zeros(self.slots, dtype=np.int64)
        self._used: list[I64] = []  # the slots claimed, while few (see clear)
        self.size: int = 0
        self.latest_offset = -1

    def put_many(self, h1: U64, h2: U64, offsets: I64) -> None:
        """Record `offsets` (ascending, at or above every offset put so far) for the
        keys; a key seen twice keeps its last offset. The caller keeps within `free`."""
        n = len(offsets)
        if n == 0:
            return
        # Within the input the last occurrence of a key wins: sort by key, then
        # offset, and keep each key's final row.
        order = np.lexsort((offsets, h2, h1))
        s1, s2, so = h1[order], h2[order], offsets[order]
        last = np.ones(n, dtype=bool)
        last[:-1] = (s1[1:] != s1[:-1]) | (s2[1:] != s2[:-1])
        k1, k2, ko = s1[last], s2[last], so[last] + 1
        slots = np.uint64(self.slots)
        pos = (k1 % slots).astype(np.int64)
        table1, table2, table_off = self._h1, self._h2, self._offsets
        # Each round settles at least one key (a free slot claimed or a match) while
        # the table has a free slot, and a key probes at most every slot: bounded by
        # slots + keys rounds. The caller keeps `size` within `max_entries`.
        for _ in range(self.slots + len(ko) + 1):
            if len(pos) == 0:
                break
            cur = table_off[pos]
            empty = cur == 0
            match = ~empty & (table1[pos] == k1) & (table2[pos] == k2)
            if match.any():
                table_off[pos[match]] = ko[match]
            if empty.any():
                epos = pos[empty]
                # Several keys may reach one free slot in the same round: the first takes it.
                _u, first = np.unique(epos, return_index=True)
                winners = np.flatnonzero(empty)[first]
                wpos = pos[winners]
                table1[wpos] = k1[winners]
                table2[wpos] = k2[winners]
                table_off[wpos] = ko[winners]
                self.size += len(winners)
                if self.size <= self.slots // 16:
                    self._used.append(wpos)
                settled = match.copy()
                settled[winners] = True
            else:
                settled = match
            # Keys facing another key's slot move on; losers of a race retry in place.
            advance = ~empty & ~match
            pos = np.where(advance, pos + 1, pos)
            pos[pos >= self.slots] = 0
            keep = ~settled
            pos, k1, k2, ko = pos[keep], k1[keep], k2[keep], ko[keep]
        else:  # only a table without a free slot gets here
            raise OverflowError(f"offset map of {self.slots} slots is full")
        self.latest_offset = max(self.latest_offset, int(offsets[-1]))

    def get_many(self, h1: U64, h2: U64) -> I64:
        """The offset stored for each key, EMPTY (-1) for keys not in the map."""
        n = len(h1)
        result = np.full(n, EMPTY, dtype=np.int64)
        if n == 0 or self.size == 0:
            return result
        idx = np.arange(n)
        slots = np.uint64(self.slots)
        pos = (h1 % slots).astype(np.int64)
        k1, k2 = h1, h2
        table1, table2, table_off = self._h1, self._h2, self._offsets
        for _ in range(self.slots + 1):
            if len(pos) == 0:
                break
            cur = table_off[pos]
            empty = cur == 0
            match = ~empty & (table1[pos] == k1) & (table2[pos] == k2)
            result[idx[match]] = cur[match] - 1
            keep = ~empty & ~match
            pos = pos[keep] + 1
            pos[pos >= self.slots] = 0
            idx, k1, k2 = idx[keep], k1[keep], k2[keep]
        return result

    def __repr__(self) -> str:
        return f"OffsetMap(slots={self.slots}, size={self.size}, max={self.max_entries})"


__all__ = ["BYTES_PER_ENTRY", "EMPTY", "OffsetMap", "hash_keys"]
