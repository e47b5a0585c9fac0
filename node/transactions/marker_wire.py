"""Which Kafka listener a coordinator's WriteTxnMarkers go to on another node, and its
TLS material: the inter-broker listener when it speaks Kafka's protocol, else this
node's first Kafka-protocol listener (brokers of one cluster configure the same
names). SASL on that listener is not served yet (docs/transactions.md)."""

from __future__ import annotations

import ssl

from ..config import NodeConfig
from ..security.ssl_config import load_ssl_config


def txn_markers_listener(config: NodeConfig) -> str:
    kafka = [
        n
        for n in config.listeners
        if n not in config.grpc_listener_names and n not in config.controller_listener_names
    ]
    if config.inter_broker_listener_name in kafka:
        return config.inter_broker_listener_name
    return kafka[0] if kafka else "PLAINTEXT"


def txn_markers_ssl(config: NodeConfig) -> ssl.SSLContext | None:
    listener = txn_markers_listener(config)
    if config.security_protocol_map.get(listener, "PLAINTEXT") != "SSL":
        return None
    identify = config.raw.get("ssl.endpoint.identification.algorithm", "https")
    return load_ssl_config(config.raw, listener).client_context(bool(identify.strip()))
