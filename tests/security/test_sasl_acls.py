"""SASL and ACLs on one real node: a SASL_SSL Kafka listener (PLAIN, SCRAM-SHA-256,
SCRAM-SHA-512) and a gRPC listener with client certificates required, StandardAuthorizer
on. SCRAM credentials are set with `seglog configs` (the metadata log holds them) and
ACLs with `seglog acls`, both as the super user of the admin certificate; then kcat,
confluent-kafka and kafka-python authenticate as alice with SCRAM and are allowed
exactly what the ACLs say: a DENY overrides a prefixed ALLOW, a topic without an ACL is
refused, a wrong password, an unknown mechanism and a request before authentication
are refused, and nothing refused is appended."""

from __future__ import annotations

import shutil
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from seglog.client.errors import KafkaError
from seglog.client.producer import Producer
from seglog.harness.kafka_cluster import KafkaConnection
from seglog.harness.node_process import NodeProcess
from seglog.harness.ports import free_port
from seglog.node.security.certificates import CertificateAuthority

KCAT = shutil.which("kcat")
DELAY_MS = 400


class SecureCluster:
    def __init__(self, root: Path) -> None:
        certs = root / "certs"
        certs.mkdir(parents=True)
        self.ca = CertificateAuthority()
        self.ca_file = self.ca.write(certs / "ca.pem")
        node_cert = self.ca.issue("node-1", ["127.0.0.1"]).write(certs / "node-1.pem")
        self.admin_cert = self.ca.issue("admin").write(certs / "admin.pem")
        self.alice_cert = self.ca.issue("alice").write(certs / "alice.pem")
        self.kafka_port = free_port()
        grpc_port = free_port()
        self.node = NodeProcess(
            root / "node",
            port=grpc_port,
            overrides={
                "listeners": f"GRPC://127.0.0.1:{grpc_port},SASL_SSL://127.0.0.1:{self.kafka_port}",
                "listener.security.protocol.map": "GRPC:SSL,SASL_SSL:SASL_SSL",
                "ssl.keystore.location": str(node_cert),
                "ssl.truststore.location": str(self.ca_file),
                "ssl.client.auth": "required",
                "listener.name.sasl_ssl.ssl.client.auth": "none",
                "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                "listener.name.sasl_ssl.plain.sasl.jaas.config": (
                    "org.apache.kafka.common.security.plain.PlainLoginModule required "
                    'user_admin="admin-secret";'
                ),
                "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                "super.users": "User:CN=admin;User:admin",
                "connection.failed.authentication.delay.ms": str(DELAY_MS),
            },
        )
        data = self.admin_cert.read_bytes()
        cut = data.index(b"-----BEGIN CERTIFICATE-----")
        self.node.credentials = grpc.ssl_channel_credentials(
            self.ca.cert_pem, data[:cut], data[cut:]
        )
        self.command_config = root / "admin.properties"
        self.command_config.write_text(
            "security.protocol=SSL\n"
            f"ssl.truststore.location={self.ca_file}\n"
            f"ssl.keystore.location={self.admin_cert}\n"
        )

    @property
    def kafka_bootstrap(self) -> str:
        return f"127.0.0.1:{self.kafka_port}"

    def cli(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "seglog.cli",
                *args[:1],
                "--bootstrap-server",
                self.node.bootstrap,
                "--command-config",
                str(self.command_config),
                *args[1:],
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )

    def librdkafka(self, user: str, password: str, mechanism: str) -> dict[str, str]:
        return {
            "bootstrap.servers": self.kafka_bootstrap,
            "security.protocol": "SASL_SSL",
            "ssl.ca.location": str(self.ca_file),
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": password,
        }

    def kcat_args(self, user: str, password: str, mechanism: str) -> list[str]:
        out = []
        for k, v in self.librdkafka(user, password, mechanism).items():
            out += ["-b", v] if k == "bootstrap.servers" else ["-X", f"{k}={v}"]
        return out

    def end_offset(self, topic: str) -> int:
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({**self.librdkafka("admin", "admin-secret", "PLAIN"), "group.id": "x"})
        try:
            _low, high = c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
            return int(high)
        finally:
            c.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    c = SecureCluster(tmp_path_factory.mktemp("sasl"))
    c.node.start()
    try:
        for topic in ("orders-eu", "orders-secret", "payments"):
            done = c.cli("topics", "--create", "--topic", topic)
            assert done.returncode == 0, done.stderr
        done = c.cli(
            "configs", "--alter", "--entity-type", "users", "--entity-name", "alice",
            "--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret],"
            "SCRAM-SHA-512=[password=alice-secret]",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        done = c.cli(
            "acls", "--add", "--allow-principal", "User:alice", "--operation", "Write",
            "--operation", "Read", "--operation", "Describe", "--topic", "orders",
            "--resource-pattern-type", "prefixed",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        done = c.cli(
            "acls", "--add", "--deny-principal", "User:alice", "--operation", "Write",
            "--topic", "orders-secret",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        done = c.cli(
            "acls", "--add", "--allow-principal", "User:alice", "--operation", "IdempotentWrite",
            "--cluster",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        yield c
    finally:
        c.node.stop()


def test_configs_describe_shows_mechanisms_not_secrets(cluster):
    done = cluster.cli("configs", "--describe", "--entity-type", "users", "--entity-name", "alice")
    assert done.returncode == 0, done.stderr
    assert "SCRAM-SHA-256=iterations=8192" in done.stdout
    assert "SCRAM-SHA-512=iterations=4096" in done.stdout
    log = cluster.node.log_path.read_text()
    assert "alice-secret" not in log
    metadata = b"".join(p.read_bytes() for d in cluster.node.log_dirs for p in d.rglob("*.log"))
    assert b"alice-secret" not in metadata and b"UserScramCredential" in metadata


def test_acls_list(cluster):
    done = cluster.cli("acls", "--list", "--principal", "User:alice")
    assert done.returncode == 0, done.stderr
    assert "name=orders, patternType=PREFIXED" in done.stdout
    assert "operation=WRITE, permissionType=DENY" in done.stdout


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
def test_kcat_with_sasl_ssl_on_an_allowed_topic(cluster, mechanism):
    lines = [f"{mechanism}-{i}" for i in range(20)]
    auth = cluster.kcat_args("alice", "alice-secret", mechanism)
    done = subprocess.run(
        [KCAT, *auth, "-P", "-t", "orders-eu"], input="\n".join(lines), capture_output=True,
        text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    done = subprocess.run(
        [KCAT, *auth, "-C", "-t", "orders-eu", "-o", "beginning", "-e", "-q"],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert all(line in done.stdout.splitlines() for line in lines)


def test_deny_overrides_allow_and_no_acl_refuses_and_nothing_is_appended(cluster):
    ck = pytest.importorskip("confluent_kafka")
    before = {t: cluster.end_offset(t) for t in ("orders-secret", "payments")}
    for topic in ("orders-secret", "payments"):
        errors: list[object] = []
        p = ck.Producer(cluster.librdkafka("alice", "alice-secret", "SCRAM-SHA-512"))
        p.produce(topic, b"nope", on_delivery=lambda err, _msg, out=errors: out.append(err))
        p.flush(15)
        assert errors and errors[0] is not None, topic
        assert errors[0].code() == ck.KafkaError.TOPIC_AUTHORIZATION_FAILED, errors[0]
    assert {t: cluster.end_offset(t) for t in before} == before
    log = cluster.node.log_path.read_text()
    assert "authorization_denied" in log and "User:alice" in log


def test_kafka_python_scram_and_acl_admin_apis(cluster):
    kafka = pytest.importorskip("kafka")
    from kafka.admin import (
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KResourceType

    common = dict(
        bootstrap_servers=cluster.kafka_bootstrap,
        security_protocol="SASL_SSL",
        ssl_cafile=str(cluster.ca_file),
        ssl_check_hostname=True,
    )
    producer = kafka.KafkaProducer(
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username="alice",
        sasl_plain_password="alice-secret",
        **common,
    )
    producer.send("orders-eu", b"from-kafka-python").get(timeout=30)
    producer.close()
    admin = kafka.KafkaAdminClient(
        sasl_mechanism="PLAIN", sasl_plain_username="admin", sasl_plain_password="admin-secret",
        **common,
    )  # fmt: skip
    found, error = admin.describe_acls(
        ACLFilter(
            principal="User:alice",
            host="*",
            operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(
                KResourceType.ANY, None, ACLResourcePatternType.ANY
            ),
        )
    )
    admin.close()
    assert error is kafka.errors.NoError, error
    assert any(a.resource_pattern.resource_name == "orders-secret" for a in found)


def _tls_connection(cluster: SecureCluster) -> KafkaConnection:
    conn = KafkaConnection(cluster.kafka_port)
    ctx = ssl.create_default_context(cafile=str(cluster.ca_file))
    conn.sock = ctx.wrap_socket(conn.sock, server_hostname="127.0.0.1")
    return conn


def test_wrong_password_is_refused_after_the_delay_and_logged_once(cluster):
    from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

    with _tls_connection(cluster) as conn:
        _b, r = conn.request(SaslHandshakeRequest[1](mechanism="PLAIN"))
        assert r.error_code == 0 and "SCRAM-SHA-256" in r.mechanisms
        started = time.monotonic()
        _b, r = conn.request(SaslAuthenticateRequest[1](auth_bytes=b"\0alice\0wrong-password"))
        waited = time.monotonic() - started
        assert r.error_code == 58  # SASL_AUTHENTICATION_FAILED
        assert waited >= DELAY_MS / 1000 * 0.9, waited
        # The connection is then refused: the next request closes it.
        conn.send(SaslHandshakeRequest[1](mechanism="PLAIN"))
        assert conn.closed_by_peer()
    log = cluster.node.log_path.read_text().splitlines()
    failures = [x for x in log if "kafka_authentication_failed" in x and "wrong" not in x]
    assert any('"user": "alice"' in x or '"user":"alice"' in x for x in failures), failures[-3:]
    assert not any("wrong-password" in x for x in log)


def test_unknown_mechanism_and_requests_before_authentication_are_refused(cluster):
    from kafka.protocol.metadata import MetadataRequest
    from kafka.protocol.sasl import SaslHandshakeRequest

    with _tls_connection(cluster) as conn:
        _b, r = conn.request(SaslHandshakeRequest[1](mechanism="GSSAPI"))
        assert r.error_code == 33  # UNSUPPORTED_SASL_MECHANISM
    with _tls_connection(cluster) as conn:
        conn.send(MetadataRequest[4](topics=None, allow_auto_topic_creation=False))
        assert conn.closed_by_peer()
    # and the node goes on serving an authenticated client
    ck = pytest.importorskip("confluent_kafka")
    p = ck.Producer(cluster.librdkafka("alice", "alice-secret", "SCRAM-SHA-256"))
    p.produce("orders-eu", b"still-served")
    assert p.flush(15) == 0


def test_grpc_acls_use_the_certificate_subject(cluster):
    options = {
        "security_protocol": "SSL",
        "ssl_cafile": str(cluster.ca_file),
        "ssl_certfile": str(cluster.alice_cert),
    }
    # User:CN=alice has no ACL: refused with Kafka's error, nothing appended.
    producer = Producer(cluster.node.bootstrap, linger_ms=0, retries=0, **options)
    with pytest.raises(KafkaError, match="TOPIC_AUTHORIZATION_FAILED"):
        producer.send("payments", b"nope").get(timeout=30)
    producer.close()
    assert cluster.end_offset("payments") == 0
    done = cluster.cli(
        "acls", "--add", "--allow-principal", "User:CN=alice", "--producer", "--topic", "payments",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    producer = Producer(cluster.node.bootstrap, linger_ms=0, **options)
    producer.send("payments", b"yes").get(timeout=30)
    producer.close()
    assert cluster.end_offset("payments") == 1


def test_plain_socket_on_the_sasl_ssl_port_is_refused(cluster):
    with socket.create_connection(("127.0.0.1", cluster.kafka_port), timeout=5) as s:
        s.sendall(b"\x00\x00\x00\x0a" + b"\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00")
        try:
            answer = s.recv(100)
        except ConnectionResetError:
            answer = b""
    assert answer == b"" or answer[0] == 21


def test_admin_requests_without_cluster_alter_are_refused(cluster, tmp_path):
    """alice may not change ACLs or credentials: CLUSTER_AUTHORIZATION_FAILED on both
    listeners, and nothing changes."""
    config = tmp_path / "alice.properties"
    config.write_text(
        "security.protocol=SSL\n"
        f"ssl.truststore.location={cluster.ca_file}\n"
        f"ssl.keystore.location={cluster.alice_cert}\n"
    )
    base = [sys.executable, "-m", "seglog.cli"]
    connect = ["--bootstrap-server", cluster.node.bootstrap, "--command-config", str(config)]
    done = subprocess.run(
        [*base, "acls", *connect, "--add", "--allow-principal", "User:CN=alice",
         "--operation", "All", "--cluster"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0 and "CLUSTER_AUTHORIZATION_FAILED" in done.stderr, done.stderr
    done = subprocess.run(
        [*base, "configs", *connect, "--alter", "--entity-type", "users", "--entity-name",
         "mallory", "--add-config", "SCRAM-SHA-256=[password=x]"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0 and "CLUSTER_AUTHORIZATION_FAILED" in done.stderr, done.stderr
    # Nor trigger elections, nor change broker configs (ALTER / ALTER_CONFIGS on the cluster).
    done = subprocess.run(
        [*base, "leader-election", *connect, "--election-type", "PREFERRED",
         "--all-topic-partitions"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0 and "CLUSTER_AUTHORIZATION_FAILED" in done.stderr, done.stderr
    done = subprocess.run(
        [*base, "configs", *connect, "--alter", "--entity-type", "brokers", "--entity-default",
         "--add-config", "log.retention.ms=1000"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0 and "CLUSTER_AUTHORIZATION_FAILED" in done.stderr, done.stderr
    kafka = pytest.importorskip("kafka")
    from kafka.admin import ACL, ACLOperation, ACLPermissionType, ResourcePattern
    from kafka.admin import ResourceType as KResourceType

    admin = kafka.KafkaAdminClient(
        bootstrap_servers=cluster.kafka_bootstrap,
        security_protocol="SASL_SSL",
        ssl_cafile=str(cluster.ca_file),
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="alice",
        sasl_plain_password="alice-secret",
    )
    try:
        acl = ACL(
            principal="User:alice",
            host="*",
            operation=ACLOperation.ALL,
            permission_type=ACLPermissionType.ALLOW,
            resource_pattern=ResourcePattern(KResourceType.CLUSTER, "kafka-cluster"),
        )
        result = admin.create_acls([acl])
    finally:
        admin.close()
    assert not result["succeeded"]
    failed = result["failed"][0]
    assert "ClusterAuthorizationFailed" in repr(failed), failed
    # The broker-config change on the Kafka listener is refused too.
    from kafka.admin import ConfigResource, ConfigResourceType

    admin = kafka.KafkaAdminClient(
        bootstrap_servers=cluster.kafka_bootstrap,
        security_protocol="SASL_SSL",
        ssl_cafile=str(cluster.ca_file),
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="alice",
        sasl_plain_password="alice-secret",
    )
    try:
        change = ConfigResource(ConfigResourceType.BROKER, "1", {"log.retention.ms": "1000"})
        try:
            answer: object = admin.alter_configs([change], incremental=True, raise_on_unknown=False)
        except Exception as e:  # noqa: BLE001 - the client may raise the error or return it
            answer = e
    finally:
        admin.close()
    assert "CLUSTER_AUTHORIZATION_FAILED" in repr(answer) or "ClusterAuthorization" in repr(
        answer
    ), answer
    done = cluster.cli("configs", "--describe", "--entity-type", "brokers", "--entity-name", "1")
    assert done.returncode == 0 and "log.retention.ms=1000" not in done.stdout, done
    done = cluster.cli("acls", "--list", "--principal", "User:CN=alice", "--cluster")
    assert "operation=ALL" not in done.stdout


def test_transaction_requests_without_write_on_the_transactional_id_are_refused(cluster):
    """alice has no ACL on transactional ids: InitProducerId, AddPartitionsToTxn and
    EndTxn for one are TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53) at once, as in Kafka,
    and the coordinator is never asked."""
    from kafka.protocol.producer import (
        AddPartitionsToTxnRequest,
        EndTxnRequest,
        InitProducerIdRequest,
    )
    from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

    tid = "alice-app"
    with _tls_connection(cluster) as conn:
        _b, r = conn.request(SaslHandshakeRequest[1](mechanism="PLAIN"))
        assert r.error_code == 0
        _b, r = conn.request(SaslAuthenticateRequest[1](auth_bytes=b"\0alice\0alice-secret"))
        assert r.error_code == 0
        _b, r = conn.request(
            InitProducerIdRequest[4](
                transactional_id=tid, transaction_timeout_ms=60_000, producer_id=-1,
                producer_epoch=-1,
            )
        )  # fmt: skip
        assert (r.error_code, r.producer_id) == (53, -1), r
        R = AddPartitionsToTxnRequest
        _b, r = conn.request(
            R[3](
                v3_and_below_transactional_id=tid, v3_and_below_producer_id=1,
                v3_and_below_producer_epoch=0,
                v3_and_below_topics=[R.AddPartitionsToTxnTopic(name="orders-eu", partitions=[0])],
            )
        )  # fmt: skip
        codes = [p.partition_error_code for t in r.results_by_topic_v3_and_below
                 for p in t.results_by_partition]  # fmt: skip
        assert codes == [53], r
        _b, r = conn.request(
            EndTxnRequest[3](transactional_id=tid, producer_id=1, producer_epoch=0, committed=True)
        )
        assert r.error_code == 53, r
