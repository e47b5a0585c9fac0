"""The benchmarks' nodes: a node process that can run under cProfile (every thread) and
report where its time went, and three of them as one replicated cluster with the
probes the benchmarks wait on (bench/replication.py's, shared by compare,
kafka_protocol and produce_latency)."""

from __future__ import annotations

import io
import json
import os
import pstats
import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import grpc

from seglog.bench.measure import CHANNEL_OPTIONS, say
from seglog.client.admin import Admin, NewTopic
from seglog.client.errors import error_class
from seglog.harness.local_cluster import LOCAL_DEFAULTS
from seglog.harness.node_process import NodeProcess, spawn_node
from seglog.harness.ports import free_port, quorum_ports
from seglog.proto import client_pb2 as pb
from seglog.proto import client_pb2_grpc

NODE_IDS = (1, 2, 3)
WAIT_S = 60.0  # bound on every wait for the cluster
TOPIC_CONFIGS = {"min.insync.replicas": "2"}
UnknownTopicOrPartitionError = error_class("UNKNOWN_TOPIC_OR_PARTITION")


def wait_for(what: str, probe: Callable[[], Any], timeout_s: float = WAIT_S) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if value is not None:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s}s: {what}")
        time.sleep(0.05)


# --- a node under cProfile -------------------------------------------------------------------

# Runs `seglog node` with a cProfile.Profile per thread; merged into $SEGLOG_BENCH_PROFILE
# at exit (threads still running then, such as gRPC's poller, are left out).
PROFILED_NODE = r"""
import atexit, cProfile, os, pstats, sys, threading, time
out = os.environ["SEGLOG_BENCH_PROFILE"]
# CPU time per thread: wall time would charge GIL waits to whatever a thread was running.
timer = time.thread_time if os.environ.get("SEGLOG_BENCH_PROFILE_CLOCK") != "wall" else None
profiles = []
lock = threading.Lock()
original_run = threading.Thread.run
def run(self):
    p = cProfile.Profile(timer) if timer else cProfile.Profile()
    p.enable()
    try:
        original_run(self)
    finally:
        p.disable()
        with lock:
            profiles.append(p)
threading.Thread.run = run
main_profile = cProfile.Profile(timer) if timer else cProfile.Profile()
main_profile.enable()
def dump():
    main_profile.disable()
    stats = pstats.Stats(main_profile)
    with lock:
        for p in profiles:
            stats.add(p)
    stats.dump_stats(out)
atexit.register(dump)
from seglog.cli.main import main
sys.exit(main(sys.argv[1:]))
"""



class ProfiledNode(NodeProcess):
    """A NodeProcess that runs under PROFILED_NODE when given a `profile_path`."""

    profile_path: Path | None = None
    # Over the environment the node starts with (a benchmark's PYTHONPATH of a compiled
    # build, bench/build_compiled.py).
    extra_env: dict[str, str] | None = None

    def start(self, timeout_s: float = WAIT_S) -> ProfiledNode:
        if self.profile_path is None and not self.extra_env:
            super().start(timeout_s)
            return self
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **(self.extra_env or {})}
        args: tuple[str, ...] = ("-m", "seglog.cli")
        if self.profile_path is not None:
            env["SEGLOG_BENCH_PROFILE"] = str(self.profile_path)
            args = ("-c", PROFILED_NODE)
        self.proc, _ = spawn_node(self.config_path, self.log_path, env, args)
        self.wait_healthy(timeout_s)
        return self


def profile_report(paths: Sequence[Path], top: int, what: str, detail: str) -> list[str]:
    """The profiles at `paths` merged: the `top` functions by own time, then by
    cumulative time, each under a header line `--- WHAT (DETAIL, top N by KEY) ---`."""
    lines: list[str] = []
    for key in ("tottime", "cumulative"):
        out = io.StringIO()
        stats = pstats.Stats(*[str(p) for p in paths], stream=out)
        stats.sort_stats(key).print_stats(top)
        text = out.getvalue().splitlines()
        for i, line in enumerate(text):
            if "ncalls" in line:
                text = text[i:]
                break
        lines.append(f"--- {what} ({detail}, top {top} by {key}) ---")
        lines.extend(line for line in text if line.strip())
    return lines


def report_profiles(profile_dir: Path, top: int) -> list[str]:
    """The cluster's node profiles (node-*.prof in `profile_dir`) merged."""
    paths = sorted(profile_dir.glob("node-*.prof"))
    if not paths:
        return [f"(no profile written in {profile_dir})"]
    return profile_report(paths, top, "node profiles", f"{len(paths)} nodes merged")


# --- three nodes -----------------------------------------------------------------------------


class Cluster:
    """Three node processes with pre-chosen ports (optionally under cProfile)."""

    def __init__(
        self,
        root: Path,
        overrides: dict[str, str],
        profile_dir: Path | None,
        env: dict[str, str] | None = None,
    ) -> None:
        """`env`: over the nodes' environment (ours)."""
        ports, controller_ports, voters = quorum_ports(NODE_IDS)
        overrides = {"controller.quorum.voters": voters, **overrides}
        self.nodes: dict[int, ProfiledNode] = {
            i: ProfiledNode(root, i, ports[i], overrides, controller_ports[i]) for i in NODE_IDS
        }
        for i, node in self.nodes.items():
            node.profile_path = None if profile_dir is None else profile_dir / f"node-{i}.prof"
            node.extra_env = env
        self._channels: dict[int, grpc.Channel] = {}
        self.anomalies: list[str] = []

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes.values())

    def pids(self) -> list[int]:
        return [n.proc.pid for n in self.nodes.values() if n.proc is not None]

    def channel(self, node_id: int) -> grpc.Channel:
        channel = self._channels.get(node_id)
        if channel is None:
            channel = grpc.insecure_channel(self.nodes[node_id].bootstrap, CHANNEL_OPTIONS)
            self._channels[node_id] = channel
        return channel

    def running(self) -> list[int]:
        return [i for i, n in self.nodes.items() if n.proc is not None and n.proc.poll() is None]

    def metadata(self, node_id: int, topics: list[str] | None) -> pb.MetadataResponse | None:
        request = pb.MetadataRequest(all_topics=topics is None, topics=topics or [])
        try:
            return client_pb2_grpc.SegLogStub(self.channel(node_id)).Metadata(request, timeout=2)
        except grpc.RpcError:
            return None

    def partitions(self, node_id: int, topic: str) -> dict[int, pb.PartitionMetadata] | None:
        md = self.metadata(node_id, [topic])
        if md is None:
            return None
        for t in md.topics:
            if t.name == topic and not t.error_code:
                return {p.partition: p for p in t.partitions}
        return None

    def healthy(self, topics: Sequence[str] = ()) -> bool | None:
        """Every node up and unfenced everywhere; every partition of `topics` with a
        leader and its full ISR, the same leader epoch on every node."""
        if len(self.running()) != len(NODE_IDS):
            return None
        for i in NODE_IDS:
            md = self.metadata(i, [])
            if md is None or {b.node_id: b.fenced for b in md.brokers} != dict.fromkeys(
                NODE_IDS, False
            ):
                return None
        for topic in topics:
            views = [self.partitions(i, topic) for i in NODE_IDS]
            if any(not v for v in views):
                return None
            shapes = set()
            for v in views:
                assert v is not None
                if any(
                    sorted(p.isr_nodes) != list(NODE_IDS) or p.leader_id < 0 for p in v.values()
                ):
                    return None
                shapes.add(tuple(sorted((k, p.leader_id, p.leader_epoch) for k, p in v.items())))
            if len(shapes) != 1:
                return None
        return True

    def gone_everywhere(self, topic: str) -> bool | None:
        for i in NODE_IDS:
            md = self.metadata(i, [topic])
            if md is None or any(t.name == topic and not t.error_code for t in md.topics):
                return None
        return True

    def leaders(self, topic: str) -> dict[int, int]:
        v = self.partitions(self.running()[0], topic)
        assert v is not None, topic
        return {p: m.leader_id for p, m in v.items()}

    def controller(self) -> int:
        md = self.metadata(self.running()[0], [])
        return md.controller_id if md is not None else -1

    def create_topics(self, names: Sequence[str], partitions: int) -> None:
        with Admin(self.bootstrap, request_timeout_ms=int(WAIT_S * 1000)) as admin:
            admin.create_topics([NewTopic(n, partitions, 3, TOPIC_CONFIGS) for n in names])
        wait_for(f"{list(names)} fully replicated", lambda: self.healthy(names))

    def delete_topics(self, names: Sequence[str]) -> None:
        with Admin(self.bootstrap, request_timeout_ms=int(WAIT_S * 1000)) as admin:
            for n in names:
                try:
                    admin.delete_topics([n])
                except UnknownTopicOrPartitionError as e:
                    # Seen once after the throughput phases: an attempt that went through
                    # was sent again somewhere on the way. The topic is gone either way.
                    say(f"  WARNING: deleting {n}: {e}")
                    self.anomalies.append(f"delete {n}: {e}")
        for n in names:
            wait_for(f"{n} deleted everywhere", lambda n=n: self.gone_everywhere(n))

    def event_after(
        self, nodes: Sequence[int], event: str, after: float, **match: object
    ) -> float | None:
        """The earliest wall-clock ts of `event` at or after `after` in the nodes' logs
        whose fields match."""
        found: list[float] = []
        for i in nodes:
            try:
                text = self.nodes[i].log_path.read_text(errors="replace")
            except OSError:
                continue
            for line in text.splitlines():
                if f'"event":"{event}"' not in line:
                    continue
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                ts = float(e.get("ts", 0))
                if ts >= after - 0.0005 and all(e.get(k) == v for k, v in match.items()):
                    found.append(ts)
        return min(found) if found else None

    def stop_all(self) -> list[int]:
        for n in self.nodes.values():  # all at once: the shutdowns overlap
            if n.proc is not None and n.proc.poll() is None:
                n.proc.send_signal(signal.SIGTERM)
        codes = [n.stop(timeout_s=60) for n in self.nodes.values()]
        for c in self._channels.values():
            c.close()
        self._channels.clear()
        return codes


def local_overrides() -> dict[str, str]:
    """The benchmarks' cluster settings: `seglog local up`'s timings, RF=3,
    min.insync.replicas=2, and no log retention pass during a run."""
    local = LOCAL_DEFAULTS
    return {
        "broker.session.timeout.ms": local["broker.session.timeout.ms"],
        "broker.heartbeat.interval.ms": local["broker.heartbeat.interval.ms"],
        "controller.quorum.election.timeout.ms": local["controller.quorum.election.timeout.ms"],
        "replica.fetch.backoff.ms": local["replica.fetch.backoff.ms"],
        "replica.lag.time.max.ms": local["replica.lag.time.max.ms"],
        "min.insync.replicas": "2",
        "default.replication.factor": "3",
        "log.initial.task.delay.ms": "30000",
    }


def add_kafka_listeners(cluster: Cluster) -> str:
    """A PLAINTEXT listener beside gRPC on every node (before it starts), as `seglog
    local up` has; the Kafka bootstrap list."""
    ports = {i: free_port() for i in NODE_IDS}
    for i, n in cluster.nodes.items():
        lines = [
            line + f",PLAINTEXT://127.0.0.1:{ports[i]}" if line.startswith("listeners=") else line
            for line in n.config_path.read_text().splitlines()
        ]
        n.config_path.write_text("\n".join(lines) + "\n")
    return ",".join(f"127.0.0.1:{p}" for p in ports.values())


# What `seglog local up` runs beside local_overrides()'s timings: the Kafka listener on
# one event loop per node, followers fetching over Kafka's protocol from it.
LOCAL_UP_DATA_PATH = {
    "kafka.listener.model": "event-loop",
    "replica.fetch.protocol": LOCAL_DEFAULTS["replica.fetch.protocol"],
}


def start_local_up(
    root: Path,
    extra: dict[str, str] | None = None,
    profile_dir: Path | None = None,
    env: dict[str, str] | None = None,
) -> tuple[Cluster, str]:
    """Three nodes as `seglog local up` runs them (local_overrides(), LOCAL_UP_DATA_PATH,
    a PLAINTEXT listener beside gRPC on each; `extra` settings over those; `env` over
    their environment), started and all unfenced: the cluster and its Kafka bootstrap
    list. Stopped again on failure."""
    overrides = {**local_overrides(), **LOCAL_UP_DATA_PATH, **(extra or {})}
    cluster = Cluster(root, overrides, profile_dir, env)
    bootstrap = add_kafka_listeners(cluster)
    try:
        for i in NODE_IDS:
            cluster.nodes[i].start(timeout_s=WAIT_S)
        wait_for("three unfenced brokers", cluster.healthy)
    except BaseException:
        cluster.stop_all()
        raise
    return cluster, bootstrap
