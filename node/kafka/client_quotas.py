"""DescribeClientQuotas (48) and AlterClientQuotas (49), and the thin hooks the
Produce and Fetch handlers use to enforce the quotas (node/client_quota_manager.py
holds the logic; the connection mutes a throttled channel).

Describe reads the node's metadata image (Kafka's ClientQuotasImage.describe, in
seglog.controller.client_quotas) and needs DESCRIBE_CONFIGS on the cluster; Alter
checks each entry as Kafka's ClientQuotaControlManager does and has the controller
commit its ClientQuotaRecords, and needs ALTER_CONFIGS on the cluster
(else CLUSTER_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from seglog.controller.client_quotas import NO_ERROR, Entity, Error
from seglog.storage.disk_and_clock import plain_monotonic_s

from ..client_quota_answers import alter_entries, describe_entries
from ..client_quota_manager import ClientQuotaManager
from ..security.kafka_gate import current_session
from ..security.principal import ANONYMOUS
from .codec import KafkaRequest, Part, encode_response, response_class
from .errors import error_code
from .node_api import KafkaNode


def describe_client_quotas(
    node: KafkaNode, request: KafkaRequest, may_describe: Callable[[], bool]
) -> list[Part]:
    req = request.body
    cls = response_class(request)
    if not may_describe():
        error: Error = (
            "CLUSTER_AUTHORIZATION_FAILED",
            "not authorized to DESCRIBE_CONFIGS on the cluster",
        )
        found: list[tuple[Entity, dict[str, float]]] = []
    else:
        components = [(c.entity_type, c.match_type, c.match) for c in req.components]
        error, found = describe_entries(node, components, bool(req.strict))
    entry_cls = cls.EntryData
    entries = [
        entry_cls(
            entity=[entry_cls.EntityData(entity_type=t, entity_name=n) for t, n in entity],
            values=[entry_cls.ValueData(key=k, value=v) for k, v in sorted(values.items())],
        )
        for entity, values in found
    ]
    return encode_response(
        request,
        cls(
            throttle_time_ms=0,
            error_code=error_code(error[0]),
            error_message=error[1] or None,
            entries=entries if error == NO_ERROR else None,
        ),
    )


def alter_client_quotas(
    node: KafkaNode, request: KafkaRequest, may_alter: Callable[[], bool]
) -> list[Part]:
    req = request.body
    cls = response_class(request)
    errors = alter_entries(
        node,
        [
            (
                [(d.entity_type, d.entity_name) for d in e.entity],
                [(o.key, o.value, bool(o.remove)) for o in e.ops],
            )
            for e in req.entries
        ],
        bool(req.validate_only),
        may_alter(),
    )
    entry_cls = cls.EntryData
    entries = [
        entry_cls(
            error_code=error_code(error[0]),
            error_message=error[1] or None,
            entity=[
                entry_cls.EntityData(entity_type=d.entity_type, entity_name=d.entity_name)
                for d in e.entity
            ],
        )
        for e, error in zip(req.entries, errors, strict=True)
    ]
    return encode_response(request, cls(throttle_time_ms=0, entries=entries))


# --- enforcement hooks ---------------------------------------------------------------


def who(request: KafkaRequest) -> tuple[str, str]:
    """(user, client-id) of the request being handled: the connection's principal's
    name (User:ANONYMOUS without authentication) and the header's client id."""
    session = current_session()
    principal = session.principal if session is not None else ANONYMOUS
    return principal.name, request.client_id or ""


def now_ms() -> int:
    return int(plain_monotonic_s() * 1000)


def record(manager: ClientQuotaManager, request: KafkaRequest, value: float) -> int:
    """Record `value` for the request's (user, client-id): its throttle time in ms,
    which the connection applies (request.throttle_ms: the largest one wins)."""
    if not manager.enabled:
        return 0
    user, client_id = who(request)
    at = now_ms()
    throttle = manager.record(user, client_id, value, at)
    if throttle > 0:
        manager.throttled(user, client_id, throttle, at)
        request.throttle_ms = max(request.throttle_ms, throttle)
    return throttle


class FetchQuota:
    """A consumer fetch's consumer_byte_rate, taken when the request arrives (the
    answer may come later, from the loop): Kafka caps the fetch at what one quota
    window may hold, records the answer's bytes, and a throttled fetch is answered
    empty with its throttle time (the bytes unrecorded: they were not sent)."""

    def __init__(self, manager: ClientQuotaManager, request: KafkaRequest) -> None:
        self.manager = manager
        self.request = request
        self.user, self.client_id = who(request)

    @classmethod
    def of(cls, manager: ClientQuotaManager, request: KafkaRequest) -> FetchQuota | None:
        return cls(manager, request) if manager.enabled else None

    def max_bytes(self, max_bytes: int) -> int:
        limit = self.manager.max_value_in_window(self.user, self.client_id)
        return max_bytes if limit is None else max(1, min(max_bytes, int(limit)))

    def throttled(self, results: list[Any]) -> bool:
        size = sum(len(r.records) for r in results if r.records is not None)
        at = now_ms()
        throttle = self.manager.record(self.user, self.client_id, size, at)
        if throttle <= 0:
            return False
        self.manager.throttled(self.user, self.client_id, throttle, at)
        self.manager.unrecord(self.user, self.client_id, size, at)
        self.request.throttle_ms = max(self.request.throttle_ms, throttle)
        return True


THROTTLED_MESSAGE = "The throttling quota has been exceeded."


class MutationQuota:
    """controller_mutation_rate for one CreateTopics, CreatePartitions or DeleteTopics
    request: each topic's partitions are taken before it is changed; from the
    request version Kafka makes strict (6, 3 and 5), a topic is refused
    THROTTLING_QUOTA_EXCEEDED while the quota is exhausted; before it, the topic is
    changed and the answer carries the throttle time."""

    def __init__(self, manager: ClientQuotaManager, request: KafkaRequest, strict: bool) -> None:
        self.manager = manager
        self.request = request
        self.strict = strict
        self.user, self.client_id = who(request)

    @classmethod
    def of(
        cls, manager: ClientQuotaManager, request: KafkaRequest, strict_since: int
    ) -> MutationQuota | None:
        if not manager.enabled:
            return None
        return cls(manager, request, request.api_version >= strict_since)

    def take(self, partitions: int) -> bool:
        """False: refused (THROTTLING_QUOTA_EXCEEDED); the throttle goes on the request."""
        at = now_ms()
        taken, throttle = self.manager.record_mutation(
            self.user, self.client_id, partitions, at, self.strict
        )
        if throttle > 0:
            self.manager.throttled(self.user, self.client_id, throttle, at)
            self.request.throttle_ms = max(self.request.throttle_ms, throttle)
        return taken
