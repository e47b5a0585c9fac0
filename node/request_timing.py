"""A request's remote time (Kafka's RemoteTimeMs: an acks=all produce waiting for its
ISR, a fetch long-polling for data) as the thread handling it accumulates it, for the
gRPC listener, whose handlers wait on their own thread. `begin` before the handler,
`add_remote` around each wait (a no-op on a thread that did not begin), `end` after."""

from __future__ import annotations

import threading

_local = threading.local()


def begin() -> None:
    _local.remote = 0.0


def add_remote(seconds: float) -> None:
    remote = getattr(_local, "remote", None)
    if remote is not None:
        _local.remote = remote + seconds


def end() -> float:
    """The remote seconds accumulated since `begin` (0 without one)."""
    remote = getattr(_local, "remote", None)
    _local.remote = None
    return remote or 0.0
