"""Kafka's AlterPartitionManager, as decisions without I/O: a broker's ISR changes go
to the controller in one request at a time, whatever the number of partitions.

Pending changes are kept one per partition (a newer change of a partition replaces
an older one not yet sent); `next_batch` hands out everything pending as one request
unless a request is still in flight; its answer (`answered`) or failure (`failed`:
the changes go back unless newer ones came meanwhile) frees the way for the next.
Per-partition retries at a slow controller would otherwise queue faster than it
answers and never drain (seen in the simulator with 48 partitions and a controller
taking 200-600 ms a request). The node's shell (`node/alter_partition_manager.py`)
and the replication simulator both drive this class.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

from .partition_replica import SendAlterPartition

K = TypeVar("K", bound=Hashable)  # a partition's key: (topic, partition) or an index

MAX_ITEMS_PER_REQUEST = 2_000


class AlterPartitionBatcher(Generic[K]):
    def __init__(self, max_items: int = MAX_ITEMS_PER_REQUEST) -> None:
        assert max_items >= 1
        self.max_items = max_items
        self._pending: dict[K, SendAlterPartition] = {}
        self._in_flight: list[tuple[K, SendAlterPartition]] | None = None

    @property
    def pending(self) -> int:
        return len(self._pending)

    @property
    def in_flight(self) -> bool:
        return self._in_flight is not None

    def submit(self, key: K, request: SendAlterPartition) -> None:
        """Queue a partition's change; it replaces one of the same partition not yet
        sent."""
        self._pending[key] = request

    def next_batch(self) -> list[tuple[K, SendAlterPartition]] | None:
        """The next request's changes, or None (nothing pending, or one in flight)."""
        if self._in_flight is not None or not self._pending:
            return None
        batch = []
        for key in list(self._pending)[: self.max_items]:
            batch.append((key, self._pending.pop(key)))
        self._in_flight = batch
        return batch

    def answered(self) -> list[tuple[K, SendAlterPartition]]:
        """The request in flight was answered; returns its changes, in order."""
        assert self._in_flight is not None, "no request in flight"
        batch, self._in_flight = self._in_flight, None
        return batch

    def failed(self) -> None:
        """The request in flight got no answer: its changes go back, unless a newer
        change of the same partition came meanwhile."""
        assert self._in_flight is not None, "no request in flight"
        batch, self._in_flight = self._in_flight, None
        for key, request in batch:
            self._pending.setdefault(key, request)

    def resolved(self, key: K, request_id: int) -> None:
        """A change was answered after its request timed out and it went back to
        pending: it needs no new request."""
        request = self._pending.get(key)
        if request is not None and request.request_id == request_id:
            del self._pending[key]

    def reset(self) -> None:
        """Forget everything (the node restarted)."""
        self._pending.clear()
        self._in_flight = None
