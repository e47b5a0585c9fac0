"""Smoke run of bench/kafka_protocol.py --quick: three real nodes with Kafka listeners,
confluent-kafka and the gRPC paths; it ends with its JSON line and every message it
produced over the Kafka listener was verified on read. No speed assertions here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "kafka_protocol.py"
POSITIVE = (
    "kafka_produce_mb_s",
    "kafka_consume_mb_s",
    "kafka_consume_raw_mb_s",
    "grpc_produce_raw_mb_s",
    "grpc_producer_mb_s",
    "grpc_consume_raw_mb_s",
)

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
    assert result["benchmark"] == "kafka_protocol"
    for key in POSITIVE:
        assert isinstance(result[key], int | float) and result[key] > 0, (key, result[key])
    assert result["kafka_records_verified"] > 0
    latency = result["kafka_latency"]
    assert 0 < latency["p50_ms"] <= latency["p99_ms"]
    assert set(result["targets"]) >= {
        "produce_cpu_vs_grpc_raw (<= 1)",
        "consume_cpu_vs_grpc_raw (<= 0.5)",
        "produce_mb_s_vs_seglog_producer (>= 2)",
    }
