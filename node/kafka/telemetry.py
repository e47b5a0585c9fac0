"""GetTelemetrySubscriptions (KIP-714, API 71 v0), answered as a Kafka broker without a
client-metrics receiver plugin answers it: the API is not listed in ApiVersions (Kafka
lists GetTelemetrySubscriptions and PushTelemetry only when a receiver is configured,
so clients do not ask), and a client that asks anyway gets Kafka's answer with no
client-metrics subscriptions: its instance id (a new one for the zero id), a
subscription id, no requested metrics (so it never pushes), the default 5-minute push
interval, and THROTTLING_QUOTA_EXCEEDED for a second request within that interval.

`ClientTelemetry` is the state without I/O (time is an input); the instances it
remembers are bounded as Kafka's cache is (least recently used first out)."""

from __future__ import annotations

import struct
import threading
import uuid
from collections import OrderedDict
from dataclasses import dataclass

from seglog.storage.crc import crc32c

from .codec import KafkaRequest, Part, encode_response, response_class
from .errors import error_code

DEFAULT_INTERVAL_MS = 5 * 60 * 1000  # ClientMetricsConfigs.DEFAULT_INTERVAL_MS
TELEMETRY_MAX_BYTES = 1024 * 1024  # telemetry.max.bytes' default
CACHE_MAX_SIZE = 16384  # Kafka's client instance cache
# Kafka's SUPPORTED_COMPRESSION_TYPES, in its order: zstd, lz4, gzip, snappy.
ACCEPTED_COMPRESSION_TYPES = (4, 3, 1, 2)
ZERO_UUID = uuid.UUID(int=0)


def _java_int(value: int) -> int:
    return struct.unpack(">i", struct.pack(">I", value & 0xFFFFFFFF))[0]  # type: ignore[no-any-return]


def subscription_id(metrics: list[str], push_interval_ms: int, instance: uuid.UUID) -> int:
    """Kafka's computeSubscriptionId: CRC-32C of the metrics set's text and the push
    interval, XORed with the instance id's Java hashCode."""
    text = ("[" + ", ".join(metrics) + "]" + str(push_interval_ms)).encode()
    bits = instance.int
    h = (bits >> 64) ^ (bits & 0xFFFFFFFFFFFFFFFF)
    hash_code = (h >> 32) ^ (h & 0xFFFFFFFF)
    return _java_int(crc32c(text) ^ hash_code)


@dataclass(frozen=True)
class Subscription:
    error: str
    instance: uuid.UUID
    subscription_id: int = 0
    push_interval_ms: int = DEFAULT_INTERVAL_MS


class ClientTelemetry:
    def __init__(self) -> None:
        self._last_get_ms: OrderedDict[uuid.UUID, int] = OrderedDict()
        self._lock = threading.Lock()  # the listener's request handlers share it

    def get_subscription(
        self, instance: uuid.UUID | None, now_ms: int, new_id: uuid.UUID
    ) -> Subscription:
        """A client instance's subscription; `new_id` is its id if it sent none."""
        if instance is None or instance == ZERO_UUID:
            instance = new_id
        with self._lock:
            return self._get(instance, now_ms)

    def _get(self, instance: uuid.UUID, now_ms: int) -> Subscription:
        last = self._last_get_ms.pop(instance, None)
        if last is not None and now_ms - last < DEFAULT_INTERVAL_MS:
            self._last_get_ms[instance] = last  # Kafka keeps the earlier request's time
            return Subscription("THROTTLING_QUOTA_EXCEEDED", instance)
        self._last_get_ms[instance] = now_ms
        while len(self._last_get_ms) > CACHE_MAX_SIZE:
            self._last_get_ms.popitem(last=False)
        return Subscription("NONE", instance, subscription_id([], DEFAULT_INTERVAL_MS, instance))


def get_telemetry_subscriptions(
    telemetry: ClientTelemetry, request: KafkaRequest, now_ms: int
) -> list[Part]:
    cls = response_class(request)
    s = telemetry.get_subscription(request.body.client_instance_id, now_ms, uuid.uuid4())
    ok = s.error == "NONE"
    body = cls(
        throttle_time_ms=0,
        error_code=error_code(s.error),
        client_instance_id=s.instance if ok else ZERO_UUID,
        subscription_id=s.subscription_id,
        accepted_compression_types=list(ACCEPTED_COMPRESSION_TYPES) if ok else [],
        push_interval_ms=s.push_interval_ms if ok else 0,
        telemetry_max_bytes=TELEMETRY_MAX_BYTES if ok else 0,
        delta_temporality=ok,
        requested_metrics=[],
    )
    return encode_response(request, body)
