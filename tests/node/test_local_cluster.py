"""`seglog local up|down`, the README's main job: a foreground cluster stops cleanly on
Ctrl-C or SIGTERM, a detached one on `local down`, and no node outlives either."""

from __future__ import annotations

import json
import os
import queue
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from seglog.chaos.targets import consecutive_free_ports
from seglog.chaos.targets import proc_alive as alive
from seglog.client.admin import Admin, NewTopic
from seglog.client.consumer import Consumer
from seglog.client.producer import Producer
from seglog.storage.clean_shutdown import CLEAN_SHUTDOWN_FILE

# Bounds, never expectations.
START_S = 90
STOP_S = 60


def free_base_port() -> int:
    return consecutive_free_ports(3, random.Random())


def seglog_local(*args: str) -> list[str]:
    return [sys.executable, "-m", "seglog.cli", "local", *args]


class Foreground:
    """`seglog local up` in the foreground, its output lines read as they come."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.proc = subprocess.Popen(
            seglog_local("up", "--data-dir", str(data_dir), "--base-port", str(free_base_port())),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def wait_for_line(self, prefix: str, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        seen = []
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                if self.proc.poll() is not None and self.lines.empty():
                    break
                continue
            seen.append(line)
            if line.startswith(prefix):
                return line
        pytest.fail(f"no line starting {prefix!r}; output so far: {seen}")

    def node_pids(self) -> list[int]:
        state = json.loads((self.data_dir / "cluster.json").read_text())
        return [int(p) for p in state["pids"]]

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def wait_all_gone(pids: list[int]) -> list[int]:
    deadline = time.monotonic() + STOP_S
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


def kill_leftovers(pids: list[int]) -> None:
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def clean_markers(data_dir: Path) -> list[bool]:
    return [(data_dir / f"node-{i}" / "logs" / CLEAN_SHUTDOWN_FILE).exists() for i in (1, 2, 3)]


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_foreground_cluster_serves_then_stops_cleanly(tmp_path: Path, stop_signal: int) -> None:
    cluster = Foreground(tmp_path / "local")
    pids: list[int] = []
    try:
        line = cluster.wait_for_line("bootstrap servers: ", START_S)
        bootstrap = line.split(": ", 1)[1]
        pids = cluster.node_pids()
        assert len(pids) == 3 and all(alive(p) for p in pids)

        with Admin(bootstrap) as admin:
            admin.create_topics([NewTopic("main-job", 3, 3)])
        with Producer(bootstrap, acks="all") as producer:
            futures = [producer.send("main-job", value=b"%d" % i) for i in range(300)]
            producer.flush(timeout=60)
            assert all(f.succeeded() for f in futures)
        consumer = Consumer("main-job", bootstrap_servers=bootstrap, auto_offset_reset="earliest")
        try:
            values: set[bytes] = set()
            deadline = time.monotonic() + 60
            while len(values) < 300 and time.monotonic() < deadline:
                for records in consumer.poll(timeout_ms=500).values():
                    values.update(r.value for r in records)
        finally:
            consumer.close()
        assert values == {b"%d" % i for i in range(300)}

        cluster.proc.send_signal(stop_signal)
        assert cluster.proc.wait(timeout=STOP_S) == 0
        assert wait_all_gone(pids) == []
        assert not (cluster.data_dir / "cluster.json").exists()
        assert clean_markers(cluster.data_dir) == [True, True, True]  # SIGTERM, not SIGKILL
    finally:
        cluster.kill()
        kill_leftovers(pids)


def test_ctrl_c_while_starting_leaves_no_node_behind(tmp_path: Path) -> None:
    cluster = Foreground(tmp_path / "local")
    pids: list[int] = []
    try:
        cluster.wait_for_line("starting 3 nodes", START_S)
        pids = cluster.node_pids()
        cluster.proc.send_signal(signal.SIGINT)
        assert cluster.proc.wait(timeout=STOP_S) == 130
        assert wait_all_gone(pids) == []
        assert not (cluster.data_dir / "cluster.json").exists()
    finally:
        cluster.kill()
        kill_leftovers(pids)


def test_detached_cluster_and_local_down(tmp_path: Path) -> None:
    data_dir = tmp_path / "local"
    up = seglog_local("up", "--data-dir", str(data_dir), "--base-port", str(free_base_port()))
    pids: list[int] = []
    try:
        done = subprocess.run([*up, "--detach"], capture_output=True, text=True, timeout=START_S)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("bootstrap servers: 127.0.0.1:")
        pids = [int(p) for p in json.loads((data_dir / "cluster.json").read_text())["pids"]]
        assert len(pids) == 3 and all(alive(p) for p in pids)

        again = subprocess.run([*up, "--detach"], capture_output=True, text=True, timeout=START_S)
        assert again.returncode == 1
        assert "already running" in again.stderr and str(data_dir) in again.stderr

        down = subprocess.run(
            seglog_local("down", "--data-dir", str(data_dir)),
            capture_output=True,
            text=True,
            timeout=STOP_S + 10,
        )
        assert down.returncode == 0, down.stderr
        assert down.stdout.strip() == "stopped 3 nodes"
        assert wait_all_gone(pids) == []
        assert clean_markers(data_dir) == [True, True, True]

        twice = subprocess.run(
            seglog_local("down", "--data-dir", str(data_dir)), capture_output=True, text=True
        )
        assert twice.returncode == 1
        assert f"no cluster was started from {data_dir}" in twice.stderr
    finally:
        kill_leftovers(pids)


def test_a_node_that_cannot_start_is_named_with_its_log(tmp_path: Path) -> None:
    """Node 2's Kafka port is taken: `local up` ended in a traceback; it now names the
    node, its log and the error, exits 1, and leaves no node behind."""
    base = free_base_port()
    data_dir = tmp_path / "local"
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", base + 1))  # node 2's PLAINTEXT port
        squatter.listen()
        up = subprocess.run(
            seglog_local("up", "--data-dir", str(data_dir), "--base-port", str(base)),
            capture_output=True,
            text=True,
            timeout=START_S,
        )
    assert up.returncode == 1, up.stderr
    assert "Traceback" not in up.stderr
    log = data_dir / "node-2" / "node.log"
    assert f"node 2 exited with code 1 while starting; its log is {log}" in up.stderr
    assert "last error:" in up.stderr and str(base + 1) in up.stderr
    assert not (data_dir / "cluster.json").exists()
