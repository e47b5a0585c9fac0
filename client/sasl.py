"""SASL for seglog's gRPC clients: a channel whose calls carry a session token. The
first call on the channel (and any call after the token's lifetime is mostly spent)
runs the Security service's SaslAuthenticate exchange (PLAIN, SCRAM-SHA-256 or
SCRAM-SHA-512) with the user's password, and every call then sends the token in its
`seglog-sasl-token` metadata entry; the node makes the user the call's principal
(`User:<name>`) for its ACLs. A refused login raises Kafka's error
(SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM, ...). The password is only
sent as is with PLAIN: use SSL with it."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import grpc

from seglog.proto import security_pb2, security_pb2_grpc

from .errors import KafkaConfigurationError, KafkaError, for_code
from .scram import HASHES, ScramClient, ScramError

TOKEN_METADATA = "seglog-sasl-token"
SASL_MECHANISMS = ("PLAIN", *HASHES)
REFRESH_FRACTION = 0.8  # log in again once this much of the token's life is spent
LOGIN_TIMEOUT_S = 30.0


def check_mechanism(mechanism: str) -> str:
    name = mechanism.strip().upper()
    if name not in SASL_MECHANISMS:
        raise KafkaConfigurationError(
            f"sasl_mechanism={mechanism}: seglog's clients speak {', '.join(SASL_MECHANISMS)}"
        )
    return name


class SaslLogin:
    """One user's token for one node (a channel), renewed when it nears its end."""

    def __init__(self, channel: grpc.Channel, mechanism: str, user: str, password: str) -> None:
        self._stub = security_pb2_grpc.SecurityStub(channel)
        self.mechanism = mechanism
        self.user = user
        self._password = password
        self._lock = threading.Lock()
        self._token = ""
        self._renew_at = 0.0

    def token(self) -> str:
        with self._lock:
            if not self._token or time.monotonic() >= self._renew_at:
                self._token, lifetime_ms = self._login()
                self._renew_at = time.monotonic() + lifetime_ms / 1000 * REFRESH_FRACTION
            return self._token

    def _step(self, auth_bytes: bytes, session_id: str = "") -> Any:
        r = self._stub.SaslAuthenticate(
            security_pb2.SaslAuthenticateRequest(
                mechanism=self.mechanism, auth_bytes=auth_bytes, session_id=session_id
            ),
            timeout=LOGIN_TIMEOUT_S,
        )
        if r.error_code != 0:
            raise for_code(r.error_code, r.error_message or f"{self.mechanism} login failed")
        return r

    def _login(self) -> tuple[str, int]:
        if self.mechanism == "PLAIN":
            r = self._step(f"\0{self.user}\0{self._password}".encode())
        else:
            scram = ScramClient(self.mechanism, self.user, self._password, os.urandom(18).hex())
            first = self._step(scram.first())
            try:
                final = scram.final(first.auth_bytes)
            except ScramError as e:
                raise KafkaError(f"SCRAM exchange with the node failed: {e}") from None
            r = self._step(final, first.session_id)
            try:
                scram.verify(r.auth_bytes)
            except ScramError as e:  # not the node that holds our credential
                raise KafkaError(f"the node's SCRAM signature is wrong: {e}") from None
        if not r.token:
            raise KafkaError("the node answered the SASL exchange without a session token")
        return r.token, r.session_lifetime_ms


class _Details(NamedTuple):
    method: str
    timeout: float | None
    metadata: Any
    credentials: Any
    wait_for_ready: Any
    compression: Any


class _TokenInterceptor(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    def __init__(self, token: Callable[[], str]) -> None:
        self._token = token

    def _details(self, d: Any) -> _Details:
        metadata = [*(d.metadata or ()), (TOKEN_METADATA, self._token())]
        return _Details(
            d.method,
            d.timeout,
            metadata,
            d.credentials,
            getattr(d, "wait_for_ready", None),
            getattr(d, "compression", None),
        )

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation: Any, details: Any, requests: Any) -> Any:
        return continuation(self._details(details), requests)

    def intercept_stream_stream(self, continuation: Any, details: Any, requests: Any) -> Any:
        return continuation(self._details(details), requests)


def sasl_channel(channel: grpc.Channel, mechanism: str, user: str, password: str) -> grpc.Channel:
    """`channel` with every call carrying the user's session token."""
    login = SaslLogin(channel, mechanism, user, password)
    return grpc.intercept_channel(channel, _TokenInterceptor(login.token))
