"""seglog's Consumer in consumer groups, end to end on three real nodes (each with
its gRPC and Kafka listeners): members share the partitions disjointly, rebalance
when one leaves or joins or is killed, commits survive restarts, `seglog
consumer-groups` shows lag = log end - commit, and seglog consumers and
confluent-kafka consumers share one group. Plus the consumer's behaviour when no
node can be reached (no cluster needed)."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from seglog.cli import main as cli
from seglog.client.admin import Admin, NewTopic
from seglog.client.cluster import TopicPartition
from seglog.client.consumer import Consumer
from seglog.client.errors import KafkaError, KafkaTimeoutError
from seglog.client.producer import Producer
from seglog.harness.kafka_cluster import KafkaCluster
from seglog.harness.ports import free_port

SERVER_PIECE = "seglog.node.groups.grpc_servicer"
HAS_SERVER = importlib.util.find_spec("seglog.node.groups") is not None and (
    importlib.util.find_spec(SERVER_PIECE) is not None
)
needs_server = pytest.mark.skipif(
    not HAS_SERVER,
    reason=f"the nodes' group coordinator gRPC service ({SERVER_PIECE}, branch `groups`) "
    "is not in this tree",
)
TP = TopicPartition
# Short sessions so a killed member is noticed quickly; no initial rebalance delay.
GROUP_OVERRIDES = {
    "group.min.session.timeout.ms": "1000",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "6",
    "offsets.topic.replication.factor": "3",
}
SESSION_MS = 4000
HEARTBEAT_MS = 500


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    if not HAS_SERVER:
        pytest.skip(f"no group coordinator service ({SERVER_PIECE})")
    c = KafkaCluster(tmp_path_factory.mktemp("groups-cluster"), GROUP_OVERRIDES)
    try:
        c.start_all()
        yield c
        assert not c.crashes(), c.crashes()
    finally:
        c.stop_all()


def create_topic(cluster: KafkaCluster, name: str, partitions: int, records: int = 0) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, 3)])
    if records:
        producer = Producer(cluster.bootstrap, linger_ms=2)
        try:
            for i in range(records):
                producer.send(name, value=f"{i}".encode(), partition=i % partitions)
            producer.flush()
        finally:
            producer.close()


class WaitTimedOut(Exception):
    """A wait that ran out, told apart from a failed assertion."""


def wait_for(what: str, probe: Callable[[], object], timeout_s: float = 30.0) -> object:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.1)
    raise WaitTimedOut(f"timed out waiting for {what}")


def start_one_by_one(members: list[Member]) -> None:
    """Each member starts once the ones before hold partitions, so a test starts from
    a known group (the order of joins is not what these tests are about)."""
    for i, m in enumerate(members):
        m.start()
        try:
            wait_for(f"member {i} to hold partitions", lambda m=m: m.snapshot(), 30)
        except WaitTimedOut as e:
            with m.lock:
                raise WaitTimedOut(f"{e}: error {m.error!r}, metrics {m.metrics}") from None


class Member(threading.Thread):
    """One seglog Consumer polling in its own thread (a Consumer is single-threaded),
    recording what it got, its assignment after each poll and its listener calls."""

    def __init__(self, bootstrap: str, group: str, topic: str, **config: object) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.group = group
        self.topic = topic
        self.config = config
        self.stop_event = threading.Event()
        self.lock = threading.Lock()
        self.assigned: set[TopicPartition] = set()
        self.records: list[tuple[int, int]] = []
        self.events: list[tuple[str, frozenset[TopicPartition]]] = []
        self.error: BaseException | None = None
        self.metrics: dict[str, float] = {}
        self.started_polling = threading.Event()

    def on_partitions_revoked(self, tps: set[TopicPartition]) -> None:
        with self.lock:
            self.events.append(("revoked", frozenset(tps)))

    def on_partitions_assigned(self, tps: set[TopicPartition]) -> None:
        with self.lock:
            self.events.append(("assigned", frozenset(tps)))

    def on_partitions_lost(self, tps: set[TopicPartition]) -> None:
        with self.lock:
            self.events.append(("lost", frozenset(tps)))

    def run(self) -> None:
        try:
            consumer = Consumer(
                bootstrap_servers=self.bootstrap,
                group_id=self.group,
                auto_offset_reset="earliest",
                session_timeout_ms=SESSION_MS,
                heartbeat_interval_ms=HEARTBEAT_MS,
                auto_commit_interval_ms=200,
                **self.config,  # type: ignore[arg-type]
            )
            consumer.subscribe([self.topic], listener=self)
            try:
                while not self.stop_event.is_set():
                    batch = consumer.poll(timeout_ms=100)
                    with self.lock:
                        for tp, recs in batch.items():
                            self.records.extend((tp.partition, r.offset) for r in recs)
                        self.assigned = consumer.assignment()
                        self.metrics = consumer.metrics()
                    self.started_polling.set()
            finally:
                consumer.close()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e

    def snapshot(self) -> set[TopicPartition]:
        with self.lock:
            return set(self.assigned)

    def stop(self) -> None:
        self.stop_event.set()
        if self.ident is None:
            return  # never started
        self.join(timeout=30)
        assert not self.is_alive(), "the member did not stop"
        assert self.error is None, repr(self.error)


def split_evenly(members: list[Member], partitions: int, topic: str) -> bool:
    """Every member holds a disjoint share and together they hold every partition."""
    shares = [m.snapshot() for m in members]
    everything = {TP(topic, p) for p in range(partitions)}
    union = set().union(*shares)
    disjoint = sum(len(s) for s in shares) == len(union)
    return disjoint and union == everything and all(shares)


def stop_all(members: list[Member]) -> None:
    for m in members:
        m.stop_event.set()
    for m in members:
        m.stop()


# --- membership and rebalancing -----------------------------------------------------------


@needs_server
@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_three_members_split_twelve_partitions_and_rebalance(cluster, strategy) -> None:
    topic = f"orders-{strategy}"
    create_topic(cluster, topic, 12, records=1200)
    group = f"g-split-{strategy}"
    members = [
        Member(cluster.bootstrap, group, topic, partition_assignment_strategy=strategy)
        for _ in range(3)
    ]
    try:
        start_one_by_one(members)
        wait_for("three disjoint shares of 12", lambda: split_evenly(members, 12, topic))
        assert sorted(len(m.snapshot()) for m in members) == [4, 4, 4]
        leaving = members.pop(0)
        leaving.stop()
        wait_for("two members holding all 12", lambda: split_evenly(members, 12, topic))
        joining = Member(cluster.bootstrap, group, topic, partition_assignment_strategy=strategy)
        members.append(joining)
        start_one_by_one([joining])
        wait_for("three members again", lambda: split_evenly(members, 12, topic))
        everyone = [leaving, *members]
        wait_for(
            "every record consumed",
            lambda: len({r for m in everyone for r in m.records}) == 1200,
        )
    finally:
        stop_all(members)
    if strategy == "cooperative-sticky":
        # Incremental: the members that stayed never gave up a partition that did not
        # move, and were never told they lost any.
        for m in members[:2]:
            kinds = {kind for kind, _ in m.events}
            assert "lost" not in kinds, m.events
            revoked = set().union(*[tps for kind, tps in m.events if kind == "revoked"])
            assert len(revoked) < 12


@needs_server
def test_commits_survive_a_restart(cluster) -> None:
    topic = "commits"
    create_topic(cluster, topic, 2, records=100)
    group = "g-commits"
    first = Consumer(
        bootstrap_servers=cluster.bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
    )
    first.subscribe([topic])
    got: list[tuple[int, int]] = []
    deadline = time.monotonic() + 30
    while len(got) < 60 and time.monotonic() < deadline:
        for tp, recs in first.poll(timeout_ms=200, max_records=60 - len(got)).items():
            got.extend((tp.partition, r.offset) for r in recs)
    assert len(got) == 60
    positions = {tp: first.position(tp) for tp in first.assignment()}
    first.commit()
    assert {tp: first.committed(tp) for tp in positions} == positions
    done: list[object] = []
    first.commit_async(callback=lambda offsets, outcome: done.append(outcome))
    first.close()
    assert len(done) == 1 and not isinstance(done[0], Exception), done
    second = Consumer(
        bootstrap_servers=cluster.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
    )
    second.subscribe([topic])
    rest: list[tuple[int, int]] = []
    deadline = time.monotonic() + 30
    while len(rest) < 40 and time.monotonic() < deadline:
        for tp, recs in second.poll(timeout_ms=200).items():
            rest.extend((tp.partition, r.offset) for r in recs)
    second.close()  # auto-commits
    assert sorted(got + rest) == sorted((i % 2, i // 2) for i in range(100))
    with Admin(cluster.bootstrap) as admin:
        committed = admin.list_consumer_group_offsets(group)
    assert {tp: om.offset for tp, om in committed.items()} == {TP(topic, 0): 50, TP(topic, 1): 50}


@needs_server
def test_async_commits_land_in_call_order(cluster) -> None:
    """A node may serve concurrent calls in any order; the last commit must win."""
    topic = "ordered-commits"
    create_topic(cluster, topic, 1)
    tp = TP(topic, 0)
    consumer = Consumer(bootstrap_servers=cluster.bootstrap, group_id="g-ordered")
    try:
        consumer.assign([tp])
        consumer.pause(tp)
        consumer.commit({tp: 0})
        outcomes: list[object] = []
        for offset in range(1, 101):
            consumer.commit_async({tp: offset}, callback=lambda o, r: outcomes.append(r))
        deadline = time.monotonic() + 30
        while len(outcomes) < 100 and time.monotonic() < deadline:
            consumer.poll(timeout_ms=20)
        assert len(outcomes) == 100
        assert not [r for r in outcomes if isinstance(r, Exception)]
        assert consumer.committed(tp) == 100
    finally:
        consumer.close(autocommit=False)


def run_cli(*argv: str) -> tuple[int, str, str]:
    # A binary buffer under stdout: the console consumer writes records there.
    raw = io.BytesIO()
    out = io.TextIOWrapper(raw, encoding="utf-8")
    err = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(list(argv))
    out.flush()
    return code, raw.getvalue().decode(), err.getvalue()


def table(text: str) -> list[dict[str, str]]:
    lines = [line for line in text.splitlines() if line.strip()]
    header = lines[0].split()
    return [dict(zip(header, line.split(), strict=True)) for line in lines[1:]]


@needs_server
def test_consumer_groups_cli_describe_lag_reset_and_delete(cluster) -> None:
    topic = "lagging"
    create_topic(cluster, topic, 3, records=30)
    group = "g-cli"
    consumer = Consumer(
        bootstrap_servers=cluster.bootstrap,
        group_id=group,
        enable_auto_commit=False,
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
        client_id="lag-client",
    )
    consumer.subscribe([topic])
    wait_for(
        "an assignment", lambda: consumer.poll(timeout_ms=100) is not None and consumer.assignment()
    )
    commits = {TP(topic, 0): 3, TP(topic, 1): 7}
    consumer.commit(commits)
    bootstrap = cluster.bootstrap
    # While it is a member: offsets, members and state views name it.
    code, out, err = run_cli(
        "consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group
    )
    assert code == 0, err
    rows = {int(r["PARTITION"]): r for r in table(out)}
    assert set(rows) == {0, 1, 2}
    for p, r in rows.items():
        assert r["LOG-END-OFFSET"] == "10"
        if p in (0, 1):
            assert int(r["CURRENT-OFFSET"]) == commits[TP(topic, p)]
            assert int(r["LAG"]) == 10 - commits[TP(topic, p)]
        else:
            assert r["CURRENT-OFFSET"] == "-" and r["LAG"] == "-"
        assert r["CLIENT-ID"] == "lag-client" and r["CONSUMER-ID"].startswith("lag-client")
    code, out, _ = run_cli(
        "consumer-groups",
        "--bootstrap-server",
        bootstrap,
        "--describe",
        "--group",
        group,
        "--members",
        "--verbose",
    )
    (member,) = table(out)
    assert member["#PARTITIONS"] == "3" and member["ASSIGNMENT"] == f"{topic}(0,1,2)"
    code, out, _ = run_cli(
        "consumer-groups",
        "--bootstrap-server",
        bootstrap,
        "--describe",
        "--group",
        group,
        "--state",
    )
    lines = [line for line in out.splitlines() if line.strip()]
    assert lines[0].split() == [
        "GROUP",
        "COORDINATOR",
        "(ID)",
        "ASSIGNMENT-STRATEGY",
        "STATE",
        "#MEMBERS",
    ]
    assert lines[1].split()[-2:] == ["Stable", "1"] and lines[1].split()[-3] == "range"
    code, out, _ = run_cli("consumer-groups", "--bootstrap-server", bootstrap, "--list")
    assert group in out.split()
    # Resetting is refused while the group has a member.
    code, _, err = run_cli(
        "consumer-groups",
        "--bootstrap-server",
        bootstrap,
        "--reset-offsets",
        "--group",
        group,
        "--topic",
        topic,
        "--to-earliest",
        "--execute",
    )
    assert code == 1
    refused = (
        f"Assignments can only be reset if the group '{group}' is inactive, "
        f"but the current state is Stable."
    )
    assert refused in err
    code, _, err = run_cli(
        "consumer-groups", "--bootstrap-server", bootstrap, "--delete", "--group", group
    )
    assert code == 1 and "could not be deleted" in err
    consumer.close()
    code, _, err = run_cli(
        "consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group
    )
    assert "has no active members" in err
    # Reset: dry run changes nothing, execute commits; lag follows.
    code, out, _ = run_cli(
        "consumer-groups",
        "--bootstrap-server",
        bootstrap,
        "--reset-offsets",
        "--group",
        group,
        "--topic",
        f"{topic}:1",
        "--shift-by",
        "-5",
        "--dry-run",
    )
    assert code == 0 and table(out) == [
        {"GROUP": group, "TOPIC": topic, "PARTITION": "1", "NEW-OFFSET": "2"}
    ]
    with Admin(bootstrap) as admin:
        assert admin.list_consumer_group_offsets(group)[TP(topic, 1)].offset == 7
    code, out, err = run_cli(
        "consumer-groups",
        "--bootstrap-server",
        bootstrap,
        "--reset-offsets",
        "--group",
        group,
        "--all-topics",
        "--to-latest",
        "--execute",
    )
    assert code == 0, err
    with Admin(bootstrap) as admin:
        after = {tp: om.offset for tp, om in admin.list_consumer_group_offsets(group).items()}
    assert after == {TP(topic, 0): 10, TP(topic, 1): 10}
    code, out, _ = run_cli(
        "consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group
    )
    assert {r["LAG"] for r in table(out)} == {"0"}
    code, out, err = run_cli(
        "consumer-groups", "--bootstrap-server", bootstrap, "--delete", "--group", group
    )
    assert code == 0, err
    assert f"Deletion of requested consumer groups ('{group}') was successful." in out
    code, _, err = run_cli(
        "consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group
    )
    assert code == 1 and f"Consumer group '{group}' does not exist." in err


@needs_server
def test_console_consumer_with_a_group_resumes_where_it_stopped(cluster) -> None:
    topic = "console"
    create_topic(cluster, topic, 1, records=10)
    base = [
        "consume",
        "--bootstrap-server",
        cluster.bootstrap,
        "--topic",
        topic,
        "--group",
        "g-console",
    ]
    code, out, err = run_cli(*base, "--from-beginning", "--max-messages", "4")
    assert code == 0 and out.split() == ["0", "1", "2", "3"], err
    code, out, err = run_cli(*base, "--max-messages", "6")
    assert code == 0 and out.split() == ["4", "5", "6", "7", "8", "9"], err


@needs_server
@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_seglog_and_confluent_kafka_consumers_share_a_group(cluster, strategy) -> None:
    ck = pytest.importorskip("confluent_kafka")
    topic = f"mixed-{strategy}"
    create_topic(cluster, topic, 6, records=60)
    group = f"g-mixed-{strategy}"
    ours = Member(cluster.bootstrap, group, topic, partition_assignment_strategy=strategy)
    stop = threading.Event()
    theirs_assigned: set[TopicPartition] = set()
    theirs_records: list[tuple[int, int]] = []
    lock = threading.Lock()

    def run_theirs() -> None:
        c = ck.Consumer(
            {
                "bootstrap.servers": cluster.kafka_bootstrap,
                "group.id": group,
                "partition.assignment.strategy": strategy,
                "auto.offset.reset": "earliest",
                "session.timeout.ms": SESSION_MS,
                "heartbeat.interval.ms": HEARTBEAT_MS,
            }
        )
        c.subscribe([topic])
        try:
            while not stop.is_set():
                msg = c.poll(0.1)
                with lock:
                    theirs_assigned.clear()
                    theirs_assigned.update(TP(p.topic, p.partition) for p in c.assignment())
                    if msg is not None and msg.error() is None:
                        theirs_records.append((msg.partition(), msg.offset()))
        finally:
            c.close()

    theirs = threading.Thread(target=run_theirs, daemon=True)
    try:
        # One of each leads: ours assigns with range, librdkafka with cooperative-sticky.
        if strategy == "range":
            start_one_by_one([ours])
            theirs.start()
        else:
            theirs.start()
            wait_for("librdkafka's first assignment", lambda: theirs_assigned, 30)
            ours.start()

        def split() -> bool:
            with lock:
                other = set(theirs_assigned)
            mine = ours.snapshot()
            everything = {TP(topic, p) for p in range(6)}
            return bool(mine) and bool(other) and not (mine & other) and mine | other == everything

        wait_for("seglog and librdkafka sharing 6 partitions", split, timeout_s=45)
        wait_for(
            "all 60 records between them",
            lambda: len(set(ours.records) | set(theirs_records)) == 60,
            timeout_s=30,
        )
    finally:
        stop.set()
        theirs.join(timeout=30)
        ours.stop()


@needs_server
def test_a_member_that_stops_polling_leaves_and_comes_back(cluster) -> None:
    topic = "slow-poller"
    create_topic(cluster, topic, 4, records=40)
    group = "g-slow"
    other = Member(cluster.bootstrap, group, topic)
    lost: list[set[TopicPartition]] = []

    class Listener:
        def on_partitions_revoked(self, tps: set[TopicPartition]) -> None:
            pass

        def on_partitions_assigned(self, tps: set[TopicPartition]) -> None:
            pass

        def on_partitions_lost(self, tps: set[TopicPartition]) -> None:
            lost.append(set(tps))

    slow = Consumer(
        bootstrap_servers=cluster.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=HEARTBEAT_MS,
        max_poll_interval_ms=1500,
    )
    try:
        slow.subscribe([topic], listener=Listener())
        wait_for(
            "the slow member's partitions",
            lambda: slow.poll(timeout_ms=100) == {} and slow.assignment(),
            30,
        )
        other.start()  # the slow member keeps polling meanwhile, to rejoin in time
        deadline = time.monotonic() + 30
        while len(slow.assignment()) != 2 and time.monotonic() < deadline:
            slow.poll(timeout_ms=100)
        assert len(slow.assignment()) == 2
        leaves = slow.metrics()["poll-timeout-leave-total"]
        time.sleep(2.5)  # no poll() for longer than max_poll_interval_ms
        wait_for("the other member holding all 4", lambda: len(other.snapshot()) == 4, 15)
        assert slow.metrics()["poll-timeout-leave-total"] == leaves + 1
        # Its next poll reports the partitions lost and rejoins.
        deadline = time.monotonic() + 30
        while not (lost and len(slow.assignment()) == 2) and time.monotonic() < deadline:
            slow.poll(timeout_ms=100)
        assert lost and len(lost[0]) == 2
        assert len(slow.assignment()) == 2
    finally:
        slow.close()
        other.stop()


KILLABLE = textwrap.dedent(
    """
    import sys, time
    from seglog.client.consumer import Consumer
    c = Consumer(bootstrap_servers=sys.argv[1], group_id=sys.argv[2], auto_offset_reset="earliest",
                 session_timeout_ms=int(sys.argv[4]), heartbeat_interval_ms=500)
    c.subscribe([sys.argv[3]])
    while True:
        c.poll(timeout_ms=100)
        if c.assignment():
            print("assigned", flush=True)
    """
)


@needs_server
def test_a_killed_members_partitions_move_within_the_session_timeout(cluster) -> None:
    topic = "killed"
    create_topic(cluster, topic, 4)
    group = "g-killed"
    survivor = Member(cluster.bootstrap, group, topic)
    child = subprocess.Popen(
        [sys.executable, "-c", KILLABLE, cluster.bootstrap, group, topic, str(SESSION_MS)],
        stdout=subprocess.PIPE,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == b"assigned"
        start_one_by_one([survivor])
        wait_for("the two members to split 4", lambda: len(survivor.snapshot()) == 2, 30)
        os.kill(child.pid, signal.SIGKILL)
        killed_at = time.monotonic()
        wait_for("the survivor to hold all 4", lambda: len(survivor.snapshot()) == 4, 30)
        moved_after = time.monotonic() - killed_at
        # The coordinator expires the session, then the survivor rejoins at its next
        # heartbeat: within the session timeout plus a few heartbeats.
        assert moved_after < SESSION_MS / 1000 + 3, moved_after
    finally:
        child.kill()
        child.wait()
        survivor.stop()


def restart_static_member(cluster, topic: str) -> tuple[bool, list]:
    """Two static members split 4 partitions; one restarts within its session.
    (Whether it got its partitions back, the other's listener calls meanwhile.)"""
    create_topic(cluster, topic, 4)
    group = f"g-{topic}"
    a = Member(cluster.bootstrap, group, topic, group_instance_id="static-a")
    b = Member(cluster.bootstrap, group, topic, group_instance_id="static-b")
    members = [a, b]
    try:
        start_one_by_one(members)
        wait_for("a split of 4", lambda: split_evenly([a, b], 4, topic))
        before = a.snapshot()
        with b.lock:
            b_events = len(b.events)
        a.stop()  # a static member does not leave: its session keeps its place
        again = Member(cluster.bootstrap, group, topic, group_instance_id="static-a")
        members.append(again)
        again.start()
        wait_for("the restarted member polling", again.started_polling.wait, 15)
        kept = bool(wait_for("its share back", lambda: again.snapshot() == before, 15))
        time.sleep(1.0)
        with b.lock:
            return kept, b.events[b_events:]
    finally:
        stop_all([m for m in members if m is not a])


@needs_server
def test_a_static_member_restarting_within_its_session_keeps_its_partitions(cluster) -> None:
    kept, others = restart_static_member(cluster, "static")
    assert kept
    # Neither a restarted static follower nor a restarted static leader (told to skip
    # the assignment, KIP-814) makes the other member rebalance.
    assert others == [], others


@needs_server
def test_members_follow_the_coordinator_to_another_node(cluster) -> None:
    """Last among the cluster tests: it SIGKILLs the group's coordinator node (left
    down; the module's cluster ends after this test)."""
    topic = "failover"
    create_topic(cluster, topic, 6, records=60)
    group = "g-failover"
    members = [Member(cluster.bootstrap, group, topic) for _ in range(2)]
    try:
        start_one_by_one(members)
        wait_for("a split of 6", lambda: split_evenly(members, 6, topic))
        with Admin(cluster.bootstrap) as admin:
            (info,) = admin.describe_consumer_groups([group])
        assert info.coordinator is not None
        killed = info.coordinator.node_id
        cluster.nodes[killed].kill()
        alive = ",".join(n.bootstrap for i, n in cluster.nodes.items() if i != killed)
        producer = Producer(alive, linger_ms=2)
        try:
            for i in range(60, 120):
                producer.send(topic, value=f"{i}".encode(), partition=i % 6)
            producer.flush()
        finally:
            producer.close()
        wait_for(
            "all 120 records after the coordinator died",
            lambda: len({r for m in members for r in m.records}) == 120,
            timeout_s=60,
        )

        def committed_to_the_new_coordinator() -> bool:
            try:
                with Admin(alive, request_timeout_ms=5000) as admin:
                    offsets = admin.list_consumer_group_offsets(group)
            except KafkaError as e:
                if not e.retriable:
                    raise
                return False  # the new coordinator is still loading the group: ask again
            return {tp.partition: om.offset for tp, om in offsets.items()} == {
                p: 20 for p in range(6)
            }

        # Auto-commits (every 200 ms) reach the group's new coordinator.
        wait_for("the final offsets committed", committed_to_the_new_coordinator, 60)
        with Admin(alive) as admin:
            (info,) = admin.describe_consumer_groups([group])
        assert info.coordinator is not None and info.coordinator.node_id != killed
        assert info.state == "Stable" and len(info.members) == 2
        assert split_evenly(members, 6, topic)
        assert all(m.metrics["coordinator-unknown-seconds"] == 0 for m in members)
    finally:
        stop_all(members)


# --- no cluster -----------------------------------------------------------------------------


def test_unreachable_coordinator_is_warned_counted_and_raised(caplog) -> None:
    bootstrap = f"127.0.0.1:{free_port()}"
    consumer = Consumer(
        bootstrap_servers=bootstrap,
        group_id="nowhere",
        request_timeout_ms=500,
        retry_backoff_ms=50,
        retry_backoff_max_ms=200,
        default_api_timeout_ms=1500,
    )
    try:
        with caplog.at_level(logging.WARNING, logger="seglog.client"):
            consumer.subscribe(["t"])
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline:
                assert consumer.poll(timeout_ms=200) == {}
        metrics = consumer.metrics()
        assert metrics["coordinator-lookup-failed-total"] >= 2
        assert metrics["coordinator-unknown-seconds"] >= 1.5
        warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert any("no coordinator" in r.getMessage() for r in warnings), caplog.text
        with pytest.raises(KafkaTimeoutError, match="no coordinator for group 'nowhere'"):
            consumer.committed(TP("t", 0))
    finally:
        consumer.close(timeout_ms=500)


@pytest.mark.parametrize(
    "args,message",
    [
        (["--describe"], "one of --group or --all-groups is required"),
        (["--describe", "--group", "g", "--all-groups"], "cannot be used together"),
        (["--describe", "--group", "g", "--verbose"], "--verbose needs --describe --members"),
        (["--list", "--members"], "--members and --offsets need --describe"),
        (["--reset-offsets", "--group", "g", "--topic", "t"], "needs one of --to-earliest"),
        (["--reset-offsets", "--group", "g", "--to-latest"], "either --topic or --all-topics"),
        (["--delete-offsets", "--group", "a", "--group", "b"], "needs one --group"),
    ],
)
def test_consumer_groups_cli_refuses_bad_flags(args, message) -> None:
    code, _, err = run_cli("consumer-groups", "--bootstrap-server", "127.0.0.1:1", *args)
    assert code == 1 and message in err, err


def test_console_consumer_group_refuses_partition() -> None:
    code, _, err = run_cli(
        "consume",
        "--bootstrap-server",
        "127.0.0.1:1",
        "--topic",
        "t",
        "--group",
        "g",
        "--partition",
        "0",
    )
    assert code == 1 and "--group cannot be used with --partition" in err
