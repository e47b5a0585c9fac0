"""What a listener's security protocol needs from the config, checked when the node's
config is read so that a missing keystore or a bad TLS setting stops the node at
start with the key named, never later on a client's first connection."""

from __future__ import annotations

from collections.abc import Mapping

from seglog.storage.errors import InvalidConfigError

from .ssl_config import load_ssl_config


def check_listener_security(props: Mapping[str, str], listener: str, protocol: str) -> None:
    if protocol not in ("SSL", "SASL_SSL"):
        return
    config = load_ssl_config(props, listener)
    if not config.has_keystore:
        raise InvalidConfigError(
            f"listener {listener} is mapped to {protocol} but has no ssl.keystore.location "
            f"(or listener.name.{listener.lower()}.ssl.keystore.location)"
        )
