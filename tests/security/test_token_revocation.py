"""A gRPC session token dies with its user's credentials (node/security/grpc_sasl.py):
GrpcSasl logs a user in with PLAIN against a SCRAM credential or the JAAS config, as
it does for a node (the credentials come from a dict here instead of the metadata
log), and refuses the token once the credential it was issued under has been changed
or deleted, or its life is spent."""

from __future__ import annotations

import pytest

from seglog.node.security.grpc_sasl import GrpcSasl
from seglog.node.security.scram import ScramCredential, new_credential
from seglog.node.security.session_token import TokenError, issue
from seglog.storage.errors import InvalidConfigError

SECRET = b"cluster-secret"


class Users:
    """The SCRAM credentials of the metadata log, by (user, mechanism)."""

    def __init__(self) -> None:
        self.credentials: dict[tuple[str, str], ScramCredential] = {}

    def set(self, name: str, password: str, salt: bytes) -> None:
        self.credentials[(name, "SCRAM-SHA-256")] = new_credential("SCRAM-SHA-256", password, salt)

    def lookup(self, name: str, mechanism: str) -> ScramCredential | None:
        return self.credentials.get((name, mechanism))


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def _sasl(users: Users, clock: Clock, jaas: dict[str, str] | None = None) -> GrpcSasl:
    return GrpcSasl(
        SECRET, ("PLAIN", "SCRAM-SHA-256"), jaas or {}, users.lookup, 60_000, 0.0, clock
    )


def _login(sasl: GrpcSasl, name: str, password: str) -> str:
    answer = sasl.authenticate("PLAIN", f"\0{name}\0{password}".encode(), "", "127.0.0.1")
    assert answer["error"] == "NONE", answer
    return str(answer["token"])


def test_a_changed_password_voids_the_tokens_issued_before():
    users, clock = Users(), Clock()
    users.set("alice", "first", b"salt-1")
    sasl = _sasl(users, clock)
    token = _login(sasl, "alice", "first")
    assert sasl.principal_of(token) == "User:alice"
    users.set("alice", "second", b"salt-2")
    with pytest.raises(TokenError, match="User:alice were changed or deleted"):
        sasl.principal_of(token)
    assert sasl.principal_of(_login(sasl, "alice", "second")) == "User:alice"


def test_a_deleted_credential_voids_the_token_and_another_users_token_lives_on():
    users, clock = Users(), Clock()
    users.set("alice", "a", b"salt-a")
    users.set("bob", "b", b"salt-b")
    sasl = _sasl(users, clock)
    alice, bob = _login(sasl, "alice", "a"), _login(sasl, "bob", "b")
    del users.credentials[("alice", "SCRAM-SHA-256")]
    with pytest.raises(TokenError, match="changed or deleted"):
        sasl.principal_of(alice)
    assert sasl.principal_of(bob) == "User:bob"
    # Setting the same password again is a new salt: the old token stays void.
    users.set("alice", "a", b"salt-a2")
    with pytest.raises(TokenError):
        sasl.principal_of(alice)


def test_a_new_mechanism_for_the_user_counts_as_a_change():
    users, clock = Users(), Clock()
    users.set("alice", "a", b"salt-a")
    sasl = _sasl(users, clock)
    token = _login(sasl, "alice", "a")
    users.credentials[("alice", "SCRAM-SHA-512")] = new_credential("SCRAM-SHA-512", "x", b"s")
    with pytest.raises(TokenError):
        sasl.principal_of(token)


def test_a_jaas_user_token_is_bound_to_the_jaas_password():
    users, clock = Users(), Clock()
    token = _login(_sasl(users, clock, {"admin": "admin-secret"}), "admin", "admin-secret")
    assert _sasl(users, clock, {"admin": "admin-secret"}).principal_of(token) == "User:admin"
    with pytest.raises(TokenError):
        _sasl(users, clock, {"admin": "rotated"}).principal_of(token)


def test_the_token_expires_and_a_token_without_binding_is_refused():
    users, clock = Users(), Clock()
    users.set("alice", "a", b"salt-a")
    sasl = _sasl(users, clock)
    token = _login(sasl, "alice", "a")
    clock.now += 59_999
    assert sasl.principal_of(token) == "User:alice"
    clock.now += 1
    with pytest.raises(TokenError, match="expired"):
        sasl.principal_of(token)
    unbound = issue("User:alice", clock.now + 60_000, SECRET)  # signed, but bound to nothing
    with pytest.raises(TokenError, match="changed or deleted"):
        sasl.principal_of(unbound)


def test_connections_max_reauth_ms_caps_the_token_lifetime():
    def lifetime(**props: str) -> int:
        props = {"delegation.token.secret.key": "s", **props}
        sasl = GrpcSasl.from_properties(
            {k.replace("_", "."): v for k, v in props.items()}, Users().lookup, 0.0
        )
        assert sasl is not None
        return sasl.lifetime_ms

    assert lifetime() == 86_400_000
    assert lifetime(connections_max_reauth_ms="0") == 86_400_000  # Kafka's 0: off
    assert lifetime(connections_max_reauth_ms="5000") == 5000
    both = {"delegation_token_expiry_time_ms": "2000", "connections_max_reauth_ms": "5000"}
    assert lifetime(**both) == 2000
    with pytest.raises(InvalidConfigError, match="connections.max.reauth.ms"):
        lifetime(connections_max_reauth_ms="-1")
