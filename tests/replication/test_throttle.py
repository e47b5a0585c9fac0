"""The replication quota (Kafka's ReplicationQuotaManager) over a simulated clock, and
the throttled-replicas lists' format."""

from __future__ import annotations

import pytest

from seglog.replication.throttle import ReplicationQuota, is_throttled, parse_throttled_replicas
from seglog.storage.errors import InvalidConfigError
from seglog.storage.log_config import LogConfig


def test_a_sender_that_waits_while_exceeded_holds_the_rate() -> None:
    """Send 64 KiB whenever the quota allows, for a minute of simulated time: past the
    first burst (at most ten windows' worth) the rate is the configured one."""
    quota = ReplicationQuota(100_000)
    sent = {}
    now = 0
    total = 0
    while now < 60_000:
        if not quota.exceeded(now):
            quota.record(65_536, now)
            total += 65_536
        sent[now] = total
        now += 10
    steady = (sent[59_990] - sent[20_000]) / 39.99
    assert abs(steady / 100_000 - 1) < 0.05, steady
    assert sent[10_000] <= 100_000 * 11 + 65_536  # the first burst is bounded


def test_an_unlimited_quota_is_never_exceeded() -> None:
    quota = ReplicationQuota()
    quota.record(1 << 40, 0)
    assert quota.unlimited and not quota.exceeded(0)
    with pytest.raises(ValueError, match="positive"):
        quota.set_rate(0)


def test_throttled_replica_lists() -> None:
    assert parse_throttled_replicas(["*"], "x") is None
    replicas = parse_throttled_replicas(["0:1", " 1 : 2 "], "x")
    assert replicas == {(0, 1), (1, 2)}
    assert is_throttled(replicas, 0, 1) and not is_throttled(replicas, 0, 2)
    assert is_throttled(None, 7, 9)
    with pytest.raises(InvalidConfigError, match="'0-1' is not partitionId:brokerId"):
        LogConfig.defaults().with_overrides({"leader.replication.throttled.replicas": "0-1"})
