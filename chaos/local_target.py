"""The local target: `seglog local up` processes on this machine (chaos/targets.py's
docstring says how each fault is made here)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from seglog.harness import local_cluster
from seglog.harness.health import wait_serving
from seglog.harness.node_process import spawn_node
from seglog.harness.ports import consecutive_free_ports, listener_port
from seglog.harness.processes import child_pid, pid_alive
from seglog.node.config import INTER_BROKER_ADDRESS_OVERRIDES
from seglog.storage.disk_and_clock import ENV as FAULT_FILE_ENV

from .disk_damage import corrupt_replica
from .link_faults import NetworkFaults, healthy
from .link_proxy import Counts, LinkProxies
from .targets import (
    CONTROLLER_MODULE,
    NODE_IDS,
    START_TIMEOUT_S,
    STOP_TIMEOUT_S,
    FreezesOneProcess,
    ReplicaFiles,
    WritesFaultFile,
    group_by_partition,
)


class LocalTarget(FreezesOneProcess, WritesFaultFile):
    """`seglog local up` processes under `data_dir` (see the module docstring)."""

    name = "local"
    node_ids = NODE_IDS

    def __init__(
        self, data_dir: Path, seed: int = 0, links: bool = False, fetch_protocol: str = "kafka"
    ) -> None:
        self.data_dir = data_dir.resolve()
        self.fetch_protocol = fetch_protocol  # replica.fetch.protocol: kafka or grpc
        self.base_port = consecutive_free_ports(
            len(NODE_IDS), random.Random(f"ports-{seed}"), above_ephemeral=True
        )
        # With `links`, what each node sends another goes through a proxy of its own
        # (chaos/link_proxy.py), so a scenario can cut, delay or one-way-drop it while
        # clients still reach every node; without, node traffic is direct.
        self.links: LinkProxies | None = None
        if links:
            self.links = LinkProxies(
                {
                    (n, kind): listener_port(self.base_port, n, name)
                    for n in NODE_IDS
                    for kind, name in (
                        ("controller", "CONTROLLER"),
                        ("replication", local_cluster.replication_listener(fetch_protocol)),
                    )
                },
                random.Random(f"links-{seed}"),
            )
        self._counts_at_cut = Counts()
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

    def _overrides(self) -> dict[int, dict[str, str]]:
        """The followers' wire, and each node dialing every other one through the proxy
        of that link when the target has them."""
        wire = local_cluster.fetch_protocol_overrides(self.fetch_protocol)
        links = self._link_overrides()
        return {n: {**wire, **links.get(n, {})} for n in NODE_IDS}

    def _link_overrides(self) -> dict[int, dict[str, str]]:
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
            overrides=self._overrides(),
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
        return pid is not None and pid_alive(pid)

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
        proc, _ = spawn_node(node_dir / "server.properties", node_dir / "node.log", self.env)
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
        return group_by_partition(items, topic)

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
        done = self.clear_faults()
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
        self._counts_at_cut = self.links.counts()

    def link_stats(self) -> dict[str, int]:
        """Evidence the links carried traffic: bytes the proxies passed on so far, and
        connections they refused for want of room (so a bound hit is not silent); bytes
        a delay held since the last cut, and how long a held read waited on average."""
        if self.links is None:
            return {}
        since = self.links.counts().minus(self._counts_at_cut)
        return {
            "forwarded_bytes": sum(self.links.forwarded().values()),
            "refused_connections": self.links.refused,  # past MAX_CONNECTIONS
            "delayed_bytes": since.delayed_bytes,
            "mean_hold_ms": round(since.held_ms / max(since.delayed_reads, 1)),
        }
