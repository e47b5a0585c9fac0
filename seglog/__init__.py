"""seglog: a replicated commit log that stores partitions exactly as Apache Kafka does
and speaks Kafka's wire protocol. `from seglog import Producer, Consumer, Admin` (the
gRPC clients, also in `seglog.client`); the layers are the subpackages, see
docs/architecture.md. Names are resolved on first use: `import seglog.storage` loads
no client."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import seglog.client as _client  # its names load on first use: this imports no client

if TYPE_CHECKING:
    from seglog.client import *  # noqa: F403

    __version__: str

__all__ = [*_client.__all__, "__version__"]


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from importlib.metadata import version

        return version("seglog")
    if name in _client.__all__:
        return getattr(_client, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
