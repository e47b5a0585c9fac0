"""Faults against a 3-node cluster, and the scenarios that combine them.

Two targets with one surface (`Target`):

* `ComposeTarget` — compose/docker-compose.yml under its own project name on free
  loopback ports. kill = `docker kill -s KILL|TERM`, pause = `docker pause`,
  restart = `docker restart`, isolate = `docker network disconnect` from the
  project's network (reconnect with the service name as alias, so the other nodes
  find it again by name). Replica files are read with `docker exec` and corrupted,
  while the node is down, by a throw-away container on the node's volume.
* `LocalTarget` — `seglog local up` processes. kill = SIGKILL|SIGTERM, pause =
  SIGSTOP/SIGCONT, restart = SIGTERM then the same `seglog node --config
  node-<i>/server.properties` command. Loopback cannot be cut per process without
  root firewall rules that would also cut the clients, so "isolate" is simulated
  with SIGSTOP: the node stops answering everyone, the others fence it and elect
  new leaders, and when it resumes it still believes it leads until it hears from
  the controller — the stale-leader case a partition produces. What SIGSTOP does not
  reproduce is a leader that keeps serving clients on its side of the cut.

Scenarios (`SCENARIOS`): kill-leader, chase-leader (SIGKILL) and chase-leader-term
(SIGTERM), pause-leader, partition-leader, corrupt-follower-disk,
kill-during-roll, storm, many-partitions (a flooded 1,000-partition topic and a
killed node; the cluster must recover by itself). Each writes "fault" events into
the history and leaves the cluster for `heal()`.
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
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from seglog.client.admin import Admin, NewTopic
from seglog.client.errors import KafkaError
from seglog.client.producer import Producer
from seglog.node.local_cluster import PORT_OFFSETS, listener_port
from seglog.proto import client_pb2 as pb
from seglog.proto import client_pb2_grpc

from .workload import History

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_FILE = ROOT / "compose" / "docker-compose.yml"
BUILD_SCRIPT = ROOT / "compose" / "build-image.sh"
COMPOSE_DATA_DIR = "/var/lib/seglog/data"
COMPOSE_PYTHON = "/opt/seglog/bin/python"
NODE_IDS = (1, 2, 3)
# The clusters' replica.lag.time.max.ms (node/local_cluster.py, compose/node.properties).
REPLICA_LAG_TIME_MAX_S = 5.0
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0


# --- corrupting a partition directory -------------------------------------------------
#
# Plain stdlib, no seglog imports: the compose target ships this function's source to
# a container of the node image (which runs it on the node's volume) so the files keep
# their owner; the local target calls it directly.


def corrupt_replica(log_dir: str, topic: str, partitions: list, mode: str, seed: int) -> dict:
    """Damage one closed segment of a stopped replica so that Kafka's start-up must
    notice it; return what was done. `partitions`: candidates in order of
    preference (ones this node follows); the first with a closed segment is used.

    bitflip-log   flip one byte inside the last batch of a closed segment at or above
                  the checkpointed recovery point (start-up re-validates those CRCs);
                  without such a segment, falls back to truncate-log
    truncate-log  cut a closed segment's .log below its last index entry (the
                  start-up sanity check sees the index pointing past the end, recovers
                  the segment and drops everything after the cut)
    corrupt-index truncate a closed segment's .index mid-entry (not a multiple of 8:
                  the sanity check rejects it and the index is rebuilt)

    A bit-flip below the recovery point is deliberately not used: Kafka does not
    re-read such segments at start-up either (no scrubbing), so it would stay.
    """
    import os as _os
    import random as _random
    import struct as _struct

    rnd = _random.Random(seed)
    recovery: dict = {}
    try:
        with open(_os.path.join(log_dir, "recovery-point-offset-checkpoint")) as f:
            for line in f.read().splitlines()[2:]:
                fields = line.split()
                if len(fields) == 3 and fields[0] == topic:
                    recovery[int(fields[1])] = int(fields[2])
    except OSError:
        pass

    def closed_segments(partition: int) -> list:
        directory = _os.path.join(log_dir, f"{topic}-{partition}")
        try:
            logs = sorted(f for f in _os.listdir(directory) if f.endswith(".log"))
        except OSError:
            return []
        return [(directory, f) for f in logs[:-1]]

    def batches(path: str) -> list:
        out = []
        with open(path, "rb") as f:
            data = f.read()
        pos = 0
        while pos + 12 <= len(data):
            (length,) = _struct.unpack_from(">i", data, pos + 8)
            if length <= 0 or pos + 12 + length > len(data):
                break
            out.append((pos, 12 + length))
            pos += 12 + length
        return out

    if mode == "bitflip-log":
        for partition in partitions:
            rp = recovery.get(partition, 0)
            above = [c for c in closed_segments(partition) if int(c[1][:20]) >= rp]
            if not above:
                continue
            directory, name = above[-1]
            path = _os.path.join(directory, name)
            pos, size = batches(path)[-1]
            # Past the 61-byte header: the records, covered by the CRC.
            at = pos + 61 + rnd.randrange(max(1, size - 61))
            with open(path, "r+b") as f:
                f.seek(at)
                byte = f.read(1)[0]
                f.seek(at)
                f.write(bytes([byte ^ (1 << rnd.randrange(8))]))
            return {
                "mode": mode,
                "partition": partition,
                "file": name,
                "position": at,
                "recovery_point": rp,
            }
        mode = "truncate-log"
    candidates = [(p, closed_segments(p)) for p in partitions]
    candidates = [(p, c) for p, c in candidates if c]
    if not candidates:
        return {"mode": "none", "reason": "no closed segment", "partitions": partitions}
    partition, closed = candidates[0]
    directory, name = closed[-1]
    base = name[:20]
    if mode == "truncate-log":
        path = _os.path.join(directory, name)
        index = _os.path.join(directory, base + ".index")
        last_position = 0
        if _os.path.exists(index) and _os.path.getsize(index) >= 8:
            with open(index, "rb") as f:
                data = f.read()
            entries = [
                _struct.unpack_from(">ii", data, i) for i in range(0, len(data) - len(data) % 8, 8)
            ]
            positions = [pos for rel, pos in entries if pos > 0 or rel > 0]
            last_position = max(positions) if positions else 0
        size = _os.path.getsize(path)
        cut = rnd.randrange(1, max(2, last_position if last_position > 0 else size))
        with open(path, "r+b") as f:
            f.truncate(cut)
        return {
            "mode": mode,
            "partition": partition,
            "file": name,
            "size": size,
            "cut_to": cut,
            "last_index_position": last_position,
            "recovery_point": recovery.get(partition, 0),
        }
    if mode == "corrupt-index":
        index_name = base + ".index"
        path = _os.path.join(directory, index_name)
        size = _os.path.getsize(path)
        cut = max(1, size - 1 - rnd.randrange(7))
        if cut % 8 == 0:
            cut -= 3
        with open(path, "r+b") as f:
            f.truncate(max(1, cut))
        return {
            "mode": mode,
            "partition": partition,
            "file": index_name,
            "size": size,
            "cut_to": max(1, cut),
        }
    raise ValueError(f"unknown corruption mode {mode!r}")


CORRUPTION_MODES = ("bitflip-log", "truncate-log", "corrupt-index")


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

    def up(self) -> None: ...
    def down(self) -> None: ...
    def address(self, node: int) -> str: ...
    def kill(self, node: int, sig: str) -> None: ...
    def start(self, node: int) -> None: ...
    def restart(self, node: int) -> None: ...
    def pause(self, node: int) -> None: ...
    def resume(self, node: int) -> None: ...
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


def free_ports(n: int) -> list[int]:
    socks: list[socket.socket] = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def consecutive_free_ports(n: int, rng: random.Random) -> int:
    """A base port with n free consecutive ports after it and after each of the other
    listeners' offsets (local up wants a base, `local_cluster.PORT_OFFSETS`)."""
    for _ in range(200):
        base = rng.randrange(20000, 40000)
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


def wait_serving(address: str, timeout_s: float) -> bool:
    """Until the node's gRPC health service says SERVING."""
    deadline = time.monotonic() + timeout_s
    with grpc.insecure_channel(address) as channel:
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


def proc_alive(pid: int) -> bool:
    """Alive and not a zombie (a killed node whose parent has not reaped it yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
            return True
        except OSError:
            return False


class LocalTarget:
    """`seglog local up` processes under `data_dir` (see the module docstring)."""

    name = "local"
    node_ids = NODE_IDS

    def __init__(self, data_dir: Path, seed: int = 0) -> None:
        self.data_dir = data_dir.resolve()
        self.base_port = consecutive_free_ports(len(NODE_IDS), random.Random(f"ports-{seed}"))
        self.bootstrap = ",".join(self.address(n) for n in NODE_IDS)
        self.kafka_bootstrap = ",".join(  # the Kafka-protocol listeners (PLAINTEXT)
            f"127.0.0.1:{listener_port(self.base_port, n, 'PLAINTEXT')}" for n in NODE_IDS
        )
        self.pids: dict[int, int] = {}
        self._children: dict[int, subprocess.Popen[bytes]] = {}
        self.stopped: set[int] = set()  # SIGSTOPped (paused or "isolated")

    def address(self, node: int) -> str:
        return f"127.0.0.1:{listener_port(self.base_port, node, 'GRPC')}"

    def up(self) -> None:
        cmd = [
            sys.executable,
            "-m",
            "seglog.node.cli",
            "local",
            "up",
            "--nodes",
            "3",
            "--data-dir",
            str(self.data_dir),
            "--base-port",
            str(self.base_port),
            "--detach",
        ]
        subprocess.run(cmd, check=True, timeout=START_TIMEOUT_S + 30, capture_output=True)
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
                [sys.executable, "-m", "seglog.node.cli", "node", "--config", str(config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._children[node] = proc
        self.pids[node] = proc.pid
        self._save_state()
        wait_serving(self.address(node), START_TIMEOUT_S)

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
        for node in NODE_IDS:
            if node in self.stopped:
                self.resume(node)
                done.append(f"SIGCONT node {node}")
        for node in NODE_IDS:
            if not self._alive(node):
                self.start(node)
                done.append(f"started node {node}")
        return done

    def down(self) -> None:
        for node in list(self.stopped):
            self.resume(node)
        self._save_state()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "seglog.node.cli",
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


class ComposeTarget:
    """compose/docker-compose.yml under a unique project (see the module docstring)."""

    name = "compose"
    node_ids = NODE_IDS

    def __init__(self, project: str | None = None, build: bool = False) -> None:
        self.project = project or f"seglog-chaos-{uuid.uuid4().hex[:8]}"
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

    def address(self, node: int) -> str:
        return f"127.0.0.1:{self.ports[node - 1]}"

    def compose(self, *args: str, timeout_s: float = 180) -> subprocess.CompletedProcess[str]:
        argv = ["docker-compose", "-p", self.project, "-f", str(COMPOSE_FILE), *args]
        return _run(argv, timeout_s, env=self.env)

    def up(self) -> None:
        if (
            self.build
            or subprocess.run(
                ["docker", "image", "inspect", "seglog:latest"], capture_output=True
            ).returncode
        ):
            _run(["bash", str(BUILD_SCRIPT)], 1500)
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
            if not wait_serving(self.address(n), START_TIMEOUT_S):
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
        wait_serving(self.address(node), START_TIMEOUT_S)

    def restart(self, node: int) -> None:
        if node in self.paused:
            self.resume(node)
        self._docker("restart", "-t", "20", self.containers[node], timeout_s=90)
        wait_serving(self.address(node), START_TIMEOUT_S)

    def pause(self, node: int) -> None:
        self._docker("pause", self.containers[node])
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

    def heal(self) -> list[str]:
        done = []
        for node in list(self.paused):
            self.resume(node)
            done.append(f"unpaused node{node}")
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
        compose_down(self.project, self.env)


# --- cluster state --------------------------------------------------------------------


@dataclass
class PartitionState:
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@dataclass
class ReplicaOffsets:
    partition: int
    leader: int
    high_watermark: int
    leos: dict[int, int]


class ClusterView:
    """Leaders, ISRs and (from the leaders) HW and replica LEOs, through the client."""

    def __init__(self, target: Target, topic: str) -> None:
        self.target = target
        self.topic = topic
        self.admin = Admin(target.bootstrap, request_timeout_ms=10_000)

    def close(self) -> None:
        self.admin.close()

    def create_topic(self, partitions: int, configs: dict[str, str], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.admin.create_topics(
                    [NewTopic(self.topic, partitions, 3, configs)], timeout_ms=10_000
                )
                break
            except KafkaError as e:
                if "TOPIC_ALREADY_EXISTS" in str(e):
                    break
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
        self.wait_converged(partitions, timeout_s)

    def node_views(self, timeout_s: float = 2.0) -> dict[int, list[PartitionState]]:
        """Each reachable node's own metadata for the topic. Asked node by node: a
        node that is paused, cut off or whose metadata stopped moving would
        otherwise pass its stale view off as the cluster's."""
        views: dict[int, list[PartitionState]] = {}
        for node in self.target.node_ids:
            try:
                with grpc.insecure_channel(self.target.address(node)) as channel:
                    r = client_pb2_grpc.SegLogStub(channel).Metadata(
                        pb.MetadataRequest(topics=[self.topic]), timeout=timeout_s
                    )
            except grpc.RpcError:
                continue
            for t in r.topics:
                if t.name == self.topic and not t.error_code:
                    views[node] = [
                        PartitionState(
                            p.partition,
                            p.leader_id,
                            p.leader_epoch,
                            tuple(p.replica_nodes),
                            tuple(sorted(p.isr_nodes)),
                        )
                        for p in sorted(t.partitions, key=lambda p: p.partition)
                    ]
        return views

    def partitions(self) -> list[PartitionState]:
        """The newest state of each partition any node knows (highest leader epoch)."""
        best: dict[int, PartitionState] = {}
        for states in self.node_views().values():
            for p in states:
                if p.partition not in best or p.leader_epoch > best[p.partition].leader_epoch:
                    best[p.partition] = p
        if not best:
            # Nobody answered directly: fall back to the client's retrying path.
            t = self.admin.describe_topics([self.topic])[0]
            return [
                PartitionState(p.partition, p.leader, p.leader_epoch, p.replicas, p.isr)
                for p in t.partitions
            ]
        return [best[p] for p in sorted(best)]

    def leader_of(self, partition: int) -> int:
        for p in self.partitions():
            if p.partition == partition:
                return p.leader
        return -1

    def wait_new_leader(self, partition: int, old: int, timeout_s: float) -> int:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                leader = self.leader_of(partition)
                if leader >= 0 and leader != old:
                    return leader
            except KafkaError:
                pass
            time.sleep(0.3)
        return -1

    def converged(self, partitions: int) -> bool:
        """Every node answers, all agree on each partition's leader, epoch and ISR,
        and every ISR holds all replicas."""
        views = self.node_views()
        if set(views) != set(self.target.node_ids):
            return False
        states = list(views.values())
        first = states[0]
        return (
            len(first) == partitions
            and all(s == first for s in states[1:])
            and all(p.leader >= 0 and len(p.isr) == len(p.replicas) for p in first)
        )

    def wait_converged(self, partitions: int, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.converged(partitions):
                return True
            time.sleep(0.5)
        return False

    def replica_offsets(self) -> dict[int, ReplicaOffsets]:
        """HW and each replica's LEO, per partition, from each partition's leader."""
        out: dict[int, ReplicaOffsets] = {}
        leaders = {p.leader for p in self.partitions() if p.leader >= 0}
        for leader in sorted(leaders):
            with grpc.insecure_channel(self.target.address(leader)) as channel:
                stub = client_pb2_grpc.SegLogStub(channel)
                try:
                    r = stub.DescribeReplicas(
                        pb.DescribeReplicasRequest(topics=[self.topic]), timeout=10
                    )
                except grpc.RpcError:
                    continue
            for p in r.partitions:
                if p.topic == self.topic:
                    out[p.partition] = ReplicaOffsets(
                        p.partition,
                        leader,
                        p.high_watermark,
                        {s.node_id: s.log_end_offset for s in p.replicas},
                    )
        return out

    def wait_replicas_caught_up(
        self, partitions: int, timeout_s: float
    ) -> dict[int, ReplicaOffsets]:
        """Once producing stopped: until every replica's LEO equals the HW."""
        deadline = time.monotonic() + timeout_s
        last: dict[int, ReplicaOffsets] = {}
        while time.monotonic() < deadline:
            try:
                last = self.replica_offsets()
            except KafkaError:
                time.sleep(0.5)
                continue
            if len(last) == partitions and all(
                len(r.leos) == 3 and all(leo == r.high_watermark for leo in r.leos.values())
                for r in last.values()
            ):
                return last
            time.sleep(0.5)
        return last


# --- scenarios --------------------------------------------------------------------------


@dataclass
class FaultContext:
    target: Target
    view: ClusterView
    history: History
    rng: random.Random
    partitions: int
    deadline: float  # monotonic: when the fault phase should end
    log: Callable[[str], None] = print
    faults: list[dict[str, Any]] = field(default_factory=list)

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    def fault(self, name: str, phase: str, node: int | None = None, **detail: Any) -> None:
        event = {"type": "fault", "name": name, "phase": phase, "node": node, **detail}
        self.history.append(event)
        self.faults.append({**event, "t": time.time()})
        where = f" node {node}" if node is not None else ""
        extra = f" {detail}" if detail else ""
        self.log(f"[chaos] {name} {phase}{where}{extra}")

    def leader(self, partition: int | None = None) -> tuple[int, int]:
        """(partition, its leader) for the given or a random partition; waits a bit
        for a leader to exist."""
        p = self.rng.randrange(self.partitions) if partition is None else partition
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                leader = self.view.leader_of(p)
                if leader >= 0:
                    return p, leader
            except KafkaError:
                pass
            time.sleep(0.3)
        return p, -1

    def settle(self, timeout_s: float = 20.0) -> bool:
        """Wait until every partition is led with a full ISR (bounded)."""
        return self.view.wait_converged(self.partitions, timeout_s)


def _kill_and_restart(
    ctx: FaultContext, name: str, sig: str, partition: int | None, down_s: float
) -> None:
    p, leader = ctx.leader(partition)
    if leader < 0:
        ctx.fault(name, "info", None, partition=p, detail="no leader to kill")
        return
    ctx.fault(name, "start", leader, partition=p, signal=sig)
    ctx.target.kill(leader, sig)
    new = ctx.view.wait_new_leader(p, leader, 20)
    ctx.fault(name, "info", leader, partition=p, new_leader=new)
    ctx.sleep(down_s)
    ctx.target.start(leader)
    ctx.fault(name, "end", leader, partition=p)


def kill_leader(ctx: FaultContext) -> None:
    """SIGKILL the leader of partition 0 once; restart it after a while."""
    _kill_and_restart(ctx, "kill-leader", "KILL", 0, min(8.0, max(2.0, ctx.remaining() / 3)))


def _chase(ctx: FaultContext, sig: str) -> None:
    """Five times in a row: kill the current leader of one partition, wait for the
    next leader, bring the old one back, and kill the new leader as soon as the
    ISR is whole again (or after a bounded wait)."""
    name = "chase-leader" if sig == "KILL" else "chase-leader-term"
    p = ctx.rng.randrange(ctx.partitions)
    for i in range(5):
        _kill_and_restart(ctx, name, sig, p, 1.0)
        ctx.fault(name, "info", None, round=i + 1, converged=ctx.settle(15))


def chase_leader(ctx: FaultContext) -> None:
    """SIGKILL the leader of one partition five times in a row, chasing each new leader."""
    _chase(ctx, "KILL")


def chase_leader_term(ctx: FaultContext) -> None:
    """SIGTERM (a clean shutdown) the leader of one partition five times in a row."""
    _chase(ctx, "TERM")


def _pause(ctx: FaultContext, seconds: float, partition: int | None = None) -> None:
    p, leader = ctx.leader(partition)
    if leader < 0:
        return
    ctx.fault("pause-leader", "start", leader, partition=p, seconds=round(seconds, 1))
    ctx.target.pause(leader)
    ctx.sleep(seconds)
    ctx.target.resume(leader)
    ctx.fault("pause-leader", "end", leader, partition=p)


def pause_leader(ctx: FaultContext) -> None:
    """Freeze the leader for longer than replica.lag.time.max.ms, repeatedly."""
    while True:
        _pause(ctx, REPLICA_LAG_TIME_MAX_S * 1.6)
        ctx.settle(20)
        if ctx.remaining() < REPLICA_LAG_TIME_MAX_S * 2:
            return
        ctx.sleep(3)


def _isolate(ctx: FaultContext, seconds: float, partition: int | None = None) -> None:
    p, leader = ctx.leader(partition)
    if leader < 0:
        return
    how = "network disconnect" if ctx.target.name == "compose" else "SIGSTOP (loopback)"
    ctx.fault("partition-leader", "start", leader, partition=p, seconds=round(seconds, 1), how=how)
    ctx.target.isolate(leader)
    ctx.sleep(seconds)
    ctx.target.reconnect(leader)
    ctx.fault("partition-leader", "end", leader, partition=p)


def partition_leader(ctx: FaultContext) -> None:
    """Cut the leader off from the other nodes (and clients) for ~10 s, repeatedly."""
    while True:
        _isolate(ctx, 10.0)
        ctx.settle(30)
        if ctx.remaining() < 15:
            return
        ctx.sleep(3)


def _corrupt_follower(ctx: FaultContext) -> None:
    states = ctx.view.partitions()
    nodes = [n for n in ctx.target.node_ids if any(p.leader not in (n, -1) for p in states)]
    if not nodes:
        return
    follower = ctx.rng.choice(nodes)
    followed = [p.partition for p in states if p.leader != follower and follower in p.replicas]
    ctx.rng.shuffle(followed)
    mode = ctx.rng.choice(CORRUPTION_MODES)
    seed = ctx.rng.randrange(2**31)
    ctx.fault("corrupt-follower-disk", "start", follower, mode=mode, candidates=followed)
    # SIGKILL: an unclean stop, so start-up runs recovery from the recovery point.
    ctx.target.kill(follower, "KILL")
    what = ctx.target.corrupt(follower, ctx.view.topic, followed, mode, seed)
    ctx.fault("corrupt-follower-disk", "info", follower, corruption=what)
    ctx.target.start(follower)
    ctx.fault("corrupt-follower-disk", "end", follower)


def corrupt_follower_disk(ctx: FaultContext) -> None:
    """While a follower is down, damage a closed segment or index of one of its
    partitions; on restart recovery must repair it (truncate and refetch)."""
    ctx.sleep(min(8.0, ctx.remaining() / 3))  # let some segments close first
    while True:
        _corrupt_follower(ctx)
        ctx.settle(30)
        if ctx.remaining() < 10:
            return
        ctx.sleep(3)


def kill_during_roll(ctx: FaultContext) -> None:
    """Small segments roll every few hundred records: SIGKILL a node (a random
    one, leader of some partitions) under load, restart it, repeat."""
    while True:
        node = ctx.rng.choice(ctx.target.node_ids)
        ctx.fault("kill-during-roll", "start", node, signal="KILL")
        ctx.target.kill(node, "KILL")
        ctx.sleep(ctx.rng.uniform(1.0, 4.0))
        ctx.target.start(node)
        ctx.fault("kill-during-roll", "end", node)
        ctx.settle(20)
        if ctx.remaining() < 8:
            return
        ctx.sleep(ctx.rng.uniform(1.0, 4.0))


def _restart_node(ctx: FaultContext) -> None:
    node = ctx.rng.choice(ctx.target.node_ids)
    ctx.fault("restart-node", "start", node)
    ctx.target.restart(node)
    ctx.fault("restart-node", "end", node)


def storm(ctx: FaultContext) -> None:
    """A seeded mix of every fault, one at a time, with short pauses between."""
    actions: list[tuple[str, Callable[[], None]]] = [
        (
            "kill-leader",
            lambda: _kill_and_restart(ctx, "kill-leader", "KILL", None, ctx.rng.uniform(0.5, 6)),
        ),
        (
            "term-leader",
            lambda: _kill_and_restart(ctx, "term-leader", "TERM", None, ctx.rng.uniform(0.5, 4)),
        ),
        ("pause-leader", lambda: _pause(ctx, ctx.rng.uniform(2, REPLICA_LAG_TIME_MAX_S * 2))),
        ("partition-leader", lambda: _isolate(ctx, ctx.rng.uniform(3, 12))),
        ("corrupt-follower-disk", lambda: _corrupt_follower(ctx)),
        ("restart-node", lambda: _restart_node(ctx)),
    ]
    ctx.sleep(min(3.0, ctx.remaining() / 4))
    while ctx.remaining() > 5:
        name, action = ctx.rng.choice(actions)
        action()
        if ctx.rng.random() < 0.6:
            ctx.settle(ctx.rng.uniform(3, 15))  # sometimes strike again before the ISR heals
        ctx.sleep(ctx.rng.uniform(0.5, 4))


WIDE_TOPIC = "chaos-wide"
WIDE_PARTITIONS = 1000


def _flood(target: Target, stop: threading.Event, sent: list[int]) -> None:
    """Keyed acks=all records to the wide topic as fast as one Producer sends them,
    with short delivery timeouts: beyond what the cluster serves, so records pile up
    and time out; none of them is checked (the workload's topic is)."""
    p = Producer(
        target.bootstrap, acks="all", linger_ms=0, delivery_timeout_ms=5_000,
        request_timeout_ms=3_000,
    )
    n = 0
    try:
        while not stop.is_set():
            try:
                p.send(WIDE_TOPIC, key=b"%d" % n, value=b"w" * 300)
                n += 1
            except KafkaError:
                time.sleep(0.01)  # a full buffer: keep pushing
    finally:
        sent.append(n)
        p.close(0)


def many_partitions(ctx: FaultContext) -> None:
    """Thousands of partitions and overload: a second topic of 1,000 partitions (RF=3)
    beside the workload's, flooded by two producers beyond what the cluster serves,
    while a node is SIGKILLed and restarted (its leaderships move, hundreds of ISRs
    shrink and grow again). Then the flood stops, and the cluster must come back by
    itself: every partition of both topics led, with a full ISR, agreed by every node."""
    wide = ClusterView(ctx.target, WIDE_TOPIC)
    try:
        wide.create_topic(WIDE_PARTITIONS, {"min.insync.replicas": "2"}, 120)
        ctx.fault("many-partitions", "info", None, partitions=WIDE_PARTITIONS,
                  converged=wide.wait_converged(WIDE_PARTITIONS, 120))
        stop = threading.Event()
        sent: list[int] = []
        floods = [
            threading.Thread(target=_flood, args=(ctx.target, stop, sent), daemon=True)
            for _ in range(2)
        ]
        ctx.fault("many-partitions", "start", None, producers=len(floods))
        for t in floods:
            t.start()
        ctx.sleep(min(10.0, max(2.0, ctx.remaining() / 4)))
        victim = ctx.rng.choice(ctx.target.node_ids)
        ctx.fault("many-partitions", "info", victim, kill="KILL")
        ctx.target.kill(victim, "KILL")
        ctx.sleep(3.0)
        ctx.target.start(victim)
        ctx.sleep(min(10.0, max(2.0, ctx.remaining() / 3)))
        stop.set()
        for t in floods:
            t.join(30)
        recovered = wide.wait_converged(WIDE_PARTITIONS, 90) and ctx.settle(60)
        # Recorded, not raised: the run still heals and reads everything back, and the
        # report (and the test) judge the recovery.
        ctx.fault("many-partitions", "end", None, flooded=sum(sent), recovered=recovered)
    finally:
        wide.close()


@dataclass(frozen=True)
class Scenario:
    name: str
    run: Callable[[FaultContext], None]
    # Topic-level overrides: small segments where rolls or closed segments matter.
    topic_configs: dict[str, str]


_SMALL = {"segment.bytes": "32768"}
SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("kill-leader", kill_leader, {}),
        Scenario("chase-leader", chase_leader, {}),
        Scenario("chase-leader-term", chase_leader_term, {}),
        Scenario("pause-leader", pause_leader, {}),
        Scenario("partition-leader", partition_leader, {}),
        Scenario("corrupt-follower-disk", corrupt_follower_disk, {"segment.bytes": "16384"}),
        Scenario("kill-during-roll", kill_during_roll, {"segment.bytes": "16384"}),
        Scenario("storm", storm, _SMALL),
        Scenario("many-partitions", many_partitions, {}),
    )
}
