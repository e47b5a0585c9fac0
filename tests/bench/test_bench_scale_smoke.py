"""Smoke run of bench/scale.py: two tiny `seglog local up` clusters (10 and 1,000
partitions are the issue's counts; 3 and 10 here), both client kinds (seglog's Producer
and confluent-kafka on the Kafka listener), a few hundred records; it ends with its JSON
line and writes the plot. No speed assertions: the targets are reported, not asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "scale.py"


@pytest.mark.long  # 20-40 s: with the other benchmark smoke runs (SEGLOG_LONG_TESTS=1)
@pytest.mark.timeout(240)
def test_tiny_run_prints_both_client_kinds_and_json_last(tmp_path: Path) -> None:
    plot = tmp_path / "scale.png"
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--partitions",
            "3,10",
            "--records",
            "300",
            "--idle-seconds",
            "0.5",
            "--settle-seconds",
            "0",
            "--plot",
            str(plot),
        ],
        capture_output=True,
        text=True,
        timeout=220,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["bench"] == "scale"
    assert [r["partitions"] for r in result["results"]] == [3, 10]
    for r in result["results"]:
        # What `seglog local up` runs: the event loop, followers over Kafka's protocol.
        assert r["settings"] == {
            "kafka.listener.model": "event-loop",
            "replica.fetch.protocol": "kafka",
            "inter.broker.listener.name": "PLAINTEXT",
        }, r["settings"]
        assert set(r["clients"]) == {"producer", "confluent-kafka"}
        for kind, c in r["clients"].items():
            assert c["records_per_s"] > 0 and 0 < c["p50_ms"] <= c["p99_ms"], (kind, c)
        split = r["clients"]["producer"]  # the Producer's own split of a record's time
        assert split["request_latency_avg_ms"] > 0 and split["record_queue_time_avg_ms"] >= 0
        assert split["records_per_request_avg"] >= 1, split
        assert r["idle_cores"] >= 0 and r["create_s"] > 0
        assert len(r["rss_mib"]) == 3 and len(r["threads"]) == 3
    assert result["targets"] == {}  # neither 10 nor 1,000 partitions measured together
    assert plot.stat().st_size > 10_000


def test_bad_arguments_are_named() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--clients", "producer,kcat"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2 and "--clients" in proc.stderr and "kcat" in proc.stderr


def test_targets_compare_1000_partitions_with_10() -> None:
    from seglog.bench.scale import targets

    def row(partitions: int, idle: float, producer: int, confluent: int) -> dict[str, object]:
        clients = {
            "producer": {"records_per_s": producer},
            "confluent-kafka": {"records_per_s": confluent},
        }
        return {"partitions": partitions, "idle_cores": idle, "clients": clients}

    got = targets([row(10, 0.2, 1000, 4000), row(100, 0.2, 900, 3000), row(1000, 0.08, 400, 3000)])
    assert got == {
        "producer_throughput_1000_over_10": {"value": 0.4, "target": ">= 0.5", "met": False},
        "confluent-kafka_throughput_1000_over_10": {"value": 0.75, "target": ">= 0.5", "met": True},
        "idle_cores_at_1000": {"value": 0.08, "target": "<= 0.1", "met": True},
    }
    assert targets([row(10, 0.2, 1000, 4000)]) == {}
