"""SCRAM and the SASL session state machine, without a node: RFC 7677's exchange,
round trips for both mechanisms (the client side is scramp's, as seglog's clients and
followers use it), and each way an authentication fails."""

from __future__ import annotations

import base64
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scramp import ScramClient, ScramException
from scramp.utils import saslprep

from seglog.node.security.sasl import SaslSession, parse_mechanisms
from seglog.node.security.scram import (
    ScramError,
    ScramServer,
    check_iterations,
    new_credential,
)

SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")


def test_rfc7677_exchange():
    cred = new_credential("SCRAM-SHA-256", "pencil", SALT, 4096)
    server = ScramServer(
        "SCRAM-SHA-256",
        lambda u, m: cred if u == "user" else None,
        "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
        b"x" * 16,
    )
    first = server.first(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    final = server.final(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _prepared(text: str) -> bool:
    """scramp's client applies SASLprep (RFC 5802) to the name and password; Kafka's
    server does not, so the round trip holds for the texts SASLprep leaves as they are.
    (scramp's client also refuses a salt under 12 bytes: the salts here are longer.)"""
    try:
        return saslprep(text) == text
    except ScramException:
        return False


# Latin characters SASLprep leaves as they are (not the control, format and non-ASCII
# space characters it refuses or drops, nor those NFKC maps: "ĳ", "ſ", "½"...), so the
# texts' filter rarely rejects one (hypothesis's health check failed on too many).
_LATIN = st.sampled_from(
    [
        chr(c)
        for c in range(32, 0x250)
        if (c == 32 or unicodedata.category(chr(c)) not in ("Cc", "Cf", "Zs")) and _prepared(chr(c))
    ]
)


def _first(client: ScramClient) -> bytes:
    return client.get_client_first().encode()


def _final(client: ScramClient, server_first: bytes) -> bytes:
    client.set_server_first(server_first.decode())
    return client.get_client_final().encode()


def _session(creds: dict) -> SaslSession:
    return SaslSession(
        parse_mechanisms("PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"),
        lambda u, m: creds.get((u, m)),
        {"admin": "admin-secret"},
        lambda: "servernonce",
        lambda: b"fake-salt-123456",
    )


@settings(max_examples=20, deadline=None)
@given(
    mechanism=st.sampled_from(["SCRAM-SHA-256", "SCRAM-SHA-512"]),
    name=st.text(_LATIN.filter(lambda c: c != " "), min_size=1, max_size=12).filter(_prepared),
    password=st.text(_LATIN, min_size=1, max_size=20).filter(_prepared),
    wrong=st.booleans(),
)
def test_scram_round_trip_and_wrong_password(mechanism, name, password, wrong):
    salt = b"salt-of-user-" + name.encode()
    creds = {(name, mechanism): new_credential(mechanism, password, salt)}
    s = _session(creds)
    assert s.handshake(mechanism) == "NONE"
    client = ScramClient([mechanism], name, password + ("x" if wrong else ""))
    step = s.authenticate(_first(client))
    assert step.error == "NONE"
    step = s.authenticate(_final(client, step.token))
    if wrong:
        assert step.error == "SASL_AUTHENTICATION_FAILED" and not s.authenticated
        assert "invalid credentials" in step.reason
    else:
        assert step.error == "NONE" and s.authenticated
        client.set_server_final(step.token.decode())
        assert str(s.principal) == f"User:{name}"


def test_unknown_user_looks_like_a_wrong_password_until_the_end():
    s = _session({})
    assert s.handshake("SCRAM-SHA-256") == "NONE"
    client = ScramClient(["SCRAM-SHA-256"], "nobody", "pw")
    step = s.authenticate(_first(client))
    assert step.error == "NONE" and b"s=" in step.token  # a salt, made up
    step = s.authenticate(_final(client, step.token))
    assert step.error == "SASL_AUTHENTICATION_FAILED"
    assert "unknown user" in step.reason


def test_plain_against_jaas_users_and_scram_credentials():
    creds = {("alice", "SCRAM-SHA-512"): new_credential("SCRAM-SHA-512", "a-pw", b"s" * 16)}
    for user, pw, ok in [
        ("admin", "admin-secret", True),
        ("admin", "nope", False),
        ("alice", "a-pw", True),
        ("alice", "b-pw", False),
        ("bob", "x", False),
    ]:
        s = _session(creds)
        assert s.handshake("PLAIN") == "NONE"
        step = s.authenticate(b"\0" + user.encode() + b"\0" + pw.encode())
        assert (step.error == "NONE") == ok, (user, pw, step)
        assert s.authenticated == ok


def test_unknown_mechanism_and_out_of_order_steps():
    s = _session({})
    assert s.handshake("GSSAPI") == "UNSUPPORTED_SASL_MECHANISM"
    assert s.authenticate(b"x").error == "ILLEGAL_SASL_STATE"
    s = _session({})
    assert s.authenticate(b"x").error == "ILLEGAL_SASL_STATE"
    with pytest.raises(ValueError, match="GSSAPI"):
        parse_mechanisms("PLAIN,GSSAPI")
    with pytest.raises(ScramError, match="out of range"):
        check_iterations("SCRAM-SHA-256", 100)
