"""What the Kafka handlers need from the node: the same surface as the gRPC
service's (`seglog.node.node_services.NodeServices`)."""

from __future__ import annotations

from ..node_services import NodeServices as KafkaNode

__all__ = ["KafkaNode"]
