"""Security in front of a Kafka listener's handlers, per connection:

- on a SASL_PLAINTEXT or SASL_SSL listener a connection must authenticate first
  (SaslHandshake, then SaslAuthenticate with the mechanism's tokens); before that
  only ApiVersions and those two are answered, anything else closes the connection,
  as Kafka does. A failed authentication is answered SASL_AUTHENTICATION_FAILED after
  `connection.failed.authentication.delay.ms`, logged once with the user and the
  address, and the connection is closed at its next request;
- KIP-368: with `connections.max.reauth.ms` set (Kafka's default 0: never), a SASL
  session lasts that long (SaslAuthenticate's session lifetime); the client
  re-authenticates on the same connection (SaslHandshake and SaslAuthenticate again,
  with the same principal and mechanism, else SASL_AUTHENTICATION_FAILED), and a
  connection whose session ended is closed at its next other request, as Kafka does;
- the connection's principal (SASL user, else the TLS client certificate's subject,
  else User:ANONYMOUS) and address are what the handlers authorize with
  (`current_session()`, set around each handler call);
- CreateAcls, DescribeAcls, DeleteAcls, AlterUserScramCredentials and
  DescribeUserScramCredentials are answered here, by the node's SecurityAdmin."""

from __future__ import annotations

import contextvars
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from seglog.storage.disk_and_clock import plain_monotonic_s
from seglog.storage.errors import InvalidConfigError

from ..config import int_setting
from ..event_log import EventLogger
from ..kafka.codec import KafkaRequest, Part, encode_response, response_class
from ..kafka.deferred import Deferred, Handler
from ..kafka.errors import error_code
from .acls import AclBinding, AclFilter, AclOperation, PatternType, PermissionType, ResourceType
from .node_authorizer import NodeAuthorizer
from .principal import ANONYMOUS, KafkaPrincipal
from .sasl import SaslSession, jaas_plain_users, parse_mechanisms
from .security_admin import SecurityAdmin
from .ssl_config import listener_setting

_log = EventLogger("security")
SASL_HANDSHAKE, SASL_AUTHENTICATE, API_VERSIONS = 17, 36, 18
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
DESCRIBE_SCRAM, ALTER_SCRAM = 50, 51
DEFAULT_FAILED_AUTHENTICATION_DELAY_MS = 100


class CloseConnection(Exception):
    """The connection is to be closed without an answer (Kafka's way with a request
    that arrives before authentication or after a failed one)."""


@dataclass
class KafkaSession:
    host: str
    principal: KafkaPrincipal = ANONYMOUS
    sasl: SaslSession | None = None
    # KIP-368: when the authenticated session ends (plain_monotonic_s()); None: never.
    expires_at: float | None = None
    # During a re-authentication: the principal and mechanism it must keep.
    previous: tuple[KafkaPrincipal, str | None] | None = None


_CURRENT: contextvars.ContextVar[KafkaSession | None] = contextvars.ContextVar(
    "kafka_session", default=None
)


def current_session() -> KafkaSession | None:
    return _CURRENT.get()


def allowed(
    authorizer: NodeAuthorizer | None, operation: AclOperation, rtype: ResourceType, name: str
) -> bool:
    """May the connection whose request is being handled do this? (No authorizer: yes.)"""
    if authorizer is None:
        return True
    session = _CURRENT.get()
    principal, host = (str(session.principal), session.host) if session else (str(ANONYMOUS), "")
    return authorizer.authorize(principal, host, operation, rtype, name)


def allowed_on_any(
    authorizer: NodeAuthorizer | None, operation: AclOperation, rtype: ResourceType
) -> bool:
    if authorizer is None:
        return True
    session = _CURRENT.get()
    principal, host = (str(session.principal), session.host) if session else (str(ANONYMOUS), "")
    return authorizer.allowed_on_any(principal, host, operation, rtype)


def caller_may(
    authorizer: NodeAuthorizer,
) -> Callable[[AclOperation, ResourceType, str], bool]:
    """The authorizer bound to the connection whose request is being handled, for
    checks made later on another thread (a group answer filtered when it comes)."""
    session = _CURRENT.get()
    principal, host = (str(session.principal), session.host) if session else (str(ANONYMOUS), "")
    return lambda op, rtype, name: authorizer.authorize(principal, host, op, rtype, name)


# What KIP-430's authorized-operations bit fields may hold, by resource (Kafka's
# AclEntry.supportedOperations).
SUPPORTED_OPERATIONS = {
    ResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    ),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
}


def authorized_operations(
    authorizer: NodeAuthorizer | None, rtype: ResourceType, name: str
) -> set[int]:
    """KIP-430's bit field of what the caller may do, as the codec takes it: the set
    of the bits (operation codes) that are on."""
    return {
        int(op)
        for op in SUPPORTED_OPERATIONS[rtype]
        if authorizer is None or allowed(authorizer, op, rtype, name)
    }


class KafkaGate:
    def __init__(
        self,
        listener: str,
        protocol: str,
        props: Mapping[str, str],
        admin: SecurityAdmin,
    ) -> None:
        self.listener = listener
        self.sasl = protocol.startswith("SASL_")
        self.admin = admin
        self.mechanisms: tuple[str, ...] = ()
        self.jaas_users: dict[str, str] = {}
        if self.sasl:
            raw = listener_setting(props, listener, "sasl.enabled.mechanisms") or "GSSAPI"
            try:
                self.mechanisms = parse_mechanisms(raw)
            except ValueError as e:
                raise InvalidConfigError(str(e)) from None
            jaas = props.get(
                f"listener.name.{listener.lower()}.plain.sasl.jaas.config"
            ) or props.get("sasl.jaas.config")
            self.jaas_users = jaas_plain_users(jaas)
        reauth = listener_setting(props, listener, "connections.max.reauth.ms")
        self.max_reauth_ms = int_setting(
            {"connections.max.reauth.ms": reauth} if reauth is not None else {},
            "connections.max.reauth.ms",
            0,
            at_least=0,
        )
        self.failed_delay_s = (
            int_setting(
                props,
                "connection.failed.authentication.delay.ms",
                DEFAULT_FAILED_AUTHENTICATION_DELAY_MS,
                at_least=0,
            )
            / 1000
        )

    def new_session(self, host: str, tls_principal: KafkaPrincipal) -> KafkaSession:
        session = KafkaSession(host, tls_principal)
        if self.sasl:
            session.sasl = self._sasl_session()
        return session

    def _sasl_session(self) -> SaslSession:
        return SaslSession(
            self.mechanisms,
            self.admin.scram_credential,
            self.jaas_users,
            lambda: os.urandom(18).hex(),
            lambda: os.urandom(32),
        )

    def __call__(
        self, session: KafkaSession, request: KafkaRequest, inner: Handler
    ) -> list[Part] | None | Deferred:
        key = request.api_key
        sasl = session.sasl
        if sasl is not None and not sasl.authenticated:
            if sasl.state == "failed":
                raise CloseConnection("request after a failed authentication")
            if key == SASL_HANDSHAKE:
                return self._handshake(session, request)
            if key == SASL_AUTHENTICATE:
                return self._authenticate(session, request)
            if key != API_VERSIONS:
                _log.warning(
                    "kafka_unauthenticated_request",
                    listener=self.listener,
                    address=session.host,
                    api=request.spec.name,
                )
                raise CloseConnection(f"{request.spec.name} before authentication")
        elif sasl is not None and key == SASL_HANDSHAKE and session.expires_at is not None:
            # KIP-368: the client re-authenticates before its session ends.
            session.previous = (session.principal, sasl.mechanism)
            session.sasl = self._sasl_session()
            return self._handshake(session, request)
        elif key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
            # Not a SASL listener, or authenticated already: Kafka's answer.
            return self._illegal_sasl_state(request)
        elif session.expires_at is not None and plain_monotonic_s() >= session.expires_at:
            _log.info(
                "kafka_session_expired",
                listener=self.listener,
                address=session.host,
                principal=str(session.principal),
                api=request.spec.name,
            )
            raise CloseConnection(f"{request.spec.name} after the session expired")
        token = _CURRENT.set(session)
        try:
            if key in (DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS, DESCRIBE_SCRAM, ALTER_SCRAM):
                return self._admin(session, request)
            return inner(request)
        finally:
            _CURRENT.reset(token)

    # --- SASL -----------------------------------------------------------------------

    def _handshake(self, session: KafkaSession, request: KafkaRequest) -> list[Part]:
        assert session.sasl is not None
        mechanism = request.body.mechanism
        error = session.sasl.handshake(mechanism)
        if error != "NONE":
            _log.warning(
                "kafka_authentication_failed",
                listener=self.listener,
                address=session.host,
                mechanism=mechanism,
                reason=f"{error}: {mechanism!r} (enabled: {', '.join(self.mechanisms)})",
            )
        cls = response_class(request)
        return encode_response(
            request, cls(error_code=error_code(error), mechanisms=list(self.mechanisms))
        )

    def _authenticate(self, session: KafkaSession, request: KafkaRequest) -> list[Part] | Deferred:
        assert session.sasl is not None
        step = session.sasl.authenticate(bytes(request.body.auth_bytes))
        cls = response_class(request)
        lifetime = 0
        previous = session.previous
        if step.error == "NONE" and session.sasl.authenticated and previous is not None:
            if (session.sasl.principal, session.sasl.mechanism) != previous:
                # Kafka: a re-authentication may not change the principal or mechanism.
                step = replace(
                    step,
                    error="SASL_AUTHENTICATION_FAILED",
                    message="Cannot change principals or mechanism during re-authentication",
                    reason=f"re-authentication as {session.sasl.principal} "
                    f"({session.sasl.mechanism}) after {previous[0]} ({previous[1]})",
                )
                session.sasl.state = "failed"
        if step.error == "NONE" and session.sasl.authenticated and self.max_reauth_ms:
            lifetime = self.max_reauth_ms
            session.expires_at = plain_monotonic_s() + lifetime / 1000
        body = cls(
            error_code=error_code(step.error),
            error_message=step.message or None,
            auth_bytes=step.token,
            session_lifetime_ms=lifetime,
        )
        parts = encode_response(request, body)
        if step.error == "NONE":
            if session.sasl.authenticated:
                session.previous = None
                session.principal = session.sasl.principal
                _log.info(
                    "kafka_authenticated",
                    listener=self.listener,
                    address=session.host,
                    principal=str(session.principal),
                    mechanism=session.sasl.mechanism,
                )
            return parts
        _log.warning(
            "kafka_authentication_failed",
            listener=self.listener,
            address=session.host,
            user=session.sasl.user,
            mechanism=session.sasl.mechanism,
            reason=step.reason or step.error,
        )
        delay = self.failed_delay_s

        def later() -> list[Part]:
            time.sleep(delay)  # on a delayed thread: a guesser waits, others do not
            return parts

        return Deferred(later) if delay > 0 else parts

    def _illegal_sasl_state(self, request: KafkaRequest) -> list[Part]:
        cls = response_class(request)
        code = error_code("ILLEGAL_SASL_STATE")
        if request.api_key == SASL_HANDSHAKE:
            return encode_response(request, cls(error_code=code, mechanisms=list(self.mechanisms)))
        return encode_response(
            request,
            cls(
                error_code=code,
                error_message="SASL is not expected on this connection",
                auth_bytes=b"",
                session_lifetime_ms=0,
            ),
        )

    # --- ACLs and SCRAM credentials -------------------------------------------------

    def _admin(self, session: KafkaSession, request: KafkaRequest) -> list[Part]:
        principal, host = str(session.principal), session.host
        req, cls = request.body, response_class(request)
        key = request.api_key
        if key == CREATE_ACLS:
            bindings: list[AclBinding | None] = []
            for c in req.creations:
                try:
                    bindings.append(
                        AclBinding(
                            ResourceType(c.resource_type),
                            c.resource_name,
                            PatternType(c.resource_pattern_type),
                            c.principal,
                            c.host,
                            AclOperation(c.operation),
                            PermissionType(c.permission_type),
                        )
                    )
                except ValueError:
                    bindings.append(None)
            valid = [b for b in bindings if b is not None]
            answers = iter(self.admin.create_acls(principal, host, valid))
            results = []
            for b in bindings:
                e, m = next(answers) if b is not None else ("INVALID_REQUEST", "unknown code")
                results.append(
                    cls.AclCreationResult(error_code=error_code(e), error_message=m or None)
                )
            return encode_response(request, cls(throttle_time_ms=0, results=results))
        if key == DESCRIBE_ACLS:
            error, message, found = self.admin.describe_acls(principal, host, _filter(req))
            grouped: dict[tuple[int, str, int], list[Any]] = {}
            for b in found:
                grouped.setdefault(
                    (int(b.resource_type), b.resource_name, int(b.pattern_type)), []
                ).append(
                    cls.DescribeAclsResource.AclDescription(
                        principal=b.principal,
                        host=b.host,
                        operation=int(b.operation),
                        permission_type=int(b.permission),
                    )
                )
            resources = [
                cls.DescribeAclsResource(
                    resource_type=rt, resource_name=rn, pattern_type=pt, acls=acls
                )
                for (rt, rn, pt), acls in sorted(grouped.items())
            ]
            return encode_response(
                request,
                cls(
                    throttle_time_ms=0,
                    error_code=error_code(error),
                    error_message=message or None,
                    resources=resources,
                ),
            )
        if key == DELETE_ACLS:
            filters = [_filter(f) for f in req.filters]
            out = []
            for e, m, matched in self.admin.delete_acls(principal, host, filters):
                out.append(
                    cls.DeleteAclsFilterResult(
                        error_code=error_code(e),
                        error_message=m or None,
                        matching_acls=[
                            cls.DeleteAclsFilterResult.DeleteAclsMatchingAcl(
                                error_code=0, error_message=None, **b.wire_fields()
                            )
                            for b in matched
                        ],
                    )
                )
            return encode_response(request, cls(throttle_time_ms=0, filter_results=out))
        if key == ALTER_SCRAM:
            results = self.admin.alter_scram(
                principal,
                host,
                [(d.name, d.mechanism) for d in req.deletions],
                [
                    (u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password))
                    for u in req.upsertions
                ],
            )
            return encode_response(
                request,
                cls(
                    throttle_time_ms=0,
                    results=[
                        cls.AlterUserScramCredentialsResult(
                            user=u, error_code=error_code(e), error_message=m or None
                        )
                        for u, e, m in results
                    ],
                ),
            )
        users = [u.name for u in req.users] if req.users else None
        described = self.admin.describe_scram(principal, host, users)
        R = cls.DescribeUserScramCredentialsResult
        return encode_response(
            request,
            cls(
                throttle_time_ms=0,
                error_code=0,
                error_message=None,
                results=[
                    R(
                        user=u,
                        error_code=error_code(e),
                        error_message=m or None,
                        credential_infos=[
                            R.CredentialInfo(mechanism=mech, iterations=it) for mech, it in creds
                        ],
                    )
                    for u, e, m, creds in described
                ],
            ),
        )


def _filter(f: Any) -> AclFilter:
    return AclFilter(
        ResourceType(f.resource_type_filter),
        f.resource_name_filter,
        PatternType(f.pattern_type_filter),
        f.principal_filter,
        f.host_filter,
        AclOperation(f.operation),
        PermissionType(f.permission_type),
    )
