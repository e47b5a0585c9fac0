"""SASL for gRPC callers. `GrpcSasl` runs the Security service's SaslAuthenticate
steps (the same SaslSession as a Kafka listener's: PLAIN, SCRAM-SHA-256,
SCRAM-SHA-512) and, once a caller has authenticated, issues it a session token
(node/security/session_token.py). `SaslTokenInterceptor` checks the token a call
sends in its `seglog-sasl-token` metadata entry and makes its user the call's
principal for the ACL checks (grpc_auth.grpc_principal); a call without a token is
the certificate's subject or User:ANONYMOUS, as before. A bad or expired token fails
the call with UNAUTHENTICATED, whose details start with SASL_AUTHENTICATION_FAILED.
A token is bound to its user's credentials as they were at the login (their SCRAM
credentials in the metadata log, the JAAS config's PLAIN password): once one of them
is changed or deleted, the tokens issued before are refused, on every node.

On when `delegation.token.secret.key` is set (Kafka's secret for the tokens it
signs; it must be the same on every node). The token lives
`delegation.token.expiry.time.ms` (Kafka's default: 24 h), or `connections.max.reauth.ms`
when that is set and shorter (KIP-368's session lifetime); the answer that carries the
token says how long it lives, so the client logs in again before then."""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import grpc

# The plain wall clock, not the faulted one: a token's expiry is an absolute time that
# every node checks, so one node's injected clock fault must not move it.
from seglog.storage.disk_and_clock import plain_monotonic_s
from seglog.storage.disk_and_clock import plain_wall_ms as now_ms
from seglog.storage.errors import InvalidConfigError

from ..config import int_setting
from ..event_log import EventLogger
from ..grpc_wrap import WrappingInterceptor, wrap_handler
from .grpc_auth import TOKEN_METADATA, peer_host, with_token_principal
from .principal import USER
from .sasl import SaslSession, jaas_plain_users, parse_mechanisms
from .scram import MECHANISMS
from .session_token import TokenError, credential_digest, issue, verify_claims

_log = EventLogger("security")
SECRET_KEYS = ("delegation.token.secret.key", "delegation.token.master.key")
DEFAULT_LIFETIME_MS = 86_400_000
DEFAULT_MECHANISMS = "SCRAM-SHA-256,SCRAM-SHA-512"
MAX_PENDING = 256  # SCRAM exchanges between their two steps, at most
PENDING_TIMEOUT_S = 30.0
AUTHENTICATE = "/seglog.v1.Security/SaslAuthenticate"
OPEN = ("/grpc.health.v1.Health/", AUTHENTICATE)


class GrpcSasl:
    def __init__(
        self,
        secret: bytes,
        mechanisms: tuple[str, ...],
        jaas_users: Mapping[str, str],
        lookup: Callable[[str, str], Any],
        lifetime_ms: int,
        failed_delay_s: float,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.secret = secret
        self.mechanisms = mechanisms
        self.lifetime_ms = lifetime_ms
        self.failed_delay_s = failed_delay_s
        self._jaas_users = jaas_users
        self._lookup = lookup
        self._clock = clock
        self._lock = threading.Lock()
        self._pending: OrderedDict[str, tuple[SaslSession, float]] = OrderedDict()

    @classmethod
    def from_properties(
        cls, props: Mapping[str, str], lookup: Callable[[str, str], Any], failed_delay_s: float
    ) -> GrpcSasl | None:
        secret = next((props[k] for k in SECRET_KEYS if props.get(k)), None)
        if not secret:
            return None
        try:
            mechanisms = parse_mechanisms(
                props.get("sasl.enabled.mechanisms") or DEFAULT_MECHANISMS
            )
        except ValueError as e:
            raise InvalidConfigError(str(e)) from None
        lifetime = int_setting(
            props, "delegation.token.expiry.time.ms", DEFAULT_LIFETIME_MS, at_least=1
        )
        # KIP-368's session lifetime: a client must authenticate again within it.
        reauth = int_setting(props, "connections.max.reauth.ms", 0, at_least=0)
        if reauth:
            lifetime = min(lifetime, reauth)
        jaas = jaas_plain_users(props.get("sasl.jaas.config"))
        return cls(secret.encode(), mechanisms, jaas, lookup, lifetime, failed_delay_s)

    def _session(self, session_id: str, mechanism: str) -> tuple[str, SaslSession, str]:
        """(session id, session, handshake error) for this step."""
        with self._lock:
            now = plain_monotonic_s()
            while self._pending and next(iter(self._pending.values()))[1] < now:
                self._pending.popitem(last=False)
            if session_id:
                found = self._pending.pop(session_id, None)
                if found is None:
                    return session_id, self._new(), "ILLEGAL_SASL_STATE"
                return session_id, found[0], "NONE"
        session = self._new()
        return os.urandom(16).hex(), session, session.handshake(mechanism)

    def _new(self) -> SaslSession:
        return SaslSession(
            self.mechanisms,
            self._lookup,
            self._jaas_users,
            lambda: os.urandom(18).hex(),
            lambda: os.urandom(32),
        )

    def authenticate(
        self, mechanism: str, auth_bytes: bytes, session_id: str, host: str
    ) -> dict[str, Any]:
        """One step: the SaslAuthenticateResponse's fields (error by Kafka's name)."""
        sid, session, error = self._session(session_id, mechanism)
        if error != "NONE":
            message = (
                f"{mechanism!r} is not enabled (enabled: {', '.join(self.mechanisms)})"
                if error == "UNSUPPORTED_SASL_MECHANISM"
                else "unknown or expired SASL session id"
            )
            _log.warning("grpc_authentication_failed", address=host, reason=f"{error}: {message}")
            return {"error": error, "error_message": message}
        step = session.authenticate(auth_bytes)
        if step.error != "NONE":
            _log.warning(
                "grpc_authentication_failed",
                address=host,
                user=session.user,
                mechanism=session.mechanism,
                reason=step.reason or step.error,
            )
            time.sleep(self.failed_delay_s)  # a guesser waits (this worker only)
            return {"error": step.error, "error_message": step.message}
        if not session.authenticated:
            with self._lock:
                if len(self._pending) >= MAX_PENDING:
                    self._pending.popitem(last=False)
                self._pending[sid] = (session, plain_monotonic_s() + PENDING_TIMEOUT_S)
            return {"error": "NONE", "auth_bytes": step.token, "session_id": sid}
        principal = str(session.principal)
        _log.info(
            "grpc_authenticated", address=host, principal=principal, mechanism=session.mechanism
        )
        return {
            "error": "NONE",
            "auth_bytes": step.token,
            "token": issue(
                principal,
                self._clock() + self.lifetime_ms,
                self.secret,
                self.binding(session.principal.name),
            ),
            "session_lifetime_ms": self.lifetime_ms,
        }

    def binding(self, name: str) -> str:
        """A digest of the user's credentials as they are now (see session_token)."""
        parts: list[bytes] = []
        if name in self._jaas_users:
            parts += [b"PLAIN", self._jaas_users[name].encode()]
        for mechanism in MECHANISMS:
            credential = self._lookup(name, mechanism)
            if credential is not None:
                parts += [
                    mechanism.encode(),
                    credential.salt,
                    str(credential.iterations).encode(),
                    credential.stored_key,
                    credential.server_key,
                ]
        return credential_digest(self.secret, parts) if parts else ""

    def principal_of(self, token: str) -> str:
        """The token's principal; TokenError if it is forged or expired, or its user's
        credentials changed (or were deleted) after it was issued."""
        principal, binding = verify_claims(token, self._clock(), self.secret)
        kind, _, name = principal.partition(":")
        if kind != USER or not binding or binding != self.binding(name):
            raise TokenError(
                f"the credentials of {principal} were changed or deleted after the token "
                "was issued: log in again"
            )
        return principal


class SaslTokenInterceptor(WrappingInterceptor):
    """Outside the authorizing interceptor: the principal is known before it asks."""

    open_methods = OPEN

    def __init__(self, sasl: GrpcSasl) -> None:
        self.sasl = sasl

    def intercept(
        self, handler: grpc.RpcMethodHandler, method: str, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        token = next(
            (v for k, v in details.invocation_metadata or () if k == TOKEN_METADATA),  # type: ignore[attr-defined]
            None,
        )
        if token is None:
            return handler
        sasl = self.sasl

        def as_token_user(_request: Any, context: grpc.ServicerContext) -> Any:
            return with_token_principal(_principal(sasl, str(token), context, method))

        return wrap_handler(handler, as_token_user)


def _principal(sasl: GrpcSasl, token: str, context: grpc.ServicerContext, method: str) -> str:
    try:
        return sasl.principal_of(token)
    except TokenError as e:
        _log.warning(
            "grpc_authentication_failed",
            address=peer_host(context.peer()),
            method=method,
            reason=f"session token: {e}",
        )
        context.abort(grpc.StatusCode.UNAUTHENTICATED, f"SASL_AUTHENTICATION_FAILED: {e}")
        raise  # abort raises; for the type checker
