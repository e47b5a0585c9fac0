"""The garbage collector's passes are timed per generation into the node's metric."""

from __future__ import annotations

import gc

from seglog.node import gc_pauses
from seglog.node.metrics import NodeMetrics


class Pauses:
    def __init__(self) -> None:
        self.seen: list[tuple[int, float]] = []

    def gc_pause(self, generation: int, seconds: float) -> None:
        self.seen.append((generation, seconds))


def test_every_collection_pass_is_timed_with_its_generation() -> None:
    sink = Pauses()
    observer = gc_pauses.observe(sink)
    try:
        gc.collect(0)
        gc.collect(2)
    finally:
        gc_pauses.forget(observer)
    assert [g for g, _ in sink.seen][-2:] == [0, 2]
    assert all(0 <= s < 10 for _, s in sink.seen)
    assert observer not in gc.callbacks


def test_the_node_metric_counts_passes_per_generation() -> None:
    metrics = NodeMetrics()
    observer = gc_pauses.observe(metrics)
    try:
        gc.collect(1)
    finally:
        gc_pauses.forget(observer)
    count = metrics.registry.get_sample_value(
        "python_gc_collection_seconds_count", {"generation": "1"}
    )
    assert count is not None and count >= 1
