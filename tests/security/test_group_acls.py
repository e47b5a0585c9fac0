"""Group ACLs on one real node with StandardAuthorizer on: a SASL_PLAINTEXT Kafka
listener (PLAIN users from the JAAS config) and a plaintext gRPC listener (callers are
User:ANONYMOUS). ACLs are made with Kafka's CreateAcls by the super user through
confluent-kafka's AdminClient; then real consumers (confluent-kafka, kafka-python,
seglog's own) get exactly what Kafka's rules give them: a consumer group needs READ on
the group and on the topic, a DENY overrides a prefixed ALLOW, OffsetCommit answers
TOPIC_AUTHORIZATION_FAILED for a topic without READ, ListGroups shows only the groups
the caller may describe, DeleteGroups needs DELETE, broker configs need
DESCRIBE_CONFIGS on the cluster and never show the JAAS passwords."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from seglog.client.consumer import Consumer
from seglog.client.errors import KafkaError
from seglog.harness.node_process import NodeProcess
from seglog.harness.ports import free_port
from seglog.proto import groups_pb2 as gpb
from seglog.proto import groups_pb2_grpc
from seglog.proto.errors_pb2 import ErrorCode as E

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import (  # noqa: E402
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ConfigResource,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

USERS = {"admin": "admin-secret", "alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw"}
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
LITERAL, PREFIXED = ResourcePatternType.LITERAL, ResourcePatternType.PREFIXED


class Cluster:
    def __init__(self, root: Path) -> None:
        self._admins: dict[str, Any] = {}
        self.kafka_port = free_port()
        grpc_port = free_port()
        jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required " + " ".join(
            f'user_{u}="{p}"' for u, p in USERS.items()
        )
        self.node = NodeProcess(
            root / "node",
            port=grpc_port,
            overrides={
                "listeners": f"GRPC://127.0.0.1:{grpc_port},SASL_PLAINTEXT://127.0.0.1:"
                f"{self.kafka_port}",
                "listener.security.protocol.map": "GRPC:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
                "sasl.enabled.mechanisms": "PLAIN",
                "sasl.jaas.config": jaas + ";",
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "super.users": "User:admin",
                "connection.failed.authentication.delay.ms": "0",
                "group.initial.rebalance.delay.ms": "0",
                "group.min.session.timeout.ms": "1000",
                "offsets.topic.num.partitions": "3",
            },
        )

    def conf(self, user: str, **extra: Any) -> dict[str, Any]:
        return {
            "bootstrap.servers": f"127.0.0.1:{self.kafka_port}",
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": user,
            "sasl.password": USERS[user],
            **extra,
        }

    def admin(self, user: str = "admin") -> Any:
        """One AdminClient per user, kept: a handle garbage-collected while its
        futures are pending fails them (_DESTROY)."""
        if user not in self._admins:
            self._admins[user] = AdminClient(self.conf(user))
        return self._admins[user]

    def allow(self, permission: Any, user: str, rtype: Any, name: str, pattern: Any, *ops: Any):
        bindings = [
            AclBinding(rtype, name, pattern, f"User:{user}", "*", op, permission) for op in ops
        ]
        for f in self.admin().create_acls(bindings).values():
            f.result(timeout=30)

    def consumer(self, user: str, group: str, **extra: Any) -> Any:
        return ck.Consumer(
            self.conf(
                user,
                **{
                    "group.id": group,
                    "auto.offset.reset": "earliest",
                    "session.timeout.ms": 6000,
                    "enable.auto.commit": False,
                    **extra,
                },
            )
        )


def consume(c: Any, want: int, timeout_s: float = 30) -> tuple[list[bytes], list[Any]]:
    """(values, errors) until `want` values or an error or the timeout."""
    values: list[bytes] = []
    errors: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(values) < want and not errors and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        if m.error():
            if m.error().code() != ck.KafkaError._PARTITION_EOF:
                errors.append(m.error())
            continue
        values.append(m.value())
    return values, errors


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("group-acls"))
    c.node.start()
    try:
        admin = c.admin()
        for f in admin.create_topics(
            [NewTopic(t, 1, 1) for t in ("ga-orders", "ga-secret")]
        ).values():
            f.result(timeout=30)
        p = ck.Producer(c.conf("admin"))
        for i in range(10):
            p.produce("ga-orders", f"v{i}".encode())
            p.produce("ga-secret", f"s{i}".encode())
        assert p.flush(30) == 0
        for user in ("alice", "bob", "carol"):  # every user may read ga-orders
            c.allow(ALLOW, user, ResourceType.TOPIC, "ga-orders", LITERAL, AclOperation.READ)
        c.allow(ALLOW, "alice", ResourceType.GROUP, "ga-group", LITERAL, AclOperation.READ)
        c.allow(ALLOW, "carol", ResourceType.GROUP, "gc-", PREFIXED, AclOperation.READ)
        c.allow(DENY, "carol", ResourceType.GROUP, "gc-denied", LITERAL, AclOperation.READ)
        yield c
    finally:
        c.node.stop()


def test_allowed_user_consumes_and_commits_in_a_group(cluster):
    c = cluster.consumer("alice", "ga-group")
    c.subscribe(["ga-orders"])
    try:
        values, errors = consume(c, 10)
        assert not errors, errors
        assert values == [f"v{i}".encode() for i in range(10)]
        committed = c.commit(asynchronous=False)
        assert committed and all(tp.error is None for tp in committed), committed
        got = c.committed([ck.TopicPartition("ga-orders", 0)], timeout=15)
        assert got[0].offset == 10 and got[0].error is None
        # A topic the group may not READ: that partition is refused, nothing stored.
        with pytest.raises(ck.KafkaException) as refused:
            c.commit(offsets=[ck.TopicPartition("ga-secret", 0, 3)], asynchronous=False)
        assert refused.value.args[0].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
        # Fetching it back: that partition is refused too (DESCRIBE on the topic).
        back = c.committed([ck.TopicPartition("ga-secret", 0)], timeout=15)
        assert back[0].error is not None
        assert back[0].error.code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        c.close()
    # The super user sees what the group stored: ga-orders only.
    request = [ck.ConsumerGroupTopicPartitions("ga-group")]
    stored = cluster.admin().list_consumer_group_offsets(request)["ga-group"].result(timeout=30)
    assert {(tp.topic, tp.offset) for tp in stored.topic_partitions} == {("ga-orders", 10)}


def test_user_without_group_acl_gets_group_authorization_failed(cluster):
    c = cluster.consumer("bob", "ga-group")
    c.subscribe(["ga-orders"])
    try:
        values, errors = consume(c, 1, timeout_s=20)
        assert values == [] and errors, "bob consumed without READ on the group"
        assert errors[0].code() == ck.KafkaError.GROUP_AUTHORIZATION_FAILED, errors[0]
    finally:
        c.close()
    assert "GROUP" in cluster.node.log_path.read_text()  # authorization_denied, logged


def test_deny_overrides_a_prefixed_allow(cluster):
    ok = cluster.consumer("carol", "gc-allowed")
    ok.subscribe(["ga-orders"])
    try:
        values, errors = consume(ok, 10)
        assert not errors and len(values) == 10, errors
    finally:
        ok.close()
    denied = cluster.consumer("carol", "gc-denied")
    denied.subscribe(["ga-orders"])
    try:
        values, errors = consume(denied, 1, timeout_s=20)
        assert values == [] and errors
        assert errors[0].code() == ck.KafkaError.GROUP_AUTHORIZATION_FAILED, errors[0]
    finally:
        denied.close()


def test_list_describe_and_delete_groups_follow_the_acls(cluster):
    # The groups exist once the tests above ran their consumers.
    everything = {
        g.group_id for g in cluster.admin().list_consumer_groups().result(timeout=30).valid
    }
    assert {"ga-group", "gc-allowed"} <= everything
    # alice may describe (READ implies DESCRIBE) only ga-group: the rest are left out.
    mine = {
        g.group_id for g in cluster.admin("alice").list_consumer_groups().result(timeout=30).valid
    }
    assert mine == {"ga-group"}, mine
    # DescribeGroups per group, DeleteGroups needs DELETE.
    bob = cluster.admin("bob")
    with pytest.raises(ck.KafkaException) as refused:
        bob.describe_consumer_groups(["ga-group"])["ga-group"].result(timeout=30)
    assert refused.value.args[0].code() == ck.KafkaError.GROUP_AUTHORIZATION_FAILED
    with pytest.raises(ck.KafkaException) as refused:
        bob.delete_consumer_groups(["gc-allowed"])["gc-allowed"].result(timeout=30)
    assert refused.value.args[0].code() == ck.KafkaError.GROUP_AUTHORIZATION_FAILED
    cluster.allow(ALLOW, "bob", ResourceType.GROUP, "gc-allowed", LITERAL, AclOperation.DELETE)
    f = cluster.admin("bob").delete_consumer_groups(["gc-allowed"])["gc-allowed"]
    f.result(timeout=30)
    left = {g.group_id for g in cluster.admin().list_consumer_groups().result(timeout=30).valid}
    assert "gc-allowed" not in left and "ga-group" in left


def test_grpc_group_calls_follow_the_same_acls(cluster):
    """seglog's own consumer over the plaintext gRPC listener is User:ANONYMOUS."""
    with pytest.raises(KafkaError, match="GROUP_AUTHORIZATION_FAILED"):
        c = Consumer(
            "ga-orders",
            bootstrap_servers=cluster.node.bootstrap,
            group_id="anon-group",
            auto_offset_reset="earliest",
            default_api_timeout_ms=20_000,
        )
        try:
            for _ in range(40):
                c.poll(timeout_ms=500)
        finally:
            c.close()
    for rtype, name in ((ResourceType.GROUP, "anon-group"), (ResourceType.TOPIC, "ga-orders")):
        cluster.allow(ALLOW, "ANONYMOUS", rtype, name, LITERAL, AclOperation.READ)
    c = Consumer(
        "ga-orders",
        bootstrap_servers=cluster.node.bootstrap,
        group_id="anon-group",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    try:
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 10 and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=500).values():
                got += [r.value for r in records]
        assert got == [f"v{i}".encode() for i in range(10)]
        c.commit()
    finally:
        c.close()
    # One OffsetCommit over gRPC, a topic allowed and one not: per-partition errors.
    with grpc.insecure_channel(cluster.node.bootstrap) as channel:
        stub = groups_pb2_grpc.GroupCoordinatorStub(channel)
        request = gpb.OffsetCommitRequest(group_id="anon-group", generation_id=-1)
        for topic in ("ga-orders", "ga-secret"):
            request.topics.add(name=topic).partitions.add(
                partition_index=0, committed_offset=4, committed_leader_epoch=-1
            )
        r = stub.OffsetCommit(request, timeout=30)
        errors = {t.name: t.partitions[0].error_code for t in r.topics}
        assert errors == {"ga-orders": 0, "ga-secret": E.Value("TOPIC_AUTHORIZATION_FAILED")}
        r = stub.DeleteGroups(gpb.DeleteGroupsRequest(groups_names=["anon-group"]), timeout=30)
        assert r.results[0].error_code == E.Value("GROUP_AUTHORIZATION_FAILED")


def test_broker_configs_need_describe_configs_on_the_cluster_and_hide_jaas(cluster):
    broker = ConfigResource(ConfigResource.Type.BROKER, "1")
    with pytest.raises(ck.KafkaException) as refused:
        cluster.admin("alice").describe_configs([broker])[broker].result(timeout=30)
    assert refused.value.args[0].code() == ck.KafkaError.CLUSTER_AUTHORIZATION_FAILED
    configs = cluster.admin().describe_configs([broker])[broker].result(timeout=30)
    jaas = configs["sasl.jaas.config"]
    assert jaas.is_sensitive and jaas.value is None
    # DescribeCluster is answered to anyone, as Kafka's broker answers it; the
    # authorized operations (librdkafka asks Metadata for them) are the caller's.
    alice = cluster.admin("alice").describe_cluster(include_authorized_operations=True)
    result = alice.result(timeout=30)
    assert result.cluster_id and not result.authorized_operations  # 0: no DESCRIBE
    result = cluster.admin().describe_cluster(include_authorized_operations=True).result(30)
    assert AclOperation.DESCRIBE in result.authorized_operations
    assert AclOperation.ALTER_CONFIGS in result.authorized_operations


def test_kafka_python_describes_with_the_callers_authorized_operations(cluster):
    kafka = pytest.importorskip("kafka")
    admin = kafka.KafkaAdminClient(
        bootstrap_servers=f"127.0.0.1:{cluster.kafka_port}",
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="alice",
        sasl_plain_password=USERS["alice"],
    )
    try:
        assert admin.describe_cluster()["cluster_id"]  # DescribeCluster: anyone
        described = admin.describe_groups(["ga-group"], include_authorized_operations=True)
        group = described["ga-group"]
        assert group["error"] is None, group
        assert sorted(group["authorized_operations"]) == ["DESCRIBE", "READ"]  # no DELETE
    finally:
        admin.close()
