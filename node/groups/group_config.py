"""The group coordinator's broker settings, by Kafka's names and with Kafka's defaults:
the classic protocol's group.* and offsets.* ones and KIP-848's group.consumer.*."""

from __future__ import annotations

from dataclasses import dataclass

# The server-side assignors the group coordinator has (node/groups/consumer_group.py's
# ASSIGNORS), which group.consumer.assignors may name.
SERVER_ASSIGNORS = ("uniform", "range")


@dataclass(frozen=True)
class ConsumerConfig:
    """Kafka's group.consumer.* broker settings, with Kafka's defaults."""

    heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    assignors: tuple[str, ...] = SERVER_ASSIGNORS  # group.consumer.assignors; first: default
    max_size: int = 2**31 - 1  # group.consumer.max.size


@dataclass(frozen=True)
class GroupConfig:
    """Kafka's broker settings for the classic protocol, with Kafka's defaults."""

    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = 2**31 - 1
    offsets_retention_minutes: int = 10_080
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4_096
    offsets_topic_num_partitions: int = 50
    consumer: ConsumerConfig = ConsumerConfig()  # KIP-848's group.consumer.* settings

    @property
    def offsets_retention_ms(self) -> int:
        return self.offsets_retention_minutes * 60_000
