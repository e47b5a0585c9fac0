"""seglog's clients in kafka-python's shapes: `from seglog.client import Producer,
Consumer, Admin`. Each is imported on first use, so that importing one client module
(or `seglog.client.errors`) does not load the others."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .admin import Admin, NewPartitions, NewTopic
    from .cluster import TopicPartition
    from .consumer import Consumer, ConsumerRebalanceListener
    from .errors import KafkaError
    from .producer import Producer

# name -> the module (of this package) that defines it
EXPORTS = {
    "Producer": "producer",
    "Consumer": "consumer",
    "ConsumerRebalanceListener": "consumer",
    "Admin": "admin",
    "NewTopic": "admin",
    "NewPartitions": "admin",
    "TopicPartition": "cluster",
    "KafkaError": "errors",
}
__all__ = [
    "Admin",
    "Consumer",
    "ConsumerRebalanceListener",
    "KafkaError",
    "NewPartitions",
    "NewTopic",
    "Producer",
    "TopicPartition",
]


def __getattr__(name: str) -> Any:
    module = EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
