"""The Kafka listener of a node: its address from the node's properties, the socket
server with the Kafka handlers, and the advertised listeners the broker registers.

Listener names follow Kafka's `listeners` syntax: `PLAINTEXT` is the Kafka protocol
(what Kafka clients use) and `GRPC` is seglog's gRPC endpoint, e.g.
`listeners=GRPC://0.0.0.0:9192,PLAINTEXT://0.0.0.0:9092`. A node whose `listeners`
names no GRPC entry serves gRPC on its only listener and no Kafka protocol (how every
node was configured before this listener existed)."""

from __future__ import annotations

from collections.abc import Mapping

from seglog.storage.errors import InvalidConfigError

from ..event_log import EventLogger
from .handlers import KafkaApis
from .node_api import KafkaNode
from .socket_server import SocketServer, SocketSettings

_log = EventLogger("kafka")
KAFKA_LISTENER = "PLAINTEXT"
GRPC_LISTENER = "GRPC"


def parse_listeners(key: str, value: str) -> dict[str, tuple[str, int]]:
    """`NAME://host:port,...` → {NAME: (host, port)}; an empty host is 0.0.0.0."""
    out: dict[str, tuple[str, int]] = {}
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, address = item.partition("://")
        host, colon, port = address.rpartition(":")
        if not sep or not colon or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise InvalidConfigError(
                f"Invalid value {value} for configuration {key}: expected NAME://host:port"
            )
        if name in out:
            raise InvalidConfigError(
                f"Invalid value {value} for configuration {key}: listener {name} appears twice"
            )
        out[name] = (host.strip("[]") or "0.0.0.0", int(port))
    return out


def kafka_bind_address(props: Mapping[str, str]) -> tuple[str, int] | None:
    """Where the Kafka listener binds, or None when the node serves none."""
    listeners = parse_listeners("listeners", props.get("listeners", ""))
    if GRPC_LISTENER not in listeners:
        return None
    return listeners.get(KAFKA_LISTENER)


def socket_settings(props: Mapping[str, str]) -> SocketSettings:
    defaults = SocketSettings()

    def number(key: str, default: int, at_least: int) -> int:
        raw = props.get(key)
        if raw is None:
            return default
        try:
            value = int(str(raw).strip())
        except ValueError:
            raise InvalidConfigError(
                f"Invalid value {raw} for configuration {key}: Not a number of type INT"
            ) from None
        if value < at_least:
            raise InvalidConfigError(
                f"Invalid value {raw} for configuration {key}: Value must be at least {at_least}"
            )
        return value

    return SocketSettings(
        num_network_threads=number("num.network.threads", defaults.num_network_threads, 1),
        num_io_threads=number("num.io.threads", defaults.num_io_threads, 1),
        queued_max_requests=number("queued.max.requests", defaults.queued_max_requests, 1),
        socket_request_max_bytes=number(
            "socket.request.max.bytes", defaults.socket_request_max_bytes, 1
        ),
        max_connections=number("max.connections", defaults.max_connections, 1),
        connections_max_idle_ms=number(
            "connections.max.idle.ms", defaults.connections_max_idle_ms, 1
        ),
    )


class KafkaListener:
    """The PLAINTEXT listener: start() binds and serves; shutdown() stops."""

    def __init__(self, node: KafkaNode, props: Mapping[str, str]) -> None:
        address = kafka_bind_address(props)
        if address is None:
            raise InvalidConfigError("listeners names no PLAINTEXT (Kafka) listener")
        self.props = props
        self.settings = socket_settings(props)
        self.apis = KafkaApis(node, KAFKA_LISTENER, props)
        self.server = SocketServer(address[0], address[1], self.apis, self.settings)
        self.apis.stopped = self.server.stopped
        self.port = self.server.port

    @classmethod
    def maybe_create(cls, node: KafkaNode, props: Mapping[str, str]) -> KafkaListener | None:
        return cls(node, props) if kafka_bind_address(props) is not None else None

    def start(self) -> None:
        self.server.start()

    def shutdown(self) -> None:
        self.server.shutdown()

    def advertised_listeners(self, grpc: tuple[str, int]) -> str:
        """What the broker registers: every listener with its advertised address
        (`advertised.listeners` when it names the listener, else the bound one, with
        127.0.0.1 for a wildcard host and the actual port for port 0)."""
        bound = parse_listeners("listeners", self.props.get("listeners", ""))
        advertised = parse_listeners(
            "advertised.listeners", self.props.get("advertised.listeners", "")
        )
        out = []
        for name, (host, port) in bound.items():
            if name in advertised:
                host, port = advertised[name]
            if name == GRPC_LISTENER:
                host, port = grpc
            elif name == KAFKA_LISTENER and port == 0:
                port = self.port
            if host in ("0.0.0.0", "::", ""):
                host = "127.0.0.1"
            out.append(f"{name}://{host}:{port}")
        return ",".join(out)
