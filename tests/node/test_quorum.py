"""The controller quorum with real node processes: three nodes on loopback, each a
Raft voter for the cluster metadata (KRaft mode) and a broker.

One three-node cluster serves the whole module; before each test it is brought back
to full health (every node running, a leader everyone agrees on, three unfenced
brokers in every node's Metadata), so one failing test does not cascade.

Covered: failover after SIGKILL of the active controller (new leader in a higher term,
topic creation works again, the killed node rejoins and catches up on what it missed),
topic creation through a follower, leaderless RF=1 partitions while their node is down,
controlled shutdown on SIGTERM, `seglog cluster --describe` and `seglog topics
--describe` against the quorum, and a restart of every node (metadata log replay).

Every wait is bounded (WAIT_S); nothing asserts on timing.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from seglog.client.admin import LATEST_TIMESTAMP, Admin, NewTopic
from seglog.client.consumer import TopicPartition
from seglog.client.producer import Producer
from seglog.harness.cluster import NODE_IDS, ThreeNodeCluster, topic_of
from seglog.harness.node_process import NodeProcess
from seglog.harness.ports import free_port
from seglog.proto import client_pb2 as pb
from seglog.proto import cluster_pb2 as cpb
from seglog.proto import cluster_pb2_grpc, errors_pb2

E = errors_pb2.ErrorCode

WAIT_S = 20.0
SESSION_TIMEOUT_MS = 1500


# --- the cluster ------------------------------------------------------------------------


class Cluster(ThreeNodeCluster):
    """The three voters (seglog.harness.cluster), with quorum and topic probes."""

    session_timeout_ms = SESSION_TIMEOUT_MS
    wait_s = WAIT_S

    # RPCs

    def quorum(self, node_id: int) -> cpb.DescribeQuorumResponse | None:
        try:
            return cluster_pb2_grpc.ControllerStub(self.channel(node_id)).DescribeQuorum(
                cpb.DescribeQuorumRequest(), timeout=2
            )
        except grpc.RpcError:
            return None

    def topic_configs(self, node_id: int, topic: str) -> dict[str, str] | None:
        """The topic's config overrides as `node_id` sees them (None: no answer)."""
        request = pb.DescribeConfigsRequest()
        request.resources.add(type=pb.TOPIC, name=topic)
        try:
            r = self.stub(node_id).DescribeConfigs(request, timeout=2)
        except grpc.RpcError:
            return None
        result = r.results[0]
        if result.error_code:
            return None
        return {c.name: c.value for c in result.configs if not c.is_default}

    def create_topic(
        self,
        node_id: int,
        name: str,
        partitions: int,
        rf: int,
        configs: dict[str, str] | None = None,
    ) -> pb.CreateTopicResult:
        """Raw CreateTopics to `node_id` (a follower forwards it to the controller)."""
        request = pb.CreateTopicsRequest(timeout_ms=15_000)
        request.topics.add(
            name=name, num_partitions=partitions, replication_factor=rf, configs=configs or {}
        )
        return self.stub(node_id).CreateTopics(request, timeout=20).topics[0]

    # cluster-wide views

    def agreed_leader(self, among: list[int] | None = None) -> tuple[int, int] | None:
        """(leader, term) when every running node (or `among`) names the same running
        leader, which itself says it leads in that term."""
        nodes = among if among is not None else self.running()
        answers = {i: self.quorum(i) for i in nodes}
        if any(a is None for a in answers.values()):
            return None
        leaders = {a.leader_id for a in answers.values() if a is not None}
        if len(leaders) != 1:
            return None
        leader = leaders.pop()
        if leader not in nodes:
            return None
        own = answers[leader]
        assert own is not None
        if own.role != "leader" or any(a.term != own.term for a in answers.values() if a):
            return None
        return leader, own.term

    def healthy(self) -> tuple[int, int] | None:
        if not self.all_up_and_unfenced():
            return None
        return self.agreed_leader()

    def wait_healthy(self) -> tuple[int, int]:
        self.start_stopped()
        return self.wait("a leader and three unfenced brokers on every node", self.healthy)


@pytest.fixture(scope="module")
def _quorum(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    cluster = Cluster(tmp_path_factory.mktemp("quorum"))
    try:
        cluster.start_all()
        cluster.wait_healthy()
        yield cluster
    finally:
        cluster.stop_all()


@pytest.fixture
def cluster(_quorum: Cluster) -> Cluster:
    """The module's cluster, back at full health."""
    _quorum.wait_healthy()
    return _quorum


def seglog_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "seglog.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


CLUSTER_LINE = re.compile(
    r"^Node: (\d+)\tAddress: ([\d.]+:\d+)\tFenced: (true|false)\tRole: ([a-z/-]+)$"
)


def parse_cluster_describe(stdout: str) -> tuple[str, str, str, dict[int, tuple[str, bool, str]]]:
    """(cluster id, controller, term, {node: (address, fenced, role)})."""
    lines = stdout.strip().splitlines()
    assert lines[0].startswith("ClusterId: "), stdout
    m = re.fullmatch(r"Controller: (\S+)\tTerm: (\S+)", lines[1])
    assert m, stdout
    nodes: dict[int, tuple[str, bool, str]] = {}
    for line in lines[2:]:
        n = CLUSTER_LINE.match(line)
        assert n, (line, stdout)
        nodes[int(n[1])] = (n[2], n[3] == "true", n[4])
    return lines[0][len("ClusterId: ") :], m[1], m[2], nodes


# --- (b) creation through a follower ----------------------------------------------------


def test_topic_created_through_follower_is_visible_everywhere(cluster: Cluster) -> None:
    leader, _term = cluster.agreed_leader() or (-1, -1)
    follower = next(i for i in NODE_IDS if i != leader)
    configs = {"retention.ms": "-1", "segment.bytes": "1048576"}
    result = cluster.create_topic(follower, "via-follower", 3, 3, configs)
    assert result.error_code == 0, result
    assert result.topic_id

    # The follower answers once it applied the record itself: its Metadata has it now.
    here = topic_of(cluster.metadata(follower, ["via-follower"]), "via-follower")
    assert here is not None and here.topic_id == result.topic_id

    for i in NODE_IDS:
        t = cluster.wait(
            f"via-follower in node {i}'s Metadata",
            lambda i=i: topic_of(cluster.metadata(i, ["via-follower"]), "via-follower"),
        )
        assert t.topic_id == result.topic_id
        assert sorted(p.partition for p in t.partitions) == [0, 1, 2]
        for p in t.partitions:
            assert sorted(p.replica_nodes) == [1, 2, 3]
            assert p.leader_id in NODE_IDS
        assert cluster.topic_configs(i, "via-follower") == configs

    # The same name again, through the other follower: rejected by the controller.
    other = next(i for i in NODE_IDS if i not in (leader, follower))
    again = cluster.create_topic(other, "via-follower", 1, 1)
    assert again.error_code == E.TOPIC_ALREADY_EXISTS, again


def test_rf3_records_are_replicated_and_become_visible(cluster: Cluster) -> None:
    leader, _term = cluster.agreed_leader() or (-1, -1)
    with Admin(cluster.nodes[leader].bootstrap) as admin:
        admin.create_topics([NewTopic("replicated", 1, 3, {"retention.ms": "-1"})])
    with Producer(cluster.nodes[leader].bootstrap, acks=-1, linger_ms=0) as producer:
        futures = [producer.send("replicated", value=b"r%d" % i, partition=0) for i in range(3)]
        producer.flush(timeout=30)
    assert all(f.is_done and f.succeeded() for f in futures), [f.exception for f in futures]

    def visible() -> bool | None:
        with Admin(cluster.nodes[leader].bootstrap, request_timeout_ms=5000) as admin:
            r = admin.list_offsets({TopicPartition("replicated", 0): LATEST_TIMESTAMP})
        return True if next(iter(r.values())).offset == 3 else None

    cluster.wait("the high watermark of replicated-0 reaches 3", visible)
    for i in NODE_IDS:
        sizes = [
            f.stat().st_size
            for d in cluster.nodes[i].log_dirs
            for f in d.glob("replicated-0/*.log")
        ]
        assert sum(sizes) > 0, f"node {i} holds no data of replicated-0"


def test_a_follower_answers_broker_heartbeats_with_not_controller(cluster: Cluster) -> None:
    leader, _term = cluster.agreed_leader() or (-1, -1)
    follower = next(i for i in NODE_IDS if i != leader)
    stub = cluster_pb2_grpc.ControllerStub(cluster.controller_channel(follower))
    answers = {
        what: stub.BrokerHeartbeat(
            cpb.BrokerHeartbeatRequest(broker_id=broker, broker_epoch=epoch), timeout=5
        ).error_code
        for what, broker, epoch in (("unknown broker", 99, 1), ("old epoch", leader, 1))
    }
    assert answers == {w: E.NOT_CONTROLLER for w in answers}, {
        w: E.Name(c) for w, c in answers.items()
    }


# --- (e) the CLI against the quorum -----------------------------------------------------


def test_cli_cluster_and_topics_describe(cluster: Cluster) -> None:
    leader, term = cluster.agreed_leader() or (-1, -1)
    follower = next(i for i in NODE_IDS if i != leader)
    bootstrap = cluster.nodes[follower].bootstrap

    r = seglog_cli("cluster", "--bootstrap-server", bootstrap, "--describe")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    cluster_id, controller, shown_term, nodes = parse_cluster_describe(r.stdout)
    assert cluster_id == "seglog-cluster"
    assert controller == str(leader)
    assert shown_term == str(term)
    assert nodes == {
        i: (cluster.nodes[i].bootstrap, False, "leader" if i == leader else "follower")
        for i in NODE_IDS
    }

    r = seglog_cli(
        "topics",
        "--bootstrap-server",
        bootstrap,
        "--create",
        "--topic",
        "cli-quorum",
        "--partitions",
        "2",
        "--replication-factor",
        "3",
        "--config",
        "retention.ms=-1",
    )
    assert (r.returncode, r.stdout, r.stderr) == (0, "Created topic cli-quorum.\n", "")

    # Describe through each node: the same answer everywhere once each applied it.
    outputs = []
    for i in NODE_IDS:
        cluster.wait(
            f"cli-quorum on node {i}",
            lambda i=i: topic_of(cluster.metadata(i, ["cli-quorum"]), "cli-quorum"),
        )
        r = seglog_cli(
            "topics",
            "--bootstrap-server",
            cluster.nodes[i].bootstrap,
            "--describe",
            "--topic",
            "cli-quorum",
        )
        assert r.returncode == 0, r.stderr
        outputs.append(r.stdout)
    lines = outputs[0].strip().splitlines()
    assert len(lines) == 3, outputs[0]
    assert re.fullmatch(
        r"Topic: cli-quorum\tTopicId: \S+\tPartitionCount: 2\tReplicationFactor: 3\t"
        r"Configs: retention.ms=-1",
        lines[0],
    ), lines[0]
    for p, line in enumerate(lines[1:]):
        m = re.fullmatch(
            rf"\tTopic: cli-quorum\tPartition: {p}\tLeader: (\d)\tReplicas: ([\d,]+)\t"
            r"Isr: ([\d,]+)\tLeaderEpoch: \d+(\t.*)?",  # more fields may follow
            line,
        )
        assert m, line
        replicas = [int(x) for x in m[2].split(",")]
        assert sorted(replicas) == [1, 2, 3]
        assert int(m[1]) in replicas and m[1] in m[3].split(",")
    # Leaders may move (a fetch can shrink an ISR), but the header lines agree.
    assert {o.splitlines()[0] for o in outputs} == {lines[0]}

    # Nothing listening: one line, non-zero exit.
    r = seglog_cli(
        "cluster",
        "--bootstrap-server",
        f"127.0.0.1:{free_port()}",
        "--describe",
        "--request-timeout-ms",
        "1000",
    )
    assert r.returncode == 1 and r.stdout == ""
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.startswith("seglog cluster: NO_BROKERS_AVAILABLE: ")


def test_cli_metadata_quorum_status_and_replication(cluster: Cluster) -> None:
    """kafka-metadata-quorum's two views, as the quorum leader sees it, asked through a
    follower."""
    leader, term = cluster.agreed_leader() or (-1, -1)
    follower = next(i for i in NODE_IDS if i != leader)
    bootstrap = cluster.nodes[follower].bootstrap
    r = seglog_cli("metadata-quorum", "--bootstrap-server", bootstrap, "describe", "--status")
    assert r.returncode == 0, r.stderr
    status = dict(line.split(":", 1) for line in r.stdout.splitlines())
    status = {k: v.strip() for k, v in status.items()}
    assert status["ClusterId"] == "seglog-cluster"
    assert status["LeaderId"] == str(leader)
    assert int(status["LeaderEpoch"]) >= term
    assert int(status["HighWatermark"]) > 0
    assert status["CurrentVoters"] == "[1,2,3]"
    assert status["CurrentObservers"] == "[]"
    assert 0 <= int(status["MaxFollowerLag"]) < 100

    before_ms = int(time.time() * 1000)
    r = seglog_cli("metadata-quorum", "--bootstrap-server", bootstrap, "describe", "--replication")
    assert r.returncode == 0, r.stderr
    header, *rows = [line.split() for line in r.stdout.splitlines()]
    assert header == [
        "NodeId",
        "LogEndOffset",
        "Lag",
        "LastFetchTimestamp",
        "LastCaughtUpTimestamp",
        "Status",
    ]
    assert [int(row[0]) for row in rows][0] == leader and len(rows) == 3
    assert sorted(int(row[0]) for row in rows) == list(NODE_IDS)
    assert [row[5] for row in rows] == ["Leader", "Follower", "Follower"]
    for row in rows:
        assert int(row[1]) > 0 and 0 <= int(row[2]) < 100
        # Heartbeats every election timeout / 5: heard from within the last seconds.
        assert before_ms - 10_000 < int(row[3]) <= before_ms + 10_000


def test_cli_metadata_quorum_on_a_single_node_says_there_is_none(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path).start()
    try:
        r = seglog_cli(
            "metadata-quorum", "--bootstrap-server", node.bootstrap, "describe", "--status"
        )
    finally:
        node.stop()
    assert r.returncode == 1
    assert "single-node mode" in r.stderr and "Traceback" not in r.stderr


def test_cli_cluster_describe_single_node(tmp_path: Path) -> None:
    """Without controller.quorum.voters there is no Controller service: the node is
    its own controller and there is no term."""
    with NodeProcess(tmp_path / "single", node_id=7) as node:
        r = seglog_cli("cluster", "--bootstrap-server", node.bootstrap, "--describe")
    assert r.returncode == 0, r.stderr
    _cluster_id, controller, term, nodes = parse_cluster_describe(r.stdout)
    assert (controller, term) == ("7", "n/a")
    assert nodes == {7: (node.bootstrap, False, "n/a")}


# --- (c) RF=1 partitions while their node is down ----------------------------------------


def test_rf1_partitions_go_leaderless_and_come_back(cluster: Cluster) -> None:
    leader, _term = cluster.agreed_leader() or (-1, -1)
    with Admin(cluster.nodes[leader].bootstrap) as admin:
        admin.create_topics([NewTopic("rf1", 6, 1, {"retention.ms": "-1"})])
    t = cluster.wait("rf1 everywhere", lambda: topic_of(cluster.metadata(leader, ["rf1"]), "rf1"))
    led: dict[int, list[int]] = {i: [] for i in NODE_IDS}
    for p in t.partitions:
        assert len(p.replica_nodes) == 1 and p.leader_id == p.replica_nodes[0]
        led[p.leader_id].append(p.partition)
    # The victim is not the controller, so only the partitions are affected.
    victim = max((i for i in NODE_IDS if i != leader), key=lambda i: len(led[i]))
    mine = sorted(led[victim])
    assert mine, led
    survivor = next(i for i in NODE_IDS if i != victim)

    with Producer(cluster.nodes[survivor].bootstrap, acks=-1, linger_ms=0) as producer:
        futures = [producer.send("rf1", value=f"v{p}".encode(), partition=p) for p in mine]
        producer.flush(timeout=30)
    assert all(f.is_done and f.succeeded() for f in futures), [f.exception for f in futures]

    cluster.nodes[victim].kill()

    def leaderless() -> bool | None:
        md = cluster.metadata(survivor, ["rf1"])
        t = topic_of(md, "rf1")
        if md is None or t is None:
            return None
        fenced = {b.node_id: b.fenced for b in md.brokers}
        leaders = {p.partition: p.leader_id for p in t.partitions}
        if not fenced.get(victim) or any(leaders[p] != -1 for p in mine):
            return None
        # The other partitions kept their leaders.
        assert all(leaders[p] >= 0 for p in leaders if p not in mine), leaders
        return True

    cluster.wait(f"node {victim}'s RF=1 partitions {mine} leaderless", leaderless)

    # The CLI shows the dead node fenced and unreachable meanwhile.
    survivor_bootstrap = cluster.nodes[survivor].bootstrap
    r = seglog_cli("cluster", "--bootstrap-server", survivor_bootstrap, "--describe")
    assert r.returncode == 0, r.stderr
    _cid, controller, _t, nodes = parse_cluster_describe(r.stdout)
    assert controller == str(leader)
    assert nodes[victim] == (cluster.nodes[victim].bootstrap, True, "unreachable")

    cluster.start(victim)

    def led_again() -> bool | None:
        md = cluster.metadata(survivor, ["rf1"])
        t = topic_of(md, "rf1")
        if md is None or t is None:
            return None
        fenced = {b.node_id: b.fenced for b in md.brokers}
        leaders = {p.partition: p.leader_id for p in t.partitions}
        ok = fenced.get(victim) is False and all(leaders[p] == victim for p in mine)
        return True if ok else None

    cluster.wait(f"node {victim} leads {mine} again", led_again)
    with Admin(cluster.nodes[survivor].bootstrap) as admin:
        offsets = admin.list_offsets({TopicPartition("rf1", p): LATEST_TIMESTAMP for p in mine})
    assert {tp.partition: r.offset for tp, r in offsets.items()} == {p: 1 for p in mine}


def test_cli_leader_election_preferred_and_unclean(cluster: Cluster) -> None:
    """kafka-leader-election on three nodes: a preferred election moves leadership back
    to the first replica; an unclean one gives a partition whose only in-sync replica
    is gone a leader from outside the ISR (unclean.leader.election.enable is off)."""
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic("elect", 1, 3), NewTopic("elect-u", 1, 2)])

    def when(topic: str, test: Callable[[pb.PartitionMetadata], bool]) -> Callable[[], Any]:
        """A probe: the partition once `test` holds, else None (keep waiting)."""

        def probe() -> pb.PartitionMetadata | None:
            t = topic_of(cluster.metadata(cluster.running()[0], [topic]), topic)
            p = t.partitions[0] if t is not None and t.partitions else None
            return p if p is not None and test(p) else None

        return probe

    first = cluster.wait("elect led", when("elect", lambda p: p.leader_id > 0))
    preferred = first.replica_nodes[0]
    other = next(i for i in NODE_IDS if i != preferred)
    # Leadership moves off the preferred replica while it restarts.
    cluster.nodes[preferred].stop()
    cluster.wait("leadership moved", when("elect", lambda p: p.leader_id not in (-1, preferred)))
    cluster.start(preferred)
    cluster.wait(
        "preferred back in the ISR",
        when("elect", lambda p: preferred in p.isr_nodes and p.leader_id != preferred),
    )
    args = ("leader-election", "--bootstrap-server", cluster.nodes[other].bootstrap)
    r = seglog_cli(*args, "--election-type", "preferred", "--topic", "elect", "--partition", "0")
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    assert r.stdout == "Successfully completed leader election (PREFERRED) for partitions elect-0\n"
    cluster.wait("preferred leads", when("elect", lambda p: p.leader_id == preferred))
    r = seglog_cli(*args, "--election-type", "PREFERRED", "--topic", "elect", "--partition", "0")
    assert r.stdout == "Valid replica already elected for partitions elect-0\n", r.stdout

    # Unclean: stop the follower (fenced, it leaves the ISR), write past it, stop the
    # leader (the last ISR member: leaderless), bring the follower back.
    p = cluster.wait("elect-u led", when("elect-u", lambda q: q.leader_id > 0))
    leader = p.leader_id
    follower = next(r for r in p.replica_nodes if r != leader)
    cluster.nodes[follower].stop()
    cluster.wait(
        "follower out of the ISR", when("elect-u", lambda q: list(q.isr_nodes) == [leader])
    )
    with Producer(cluster.nodes[leader].bootstrap, acks=1, linger_ms=0) as producer:
        producer.send("elect-u", b"only-on-the-leader").get(timeout=30)
    cluster.nodes[leader].stop()
    cluster.start(follower)
    cluster.wait("elect-u leaderless", when("elect-u", lambda q: q.leader_id == -1))
    # An unclean election picks only a live, unfenced replica: wait until the restarted
    # follower has registered and been unfenced (otherwise ELIGIBLE_LEADERS_NOT_AVAILABLE).
    cluster.wait(
        "the restarted follower unfenced",
        lambda: (cluster.brokers(cluster.running()[0]) or {}).get(follower) is False or None,
    )
    third = next(i for i in NODE_IDS if i not in (leader, follower))
    args = ("leader-election", "--bootstrap-server", cluster.nodes[third].bootstrap)
    r = seglog_cli(*args, "--election-type", "preferred", "--topic", "elect-u", "--partition", "0")
    assert r.returncode == 1, r.stdout
    assert "for partition: elect-u-0: PREFERRED_LEADER_NOT_AVAILABLE" in r.stdout
    assert "1 replica(s) could not be elected" in r.stderr
    r = seglog_cli(*args, "--election-type", "unclean", "--topic", "elect-u", "--partition", "0")
    assert (r.returncode, r.stderr) == (0, ""), r.stderr
    assert r.stdout == "Successfully completed leader election (UNCLEAN) for partitions elect-u-0\n"
    q = cluster.wait("unclean leader", when("elect-u", lambda q: q.leader_id > 0))
    assert q.leader_id == follower and list(q.isr_nodes) == [follower]
    cluster.start(leader)


# --- (d) controlled shutdown -------------------------------------------------------------


def test_sigterm_controlled_shutdown_fences_at_once(cluster: Cluster) -> None:
    leader, _term = cluster.agreed_leader() or (-1, -1)
    with Admin(cluster.nodes[leader].bootstrap) as admin:
        admin.create_topics([NewTopic("ctl-shutdown", 6, 3, {"retention.ms": "-1"})])
    cluster.wait(
        "ctl-shutdown on the controller",
        lambda: topic_of(cluster.metadata(leader, ["ctl-shutdown"]), "ctl-shutdown"),
    )
    victim = next(i for i in NODE_IDS if i != leader)
    fenced_before = len(cluster.log_events(leader, "broker_fenced"))

    assert cluster.nodes[victim].stop() == 0  # SIGTERM, waits for the exit

    # The node asked the controller to fence it before it exited, and the controller
    # answered after applying the fence: no waiting for the session to expire.
    md = cluster.metadata(leader, ["ctl-shutdown"])
    assert md is not None
    assert {b.node_id: b.fenced for b in md.brokers}[victim] is True
    t = topic_of(md, "ctl-shutdown")
    assert t is not None
    for p in t.partitions:
        assert p.leader_id not in (victim, -1), p
        assert victim not in p.isr_nodes, p
    # No session-timeout fencing was needed for it.
    timeouts = [
        e
        for e in cluster.log_events(leader, "broker_fenced")[fenced_before:]
        if e.get("broker") == victim and e.get("reason") == "session_timeout"
    ]
    assert timeouts == []

    cluster.start(victim)
    cluster.wait(
        f"node {victim} unfenced after restart",
        lambda: True if cluster.brokers(leader) == {1: False, 2: False, 3: False} else None,
    )


def test_a_restarted_node_serves_metadata_only_once_caught_up(cluster: Cluster) -> None:
    """Topics created while a node was down are in its first Metadata answer after it
    is back (Kafka's broker waits for the metadata log's high watermark before it
    serves): its old image must never answer."""
    leader, _term = cluster.agreed_leader() or (-1, -1)
    victim = next(i for i in NODE_IDS if i != leader)
    assert cluster.nodes[victim].stop() == 0
    names = [f"while-down-{k}" for k in range(5)]
    with Admin(cluster.nodes[leader].bootstrap) as admin:
        admin.create_topics([NewTopic(n, 2, 2) for n in names])
    for n in names:
        cluster.wait(
            f"{n} on the controller", lambda n=n: topic_of(cluster.metadata(leader, [n]), n)
        )
    cluster.start(victim)  # returns once its health check says SERVING
    md = cluster.metadata(victim, names)
    assert md is not None
    assert [n for n in names if topic_of(md, n) is None] == [], md
    assert cluster.log_events(victim, "metadata_caught_up"), cluster.tails()


# --- (a) failover of the active controller ------------------------------------------------


def test_sigkill_of_active_controller_fails_over_and_rejoins(cluster: Cluster) -> None:
    old_leader, old_term = cluster.agreed_leader() or (-1, -1)
    survivors = [i for i in NODE_IDS if i != old_leader]

    cluster.nodes[old_leader].kill()

    def new_leader() -> tuple[int, int] | None:
        agreed = cluster.agreed_leader(survivors)
        return agreed if agreed and agreed[1] > old_term else None

    leader, term = cluster.wait("a new controller among the survivors", new_leader)
    assert leader != old_leader and term > old_term

    # The new controller does not give the dead one's broker a whole fresh session: it
    # counts from when it last heard from it, so the fence follows the takeover in well
    # under a session (a fresh session would put it SESSION_TIMEOUT_MS after it).
    def fenced_after_takeover() -> float | None:
        active = cluster.log_events(leader, "became_active_controller")
        if not active:
            return None
        took_over = float(active[-1]["ts"])  # type: ignore[arg-type]
        fenced = [
            float(e["ts"])  # type: ignore[arg-type]
            for e in cluster.log_events(leader, "broker_fenced")
            if e["broker"] == old_leader and float(e["ts"]) >= took_over  # type: ignore[arg-type]
        ]
        return fenced[0] - took_over if fenced else None

    gap = cluster.wait(f"node {leader} fences broker {old_leader}", fenced_after_takeover)
    assert gap < SESSION_TIMEOUT_MS / 1000 * 2 / 3, (
        f"broker {old_leader} was fenced {gap:.2f}s after node {leader} took over"
    )

    # Creation works again, through the survivor that is not the new controller.
    via = next(i for i in survivors if i != leader)
    configs = {"retention.ms": "-1", "cleanup.policy": "compact"}

    errors: list[str] = []

    def created() -> str | None:
        """The new topic's id once a CreateTopics through `via` succeeded."""
        try:
            r = cluster.create_topic(via, "after-failover", 2, 2, configs)
        except grpc.RpcError as e:
            errors.append(str(e.code()))
            return None
        if r.error_code == E.TOPIC_ALREADY_EXISTS and errors:
            # An attempt that timed out on our side had gone through after all.
            t = topic_of(cluster.metadata(via, ["after-failover"]), "after-failover")
            return t.topic_id if t is not None else None
        if r.error_code:
            errors.append(f"{E.Name(r.error_code)}: {r.error_message}")
            return None
        return str(r.topic_id)

    topic_id = cluster.wait("CreateTopics through a survivor", created)
    for i in survivors:
        t = cluster.wait(
            f"after-failover on node {i}",
            lambda i=i: topic_of(cluster.metadata(i, ["after-failover"]), "after-failover"),
        )
        assert t.topic_id == topic_id

    # The killed node restarts, re-registers and catches up on what it missed.
    cluster.start(old_leader)
    cluster.wait(
        f"node {old_leader} unfenced again",
        lambda: True if cluster.brokers(leader) == {1: False, 2: False, 3: False} else None,
    )

    def follows() -> cpb.DescribeQuorumResponse | None:
        q = cluster.quorum(old_leader)
        return q if q is not None and q.leader_id == leader else None

    view = cluster.wait(f"node {old_leader} follows the new controller", follows)
    assert (view.leader_id, view.term, view.role) == (leader, term, "follower")
    t = cluster.wait(
        f"after-failover in node {old_leader}'s Metadata",
        lambda: topic_of(cluster.metadata(old_leader, ["after-failover"]), "after-failover"),
    )
    assert t.topic_id == topic_id
    assert cluster.topic_configs(old_leader, "after-failover") == configs
    md = cluster.metadata(old_leader, [])
    assert md is not None and md.controller_id == leader


# --- (f) restart of every node: metadata log replay -----------------------------------------


def _snapshot(cluster: Cluster, node_id: int) -> dict[str, tuple[str, list[list[int]], dict]]:
    """topic -> (id, replicas per partition, config overrides) as `node_id` sees it."""
    md = cluster.metadata(node_id)
    assert md is not None
    out = {}
    for t in md.topics:
        assert t.error_code == 0, t
        replicas = [list(p.replica_nodes) for p in sorted(t.partitions, key=lambda p: p.partition)]
        configs = cluster.topic_configs(node_id, t.name)
        assert configs is not None, t.name
        out[t.name] = (t.topic_id, replicas, configs)
    return out


def test_restart_all_nodes_replays_the_metadata_log(cluster: Cluster) -> None:
    leader, _term = cluster.agreed_leader() or (-1, -1)
    with Admin(cluster.nodes[leader].bootstrap) as admin:
        admin.create_topics(
            [
                NewTopic("durable", 3, 3, {"retention.ms": "-1", "segment.bytes": "1048576"}),
                NewTopic("durable-rf1", 3, 1, {"retention.ms": "-1"}),
                NewTopic("doomed", 1, 1),
            ]
        )
        admin.alter_configs("durable", set={"max.message.bytes": "2000000"}, delete=[])
        admin.alter_configs("durable", set={}, delete=["segment.bytes"])
        admin.delete_topics(["doomed"])
    with Producer(cluster.nodes[leader].bootstrap, acks=-1, linger_ms=0) as producer:
        futures = [
            producer.send(topic, value=b"x%d" % i, partition=i % 3)
            for topic in ("durable", "durable-rf1")
            for i in range(9)
        ]
        producer.flush(timeout=30)
    assert all(f.is_done and f.succeeded() for f in futures), [f.exception for f in futures]

    def all_agree() -> dict | None:
        views = [_snapshot(cluster, i) for i in NODE_IDS]
        return views[0] if all(v == views[0] for v in views) else None

    before = cluster.wait("every node applied the changes", all_agree)
    assert "doomed" not in before
    assert before["durable"][2] == {"retention.ms": "-1", "max.message.bytes": "2000000"}
    assert {"durable", "durable-rf1"} <= before.keys()

    for i in NODE_IDS:
        assert cluster.nodes[i].stop() == 0
    cluster.start_all()
    cluster.wait_healthy()

    # Each node rebuilt its metadata from its own log (no snapshot this early).
    for i in NODE_IDS:
        loaded = cluster.log_events(i, "quorum_loaded")
        assert len(loaded) >= 2 and int(str(loaded[-1]["entries"])) > 0, loaded[-1:]
        assert _snapshot(cluster, i) == before, f"node {i}"

    def all_led() -> bool | None:
        md = cluster.metadata(leader, ["durable", "durable-rf1"])
        ok = md is not None and all(
            not t.error_code and all(p.leader_id >= 0 for p in t.partitions) for t in md.topics
        )
        return True if ok else None

    cluster.wait("every partition has a leader again", all_led)
    specs = {
        TopicPartition(topic, p): LATEST_TIMESTAMP
        for topic in ("durable", "durable-rf1")
        for p in range(3)
    }
    with Admin(cluster.nodes[leader].bootstrap) as admin:
        offsets = admin.list_offsets(specs)
    assert {(tp.topic, tp.partition): r.offset for tp, r in offsets.items()} == {
        (tp.topic, tp.partition): 3 for tp in specs
    }


# --- an admin request during the election ------------------------------------------------


def test_create_during_the_election_does_not_block_it(cluster: Cluster) -> None:
    old_leader, old_term = cluster.agreed_leader() or (-1, -1)
    survivors = [i for i in NODE_IDS if i != old_leader]
    via = survivors[0]
    outcome: dict[str, object] = {}

    def create() -> None:
        try:
            outcome["result"] = cluster.create_topic(via, "during-election", 1, 1)
        except grpc.RpcError as e:
            outcome["error"] = e.code()

    cluster.nodes[old_leader].kill()
    sender = threading.Thread(target=create, name="create-during-election")
    sender.start()
    try:

        def new_leader() -> tuple[int, int] | None:
            agreed = cluster.agreed_leader(survivors)
            return agreed if agreed and agreed[1] > old_term else None

        cluster.wait("a new controller while a CreateTopics waits on a survivor", new_leader)
        sender.join(WAIT_S)
        result = outcome.get("result")
        assert isinstance(result, pb.CreateTopicResult) and result.error_code == 0, outcome
    finally:
        # The survivors' worker threads may stay taken for long: start afresh.
        for n in cluster.nodes.values():
            n.kill()
        sender.join(10)
