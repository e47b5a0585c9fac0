"""`seglog local up|status|down`: a cluster of node processes on this machine, each
broker and controller voter, for development and the README's main job.

`up` reports success only when every node it started serves on its own listeners;
otherwise it stops what it started and prints each failed node's own error."""

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

from seglog.harness.health import serving
from seglog.harness.node_process import spawn_node
from seglog.harness.ports import (
    PORT_OFFSETS,
    bootstrap_servers,
    console_port,
    listener_port,
    port_layout,
)
from seglog.harness.processes import pid_alive
from seglog.node.config import parse_listeners
from seglog.proto import client_pb2 as pb
from seglog.proto import client_pb2_grpc

STATE_FILE = "cluster.json"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
# A node that exits while starting is often followed by others (the same cause): wait
# this long for them so that one report names every failed node.
FAILED_TOGETHER_S = 0.5

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
    # Followers fetch over Kafka's inter-broker protocol on the PLAINTEXT listener,
    # from the node's event loop (node/kafka/replica_client.py).
    "replica.fetch.protocol": "kafka",
    "min.insync.replicas": "2",
    "num.partitions": "3",
}


def replication_listener(fetch_protocol: str | None = None) -> str:
    """The listener a local cluster's followers dial their leaders on: PLAINTEXT when
    they fetch over Kafka's protocol (LOCAL_DEFAULTS, or `fetch_protocol`), else GRPC."""
    protocol = fetch_protocol or LOCAL_DEFAULTS["replica.fetch.protocol"]
    return "PLAINTEXT" if protocol == "kafka" else "GRPC"


def fetch_protocol_overrides(fetch_protocol: str) -> dict[str, str]:
    """The settings that make a local cluster's followers fetch over `fetch_protocol`
    ("kafka" or "grpc") from the listener replication_listener names."""
    return {
        "replica.fetch.protocol": fetch_protocol,
        "inter.broker.listener.name": replication_listener(fetch_protocol),
    }


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


def bound_addresses(props: Mapping[str, str]) -> list[tuple[str, str, int]]:
    """(listener name, host, port) of every port a node with these properties binds."""
    out = [
        (lst.name, lst.host or "0.0.0.0", lst.port)
        for lst in parse_listeners("listeners", props.get("listeners", "")).values()
        if lst.port
    ]
    if int(props.get("metrics.port", "-1")) > 0:
        out.append(("METRICS", props.get("metrics.host", "0.0.0.0"), int(props["metrics.port"])))
    return out


def bind_error(host: str, port: int) -> str | None:
    """Why a listener could not bind host:port now, or None when it could (SO_REUSEADDR
    as the node's own servers: a port in TIME_WAIT from a stopped cluster is free)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            return e.strerror or str(e)
    return None


def ports_in_use(node_props: Mapping[int, Mapping[str, str]]) -> list[str]:
    """A line per port some other process holds, named as Kafka's broker says it."""
    lines = []
    for node_id, props in node_props.items():
        for name, host, port in bound_addresses(props):
            why = bind_error(host, port)
            if why is not None:
                lines.append(
                    f"node {node_id}: Failed to bind to address {host}:{port} "
                    f"(its {name} listener): {why}"
                )
    return lines


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
    if base_port < 1 or base_port + max(PORT_OFFSETS.values()) + nodes - 1 > 65535:
        raise ValueError(
            f"--base-port {base_port} puts the ports of {nodes} nodes outside 1-65535 "
            f"(they span base+0 to base+{max(PORT_OFFSETS.values()) + nodes - 1})"
        )
    state_path = data_dir / STATE_FILE
    if state_path.exists() and _alive(json.loads(state_path.read_text())):
        raise ValueError(
            f"a cluster is already running from {data_dir}; "
            f"'seglog local status --data-dir {data_dir}' shows it, "
            f"'seglog local down --data-dir {data_dir}' stops it"
        )
    all_props = {
        node_id: {
            **node_properties(node_id, nodes, base_port, data_dir),
            **((overrides or {}).get(node_id) or {}),
        }
        for node_id in range(1, nodes + 1)
    }
    taken = ports_in_use(all_props)
    if taken:
        raise LocalClusterError(
            f"no node was started: {len(taken)} of its ports are taken by another process "
            "(another 'seglog local up'? 'seglog local status --data-dir DIR' shows a "
            "cluster's ports); stop it, or choose other ports with --base-port\n"
            + "\n".join(f"  {line}" for line in taken)
        )
    data_dir.mkdir(parents=True, exist_ok=True)
    procs = []
    for node_id, props in all_props.items():
        node_dir = data_dir / f"node-{node_id}"
        node_dir.mkdir(parents=True, exist_ok=True)
        config = node_dir / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        procs.append(spawn_node(config, node_dir / "node.log", env))
    bootstrap = bootstrap_servers(base_port, nodes)
    kafka_bootstrap = bootstrap_servers(base_port, nodes, "PLAINTEXT")
    state = {
        "pids": [p.pid for p, _ in procs],
        "bootstrap": bootstrap,
        "kafka_bootstrap": kafka_bootstrap,
        "nodes": nodes,
        "base_port": base_port,
        "data_dir": str(data_dir.resolve()),
    }
    state_path.write_text(json.dumps(state))
    try:
        # Inside the try: a Ctrl-C right after this line (as soon as a user or a
        # test sees it) must stop the nodes too.
        if not detach:
            _interrupt_on_sigterm()
        print(f"starting {nodes} nodes in {data_dir} ...", file=sys.stderr)
        _wait_ready(bootstrap.split(","), procs, data_dir)
        started = None
        if console:
            started = _start_console(data_dir, bootstrap, console_port(base_port), env)
            if started is not None:
                state["console_pid"] = started[1]
                state_path.write_text(json.dumps(state))
    except BaseException:  # Ctrl-C while starting too: leave no node behind
        _stop([p.pid for p, _ in procs] + _console_pids(state))
        state_path.unlink(missing_ok=True)
        raise
    print(f"bootstrap servers: {bootstrap}", file=out)
    print(f"kafka bootstrap servers: {kafka_bootstrap}", file=out)
    if started is not None:
        print(f"console: {started[0]}", file=out)
    print(f"{nodes} nodes serving, data in {data_dir}; ports:", file=out)
    for line in port_layout(base_port, nodes):
        print(line, file=out)
    out.flush()
    if detach:
        print(
            f"'seglog local status --data-dir {data_dir}' shows the nodes, "
            f"'seglog local down --data-dir {data_dir}' stops them",
            file=sys.stderr,
        )
        return 0
    print("Ctrl-C (or 'seglog local down') stops the cluster", file=sys.stderr)
    reported: set[int] = set()
    interrupted = False
    try:
        while any(p.poll() is None for p, _ in procs):
            for i, (p, log_start) in enumerate(procs, start=1):
                if p.returncode is not None and i not in reported:
                    reported.add(i)  # said once; the others keep serving
                    print(
                        _node_failed(data_dir, i, p.returncode, "while serving", log_start),
                        file=sys.stderr,
                    )
            time.sleep(0.5)
    except KeyboardInterrupt:
        interrupted = True
    _stop([p.pid for p, _ in procs] + _console_pids(state))
    state_path.unlink(missing_ok=True)
    if not interrupted:
        # Nobody asked: every node exited by itself, which is a failure.
        for i, (p, log_start) in enumerate(procs, start=1):
            if i not in reported:
                print(
                    _node_failed(data_dir, i, p.returncode, "while serving", log_start),
                    file=sys.stderr,
                )
        print("every node exited; cluster stopped", file=sys.stderr)
        return 1
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


def last_error(log: Path, max_bytes: int = 65536, start: int = 0) -> str:
    """The last error a node logged (its structured `event` and `error` fields, or the
    `seglog node: ...` line it prints when it exits), or its last line: what to show
    beside the path when it failed. (Its controller process shares the log and may
    write after the node's own last words.) `start`: where this run's lines begin (the
    log is appended to across runs)."""
    try:
        with open(log, "rb") as f:
            f.seek(max(start, f.seek(0, os.SEEK_END) - max_bytes))
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


def _node_failed(
    data_dir: Path, node_id: int, returncode: int | None, when: str, log_start: int = 0
) -> str:
    log = node_log(data_dir, node_id)
    why = last_error(log, start=log_start)
    return f"node {node_id} exited with code {returncode} {when}; its log is {log}" + (
        f" (last error: {why})" if why else ""
    )


def _serving(address: str, timeout_s: float) -> bool:
    """The node's own gRPC health service on `address` says SERVING."""
    with grpc.insecure_channel(address) as channel:
        return serving(channel, timeout_s)


def _wait_ready(
    addresses: list[str], procs: list[tuple[subprocess.Popen[bytes], int]], data_dir: Path
) -> None:
    """Until each node serves on its own gRPC listener and every node is registered and
    unfenced in the metadata; a node that exits first, or the deadline, is a
    LocalClusterError naming every failed node and its error."""
    deadline = time.monotonic() + START_TIMEOUT_S
    serving: set[int] = set()
    ready: set[int] = set()
    nodes = len(procs)
    while time.monotonic() < deadline:
        _raise_if_exited(procs, data_dir)
        for i, address in enumerate(addresses, start=1):
            if i not in serving and _serving(address, 1.0):
                serving.add(i)
        if len(serving) == nodes:
            with grpc.insecure_channel(addresses[0]) as channel:
                stub = client_pb2_grpc.SegLogStub(channel)
                try:
                    r = stub.Metadata(pb.MetadataRequest(all_topics=True), timeout=2)
                    ready = {b.node_id for b in r.brokers if not b.fenced}
                except grpc.RpcError:
                    pass
            if len(ready) == nodes:
                # Serving on our ports and alive: the answers were our nodes'.
                _raise_if_exited(procs, data_dir)
                return
        time.sleep(0.2)
    missing = [i for i in range(1, nodes + 1) if i not in ready]
    raise LocalClusterError(
        f"the cluster did not become ready within {START_TIMEOUT_S:.0f}s: "
        + "; ".join(
            f"node {i} is not "
            + ("registered" if i in serving else f"serving on {addresses[i - 1]}")
            + f" (its log is {node_log(data_dir, i)})"
            for i in missing
        )
    )


def _raise_if_exited(procs: list[tuple[subprocess.Popen[bytes], int]], data_dir: Path) -> None:
    if all(p.poll() is None for p, _ in procs):
        return
    grace = time.monotonic() + FAILED_TOGETHER_S
    while time.monotonic() < grace and any(p.poll() is None for p, _ in procs):
        time.sleep(0.05)
    raise LocalClusterError(
        "\n".join(
            _node_failed(data_dir, i, p.returncode, "while starting", log_start)
            for i, (p, log_start) in enumerate(procs, start=1)
            if p.poll() is not None
        )
    )


def status(data_dir: Path, out: TextIO) -> int:
    """Each node's pid, whether it runs and serves, and its ports; 0 when every node
    serves, 1 otherwise (nothing running included)."""
    state_path = data_dir / STATE_FILE
    if not state_path.exists():
        print(f"no cluster is running from {data_dir} (no {state_path})", file=out)
        return 1
    state = json.loads(state_path.read_text())
    pids = [int(p) for p in state.get("pids", [])]
    base_port = state.get("base_port")
    print(f"cluster in {data_dir.resolve()}, {len(pids)} nodes", file=out)
    if base_port is None:  # a cluster.json written before the layout was recorded
        addresses = str(state.get("bootstrap", "")).split(",")
    else:
        addresses = bootstrap_servers(int(base_port), len(pids)).split(",")
    healthy = 0
    for i, pid in enumerate(pids, start=1):
        running = pid > 0 and pid_alive(pid)
        health = "not running"
        if running:
            serves = i <= len(addresses) and _serving(addresses[i - 1], 1.0)
            health = "serving" if serves else "running, not serving"
            healthy += serves
        ports = (
            " ".join(f"{name}={listener_port(int(base_port), i, name)}" for name in PORT_OFFSETS)
            if base_port is not None
            else f"GRPC={addresses[i - 1].rpartition(':')[2]}"
        )
        print(f"  node {i}  pid {pid}  {health:<20}  {ports}", file=out)
    running = sum(1 for pid in pids if pid > 0 and pid_alive(pid))
    print(f"{healthy} of {len(pids)} nodes serving, {running} running", file=out)
    print(f"bootstrap servers: {state.get('bootstrap', '')}", file=out)
    if state.get("kafka_bootstrap"):
        print(f"kafka bootstrap servers: {state['kafka_bootstrap']}", file=out)
    return 0 if pids and healthy == len(pids) else 1


def down(data_dir: Path, out: TextIO) -> int:
    state_path = data_dir / STATE_FILE
    if not state_path.exists():
        print(f"no cluster is running from {data_dir}; nothing to stop", file=out)
        return 0
    state = json.loads(state_path.read_text())
    _stop(_console_pids(state))
    pids = [int(p) for p in state["pids"] if int(p) > 0]
    alive = [pid for pid in pids if pid_alive(pid)]
    if not alive:
        state_path.unlink(missing_ok=True)
        print(f"no node of the cluster in {data_dir} is running; nothing to stop", file=out)
        return 0
    print(
        f"stopping {len(alive)} nodes (pids {', '.join(map(str, alive))}) from {data_dir}: "
        "each flushes its logs and shuts down cleanly ...",
        file=out,
        flush=True,
    )
    started = time.monotonic()
    stopped = _stop(alive)
    state_path.unlink(missing_ok=True)
    print(
        f"stopped {stopped} nodes in {time.monotonic() - started:.1f}s; their data stays "
        f"in {data_dir} (delete it with: rm -r {data_dir})",
        file=out,
    )
    return 0


def _alive(state: dict[str, object]) -> bool:
    pids = state.get("pids", [])
    assert isinstance(pids, list)
    return any(int(pid) > 0 and pid_alive(int(pid)) for pid in pids)


def _stop(pids: list[int]) -> int:
    """SIGTERM (a clean shutdown of each node), then SIGKILL what is left."""
    alive = [pid for pid in pids if pid_alive(pid)]
    for pid in alive:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline and any(pid_alive(pid) for pid in alive):
        for pid in alive:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        time.sleep(0.1)
    for pid in alive:
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
    return len(alive)
