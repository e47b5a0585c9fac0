"""TLS for gRPC: a gRPC listener mapped to SSL serves with the listener's keystore
(reloaded when its files change, gRPC asks before each handshake) and, with
`ssl.client.auth=required`, only to clients whose certificate its truststore
signs; a node's own calls to other nodes (replication, Raft, controller) present
the keystore of the listener they call and check the other side with the truststore."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import grpc

from seglog.storage.errors import InvalidConfigError

from ..event_log import EventLogger
from .ssl_config import ReloadingSsl, SslConfig, load_ssl_config

_log = EventLogger("security")
GRPC_PROTOCOLS = ("PLAINTEXT", "SSL")


def _certificate_configuration(config: SslConfig) -> grpc.ServerCertificateConfiguration:
    assert config.key_pem is not None and config.chain_pem is not None
    return grpc.ssl_server_certificate_configuration(
        [(config.key_pem, config.chain_pem)], root_certificates=config.trust_pem
    )


def server_credentials(props: Mapping[str, str], listener: str) -> grpc.ServerCredentials:
    """Credentials of a gRPC listener mapped to SSL; refuses what gRPC cannot do."""
    reloading = ReloadingSsl(
        lambda: load_ssl_config(props, listener),
        lambda why: _log.error("ssl_reload_failed", listener=listener, error=why),
    )
    config = reloading.config
    if not config.has_keystore:
        raise InvalidConfigError(
            f"listener {listener} is mapped to SSL but has no ssl.keystore.location"
        )
    if config.client_auth == "requested":
        raise InvalidConfigError(
            f"ssl.client.auth=requested on the gRPC listener {listener}: gRPC either "
            "requires a client certificate or does not ask for one (use required or none)"
        )
    seen = reloading.generation

    def fetch() -> grpc.ServerCertificateConfiguration | None:
        nonlocal seen
        reloading.check()
        if reloading.generation == seen:
            return None
        seen = reloading.generation
        _log.info("ssl_reloaded", listener=listener)
        return _certificate_configuration(reloading.config)

    return grpc.dynamic_ssl_server_credentials(
        _certificate_configuration(config),
        fetch,
        require_client_authentication=config.client_auth == "required",
    )


def channel_credentials(config: SslConfig) -> grpc.ChannelCredentials:
    return grpc.ssl_channel_credentials(
        root_certificates=config.trust_pem,
        private_key=config.key_pem,
        certificate_chain=config.chain_pem,
    )


def listener_channel_credentials(
    props: Mapping[str, str], protocol_map: Mapping[str, str], listener: str
) -> grpc.ChannelCredentials | None:
    """What a node presents when it calls another node's `listener` (None: plaintext):
    the same listener's keystore and truststore, as Kafka's inter-broker client uses
    the inter-broker listener's."""
    protocol = protocol_map.get(listener, "PLAINTEXT")
    if protocol == "PLAINTEXT":
        return None
    if protocol != "SSL":
        raise InvalidConfigError(
            f"listener {listener} is mapped to {protocol}: seglog's gRPC listeners serve "
            f"{' or '.join(GRPC_PROTOCOLS)} only"
        )
    return channel_credentials(load_ssl_config(props, listener))


def open_channel(
    target: str,
    options: Sequence[tuple[str, Any]] | None = None,
    credentials: grpc.ChannelCredentials | None = None,
) -> grpc.Channel:
    """A channel to another node: TLS when credentials are given."""
    if credentials is None:
        return grpc.insecure_channel(target, options)
    return grpc.secure_channel(target, credentials, options)


def add_port(
    server: grpc.Server,
    address: str,
    props: Mapping[str, str],
    protocol_map: Mapping[str, str],
    listener: str,
) -> int:
    """Bind a gRPC listener, with TLS when it is mapped to SSL; 0 when it cannot bind."""
    protocol = protocol_map.get(listener, "PLAINTEXT")
    if protocol == "PLAINTEXT":
        return server.add_insecure_port(address)
    if protocol != "SSL":
        raise InvalidConfigError(
            f"listener {listener} is mapped to {protocol}: seglog's gRPC listeners serve "
            f"{' or '.join(GRPC_PROTOCOLS)} only"
        )
    return server.add_secure_port(address, server_credentials(props, listener))
