"""Smoke run of bench/pipeline.py --quick: it runs (batch reads, sink, streaming
latency) and ends with its JSON line.

No speed assertions here; the figures live in the JSON it prints.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "pipeline.py"

POSITIVE = (
    "spark_rows_per_s",
    "spark_count_rows_per_s",
    "consumer_rows_per_s",
    "ratio",
    "sink_rows_per_s",
    "producer_rows_per_s",
    "sink_ratio",
)


@pytest.mark.long
def test_quick_run_prints_json_last() -> None:
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.skip("Spark needs Java")
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick"],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    lines = proc.stdout.strip().splitlines()
    assert len(lines) > 1, "progress lines come before the JSON"
    result = json.loads(lines[-1])
    for key in POSITIVE:
        value = result[key]
        assert isinstance(value, int | float) and not isinstance(value, bool), (key, value)
        assert value > 0, (key, value)
    assert result["records"] > 0 and result["partitions"] > 0
    assert isinstance(result["notes"], list) and result["notes"]
    assert [b["records"] for b in result["by_records"]] == [result["records"]]
    # The streaming phase: every produced record reached the sink, latencies measured.
    streaming = result["streaming"]
    assert streaming["produced"] > 0 and streaming["measured_records"] > 0
    latency = streaming["latency_ms"]
    assert 0 <= latency["p50"] <= latency["p99"] <= latency["max"], latency
    assert streaming["micro_batches"]["count"] > 0
