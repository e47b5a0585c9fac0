"""Smoke run of bench/node.py --quick: it runs against a real node and ends with its
JSON line. No speed assertions here; the goals live in the JSON it prints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "node.py"

POSITIVE = (
    "ceiling_mb_s",
    "ceiling_put_mb_s",
    "ceiling_get_mb_s",
    "produce_floor_mb_s",
    "consume_floor_mb_s",
    "produce_raw_mb_s",
    "produce_client_mb_s",
    "produce_client_records_s",
    "consume_raw_mb_s",
    "consume_client_mb_s",
    "consume_client_records_s",
    "produce_raw_ratio",
    "produce_client_ratio",
    "consume_raw_ratio",
    "consume_client_ratio",
    "produce_floor_ratio",
    "consume_floor_ratio",
    "produce_raw_of_floor",
    "consume_raw_of_floor",
    "log_bytes",
    "cpu_count",
)
RATIOS = ("produce_raw_ratio", "produce_client_ratio", "consume_raw_ratio", "consume_client_ratio")


def _positive_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


@pytest.mark.long  # a benchmark's smoke run, as the other benches' (tests/run.sh)
@pytest.mark.timeout(240)
def test_quick_run_prints_json_last(tmp_path: Path) -> None:
    data, picture = tmp_path / "data", tmp_path / "bench.png"
    data.mkdir()
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--dir", str(data), "--plot", str(picture)],
        capture_output=True,
        text=True,
        timeout=220,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    lines = proc.stdout.strip().splitlines()
    assert len(lines) > 1, "progress lines come before the JSON"
    result = json.loads(lines[-1])
    assert result["benchmark"] == "node"
    for key in POSITIVE:
        assert _positive_number(result[key]), (key, result[key])
    assert result["ceiling_mb_s"] == result["ceiling_put_mb_s"]
    for name in RATIOS:
        entry = result["targets"][name]
        assert entry["value"] == result[name]
        assert entry["target"] > 0 and isinstance(entry["met"], bool), (name, entry)
    # The floor's ratios are its rates over the same run's ceiling and the node's
    # (the printed rates are rounded to 0.1 MiB/s, the ratios computed before that).
    floor_share = result["produce_floor_mb_s"] / result["ceiling_put_mb_s"]
    assert abs(result["produce_floor_ratio"] - floor_share) < 0.002
    node_share = result["consume_raw_mb_s"] / result["consume_floor_mb_s"]
    assert abs(result["consume_raw_of_floor"] - node_share) < 0.002
    for phase in (
        "produce_floor",
        "consume_floor",
        "produce_raw",
        "produce_client",
        "consume_raw",
        "consume_client",
    ):
        assert set(result["cpu_cores"][phase]) == {"server_cores", "client_cores"}
    assert result["params"]["quick"] is True
    assert result["params"]["record_bytes"] == 1024
    assert isinstance(result["python"], str) and result["python"]
    # The node's data directory is removed at the end.
    assert list(data.iterdir()) == []
    # --plot wrote its picture.
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and picture.stat().st_size > 10_000
