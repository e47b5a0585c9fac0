"""Log.read_slice (the sendfile path of Kafka fetch responses) covers exactly the
bytes Log.read returns, for every start offset, size limit and upper bound, across
segment rolls; the slice survives the segment's deletion."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from log_fixtures import T0, make_batch

from seglog.storage.errors import OffsetOutOfRangeError
from seglog.storage.log import Log
from seglog.storage.log_config import LogConfig


def _log(tmp_path: Path) -> Log:
    cfg = LogConfig.defaults().with_overrides({"segment.bytes": "2000"})
    log = Log.open(tmp_path / "t-0", cfg, time_ms=T0)
    rnd = random.Random(7)
    for _ in range(60):
        log.append_as_leader(make_batch(rnd.randint(1, 4), value_size=rnd.randint(5, 200)), 0)
    return log


def test_read_slice_matches_read_everywhere(tmp_path):
    log = _log(tmp_path)
    assert len(log.segments) > 3
    leo = log.log_end_offset
    checked = 0
    for offset in range(0, leo + 1):
        for max_bytes in (1, 150, 700, 5000):
            for upper in (None, leo // 2, leo):
                for min_one in (True, False):
                    want = log.read(offset, max_bytes, upper_bound=upper, min_one_batch=min_one)
                    piece = log.read_slice(
                        offset, max_bytes, upper_bound=upper, min_one_batch=min_one
                    )
                    try:
                        assert piece.read() == bytes(want.records), (offset, max_bytes, upper)
                    finally:
                        piece.close()
                    checked += 1
    assert checked > 1000
    with pytest.raises(OffsetOutOfRangeError):
        log.read_slice(leo + 1, 100)
    log.close()


def test_a_slice_outlives_its_segment_file(tmp_path):
    log = _log(tmp_path)
    piece = log.read_slice(0, 10_000)
    want = bytes(log.read(0, 10_000).records)
    first = log.segments[0].log_path
    log.close()
    first.unlink()
    assert not first.exists()
    assert piece.read() == want and len(piece) == len(want) > 0
    piece.close()
    assert piece.fd == -1
