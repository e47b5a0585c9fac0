"""Real node processes on loopback for tests: start, wait healthy, stop (TERM/KILL)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from seglog.chaos.targets import free_ports


def free_port() -> int:
    """A loopback port for a listener, below the kernel's ephemeral range
    (`seglog.chaos.targets.free_ports` says why)."""
    return free_ports(1)[0]


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
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "seglog.cli", "node", "--config", str(self.config_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
            # A group of its own: freezing a node (SIGSTOP to the group) freezes its
            # controller process too.
            start_new_session=True,
        )
        log.close()
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
            stub = health_pb2_grpc.HealthStub(channel)
            while time.monotonic() < deadline:
                if self.proc is not None and self.proc.poll() is not None:
                    raise RuntimeError(f"node {self.node_id} exited: {self.tail()}")
                try:
                    r = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=1)
                    if r.status == health_pb2.HealthCheckResponse.SERVING:
                        return
                except grpc.RpcError:
                    pass
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
