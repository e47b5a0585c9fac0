"""The transactional chaos workload (chaos/txn_workload.py) on local node processes,
through the command an operator runs: confluent-kafka consume-transform-produce
transactions and a read_committed observer while a leader is SIGKILLed; the checker
(chaos/txn_checker.py) must find no anomaly, and the run must have done what it claims
(transactions committed and aborted, reads inside transactions, the fault injected, the
final read complete). The table over every scenario is the long test."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from chaos.scenarios import SCENARIOS


def run_txn(argv: list[str], out: Path, timeout_s: float) -> tuple[int, str]:
    command = [sys.executable, "-m", "seglog.chaos", "txn", "--target", "local", *argv]
    command += ["--out", str(out)]
    try:
        r = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"{' '.join(command)} did not finish in {timeout_s} s") from e
    print(r.stdout[-4000:])
    return r.returncode, r.stdout + r.stderr[-3000:]


def assert_clean(report: dict[str, Any], output: str) -> None:
    assert "harness_error" not in report, report["harness_error"]
    assert report["ok"], json.dumps(report["examples"])[:3000]
    counts = report["counts"]
    assert counts["committed"] > 20 and counts["aborted"] > 0, counts
    assert counts["reads_in_transactions"] > 0, counts
    assert report["final_read_complete"], output
    assert report["committed_after_heal"] > 0, "no transaction committed after healing"


@pytest.mark.timeout(600)
def test_transactions_under_a_killed_leader_show_no_anomaly(tmp_path: Path) -> None:
    out = tmp_path / "kl"
    code, output = run_txn(
        ["--scenario", "kill-leader", "--seed", "3", "--duration", "6"], out, 540
    )
    report = json.loads((out / "report.json").read_text())
    assert_clean(report, output)
    assert code == 0, output
    assert [f for f in report["faults"] if f["name"] == "kill-leader"], "no fault injected"
    assert (out / "report.md").read_text().count("| G1c |") == 1


@pytest.mark.long
@pytest.mark.timeout(4 * 3600)
def test_transactions_under_every_local_scenario_show_no_anomaly(tmp_path: Path) -> None:
    """`python -m seglog.chaos txn --target local --table --duration 40` (one to two hours:
    every scenario needs 15 s or more left for its first fault)."""
    out = tmp_path / "table"
    code, output = run_txn(["--table", "--seed", "7", "--duration", "40"], out, 4 * 3600 - 60)
    names = [n for n, s in SCENARIOS.items() if "local" in s.targets and n != "calm"]
    for name in names:
        assert_clean(json.loads((out / name / "report.json").read_text()), output)
    assert code == 0, output
