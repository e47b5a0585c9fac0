"""Smoke run of bench/storage.py --quick: it runs and ends with its JSON line.

No speed assertions here; the goals live in bench/ and in the JSON it prints.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "storage.py"

POSITIVE = (
    "append_mb_s",
    "raw_write_mb_s",
    "append_ratio",
    "lookups_per_s",
    "translate_per_s",
    "read_per_s",
    "recovery_mb_s",
    "log_bytes",
    "cpu_count",
)


def test_quick_run_prints_json_last(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=240,
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
    assert isinstance(result["python"], str) and result["python"]
    assert isinstance(result["idempotent"], bool)
    assert result["producer"] in ("idempotent", "plain")
    assert result["log_bytes"] >= result["params"]["size_mb"] * 1024 * 1024
    for name in ("append_ratio", "lookups_per_s", "recovery_mb_s"):
        entry = result["targets"][name]
        assert entry["target"] > 0 and isinstance(entry["met"], bool), (name, entry)
    assert "page cache" in " ".join(result["notes"])
    # The temp directory is removed at the end.
    assert list(tmp_path.iterdir()) == []
