"""Client quotas on the Kafka listener, as Kafka's ClientQuotaManager and
ClientRequestQuotaManager do them; pure: time is an argument, nothing here sleeps,
reads a clock or touches a socket (the handlers and the connection are the shell).

- The quota of a (user, client-id) is found in the metadata's client quotas in
  Kafka's order: user+client-id, user+default client-id, user, default user+client-id,
  default user+default client-id, default user, client-id, default client-id. The
  entity that matched decides the sensor's tags (user, client-id), so every client of
  a user quota shares one sensor, as in Kafka's DefaultQuotaCallback.
- A sensor is Kafka's Rate over `quota.window.num` samples of
  `quota.window.size.seconds` (SampledStat: a sample is complete after its window,
  samples older than the whole window are reset; a young sensor counts at least
  `quota.window.num - 1` whole windows).
- Recording a value that makes the rate exceed the bound answers Kafka's throttle
  time, (rate - bound) / bound x window size, rounded (QuotaUtils.throttleTime);
  request quotas cap it at one window (ClientRequestQuotaManager).
- Sensors idle for an hour are dropped (Kafka's InactiveSensorExpirationTimeSeconds)."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

Entity = tuple[tuple[str, str | None], ...]
PRODUCE, FETCH, REQUEST = "Produce", "Fetch", "Request"  # Kafka's QuotaType names
CONTROLLER_MUTATION = "ControllerMutation"
QUOTA_KEYS = {
    PRODUCE: "producer_byte_rate",
    FETCH: "consumer_byte_rate",
    REQUEST: "request_percentage",
    CONTROLLER_MUTATION: "controller_mutation_rate",
}
INACTIVE_SENSOR_EXPIRATION_MS = 3_600_000
NANOS_TO_PERCENTAGE = 100.0 / 1e9  # ClientRequestQuotaManager.NanosToPercentagePerSecond


@dataclass(frozen=True)
class QuotaWindows:
    """Kafka's `quota.window.num` and `quota.window.size.seconds`."""

    num: int = 11
    size_s: int = 1

    @property
    def size_ms(self) -> int:
        return self.size_s * 1000


@dataclass
class _Sample:
    start_ms: int
    value: float = 0.0
    count: int = 0


@dataclass
class Rate:
    """Kafka's Rate over a SampledStat (the sum of the samples' values over the window
    size, per second)."""

    windows: QuotaWindows
    samples: list[_Sample] = field(default_factory=list)
    current: int = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current(now_ms)
        size = self.windows.size_ms
        if now_ms - sample.start_ms >= size:
            end = sample.start_ms + size
            sample = self._advance(now_ms - (now_ms - end) % size)
        sample.value += value
        sample.count += 1

    def _current(self, now_ms: int) -> _Sample:
        if not self.samples:
            self.samples.append(_Sample(now_ms))
        return self.samples[self.current]

    def _advance(self, start_ms: int) -> _Sample:
        self.current = (self.current + 1) % self.windows.num
        if self.current >= len(self.samples):
            self.samples.append(_Sample(start_ms))
        else:
            self.samples[self.current] = _Sample(start_ms)
        return self.samples[self.current]

    def _purge(self, now_ms: int) -> None:
        expire = self.windows.num * self.windows.size_ms
        for i, s in enumerate(self.samples):
            if now_ms - s.start_ms >= expire:
                self.samples[i] = _Sample(now_ms)

    def window_size_ms(self, now_ms: int) -> int:
        self._purge(now_ms)
        oldest = min((s.start_ms for s in self.samples), default=now_ms)
        elapsed = now_ms - oldest
        size = self.windows.size_ms
        full, least = elapsed // size, self.windows.num - 1
        if full < least:
            elapsed += (least - full) * size
        return max(elapsed, size)

    def measure(self, now_ms: int) -> float:
        self._purge(now_ms)
        total = sum(s.value for s in self.samples)
        return total / (self.window_size_ms(now_ms) / 1000)

    def average(self, now_ms: int) -> float:
        """Kafka's Avg over the same samples: the values' mean (0 without any)."""
        self._purge(now_ms)
        count = sum(s.count for s in self.samples)
        return sum(s.value for s in self.samples) / count if count else 0.0


@dataclass
class TokenBucket:
    """Kafka's TokenBucket (controller mutations): `quota` tokens a second up to a
    burst of quota x quota.window.num x quota.window.size.seconds, starting full; a
    record takes its value, and may leave the bucket below zero."""

    windows: QuotaWindows
    tokens: float | None = None  # None: full (not used yet)
    last_ms: int = 0

    def measure(self, quota: float, now_ms: int) -> float:
        burst = quota * self.windows.num * self.windows.size_s
        if self.tokens is None:
            self.tokens = burst
        else:
            self.tokens = min(burst, self.tokens + quota * (now_ms - self.last_ms) / 1000)
        self.last_ms = now_ms
        return self.tokens

    def record(self, quota: float, value: float, now_ms: int) -> None:
        self.tokens = self.measure(quota, now_ms) - value


@dataclass
class _Sensors:
    rate: Rate
    throttle_time: Rate  # its average: Kafka's throttle-time Avg
    bound: float | None
    last_record_ms: int = 0
    bucket: TokenBucket | None = None  # controller mutations only


def resolve(
    quotas: Mapping[Entity, Mapping[str, float]], key: str, user: str, client_id: str
) -> tuple[tuple[str, str], float | None]:
    """(sensor tags (user, client-id), the bound or None) in Kafka's precedence."""
    levels: list[tuple[Entity, tuple[str, str]]] = [
        ((("client-id", client_id), ("user", user)), (user, client_id)),
        ((("client-id", None), ("user", user)), (user, client_id)),
        ((("user", user),), (user, "")),
        ((("client-id", client_id), ("user", None)), (user, client_id)),
        ((("client-id", None), ("user", None)), (user, client_id)),
        ((("user", None),), (user, "")),
        ((("client-id", client_id),), ("", client_id)),
        ((("client-id", None),), ("", client_id)),
    ]
    for entity, tags in levels:
        values = quotas.get(entity)
        if values is not None and key in values:
            return tags, values[key]
    return ("", client_id), None


class ClientQuotaManager:
    """One quota type's sensors (Produce, Fetch or Request). Thread-safe: the loop and
    the handler pool both record."""

    def __init__(self, quota_type: str, windows: QuotaWindows | None = None) -> None:
        self.quota_type = quota_type
        self.key = QUOTA_KEYS[quota_type]
        self.windows = windows or QuotaWindows()
        self._quotas: Mapping[Entity, Mapping[str, float]] = {}
        self.enabled = False  # any quota of this type: else nothing is recorded
        self._sensors: dict[tuple[str, str], _Sensors] = {}
        self._lock = threading.Lock()
        self._swept_ms = 0

    def update(self, quotas: Mapping[Entity, Mapping[str, float]]) -> None:
        """The metadata's client quotas changed: new bounds apply to existing sensors."""
        with self._lock:
            self._quotas = quotas
            self.enabled = any(self.key in v for v in quotas.values())
            for (user, client_id), sensors in list(self._sensors.items()):
                sensors.bound = resolve(quotas, self.key, user, client_id)[1]

    def _sensors_for(self, user: str, client_id: str, now_ms: int) -> _Sensors:
        tags, bound = resolve(self._quotas, self.key, user, client_id)
        sensors = self._sensors.get(tags)
        if sensors is None:
            sensors = _Sensors(Rate(self.windows), Rate(self.windows), bound)
            self._sensors[tags] = sensors
        sensors.last_record_ms = now_ms
        if now_ms - self._swept_ms > 60_000:
            self._swept_ms = now_ms
            for t, s in list(self._sensors.items()):
                if now_ms - s.last_record_ms > INACTIVE_SENSOR_EXPIRATION_MS:
                    del self._sensors[t]
        return sensors

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record `value` (bytes; for requests, percent-seconds) and answer the throttle
        time in ms (0: within the quota)."""
        if not self.enabled:
            return 0
        with self._lock:
            sensors = self._sensors_for(user, client_id, now_ms)
            sensors.rate.record(value, now_ms)
            bound = sensors.bound
            if bound is None:
                return 0
            rate = sensors.rate.measure(now_ms)
            if rate <= bound:
                return 0
            throttle = (rate - bound) / bound * sensors.rate.window_size_ms(now_ms)
            if self.quota_type == REQUEST:
                throttle = min(throttle, self.windows.size_ms)
            return int(round(throttle))

    def record_mutation(
        self, user: str, client_id: str, value: float, now_ms: int, strict: bool
    ) -> tuple[bool, int]:
        """Controller mutations (partitions created or deleted), Kafka's
        ControllerMutationQuotaManager: (taken, throttle ms). Strict (the newer
        request versions): refused while the bucket is below zero, as Kafka's
        StrictControllerMutationQuota; permissive: always taken, the throttle time
        is what the bucket owes afterwards."""
        if not self.enabled:
            return True, 0
        with self._lock:
            sensors = self._sensors_for(user, client_id, now_ms)
            bound = sensors.bound
            if bound is None:
                return True, 0
            if sensors.bucket is None:
                sensors.bucket = TokenBucket(self.windows)
            bucket = sensors.bucket
            tokens = bucket.measure(bound, now_ms)
            if strict and tokens < 0:
                return False, int(round(-tokens / bound * 1000))
            bucket.record(bound, value, now_ms)
            sensors.rate.record(value, now_ms)
            left = bucket.measure(bound, now_ms)
            return True, 0 if strict or left >= 0 else int(round(-left / bound * 1000))

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back a value recorded for an answer that was not sent (Kafka: a
        throttled fetch answers empty)."""
        if self.enabled:
            with self._lock:
                self._sensors_for(user, client_id, now_ms).rate.record(-value, now_ms)

    def throttled(self, user: str, client_id: str, throttle_ms: int, now_ms: int) -> None:
        """The throttle-time sensor (Kafka's Avg of the throttle times given)."""
        if throttle_ms <= 0:
            return
        with self._lock:
            self._sensors_for(user, client_id, now_ms).throttle_time.record(throttle_ms, now_ms)

    def max_value_in_window(self, user: str, client_id: str) -> float | None:
        """Kafka's getMaxValueInQuotaWindow: what one answer may hold at most without
        a guaranteed throttle (None: no quota)."""
        if not self.enabled:
            return None
        with self._lock:
            bound = resolve(self._quotas, self.key, user, client_id)[1]
        if bound is None:
            return None
        return bound * (self.windows.num - 1) * self.windows.size_s

    def snapshot(self, now_ms: int) -> list[tuple[str, str, float, float]]:
        """Per sensor: (user, client-id, rate, average throttle time ms)."""
        with self._lock:
            return [
                (
                    user,
                    client_id,
                    s.rate.measure(now_ms),
                    s.throttle_time.average(now_ms),
                )
                for (user, client_id), s in sorted(self._sensors.items())
            ]


@dataclass
class ClientQuotas:
    """The four managers a Kafka listener enforces."""

    windows: QuotaWindows = field(default_factory=QuotaWindows)
    produce: ClientQuotaManager = field(init=False)
    fetch: ClientQuotaManager = field(init=False)
    request: ClientQuotaManager = field(init=False)
    controller_mutation: ClientQuotaManager = field(init=False)

    def __post_init__(self) -> None:
        self.produce = ClientQuotaManager(PRODUCE, self.windows)
        self.fetch = ClientQuotaManager(FETCH, self.windows)
        self.request = ClientQuotaManager(REQUEST, self.windows)
        self.controller_mutation = ClientQuotaManager(CONTROLLER_MUTATION, self.windows)

    def managers(self) -> tuple[ClientQuotaManager, ...]:
        return (self.produce, self.fetch, self.request, self.controller_mutation)

    def update(self, quotas: Mapping[Entity, Mapping[str, float]]) -> None:
        for manager in self.managers():
            manager.update(quotas)
