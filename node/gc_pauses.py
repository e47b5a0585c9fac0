"""The node's garbage-collector pauses, measured.

CPython's cyclic collector holds the GIL while it walks a generation, so every thread
of the node (request handlers, fetchers, the Kafka listener's processors) stops for
the pass, and a full (generation 2) pass walks every container object the process
holds. An acks=all produce that meets a pass waits for it: the passes are one
suspect for produce-latency tails, and this makes them visible.
`observe()` times every pass into `python_gc_collection_seconds{generation}`, as the
JMX exporter's `jvm_gc_collection_seconds{gc}` does for Kafka's collectors."""

from __future__ import annotations

import gc
from typing import Any, Protocol

from seglog.storage.disk_and_clock import plain_perf_s


class PauseSink(Protocol):
    def gc_pause(self, generation: int, seconds: float) -> None: ...


class GcObserver:
    """A gc.callbacks entry timing each collection pass; passes never overlap (the
    collector is not re-entrant and runs with the GIL held), so one start time will do."""

    def __init__(self, sink: PauseSink) -> None:
        self.sink = sink
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = plain_perf_s()
        elif phase == "stop" and self._started:
            self.sink.gc_pause(int(info["generation"]), plain_perf_s() - self._started)
            self._started = 0.0


def observe(sink: PauseSink) -> GcObserver:
    observer = GcObserver(sink)
    gc.callbacks.append(observer)
    return observer


def forget(observer: GcObserver) -> None:
    if observer in gc.callbacks:
        gc.callbacks.remove(observer)
