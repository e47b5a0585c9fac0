"""A Kafka listener's socket server settings, by Kafka's names and with its defaults
(node/kafka/listener.py reads them from the node's properties)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SocketSettings:
    """Kafka's names and defaults (socket.request.max.bytes: 100 MiB)."""

    num_network_threads: int = 3
    num_io_threads: int = 8
    queued_max_requests: int = 500
    socket_request_max_bytes: int = 104_857_600
    max_connections: int = 1000
    connections_max_idle_ms: int = 600_000
    # Threads that wait out delayed requests (acks=all produces, long-polling
    # fetches), so that waits never hold the num.io.threads handlers: seglog's
    # stand-in for Kafka's purgatory. 0: 4 per io thread.
    num_delayed_threads: int = 0

    @property
    def delayed_threads(self) -> int:
        return self.num_delayed_threads or 4 * self.num_io_threads
