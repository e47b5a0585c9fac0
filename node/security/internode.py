"""The credentials a node presents when it calls other nodes: on the controller
listener (Raft, broker registration and heartbeats, controller requests) and on
the inter-broker listener (replication), each with that listener's keystore."""

from __future__ import annotations

from typing import TYPE_CHECKING

import grpc

from .grpc_tls import listener_channel_credentials

if TYPE_CHECKING:
    from ..config import NodeConfig


def controller_credentials(config: NodeConfig) -> grpc.ChannelCredentials | None:
    listener = config.controller_listener
    if listener is None:
        return None
    return listener_channel_credentials(config.raw, config.security_protocol_map, listener.name)


def inter_broker_credentials(config: NodeConfig) -> grpc.ChannelCredentials | None:
    return listener_channel_credentials(
        config.raw, config.security_protocol_map, config.inter_broker_listener_name
    )
