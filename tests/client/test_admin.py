"""Admin against a real node process: topics, configs, cluster, offsets, errors."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from seglog.client.admin import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    Admin,
    NewTopic,
)
from seglog.client.cluster import TopicPartition
from seglog.client.errors import KafkaError, NoBrokersAvailable, error_class
from seglog.harness.node_process import NodeProcess
from seglog.harness.ports import free_port
from seglog.proto import client_pb2 as pb
from seglog.proto import client_pb2_grpc
from seglog.storage.record_batch import NewRecord, build_batch

TopicExists = error_class("TOPIC_ALREADY_EXISTS")
UnknownTopic = error_class("UNKNOWN_TOPIC_OR_PARTITION")
InvalidConfig = error_class("INVALID_CONFIG")
InvalidReplicationFactor = error_class("INVALID_REPLICATION_FACTOR")
InvalidPartitions = error_class("INVALID_PARTITIONS")
InvalidTopic = error_class("INVALID_TOPIC_EXCEPTION")


@pytest.fixture
def admin(shared_node: NodeProcess) -> Iterator[Admin]:
    a = Admin(shared_node.bootstrap, request_timeout_ms=10_000)
    try:
        yield a
    finally:
        a.close()


def produce(bootstrap: str, topic: str, partition: int, records: list[NewRecord]) -> int:
    """Append one batch with a raw Produce RPC; its base offset."""
    with grpc.insecure_channel(bootstrap) as channel:
        stub = client_pb2_grpc.SegLogStub(channel)
        request = pb.ProduceRequest(acks=-1, timeout_ms=10_000)
        t = request.topics.add(name=topic)
        t.partitions.add(partition=partition, records=build_batch(records))
        response = stub.Produce(request, timeout=10)
    p = response.topics[0].partitions[0]
    assert p.error_code == 0, p.error_message
    return p.base_offset


# --- create / list / describe / delete ----------------------------------------------------


def test_create_describe_list_delete(admin: Admin) -> None:
    results = admin.create_topics(
        [NewTopic("orders", 3, 1, {"segment.bytes": "100000"}), NewTopic("audit")]
    )
    assert set(results) == {"orders", "audit"}
    assert results["orders"].num_partitions == 3
    assert results["orders"].replication_factor == 1
    # -1 means the node's num.partitions (1 in the test node config).
    assert results["audit"].num_partitions == 1
    assert results["orders"].topic_id and results["orders"].topic_id != results["audit"].topic_id

    assert {"orders", "audit"} <= set(admin.list_topics())
    (orders,) = admin.describe_topics(["orders"])
    assert orders.name == "orders"
    assert orders.topic_id == results["orders"].topic_id
    assert [p.partition for p in orders.partitions] == [0, 1, 2]
    for p in orders.partitions:
        assert (p.leader, p.leader_epoch, p.replicas, p.isr, p.offline_replicas) == (
            1,
            0,
            (1,),
            (1,),
            (),
        )
    assert orders.replication_factor == 1

    everything = admin.describe_topics()
    names = [t.name for t in everything]
    assert names == sorted(names) and {"orders", "audit"} <= set(names)

    assert admin.delete_topics(["orders", "audit"]) == ["orders", "audit"]
    assert not {"orders", "audit"} & set(admin.list_topics())
    with pytest.raises(UnknownTopic, match="'orders' does not exist"):
        admin.describe_topics(["orders"])


def test_create_existing_topic_reports_which_and_keeps_the_rest(admin: Admin) -> None:
    admin.create_topics([NewTopic("dup", 1, 1)])
    with pytest.raises(TopicExists) as info:
        admin.create_topics([NewTopic("fresh", 2, 1), NewTopic("dup", 1, 1)])
    e = info.value
    assert "'dup' already exists" in str(e)
    assert str(e).startswith("TOPIC_ALREADY_EXISTS: ")
    assert e.topic == "dup"  # type: ignore[attr-defined]
    assert set(e.errors) == {"dup"}  # type: ignore[attr-defined]
    assert set(e.results) == {"fresh"}  # type: ignore[attr-defined]
    # The batch's other topic was created all the same.
    (fresh,) = admin.describe_topics(["fresh"])
    assert len(fresh.partitions) == 2


def test_first_failure_in_request_order_is_raised(admin: Admin) -> None:
    with pytest.raises(InvalidReplicationFactor) as info:
        admin.create_topics(
            [NewTopic("rf-too-big", 1, 5), NewTopic("bad-config", 1, 1, {"retention.ms": "x"})]
        )
    assert info.value.topic == "rf-too-big"  # type: ignore[attr-defined]
    assert "'rf-too-big'" in str(info.value) and "replication factor 5" in str(info.value)
    assert isinstance(info.value.errors["bad-config"], InvalidConfig)  # type: ignore[attr-defined]
    assert not {"rf-too-big", "bad-config"} & set(admin.list_topics())


@pytest.mark.parametrize(
    ("topic", "error", "needle"),
    [
        (NewTopic("badval", 1, 1, {"segment.bytes": "lots"}), InvalidConfig, "segment.bytes"),
        (NewTopic("badname", 1, 1, {"no.such.config": "1"}), InvalidConfig, "no.such.config"),
        (NewTopic("zero", 0, 1), InvalidPartitions, "at least 1"),
        (NewTopic("rf0", 1, 0), InvalidReplicationFactor, "at least 1"),
        (NewTopic("has space", 1, 1), InvalidTopic, "characters"),
    ],
)
def test_create_errors(admin: Admin, topic: NewTopic, error: type, needle: str) -> None:
    with pytest.raises(error, match=needle) as info:
        admin.create_topics([topic])
    # The message names the topic even when the node's message does not.
    assert repr(topic.name) in str(info.value)
    assert topic.name not in admin.list_topics()


def test_validate_only_creates_nothing(admin: Admin) -> None:
    results = admin.create_topics([NewTopic("dry", 4, 1)], validate_only=True)
    assert results["dry"].num_partitions == 4
    assert "dry" not in admin.list_topics()
    with pytest.raises(InvalidConfig):
        admin.create_topics(
            [NewTopic("dry", 1, 1, {"cleanup.policy": "sideways"})], validate_only=True
        )


def test_delete_unknown_topic(admin: Admin) -> None:
    admin.create_topics([NewTopic("keep-me", 1, 1)])
    with pytest.raises(UnknownTopic, match="'nope' does not exist") as info:
        admin.delete_topics(["nope", "keep-me"])
    assert info.value.results == {"keep-me": "keep-me"}  # type: ignore[attr-defined]
    assert "keep-me" not in admin.list_topics()


def test_describe_unknown_topic(admin: Admin) -> None:
    with pytest.raises(UnknownTopic, match="'ghost'"):
        admin.describe_topics(["ghost"])
    assert admin.describe_topics([]) == []


# --- configs -----------------------------------------------------------------------------


def test_describe_configs_sources(admin: Admin) -> None:
    admin.create_topics([NewTopic("conf", 1, 1, {"retention.ms": "60000"})])
    configs = admin.describe_configs("conf")
    assert configs["retention.ms"].value == "60000"
    assert configs["retention.ms"].source == 1
    assert not configs["retention.ms"].is_default
    assert configs["segment.bytes"].is_default and configs["segment.bytes"].source == 5
    assert configs["cleanup.policy"].value == "delete"
    only = admin.describe_configs("conf", ["retention.ms", "segment.bytes"])
    assert set(only) == {"retention.ms", "segment.bytes"}
    with pytest.raises(UnknownTopic):
        admin.describe_configs("ghost")


def test_describe_configs_of_many_topics_in_one_request(admin: Admin) -> None:
    admin.create_topics([NewTopic("conf-a", 1, 1, {"retention.ms": "60000"})])
    admin.create_topics([NewTopic("conf-b", 1, 1, {"cleanup.policy": "compact"})])
    found = admin.describe_configs_of(["conf-a", "ghost", "conf-b"], ["cleanup.policy"])
    assert list(found) == ["conf-a", "ghost", "conf-b"]
    a, ghost, b = found["conf-a"], found["ghost"], found["conf-b"]
    assert isinstance(a, dict) and set(a) == {"cleanup.policy"}
    assert a["cleanup.policy"].value == "delete"
    assert isinstance(b, dict) and b["cleanup.policy"].value == "compact"
    assert isinstance(ghost, UnknownTopic) and "ghost" in str(ghost)


def test_alter_configs_is_incremental(admin: Admin) -> None:
    admin.create_topics(
        [NewTopic("alter", 1, 1, {"retention.ms": "60000", "segment.bytes": "200000"})]
    )
    admin.alter_configs("alter", set={"max.message.bytes": "5000"}, delete=["segment.bytes"])
    configs = admin.describe_configs("alter")
    overrides = {k: v.value for k, v in configs.items() if not v.is_default}
    assert overrides == {"retention.ms": "60000", "max.message.bytes": "5000"}
    assert configs["segment.bytes"].is_default

    admin.alter_configs("alter", set={"retention.ms": "1"}, validate_only=True)
    assert admin.describe_configs("alter")["retention.ms"].value == "60000"


def test_alter_configs_errors(admin: Admin) -> None:
    admin.create_topics([NewTopic("alter-bad", 1, 1)])
    with pytest.raises(InvalidConfig, match="retention.ms") as info:
        admin.alter_configs("alter-bad", set={"retention.ms": "soon"})
    assert "'alter-bad'" in str(info.value)
    with pytest.raises(InvalidConfig, match="no.such.thing"):
        admin.alter_configs("alter-bad", delete=["no.such.thing"])
    with pytest.raises(UnknownTopic, match="'ghost'"):
        admin.alter_configs("ghost", set={"retention.ms": "1"})
    with pytest.raises(ValueError, match="both set and deleted"):
        admin.alter_configs("alter-bad", set={"retention.ms": "1"}, delete=["retention.ms"])
    with pytest.raises(ValueError, match="nothing to alter"):
        admin.alter_configs("alter-bad")
    assert all(c.is_default for c in admin.describe_configs("alter-bad").values())


# --- cluster and offsets -----------------------------------------------------------------


def test_describe_cluster(admin: Admin, shared_node: NodeProcess) -> None:
    cluster = admin.describe_cluster()
    assert cluster.cluster_id == "seglog-cluster"
    assert cluster.controller_id == 1
    assert [(b.node_id, b.host, b.port, b.fenced) for b in cluster.brokers] == [
        (1, "127.0.0.1", shared_node.port, False)
    ]


def test_list_offsets(admin: Admin, shared_node: NodeProcess) -> None:
    admin.create_topics([NewTopic("offsets", 2, 1)])
    tp0, tp1 = TopicPartition("offsets", 0), TopicPartition("offsets", 1)
    empty = admin.list_offsets({tp0: EARLIEST_TIMESTAMP, tp1: LATEST_TIMESTAMP})
    assert (empty[tp0].offset, empty[tp1].offset) == (0, 0)

    base = 1_700_000_000_000
    records = [NewRecord(b"v%d" % i, timestamp=base + 1000 * i) for i in range(5)]
    assert produce(shared_node.bootstrap, "offsets", 0, records) == 0
    got = admin.list_offsets({tp0: LATEST_TIMESTAMP, tp1: LATEST_TIMESTAMP})
    assert (got[tp0].offset, got[tp1].offset) == (5, 0)
    assert admin.list_offsets({tp0: EARLIEST_TIMESTAMP})[tp0].offset == 0
    # The first record whose timestamp is at or after the one asked for.
    by_time = admin.list_offsets({tp0: base + 2500})[tp0]
    assert (by_time.offset, by_time.timestamp) == (3, base + 3000)
    assert admin.list_offsets({tp0: base + 10_000})[tp0].offset == -1
    newest = admin.list_offsets({tp0: MAX_TIMESTAMP})[tp0]
    assert (newest.offset, newest.timestamp) == (4, base + 4000)

    with pytest.raises(UnknownTopic, match="offsets-7"):
        admin.list_offsets({TopicPartition("offsets", 7): LATEST_TIMESTAMP})
    with pytest.raises(UnknownTopic, match="'ghost'"):
        admin.list_offsets({TopicPartition("ghost", 0): LATEST_TIMESTAMP})


# --- connectivity ------------------------------------------------------------------------


def test_unreachable_bootstrap_is_a_clear_error() -> None:
    port = free_port()
    with (
        Admin(f"127.0.0.1:{port}", request_timeout_ms=1_000) as a,
        pytest.raises(NoBrokersAvailable) as info,
    ):
        a.list_topics()
    message = str(info.value)
    assert f"cannot reach 127.0.0.1:{port}" in message
    assert "connection refused" in message


def test_bad_bootstrap_value() -> None:
    with pytest.raises(ValueError, match="not host:port"):
        Admin("localhost")
    with pytest.raises(ValueError, match="request_timeout_ms"):
        Admin("localhost:9092", request_timeout_ms=0)


def test_closed_admin_refuses_calls(shared_node: NodeProcess) -> None:
    a = Admin(shared_node.bootstrap)
    a.close()
    with pytest.raises(KafkaError, match="closed"):
        a.list_topics()


def test_retries_until_the_node_is_back(tmp_path: Path) -> None:
    """A node that is down when the call starts but up before the deadline."""
    node = NodeProcess(tmp_path / "cluster")
    with Admin(node.bootstrap, request_timeout_ms=60_000) as a:
        node.start()
        try:
            a.create_topics([NewTopic("late", 1, 1)])
            node.stop()
            restart = threading.Thread(target=node.start)
            restart.start()
            try:
                # Issued while the node is (most likely) still starting; retried.
                assert a.list_topics() == ["late"]
            finally:
                restart.join()
        finally:
            node.stop()


# --- retries against a scripted server ----------------------------------------------------


class ScriptedNode(client_pb2_grpc.SegLogServicer):
    """Answers NOT_CONTROLLER / NOT_LEADER_OR_FOLLOWER once, then succeeds: the
    single real node never moves its controller or leaders."""

    def __init__(self) -> None:
        self.port = 0
        self.calls: dict[str, int] = {}

    def _count(self, name: str) -> int:
        self.calls[name] = self.calls.get(name, 0) + 1
        return self.calls[name]

    def Metadata(self, request, context):  # noqa: N802
        self._count("Metadata")
        r = pb.MetadataResponse(cluster_id="scripted", controller_id=1)
        r.brokers.add(node_id=1, host="127.0.0.1", port=self.port)
        for name in request.topics:
            t = r.topics.add(name=name, topic_id="x")
            t.partitions.add(partition=0, leader_id=1, replica_nodes=[1], isr_nodes=[1])
        return r

    def CreateTopics(self, request, context):  # noqa: N802
        first = self._count("CreateTopics") == 1
        r = pb.CreateTopicsResponse()
        for t in request.topics:
            if first:
                r.topics.add(name=t.name, error_code=41, error_message="not the controller")
            else:
                r.topics.add(name=t.name, topic_id="id", num_partitions=1, replication_factor=1)
        return r

    def ListOffsets(self, request, context):  # noqa: N802
        first = self._count("ListOffsets") == 1
        r = pb.ListOffsetsResponse()
        for t in request.topics:
            rt = r.topics.add(name=t.name)
            for p in t.partitions:
                if first:
                    rt.partitions.add(partition=p.partition, error_code=6)
                else:
                    rt.partitions.add(partition=p.partition, offset=42, timestamp=-1)
        return r


@pytest.fixture
def scripted() -> Iterator[ScriptedNode]:
    from concurrent import futures

    servicer = ScriptedNode()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    client_pb2_grpc.add_SegLogServicer_to_server(servicer, server)
    servicer.port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield servicer
    finally:
        server.stop(None)


def test_not_controller_is_retried(scripted: ScriptedNode) -> None:
    with Admin(f"127.0.0.1:{scripted.port}", request_timeout_ms=10_000) as a:
        assert a.create_topics([NewTopic("moved", 1, 1)])["moved"].topic_id == "id"
    assert scripted.calls["CreateTopics"] == 2


def test_not_leader_is_retried_with_fresh_metadata(scripted: ScriptedNode) -> None:
    with Admin(f"127.0.0.1:{scripted.port}", request_timeout_ms=10_000) as a:
        tp = TopicPartition("moved", 0)
        assert a.list_offsets({tp: LATEST_TIMESTAMP})[tp].offset == 42
    assert scripted.calls["ListOffsets"] == 2
    assert scripted.calls["Metadata"] >= 2
