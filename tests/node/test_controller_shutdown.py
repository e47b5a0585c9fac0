"""The active controller's node shuts down: only its own broker may be fenced.

A controller process stops its listener (and so every broker's heartbeats) a second
or more before its Raft leadership ends. Until 2026-11-29 it went on judging
sessions meanwhile, and with a session shorter than that second (the chaos
clusters' 600 ms) it fenced a healthy broker on its way out, on every shutdown or
halt of its node (docs/chaos-reports/2026-11-29-controller-shutdown-fence/README.md).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from seglog.controller.metadata_records import BrokerFenceRecord, decode_entry
from seglog.harness.cluster import NODE_IDS, ThreeNodeCluster
from seglog.node.controller.raft_storage import read_entries
from seglog.proto import cluster_pb2 as cpb
from seglog.proto import cluster_pb2_grpc

SESSION_TIMEOUT_MS = 600  # the chaos clusters' (chaos/targets.py)


class Cluster(ThreeNodeCluster):
    session_timeout_ms = SESSION_TIMEOUT_MS
    wait_s = 30.0

    def active_controller(self, among: list[int]) -> int | None:
        """The leader every node of `among` names, if it is one of them."""
        leaders = set()
        for i in among:
            try:
                q = cluster_pb2_grpc.ControllerStub(self.channel(i)).DescribeQuorum(
                    cpb.DescribeQuorumRequest(), timeout=2
                )
            except Exception:  # noqa: BLE001 - not answering yet
                return None
            leaders.add(q.leader_id)
        leader = leaders.pop() if len(leaders) == 1 else None
        return leader if leader in among else None

    def fences_since(self, node_id: int, since_ms: int) -> list[tuple[int, int]]:
        """(term, broker) of every BrokerFenceRecord(fenced=True) appended to
        `node_id`'s metadata log at or after `since_ms`."""
        out = []
        for log_dir in self.nodes[node_id].log_dirs:
            part = log_dir / "__cluster_metadata-0"
            if not part.is_dir():
                continue
            for entry, appended_ms in read_entries(part):
                if appended_ms < since_ms or not entry.data:
                    continue
                for r in decode_entry(entry.data):
                    if isinstance(r, BrokerFenceRecord) and r.fenced:
                        out.append((entry.term, r.broker_id))
        return out


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(
        Path(tmp_path_factory.mktemp("ctl-shutdown")), {"broker.heartbeat.interval.ms": "100"}
    )
    try:
        c.start_all()
        c.wait("three unfenced brokers", lambda: True if c.all_up_and_unfenced() else None)
        yield c
    finally:
        c.stop_all()


@pytest.mark.parametrize("round_", [1, 2])
def test_the_active_controllers_shutdown_fences_only_its_own_broker(
    cluster: Cluster, round_: int
) -> None:
    cluster.start_stopped()
    cluster.wait("three unfenced brokers", lambda: True if cluster.all_up_and_unfenced() else None)
    leader = cluster.wait("an active controller", lambda: cluster.active_controller(list(NODE_IDS)))
    survivors = [i for i in NODE_IDS if i != leader]
    since_ms = int(time.time() * 1000)

    assert cluster.nodes[leader].stop() == 0  # SIGTERM: the controlled shutdown

    cluster.wait("a new active controller", lambda: cluster.active_controller(survivors))
    # Well past a session: a late fence by the stopped controller would be committed
    # by now (the survivors hold every entry it could still commit).
    time.sleep(3 * SESSION_TIMEOUT_MS / 1000)
    fences = cluster.fences_since(survivors[0], since_ms)
    assert leader in {b for _t, b in fences}, (fences, cluster.tails())
    wrongly = [(t, b) for t, b in fences if b != leader]
    assert wrongly == [], (
        f"round {round_}: stopping node {leader} (the active controller) fenced the "
        f"healthy broker(s) {wrongly}\n{cluster.tails()}"
    )
    assert cluster.crashes() == []
