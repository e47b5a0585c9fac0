"""Who is calling a gRPC service: the subject of the client's certificate on a
listener with `ssl.client.auth=required` (Kafka's principal for a TLS client, RFC 2253
form), else `User:ANONYMOUS`; and from which address."""

from __future__ import annotations

import grpc

from .principal import ANONYMOUS, user


def grpc_principal(context: grpc.ServicerContext) -> tuple[str, str]:
    auth = context.auth_context()
    subject = auth.get("x509_subject")
    principal = user(subject[0].decode()) if subject else ANONYMOUS
    return str(principal), peer_host(context.peer())


def peer_host(peer: str) -> str:
    """`ipv4:127.0.0.1:5000` → `127.0.0.1`, `ipv6:[::1]:5000` → `::1`."""
    _, _, address = peer.partition(":")
    host, _, _ = address.rpartition(":")
    return host.strip("[]") or address
