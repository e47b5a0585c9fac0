"""Real node processes on loopback (three by default), each a broker and a Raft voter
of the controller quorum (KRaft mode), for the tests and benchmarks that drive a whole
cluster (tests/node/test_quorum.py, tests/node/test_replication.py): ports chosen up front so
every node knows the voters, the processes, their logs, and gRPC probes that never
raise. Each test module subclasses `ThreeNodeCluster` with its own settings and probes.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TypeVar

import grpc

from seglog.harness.node_process import NodeProcess
from seglog.harness.ports import quorum_ports
from seglog.proto import client_pb2 as pb
from seglog.proto import client_pb2_grpc

T = TypeVar("T")
ClusterT = TypeVar("ClusterT", bound="ThreeNodeCluster")
NODE_IDS = (1, 2, 3)


def topic_of(md: pb.MetadataResponse | None, name: str) -> pb.TopicMetadata | None:
    """The topic `name` in a Metadata answer, unless it is missing or has an error."""
    if md is None:
        return None
    for t in md.topics:
        if t.name == name and not t.error_code:
            return t
    return None


class ThreeNodeCluster:
    """Three NodeProcess voters with pre-chosen ports, and probes that never raise.

    Subclasses set the class attributes: `session_timeout_ms` (broker.session.timeout.ms),
    `wait_s` (the default bound of `wait`), `start_timeout_s` (each node's start, until
    its health check passes) and `tail_lines` (of each node's log in a timeout message).
    """

    node_ids: tuple[int, ...] = NODE_IDS  # every one a broker and a voter
    session_timeout_ms: int = 1500
    wait_s: float = 20.0
    start_timeout_s: float = 30.0
    tail_lines: int = 25

    def __init__(self, root: Path, overrides: Mapping[str, str] | None = None) -> None:
        """`overrides`: further node properties, on top of the quorum's."""
        self.ports, self.controller_ports, voters = quorum_ports(self.node_ids)
        props = {
            "controller.quorum.voters": voters,
            "broker.session.timeout.ms": str(self.session_timeout_ms),
            "broker.heartbeat.interval.ms": "300",
            **(overrides or {}),
        }
        self.nodes = {
            i: NodeProcess(root, i, self.ports[i], props, self.controller_ports[i])
            for i in self.node_ids
        }
        self._channels: dict[int, grpc.Channel] = {}

    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes.values())

    # processes

    def running(self) -> list[int]:
        return [i for i, n in self.nodes.items() if n.proc is not None and n.proc.poll() is None]

    def start(self, node_id: int) -> None:
        self.nodes[node_id].start(timeout_s=self.start_timeout_s)

    def start_stopped(self) -> None:
        """Start every node whose process is not running (never started, stopped, or
        exited on its own), side by side: one at a time, the first waited two election
        timeouts for a quorum that could not form before the next one started."""
        ids = []
        for i, n in self.nodes.items():
            if n.proc is None or n.proc.poll() is not None:
                n.proc = None
                ids.append(i)
        errors: list[BaseException] = []

        def start(node_id: int) -> None:
            try:
                self.start(node_id)
            except BaseException as e:  # noqa: BLE001 - raised below, after the others
                errors.append(e)

        starters = [threading.Thread(target=start, args=(i,)) for i in ids]
        for t in starters:
            t.start()
        for t in starters:
            t.join()  # bounded: each start gives up after start_timeout_s
        if errors:
            raise errors[0]

    def start_all(self) -> None:
        """Start the nodes (side by side); each is up when its health check passes."""
        self.start_stopped()

    def serve_tests(self: ClusterT) -> Iterator[ClusterT]:
        """A pytest fixture's body (`yield from cluster.serve_tests()`): the nodes
        started, the cluster handed to the tests, then no node may have crashed, and
        the nodes stopped whatever happened."""
        try:
            self.start_all()
            yield self
            assert not self.crashes(), self.crashes()
        finally:
            self.stop_all()

    def stop_all(self) -> None:
        for n in self.nodes.values():  # all at once: the shutdowns overlap
            if n.proc is not None and n.proc.poll() is None:
                n.proc.send_signal(signal.SIGTERM)
        for n in self.nodes.values():
            n.stop()
        for c in self._channels.values():
            c.close()
        self._channels.clear()

    # the nodes' logs

    def tails(self, lines: int | None = None) -> str:
        n_lines = self.tail_lines if lines is None else lines
        return "\n".join(
            f"--- node {i} log tail ---\n{n.tail(n_lines)}" for i, n in self.nodes.items()
        )

    def log_events(self, node_id: int, event: str) -> list[dict[str, object]]:
        """The node's structured (JSON) log lines of `event`, oldest first."""
        out = []
        for line in self.nodes[node_id].log_path.read_text(errors="replace").splitlines():
            if f'"event":"{event}"' in line:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
        return out

    def crashes(self) -> list[str]:
        """Uncaught exceptions that ended a thread of some node (printed by Python's
        threading excepthook into the node's log), metadata a node failed to apply, and
        an interpreter that aborted (a controller process's exit once did, on a lock a
        daemon thread held): always a bug."""
        out = []
        for i, n in self.nodes.items():
            try:
                lines = n.log_path.read_text(errors="replace").splitlines()
            except OSError:
                continue
            for k, line in enumerate(lines):
                if line.startswith("Exception in thread"):
                    tb = [x for x in lines[k : k + 40] if not x.startswith("{")]
                    out.append(f"node {i}: " + "\n".join(tb))
                elif '"event":"metadata_listener_failed"' in line:
                    out.append(f"node {i}: {line}")
                elif line.startswith("Fatal Python error"):
                    out.append(f"node {i}: " + "\n".join(lines[k : k + 6]))
        return out

    # RPCs

    def channel(self, node_id: int) -> grpc.Channel:
        channel = self._channels.get(node_id)
        if channel is None:
            channel = self._channels[node_id] = grpc.insecure_channel(self.nodes[node_id].bootstrap)
        return channel

    def controller_channel(self, node_id: int) -> grpc.Channel:
        """The node's CONTROLLER listener (its controller process)."""
        key = -node_id
        channel = self._channels.get(key)
        if channel is None:
            address = f"127.0.0.1:{self.controller_ports[node_id]}"
            channel = self._channels[key] = grpc.insecure_channel(address)
        return channel

    def stub(self, node_id: int) -> client_pb2_grpc.SegLogStub:
        return client_pb2_grpc.SegLogStub(self.channel(node_id))

    def metadata(self, node_id: int, topics: list[str] | None = None) -> pb.MetadataResponse | None:
        """`node_id`'s Metadata of `topics` (None: all of them); None: no answer."""
        request = pb.MetadataRequest(all_topics=topics is None, topics=topics or [])
        try:
            return self.stub(node_id).Metadata(request, timeout=2)
        except grpc.RpcError:
            return None

    def brokers(self, node_id: int) -> dict[int, bool] | None:
        """broker id -> fenced, from `node_id`'s Metadata."""
        md = self.metadata(node_id, [])
        return None if md is None else {b.node_id: b.fenced for b in md.brokers}

    # waiting

    def all_up_and_unfenced(self) -> bool:
        """Every node running, and three unfenced brokers in every node's Metadata."""
        return len(self.running()) == len(self.node_ids) and all(
            self.brokers(i) == dict.fromkeys(self.node_ids, False) for i in self.node_ids
        )

    def check_while_waiting(self, what: str) -> None:
        """Called by `wait` after each probe that said "not yet": raise to stop waiting
        early. Here: nothing."""

    def wait(self, what: str, probe: Callable[[], T | None], timeout_s: float | None = None) -> T:
        """Until `probe` returns something other than None or False (at most
        `timeout_s`, default `wait_s`): a probe that is a comparison says "not yet"
        with False."""
        bound = self.wait_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + bound
        while True:
            value = probe()
            if value is not None and value is not False:
                return value
            self.check_while_waiting(what)
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {bound}s: {what}\n{self.tails()}")
            time.sleep(0.1)
