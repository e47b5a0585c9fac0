"""When a leader's partitions need their ISR looked at, without scanning them (7.3).

A follower is out of sync once it has not caught up for replica.lag.time.max.ms, idle
partition or not. Two kinds of deadline cover every case, so the timer's cost follows
the partitions that have one, not the partitions hosted:

* per follower node: in a KIP-227 fetch session a follower's fetch names only the
  partitions whose position moved; for an idle partition the session's fetches are its
  fetches. When a node has not fetched for the lag (`silent`), every partition led here
  with it in the ISR is due; while it fetches, idle partitions cost nothing.
* per partition (`schedule`): a follower behind the leader's log end, or an
  AlterPartition waiting to be re-sent, makes its partition due at that time (the
  earliest wins; a partition that is not out of sync when it comes due is simply
  scheduled again by its owner).

Plain data, no clock: times come in as arguments.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)

# Bounds: one entry per hosted partition / follower node, far below these.
MAX_SCHEDULED = 10_000_000
MAX_NODES = 100_000


class IsrDeadlines(Generic[K]):
    def __init__(self) -> None:
        self._heap: list[tuple[int, int, K]] = []
        self._at: dict[K, int] = {}  # key -> its earliest scheduled time (in the heap)
        self._seq = 0  # ties: keys need not be comparable
        self._fetched: dict[int, int] = {}  # follower node -> its last fetch
        self._silent: set[int] = set()  # nodes reported silent since their last fetch

    # --- per partition ---------------------------------------------------------------

    def scheduled(self, key: K) -> int | None:
        return self._at.get(key)

    def schedule(self, key: K, at_ms: int) -> bool:
        """Make `key` due at `at_ms` unless it is due earlier already; True if taken."""
        current = self._at.get(key)
        if current is not None and current <= at_ms:
            return False
        if current is None and len(self._at) >= MAX_SCHEDULED:
            raise ValueError(f"more than {MAX_SCHEDULED} partitions scheduled")
        self._at[key] = at_ms
        self._seq += 1
        heapq.heappush(self._heap, (at_ms, self._seq, key))
        return True

    def discard(self, key: K) -> None:
        """The partition left (or stopped leading): its entry is dropped when reached."""
        self._at.pop(key, None)

    def due(self, now_ms: int, limit: int) -> list[K]:
        """Up to `limit` keys whose time came, each once, earliest first; they are no
        longer scheduled (the caller schedules them again as their state says)."""
        out: list[K] = []
        heap = self._heap
        while heap and heap[0][0] <= now_ms and len(out) < limit:
            at, _, key = heapq.heappop(heap)
            if self._at.get(key) == at:  # else superseded by an earlier entry, or dropped
                del self._at[key]
                out.append(key)
        # Stale entries (superseded, dropped) would otherwise pile up under busy keys.
        if len(heap) > 2 * len(self._at) + 64:
            self._heap = [(at, s, k) for at, s, k in heap if self._at.get(k) == at]
            heapq.heapify(self._heap)
        return out

    # --- per follower node -----------------------------------------------------------

    def fetched(self, node: int, now_ms: int) -> None:
        """A fetch from follower `node` arrived (any partition, any session)."""
        if node not in self._fetched and len(self._fetched) >= MAX_NODES:
            raise ValueError(f"more than {MAX_NODES} follower nodes")
        if self._fetched.get(node, now_ms) <= now_ms:
            self._fetched[node] = now_ms
        self._silent.discard(node)

    def last_fetch_ms(self, node: int, default: int) -> int:
        return self._fetched.get(node, default)

    def silent(self, now_ms: int, lag_ms: int) -> list[int]:
        """Follower nodes that have not fetched for more than `lag_ms`, each reported
        once per silence (again only after a fetch and a new silence)."""
        out = [
            n
            for n, at in self._fetched.items()
            if now_ms - at > lag_ms and n not in self._silent
        ]
        self._silent.update(out)
        return sorted(out)
