"""One real node process on loopback (tests, bench): start, wait healthy, stop
(TERM/KILL); `spawn_node` is how every harness starts a `seglog node`."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import grpc

from seglog.harness.health import serving
from seglog.harness.ports import free_port


def spawn_node(
    config: Path,
    log_path: Path,
    env: Mapping[str, str] | None = None,
    python_args: Sequence[str] = ("-m", "seglog.cli"),
) -> tuple[subprocess.Popen[bytes], int]:
    """`seglog node --config CONFIG` with its output appended to `log_path`, in a
    session (process group) of its own: freezing or killing the group reaches its
    controller process too. Returns the process and where its lines begin in the log
    (appended to across runs). `env`: the node's environment (default: ours);
    `python_args`: what runs seglog's CLI (a benchmark's profiling launcher)."""
    with open(log_path, "ab") as log:
        log_start = log.tell()
        proc = subprocess.Popen(
            [sys.executable, *python_args, "node", "--config", str(config)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=None if env is None else dict(env),
        )
    return proc, log_start


class NodeProcess:
    """One `seglog node` child process with its own data directory."""

    def __init__(
        self,
        data_dir: Path,
        node_id: int = 1,
        port: int | None = None,
        overrides: Mapping[str, str] | None = None,
        controller_port: int | None = None,
    ) -> None:
        """`controller_port`: the CONTROLLER listener of a Raft voter (its entry in
        controller.quorum.voters); without it the node is a quorum of one."""
        self.data_dir = data_dir
        self.node_id = node_id
        self.port = port or free_port()
        self.controller_port = controller_port
        listeners = f"GRPC://127.0.0.1:{self.port}"
        if controller_port is not None:
            listeners += f",CONTROLLER://127.0.0.1:{controller_port}"
        self.config_path = data_dir / f"server-{node_id}.properties"
        self.log_path = data_dir / f"node-{node_id}.log"
        self.log_dirs = [data_dir / f"node{node_id}-logs-a", data_dir / f"node{node_id}-logs-b"]
        props = {
            "node.id": str(node_id),
            "listeners": listeners,
            "log.dirs": ",".join(str(d) for d in self.log_dirs),
            "num.partitions": "1",
            "log.initial.task.delay.ms": "1000",
        }
        props.update(overrides or {})
        data_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.proc: subprocess.Popen[bytes] | None = None
        # TLS for the health check, when the gRPC listener is mapped to SSL.
        self.credentials: grpc.ChannelCredentials | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 30.0) -> NodeProcess:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc, _ = spawn_node(self.config_path, self.log_path, env)
        self.wait_healthy(timeout_s)
        return self

    def wait_healthy(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        channel = (
            grpc.insecure_channel(self.bootstrap)
            if self.credentials is None
            else grpc.secure_channel(self.bootstrap, self.credentials)
        )
        with channel:
            while time.monotonic() < deadline:
                if self.proc is not None and self.proc.poll() is not None:
                    raise RuntimeError(f"node {self.node_id} exited: {self.tail()}")
                if serving(channel, 1):
                    return
                time.sleep(0.1)
        raise TimeoutError(f"node {self.node_id} not healthy in {timeout_s}s: {self.tail()}")

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 30.0) -> int:
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            code = self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(10)
        self.proc = None
        return code

    def kill(self) -> int:
        return self.stop(signal.SIGKILL)

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> NodeProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
