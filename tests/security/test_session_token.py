"""The gRPC session token (node/security/session_token.py), a pure function of the
secret and the time: what it signs it verifies until its expiry, and a token that was
altered, signed under another secret or expired is refused with the reason."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seglog.node.security.session_token import (
    MAX_TOKEN_CHARS,
    TokenError,
    credential_digest,
    issue,
    verify,
    verify_claims,
)

SECRET = b"cluster-secret"


@given(
    principal=st.text(min_size=1, max_size=200),
    now=st.integers(0, 2**50),
    life=st.integers(1, 2**30),
)
def test_a_token_verifies_to_its_principal_until_it_expires(principal, now, life):
    token = issue(principal, now + life, SECRET)
    assert verify(token, now, SECRET) == principal
    assert verify(token, now + life - 1, SECRET) == principal
    with pytest.raises(TokenError, match="expired"):
        verify(token, now + life, SECRET)


@given(position=st.integers(0, 10_000), char=st.sampled_from("AQgw_-x."))
def test_any_altered_character_is_refused(position, char):
    token = issue("User:alice", 10**15, SECRET)
    i = position % len(token)
    if token[i] == char:
        return
    altered = token[:i] + char + token[i + 1 :]
    with pytest.raises(TokenError):
        verify(altered, 0, SECRET)


def test_another_clusters_secret_and_junk_are_refused():
    token = issue("User:alice", 10**15, b"another-secret")
    with pytest.raises(TokenError, match="bad signature"):
        verify(token, 0, SECRET)
    for junk in ("", "v1", "v2.a.b", "v1..", "x" * (MAX_TOKEN_CHARS + 1)):
        with pytest.raises(TokenError):
            verify(junk, 0, SECRET)


def test_the_binding_travels_signed_and_tells_nothing_of_the_password():
    binding = credential_digest(SECRET, [b"SCRAM-SHA-256", b"salt", b"stored-key"])
    token = issue("User:alice", 10**15, SECRET, binding)
    assert verify_claims(token, 0, SECRET) == ("User:alice", binding)
    assert verify(token, 0, SECRET) == "User:alice"
    assert verify_claims(issue("User:alice", 10**15, SECRET), 0, SECRET).binding == ""
    # Keyed: the same credential under another cluster's secret digests differently,
    # and another credential (a new salt: a changed password) too.
    assert binding != credential_digest(b"other", [b"SCRAM-SHA-256", b"salt", b"stored-key"])
    assert binding != credential_digest(SECRET, [b"SCRAM-SHA-256", b"salt2", b"stored-key"])
    # Parts are length-prefixed: moving a byte between parts changes the digest.
    assert binding != credential_digest(SECRET, [b"SCRAM-SHA-256s", b"alt", b"stored-key"])
