"""Replication throttles, as Kafka's ReplicationQuotaManager: a byte rate measured
over a window of samples, and the (partition, broker) replicas a topic's
`leader.replication.throttled.replicas` / `follower.replication.throttled.replicas`
name. Pure: the clock is an argument."""

from __future__ import annotations

from dataclasses import dataclass, field

from seglog.storage.log_config import parse_throttled_replicas

LONG_MAX = (1 << 63) - 1  # Kafka's default rate: unthrottled
WINDOW_MS = 1_000  # replication.quota.window.size.seconds = 1
WINDOW_NUM = 11  # replication.quota.window.num


__all__ = ["ReplicationQuota", "is_throttled", "parse_throttled_replicas"]


def is_throttled(replicas: frozenset[tuple[int, int]] | None, partition: int, broker: int) -> bool:
    return replicas is None or (partition, broker) in replicas


@dataclass(slots=True)
class ReplicationQuota:
    """Bytes/s over WINDOW_NUM samples of WINDOW_MS; a rate of LONG_MAX never throttles.
    As Kafka's Rate, a young quota counts at least WINDOW_NUM - 1 whole windows, so
    the first burst is bounded by rate x (WINDOW_NUM - 1) seconds."""

    rate: int = LONG_MAX
    window_ms: int = WINDOW_MS
    samples: int = WINDOW_NUM
    _windows: list[tuple[int, int]] = field(default_factory=list)  # (start ms, bytes)

    def set_rate(self, rate: int) -> None:
        if rate <= 0:
            raise ValueError(f"a replication throttle rate must be positive, got {rate}")
        self.rate = rate

    @property
    def unlimited(self) -> bool:
        return self.rate >= LONG_MAX

    def record(self, n_bytes: int, now_ms: int) -> None:
        start = now_ms - now_ms % self.window_ms
        if self._windows and self._windows[-1][0] == start:
            self._windows[-1] = (start, self._windows[-1][1] + n_bytes)
        else:
            self._windows.append((start, n_bytes))
        self._expire(now_ms)

    def _expire(self, now_ms: int) -> None:
        oldest = now_ms - self.window_ms * self.samples
        while self._windows and self._windows[0][0] + self.window_ms <= oldest:
            self._windows.pop(0)
        del self._windows[: max(0, len(self._windows) - self.samples)]

    def measured(self, now_ms: int) -> float:
        """Bytes per second over the samples kept."""
        self._expire(now_ms)
        if not self._windows:
            return 0.0
        total = sum(b for _, b in self._windows)
        elapsed = now_ms - self._windows[0][0]
        elapsed = max(elapsed, self.window_ms * (self.samples - 1))
        return total * 1000 / elapsed

    def exceeded(self, now_ms: int) -> bool:
        return not self.unlimited and self.measured(now_ms) > self.rate
