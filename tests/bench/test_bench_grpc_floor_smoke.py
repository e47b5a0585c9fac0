"""Smoke run of bench/grpc_floor.py --quick: the echo server in a child process, every
shape measured once, a picture, and the JSON line last. No speed assertions here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "grpc_floor.py"
SHAPES = {"unary-sync", "unary-aio", "stream-sync", "stream-aio"}
FIGURES = {"exchanges_s", "server_cpu_us", "client_cpu_us", "server_switches"}


@pytest.mark.timeout(120)
def test_quick_run_measures_every_shape(tmp_path: Path) -> None:
    picture = tmp_path / "floor.png"
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--quick", "--exchanges", "200", "--plot", str(picture)],
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["benchmark"] == "grpc_floor"
    assert set(result["shapes"]) == SHAPES
    for shape, figures in result["shapes"].items():
        assert set(figures) == FIGURES, shape
        assert figures["exchanges_s"] > 0, (shape, figures)
        # Every exchange crosses to the server process: it cannot cost it nothing.
        assert figures["server_switches"] > 0, (shape, figures)
        assert figures["server_cpu_us"] >= 0 and figures["client_cpu_us"] >= 0, (shape, figures)
    assert result["params"] == {"exchanges": 200, "rounds": 1, "payload_bytes": 1024}
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and picture.stat().st_size > 10_000


def test_an_unknown_shape_is_refused() -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--shapes", "unary-sync,carrier-pigeon"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "carrier-pigeon" in proc.stderr
