"""Smoke run of bench/controller.py --quick: three real nodes, three SIGKILLs of the active
controller, and the JSON line last. No speed assertions here; the goal lives in the JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "controller.py"

POSITIVE = (
    "failover_median_s",
    "failover_p99_s",
    "failover_min_s",
    "failover_max_s",
    "failover_mean_s",
    "target_median_s",
    "wall_s",
    "cpu_count",
)
SUMMARY_KEYS = {"median_s", "p99_s", "min_s", "max_s", "mean_s"}


def _positive_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


@pytest.mark.long
@pytest.mark.timeout(300)
def test_quick_run_prints_json_last(tmp_path: Path) -> None:
    data, picture = tmp_path / "data", tmp_path / "bench.png"
    data.mkdir()
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--dir", str(data), "--plot", str(picture)],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    lines = proc.stdout.strip().splitlines()
    assert len(lines) > 1, "progress lines come before the JSON"
    result = json.loads(lines[-1])
    assert result["benchmark"] == "controller"
    assert result["kills"] == 3 and result["params"]["quick"] is True
    assert result["timeouts"] == 0, result["samples"]
    for key in POSITIVE:
        assert _positive_number(result[key]), (key, result[key])
    assert result["target_median_s"] == 1.0
    assert isinstance(result["met"], bool)
    f = result
    assert f["failover_min_s"] <= f["failover_median_s"] <= f["failover_max_s"]
    assert f["failover_p99_s"] == f["failover_max_s"]  # nearest rank over 3 kills
    for name in ("election", "create_after_election", "rejoin"):
        assert set(result[name]) == SUMMARY_KEYS, (name, result[name])
        assert all(isinstance(v, int | float) for v in result[name].values()), result[name]
    assert len(result["samples"]) == 3
    for s in result["samples"]:
        assert s["killed"] != s["new_leader"] and s["new_term"] > s["term"], s
        assert _positive_number(s["failover_s"]) and s["attempts"] >= 1, s
    assert isinstance(result["python"], str) and result["python"]
    # The nodes' data directory is removed at the end.
    assert list(data.iterdir()) == []
    # --plot wrote its picture.
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and picture.stat().st_size > 10_000
