"""Smoke run of bench/groups.py --quick: three real nodes, confluent-kafka group
members rebalancing and a committing consumer; it ends with its JSON line. No speed
assertions here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "groups.py"

pytest.importorskip("confluent_kafka")


@pytest.mark.long
@pytest.mark.timeout(300)
def test_quick_run_prints_json_last(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["benchmark"] == "groups"
    rebalance = result["rebalance_to_stable_of_3_ms"]
    assert 0 < rebalance["median"] <= rebalance["p99"] and rebalance["rounds"] == 3
    assert result["commits_per_s"] > 0 and result["commits"] > 0
    ours = result["seglog_consumer"]
    assert (
        0
        < ours["rebalance_to_stable_of_3_ms"]["median"]
        <= ours["rebalance_to_stable_of_3_ms"]["p99"]
    )
    assert ours["commits_per_s"] > 0 and ours["commits"] > 0
