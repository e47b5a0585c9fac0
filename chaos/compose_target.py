"""The compose target: compose/docker-compose.yml under a project of its own
(chaos/targets.py's docstring says how each fault is made there)."""

from __future__ import annotations

import inspect
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from seglog.harness.health import wait_serving
from seglog.harness.ports import free_ports
from seglog.harness.processes import child_pid

from . import netfilter
from .delay_proxy import NamespaceProxy
from .disk_damage import corrupt_replica
from .link_faults import NetworkFaults, healthy
from .targets import (
    CONTROLLER_MODULE,
    NODE_IDS,
    ROOT,
    START_TIMEOUT_S,
    STOP_TIMEOUT_S,
    FreezesOneProcess,
    ReplicaFiles,
    WritesFaultFile,
    group_by_partition,
)

COMPOSE_FILE = ROOT / "compose" / "docker-compose.yml"
# The secure profile (docs/security.md): TLS and mTLS everywhere, SASL_SSL for Kafka
# clients, ACLs; gen-certs.sh writes what it mounts into SECURE_DIR.
SECURE_FILE = ROOT / "compose" / "docker-compose.secure.yml"
# Disk and clock faults: each node reads the run's fault file, mounted from the host.
FAULTS_FILE = ROOT / "compose" / "docker-compose.faults.yml"
FAULT_DIR_ENV = "SEGLOG_CHAOS_FAULT_DIR"
GEN_CERTS = ROOT / "compose" / "secure" / "gen-certs.sh"
SECURE_DIR = ROOT / "compose" / "secure" / "generated"
BUILD_SCRIPT = ROOT / "compose" / "build-image.sh"
COMPOSE_DATA_DIR = "/var/lib/seglog/data"
COMPOSE_PYTHON = "/opt/seglog/bin/python"

# --- reading replica files ---------------------------------------------------------------

# Runs inside a node container: a tar of the topic's *.log files on stdout.
_TAR_LOGS = """
import glob, sys, tarfile
root, topic = sys.argv[1], sys.argv[2]
with tarfile.open(fileobj=sys.stdout.buffer, mode="w|") as t:
    for path in sorted(glob.glob(f"{root}/{topic}-*/*.log")):
        t.add(path, arcname=path[len(root) + 1:])
"""


def netem_available() -> bool:
    """Whether this kernel has tc netem (the compose target's packet reordering; its
    delays are the delay proxies'; containers share the host's kernel): a netem qdisc
    on loopback in a namespace of its own, thrown away."""
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


class ComposeTarget(FreezesOneProcess, WritesFaultFile):
    """compose/docker-compose.yml under a unique project (see the module docstring)."""

    name = "compose"
    node_ids = NODE_IDS

    def __init__(
        self,
        project: str | None = None,
        build: bool = False,
        secure: bool = False,
        fetch_protocol: str = "kafka",
        delay_proxies: bool = False,
        seed: int = 0,
    ) -> None:
        self.project = project or f"seglog-chaos-{uuid.uuid4().hex[:8]}"
        self.secure = secure
        self.fetch_protocol = fetch_protocol  # replica.fetch.protocol: kafka or grpc
        self.files = [COMPOSE_FILE, *([SECURE_FILE] if secure else []), FAULTS_FILE]
        # The fault file every node reads (docker-compose.faults.yml mounts its folder).
        fault_dir = Path(tempfile.mkdtemp(prefix=f"{self.project}-faults-"))
        fault_dir.chmod(0o755)  # the containers' node user reads it
        self.fault_file = fault_dir / "faults.json"
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
            FAULT_DIR_ENV: str(fault_dir),
            # REPLICATION a gRPC listener: the followers fetch over gRPC (the compose
            # file's comment says how replica.fetch.protocol follows it).
            **(
                {"SEGLOG_GRPC_LISTENER_NAMES": "GRPC,REPLICATION"}
                if fetch_protocol == "grpc"
                else {}
            ),
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
        # With `delay_proxies`, every connection a node opens to another's controller or
        # replication port goes through a delay proxy in its namespace from the start
        # (chaos/delay_proxy.py), so `cut` can delay links; without, delays are refused.
        self.delay_proxies = delay_proxies
        self.seed = seed
        self.proxies: dict[int, NamespaceProxy] = {}
        self.proxy_logs: Path | None = None  # their stderr, made with the first one

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
        if self.delay_proxies:
            # As soon as the namespaces exist: the connections the nodes opened before
            # are reset at their next packet and reopened through the proxies.
            self.cut(self.net_faults)
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
        self._stop_proxy(node)  # its namespace is gone with the node's processes

    def start(self, node: int) -> None:
        if self.is_down(node):
            self._docker("start", self.containers[node])
            self._links_again()
        wait_serving(self.address(node), START_TIMEOUT_S, self.security)

    def restart(self, node: int) -> None:
        if node in self.paused:
            self.resume(node)
        self._docker("restart", "-t", "20", self.containers[node], timeout_s=90)
        self._links_again()
        wait_serving(self.address(node), START_TIMEOUT_S, self.security)

    def _links_again(self) -> None:
        """After a node got a new network namespace (started) or address (reconnected):
        its rules and proxy anew, and the others' rules name its address again."""
        if self.net_faults.rules or self.delay_proxies:
            self.cut(self.net_faults)

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
        self._links_again()

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
        return group_by_partition(items, topic)

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
        for log in self.proxy_logs.glob("*.log") if self.proxy_logs else ():
            if log.stat().st_size:
                shutil.copy(log, out / log.name)

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
        """Put `faults` in force with iptables, the delay proxies and tc netem inside each
        running node's network namespace (chaos/netfilter.py); a node started later gets
        them too."""
        if not self.delay_proxies and netfilter.proxy_faults(faults).rules:
            raise ValueError(
                "delays on compose go through the delay proxies: this target was made "
                "without them (delay_proxies=True)"
            )
        self.net_faults = faults
        ips = self._ips()
        for n in NODE_IDS:
            if not self.is_down(n):
                self._apply_links(n, ips)

    def link_stats(self) -> dict[str, int]:
        """Evidence the rules matched: packets the chains dropped (drops and losses)
        and cloned (duplicates) since the last cut, summed over the nodes; with the
        delay proxies, the bytes they passed on and held since then, and how long a
        held read waited on average."""
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
        if self.delay_proxies:
            totals = {"forwarded_bytes": 0, "delayed_bytes": 0, "delayed_reads": 0}
            held_ms = 0.0
            refused = 0
            for proxy in self.proxies.values():
                if not proxy.alive():
                    continue
                got = proxy.stats()
                for key in totals:
                    totals[key] += int(got[key])
                held_ms += float(got["held_ms"])
                refused += int(got["refused_connections"])
            out.update(totals)
            out["mean_hold_ms"] = round(held_ms / max(totals["delayed_reads"], 1))
            out["refused_connections"] = refused  # past link_proxy's MAX_CONNECTIONS
        return out

    def _ips(self) -> dict[int, str]:
        out = {}
        for n in NODE_IDS:
            info = json.loads(_run(["docker", "inspect", self.containers[n]]).stdout)[0]
            out[n] = info["NetworkSettings"]["Networks"][self.network]["IPAddress"]
        return out

    def _apply_links(self, node: int, ips: dict[int, str]) -> None:
        pid = int(_run(["docker", "inspect", "-f", "{{.State.Pid}}", self.containers[node]]).stdout)
        ns = ["nsenter", "-t", str(pid), "-n"]
        for table in ("filter", "mangle"):
            self._chain(ns, table, netfilter.CHAIN)
        for argv in netfilter.iptables_rules(node, self.net_faults, ips):
            _run(ns + argv, 30)
        if self.delay_proxies:
            self._proxy_in_path(node, pid, ns, ips)
        remove, *add = netfilter.tc_commands(node, self.net_faults, ips)
        subprocess.run(ns + remove, capture_output=True, timeout=30)  # fails if none
        for argv in add:
            try:
                _run(ns + argv, 30)
            except RuntimeError as e:
                if "qdisc kind is unknown" in str(e):
                    raise RuntimeError(
                        "this kernel has no sch_netem (CONFIG_NET_SCH_NETEM): packets "
                        f"cannot be reordered on compose here ({e})"
                    ) from e
                raise

    def _chain(self, ns: list[str], table: str, chain: str) -> None:
        """`chain` in `table`, jumped to from OUTPUT, once."""
        create, check = netfilter.iptables_setup(table, chain)
        subprocess.run(ns + create, capture_output=True, timeout=30)  # fails: it exists
        if subprocess.run(ns + check, capture_output=True, timeout=30).returncode != 0:
            _run(ns + netfilter.iptables_jump(table, chain), 30)

    def _proxy_in_path(self, node: int, pid: int, ns: list[str], ips: dict[int, str]) -> None:
        """The node's delay proxy running in its current namespace with the rules in
        force, and the redirect to it naming the other nodes' current addresses."""
        proxy = self.proxies.get(node)
        if proxy is None or proxy.pid != pid or not proxy.alive():
            self._stop_proxy(node)
            if self.proxy_logs is None:
                self.proxy_logs = Path(tempfile.mkdtemp(prefix=f"{self.project}-proxies-"))
            log = self.proxy_logs / f"delay-proxy-node{node}.log"
            proxy = self.proxies[node] = NamespaceProxy(node, pid, self.seed, log)
        # The rules first, then the redirect: a connection redirected to the proxy finds
        # the addresses it is told of.
        proxy.set(netfilter.proxy_faults(self.net_faults), ips)
        if proxy.redirected != ips:
            for table in ("nat", "filter"):
                self._chain(ns, table, netfilter.PROXY_CHAIN)
            for argv in netfilter.redirect_rules(node, ips, proxy.port):
                _run(ns + argv, 30)
            proxy.redirected = dict(ips)

    def remove_delay_proxies(self) -> None:
        """Take the delay proxies out of the nodes' paths (for a cluster kept running
        after the harness: they would go with it). Their connections close and the
        nodes reconnect directly."""
        for node, proxy in list(self.proxies.items()):
            ns = ["nsenter", "-t", str(proxy.pid), "-n"]
            for table in ("nat", "filter"):
                subprocess.run(
                    ns + ["iptables", "-w", "-t", table, "-F", netfilter.PROXY_CHAIN],
                    capture_output=True,
                    timeout=30,
                )
            self._stop_proxy(node)
        self.delay_proxies = False

    def _stop_proxy(self, node: int) -> None:
        proxy = self.proxies.pop(node, None)
        if proxy is not None:
            proxy.close()

    def heal(self) -> list[str]:
        done = self.clear_faults()
        if self.net_faults.rules:
            self.cut(healthy())
            done.append(
                "removed every iptables and netem rule"
                + (" (the delay proxies pass bytes untouched)" if self.delay_proxies else "")
            )
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
        for node in list(self.proxies):
            self._stop_proxy(node)
        compose_down(self.project, self.env)
        shutil.rmtree(self.fault_file.parent, ignore_errors=True)
        if self.proxy_logs is not None:
            shutil.rmtree(self.proxy_logs, ignore_errors=True)
