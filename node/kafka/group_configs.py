"""Per-group configs, Kafka 4.0's GROUP config resource (KIP-848): DescribeConfigs and
(Incremental)AlterConfigs on resource type 32, stored as GROUP ConfigRecords in the
metadata, and read by the group coordinator on each ConsumerGroupHeartbeat (a group's
`consumer.session.timeout.ms` and `consumer.heartbeat.interval.ms` override the
broker's `group.consumer.*` for that group).

Checked as Kafka's GroupConfig.validate: a name it knows, an integer within the
broker's bounds (Kafka's defaults: `group.consumer.min/max.session.timeout.ms`
45000-60000, `group.consumer.min/max.heartbeat.interval.ms` 5000-15000, which seglog
does not make configurable), and a heartbeat interval below the session timeout.
Kafka's share-group configs (`share.*`) are refused as unknown: seglog has no share
groups."""

from __future__ import annotations

from collections.abc import Mapping

from seglog.controller.cluster_control import ControlError
from seglog.controller.metadata_records import GROUP_RESOURCE, ConfigRecord, MetadataRecord

from ..groups.group_config import ConsumerConfig
from . import config_entries
from .node_api import KafkaNode

GROUP = GROUP_RESOURCE
DYNAMIC_GROUP_CONFIG = 8  # Kafka's ConfigSource id for a group's own config
SESSION, HEARTBEAT = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"
# name -> (the broker config giving its default, min, max, documentation)
GROUP_CONFIGS = {
    SESSION: (
        "group.consumer.session.timeout.ms",
        "group.consumer.min.session.timeout.ms",
        45_000,
        "group.consumer.max.session.timeout.ms",
        60_000,
        "The timeout to detect client failures when using the consumer group protocol.",
    ),
    HEARTBEAT: (
        "group.consumer.heartbeat.interval.ms",
        "group.consumer.min.heartbeat.interval.ms",
        5_000,
        "group.consumer.max.heartbeat.interval.ms",
        15_000,
        "The heartbeat interval given to the members of a consumer group.",
    ),
}


def defaults(consumer: ConsumerConfig) -> dict[str, int]:
    return {SESSION: consumer.session_timeout_ms, HEARTBEAT: consumer.heartbeat_interval_ms}


def overrides(consumer: ConsumerConfig, group: Mapping[str, str]) -> tuple[int, int]:
    """(session timeout, heartbeat interval) for a group: its own configs, else the
    broker's."""
    values = {**defaults(consumer), **{k: int(v) for k, v in group.items()}}
    return values[SESSION], values[HEARTBEAT]


def describe_entries(
    node: KafkaNode, group: str, consumer: ConsumerConfig
) -> list[config_entries.Entry]:
    if not group:
        raise ControlError("INVALID_REQUEST", "Group name must not be empty")
    own = node.metadata_image().group_configs.get(group, {})
    static = node.broker_config_layers(str(node.node_id))[2]
    out = []
    for name, (broker_name, *_bounds, doc) in GROUP_CONFIGS.items():
        default = str(defaults(consumer)[name])
        source = config_entries.STATIC_BROKER if broker_name in static else config_entries.DEFAULT
        synonyms = [config_entries.Synonym(broker_name, default, source)]
        if name in own:
            synonyms.insert(0, config_entries.Synonym(name, own[name], DYNAMIC_GROUP_CONFIG))
        top = synonyms[0]
        out.append(
            config_entries.Entry(
                name,
                top.value,
                top.source,
                False,
                False,
                config_entries.INT,
                doc,
                tuple(synonyms),
            )
        )
    return out


def check(
    consumer: ConsumerConfig, current: Mapping[str, str], changes: Mapping[str, str | None]
) -> dict[str, str]:
    """The group's configs after `changes` (a value sets, None deletes), or
    ControlError(INVALID_CONFIG) naming what Kafka's GroupConfig.validate refuses."""
    merged = dict(current)
    for name, value in changes.items():
        if name not in GROUP_CONFIGS:
            why = " (seglog has no share groups)" if name.startswith("share.") else ""
            raise ControlError("INVALID_CONFIG", f"Unknown group config name: {name}{why}")
        if value is None:
            merged.pop(name, None)
            continue
        try:
            int(value.strip())
        except ValueError:
            raise ControlError(
                "INVALID_CONFIG",
                f"Invalid value {value} for configuration {name}: Not a number of type INT",
            ) from None
        merged[name] = value.strip()
    values = {**defaults(consumer), **{k: int(v) for k, v in merged.items()}}
    for name, (_b, min_name, low, max_name, high, _doc) in GROUP_CONFIGS.items():
        if values[name] < low:
            raise ControlError(
                "INVALID_CONFIG", f"{name} must be greater than or equal to {min_name}"
            )
        if values[name] > high:
            raise ControlError("INVALID_CONFIG", f"{name} must be less than or equal to {max_name}")
    if values[HEARTBEAT] >= values[SESSION]:
        raise ControlError("INVALID_CONFIG", f"{HEARTBEAT} must be less than {SESSION}")
    return merged


def alter(
    node: KafkaNode,
    group: str,
    changes: Mapping[str, str | None],
    validate_only: bool,
    consumer: ConsumerConfig,
) -> None:
    """Check and commit a group's config changes (ControlError when refused)."""
    if not group:
        raise ControlError("INVALID_REQUEST", "Group name must not be empty")
    current = node.metadata_image().group_configs.get(group, {})
    check(consumer, current, changes)
    if validate_only:
        return
    records: list[MetadataRecord] = [
        ConfigRecord(group, name, value, GROUP) for name, value in sorted(changes.items())
    ]
    for error, message in node.commit_records(records):
        if error != "NONE":
            raise ControlError(error, message)
