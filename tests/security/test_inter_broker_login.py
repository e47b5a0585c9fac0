"""A follower's SASL login (node/security/inter_broker_sasl.py) against the node's own
server side (node/security/sasl.py's SaslSession), without I/O: PLAIN and both SCRAMs
authenticate with the right password and fail with a wrong one; a server whose SCRAM
signature is wrong is caught by the follower."""

from __future__ import annotations

import os

import pytest

from seglog.node.security.inter_broker_sasl import (
    InterBrokerLogin,
    InterBrokerLoginError,
    inter_broker_login,
)
from seglog.node.security.sasl import SaslSession
from seglog.node.security.scram import ScramCredential, new_credential
from seglog.storage.errors import InvalidConfigError

STORED: dict[tuple[str, str], ScramCredential] = {}


def lookup(name: str, mechanism: str) -> ScramCredential | None:
    return STORED.get((name, mechanism))


def session() -> SaslSession:
    return SaslSession(
        ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
        lookup,
        {"broker": "plain-secret"},
        lambda: os.urandom(18).hex(),
        lambda: os.urandom(32),
    )


def run(login: InterBrokerLogin, server: SaslSession, tamper: bool = False) -> str:
    """The exchange the fetcher runs: each token to the server, its answer back."""
    assert server.handshake(login.mechanism) == "NONE"
    steps = login.steps()
    token = next(steps)
    while True:
        step = server.authenticate(token)
        if step.error != "NONE":
            return step.error
        answer = step.token
        if tamper and answer.startswith(b"v="):
            answer = b"v=" + bytes(reversed(answer[2:]))
        try:
            token = steps.send(answer)
        except StopIteration:
            return "NONE"


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_the_followers_login_passes_the_nodes_sasl_server(mechanism: str) -> None:
    if mechanism != "PLAIN":
        STORED[("broker", mechanism)] = new_credential(mechanism, "scram-secret", os.urandom(16))
    password = "plain-secret" if mechanism == "PLAIN" else "scram-secret"
    server = session()
    assert run(InterBrokerLogin(mechanism, "broker", password), server) == "NONE"
    assert server.authenticated and str(server.principal) == "User:broker"
    wrong = session()
    assert run(InterBrokerLogin(mechanism, "broker", "wrong"), wrong) == (
        "SASL_AUTHENTICATION_FAILED"
    )
    assert not wrong.authenticated


def test_a_wrong_server_signature_is_refused_by_the_follower() -> None:
    STORED[("broker", "SCRAM-SHA-256")] = new_credential("SCRAM-SHA-256", "s", os.urandom(16))
    with pytest.raises(InterBrokerLoginError, match="SCRAM-SHA-256 exchange with the leader"):
        run(InterBrokerLogin("SCRAM-SHA-256", "broker", "s"), session(), tamper=True)


def test_the_login_comes_from_kafkas_settings_and_hides_the_password() -> None:
    props = {
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.replication.plain.sasl.jaas.config": (
            "org.apache.kafka.common.security.plain.PlainLoginModule required "
            'username="broker" password="b-secret" user_broker="b-secret";'
        ),
    }
    login = inter_broker_login(props, "REPLICATION", "SASL_SSL")
    assert login == InterBrokerLogin("PLAIN", "broker", "b-secret")
    assert "b-secret" not in repr(login)
    assert inter_broker_login(props, "REPLICATION", "SSL") is None
    with pytest.raises(InvalidConfigError, match="username or password"):
        inter_broker_login(props, "OTHER", "SASL_PLAINTEXT")
