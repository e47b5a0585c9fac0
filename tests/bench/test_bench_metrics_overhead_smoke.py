"""Smoke run of bench/metrics_overhead.py --quick: one real node, produce phases with and
without /metrics scraped every second; it ends with its JSON line. No speed assertions
here: the goal (ratio >= 0.95) lives in the JSON it prints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "metrics_overhead.py"


@pytest.mark.long
@pytest.mark.timeout(240)
def test_quick_run_prints_json_last(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=220,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-4000:]
    lines = proc.stdout.strip().splitlines()
    assert len(lines) > 1, "progress lines come before the JSON"
    result = json.loads(lines[-1])
    assert result["benchmark"] == "metrics_overhead"
    assert len(result["rounds"]) == 2
    for r in result["rounds"]:
        assert r["unscraped_mb_s"] > 0 and r["scraped_mb_s"] > 0
    # Every scraped phase scraped and parsed (the bench fails a phase without a scrape).
    assert result["scrapes"] >= 2 and result["samples_per_scrape"] > 50
    assert result["node_cpu_ms_per_scrape"] > 0
    assert result["ratio"] > 0
    entry = result["targets"]["ratio"]
    assert entry["value"] == result["ratio"] and entry["target"] == 0.95
    assert isinstance(entry["met"], bool)


def test_bad_arguments_are_refused() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--rounds", "0"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2 and "--rounds must be positive" in proc.stderr, proc.stderr
