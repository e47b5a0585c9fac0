"""A real ReplicaManager over real logs, node 1 leading topic `t`'s partitions, for tests
of the fetch paths (sessions, wake-ups)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from seglog.controller.metadata_image import PartitionState
from seglog.node.log_manager import LogManager
from seglog.node.replica_manager import ReplicaManager
from seglog.storage.log import now_ms
from seglog.storage.log_config import BrokerLogSettings, LogConfig
from seglog.storage.partition_metadata import new_topic_id


@contextmanager
def leading(
    tmp_path: Path,
    replicas: Sequence[tuple[int, ...]],
    isr: tuple[int, ...] | None = None,
    is_replica_eligible: Callable[[int, int], bool] | None = None,
) -> Iterator[ReplicaManager]:
    """Node 1 leading partition p of `t` with replicas[p] as its replicas and ISR (or
    `isr` for every partition); `is_replica_eligible`: the ReplicaManager's (KIP-903)."""
    logs = LogManager(
        (tmp_path / "logs",),
        LogConfig.defaults(),
        BrokerLogSettings(),
        clock=now_ms,
        rng=random.Random(0),
    )
    logs.load()
    rm = ReplicaManager(
        1, logs, lambda _t: LogConfig.defaults(), is_replica_eligible=is_replica_eligible
    )
    topic_id = new_topic_id()
    for p, these in enumerate(replicas):
        state = PartitionState(these, these if isr is None else isr, 1, 0, 0)
        rm._apply(("t", p), topic_id, state, LogConfig.defaults())
    try:
        yield rm
    finally:
        rm.shutdown()
        logs.shutdown(-1)
