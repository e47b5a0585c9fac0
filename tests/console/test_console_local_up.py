"""`seglog local up` in the foreground starts the console on --base-port + 400, prints
its URL once it answers, and Ctrl-C stops it with the nodes."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from seglog.harness.ports import consecutive_free_ports
from seglog.harness.processes import pid_alive as alive


def test_ctrl_c_stops_the_console_with_the_nodes(tmp_path: Path) -> None:
    data_dir = tmp_path / "local"
    base = consecutive_free_ports(3, random.Random())
    proc = subprocess.Popen(
        [sys.executable, "-m", "seglog.cli", "local", "up", "--data-dir", str(data_dir),
         "--base-port", str(base)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    pids: list[int] = []
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline().strip() for _ in range(3)]
        assert lines[2] == f"console: http://127.0.0.1:{base + 400}/", lines
        state = json.loads((data_dir / "cluster.json").read_text())
        pids = [*state["pids"], state["console_pid"]]
        with urllib.request.urlopen(f"http://127.0.0.1:{base + 400}/", timeout=30) as r:
            assert r.status == 200 and b"Overview" in r.read()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=90) == 0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(alive(p) for p in pids):
            time.sleep(0.2)
        assert [p for p in pids if alive(p)] == []
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
