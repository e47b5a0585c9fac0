"""Smoke run of bench/transactions.py: one tiny `seglog local up` cluster, the
non-transactional baseline, 10-record transactions from one producer and from two at
once; it ends with its JSON line and writes the plot. No speed assertions: the target
is reported, not asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.long  # 30-60 s: with the other benchmark smoke runs (SEGLOG_LONG_TESTS=1)
@pytest.mark.timeout(300)
def test_tiny_run_prints_one_and_several_producers_and_json_last(tmp_path: Path) -> None:
    plot = tmp_path / "txn.png"
    proc = subprocess.run(
        [
            sys.executable, "-m", "seglog.bench.transactions", "--seconds", "1",
            "--sizes", "10", "--producers", "2", "--plot", str(plot), "--dir", str(tmp_path),
        ],
        capture_output=True, text=True, timeout=280, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["plain"]["records"] > 0
    one = result["transactional"]["10"]
    assert one["transactions"] > 0 and one["records"] == 10 * one["transactions"]
    several = result["parallel"]
    assert several["producers"] == 2 and several["records"] == 10 * several["transactions"]
    assert "2 transactional producers at once" in proc.stdout
    assert plot.stat().st_size > 1000
