"""Kafka's principals: `User:name`. A TLS client is named by its certificate's subject
in RFC 2253 form (Kafka's default `ssl.principal.mapping.rules=DEFAULT`), a SASL client
by its user name, and anyone else is `User:ANONYMOUS`."""

from __future__ import annotations

from dataclasses import dataclass

from cryptography import x509

USER = "User"


@dataclass(frozen=True, slots=True, order=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """`User:alice` → KafkaPrincipal("User", "alice"); a clear error otherwise."""
        kind, colon, name = text.partition(":")
        if not colon or not kind or not name:
            raise ValueError(f"principal {text!r} is not TYPE:NAME (e.g. User:alice)")
        return cls(kind, name)


ANONYMOUS = KafkaPrincipal(USER, "ANONYMOUS")


def user(name: str) -> KafkaPrincipal:
    return KafkaPrincipal(USER, name)


def certificate_principal(der: bytes | None) -> KafkaPrincipal:
    """The principal of a peer's certificate (DER), ANONYMOUS without one."""
    if not der:
        return ANONYMOUS
    subject = x509.load_der_x509_certificate(der).subject
    return user(subject.rfc4514_string())
