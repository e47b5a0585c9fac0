"""Which Kafka listener a coordinator's WriteTxnMarkers go to on another node, and its
TLS material: the inter-broker listener when it speaks Kafka's protocol, else this
node's first Kafka-protocol listener (brokers of one cluster configure the same
names), with its SASL login when it takes SASL, as a follower's fetcher logs in."""

from __future__ import annotations

import ssl
from collections.abc import Callable

from seglog.storage.errors import InvalidConfigError

from ..config import NodeConfig
from ..event_log import EventLogger
from ..replica_manager import ReplicaManager
from ..security.broker_client import broker_client_security
from ..security.inter_broker_sasl import InterBrokerLogin
from .marker_sender import AddressOf, LeaderOf, MarkerSender
from .verification_sender import LocalVerify, VerificationSender

_log = EventLogger("txn_markers")


def txn_markers_listener(config: NodeConfig) -> str:
    kafka = [
        n
        for n in config.listeners
        if n not in config.grpc_listener_names and n not in config.controller_listener_names
    ]
    if config.inter_broker_listener_name in kafka:
        return config.inter_broker_listener_name
    return kafka[0] if kafka else "PLAINTEXT"


def txn_markers_security(
    config: NodeConfig,
) -> tuple[ssl.SSLContext | None, InterBrokerLogin | None]:
    """The TLS context and SASL login of the markers' listener (either may be None)."""
    listener = txn_markers_listener(config)
    protocol = config.security_protocol_map.get(listener, "PLAINTEXT")
    return broker_client_security(config.raw, listener, protocol)


def new_marker_sender(
    config: NodeConfig,
    replica_manager: ReplicaManager,
    leader_of: LeaderOf,
    kafka_address_of: AddressOf,
    on_offsets_marker: Callable[[int, int, bool], None],
) -> MarkerSender:
    """The node's marker sender. A SASL markers listener without a usable login is
    logged at start and named again by every marker send it fails (a node that runs no
    transactions still starts)."""
    try:
        context, login = txn_markers_security(config)
        unavailable = None
    except InvalidConfigError as e:
        context, login, unavailable = None, None, str(e)
        _log.warning("txn_markers_login_unavailable", error=unavailable)
    return MarkerSender(
        config.node_id,
        replica_manager,
        leader_of,
        kafka_address_of,
        context,
        on_offsets_marker,
        login,
        unavailable,
    )


def new_verification_sender(
    config: NodeConfig,
    coordinator_of: Callable[[str], int],
    local_verify: LocalVerify,
    kafka_address_of: AddressOf,
) -> VerificationSender | None:
    """The leader's verification of transactional appends (KIP-890), over the same
    listener, TLS and login as the markers; None when
    transaction.partition.verification.enable is false."""
    if not config.log_settings.transaction_partition_verification_enable:
        return None
    try:
        context, login = txn_markers_security(config)
        unavailable = None
    except InvalidConfigError as e:
        context, login, unavailable = None, None, str(e)
    return VerificationSender(
        config.node_id,
        coordinator_of,
        local_verify,
        kafka_address_of,
        context,
        login,
        unavailable,
    )
