"""Cluster metadata (and the gRPC channels it holds) shared by the tasks that one
Python worker process runs.

Spark reuses its Python workers (`spark.python.worker.reuse`, on by default), and
a streaming query runs a task per partition every micro-batch, a batch read one
per offset range. Made per task, each would open its channels and ask for
metadata before its first Fetch or Produce. Shared, later tasks find the leaders
already known (metadata older than metadata.max.age.ms, or marked stale by a
leadership error, is asked again as before).

Only the metadata and connections are shared: a sink task still gets its own
producer id and sequence numbers. A process runs one task at a time, but the
metadata is thread-safe anyway. The cache is bounded: a process that talks to
more clusters than that drops the least recently used entry (not closed: a task
may still hold it; its channels close when the last holder lets go).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from seglog.client.cluster import ClusterMetadata

MAX_SHARED = 4

_lock = threading.Lock()
_shared: OrderedDict[tuple[str, int], ClusterMetadata] = OrderedDict()


def shared_metadata(bootstrap_servers: str, request_timeout_ms: int = 30_000) -> ClusterMetadata:
    """This process's ClusterMetadata for `bootstrap_servers`; callers must not close it."""
    key = (bootstrap_servers, request_timeout_ms)
    with _lock:
        metadata = _shared.get(key)
        if metadata is None:
            metadata = ClusterMetadata(bootstrap_servers, request_timeout_ms=request_timeout_ms)
            _shared[key] = metadata
            while len(_shared) > MAX_SHARED:
                _shared.popitem(last=False)
        else:
            _shared.move_to_end(key)
        return metadata
