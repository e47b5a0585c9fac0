"""The session token a gRPC caller gets once it has authenticated with SASL: the
principal, an expiry and what the principal's credentials were when it logged in (a
keyed digest, `binding`: the caller compares it with the credentials' digest now, so
a token dies with a changed or deleted password), signed with HMAC-SHA256 under the
cluster's `delegation.token.secret.key` (the same on every node, as Kafka requires of
it), so any node checks a token another node issued. Pure: the time is an argument."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from typing import NamedTuple

VERSION = "v1"
MAX_TOKEN_CHARS = 4096  # a bigger metadata entry is refused unread


class TokenError(Exception):
    """The token is malformed, forged or expired (the message says which)."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _sign(secret: bytes, payload: str) -> str:
    return _b64(hmac.new(secret, f"{VERSION}.{payload}".encode(), hashlib.sha256).digest())


class Claims(NamedTuple):
    principal: str
    binding: str  # "" for none


def credential_digest(secret: bytes, parts: list[bytes]) -> str:
    """A token's `binding`: keyed with the cluster's secret, so that the token (whose
    claims anyone holding it can read) tells nothing about a password."""
    mac = hmac.new(secret, b"seglog credential binding", hashlib.sha256)
    for part in parts:
        mac.update(len(part).to_bytes(4, "big") + part)
    return _b64(mac.digest()[:18])


def issue(principal: str, expires_ms: int, secret: bytes, binding: str = "") -> str:
    claims: dict[str, object] = {"p": principal, "e": expires_ms}
    if binding:
        claims["c"] = binding
    payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
    return f"{VERSION}.{payload}.{_sign(secret, payload)}"


def verify(token: str, now_ms: int, secret: bytes) -> str:
    """The token's principal; TokenError if it is not one this cluster signed or it
    has expired."""
    return verify_claims(token, now_ms, secret).principal


def verify_claims(token: str, now_ms: int, secret: bytes) -> Claims:
    """The token's principal and binding; TokenError if it is not one this cluster
    signed or it has expired."""
    if len(token) > MAX_TOKEN_CHARS:
        raise TokenError(f"token longer than {MAX_TOKEN_CHARS} characters")
    version, _, rest = token.partition(".")
    payload, _, signature = rest.partition(".")
    if version != VERSION or not payload or not signature:
        raise TokenError("not a seglog session token")
    if not hmac.compare_digest(_sign(secret, payload), signature):
        raise TokenError("bad signature (forged, or signed under another secret)")
    try:
        claims = json.loads(_unb64(payload))
        principal, expires_ms = str(claims["p"]), int(claims["e"])
        binding = str(claims.get("c", ""))
    except (ValueError, KeyError, TypeError, AttributeError):
        raise TokenError("malformed claims") from None
    if now_ms >= expires_ms:
        raise TokenError(f"expired {now_ms - expires_ms} ms ago")
    return Claims(principal, binding)
