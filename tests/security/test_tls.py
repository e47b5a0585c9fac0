"""TLS on one real node: its gRPC listener and its Kafka listener mapped to SSL with
client certificates required (mTLS). kcat, confluent-kafka, seglog's clients and its
CLI connect with certificates the test CA signed; a plaintext client, a client with
an untrusted certificate and a client without one are refused, and the node goes on
serving the others. A renewed keystore is picked up without a restart."""

from __future__ import annotations

import datetime
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from seglog.client.admin import Admin, NewTopic
from seglog.client.cluster import TopicPartition
from seglog.client.consumer import Consumer
from seglog.client.errors import KafkaError
from seglog.client.producer import Producer
from seglog.harness.node_process import NodeProcess
from seglog.harness.ports import free_port
from seglog.node.security.certificates import CertificateAuthority

KCAT = shutil.which("kcat")


class SecureNode:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.certs = root / "certs"
        self.certs.mkdir(parents=True)
        self.ca = CertificateAuthority()
        self.ca_file = self.ca.write(self.certs / "ca.pem")
        self.node_file = self.ca.issue("node-1", ["127.0.0.1", "localhost"]).write(
            self.certs / "node-1.pem"
        )
        self.alice_file = self.ca.issue("alice", organizational_unit="clients").write(
            self.certs / "alice.pem"
        )
        rogue = CertificateAuthority("rogue-ca")
        self.rogue_file = rogue.issue("mallory").write(self.certs / "mallory.pem")
        expired = self.ca.issue(
            "late", not_before=self.ca.now - datetime.timedelta(days=30), valid_days=2
        )
        self.expired_file = expired.write(self.certs / "late.pem")
        self.kafka_port = free_port()
        grpc_port = free_port()
        self.node = NodeProcess(
            root / "node",
            port=grpc_port,
            overrides={
                "listeners": f"GRPC://127.0.0.1:{grpc_port},SSL://127.0.0.1:{self.kafka_port}",
                "listener.security.protocol.map": "GRPC:SSL,SSL:SSL",
                "ssl.keystore.location": str(self.node_file),
                "ssl.truststore.location": str(self.ca_file),
                "ssl.client.auth": "required",
            },
        )
        self.node.credentials = grpc.ssl_channel_credentials(
            self.ca.cert_pem,
            *self._key_and_chain(self.alice_file),
        )

    @staticmethod
    def _key_and_chain(path: Path) -> tuple[bytes, bytes]:
        data = path.read_bytes()
        cut = data.index(b"-----BEGIN CERTIFICATE-----")
        return data[:cut], data[cut:]

    @property
    def kafka_bootstrap(self) -> str:
        return f"127.0.0.1:{self.kafka_port}"

    def ssl_options(self, cert: Path | None = None) -> dict[str, str]:
        options = {"security_protocol": "SSL", "ssl_cafile": str(self.ca_file)}
        if cert is not None:
            options["ssl_certfile"] = str(cert)
        return options

    def librdkafka(self, cert: Path | None) -> dict[str, str]:
        conf = {
            "bootstrap.servers": self.kafka_bootstrap,
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.ca_file),
        }
        if cert is not None:
            conf["ssl.certificate.location"] = str(cert)
            conf["ssl.key.location"] = str(cert)
        return conf


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureNode]:
    s = SecureNode(tmp_path_factory.mktemp("tls"))
    s.node.start()
    try:
        yield s
    finally:
        s.node.stop()


def _kcat(*args: str, stdin: str | None = None, timeout: float = 30) -> subprocess.CompletedProcess:
    assert KCAT is not None
    return subprocess.run(
        [KCAT, *args], input=stdin, capture_output=True, text=True, timeout=timeout
    )


def _kcat_ssl(secure: SecureNode, cert: Path) -> list[str]:
    return [
        "-b",
        secure.kafka_bootstrap,
        "-X",
        "security.protocol=SSL",
        "-X",
        f"ssl.ca.location={secure.ca_file}",
        "-X",
        f"ssl.certificate.location={cert}",
        "-X",
        f"ssl.key.location={cert}",
    ]


def _api_versions_frame() -> bytes:
    # ApiVersions v0: api key 18, version 0, correlation id 7, client id "t".
    body = struct.pack(">hhih", 18, 0, 7, 1) + b"t"
    return struct.pack(">i", len(body)) + body


@pytest.mark.skipif(KCAT is None, reason="kcat is not installed")
def test_kcat_over_mtls_produces_and_consumes(secure):
    lines = [f"tls-{i:04d}" for i in range(200)]
    done = _kcat(
        *_kcat_ssl(secure, secure.alice_file), "-P", "-t", "kcat-tls", stdin="\n".join(lines)
    )
    assert done.returncode == 0, done.stderr
    done = _kcat(
        *_kcat_ssl(secure, secure.alice_file), "-C", "-t", "kcat-tls", "-o", "beginning", "-e", "-q"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == lines


def test_confluent_kafka_over_mtls_and_big_fetches(secure):
    ck = pytest.importorskip("confluent_kafka")
    producer = ck.Producer({**secure.librdkafka(secure.alice_file), "linger.ms": 20})
    value = b"v" * 50_000  # fetch responses far over one TLS record and TLS_CHUNK
    for i in range(100):
        producer.produce("ck-tls", value + str(i).encode())
    assert producer.flush(30) == 0
    # Assigned partitions, no group (seglog serves no group coordinator here).
    consumer = ck.Consumer(
        {
            **secure.librdkafka(secure.alice_file),
            "group.id": "unused",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([ck.TopicPartition("ck-tls", 0, ck.OFFSET_BEGINNING)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 100 and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    assert got == [value + str(i).encode() for i in range(100)]


def test_plaintext_client_on_the_tls_port_is_refused_and_others_still_served(secure):
    with socket.create_connection(("127.0.0.1", secure.kafka_port), timeout=5) as s:
        s.sendall(_api_versions_frame())
        try:
            answer = s.recv(4096)
        except ConnectionResetError:
            answer = b""
    # The connection is closed, at most after a TLS alert (content type 21), never
    # with a Kafka ApiVersions answer.
    assert answer == b"" or answer[0] == 21, answer[:16]
    # and the node still serves a trusted client.
    ctx = ssl.create_default_context(cafile=str(secure.ca_file))
    ctx.load_cert_chain(str(secure.alice_file))
    with (
        socket.create_connection(("127.0.0.1", secure.kafka_port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s,
    ):
        s.sendall(_api_versions_frame())
        size = struct.unpack(">i", s.recv(4))[0]
        data = b""
        while len(data) < size:
            data += s.recv(size - len(data))
        assert struct.unpack(">i", data[:4])[0] == 7  # our correlation id
        assert struct.unpack(">h", data[4:6])[0] == 0  # error_code NONE


@pytest.mark.parametrize("who", ["untrusted", "expired", "no certificate"])
def test_untrusted_expired_or_missing_client_certificate_is_refused(secure, who):
    ctx = ssl.create_default_context(cafile=str(secure.ca_file))
    if who == "untrusted":
        ctx.load_cert_chain(str(secure.rogue_file))
    elif who == "expired":
        ctx.load_cert_chain(str(secure.expired_file))
    with (
        socket.create_connection(("127.0.0.1", secure.kafka_port), timeout=5) as raw,
        pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)),
        ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s,
    ):
        # TLS 1.3: the server's verdict on our certificate comes after the client's
        # side of the handshake, with the first read.
        s.sendall(_api_versions_frame())
        if not s.recv(4):
            raise ConnectionResetError("closed without an answer")
    log = secure.node.log_path.read_text()
    assert "kafka_ssl_handshake_failed" in log


def test_seglog_clients_over_grpc_tls(secure):
    options = secure.ssl_options(secure.alice_file)
    with Admin(secure.node.bootstrap, **options) as admin:
        admin.create_topics([NewTopic("grpc-tls", 1, 1)])
    producer = Producer(secure.node.bootstrap, linger_ms=0, **options)
    for i in range(50):
        producer.send("grpc-tls", f"m{i}".encode())
    producer.flush(30)
    producer.close()
    consumer = Consumer(
        bootstrap_servers=secure.node.bootstrap, consumer_timeout_ms=5000, **options
    )
    tp = TopicPartition("grpc-tls", 0)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    values = [r.value for r in consumer]
    consumer.close()
    assert values == [f"m{i}".encode() for i in range(50)]


def test_grpc_client_without_a_certificate_or_in_plaintext_is_refused(secure):
    with pytest.raises(KafkaError):
        Admin(
            secure.node.bootstrap, request_timeout_ms=3000, **secure.ssl_options(None)
        ).list_topics()
    with pytest.raises(KafkaError):
        Admin(secure.node.bootstrap, request_timeout_ms=3000).list_topics()


def test_cli_with_command_config(secure, tmp_path):
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SSL\n"
        f"ssl.truststore.location={secure.ca_file}\n"
        f"ssl.keystore.location={secure.alice_file}\n"
    )
    base = [sys.executable, "-m", "seglog.cli"]
    connect = ["--bootstrap-server", secure.node.bootstrap, "--command-config", str(config)]
    done = subprocess.run(
        [*base, "topics", *connect, "--create", "--topic", "cli-tls"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    done = subprocess.run(
        [*base, "topics", *connect, "--list"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and "cli-tls" in done.stdout.split(), done.stderr
    bad = tmp_path / "bad.properties"
    bad.write_text("security.protocol=SSL\nssl.truststore.locaton=/x\n")
    done = subprocess.run(
        [
            *base,
            "topics",
            "--bootstrap-server",
            secure.node.bootstrap,
            "--command-config",
            str(bad),
            "--list",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and "ssl.truststore.locaton" in done.stderr


@pytest.mark.parametrize("listener", ["kafka", "grpc"])
def test_renewed_certificate_is_served_without_a_restart(secure, listener):
    port = secure.kafka_port if listener == "kafka" else secure.node.port

    def served_serial() -> int:
        ctx = ssl.create_default_context(cafile=str(secure.ca_file))
        ctx.load_cert_chain(str(secure.alice_file))
        ctx.set_alpn_protocols(["h2"])  # what a gRPC server insists on
        with (
            socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
            ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s,
        ):
            from cryptography import x509

            der = s.getpeercert(binary_form=True)
            assert der is not None
            return x509.load_der_x509_certificate(der).serial_number

    from cryptography import x509

    before = served_serial()
    renewed = secure.ca.issue("node-1", ["127.0.0.1", "localhost"])
    tmp = secure.node_file.with_suffix(".new")
    renewed.write(tmp)
    tmp.replace(secure.node_file)
    expected = x509.load_pem_x509_certificate(renewed.cert_pem).serial_number
    deadline = time.monotonic() + 10
    serial = before
    while serial != expected and time.monotonic() < deadline:
        time.sleep(0.3)
        serial = served_serial()
    assert serial == expected != before


@pytest.mark.parametrize(
    ("props", "says"),
    [
        ({"listener.security.protocol.map": "GRPC:SASL_SSL"}, "gRPC listener"),
        ({"listener.security.protocol.map": "GRPC:SSL"}, "no ssl.keystore.location"),
        (
            {
                "listeners": "GRPC://127.0.0.1:9192,SASL_PLAINTEXT://127.0.0.1:9093",
                "listener.security.protocol.map": "GRPC:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            },
            "GSSAPI",
        ),
        ({"ssl.client.auth": "sometimes", "listener.security.protocol.map": "GRPC:SSL"}, "one of"),
        (
            {"ssl.enabled.protocols": "TLSv1.1", "listener.security.protocol.map": "GRPC:SSL"},
            "TLSv1.2, TLSv1.3 only",
        ),
        (
            {"ssl.keystore.type": "JKS", "listener.security.protocol.map": "GRPC:SSL"},
            "PEM files only",
        ),
    ],
)
def test_security_settings_seglog_cannot_serve_are_refused_at_start(props, says):
    from seglog.node.config import NodeConfig
    from seglog.storage.errors import InvalidConfigError

    base = {"node.id": "1", "listeners": "GRPC://127.0.0.1:9192"}
    with pytest.raises(InvalidConfigError, match=says):
        NodeConfig.from_properties({**base, **props})
