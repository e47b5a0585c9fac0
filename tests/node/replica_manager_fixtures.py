"""A real ReplicaManager over real logs, node 1 leading topic `t`'s partitions, for tests
of the fetch paths (sessions, wake-ups)."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from seglog.controller.metadata_image import PartitionState
from seglog.node.log_manager import LogManager
from seglog.node.replica_manager import ReplicaManager
from seglog.storage.log import now_ms
from seglog.storage.log_config import BrokerLogSettings, LogConfig
from seglog.storage.partition_metadata import new_topic_id


@contextmanager
def leading(tmp_path: Path, replicas: Sequence[tuple[int, ...]]) -> Iterator[ReplicaManager]:
    """Node 1 leading partition p of `t` with replicas[p] as its replicas and ISR."""
    logs = LogManager(
        (tmp_path / "logs",),
        LogConfig.defaults(),
        BrokerLogSettings(),
        clock=now_ms,
        rng=random.Random(0),
    )
    logs.load()
    rm = ReplicaManager(1, logs, lambda _t: LogConfig.defaults())
    topic_id = new_topic_id()
    for p, these in enumerate(replicas):
        rm._apply(("t", p), topic_id, PartitionState(these, these, 1, 0, 0), LogConfig.defaults())
    try:
        yield rm
    finally:
        rm.shutdown()
        logs.shutdown(-1)
