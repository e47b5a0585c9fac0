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

from seglog.client.admin import Admin, NewTopic
from seglog.client.consumer import Consumer
from seglog.client.producer import Producer
from seglog.harness.ports import consecutive_free_ports
from seglog.harness.processes import pid_alive as alive
from seglog.storage.clean_shutdown import CLEAN_SHUTDOWN_FILE

# Bounds, never expectations.
START_S = 90
STOP_S = 60
# What used to take 30 s (retries) or 60 s (waiting for dead nodes): bounds far below,
# loose enough for a loaded machine; bench/cli_startup.py measures the real times.
FAST_S = 10


def free_base_port() -> int:
    return consecutive_free_ports(3, random.Random())


def seglog_local(*args: str) -> list[str]:
    # The web console is tested by tests/console; here it would only be one more process
    # to leave behind when a test fails before `local down`.
    if args and args[0] == "up":
        args = (*args, "--no-console")
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


def run_seglog(
    *args: str, timeout: float = START_S
) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "seglog.cli", *args], capture_output=True, text=True, timeout=timeout
    )
    return done, time.monotonic() - started


def test_detached_cluster_status_conflicts_and_local_down(tmp_path: Path) -> None:
    """One detached cluster, and around it what a newcomer runs into: a second `up` on
    the same ports (it used to print the bootstrap servers of the first cluster and exit
    0 while its own nodes died), `status`, the gRPC tools pointed at a Kafka port, a
    refused port, a bootstrap list whose first node is down, and `down` twice."""
    data_dir = tmp_path / "local"
    base = free_base_port()
    up = seglog_local("up", "--data-dir", str(data_dir), "--base-port", str(base))
    pids: list[int] = []
    try:
        done = subprocess.run([*up, "--detach"], capture_output=True, text=True, timeout=START_S)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("bootstrap servers: 127.0.0.1:")
        assert f"GRPC       127.0.0.1:{base + 100}-{base + 102}" in done.stdout  # the layout
        pids = [int(p) for p in json.loads((data_dir / "cluster.json").read_text())["pids"]]
        assert len(pids) == 3 and all(alive(p) for p in pids)

        again = subprocess.run([*up, "--detach"], capture_output=True, text=True, timeout=START_S)
        assert again.returncode == 1
        assert "already running" in again.stderr and str(data_dir) in again.stderr

        # The same ports from another data directory: refused before any node starts.
        for detach in (["--detach"], []):
            other, took = run_seglog(
                "local",
                "up",
                "--data-dir",
                str(tmp_path / "other"),
                "--base-port",
                str(base),
                *detach,
            )
            assert other.returncode == 1, (detach, other.stdout, other.stderr)
            assert "bootstrap servers" not in other.stdout
            assert f"node 1: Failed to bind to address 127.0.0.1:{base + 200}" in other.stderr
            assert took < FAST_S, took  # the ports are checked before anything starts
        assert all(alive(p) for p in pids)  # the running cluster is untouched

        status, _ = run_seglog("local", "status", "--data-dir", str(data_dir))
        assert status.returncode == 0, status.stdout
        for i, pid in enumerate(pids, start=1):
            assert f"node {i}  pid {pid}  serving" in status.stdout
            assert f"GRPC={base + 99 + i}" in status.stdout
        assert "3 of 3 nodes serving" in status.stdout

        grpc_port = base + 100
        kafka, took = run_seglog("topics", "--bootstrap-server", f"127.0.0.1:{base}", "--list")
        assert kafka.returncode == 1 and took < FAST_S, (took, kafka.stderr)
        assert f"127.0.0.1:{base}: this is a Kafka-protocol port" in kafka.stderr
        assert f"127.0.0.1:{grpc_port}" in kafka.stderr  # where to go instead

        # Above every port of the layout (the console has base + 400): nothing listens.
        refused, took = run_seglog(
            "topics", "--bootstrap-server", f"127.0.0.1:{base + 500}", "--list"
        )
        assert refused.returncode == 1 and took < FAST_S, (took, refused.stderr)
        assert f"127.0.0.1:{base + 500}: connection refused" in refused.stderr

        # Node 1 down: the list's other addresses answer, and --verbose says what failed.
        os.kill(pids[0], signal.SIGKILL)
        assert wait_all_gone(pids[:1]) == []
        listed, took = run_seglog(
            "topics",
            "--bootstrap-server",
            ",".join(f"127.0.0.1:{grpc_port + i}" for i in range(3)),
            "--list",
            "--verbose",
        )
        assert listed.returncode == 0 and took < FAST_S, (took, listed.stderr)
        assert f"127.0.0.1:{grpc_port} failed" in listed.stderr
        status, _ = run_seglog("local", "status", "--data-dir", str(data_dir))
        assert status.returncode == 1 and f"node 1  pid {pids[0]}  not running" in status.stdout

        down = subprocess.run(
            seglog_local("down", "--data-dir", str(data_dir)),
            capture_output=True,
            text=True,
            timeout=STOP_S + 10,
        )
        assert down.returncode == 0, down.stderr
        assert down.stdout.startswith(f"stopping 2 nodes (pids {pids[1]}, {pids[2]})")
        assert "stopped 2 nodes in " in down.stdout and f"rm -r {data_dir}" in down.stdout
        assert wait_all_gone(pids) == []
        assert clean_markers(data_dir)[1:] == [True, True]

        twice, took = run_seglog("local", "down", "--data-dir", str(data_dir))
        assert twice.returncode == 0 and took < FAST_S, took
        assert twice.stdout.strip() == f"no cluster is running from {data_dir}; nothing to stop"
        status, _ = run_seglog("local", "status", "--data-dir", str(data_dir))
        assert status.returncode == 1 and "no cluster is running" in status.stdout
    finally:
        kill_leftovers(pids)


def test_a_node_that_cannot_start_is_named_with_its_error(tmp_path: Path) -> None:
    """Node 2's Kafka port is taken: named as Kafka's broker says it, before any node
    starts; node 2's log directory is a file: its own error, from its log, and no node
    is left behind either way."""
    base = free_base_port()
    data_dir = tmp_path / "local"
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", base + 1))  # node 2's PLAINTEXT port
        squatter.listen()
        up, took = run_seglog(
            "local", "up", "--no-console", "--data-dir", str(data_dir), "--base-port", str(base)
        )
    assert up.returncode == 1, up.stderr
    assert "Traceback" not in up.stderr and took < FAST_S, took
    assert f"node 2: Failed to bind to address 127.0.0.1:{base + 1} (its PLAINTEXT listener)" in (
        up.stderr
    )
    assert not (data_dir / "cluster.json").exists()

    (data_dir / "node-2").mkdir(parents=True)
    (data_dir / "node-2" / "logs").write_text("not a directory")
    up, took = run_seglog(
        "local", "up", "--no-console", "--data-dir", str(data_dir), "--base-port", str(base)
    )
    assert up.returncode == 1, up.stderr
    log = data_dir / "node-2" / "node.log"
    assert f"node 2 exited with code 1 while starting; its log is {log}" in up.stderr
    assert "last error: KAFKA_STORAGE_ERROR: cannot create log directory" in up.stderr
    assert "bootstrap servers" not in up.stdout
    assert not (data_dir / "cluster.json").exists()


def test_a_foreground_cluster_whose_nodes_all_die_exits_1(tmp_path: Path) -> None:
    """It used to print `cluster stopped` and exit 0, as after a Ctrl-C."""
    cluster = Foreground(tmp_path / "local")
    pids: list[int] = []
    try:
        cluster.wait_for_line("bootstrap servers: ", START_S)
        pids = cluster.node_pids()
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        line = cluster.wait_for_line("every node exited", STOP_S)
        assert line == "every node exited; cluster stopped"
        assert cluster.proc.wait(timeout=STOP_S) == 1
    finally:
        cluster.kill()
        kill_leftovers(pids)


def test_a_port_handed_out_stays_claimed_while_its_process_lives(tmp_path) -> None:
    """Another process's free_ports never returns a port this one was handed, even
    once nothing is bound to it (a stopped node's), and takes over a dead one's."""
    from seglog.harness import ports

    mine = set(ports.free_ports(40))
    script = (
        "from seglog.harness import ports; import json; "
        "print(json.dumps(ports.free_ports(2000)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    theirs = set(json.loads(out.stdout))
    assert len(theirs) == 2000 and not mine & theirs
    # The child is gone: its claims are taken over by the next one who asks.
    dead = sorted(theirs)[0]
    assert ports._claim(dead)
    assert (ports.CLAIMS_DIR / str(dead)).read_text().strip() == str(os.getpid())
