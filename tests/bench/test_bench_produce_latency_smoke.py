"""Smoke run of bench/produce_latency.py with small figures: three real nodes with
/metrics, sequential and paced produces; it ends with its JSON line, whose breakdown
comes from the nodes' own request metrics. No speed assertions: the figures are the
benchmark's to print."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "produce_latency.py"


def _positive_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


@pytest.mark.long
@pytest.mark.timeout(240)
def test_small_run_prints_the_breakdown_as_json_last(tmp_path: Path) -> None:
    plot = tmp_path / "cdf.png"
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run(
        [
            sys.executable, str(BENCH), "--rates", "300", "--partitions", "1,3",
            "--seconds", "1", "--sequential", "8", "--dir", str(work), "--plot", str(plot),
        ],
        capture_output=True,
        text=True,
        timeout=220,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-4000:]
    lines = proc.stdout.strip().splitlines()
    assert len(lines) > 1, "progress lines come before the JSON"
    result = json.loads(lines[-1])
    assert result["benchmark"] == "produce_latency"
    for kind in ("sequential_raw", "sequential_producer"):
        for acks in ("acks=1", "acks=all"):
            summary = result[kind][acks]
            assert summary["count"] == 8, (kind, acks, summary)
            assert 0 < summary["p50_ms"] <= summary["p99_ms"], (kind, acks, summary)
    runs = result["paced"]
    assert [(r["partitions"], r["rate"]) for r in runs] == [(1, 300), (3, 300)]
    for run in runs:
        assert run["client"]["count"] > 0 and run["client_requests"] > 0, run
        produce = run["nodes"]["Produce"]
        # Every acknowledged request was timed by a leader; acks=all waited for the ISR.
        assert produce["requests"] >= run["client_requests"], run
        assert _positive_number(produce["total_ms_mean"]), run
        assert _positive_number(produce["remote_ms_mean"]), run
        assert run["nodes"]["Fetch"]["requests"] > 0, run  # the followers' fetches
        assert set(run["cpu_cores"]) == {"nodes_cores", "client_cores"}
    assert plot.stat().st_size > 0
    assert list(work.iterdir()) == [], "the nodes' data directory is removed at the end"
