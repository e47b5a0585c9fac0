"""The client side of a SCRAM exchange (RFC 5802; SCRAM-SHA-256 and SCRAM-SHA-512),
for the gRPC SASL login (client/sasl.py) and the tests of the node's server side.
Pure: the nonce is an argument."""

from __future__ import annotations

import base64
import hashlib
import hmac

HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class ScramError(Exception):
    """The server's message is malformed or its signature is wrong."""


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        key, eq, value = part.partition("=")
        if not eq or len(key) != 1:
            raise ScramError(f"malformed SCRAM attribute {part!r}")
        out.setdefault(key, value)
    return out


class ScramClient:
    def __init__(self, mechanism: str, user: str, password: str, nonce: str) -> None:
        if mechanism not in HASHES:
            raise ScramError(f"unknown SCRAM mechanism {mechanism!r}")
        self.mechanism = mechanism
        self._hash = HASHES[mechanism]
        self.user = user
        self.password = password
        self._nonce = nonce
        escaped = user.replace("=", "=3D").replace(",", "=2C")
        self._bare = f"n={escaped},r={nonce}"
        self._server_key = b""
        self._auth_message = b""

    def first(self) -> bytes:
        return f"n,,{self._bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        try:
            text = server_first.decode()
            attrs = _attributes(text)
            nonce, salt, iterations = attrs["r"], base64.b64decode(attrs["s"]), int(attrs["i"])
        except (UnicodeDecodeError, KeyError, ValueError) as e:
            raise ScramError(f"malformed server-first message ({e})") from None
        if not nonce.startswith(self._nonce):
            raise ScramError("server nonce does not extend ours")
        salted = hashlib.pbkdf2_hmac(self._hash, self.password.encode(), salt, iterations)
        client_key = hmac.digest(salted, b"Client Key", self._hash)
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        auth_message = f"{self._bare},{text},{without_proof}".encode()
        signature = hmac.digest(stored_key, auth_message, self._hash)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_key = hmac.digest(salted, b"Server Key", self._hash)
        self._auth_message = auth_message
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        expected = hmac.digest(self._server_key, self._auth_message, self._hash)
        if server_final != b"v=" + base64.b64encode(expected):
            raise ScramError("server signature mismatch")
