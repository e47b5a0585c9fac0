"""Disk operations in flight, so the node can notice a disk that stopped answering
(issue 39): a write or fsync blocked in the kernel (a hung device, a process in D
state) looks like nothing at all from outside, while the partition lock it holds stalls
every produce and fetch of that partition. The storage hooks (`disk_and_clock.disk_write`,
`disk_fsync`) mark each operation; the broker's stall watchdog asks for the oldest.

One entry per thread (an operation in flight per thread at most), so the table is
bounded by the thread count; marking costs two dictionary operations.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

_in_flight: dict[int, float] = {}  # thread ident -> monotonic start of its disk operation
F = TypeVar("F", bound=Callable[..., Any])


def watched(op: F) -> F:
    """`op` with its time in flight marked."""

    def run(*args: Any) -> Any:
        ident = threading.get_ident()
        _in_flight[ident] = time.monotonic()
        try:
            return op(*args)
        finally:
            _in_flight.pop(ident, None)

    return run  # type: ignore[return-value]


def oldest_started() -> float | None:
    """When the longest-running disk operation now in flight started (monotonic), or
    None when none is."""
    started = list(_in_flight.values())
    return min(started) if started else None
