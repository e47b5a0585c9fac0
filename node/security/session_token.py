"""The session token a gRPC caller gets once it has authenticated with SASL: the
principal and an expiry, signed with HMAC-SHA256 under the cluster's
`delegation.token.secret.key` (the same on every node, as Kafka requires of it), so
any node checks a token another node issued. Pure: the time is an argument."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

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


def issue(principal: str, expires_ms: int, secret: bytes) -> str:
    payload = _b64(json.dumps({"p": principal, "e": expires_ms}, separators=(",", ":")).encode())
    return f"{VERSION}.{payload}.{_sign(secret, payload)}"


def verify(token: str, now_ms: int, secret: bytes) -> str:
    """The token's principal; TokenError if it is not one this cluster signed or it
    has expired."""
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
    except (ValueError, KeyError, TypeError):
        raise TokenError("malformed claims") from None
    if now_ms >= expires_ms:
        raise TokenError(f"expired {now_ms - expires_ms} ms ago")
    return principal
