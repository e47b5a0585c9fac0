"""The controller's decisions as pure functions: a request and the current image in,
metadata records (or an error naming Kafka's error) out. Whoever commits the
records — one node's metadata log, or the Raft quorum — is a separate matter."""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping, Sequence

from seglog.storage.errors import InvalidConfigError
from seglog.storage.log_config import LogConfig

from .metadata_image import MetadataImage
from .metadata_records import (
    ConfigRecord,
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RemoveTopicRecord,
    TopicRecord,
)

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
PRODUCER_ID_BLOCK_SIZE = 1000
METADATA_TOPIC = "__cluster_metadata"


class ControlError(Exception):
    def __init__(self, error_name: str, message: str) -> None:
        super().__init__(message)
        self.error_name = error_name


def validate_topic_name(name: str) -> None:
    if not name:
        raise ControlError("INVALID_TOPIC_EXCEPTION", "topic name is empty")
    if name in (".", ".."):
        raise ControlError("INVALID_TOPIC_EXCEPTION", f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise ControlError(
            "INVALID_TOPIC_EXCEPTION",
            f"topic name is {len(name)} characters; the limit is {MAX_TOPIC_NAME_LENGTH}",
        )
    if not _LEGAL_TOPIC.match(name):
        raise ControlError(
            "INVALID_TOPIC_EXCEPTION",
            f"topic name {name!r} has characters other than ASCII alphanumerics, '.', '_' and '-'",
        )
    if name == METADATA_TOPIC:
        raise ControlError("INVALID_TOPIC_EXCEPTION", f"{name} is reserved for cluster metadata")


def assign_replicas(
    brokers: Sequence[int], num_partitions: int, replication_factor: int, rng: random.Random
) -> list[tuple[int, ...]]:
    """Kafka's rack-unaware placement: leaders round-robin from a random start,
    followers shifted so replicas spread evenly and leaders are staggered."""
    n = len(brokers)
    ordered = sorted(brokers)
    start = rng.randrange(n)
    shift = rng.randrange(n)
    out = []
    for p in range(num_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [ordered[first]]
        for j in range(replication_factor - 1):
            replicas.append(ordered[(first + 1 + (shift + j) % (n - 1)) % n])
        out.append(tuple(replicas))
    return out


def create_topic_records(
    image: MetadataImage,
    name: str,
    num_partitions: int,
    replication_factor: int,
    configs: Mapping[str, str],
    *,
    broker_defaults: LogConfig,
    new_topic_id: Callable[[], str],
    rng: random.Random,
) -> list[MetadataRecord]:
    validate_topic_name(name)
    if name in image.topics:
        raise ControlError("TOPIC_ALREADY_EXISTS", f"topic {name!r} already exists")
    if num_partitions < 1:
        raise ControlError(
            "INVALID_PARTITIONS", f"number of partitions must be at least 1, got {num_partitions}"
        )
    brokers = image.unfenced_brokers()
    if replication_factor < 1:
        raise ControlError(
            "INVALID_REPLICATION_FACTOR",
            f"replication factor must be at least 1, got {replication_factor}",
        )
    if replication_factor > len(brokers):
        raise ControlError(
            "INVALID_REPLICATION_FACTOR",
            f"replication factor {replication_factor} is larger than the {len(brokers)} "
            f"available brokers",
        )
    try:
        LogConfig.validate_topic_overrides(dict(configs), broker_defaults)
    except InvalidConfigError as e:
        raise ControlError("INVALID_CONFIG", str(e)) from e
    topic_id = new_topic_id()
    records: list[MetadataRecord] = [TopicRecord(name, topic_id)]
    for p, replicas in enumerate(assign_replicas(brokers, num_partitions, replication_factor, rng)):
        records.append(PartitionRecord(topic_id, p, replicas, replicas, replicas[0], 0, 0))
    for key, value in sorted(configs.items()):
        records.append(ConfigRecord(name, key, value))
    return records


def delete_topic_records(image: MetadataImage, name: str) -> list[MetadataRecord]:
    topic = image.topics.get(name)
    if topic is None:
        raise ControlError("UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist")
    return [RemoveTopicRecord(topic.topic_id)]


def alter_config_records(
    image: MetadataImage,
    topic: str,
    changes: Mapping[str, str | None],
    *,
    broker_defaults: LogConfig,
) -> list[MetadataRecord]:
    """Incremental alter: a value sets the override, None removes it."""
    if topic not in image.topics:
        raise ControlError("UNKNOWN_TOPIC_OR_PARTITION", f"topic {topic!r} does not exist")
    merged = dict(image.configs.get(topic, {}))
    for key, value in changes.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = value
    try:
        for key in changes:
            broker_defaults.get(key)  # an unknown name is an error even when removing it
        LogConfig.validate_topic_overrides(merged, broker_defaults)
    except InvalidConfigError as e:
        raise ControlError("INVALID_CONFIG", str(e)) from e
    return [ConfigRecord(topic, key, value) for key, value in sorted(changes.items())]


def allocate_producer_ids(
    image: MetadataImage,
    broker_id: int,
    broker_epoch: int,
    block_size: int = PRODUCER_ID_BLOCK_SIZE,
) -> tuple[int, list[MetadataRecord]]:
    """A block [first, first + block_size) of producer ids for one broker."""
    first = image.next_producer_id
    return first, [ProducerIdsRecord(broker_id, broker_epoch, first + block_size)]
