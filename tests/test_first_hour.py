"""A newcomer's first hour, scripted: a fresh venv in a copy of the checkout, the
README's quick start verbatim (the venv with --system-site-packages so that nothing
is downloaded again, and the local ports moved to a base of the test's own), then
what goes wrong most often: the ports taken, a node down, seglog's tools given a
Kafka port, every node down. Each bad case must end in a non-zero exit and a
sentence naming the cause within 3 s (FAST_S) of what a working command takes on
this machine at that moment, where it used to look like success or stay silent
for 30 s."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from readme_blocks import ROOT, section_blocks, with_ports

from seglog.harness.ports import consecutive_free_ports
from seglog.harness.processes import pid_alive as proc_alive

pytestmark = pytest.mark.long  # a pip install and two clusters: minutes on 2 cores

FAST_S = 3.0
VENV_LINE = "python3 -m venv .venv"


def _checkout(dest: Path) -> Path:
    """The repository's files as a clone would have them (no venvs, no data)."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file() and not name.startswith(".venv/"):
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest / name)
    return dest


def _timed(argv: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=120)
    return done, time.monotonic() - started


def _fails_fast(argv: list[str], cwd: Path, cause: str, baseline_s: float) -> str:
    """A non-zero exit naming `cause`, within FAST_S of what a working command of the
    same tool takes here now (`baseline_s`: a loaded machine slows both alike)."""
    done, took = _timed(argv, cwd)
    print(f"{took:.1f}s (a working command: {baseline_s:.1f}s): {done.stderr.strip()[:120]}")
    assert done.returncode != 0, (argv, done.stdout, done.stderr)
    assert cause in done.stderr, (argv, done.stderr)
    assert took < baseline_s + FAST_S, (argv, f"{took:.1f}s vs {baseline_s:.1f}s", done.stderr)
    return done.stderr


def test_first_hour(tmp_path: Path) -> None:
    checkout = _checkout(tmp_path / "seglog")
    base = consecutive_free_ports(3, random.Random())
    (quick,) = section_blocks("Quick start (Python 3.11)", "sh")
    assert VENV_LINE in quick.text
    script = with_ports(quick.text, base).replace(
        VENV_LINE, "python3 -m venv --system-site-packages .venv"
    )
    seglog = str(checkout / ".venv" / "bin" / "seglog")
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    try:
        started = time.monotonic()
        done = subprocess.run(
            ["bash", "-e", "-c", script],
            cwd=checkout,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        assert done.returncode == 0, (
            f"the quick start failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
        print(f"quick start: {time.monotonic() - started:.1f}s")
        printed = {int(word) for word in done.stdout.split() if word.isdigit()}
        assert printed >= set(range(1, 1001))  # the records consumed
        assert not (checkout / "data" / "local").exists()

        up, _ = _timed([seglog, "local", "up", "--detach", "--base-port", str(base)], checkout)
        assert up.returncode == 0, up.stderr
        state = json.loads((checkout / "data" / "local" / "cluster.json").read_text())
        pids = [int(p) for p in state["pids"]]
        all_three = ",".join(f"127.0.0.1:{base + 100 + i}" for i in range(3))
        working, baseline = _timed(
            [seglog, "topics", "--bootstrap-server", all_three, "--list"], checkout
        )
        assert working.returncode == 0, working.stderr
        print(f"a working 'seglog topics --list': {baseline:.1f}s")

        # A second cluster on the same ports: no node starts, each taken port is named.
        _fails_fast(
            [seglog, "local", "up", "--detach", "--base-port", str(base), "--data-dir", "other"],
            checkout,
            f"node 1: Failed to bind to address 127.0.0.1:{base + 200}",
            baseline,
        )

        # seglog's tools on a Kafka port.
        _fails_fast(
            [seglog, "topics", "--bootstrap-server", f"127.0.0.1:{base + 1}", "--list"],
            checkout,
            f"cannot reach 127.0.0.1:{base + 1}: this is a Kafka-protocol port",
            baseline,
        )

        # Node 1 down: named when it is the only address; the README's list still works.
        os.kill(pids[0], signal.SIGKILL)
        deadline = time.monotonic() + 30
        while proc_alive(pids[0]) and time.monotonic() < deadline:
            time.sleep(0.1)
        _fails_fast(
            [seglog, "topics", "--bootstrap-server", f"127.0.0.1:{base + 100}", "--list"],
            checkout,
            f"cannot reach 127.0.0.1:{base + 100}: connection refused",
            baseline,
        )
        listed, _ = _timed([seglog, "topics", "--bootstrap-server", all_three, "--list"], checkout)
        assert listed.returncode == 0, listed.stderr
        status, _ = _timed([seglog, "local", "status"], checkout)
        assert (
            status.returncode == 1
            and "node 1" in status.stdout
            and "not running" in (status.stdout)
        )

        # Every node down.
        down, _ = _timed([seglog, "local", "down"], checkout)
        assert down.returncode == 0 and "stopping 2 nodes" in down.stdout, down.stdout
        _fails_fast(
            [
                seglog,
                "consume",
                "--bootstrap-server",
                all_three,
                "--topic",
                "demo",
                "--from-beginning",
                "--max-messages",
                "1",
            ],
            checkout,
            "cannot reach any bootstrap server: ",
            baseline,
        )
        again, took = _timed([seglog, "local", "down"], checkout)
        assert again.returncode == 0 and "nothing to stop" in again.stdout
        assert took < baseline + FAST_S
    finally:
        if (checkout / "data" / "local" / "cluster.json").exists():
            subprocess.run([seglog, "local", "down"], cwd=checkout, capture_output=True, timeout=90)
