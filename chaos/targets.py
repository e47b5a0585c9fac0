"""Where chaos runs: a 3-node cluster behind one surface (`Target`), and what the
targets share: freezing one process of a node, replica files by partition. The two
targets live in compose_target.py and local_target.py.

* `ComposeTarget` — compose/docker-compose.yml under its own project name on free
  loopback ports. kill = `docker kill -s KILL|TERM`, pause = `docker pause`,
  restart = `docker restart`, isolate = `docker network disconnect` from the
  project's network (reconnect with the service name as alias, so the other nodes
  find it again by name). Replica files are read with `docker exec` and corrupted,
  while the node is down, by a throw-away container on the node's volume.
  Network faults (`cut`): iptables drops, random losses and TEE duplicates in each
  node's network namespace, entered from the host with nsenter (chaos/netfilter.py);
  delays through a transparent proxy in each namespace (chaos/delay_proxy.py), tc netem
  only to reorder packets.
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
import json
import os
import signal
from pathlib import Path
from typing import Any, Protocol

from .link_faults import NetworkFaults

ROOT = Path(__file__).resolve().parents[1]
NODE_IDS = (1, 2, 3)
# The clusters' replica.lag.time.max.ms (harness/local_cluster.py, compose/node.properties).
REPLICA_LAG_TIME_MAX_S = 5.0
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 30.0

# How a node's controller process shows in its command line (`python -m ...`).
CONTROLLER_MODULE = b"seglog.node.controller.controller_process"

# partition -> [(segment file name, bytes)], sorted by name (= base offset).
ReplicaFiles = dict[int, list[tuple[str, bytes]]]


def group_by_partition(items: list[tuple[str, bytes]], topic: str) -> ReplicaFiles:
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


class WritesFaultFile:
    """Disk and clock faults through the fault file every node reads
    (storage/disk_and_clock.py; `node_ids` in the faults picks the nodes)."""

    fault_file: Path

    def inject(self, faults: dict[str, Any]) -> None:
        """Replace the nodes' disk and clock faults ({} clears them): written by rename,
        so a node never reads half a file."""
        self.fault_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.fault_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(faults))
        tmp.chmod(0o644)  # a container's node user reads it too
        os.replace(tmp, self.fault_file)

    def clear_faults(self) -> list[str]:
        """heal's part: what it cleared."""
        if self.fault_file.exists() and json.loads(self.fault_file.read_text() or "{}"):
            self.inject({})
            return ["cleared disk and clock faults"]
        return []


class FreezesOneProcess:
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
