"""A Kafka connection's SASL authentication as a state machine: SaslHandshake picks
a mechanism among `sasl.enabled.mechanisms`, then SaslAuthenticate requests carry
the mechanism's tokens until the client is authenticated (its principal is then
`User:<name>`) or has failed. Pure: credentials are looked up through callables,
nonces and salts are passed in.

PLAIN checks a user's password against the users of the listener's JAAS config
(`user_<name>="<password>"` in `PlainLoginModule`, as Kafka's) or, for a user not
listed there, against the user's SCRAM credential in the metadata log."""

from __future__ import annotations

import hmac
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .principal import ANONYMOUS, KafkaPrincipal, user
from .scram import MECHANISMS, ScramCredential, ScramError, ScramServer, credential_from_salted
from .scram import salted_password as derive

PLAIN = "PLAIN"
SUPPORTED = (PLAIN, *MECHANISMS)
_JAAS_USER = re.compile(r'user_([^\s=]+)\s*=\s*"([^"]*)"')

Lookup = Callable[[str, str], ScramCredential | None]


def parse_mechanisms(raw: str) -> tuple[str, ...]:
    names = tuple(n.strip().upper() for n in raw.split(",") if n.strip())
    unknown = [n for n in names if n not in SUPPORTED]
    if unknown or not names:
        raise ValueError(
            f"sasl.enabled.mechanisms={raw}: seglog serves {', '.join(SUPPORTED)} "
            f"(unknown: {unknown or 'none given'})"
        )
    return names


def jaas_plain_users(jaas: str | None) -> dict[str, str]:
    """`user_alice="secret"` entries of a PlainLoginModule JAAS config."""
    return dict(_JAAS_USER.findall(jaas or ""))


def check_plain(name: str, password: str, jaas_users: Mapping[str, str], lookup: Lookup) -> bool:
    if name in jaas_users:
        return hmac.compare_digest(jaas_users[name].encode(), password.encode())
    for mechanism in MECHANISMS:
        stored = lookup(name, mechanism)
        if stored is None:
            continue
        salted = derive(mechanism, password.encode(), stored.salt, stored.iterations)
        mine = credential_from_salted(mechanism, salted, stored.salt, stored.iterations)
        return hmac.compare_digest(mine.stored_key, stored.stored_key)
    return False


@dataclass(frozen=True, slots=True)
class Step:
    """What one SaslAuthenticate answers: Kafka's error name, a message, and the
    mechanism's token for the client."""

    error: str
    message: str
    token: bytes = b""
    reason: str = ""  # why it failed, for the node's log only


class SaslSession:
    def __init__(
        self,
        enabled: tuple[str, ...],
        lookup: Lookup,
        jaas_users: Mapping[str, str],
        nonce: Callable[[], str],
        fake_salt: Callable[[], bytes],
    ) -> None:
        self.enabled = enabled
        self._lookup = lookup
        self._jaas_users = jaas_users
        self._nonce = nonce
        self._fake_salt = fake_salt
        self.mechanism: str | None = None
        self.state = "handshake"  # → authenticate → done | failed
        self.principal: KafkaPrincipal = ANONYMOUS
        self.user: str | None = None  # who tried, for the log
        self._scram: ScramServer | None = None

    @property
    def authenticated(self) -> bool:
        return self.state == "done"

    def handshake(self, mechanism: str) -> str:
        """SaslHandshake: NONE, UNSUPPORTED_SASL_MECHANISM or ILLEGAL_SASL_STATE."""
        if self.state != "handshake":
            return "ILLEGAL_SASL_STATE"
        if mechanism not in self.enabled:
            self.state = "failed"
            return "UNSUPPORTED_SASL_MECHANISM"
        self.mechanism = mechanism
        self.state = "authenticate"
        if mechanism in MECHANISMS:
            self._scram = ScramServer(mechanism, self._lookup, self._nonce(), self._fake_salt())
        return "NONE"

    def authenticate(self, token: bytes) -> Step:
        if self.state != "authenticate":
            return Step("ILLEGAL_SASL_STATE", "SaslAuthenticate before SaslHandshake")
        if self.mechanism == PLAIN:
            return self._plain(token)
        assert self._scram is not None
        try:
            if self._scram.user is None:
                answer = self._scram.first(token)
                self.user = self._scram.user
                return Step("NONE", "", answer)
            answer = self._scram.final(token)
        except ScramError as e:
            self.user = self.user or self._scram.user
            return self._fail(str(e))
        self.state = "done"
        self.principal = user(self._scram.user or "")
        return Step("NONE", "", answer)

    def _plain(self, token: bytes) -> Step:
        parts = token.split(b"\0")
        if len(parts) != 3:
            return self._fail("PLAIN token is not authzid NUL user NUL password")
        authzid, name, password = (p.decode("utf-8", "replace") for p in parts)
        self.user = name
        if authzid and authzid != name:
            return self._fail("authorization id differs from the user name")
        if not check_plain(name, password, self._jaas_users, self._lookup):
            return self._fail(f"invalid credentials for user {name!r}")
        self.state = "done"
        self.principal = user(name)
        return Step("NONE", "")

    def _fail(self, why: str) -> Step:
        self.state = "failed"
        # The client is told no more than Kafka tells it; the reason goes to the log.
        return Step(
            "SASL_AUTHENTICATION_FAILED",
            f"Authentication failed during authentication due to invalid credentials with "
            f"SASL mechanism {self.mechanism}",
            reason=why,
        )
