"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka uses them: the
credential a cluster stores (salt, iterations, StoredKey, ServerKey: never the
password) and the server side of one authentication exchange, as a state machine
fed the client's messages. Pure: the nonce is passed in."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable
from dataclasses import dataclass

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka's codes for the mechanisms in AlterUserScramCredentials/Describe...
MECHANISM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MECHANISM_NAMES = {v: k for k, v in MECHANISM_CODES.items()}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096


class ScramError(Exception):
    """The exchange failed; the message says why (for the log, not the client)."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hash(mechanism: str) -> str:
    try:
        return MECHANISMS[mechanism]
    except KeyError:
        raise ScramError(f"unknown SCRAM mechanism {mechanism!r}") from None


def salted_password(mechanism: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(_hash(mechanism), password, salt, iterations)


def credential_from_salted(
    mechanism: str, salted: bytes, salt: bytes, iterations: int
) -> ScramCredential:
    """What AlterUserScramCredentials carries (salt and salted password) → what is stored."""
    h = _hash(mechanism)
    client_key = hmac.digest(salted, b"Client Key", h)
    stored_key = hashlib.new(h, client_key).digest()
    server_key = hmac.digest(salted, b"Server Key", h)
    return ScramCredential(mechanism, salt, stored_key, server_key, iterations)


def new_credential(
    mechanism: str, password: str, salt: bytes, iterations: int = DEFAULT_ITERATIONS
) -> ScramCredential:
    check_iterations(mechanism, iterations)
    salted = salted_password(mechanism, password.encode(), salt, iterations)
    return credential_from_salted(mechanism, salted, salt, iterations)


def check_iterations(mechanism: str, iterations: int) -> None:
    _hash(mechanism)
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ScramError(
            f"{mechanism} iterations {iterations} out of range [{MIN_ITERATIONS}, {MAX_ITERATIONS}]"
        )


def _attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        key, eq, value = part.partition("=")
        if not eq or len(key) != 1:
            raise ScramError(f"malformed SCRAM attribute {part!r}")
        out.setdefault(key, value)
    return out


def _unescape(name: str) -> str:
    if "=" in name.replace("=2C", "").replace("=3D", ""):
        raise ScramError("malformed user name")
    return name.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    """One exchange: `first(client_first)` → server-first; `final(client_final)` →
    server-final (the user is authenticated) or ScramError."""

    def __init__(
        self,
        mechanism: str,
        lookup: Callable[[str, str], ScramCredential | None],
        server_nonce: str,
        fake_salt: bytes,
    ) -> None:
        self.mechanism = mechanism
        self._hash = _hash(mechanism)
        self._lookup = lookup
        self._server_nonce = server_nonce
        self._fake_salt = fake_salt  # for an unknown user, so it cannot be told apart
        self.user: str | None = None
        self._credential: ScramCredential | None = None
        self._nonce = ""
        self._auth_prefix = ""
        self._state = "first"

    def _step(self, state: str, then: str, what: str, message: bytes) -> str:
        """The exchange's order: the `what` message is expected in `state` (then it is
        in `then`); its text."""
        if self._state != state:
            raise ScramError(f"unexpected {what} message")
        self._state = then
        return _decode(message)

    def first(self, message: bytes) -> bytes:
        text = self._step("first", "final", "client-first", message)
        # gs2 header: "n,," or "y,," (no channel binding), optionally "a=authzid".
        flag, _, rest = text.partition(",")
        authzid, _, bare = rest.partition(",")
        if flag not in ("n", "y") or not bare:
            raise ScramError("client-first message without a gs2 header seglog supports")
        attrs = _attributes(bare)
        if "n" not in attrs or "r" not in attrs:
            raise ScramError("client-first message without user name or nonce")
        self.user = _unescape(attrs["n"])
        if authzid and _unescape(authzid.removeprefix("a=")) != self.user:
            raise ScramError("authorization id differs from the user name")
        self._gs2 = f"{flag},{authzid},"
        self._credential = self._lookup(self.user, self.mechanism)
        salt = self._credential.salt if self._credential else self._fake_salt
        iterations = self._credential.iterations if self._credential else DEFAULT_ITERATIONS
        self._nonce = attrs["r"] + self._server_nonce
        server_first = f"r={self._nonce},s={base64.b64encode(salt).decode()},i={iterations}"
        self._auth_prefix = f"{bare},{server_first}"
        return server_first.encode()

    def final(self, message: bytes) -> bytes:
        text = self._step("final", "done", "client-final", message)
        without_proof, sep, proof_b64 = text.rpartition(",p=")
        if not sep:
            raise ScramError("client-final message without a proof")
        attrs = _attributes(without_proof)
        # Kafka checks the nonce ends with the server's: some clients (librdkafka)
        # send their own nonce once more in front.
        if not attrs.get("r", "").endswith(self._nonce):
            raise ScramError("nonce mismatch")
        if base64.b64decode(attrs.get("c", "")) != self._gs2.encode():
            raise ScramError("channel binding mismatch")
        if self._credential is None:
            raise ScramError(f"unknown user {self.user!r} for {self.mechanism}")
        auth_message = f"{self._auth_prefix},{without_proof}".encode()
        try:
            proof = base64.b64decode(proof_b64, validate=True)
        except ValueError:
            raise ScramError("proof is not base64") from None
        signature = hmac.digest(self._credential.stored_key, auth_message, self._hash)
        if len(proof) != len(signature):
            raise ScramError("invalid proof")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(
            hashlib.new(self._hash, client_key).digest(), self._credential.stored_key
        ):
            raise ScramError(f"invalid credentials for user {self.user!r}")
        verifier = hmac.digest(self._credential.server_key, auth_message, self._hash)
        return b"v=" + base64.b64encode(verifier)


def _decode(message: bytes) -> str:
    try:
        return message.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramError("SCRAM message is not UTF-8") from None
