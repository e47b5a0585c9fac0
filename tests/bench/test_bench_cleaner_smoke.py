"""Smoke run of bench/cleaner.py --quick: it runs and ends with its JSON line.

No speed assertions here; the goals live in bench/ and in the JSON it prints."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "cleaner.py"


def test_quick_run_prints_json_last(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    lines = proc.stdout.strip().splitlines()
    assert len(lines) > 1, "progress lines come before the JSON"
    result = json.loads(lines[-1])
    for key in ("cleaned_mb_s", "dirty_mb", "peak_rss_mb", "throttle_achieved_mb_s"):
        assert isinstance(result[key], int | float) and result[key] > 0, key
    # 10 % distinct keys: about a tenth of the records survive, one per key
    assert result["records_kept"] == result["distinct_keys"] or (
        result["records_kept"] <= result["distinct_keys"]
    )
    assert result["cleaned_log_mb"] < result["dirty_mb"] / 4
    for entry in result["targets"].values():
        assert isinstance(entry["met"], bool)
    assert list(tmp_path.iterdir()) == []  # the bench removed its logs
