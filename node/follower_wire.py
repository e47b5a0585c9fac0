"""Which wire a node's followers fetch over (replica.fetch.protocol): gRPC's Fetch on
the inter-broker gRPC listener (node/replica_fetcher.py), or Kafka's inter-broker
Fetch on the inter-broker Kafka listener from the node's event loop
(node/kafka/replica_client.py), with that listener's TLS material when it is SSL or
SASL_SSL and its SASL login when it is SASL_PLAINTEXT or SASL_SSL."""

from __future__ import annotations

from .config import NodeConfig
from .event_log import EventLogger
from .event_loop import NodeLoop
from .kafka.replica_client import KafkaReplicaFetcher
from .replica_fetcher import CarryOut, FetcherRounds, FollowerHost, NewFetcher, grpc_fetcher
from .security.broker_client import broker_client_security
from .security.internode import inter_broker_credentials

_log = EventLogger("replica_fetcher")


def new_fetcher(config: NodeConfig, loop: NodeLoop | None) -> NewFetcher:
    # Said at start: the default depends on the listeners (node/config.py).
    _log.info(
        "replica_fetch_protocol",
        protocol=config.replica_fetch_protocol,
        listener=config.inter_broker_listener_name,
        configured="replica.fetch.protocol" in config.raw,
    )
    if config.replica_fetch_protocol != "kafka":
        return grpc_fetcher(inter_broker_credentials(config))
    assert loop is not None, "replica.fetch.protocol=kafka runs on the node's event loop"
    listener = config.inter_broker_listener_name
    protocol = config.security_protocol_map.get(listener, "PLAINTEXT")
    context, login = broker_client_security(config.raw, listener, protocol)

    def new(
        manager: FollowerHost, carry_out: CarryOut, leader: int, address: tuple[str, int]
    ) -> FetcherRounds:
        return KafkaReplicaFetcher(manager, carry_out, leader, address, loop, context, login)

    return new
