"""The replication simulator checks that production's Log keeps only a few inactive
segments' indexes mapped (each mapping holds a file descriptor). A chaos soak found
the bug: every index stayed mapped and a node ran out of descriptors. Seed 1 with
200-byte segments reproduces it when the log never unmaps an index."""

from __future__ import annotations

import pytest

from seglog.sim.replication_sim import SimulationFailure, simulate
from seglog.storage.segment import LogSegment


@pytest.mark.parametrize("seed", range(1, 31))
def test_small_segments_keep_few_indexes_mapped(seed: int) -> None:
    sim = simulate(seed, segment_bytes=200)
    assert sim.finished


def test_seed_1_reproduces_a_log_that_keeps_every_index_mapped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(LogSegment, "unload_indexes", lambda self: False)
    with pytest.raises(SimulationFailure, match=r"keeps the indexes of \d+ of its"):
        simulate(1, segment_bytes=200)
