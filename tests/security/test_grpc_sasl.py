"""SASL on gRPC with one real node (StandardAuthorizer on, `delegation.token.secret.key`
set): seglog's tools log in with PLAIN through `--command-config`
(security.protocol=SASL_PLAINTEXT, sasl.mechanism, sasl.username, sasl.password) as the
super user and set alice's SCRAM credential and ACLs; seglog's producer and consumer
log in as alice with SCRAM and get exactly what alice's ACLs give: the right password
works, a wrong one is SASL_AUTHENTICATION_FAILED, no token is User:ANONYMOUS and
refused, a forged token is refused, and a DENY for alice wins over her ALLOW."""

from __future__ import annotations

import contextlib
import io
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from seglog.cli.main import main
from seglog.client.consumer import Consumer
from seglog.client.errors import KafkaError
from seglog.client.producer import Producer
from seglog.client.sasl import SaslLogin
from seglog.harness.node_process import NodeProcess
from seglog.proto import client_pb2, client_pb2_grpc

ALICE = {
    "security_protocol": "SASL_PLAINTEXT",
    "sasl_mechanism": "SCRAM-SHA-256",
    "sasl_plain_username": "alice",
    "sasl_plain_password": "alice-secret",
}


class Cluster:
    def __init__(self, root: Path, overrides: dict[str, str] | None = None) -> None:
        self.node = NodeProcess(
            root / "node",
            overrides={
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "super.users": "User:admin",
                "delegation.token.secret.key": "test-cluster-secret",
                "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
                'required user_admin="admin-secret";',
                "connection.failed.authentication.delay.ms": "0",
                "group.initial.rebalance.delay.ms": "0",
                "group.min.session.timeout.ms": "1000",
                "offsets.topic.num.partitions": "3",
                **(overrides or {}),
            },
        )
        self.command_config = root / "admin.properties"
        self.command_config.write_text(
            "security.protocol=SASL_PLAINTEXT\n"
            "sasl.mechanism=PLAIN\n"
            "sasl.username=admin\n"
            "sasl.password=admin-secret\n"
        )

    def cli(self, *args: str) -> str:
        """The `seglog` command, in this process (a process per call is seconds of
        imports): its stdout; it must succeed."""
        out, err = io.StringIO(), io.StringIO()
        argv = [args[0], "--bootstrap-server", self.node.bootstrap]
        argv += ["--command-config", str(self.command_config), *args[1:]]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
        assert code == 0, err.getvalue()
        return out.getvalue()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("grpc-sasl"))
    c.node.start()
    try:
        for topic in ("sasl-orders", "sasl-other"):
            c.cli("topics", "--create", "--topic", topic)
        c.cli(
            "configs", "--alter", "--entity-type", "users", "--entity-name", "alice",
            "--add-config", "SCRAM-SHA-256=[iterations=4096,password=alice-secret]",
        )  # fmt: skip
        c.cli(
            "acls", "--add", "--allow-principal", "User:alice", "--operation", "Write",
            "--operation", "Read", "--operation", "Describe", "--topic", "sasl-",
            "--resource-pattern-type", "prefixed",
        )  # fmt: skip
        c.cli(
            "acls", "--add", "--deny-principal", "User:alice", "--operation", "Write",
            "--topic", "sasl-other",
        )  # fmt: skip
        c.cli("acls", "--add", "--allow-principal", "User:alice", "--operation", "Read",
              "--group", "sasl-group")  # fmt: skip
        c.cli("acls", "--add", "--allow-principal", "User:alice", "--operation",
              "IdempotentWrite", "--cluster")  # fmt: skip
        yield c
    finally:
        c.node.stop()


def test_the_tools_log_in_with_plain_through_the_command_config(cluster):
    listed = cluster.cli("acls", "--list", "--principal", "User:alice")
    assert "name=sasl-, patternType=PREFIXED" in listed
    log = cluster.node.log_path.read_text()
    assert "grpc_authenticated" in log and "User:admin" in log
    assert "admin-secret" not in log


def test_scram_user_produces_and_consumes_in_a_group_as_her_acls_allow(cluster):
    producer = Producer(cluster.node.bootstrap, linger_ms=0, **ALICE)
    for i in range(5):
        producer.send("sasl-orders", f"m{i}".encode()).get(timeout=30)
    # Her DENY on sasl-other wins over the prefixed ALLOW.
    with pytest.raises(KafkaError, match="TOPIC_AUTHORIZATION_FAILED"):
        producer.send("sasl-other", b"nope").get(timeout=30)
    producer.close()
    consumer = Consumer(
        "sasl-orders",
        bootstrap_servers=cluster.node.bootstrap,
        group_id="sasl-group",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        **ALICE,
    )
    try:
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 5 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += [r.value for r in records]
        assert got == [f"m{i}".encode() for i in range(5)]
        consumer.commit()
    finally:
        consumer.close()
    log = cluster.node.log_path.read_text()
    assert "User:alice" in log and "alice-secret" not in log


def test_the_console_consumer_in_a_group_logs_in_through_the_command_config(cluster):
    """`seglog consume --group` (a group member) logs in as the tools do: without the
    command config's credentials it is anonymous and refused."""
    admin = {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "admin",
        "sasl_plain_password": "admin-secret",
    }
    producer = Producer(cluster.node.bootstrap, linger_ms=0, **admin)
    producer.send("sasl-orders", b"by-admin").get(timeout=30)
    producer.close()
    out, err = io.TextIOWrapper(io.BytesIO()), io.StringIO()  # records go out as bytes
    argv = ["consume", "--bootstrap-server", cluster.node.bootstrap]
    argv += ["--command-config", str(cluster.command_config), "--topic", "sasl-orders"]
    argv += ["--group", "admin-console-group", "--from-beginning", "--max-messages", "1"]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*argv, "--timeout-ms", "20000"])
    out.flush()
    assert code == 0, err.getvalue()
    assert out.buffer.getvalue().strip(), err.getvalue()  # type: ignore[attr-defined]


def test_wrong_password_is_sasl_authentication_failed(cluster):
    wrong = {**ALICE, "sasl_plain_password": "guess"}
    producer = Producer(cluster.node.bootstrap, linger_ms=0, retries=0, **wrong)
    try:
        with pytest.raises(KafkaError, match="SASL_AUTHENTICATION_FAILED"):
            producer.send("sasl-orders", b"nope").get(timeout=30)
    finally:
        producer.close()
    with pytest.raises(KafkaError, match="SASL_AUTHENTICATION_FAILED"):
        consumer = Consumer(
            "sasl-orders",
            bootstrap_servers=cluster.node.bootstrap,
            group_id="sasl-group",
            **wrong,
        )
        try:
            consumer.poll(timeout_ms=5000)
        finally:
            consumer.close()
    assert "grpc_authentication_failed" in cluster.node.log_path.read_text()


def test_no_token_is_anonymous_and_refused(cluster):
    producer = Producer(cluster.node.bootstrap, linger_ms=0, retries=0)
    try:
        with pytest.raises(KafkaError, match="TOPIC_AUTHORIZATION_FAILED"):
            producer.send("sasl-orders", b"nope").get(timeout=30)
    finally:
        producer.close()


def test_a_forged_token_is_unauthenticated(cluster):
    with grpc.insecure_channel(cluster.node.bootstrap) as channel:
        stub = client_pb2_grpc.SegLogStub(channel)
        for token in ("v1.eyJwIjoiVXNlcjphZG1pbiIsImUiOjk5OTk5OTk5OTk5OTl9.AAAA", "junk"):
            with pytest.raises(grpc.RpcError) as refused:
                stub.Metadata(
                    client_pb2.MetadataRequest(all_topics=True),
                    metadata=[("seglog-sasl-token", token)],
                    timeout=10,
                )
            assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert refused.value.details().startswith("SASL_AUTHENTICATION_FAILED")


def test_a_token_dies_when_its_users_password_changes(cluster):
    def metadata(token: str) -> None:
        stub.Metadata(
            client_pb2.MetadataRequest(all_topics=True),
            metadata=[("seglog-sasl-token", token)],
            timeout=10,
        )

    with grpc.insecure_channel(cluster.node.bootstrap) as channel:
        stub = client_pb2_grpc.SegLogStub(channel)
        token = SaslLogin(channel, "SCRAM-SHA-256", "alice", "alice-secret").token()
        metadata(token)
        try:
            cluster.cli(
                "configs", "--alter", "--entity-type", "users", "--entity-name", "alice",
                "--add-config", "SCRAM-SHA-256=[password=alice-new]",
            )  # fmt: skip
            deadline = time.monotonic() + 10  # the node applies the metadata record
            while True:
                try:
                    metadata(token)
                except grpc.RpcError as refused:
                    assert refused.code() == grpc.StatusCode.UNAUTHENTICATED
                    assert "changed or deleted" in refused.details()
                    break
                assert time.monotonic() < deadline, "the old token still works"
                time.sleep(0.1)
            metadata(SaslLogin(channel, "SCRAM-SHA-256", "alice", "alice-new").token())
        finally:
            cluster.cli(
                "configs", "--alter", "--entity-type", "users", "--entity-name", "alice",
                "--add-config", "SCRAM-SHA-256=[password=alice-secret]",
            )  # fmt: skip
    assert "alice-new" not in cluster.node.log_path.read_text()
