"""What a listener's security protocol needs from the config, checked when the node's
config is read so that a missing keystore or a bad TLS setting stops the node at
start with the key named, never later on a client's first connection."""

from __future__ import annotations

from collections.abc import Mapping

from seglog.storage.errors import InvalidConfigError

from .sasl import parse_mechanisms
from .ssl_config import listener_setting, load_ssl_config


def check_listener_security(
    props: Mapping[str, str], listener: str, protocol: str, grpc: bool = False
) -> None:
    if grpc and protocol.startswith("SASL_"):
        raise InvalidConfigError(
            f"listener {listener} is a gRPC listener mapped to {protocol}: gRPC listeners "
            "serve PLAINTEXT or SSL (clients authenticate with TLS certificates there); "
            "SASL is served on Kafka listeners"
        )
    if protocol.startswith("SASL_"):
        raw = listener_setting(props, listener, "sasl.enabled.mechanisms") or "GSSAPI"
        try:
            parse_mechanisms(raw)
        except ValueError as e:
            raise InvalidConfigError(f"listener {listener}: {e}") from None
    if protocol not in ("SSL", "SASL_SSL"):
        return
    config = load_ssl_config(props, listener)
    if not config.has_keystore:
        raise InvalidConfigError(
            f"listener {listener} is mapped to {protocol} but has no ssl.keystore.location "
            f"(or listener.name.{listener.lower()}.ssl.keystore.location)"
        )
