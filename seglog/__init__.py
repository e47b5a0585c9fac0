"""seglog: a replicated commit log that stores partitions exactly as Apache Kafka does
and speaks Kafka's wire protocol. `from seglog import Producer, Consumer, Admin` (the
gRPC clients, also in `seglog.client`); the layers are the subpackages, see
docs/architecture.md. Names are resolved on first use: `import seglog.storage` loads
no client."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from seglog.client import (
        Admin,
        Consumer,
        ConsumerRebalanceListener,
        KafkaError,
        NewPartitions,
        NewTopic,
        Producer,
        TopicPartition,
    )

__all__ = [
    "Admin",
    "Consumer",
    "ConsumerRebalanceListener",
    "KafkaError",
    "NewPartitions",
    "NewTopic",
    "Producer",
    "TopicPartition",
    "__version__",
]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import version

        return version("seglog")
    if name in __all__:
        import seglog.client

        return getattr(seglog.client, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
