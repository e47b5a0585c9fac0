"""How seglog's clients reach a secured cluster, by kafka-python's option names:
`security_protocol` (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL), `ssl_cafile` (the CA
certificates that sign the nodes' certificates), `ssl_certfile` and `ssl_keyfile` (the
client's own certificate and key, for a listener with `ssl.client.auth=required`; one
PEM file may hold both), `ssl_password` (for an encrypted key), and for SASL
`sasl_mechanism`, `sasl_plain_username`, `sasl_plain_password` (client/sasl.py: a
session token on every call). A Kafka tool's `--command-config` file uses Kafka's
names (`security.protocol`, `ssl.truststore.location`, `ssl.keystore.location`,
`ssl.key.password`, `sasl.mechanism`, `sasl.jaas.config`, or librdkafka's
`sasl.username` and `sasl.password`) and maps onto the same."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import grpc
from cryptography.hazmat.primitives import serialization

from .errors import KafkaConfigurationError
from .sasl import check_mechanism, sasl_channel

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SSL_OPTIONS = ("ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password")
SASL_OPTIONS = ("sasl_mechanism", "sasl_plain_username", "sasl_plain_password")
OPTIONS = ("security_protocol", *SSL_OPTIONS, *SASL_OPTIONS)
# Kafka's client property → kafka-python's option.
PROPERTY_NAMES = {
    "security.protocol": "security_protocol",
    "ssl.truststore.location": "ssl_cafile",
    "ssl.keystore.location": "ssl_certfile",
    "ssl.key.password": "ssl_password",
    # librdkafka's names for the SASL login (Kafka's sasl.jaas.config is read too)
    "sasl.mechanism": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
}
_JAAS_OPTION = re.compile(r'\b(username|password)\s*=\s*"([^"]*)"')
PEM_ONLY = ("ssl.truststore.type", "ssl.keystore.type")


def _read(option: str, path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise KafkaConfigurationError(f"{option}={path}: {e}") from None


@dataclass(frozen=True)
class ClientSecurity:
    security_protocol: str = "PLAINTEXT"
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_password: str | None = None
    sasl_mechanism: str | None = None
    sasl_plain_username: str | None = None
    sasl_plain_password: str | None = None

    @classmethod
    def from_options(cls, options: Mapping[str, object]) -> ClientSecurity:
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise KafkaConfigurationError(
                f"unknown option(s) {unknown}; the security options are {list(OPTIONS)}"
            )
        values = {k: (None if v is None else str(v)) for k, v in options.items()}
        protocol = (values.pop("security_protocol", None) or "PLAINTEXT").upper()
        if protocol not in PROTOCOLS:
            raise KafkaConfigurationError(
                f"security_protocol={protocol}: seglog's clients speak {' or '.join(PROTOCOLS)}"
            )
        security = cls(security_protocol=protocol, **values)
        if not protocol.endswith("SSL") and any(values.get(k) for k in SSL_OPTIONS):
            raise KafkaConfigurationError(
                f"ssl_* options were given but security_protocol is {protocol}: set "
                "security_protocol='SSL' (or 'SASL_SSL')"
            )
        sasl = [values.get(k) for k in SASL_OPTIONS]
        if protocol.startswith("SASL_"):
            if not all(sasl):
                raise KafkaConfigurationError(
                    f"security_protocol={protocol} needs {', '.join(SASL_OPTIONS)}"
                )
            security = replace(security, sasl_mechanism=check_mechanism(sasl[0] or ""))
        elif any(sasl):
            raise KafkaConfigurationError(
                f"sasl_* options were given but security_protocol is {protocol}: set "
                "security_protocol='SASL_SSL' (or 'SASL_PLAINTEXT')"
            )
        if security.ssl_keyfile and not security.ssl_certfile:
            raise KafkaConfigurationError("ssl_keyfile needs ssl_certfile")
        security.channel_credentials()  # the files are read now: a bad one fails here
        return security

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> ClientSecurity:
        """A `--command-config` file's Kafka client properties."""
        options: dict[str, object] = {}
        for key, value in props.items():
            if key == "sasl.jaas.config":  # Kafka's: ...LoginModule required username=...
                for name, found in _JAAS_OPTION.findall(value):
                    options.setdefault(f"sasl_plain_{name}", found)
                continue
            if key in PEM_ONLY:
                if value.strip().upper() != "PEM":
                    raise KafkaConfigurationError(f"{key}={value}: seglog reads PEM files only")
                continue
            if key not in PROPERTY_NAMES:
                raise KafkaConfigurationError(
                    f"{key} in the command config is not a setting seglog's tools know "
                    "(they read "
                    f"{', '.join(sorted([*PROPERTY_NAMES, *PEM_ONLY, 'sasl.jaas.config']))})"
                )
            options[PROPERTY_NAMES[key]] = value.strip()
        return cls.from_options(options)

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol.endswith("SSL")

    def channel_credentials(self) -> grpc.ChannelCredentials | None:
        """None for plaintext; else TLS that checks the node against ssl_cafile (the
        system's CAs without one) and presents the client's certificate when given."""
        if not self.uses_tls:
            return None
        root = _read("ssl_cafile", self.ssl_cafile) if self.ssl_cafile else None
        key = chain = None
        if self.ssl_certfile:
            chain = _read("ssl_certfile", self.ssl_certfile)
            key_source = _read("ssl_keyfile", self.ssl_keyfile) if self.ssl_keyfile else chain
            try:
                loaded = serialization.load_pem_private_key(
                    key_source, self.ssl_password.encode() if self.ssl_password else None
                )
            except (ValueError, TypeError) as e:
                where = "ssl_keyfile" if self.ssl_keyfile else "ssl_certfile"
                raise KafkaConfigurationError(f"{where}: no usable PEM private key ({e})") from None
            key = loaded.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        return grpc.ssl_channel_credentials(
            root_certificates=root, private_key=key, certificate_chain=chain
        )

    def channel(self, target: str, options: list[tuple[str, Any]]) -> grpc.Channel:
        """A channel to one node: TLS for SSL/SASL_SSL, and with SASL every call
        carries the user's session token (client/sasl.py)."""
        credentials = self.channel_credentials()
        channel = (
            grpc.insecure_channel(target, options)
            if credentials is None
            else grpc.secure_channel(target, credentials, options)
        )
        if not self.security_protocol.startswith("SASL_"):
            return channel
        return sasl_channel(
            channel,
            self.sasl_mechanism or "",
            self.sasl_plain_username or "",
            self.sasl_plain_password or "",
        )
