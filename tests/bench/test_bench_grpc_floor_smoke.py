"""Smoke run of bench/grpc_floor.py --quick: the echo server in a child process, every
shape measured once, a picture, and the JSON line last. No speed assertions here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "grpc_floor.py"
SHAPES = {"unary-sync", "unary-aio", "stream-sync", "stream-aio", "oneway-sync"}
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
    assert result["params"] == {
        "exchanges": 200,
        "rounds": 1,
        "rate_per_s": "back to back",
        "payload_bytes": 1024,
    }
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and picture.stat().st_size > 10_000


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--shapes", "unary-sync,carrier-pigeon"], "carrier-pigeon"),
        (["--rate", "-1"], "--rate must not be negative"),
    ],
    ids=["unknown-shape", "negative-rate"],
)
def test_bad_arguments_are_refused_by_name(args: list[str], named: str) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCH), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert named in proc.stderr


@pytest.mark.timeout(120)
def test_a_paced_run_keeps_its_rate(tmp_path: Path) -> None:
    """--rate 50 spaces 40 exchanges over ~0.8 s: not faster than the rate asked."""
    proc = subprocess.run(
        [sys.executable, str(BENCH), "--shapes", "oneway-sync,unary-sync", "--exchanges", "40",
         "--rounds", "1", "--rate", "50", "--plot", str(tmp_path / "paced.png")],
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["params"]["rate_per_s"] == 50
    for shape, figures in result["shapes"].items():
        assert 0 < figures["exchanges_s"] <= 52, (shape, figures)
        assert figures["server_switches"] > 0, (shape, figures)
