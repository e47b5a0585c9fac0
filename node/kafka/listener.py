"""A node's Kafka listeners: every entry of `listeners` that is neither a gRPC
listener (`grpc.listener.names`) nor the controller's (`controller.listener.names`)
serves Kafka's wire protocol, e.g. `PLAINTEXT://0.0.0.0:9092`. Each gets its own
socket server with the Kafka handlers; Metadata answers list every broker's endpoint
on the listener the request came in on, as Kafka does."""

from __future__ import annotations

from collections.abc import Mapping

from ..config import Listener, NodeConfig, int_setting
from ..event_log import EventLogger
from ..event_loop import NodeLoop
from ..metrics import NodeMetrics, timed_kafka_handler
from ..security.kafka_gate import KafkaGate
from ..security.kafka_tls import ListenerTls
from .deferred import Deferred, Handler, HandlerFailed
from .handlers import KafkaApis
from .loop_server import LoopSocketServer
from .node_api import KafkaNode
from .socket_server import SocketServer
from .socket_settings import SocketSettings

_log = EventLogger("kafka")


def socket_settings(props: Mapping[str, str], num_io_threads: int) -> SocketSettings:
    """Kafka's socket server settings, by Kafka's names and with its defaults."""
    defaults = SocketSettings()

    def number(key: str, default: int) -> int:
        return int_setting(props, key, default, at_least=1)

    return SocketSettings(
        num_network_threads=number("num.network.threads", defaults.num_network_threads),
        num_io_threads=num_io_threads,
        queued_max_requests=number("queued.max.requests", defaults.queued_max_requests),
        socket_request_max_bytes=number(
            "socket.request.max.bytes", defaults.socket_request_max_bytes
        ),
        max_connections=number("max.connections", defaults.max_connections),
        connections_max_idle_ms=number("connections.max.idle.ms", defaults.connections_max_idle_ms),
    )


class KafkaListener:
    """One Kafka-protocol listener: bound on construction, start() serves, shutdown()
    stops."""

    def __init__(
        self,
        node: KafkaNode,
        listener: Listener,
        config: NodeConfig,
        metrics: NodeMetrics | None = None,
        node_loop: NodeLoop | None = None,
    ) -> None:
        """`node_loop`: the node's event loop (the event-loop model); None: threads."""
        self.name = listener.name
        self.settings = socket_settings(config.raw, config.num_io_threads)
        self.apis = KafkaApis(node, listener.name)
        self.apis.quorum_voters = dict(config.controller_quorum_voters)
        protocol = config.security_protocol_map.get(listener.name, "PLAINTEXT")
        tls = ListenerTls(config.raw, listener.name) if protocol in ("SSL", "SASL_SSL") else None
        security = getattr(node, "security", None)  # SecurityAdmin (a node has one)
        gate = KafkaGate(listener.name, protocol, config.raw, security) if security else None
        self.apis.authorizer = getattr(node, "authorizer", None)
        handler: Handler = self.apis
        if metrics is not None:
            handler = timed_kafka_handler(
                self.apis, metrics, listener.name, Deferred, HandlerFailed
            )
        on_sent = metrics.sent_observer(listener.name) if metrics is not None else None
        self.server: SocketServer | LoopSocketServer
        if node_loop is None:
            self.server = SocketServer(
                listener.host,
                listener.port,
                handler,
                self.settings,
                tls,
                listener.name,
                gate,
                on_sent=on_sent,
            )
        else:
            self.server = LoopSocketServer(
                listener.host,
                listener.port,
                handler,
                node_loop,
                self.settings,
                tls,
                listener.name,
                gate,
                on_sent=on_sent,
            )
        self.apis.stopped = self.server.stopped
        self.port = self.server.port

    def start(self) -> None:
        self.server.start()

    def shutdown(self) -> None:
        self.server.shutdown()


def start_kafka_listeners(
    node: KafkaNode,
    config: NodeConfig,
    metrics: NodeMetrics | None = None,
    node_loop: NodeLoop | None = None,
) -> list[KafkaListener]:
    """Bind and start every Kafka listener of the config (none: an empty list), on
    `node_loop` when kafka.listener.model=event-loop."""
    started: list[KafkaListener] = []
    loop = node_loop if config.kafka_listener_model == "event-loop" else None
    try:
        for listener in config.kafka_listeners:
            k = KafkaListener(node, listener, config, metrics, loop)
            k.start()
            started.append(k)
    except BaseException:
        for k in started:
            k.shutdown()
        raise
    return started
