"""Client quotas in the metadata, pure: Kafka's ClientQuotaControlManager (which
alterations are valid and the ClientQuotaRecords they become) and ClientQuotasImage's
describe (which entities a DescribeClientQuotas filter matches).

An entity is a set of (entity type, name) pairs — `user`, `client-id` (a name, or None
for the default of that type) — held sorted by type. `ip` entities (Kafka's
`connection_creation_rate`) are not supported: seglog has no connection-rate quotas, so
it refuses them rather than store a quota nothing enforces."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

USER, CLIENT_ID, IP = "user", "client-id", "ip"
# Kafka's QuotaConfig.userAndClientQuotaConfigs(): the key and its ConfigDef type.
QUOTA_KEYS = {
    "producer_byte_rate": "LONG",
    "consumer_byte_rate": "LONG",
    "request_percentage": "DOUBLE",
    "controller_mutation_rate": "DOUBLE",
}
LONG_MAX = float(2**63 - 1)
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

Entity = tuple[tuple[str, str | None], ...]
Error = tuple[str, str]  # (Kafka's error name, message); ("NONE", "") when valid
NO_ERROR: Error = ("NONE", "")


class QuotaFilterError(ValueError):
    """A DescribeClientQuotas filter Kafka refuses: (error name, message)."""

    def __init__(self, error_name: str, message: str) -> None:
        super().__init__(message)
        self.error_name = error_name


def entity_of(pairs: Sequence[tuple[str, str | None]]) -> Entity:
    return tuple(sorted(pairs, key=lambda p: p[0]))


def entity_error(pairs: Sequence[tuple[str, str | None]]) -> Error:
    """Kafka's validateEntity: user and/or client-id, each once, names not empty."""
    if not pairs:
        return "INVALID_REQUEST", "Invalid empty client quota entity"
    seen: set[str] = set()
    for entity_type, name in pairs:
        if entity_type in seen:
            return (
                "INVALID_REQUEST",
                f"Invalid empty client quota entity, duplicate entity entry {entity_type}",
            )
        seen.add(entity_type)
        if entity_type == IP:
            return (
                "INVALID_REQUEST",
                "IP quota entities (connection_creation_rate) are not supported by seglog",
            )
        if entity_type not in (USER, CLIENT_ID):
            return "INVALID_REQUEST", f"Unhandled client quota entity type: {entity_type}"
        if name is not None and name == "":
            return "INVALID_REQUEST", f"Empty {entity_type} not supported"
    return NO_ERROR


def op_error(key: str, value: float, remove: bool) -> Error:
    """Kafka's validateQuotaKeyValue (a removal checks only the key)."""
    config_type = QUOTA_KEYS.get(key)
    if config_type is None:
        return "INVALID_REQUEST", f"Invalid configuration key {key}"
    if remove:
        return NO_ERROR
    if value <= 0.0:
        return "INVALID_REQUEST", f"Quota {key} must be greater than 0"
    if config_type == "LONG":
        if value > LONG_MAX:
            return "INVALID_REQUEST", f"Proposed value for {key} is too large for a LONG."
        if abs(value % 1.0) > 1e-6:
            return "INVALID_REQUEST", f"{key} cannot be a fractional value."
    return NO_ERROR


def alteration_error(
    pairs: Sequence[tuple[str, str | None]], ops: Sequence[tuple[str, float, bool]]
) -> Error:
    """One AlterClientQuotas entry: its entity, then each (key, value, remove)."""
    error = entity_error(pairs)
    if error != NO_ERROR:
        return error
    keys = [k for k, _v, _r in ops]
    for key in keys:
        if keys.count(key) > 1:
            return "INVALID_REQUEST", f"Duplicate quota key {key} not updating quota for entity"
    for key, value, remove in ops:
        error = op_error(key, value, remove)
        if error != NO_ERROR:
            return error
    return NO_ERROR


def describe(
    quotas: Mapping[Entity, Mapping[str, float]],
    components: Sequence[tuple[str, int, str | None]],
    strict: bool,
) -> list[tuple[Entity, dict[str, float]]]:
    """Kafka's ClientQuotasImage.describe: the entities matching every (entity type,
    match type, match) component; `strict`: and having no other types. Raises
    QuotaFilterError for a filter Kafka refuses."""
    exact: dict[str, str | None] = {}
    typed: set[str] = set()
    for entity_type, match_type, match in components:
        if not entity_type:
            raise QuotaFilterError("INVALID_REQUEST", "Invalid empty entity type.")
        if entity_type in exact or entity_type in typed:
            raise QuotaFilterError(
                "INVALID_REQUEST",
                f"Entity type {entity_type} cannot appear more than once in the filter.",
            )
        if entity_type not in (IP, USER, CLIENT_ID):
            raise QuotaFilterError("UNSUPPORTED_VERSION", f"Unsupported entity type {entity_type}")
        if match_type == MATCH_EXACT:
            if match is None:
                raise QuotaFilterError(
                    "INVALID_REQUEST",
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.",
                )
            exact[entity_type] = match
        elif match_type == MATCH_DEFAULT:
            if match is not None:
                raise QuotaFilterError(
                    "INVALID_REQUEST",
                    "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
                )
            exact[entity_type] = None
        elif match_type == MATCH_SPECIFIED:
            if match is not None:
                raise QuotaFilterError(
                    "INVALID_REQUEST",
                    "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
                )
            typed.add(entity_type)
        else:
            raise QuotaFilterError("UNSUPPORTED_VERSION", f"Unknown match type {match_type}")
    named = set(exact) | typed
    if IP in named and named & {USER, CLIENT_ID}:
        raise QuotaFilterError(
            "INVALID_REQUEST",
            "Invalid entity filter component combination. IP filter component should not "
            "be used with user or clientId filter component.",
        )
    out = []
    for entity, values in sorted(quotas.items(), key=lambda kv: str(kv[0])):
        parts = dict(entity)
        if strict and len(parts) != len(named):
            continue
        if any(t not in parts or parts[t] != name for t, name in exact.items()):
            continue
        if any(t not in parts for t in typed):
            continue
        out.append((entity, dict(values)))
    return out
