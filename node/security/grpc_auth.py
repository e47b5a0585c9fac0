"""Who is calling a gRPC service: the user of a valid SASL session token the call
carries (set by grpc_sasl.SaslTokenInterceptor around the call), else the subject of
the client's certificate on a listener with `ssl.client.auth=required` (Kafka's
principal for a TLS client, RFC 2253 form), else `User:ANONYMOUS`; and from which
address."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

import grpc

from .principal import ANONYMOUS, user

TOKEN_METADATA = "seglog-sasl-token"
_TOKEN_PRINCIPAL: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "grpc_token_principal", default=None
)


@contextlib.contextmanager
def with_token_principal(principal: str) -> Iterator[None]:
    token = _TOKEN_PRINCIPAL.set(principal)
    try:
        yield
    finally:
        _TOKEN_PRINCIPAL.reset(token)


def grpc_principal(context: grpc.ServicerContext) -> tuple[str, str]:
    sasl = _TOKEN_PRINCIPAL.get()
    if sasl is not None:
        return sasl, peer_host(context.peer())
    auth = context.auth_context()
    subject = auth.get("x509_subject")
    principal = user(subject[0].decode()) if subject else ANONYMOUS
    return str(principal), peer_host(context.peer())


def peer_host(peer: str) -> str:
    """`ipv4:127.0.0.1:5000` → `127.0.0.1`, `ipv6:[::1]:5000` → `::1`."""
    _, _, address = peer.partition(":")
    host, _, _ = address.rpartition(":")
    return host.strip("[]") or address
