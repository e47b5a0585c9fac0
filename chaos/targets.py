"""Where chaos runs: a 3-node cluster behind one surface (`Target`).

* `ComposeTarget` — compose/docker-compose.yml under its own project name on free
  loopback ports. kill = `docker kill -s KILL|TERM`, pause = `docker pause`,
  restart = `docker restart`, isolate = `docker network disconnect` from the
  project's network (reconnect with the service name as alias, so the other nodes
  find it again by name). Replica files are read with `docker exec` and corrupted,
  while the node is down, by a throw-away container on the node's volume.
  Network faults (`cut`): iptables drops, random losses and TEE duplicates and tc
  netem delays in each node's network namespace, entered from the host with nsenter
  (chaos/netfilter.py).
* `LocalTarget` — `seglog local up` processes. kill = SIGKILL|SIGTERM, pause =
  SIGSTOP/SIGCONT, restart = SIGTERM then the same `seglog node --config
  node-<i>/server.properties` command. Loopback cannot be cut per process without
  root firewall rules that would also cut the clients, so "isolate" is simulated
  with SIGSTOP: the node stops answering everyone, the others fence it and elect
  new leaders, and when it resumes it still believes it leads until it hears from
  the controller — the stale-leader case a partition produces. What SIGSTOP does not
  reproduce is a leader that keeps serving clients on its side of the cut; for that,
  a target made with `links=True` routes node-to-node traffic through a TCP proxy per
  link (chaos/link_proxy.py) and `cut` drops or delays what one node sends another.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import json
import os
import random
import signal
import socket
import subprocess
import sys
import tarfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from seglog.node import local_cluster
from seglog.node.config import INTER_BROKER_ADDRESS_OVERRIDES
from seglog.node.local_cluster import PORT_OFFSETS, listener_port
from seglog.storage.disk_and_clock import ENV as FAULT_FILE_ENV

from . import netfilter
from .disk_damage import corrupt_replica
from .link_faults import NetworkFaults, healthy
from .link_proxy import LinkProxies

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "compose" / "docker-compose.yml"
# The secure profile (docs/security.md): TLS and mTLS everywhere, SASL_SSL for Kafka
# clients, ACLs; gen-certs.sh writes what it mounts into SECURE_DIR.
SECURE_FILE = ROOT / "compose" / "docker-compose.secure.yml"
GEN_CERTS = ROOT / "compose" / "secure" / "gen-certs.sh"
SECURE_DIR = ROOT / "compose" / "secure" / "generated"
BUILD_SCRIPT = ROOT / "compose" / "build-image.sh"
COMPOSE_DATA_DIR = "/var/lib/seglog/data"
COMPOSE_PYTHON = "/opt/seglog/bin/python"
NODE_IDS = (1, 2, 3)
# The clusters' replica.lag.time.max.ms (node/local_cluster.py, compose/node.properties).
REPLICA_LAG_TIME_MAX_S = 5.0
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0

# --- reading replica files ---------------------------------------------------------------

# Runs inside a node container: a tar of the topic's *.log files on stdout.
_TAR_LOGS = """
import glob, sys, tarfile
root, topic = sys.argv[1], sys.argv[2]
with tarfile.open(fileobj=sys.stdout.buffer, mode="w|") as t:
    for path in sorted(glob.glob(f"{root}/{topic}-*/*.log")):
        t.add(path, arcname=path[len(root) + 1:])
"""

# partition -> [(segment file name, bytes)], sorted by name (= base offset).
ReplicaFiles = dict[int, list[tuple[str, bytes]]]


def _group_by_partition(items: list[tuple[str, bytes]], topic: str) -> ReplicaFiles:
    out: ReplicaFiles = {}
    for rel, data in items:
        directory, _, name = rel.rpartition("/")
        t, _, num = directory.rpartition("-")
        if t == topic and num.isdigit():
            out.setdefault(int(num), []).append((name, data))
    for files in out.values():
        files.sort()
    return out


# --- targets --------------------------------------------------------------------------


class Target(Protocol):
    name: str
    bootstrap: str
    kafka_bootstrap: str  # the Kafka-protocol listeners, for --client librdkafka
    node_ids: tuple[int, ...]
    # seglog's clients' security options (kafka-python's names; empty: plaintext).
    security: dict[str, str]

    def up(self) -> None: ...
    def down(self) -> None: ...
    def address(self, node: int) -> str: ...
    def kill(self, node: int, sig: str) -> None: ...
    def start(self, node: int) -> None: ...
    def restart(self, node: int) -> None: ...
    def pause(self, node: int) -> None: ...
    def resume(self, node: int) -> None: ...
    def pause_process(self, node: int, role: str) -> None: ...
    def resume_process(self, node: int, role: str) -> None: ...
    def isolate(self, node: int) -> None: ...
    def reconnect(self, node: int) -> None: ...
    def is_down(self, node: int) -> bool: ...
    def corrupt(
        self, node: int, topic: str, partitions: list[int], mode: str, seed: int
    ) -> dict: ...
    def replica_files(self, node: int, topic: str) -> ReplicaFiles: ...
    def node_log_tail(self, node: int, lines: int = 200) -> list[str]: ...
    def save_logs(self, out: Path) -> None: ...
    def heal(self) -> list[str]: ...
    def inject(self, faults: dict[str, Any]) -> None: ...
    def cut(self, faults: NetworkFaults) -> None: ...
    def link_stats(self) -> dict[str, int]: ...


# Listeners' ports come from below the kernel's ephemeral range: a port from bind(0)
# lies in that range, and so does the local port of every outgoing connection, which
# can take it before the node it was given to binds it ("Address already in use" at
# start, seen in CI). Above the compose files' published ports (19090-19194) and
# `seglog local up`'s defaults (9092-9394, its console 9492).
PORTS_LOWEST = 21000
_handed_out: set[int] = set()  # never the same port twice in one process (TIME_WAIT)
_any_ports = random.Random()  # seeded by the OS: concurrent processes pick apart


def ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (Linux's default if unreadable)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _below_ephemeral(span: int) -> tuple[int, int] | None:
    """[low, high) for a port p with p + span still below the ephemeral range, or None
    when that leaves fewer than 2000 to choose from."""
    high = min(ephemeral_low(), 32768) - span
    return (PORTS_LOWEST, high) if high - PORTS_LOWEST >= 2000 else None


def _any_free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# How a node's controller process shows in its command line (`python -m ...`).
CONTROLLER_MODULE = b"seglog.node.controller.controller_process"


def free_ports(n: int) -> list[int]:
    """n distinct loopback ports, free now, below the ephemeral range and not handed
    out before by this process; bind(0) ports when the range leaves no room below."""
    below = _below_ephemeral(0)
    draw = (lambda: _any_ports.randrange(*below)) if below else _any_free_port
    ports: list[int] = []
    for _ in range(1000 * n):
        port = draw()
        if port not in _handed_out and _bindable(port):
            _handed_out.add(port)
            ports.append(port)
            if len(ports) == n:
                return ports
    raise RuntimeError(f"no {n} free loopback ports found")


def consecutive_free_ports(n: int, rng: random.Random) -> int:
    """A base port with n free consecutive ports after it and after each of the other
    listeners' offsets (local up wants a base, `local_cluster.PORT_OFFSETS`), all below
    the ephemeral range when it leaves room."""
    low, high = _below_ephemeral(max(PORT_OFFSETS.values()) + n) or (20000, 40000)
    for _ in range(200):
        base = rng.randrange(low, high)
        socks = []
        try:
            for offset in PORT_OFFSETS.values():
                for i in range(n):
                    s = socket.socket()
                    socks.append(s)
                    s.bind(("127.0.0.1", base + offset + i))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free range of ports")


def open_channel(address: str, security: dict[str, str]) -> grpc.Channel:
    """A channel to a node's gRPC listener, with TLS when `security` says so."""
    from seglog.client.security import ClientSecurity

    credentials = ClientSecurity.from_options(security).channel_credentials()
    if credentials is None:
        return grpc.insecure_channel(address)
    return grpc.secure_channel(address, credentials)


def wait_serving(address: str, timeout_s: float, security: dict[str, str] | None = None) -> bool:
    """Until the node's gRPC health service says SERVING."""
    deadline = time.monotonic() + timeout_s
    with open_channel(address, security or {}) as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            try:
                r = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=2)
                if r.status == health_pb2.HealthCheckResponse.SERVING:
                    return True
            except grpc.RpcError:
                pass
            time.sleep(0.3)
    return False


def child_pid(parent: int, marker: bytes) -> int | None:
    """A child process of `parent` whose command line holds `marker` (from /proc;
    bounded by the process table)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == parent and marker in Path(f"/proc/{entry.name}/cmdline").read_bytes():
                return int(entry.name)
        except (OSError, ValueError, IndexError):
            continue
    return None


def proc_alive(pid: int) -> bool:
    """Alive and not a zombie (a killed node whose parent has not reaped it yet)."""
    return local_cluster.pid_alive(pid)


class _FreezesOneProcess:
    """pause_process/resume_process for a target whose `process_pid(node, role)` finds
    the broker ("broker", `seglog node`) or its controller process ("controller"): a gray
    failure, one process of a node stopped (SIGSTOP) while the other runs on."""

    stopped_processes: dict[int, dict[str, int]]

    def process_pid(self, node: int, role: str) -> int | None:
        raise NotImplementedError

    def pause_process(self, node: int, role: str) -> None:
        pid = self.process_pid(node, role)
        if pid is None:
            raise RuntimeError(f"node {node} has no running {role} process to pause")
        os.kill(pid, signal.SIGSTOP)
        self.stopped_processes.setdefault(node, {})[role] = pid

    def resume_process(self, node: int, role: str) -> None:
        pid = self.stopped_processes.get(node, {}).pop(role, None)
        if not self.stopped_processes.get(node):
            self.stopped_processes.pop(node, None)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


class LocalTarget(_FreezesOneProcess):
    """`seglog local up` processes under `data_dir` (see the module docstring)."""

    name = "local"
    node_ids = NODE_IDS

    def __init__(self, data_dir: Path, seed: int = 0, links: bool = False) -> None:
        self.data_dir = data_dir.resolve()
        self.base_port = consecutive_free_ports(len(NODE_IDS), random.Random(f"ports-{seed}"))
        # With `links`, what each node sends another goes through a proxy of its own
        # (chaos/link_proxy.py), so a scenario can cut, delay or one-way-drop it while
        # clients still reach every node; without, node traffic is direct.
        self.links: LinkProxies | None = None
        if links:
            self.links = LinkProxies(
                {
                    (n, kind): listener_port(self.base_port, n, name)
                    for n in NODE_IDS
                    for kind, name in (("controller", "CONTROLLER"), ("replication", "GRPC"))
                },
                random.Random(f"links-{seed}"),
            )
        self.bootstrap = ",".join(self.address(n) for n in NODE_IDS)
        self.kafka_bootstrap = ",".join(  # the Kafka-protocol listeners (PLAINTEXT)
            f"127.0.0.1:{listener_port(self.base_port, n, 'PLAINTEXT')}" for n in NODE_IDS
        )
        self.security: dict[str, str] = {}
        self.pids: dict[int, int] = {}
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        self.stopped: set[int] = set()  # SIGSTOPped (paused or "isolated")
        # One process of a node SIGSTOPped (pause_process): node -> the pid.
        self.stopped_processes: dict[int, dict[str, int]] = {}
        # Every node reads this file for disk and clock faults (storage/disk_and_clock.py).
        self.fault_file = self.data_dir / "faults.json"
        self.env = {**os.environ, FAULT_FILE_ENV: str(self.fault_file)}

    def address(self, node: int) -> str:
        return f"127.0.0.1:{listener_port(self.base_port, node, 'GRPC')}"

    def inject(self, faults: dict[str, Any]) -> None:
        """Replace the nodes' disk and clock faults (the fault file; {} clears them)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.fault_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(faults))
        os.replace(tmp, self.fault_file)

    def _link_overrides(self) -> dict[int, dict[str, str]]:
        """Each node dials every other one through the proxy of that link."""
        if self.links is None:
            return {}
        out = {}
        for n in NODE_IDS:
            voters, peers = [], []
            for m in NODE_IDS:
                if m == n:
                    port = listener_port(self.base_port, m, "CONTROLLER")
                else:
                    port = self.links.port(n, m, "controller")
                    peers.append(f"{m}@127.0.0.1:{self.links.port(n, m, 'replication')}")
                voters.append(f"{m}@127.0.0.1:{port}")
            out[n] = {
                "controller.quorum.voters": ",".join(voters),
                INTER_BROKER_ADDRESS_OVERRIDES: ",".join(peers),
            }
        return out

    def up(self) -> None:
        """`seglog local up --detach`, with each node's links routed through their
        proxies when the target has them."""
        self.inject({})
        if self.links is not None:
            self.links.start()
        local_cluster.up(
            self.data_dir,
            len(NODE_IDS),
            self.base_port,
            detach=True,
            out=io.StringIO(),
            overrides=self._link_overrides(),
            env=self.env,
        )
        state = json.loads((self.data_dir / "cluster.json").read_text())
        self.pids = {i + 1: int(pid) for i, pid in enumerate(state["pids"])}

    def _save_state(self) -> None:
        path = self.data_dir / "cluster.json"
        state = json.loads(path.read_text()) if path.exists() else {"nodes": 3}
        state["pids"] = [self.pids.get(n, -1) for n in NODE_IDS]
        state["bootstrap"] = self.bootstrap
        path.write_text(json.dumps(state))

    def _alive(self, node: int) -> bool:
        child = self._children.get(node)
        if child is not None and child.pid == self.pids.get(node):
            return child.poll() is None
        pid = self.pids.get(node)
        return pid is not None and proc_alive(pid)

    def is_down(self, node: int) -> bool:
        return not self._alive(node)

    def _signal(self, node: int, sig: int) -> None:
        """To the node's whole process group: the broker and its controller process
        (each node runs in a session of its own)."""
        if self._alive(node):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pids[node], sig)

    def kill(self, node: int, sig: str) -> None:
        if node in self.stopped:
            # A stopped process handles SIGTERM only once continued.
            self._signal(node, signal.SIGCONT)
            self.stopped.discard(node)
        for role in list(self.stopped_processes.get(node, {})):
            self.resume_process(node, role)
        self._signal(node, signal.SIGKILL if sig == "KILL" else signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while self._alive(node) and time.monotonic() < deadline:
            time.sleep(0.05)
        if self._alive(node):
            self._signal(node, signal.SIGKILL)
            while self._alive(node):
                time.sleep(0.05)

    def start(self, node: int) -> None:
        if self._alive(node):
            return
        node_dir = self.data_dir / f"node-{node}"
        config = node_dir / "server.properties"
        with open(node_dir / "node.log", "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "seglog.cli", "node", "--config", str(config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=self.env,
            )
        self._children[node] = proc
        self.pids[node] = proc.pid
        self._save_state()
        wait_serving(self.address(node), START_TIMEOUT_S, self.security)

    def restart(self, node: int) -> None:
        self.kill(node, "TERM")
        self.start(node)

    def pause(self, node: int) -> None:
        self._signal(node, signal.SIGSTOP)
        self.stopped.add(node)

    def resume(self, node: int) -> None:
        self._signal(node, signal.SIGCONT)
        self.stopped.discard(node)

    # SIGSTOP stands in for a network partition on loopback (module docstring).
    isolate = pause
    reconnect = resume

    def process_pid(self, node: int, role: str) -> int | None:
        """The pid of one process of a running node: "broker" (`seglog node`, the
        group's leader) or "controller" (its child running the controller process)."""
        if not self._alive(node):
            return None
        broker = self.pids[node]
        if role == "broker":
            return broker
        if role != "controller":
            raise ValueError(f"a node's processes are broker and controller, not {role!r}")
        return child_pid(broker, CONTROLLER_MODULE)

    def corrupt(self, node: int, topic: str, partitions: list[int], mode: str, seed: int) -> dict:
        assert not self._alive(node), "corrupt only a stopped replica"
        log_dir = str(self.data_dir / f"node-{node}" / "logs")
        return corrupt_replica(log_dir, topic, partitions, mode, seed)

    def replica_files(self, node: int, topic: str) -> ReplicaFiles:
        root = self.data_dir / f"node-{node}" / "logs"
        items = []
        for path in sorted(root.glob(f"{topic}-*/*.log")):
            items.append((f"{path.parent.name}/{path.name}", path.read_bytes()))
        return _group_by_partition(items, topic)

    def node_log_path(self, node: int) -> Path:
        return self.data_dir / f"node-{node}" / "node.log"

    def node_log_tail(self, node: int, lines: int = 200) -> list[str]:
        try:
            text = self.node_log_path(node).read_text(errors="replace")
        except OSError:
            return []
        return text.splitlines()[-lines:]

    def save_logs(self, out: Path) -> None:
        pass  # the node logs already live in the run directory (data_dir/node-<i>/node.log)

    def heal(self) -> list[str]:
        done = []
        if self.fault_file.exists() and json.loads(self.fault_file.read_text() or "{}"):
            self.inject({})
            done.append("cleared disk and clock faults")
        if self.links is not None and self.links.faults.rules:
            self.links.set_faults(healthy())
            done.append("healed every link")
        for node in NODE_IDS:
            if node in self.stopped:
                self.resume(node)
                done.append(f"SIGCONT node {node}")
            for role in list(self.stopped_processes.get(node, {})):
                self.resume_process(node, role)
                done.append(f"SIGCONT node {node}'s {role} process")
        for node in NODE_IDS:
            if not self._alive(node):
                self.start(node)
                done.append(f"started node {node}")
        return done

    def down(self) -> None:
        for node in list(self.stopped):
            self.resume(node)
        for node in list(self.stopped_processes):
            for role in list(self.stopped_processes.get(node, {})):
                self.resume_process(node, role)
        self._save_state()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "seglog.cli",
                "local",
                "down",
                "--data-dir",
                str(self.data_dir),
            ],
            timeout=STOP_TIMEOUT_S + 30,
            capture_output=True,
        )
        for proc in self._children.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        if self.links is not None:
            self.links.close()

    def cut(self, faults: NetworkFaults) -> None:
        """Put `faults` in force on the node-to-node links (healthy() lifts them)."""
        if self.links is None:
            raise ValueError("this local target was made without link proxies (links=True)")
        self.links.set_faults(faults)

    def link_stats(self) -> dict[str, int]:
        """Evidence the links carried traffic: bytes the proxies passed on so far, and
        connections they refused for want of room (so a bound hit is not silent)."""
        if self.links is None:
            return {}
        return {
            "forwarded_bytes": sum(self.links.forwarded().values()),
            "refused_connections": self.links.refused,  # past MAX_CONNECTIONS
        }


def netem_available() -> bool:
    """Whether this kernel can delay packets with tc netem (the compose target's delays;
    containers share the host's kernel): a netem qdisc on loopback in a namespace of
    its own, thrown away."""
    try:
        r = subprocess.run(
            ["unshare", "-n", "tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"],
            capture_output=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def docker_unavailable() -> str | None:
    """Why the compose target cannot run here, or None."""
    import shutil

    for tool in ("docker", "docker-compose"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed"
    try:
        r = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"the docker engine does not answer: {e}"
    if r.returncode != 0:
        return f"the docker engine is not reachable: {r.stderr.strip()[:200]}"
    return None


PAUSE_ATTEMPTS = 3


def _run(argv: list[str], timeout_s: float = 60, **kw: Any) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {r.returncode}: {r.stderr.strip()[-500:]}")
    return r


def compose_down(project: str, env: Mapping[str, str] | None = None) -> None:
    """Take a compose project down with its volumes; bounded, and quiet about a
    project that is already gone."""
    subprocess.run(
        ["docker-compose", "-p", project, "-f", str(COMPOSE_FILE), "down", "-v"]
        + ["--remove-orphans", "--timeout", "10"],
        env=env,
        capture_output=True,
        timeout=300,
    )


class ComposeTarget(_FreezesOneProcess):
    """compose/docker-compose.yml under a unique project (see the module docstring)."""

    name = "compose"
    node_ids = NODE_IDS

    def __init__(
        self, project: str | None = None, build: bool = False, secure: bool = False
    ) -> None:
        self.project = project or f"seglog-chaos-{uuid.uuid4().hex[:8]}"
        self.secure = secure
        self.files = [COMPOSE_FILE, SECURE_FILE] if secure else [COMPOSE_FILE]
        self.security: dict[str, str] = (
            {
                "security_protocol": "SSL",
                "ssl_cafile": str(SECURE_DIR / "ca.pem"),
                "ssl_certfile": str(SECURE_DIR / "admin.pem"),
            }
            if secure
            else {}
        )
        ports = free_ports(2 * len(NODE_IDS))  # gRPC, then the Kafka-protocol listeners
        self.ports, self.kafka_ports = ports[: len(NODE_IDS)], ports[len(NODE_IDS) :]
        self.bootstrap = ",".join(self.address(n) for n in NODE_IDS)
        self.kafka_bootstrap = ",".join(f"127.0.0.1:{p}" for p in self.kafka_ports)
        self.env = {
            **os.environ,
            **{f"SEGLOG_PORT_{n}": str(self.ports[n - 1]) for n in NODE_IDS},
            **{f"SEGLOG_KAFKA_PORT_{n}": str(self.kafka_ports[n - 1]) for n in NODE_IDS},
        }
        self.build = build
        self.containers: dict[int, str] = {}
        self.volumes: dict[int, str] = {}
        self.network = ""
        self.paused: set[int] = set()
        self.isolated: set[int] = set()
        # node -> role -> host pid of a process stopped alone (pause_process)
        self.stopped_processes: dict[int, dict[str, int]] = {}
        self.net_faults = healthy()

    def address(self, node: int) -> str:
        return f"127.0.0.1:{self.ports[node - 1]}"

    def compose(self, *args: str, timeout_s: float = 180) -> subprocess.CompletedProcess[str]:
        files = [a for f in self.files for a in ("-f", str(f))]
        argv = ["docker-compose", "-p", self.project, *files, *args]
        return _run(argv, timeout_s, env=self.env)

    def up(self) -> None:
        if (
            self.build
            or subprocess.run(
                ["docker", "image", "inspect", "seglog:latest"], capture_output=True
            ).returncode
        ):
            _run(["bash", str(BUILD_SCRIPT)], 1500)
        if self.secure and not (SECURE_DIR / "server.properties").exists():
            _run(["bash", str(GEN_CERTS)], 120, env={**self.env, "PYTHON": sys.executable})
        self.compose("up", "-d", "--no-build")
        for n in NODE_IDS:
            cid = self.compose("ps", "-q", f"node{n}", timeout_s=30).stdout.strip()
            if not cid:
                raise RuntimeError(f"no container for node{n}")
            self.containers[n] = cid
            info = json.loads(_run(["docker", "inspect", cid]).stdout)[0]
            self.volumes[n] = next(
                m["Name"] for m in info["Mounts"] if m["Destination"] == COMPOSE_DATA_DIR
            )
            self.network = next(iter(info["NetworkSettings"]["Networks"]))
        for n in NODE_IDS:
            if not wait_serving(self.address(n), START_TIMEOUT_S, self.security):
                raise RuntimeError(f"node{n} did not become healthy; {self.node_log_tail(n, 20)}")

    def _docker(self, *args: str, timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
        return _run(["docker", *args], timeout_s)

    def _status(self, node: int) -> str:
        r = subprocess.run(
            ["docker", "inspect", "-f", "{{.State.Status}}", self.containers[node]],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return r.stdout.strip()

    def is_down(self, node: int) -> bool:
        return self._status(node) in ("exited", "dead", "created")

    def kill(self, node: int, sig: str) -> None:
        if node in self.paused:
            self.resume(node)
        for role in list(self.stopped_processes.get(node, {})):
            self.resume_process(node, role)
        if self.is_down(node):
            return
        self._docker("kill", "-s", sig, self.containers[node])
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while not self.is_down(node) and time.monotonic() < deadline:
            time.sleep(0.2)
        if not self.is_down(node):
            self._docker("kill", "-s", "KILL", self.containers[node])

    def start(self, node: int) -> None:
        if self.is_down(node):
            self._docker("start", self.containers[node])
            if self.net_faults.rules:  # a new network namespace: the cut again
                self._apply_links(node, self._ips())
        wait_serving(self.address(node), START_TIMEOUT_S, self.security)

    def restart(self, node: int) -> None:
        if node in self.paused:
            self.resume(node)
        self._docker("restart", "-t", "20", self.containers[node], timeout_s=90)
        if self.net_faults.rules:
            self._apply_links(node, self._ips())
        wait_serving(self.address(node), START_TIMEOUT_S, self.security)

    def pause(self, node: int) -> None:
        """`docker pause`, tried again when the cgroup freezer gives up ("unable to
        freeze": a task it could not stop in time, e.g. in the middle of I/O on a
        loaded machine); a half-frozen container is thawed before the next try."""
        container = self.containers[node]
        for attempt in range(PAUSE_ATTEMPTS):
            try:
                self._docker("pause", container)
                break
            except RuntimeError as e:
                if "unable to freeze" not in str(e) or attempt == PAUSE_ATTEMPTS - 1:
                    raise
                subprocess.run(["docker", "unpause", container], capture_output=True, timeout=60)
                time.sleep(1.0)
        self.paused.add(node)

    def resume(self, node: int) -> None:
        self._docker("unpause", self.containers[node])
        self.paused.discard(node)

    def isolate(self, node: int) -> None:
        self._docker("network", "disconnect", self.network, self.containers[node])
        self.isolated.add(node)

    def reconnect(self, node: int) -> None:
        self._docker(
            "network", "connect", "--alias", f"node{node}", self.network, self.containers[node]
        )
        self.isolated.discard(node)

    def corrupt(self, node: int, topic: str, partitions: list[int], mode: str, seed: int) -> dict:
        assert self.is_down(node), "corrupt only a stopped replica"
        # The function's own source, run by the node image on the node's volume, as
        # the image's user: the files keep their owner.
        script = (
            inspect.getsource(corrupt_replica)
            + "\nimport json, sys\n"
            + "a = json.loads(sys.argv[1])\n"
            + "print(json.dumps(corrupt_replica(*a)))\n"
        )
        args = json.dumps([COMPOSE_DATA_DIR, topic, partitions, mode, seed])
        r = self._docker(
            "run",
            "--rm",
            "--network",
            "none",
            "-v",
            f"{self.volumes[node]}:{COMPOSE_DATA_DIR}",
            "--entrypoint",
            COMPOSE_PYTHON,
            "seglog:latest",
            "-c",
            script,
            args,
            timeout_s=120,
        )
        return dict(json.loads(r.stdout.strip().splitlines()[-1]))

    def replica_files(self, node: int, topic: str) -> ReplicaFiles:
        r = subprocess.run(
            [
                "docker",
                "exec",
                self.containers[node],
                COMPOSE_PYTHON,
                "-c",
                _TAR_LOGS,
                COMPOSE_DATA_DIR,
                topic,
            ],
            capture_output=True,
            timeout=300,
        )
        if r.returncode != 0:
            raise RuntimeError(f"reading node{node}'s files: {r.stderr.decode()[-300:]}")
        items = []
        with tarfile.open(fileobj=io.BytesIO(r.stdout), mode="r|") as t:
            for member in t:
                f = t.extractfile(member)
                if f is not None:
                    items.append((member.name, f.read()))
        return _group_by_partition(items, topic)

    def node_log_tail(self, node: int, lines: int = 200) -> list[str]:
        r = subprocess.run(
            ["docker", "logs", "--tail", str(lines), self.containers.get(node, f"node{node}")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        return (r.stdout + r.stderr).splitlines()

    def save_logs(self, out: Path) -> None:
        out.mkdir(parents=True, exist_ok=True)
        for n, cid in self.containers.items():
            r = subprocess.run(["docker", "logs", cid], capture_output=True, text=True, timeout=120)
            (out / f"node{n}.log").write_text(r.stdout + r.stderr)

    def inject(self, faults: dict[str, Any]) -> None:
        raise NotImplementedError(
            "disk and clock faults (the fault-injection file) run on the local target "
            "only: use --target local"
        )

    def process_pid(self, node: int, role: str) -> int | None:
        """The host's pid of one process of a node's container: "broker" (`seglog node`,
        the container's first process) or "controller" (its child). Signalled from the
        host: a container's first process ignores SIGSTOP only from inside."""
        if role not in ("broker", "controller"):
            raise ValueError(f"a node's processes are broker and controller, not {role!r}")
        if self.is_down(node):
            return None
        r = subprocess.run(
            ["docker", "inspect", "-f", "{{.State.Pid}}", self.containers[node]],
            capture_output=True,
            text=True,
            timeout=30,
        )
        broker = int(r.stdout.strip()) if r.returncode == 0 and r.stdout.strip() else 0
        if broker <= 0:
            return None
        return broker if role == "broker" else child_pid(broker, CONTROLLER_MODULE)

    def cut(self, faults: NetworkFaults) -> None:
        """Put `faults` in force with iptables and tc netem inside each running node's
        network namespace (chaos/netfilter.py); a node started later gets them too."""
        self.net_faults = faults
        ips = self._ips()
        for n in NODE_IDS:
            if not self.is_down(n):
                self._apply_links(n, ips)

    def link_stats(self) -> dict[str, int]:
        """Evidence the rules matched: packets the chains dropped (drops and losses)
        and cloned (duplicates) since the last cut, summed over the nodes."""
        out = {"dropped_packets": 0, "duplicated_packets": 0}
        for n in NODE_IDS:
            if self.is_down(n):
                continue
            pid = _run(["docker", "inspect", "-f", "{{.State.Pid}}", self.containers[n]]).stdout
            for table, key in (("filter", "dropped_packets"), ("mangle", "duplicated_packets")):
                r = subprocess.run(
                    ["nsenter", "-t", pid.strip(), "-n"]
                    + ["iptables", "-w", "-t", table, "-L", netfilter.CHAIN, "-v", "-n", "-x"],
                    capture_output=True,
                    text=True,
                    timeout=30,
                )
                out[key] += netfilter.packets_matched(r.stdout)
        return out

    def _ips(self) -> dict[int, str]:
        out = {}
        for n in NODE_IDS:
            info = json.loads(_run(["docker", "inspect", self.containers[n]]).stdout)[0]
            out[n] = info["NetworkSettings"]["Networks"][self.network]["IPAddress"]
        return out

    def _apply_links(self, node: int, ips: dict[int, str]) -> None:
        pid = _run(["docker", "inspect", "-f", "{{.State.Pid}}", self.containers[node]]).stdout
        ns = ["nsenter", "-t", pid.strip(), "-n"]
        for table in ("filter", "mangle"):
            create, check = netfilter.iptables_setup(table)
            subprocess.run(ns + create, capture_output=True, timeout=30)  # fails: it exists
            if subprocess.run(ns + check, capture_output=True, timeout=30).returncode != 0:
                _run(ns + netfilter.iptables_jump(table), 30)
        for argv in netfilter.iptables_rules(node, self.net_faults, ips):
            _run(ns + argv, 30)
        remove, *add = netfilter.tc_commands(node, self.net_faults, ips)
        subprocess.run(ns + remove, capture_output=True, timeout=30)  # fails if none
        for argv in add:
            try:
                _run(ns + argv, 30)
            except RuntimeError as e:
                if "qdisc kind is unknown" in str(e):
                    raise RuntimeError(
                        "this kernel has no sch_netem (CONFIG_NET_SCH_NETEM): delays and "
                        "reordering cannot be injected on compose here; the local target's "
                        f"link proxies delay instead ({e})"
                    ) from e
                raise

    def heal(self) -> list[str]:
        done = []
        if self.net_faults.rules:
            self.cut(healthy())
            done.append("removed every iptables and netem rule")
        for node in list(self.paused):
            self.resume(node)
            done.append(f"unpaused node{node}")
        for node in list(self.stopped_processes):
            for role in list(self.stopped_processes.get(node, {})):
                self.resume_process(node, role)
                done.append(f"SIGCONT node{node}'s {role} process")
        for node in list(self.isolated):
            self.reconnect(node)
            done.append(f"reconnected node{node}")
        for node in NODE_IDS:
            if self.is_down(node):
                self.start(node)
                done.append(f"started node{node}")
        return done

    def down(self) -> None:
        for node in list(self.paused):
            subprocess.run(["docker", "unpause", self.containers[node]], capture_output=True)
        for node in list(self.stopped_processes):
            for role in list(self.stopped_processes.get(node, {})):
                self.resume_process(node, role)
        compose_down(self.project, self.env)
