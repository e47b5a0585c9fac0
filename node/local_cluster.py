"""`seglog local up|down`: a cluster of node processes on this machine, each broker
and controller voter, for development and the README's main job."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import TextIO

import grpc

from seglog.proto import client_pb2 as pb
from seglog.proto import client_pb2_grpc

STATE_FILE = "cluster.json"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0

# Faster failure detection than Kafka's defaults (9 s session, 1 s election, 30 s
# lag): a local cluster is for trying failover, and loopback is fast and reliable,
# so a leader's death is noticed and acted on within about a second.
LOCAL_DEFAULTS = {
    "broker.session.timeout.ms": "600",
    "broker.heartbeat.interval.ms": "100",
    "controller.quorum.election.timeout.ms": "500",
    # A follower that asks a new leader before the leader has applied its election
    # is told to back off: a short backoff keeps that race from adding a second.
    "replica.fetch.backoff.ms": "100",
    "replica.lag.time.max.ms": "5000",
    "min.insync.replicas": "2",
    "num.partitions": "3",
}


# Each listener's ports start this far above --base-port (node 1 at the start, node 2
# one above, ...): the Kafka protocol at the base itself, as clients expect 9092.
PORT_OFFSETS = {"PLAINTEXT": 0, "GRPC": 100, "CONTROLLER": 200, "METRICS": 300, "CONSOLE": 400}
GRPC_LISTENERS = ("GRPC",)


def listener_port(base_port: int, node_id: int, name: str) -> int:
    return base_port + PORT_OFFSETS[name] + node_id - 1


def bootstrap_servers(base_port: int, nodes: int, name: str = "GRPC") -> str:
    return ",".join(
        f"127.0.0.1:{listener_port(base_port, i, name)}" for i in range(1, nodes + 1)
    )


def node_properties(node_id: int, nodes: int, base_port: int, data_dir: Path) -> dict[str, str]:
    voters = ",".join(
        f"{i}@127.0.0.1:{listener_port(base_port, i, 'CONTROLLER')}" for i in range(1, nodes + 1)
    )
    listeners = ",".join(
        f"{name}://127.0.0.1:{listener_port(base_port, node_id, name)}"
        for name in ("PLAINTEXT", "GRPC", "CONTROLLER")
    )
    props = {
        "node.id": str(node_id),
        "process.roles": "broker,controller",
        "listeners": listeners,
        "log.dirs": str(data_dir / f"node-{node_id}" / "logs"),
        "controller.quorum.voters": voters,
        "default.replication.factor": str(min(3, nodes)),
        "metrics.host": "127.0.0.1",
        "metrics.port": str(listener_port(base_port, node_id, "METRICS")),
        **LOCAL_DEFAULTS,
    }
    if nodes < 3:
        props["min.insync.replicas"] = "1"
    return props


def up(
    data_dir: Path,
    nodes: int,
    base_port: int,
    detach: bool,
    out: TextIO,
    overrides: Mapping[int, Mapping[str, str]] | None = None,
    env: Mapping[str, str] | None = None,
    console: bool = False,
) -> int:
    """Start `nodes` nodes (and, with `console`, the web console: `seglog local up`
    asks for it unless --no-console; the chaos harness does not); `overrides[node_id]`
    replaces or adds properties of that
    node (the chaos harness routes links through proxies with it) and `env` is the
    nodes' environment (default: this process's)."""
    if nodes < 1:
        raise ValueError(f"--nodes must be at least 1, got {nodes}")
    state_path = data_dir / STATE_FILE
    if state_path.exists() and _alive(json.loads(state_path.read_text())):
        raise ValueError(f"a cluster is already running from {data_dir}; run 'seglog local down'")
    data_dir.mkdir(parents=True, exist_ok=True)
    procs = []
    for node_id in range(1, nodes + 1):
        node_dir = data_dir / f"node-{node_id}"
        node_dir.mkdir(parents=True, exist_ok=True)
        config = node_dir / "server.properties"
        props = {
            **node_properties(node_id, nodes, base_port, data_dir),
            **((overrides or {}).get(node_id) or {}),
        }
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        log = open(node_dir / "node.log", "ab")  # noqa: SIM115 - owned by the child
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "seglog.cli", "node", "--config", str(config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=None if env is None else dict(env),
            )
        )
        log.close()
    bootstrap = bootstrap_servers(base_port, nodes)
    kafka_bootstrap = bootstrap_servers(base_port, nodes, "PLAINTEXT")
    state = {
        "pids": [p.pid for p in procs],
        "bootstrap": bootstrap,
        "kafka_bootstrap": kafka_bootstrap,
        "nodes": nodes,
    }
    state_path.write_text(json.dumps(state))
    try:
        # Inside the try: a Ctrl-C right after this line (as soon as a user or a
        # test sees it) must stop the nodes too.
        if not detach:
            _interrupt_on_sigterm()
        print(f"starting {nodes} nodes in {data_dir} ...", file=sys.stderr)
        _wait_ready(bootstrap.split(",")[0], nodes, procs, data_dir)
        started = None
        if console:
            port = listener_port(base_port, 1, "CONSOLE")
            started = _start_console(data_dir, bootstrap, port, env)
            if started is not None:
                state["console_pid"] = started[1]
                state_path.write_text(json.dumps(state))
    except BaseException:  # Ctrl-C while starting too: leave no node behind
        _stop([p.pid for p in procs] + _console_pids(state))
        state_path.unlink(missing_ok=True)
        raise
    print(f"bootstrap servers: {bootstrap}", file=out)
    print(f"kafka bootstrap servers: {kafka_bootstrap}", file=out)
    if started is not None:
        print(f"console: {started[0]}", file=out)
    out.flush()
    if detach:
        return 0
    print("Ctrl-C (or 'seglog local down') stops the cluster", file=sys.stderr)
    reported: set[int] = set()
    try:
        while any(p.poll() is None for p in procs):
            for i, p in enumerate(procs, start=1):
                if p.returncode is not None and i not in reported:
                    reported.add(i)  # said once; the others keep serving
                    print(_node_failed(data_dir, i, p.returncode, "while serving"), file=sys.stderr)
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    _stop([p.pid for p in procs] + _console_pids(state))
    state_path.unlink(missing_ok=True)
    print("cluster stopped", file=sys.stderr)
    return 0


CONSOLE_START_S = 20.0


def _start_console(
    data_dir: Path, bootstrap: str, port: int, env: Mapping[str, str] | None
) -> tuple[str, int] | None:
    """`seglog console` beside the nodes: (its URL, its pid) once it listens; None,
    said on stderr with its log, when it does not (the cluster serves without it)."""
    log_path = data_dir / "console.log"
    log = open(log_path, "ab")  # noqa: SIM115 - owned by the child
    proc = subprocess.Popen(
        [sys.executable, "-m", "seglog.cli", "console", "--bootstrap-server", bootstrap]
        + ["--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=None if env is None else dict(env),
    )
    log.close()
    deadline = time.monotonic() + CONSOLE_START_S
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                return f"http://127.0.0.1:{port}/", proc.pid
            time.sleep(0.2)
    except BaseException:  # Ctrl-C while it starts: it goes with the nodes
        _stop([proc.pid])
        raise
    if proc.poll() is None:
        _stop([proc.pid])
    why = last_error(log_path)
    print(
        f"the console did not start (exit code {proc.poll()}); its log is {log_path}"
        + (f" (last line: {why})" if why else ""),
        file=sys.stderr,
    )
    return None


def _console_pids(state: Mapping[str, object]) -> list[int]:
    pid = state.get("console_pid")
    return [int(pid)] if isinstance(pid, int) else []


def _interrupt_on_sigterm() -> None:
    """`kill` of a foreground `local up` stops its nodes as Ctrl-C does (they run in
    their own sessions, so nothing else would)."""

    def interrupt(_signum: int, _frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, interrupt)
        # Also SIGINT: a shell starting us in the background leaves it ignored, and
        # Python keeps an inherited SIG_IGN (no KeyboardInterrupt then).
        signal.signal(signal.SIGINT, interrupt)


class LocalClusterError(Exception):
    """A node of `local up` failed: which one, and where its log is."""


def node_log(data_dir: Path, node_id: int) -> Path:
    return data_dir / f"node-{node_id}" / "node.log"


def last_error(log: Path, max_bytes: int = 65536) -> str:
    """The last error a node logged (its structured `event` and `error` fields, or the
    `seglog node: ...` line it prints when it exits), or its last line: what to show
    beside the path when it failed. (Its controller process shares the log and may
    write after the node's own last words.)"""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - max_bytes))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return ""
    for line in reversed(lines):
        try:
            entry = json.loads(line)
        except ValueError:
            if line.startswith("seglog node: "):
                return line[len("seglog node: ") :].strip()
            continue
        if isinstance(entry, dict) and entry.get("level") in ("error", "critical"):
            error = str(entry.get("error", "")).strip().splitlines()
            return " ".join(
                x for x in (str(entry.get("event", "")), error[-1] if error else "") if x
            )
    return lines[-1].strip() if lines else ""


def _node_failed(data_dir: Path, node_id: int, returncode: int | None, when: str) -> str:
    log = node_log(data_dir, node_id)
    why = last_error(log)
    return (
        f"node {node_id} exited with code {returncode} {when}; its log is {log}"
        + (f" (last error: {why})" if why else "")
    )


def _wait_ready(
    address: str, nodes: int, procs: list[subprocess.Popen[bytes]], data_dir: Path
) -> None:
    """Until every node is registered and unfenced in the metadata; a node that exits
    first, or the deadline, is a LocalClusterError naming the node(s) and their logs."""
    deadline = time.monotonic() + START_TIMEOUT_S
    ready: set[int] = set()
    with grpc.insecure_channel(address) as channel:
        stub = client_pb2_grpc.SegLogStub(channel)
        while time.monotonic() < deadline:
            for i, p in enumerate(procs, start=1):
                if p.poll() is not None:
                    raise LocalClusterError(
                        _node_failed(data_dir, i, p.returncode, "while starting")
                    )
            try:
                r = stub.Metadata(pb.MetadataRequest(all_topics=True), timeout=2)
                ready = {b.node_id for b in r.brokers if not b.fenced}
                if len(ready) == nodes:
                    return
            except grpc.RpcError:
                pass
            time.sleep(0.2)
    missing = [i for i in range(1, nodes + 1) if i not in ready]
    raise LocalClusterError(
        f"the cluster did not become ready within {START_TIMEOUT_S:.0f}s: "
        + "; ".join(
            f"node {i} is not registered (its log is {node_log(data_dir, i)})" for i in missing
        )
    )


def down(data_dir: Path, out: TextIO) -> int:
    state_path = data_dir / STATE_FILE
    if not state_path.exists():
        raise ValueError(f"no cluster was started from {data_dir}")
    state = json.loads(state_path.read_text())
    _stop(_console_pids(state))
    stopped = _stop(state["pids"])
    state_path.unlink(missing_ok=True)
    print(f"stopped {stopped} nodes", file=out)
    return 0


def _alive(state: dict[str, object]) -> bool:
    pids = state.get("pids", [])
    assert isinstance(pids, list)
    return any(_pid_alive(int(pid)) for pid in pids)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except OSError:
        return False


def _stop(pids: list[int]) -> int:
    """SIGTERM (a clean shutdown of each node), then SIGKILL what is left."""
    alive = [pid for pid in pids if _pid_alive(pid)]
    for pid in alive:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline and any(_pid_alive(pid) for pid in alive):
        for pid in alive:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        time.sleep(0.1)
    for pid in alive:
        if _pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
    return len(alive)
