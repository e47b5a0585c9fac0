"""Replication throttles (Kafka's ReplicationQuotaManager): the bytes per second
this node sends to (as leader) or fetches from (as follower) out-of-sync replicas
that a topic's *.replication.throttled.replicas lists."""

from __future__ import annotations

import threading
from collections.abc import Callable

from seglog.replication.throttle import (
    LONG_MAX,
    WINDOW_MS,
    WINDOW_NUM,
    ReplicationQuota,
    is_throttled,
)
from seglog.storage.log_config import parse_throttled_replicas

from .hosted_partition import HostedPartition


class ReplicationThrottles:
    def __init__(
        self,
        node_id: int,
        clock: Callable[[], int],
        *,
        leader_rate: int = LONG_MAX,
        follower_rate: int = LONG_MAX,
        window_num: int = WINDOW_NUM,
        window_size_ms: int = WINDOW_MS,
    ) -> None:
        self.node_id = node_id
        self._clock = clock  # the replicas' timer clock, in ms
        window = {"window_ms": window_size_ms, "samples": window_num}
        self.leader_quota = ReplicationQuota(leader_rate, **window)
        self.follower_quota = ReplicationQuota(follower_rate, **window)
        self._lock = threading.Lock()

    def throttled(self, hp: HostedPartition, leader_side: bool, replica: int) -> bool:
        """Kafka's shouldLeaderThrottle / shouldFollowerThrottle, before the quota: the
        replica (the fetching follower, or this follower) is out of sync and the topic
        lists this node's replica of the partition."""
        quota = self.leader_quota if leader_side else self.follower_quota
        if quota.unlimited or replica in hp.replica.isr:
            return False
        config = hp.plog.log.config
        value = (
            config.leader_replication_throttled_replicas
            if leader_side
            else config.follower_replication_throttled_replicas
        )
        if not value:
            return False
        name = f"{'leader' if leader_side else 'follower'}.replication.throttled.replicas"
        return is_throttled(parse_throttled_replicas(value, name), hp.tp[1], self.node_id)

    def leader_sends(self, hp: HostedPartition, replica: int, n_bytes: int) -> bool:
        """May this leader send `n_bytes` of the partition to the follower `replica`
        now? Counted against the leader's quota when throttled and sent."""
        if not self.throttled(hp, True, replica):
            return True
        with self._lock:
            t = self._clock()
            if self.leader_quota.exceeded(t):
                return False
            self.leader_quota.record(n_bytes, t)
            return True

    def set_rates(self, leader: int, follower: int) -> None:
        """leader/follower.replication.throttled.rate changed (dynamic broker configs)."""
        with self._lock:
            self.leader_quota.set_rate(leader)
            self.follower_quota.set_rate(follower)

    def byte_rates(self) -> tuple[float, float]:
        """(leader, follower) bytes/s of throttled replication, as the quotas measure."""
        t = self._clock()
        with self._lock:
            return self.leader_quota.measured(t), self.follower_quota.measured(t)

    def follower_exceeded(self, hp: HostedPartition) -> bool:
        """This follower may not fetch the partition now (its quota is used up)."""
        if not self.throttled(hp, False, self.node_id):
            return False
        with self._lock:
            return self.follower_quota.exceeded(self._clock())

    def follower_fetched(self, hp: HostedPartition, n_bytes: int) -> None:
        if n_bytes and self.throttled(hp, False, self.node_id):
            with self._lock:
                self.follower_quota.record(n_bytes, self._clock())
