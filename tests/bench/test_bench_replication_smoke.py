"""Smoke run of bench/replication.py --quick: three real nodes, RF=3, acks=-1, three
leader kills; it ends with its JSON line. No speed assertions here; the goals live in the
JSON it prints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "replication.py"

POSITIVE = (
    "produce_raw_mb_s",
    "produce_raw_records_s",
    "produce_client_mb_s",
    "produce_client_records_s",
    "latency_rate_records_s",
    "log_bytes",
    "cpu_count",
)
TARGETS = ("produce_raw_mb_s", "produce_client_mb_s", "latency_p99_ms", "failover_median_ms")


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
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-4000:]
    lines = proc.stdout.strip().splitlines()
    assert len(lines) > 1, "progress lines come before the JSON"
    result = json.loads(lines[-1])
    assert result["benchmark"] == "replication"
    for key in POSITIVE:
        assert _positive_number(result[key]), (key, result[key])
    for summary in (result["latency"], result["produce_raw_request_latency"]):
        for key in ("p50_ms", "p99_ms", "count"):
            assert _positive_number(summary[key]), (key, summary)
        assert summary["p50_ms"] <= summary["p99_ms"]

    failover = result["failover"]
    assert failover["kills"] == 3 == len(result["failover_kills"])
    for key in ("median_ms", "p99_ms", "min_ms", "max_ms"):
        assert _positive_number(failover[key]), (key, failover)
    for kill in result["failover_kills"]:
        assert _positive_number(kill["unavailable_ms"]), kill
        assert kill["killed"] in (1, 2, 3) and kill["new_leader"] in (1, 2, 3), kill
        assert kill["new_leader"] != kill["killed"], kill
        assert isinstance(kill["was_controller"], bool), kill

    for name in TARGETS:
        entry = result["targets"][name]
        assert _positive_number(entry["value"]) and _positive_number(entry["target"]), entry
        assert isinstance(entry["met"], bool), (name, entry)
    for phase in ("produce_raw", "produce_client", "latency"):
        assert set(result["cpu_cores"][phase]) == {"nodes_cores", "client_cores"}
    params = result["params"]
    assert params["quick"] is True and params["kills"] == 3
    assert (params["record_bytes"], params["replication_factor"], params["acks"]) == (1024, 3, -1)
    # The nodes' data directory is removed at the end.
    assert list(data.iterdir()) == []
    # --plot wrote its picture.
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and picture.stat().st_size > 10_000
