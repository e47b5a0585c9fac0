"""KIP-368 on a SASL_PLAINTEXT Kafka listener of one real node with
`connections.max.reauth.ms`: SaslAuthenticate tells the session lifetime, a
confluent-kafka producer re-authenticates on its connections and keeps producing across
several lifetimes, a raw connection that does not re-authenticate is closed at its next
request once the session ended, and a re-authentication as another user fails."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from kafka.protocol.metadata import ApiVersionsRequest
from kafka.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

from seglog.harness.kafka_cluster import KafkaConnection
from seglog.harness.node_process import NodeProcess
from seglog.harness.ports import free_port

LIFETIME_MS = 1500
USERS = {"alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture(scope="module")
def sasl_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NodeProcess, int]]:
    port, grpc_port = free_port(), free_port()
    jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required " + " ".join(
        f'user_{u}="{p}"' for u, p in USERS.items()
    )
    node = NodeProcess(
        tmp_path_factory.mktemp("reauth") / "node",
        port=grpc_port,
        overrides={
            "listeners": f"GRPC://127.0.0.1:{grpc_port},SASL_PLAINTEXT://127.0.0.1:{port}",
            "listener.security.protocol.map": "GRPC:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas + ";",
            "connections.max.reauth.ms": str(LIFETIME_MS),
            "auto.create.topics.enable": "true",
        },
    ).start()
    try:
        yield node, port
    finally:
        node.stop()


def versions() -> object:
    return ApiVersionsRequest[3](client_software_name="t", client_software_version="1")


def authenticate(conn: KafkaConnection, user: str) -> object:
    _b, hs = conn.request(SaslHandshakeRequest[1](mechanism="PLAIN"))
    assert hs.error_code == 0, hs
    token = b"\0" + user.encode() + b"\0" + USERS[user].encode()
    return conn.request(SaslAuthenticateRequest[1](auth_bytes=token))[1]


def test_the_session_lifetime_is_told_and_an_expired_session_is_closed(sasl_node):
    _node, port = sasl_node
    with KafkaConnection(port) as conn:
        done = authenticate(conn, "alice")
        assert done.error_code == 0 and done.session_lifetime_ms == LIFETIME_MS
        _b, r = conn.request(versions())
        assert r.error_code == 0
        time.sleep(LIFETIME_MS / 1000 + 0.3)
        conn.send(versions())
        assert conn.closed_by_peer(), "the node kept serving a session that had ended"


def test_re_authentication_renews_the_session_but_not_as_another_user(sasl_node):
    _node, port = sasl_node
    with KafkaConnection(port) as conn:
        assert authenticate(conn, "alice").error_code == 0
        for _ in range(2):  # renewed twice, each within the lifetime
            time.sleep(LIFETIME_MS / 1000 * 0.6)
            again = authenticate(conn, "alice")
            assert again.error_code == 0 and again.session_lifetime_ms == LIFETIME_MS
        _b, r = conn.request(versions())
        assert r.error_code == 0  # 1.8 s after the first login: alive thanks to the renewals
    with KafkaConnection(port) as conn:
        assert authenticate(conn, "alice").error_code == 0
        other = authenticate(conn, "bob")
        assert other.error_code == 58, other  # SASL_AUTHENTICATION_FAILED
        conn.send(versions())
        assert conn.closed_by_peer()


def test_a_confluent_producer_re_authenticates_and_keeps_producing(sasl_node):
    node, port = sasl_node
    conf = {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "alice",
        "sasl.password": USERS["alice"],
        "acks": "all",
    }
    before = len(node.log_path.read_text())
    p = Producer(conf)
    errors: list[object] = []
    delivered = []
    deadline = time.monotonic() + 3 * LIFETIME_MS / 1000 + 1
    i = 0
    while time.monotonic() < deadline:  # across three session lifetimes
        p.produce(
            "reauth-topic",
            b"%d" % i,
            on_delivery=lambda e, m: errors.append(e) if e else delivered.append(m.offset()),
        )
        i += 1
        p.poll(0.1)
    assert p.flush(30) == 0
    assert not errors, errors[:3]
    assert len(delivered) == i
    log = node.log_path.read_text()[before:]
    # Each connection logged in more than once, and none was closed for an ended session.
    assert log.count('"kafka_authenticated"') >= 4, "no re-authentication seen"
    assert '"kafka_session_expired"' not in log
