"""Partition reassignment (KIP-455) on four real nodes (each a broker and a Raft voter):
a topic on brokers {1, 2, 3} moves to {2, 3, 4} with `seglog reassign-partitions`
while an idempotent acks=-1 Producer keeps writing. Afterwards every acknowledged
record is read back exactly where its acknowledgement said, the new replicas' files
are byte-identical and end at the high watermark, and node 1 no longer holds the
partitions. The Kafka listener's AlterPartitionReassignments/ListPartitionReassignments
are checked on the same cluster."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from test_replication import (
    TOPIC_CONFIGS,
    Cluster,
    Load,
    next_offset_of,
    number_of,
    read_all,
)

from seglog.cli.main import main as seglog_main
from seglog.client.admin import Admin, NewTopic
from seglog.proto import client_pb2 as pb

TOPIC = "moving"
PARTITIONS = 3
TARGETS = {0: [2, 3, 4], 1: [3, 4, 2], 2: [4, 2, 3]}


class FourNodes(Cluster):
    node_ids = (1, 2, 3, 4)

    def healthy(self, topics: list[str]) -> bool | None:
        """Every node up and unfenced; each partition of `topics` led, its ISR its
        whole replica set, and seen alike by every node."""
        if not self.all_up_and_unfenced():
            return None
        for topic in topics:
            views = [self.partitions(i, topic) for i in self.node_ids]
            if any(not v for v in views):
                return None
            shapes = set()
            for v in views:
                assert v is not None
                for p in v.values():
                    if p.leader_id < 0 or sorted(p.isr_nodes) != sorted(p.replica_nodes):
                        return None
                shapes.add(
                    tuple(
                        (k, p.leader_id, p.leader_epoch, tuple(p.replica_nodes))
                        for k, p in sorted(v.items())
                    )
                )
            if len(shapes) != 1:
                return None
        return True


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[FourNodes]:
    c = FourNodes(tmp_path / "cluster")
    try:
        # Nodes 1-3 first (a quorum of the four voters), the topic on them, then 4.
        starters = [threading.Thread(target=c.start, args=(i,)) for i in (1, 2, 3)]
        for t in starters:
            t.start()
        for t in starters:
            t.join()
        yield c
    finally:
        c.stop_all()


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = seglog_main(list(args))
    return code, capsys.readouterr().out


def test_move_a_topic_to_other_brokers_under_load(
    cluster: FourNodes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bootstrap = cluster.nodes[1].bootstrap
    three = dict.fromkeys((1, 2, 3), False)
    cluster.wait("brokers 1-3 unfenced", lambda: True if cluster.brokers(1) == three else None)
    with Admin(bootstrap, request_timeout_ms=30_000) as admin:
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, TOPIC_CONFIGS)])
    cluster.start(4)
    cluster.heal([TOPIC])
    before = cluster.partitions(1, TOPIC)
    assert before is not None
    assert all(sorted(p.replica_nodes) == [1, 2, 3] for p in before.values())

    # --generate proposes a placement on the given brokers only.
    move = tmp_path / "topics.json"
    move.write_text(json.dumps({"version": 1, "topics": [{"topic": TOPIC}]}))
    code, out = run_cli(
        capsys,
        "reassign-partitions",
        "--bootstrap-server",
        bootstrap,
        "--generate",
        "--topics-to-move-json-file",
        str(move),
        "--broker-list",
        "2,3,4",
    )
    assert code == 0, out
    lines = out.splitlines()
    current = json.loads(lines[lines.index("Current partition replica assignment") + 1])
    proposed = json.loads(lines[lines.index("Proposed partition reassignment configuration") + 1])
    assert {(e["partition"], tuple(sorted(e["replicas"]))) for e in current["partitions"]} == {
        (p, (1, 2, 3)) for p in range(PARTITIONS)
    }
    assert {(e["partition"], tuple(sorted(e["replicas"]))) for e in proposed["partitions"]} == {
        (p, (2, 3, 4)) for p in range(PARTITIONS)
    }

    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "version": 1,
                "partitions": [
                    {"topic": TOPIC, "partition": p, "replicas": r} for p, r in TARGETS.items()
                ],
            }
        )
    )
    verify = ("reassign-partitions", "--bootstrap-server", bootstrap, "--reassignment-json-file")
    with Load(cluster, TOPIC, PARTITIONS) as load:
        for p in range(PARTITIONS):
            load.wait_progress(cluster, p)
        code, out = run_cli(capsys, *verify, str(plan), "--execute", "--throttle", "50000000")
        assert code == 0, out
        assert "The inter-broker throttle limit was set to 50000000 B/s" in out
        assert "Save this to use as the --reassignment-json-file option during rollback" in out
        assert f"Successfully started partition reassignment(s) for {TOPIC}-0" in out

        def completed() -> str | None:
            # The node asked may not have applied the start yet: until it has, it
            # shows the old replicas with no reassignment running (exit status 1).
            code, text = run_cli(capsys, *verify, str(plan), "--verify")
            return text if code == 0 and "still in progress" not in text else None

        done = cluster.wait("the reassignment to complete", completed)
        for p in range(PARTITIONS):
            assert f"Reassignment of partition {TOPIC}-{p} is completed." in done
        # Done: --verify removed the throttles --throttle set.
        assert "Clearing broker-level throttles on brokers 1,2,3,4" in done
        assert f"Clearing topic-level throttles on topic {TOPIC}" in done
        with Admin(bootstrap, request_timeout_ms=30_000) as admin:

            def cleared() -> bool | None:
                # The node asked applies the cleared configs from the metadata a moment
                # after the controller committed them.
                configs = admin.describe_configs(TOPIC)
                names = ("leader.replication.throttled.replicas",
                         "follower.replication.throttled.replicas")  # fmt: skip
                return all(configs[n].value == "" for n in names) or None

            cluster.wait("the topic's throttled replicas cleared", cleared)
            assert "leader.replication.throttled.rate" not in admin.describe_broker_configs("4")
        # The load goes on against the new replicas (and the moved leaders).
        for p in range(PARTITIONS):
            load.wait_progress(cluster, p)
    code, out = run_cli(capsys, "reassign-partitions", "--bootstrap-server", bootstrap, "--list")
    assert code == 0 and "No partition reassignments found." in out

    cluster.heal([TOPIC])
    assert not cluster.crashes(), cluster.crashes()[0]
    after = cluster.partitions(2, TOPIC)
    assert after is not None
    assert {p: list(m.replica_nodes) for p, m in after.items()} == TARGETS
    assert all(m.leader_id in (2, 3, 4) for m in after.values())

    assert not load.send_errors, load.send_errors[:5]
    assert not load.failed, sorted(load.failed.items())[:5]
    assert load.sent == len(load.acked) > 0
    hw, records = read_all(cluster, TOPIC, PARTITIONS)
    where = {number_of(v): k for k, v in records.items()}
    assert len(where) == len(records), "a value stored twice"
    lost = sorted(n for n in load.acked if where.get(n) != load.acked[n])
    assert not lost, f"{len(lost)} acknowledged records lost or moved, e.g. {lost[:10]}"

    def identical() -> bool | None:
        for p in range(PARTITIONS):
            copies = [cluster.replica_bytes(i, TOPIC, p) for i in (2, 3, 4)]
            if any(c is None for c in copies) or len(set(copies)) != 1:
                return None
            assert copies[0] is not None
            if next_offset_of(copies[0]) != hw[p]:
                return None
            if cluster.replica_bytes(1, TOPIC, p) is not None:
                return None  # node 1 deletes the partitions it no longer holds
        return True

    cluster.wait(f"identical replicas on 2, 3, 4 ending at the HW {hw}, none on 1", identical)

    # Dynamic broker configs through the controller quorum: a new cluster-wide
    # default reaches every node's topic configs without a restart.
    with Admin(cluster.nodes[2].bootstrap, request_timeout_ms=30_000) as admin:
        # (retention.bytes: the topic overrides retention.ms itself)
        admin.alter_broker_configs("", set={"log.retention.bytes": "777777"})

    def retention_everywhere() -> bool | None:
        request = pb.DescribeConfigsRequest()
        request.resources.add(type=pb.TOPIC, name=TOPIC, config_names=["retention.bytes"])
        for i in cluster.node_ids:
            try:
                r = cluster.stub(i).DescribeConfigs(request, timeout=2)
            except grpc.RpcError:
                return None
            if [c.value for c in r.results[0].configs] != ["777777"]:
                return None
        return True

    cluster.wait("retention.bytes 777777 on every node", retention_everywhere)
