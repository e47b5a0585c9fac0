"""The controller's decisions as pure functions: a request and the current image in,
metadata records (or an error naming Kafka's error) out. Whoever commits the
records — one node's metadata log, or the Raft quorum — is a separate matter."""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from seglog.controller.metadata_image import MetadataImage, PartitionState
from seglog.controller.metadata_records import (
    BROKER_RESOURCE,
    BrokerFenceRecord,
    ConfigRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from seglog.controller.reassignment import change_record
from seglog.storage.errors import InvalidConfigError
from seglog.storage.log_config import LogConfig

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
PRODUCER_ID_BLOCK_SIZE = 1000
METADATA_TOPIC = "__cluster_metadata"


class ControlError(Exception):
    """A refused request: `error_name` is the proto ErrorCode name (Kafka's error)."""

    def __init__(self, error_name: str, message: str) -> None:
        super().__init__(message)
        self.error_name = error_name


@dataclass(frozen=True, slots=True)
class IsrChange:
    """One partition's ISR change as its leader asks for it (AlterPartition v3's
    partition data: `new_isr_broker_epochs` pairs each member with the broker epoch
    the leader saw it fetch with, -1 when unknown — KIP-903's NewIsrWithEpochs)."""

    topic: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]
    new_isr_broker_epochs: tuple[int, ...] = ()


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


def validate_manual_assignment(
    image: MetadataImage, replicas: Sequence[int], replication_factor: int | None
) -> None:
    """Kafka's validateManualPartitionAssignment: replicas, all registered brokers, none
    twice, as many as the other partitions' (`replication_factor`, when known)."""
    if not replicas:
        raise ControlError(
            "INVALID_REPLICA_ASSIGNMENT",
            "The manual partition assignment includes an empty replica list.",
        )
    seen: set[int] = set()
    for broker in sorted(replicas):
        if broker not in image.brokers:
            raise ControlError(
                "INVALID_REPLICA_ASSIGNMENT",
                f"The manual partition assignment includes broker {broker}, but no such "
                f"broker is registered.",
            )
        if broker in seen:
            raise ControlError(
                "INVALID_REPLICA_ASSIGNMENT",
                f"The manual partition assignment includes the broker {broker} more than once.",
            )
        seen.add(broker)
    if replication_factor is not None and len(replicas) != replication_factor:
        raise ControlError(
            "INVALID_REPLICA_ASSIGNMENT",
            f"The manual partition assignment includes a partition with {len(replicas)} "
            f"replica(s), but this is not consistent with previous partitions, which have "
            f"{replication_factor} replica(s).",
        )


def _manual_isr(image: MetadataImage, partition: int, replicas: Sequence[int]) -> tuple[int, ...]:
    """The ISR of a manually placed partition: its unfenced replicas, in their order
    (the first leads)."""
    usable = set(image.unfenced_brokers())
    isr = tuple(r for r in replicas if r in usable)
    if not isr:
        raise ControlError(
            "INVALID_REPLICA_ASSIGNMENT",
            f"All brokers specified in the manual partition assignment for partition "
            f"{partition} are fenced or in controlled shutdown.",
        )
    return isr


def manual_partitions(
    image: MetadataImage, assignments: Sequence[tuple[int, Sequence[int]]]
) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """CreateTopics' explicit assignments ((partition, replicas) pairs) as Kafka checks
    them: each partition once, the same replication factor throughout, partitions
    0..n-1; per partition (replicas, ISR)."""
    placed: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = {}
    rf: int | None = None
    for partition, replicas in assignments:
        if partition in placed:
            raise ControlError(
                "INVALID_REPLICA_ASSIGNMENT",
                f"Found multiple manual partition assignments for partition {partition}",
            )
        validate_manual_assignment(image, replicas, rf)
        rf = len(replicas)
        placed[partition] = (tuple(replicas), _manual_isr(image, partition, replicas))
    if sorted(placed) != list(range(len(placed))):
        raise ControlError(
            "INVALID_REPLICA_ASSIGNMENT",
            "partitions should be a consecutive 0-based integer sequence",
        )
    return [placed[p] for p in range(len(placed))]


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
    assignments: Sequence[tuple[int, Sequence[int]]] = (),
) -> list[MetadataRecord]:
    """`assignments`: explicit (partition, replicas) placements (Kafka's CreateTopics
    with a manual assignment: then the partition count and replication factor are
    -1, taken from the assignment)."""
    validate_topic_name(name)
    if name in image.topics:
        raise ControlError("TOPIC_ALREADY_EXISTS", f"topic {name!r} already exists")
    if assignments:
        if replication_factor != -1:
            raise ControlError(
                "INVALID_REQUEST",
                "A manual partition assignment was specified, but replication factor was "
                "not set to -1.",
            )
        if num_partitions != -1:
            raise ControlError(
                "INVALID_REQUEST",
                "A manual partition assignment was specified, but numPartitions was not set to -1.",
            )
        return _topic_records(
            name, manual_partitions(image, assignments), configs, broker_defaults, new_topic_id
        )
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
    placed = assign_replicas(brokers, num_partitions, replication_factor, rng)
    return _topic_records(name, [(r, r) for r in placed], configs, broker_defaults, new_topic_id)


def _topic_records(
    name: str,
    placed: Sequence[tuple[tuple[int, ...], tuple[int, ...]]],
    configs: Mapping[str, str],
    broker_defaults: LogConfig,
    new_topic_id: Callable[[], str],
) -> list[MetadataRecord]:
    """A new topic's records: each partition's (replicas, ISR), led by the ISR's first."""
    try:
        LogConfig.validate_topic_overrides(dict(configs), broker_defaults)
    except InvalidConfigError as e:
        raise ControlError("INVALID_CONFIG", str(e)) from e
    topic_id = new_topic_id()
    records: list[MetadataRecord] = [TopicRecord(name, topic_id)]
    for p, (replicas, isr) in enumerate(placed):
        records.append(PartitionRecord(topic_id, p, replicas, isr, isr[0], 0, 0))
    for key, value in sorted(configs.items()):
        records.append(ConfigRecord(name, key, value))
    return records


def create_partitions_records(
    image: MetadataImage,
    name: str,
    total_count: int,
    rng: random.Random,
    assignments: Sequence[Sequence[int]] | None = None,
) -> list[MetadataRecord]:
    """Kafka's CreatePartitions: grow a topic to `total_count` partitions, placing the
    new ones with the topic's replication factor as a new topic's would be, or where
    `assignments` (one replica list per new partition) says."""
    topic = image.topics.get(name)
    if topic is None:
        raise ControlError("UNKNOWN_TOPIC_OR_PARTITION", f"topic {name!r} does not exist")
    current = len(topic.partitions)
    if total_count <= current:
        raise ControlError(
            "INVALID_PARTITIONS",
            f"topic {name!r} has {current} partitions; the count can only grow "
            f"(asked for {total_count})",
        )
    rf = len(topic.partitions[0].replicas) if topic.partitions else 1
    if assignments is not None:
        additional = total_count - current
        if len(assignments) != additional:
            raise ControlError(
                "INVALID_REPLICA_ASSIGNMENT",
                f"Attempted to add {additional} additional partition(s), but only "
                f"{len(assignments)} assignment(s) were specified.",
            )
        grown: list[MetadataRecord] = []
        for i, replicas in enumerate(assignments):
            validate_manual_assignment(image, replicas, rf)
            isr = _manual_isr(image, current + i, replicas)
            grown.append(
                PartitionRecord(topic.topic_id, current + i, tuple(replicas), isr, isr[0], 0, 0)
            )
        return grown
    brokers = image.unfenced_brokers()
    if rf > len(brokers):
        raise ControlError(
            "INVALID_REPLICATION_FACTOR",
            f"replication factor {rf} is larger than the {len(brokers)} available brokers",
        )
    placements = assign_replicas(brokers, total_count - current, rf, rng)
    return [
        PartitionRecord(topic.topic_id, current + i, replicas, replicas, replicas[0], 0, 0)
        for i, replicas in enumerate(placements)
    ]


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


# --- leadership and ISR -------------------------------------------------------------


def _change(
    topic_id: str, partition: int, state: PartitionState, leader: int, isr: tuple[int, ...]
) -> PartitionChangeRecord:
    """Kafka bumps the leader epoch on every leader change and the partition epoch on
    every change of any kind."""
    leader_epoch = state.leader_epoch + 1 if leader != state.leader else state.leader_epoch
    return PartitionChangeRecord(
        topic_id, partition, leader, isr, leader_epoch, state.partition_epoch + 1
    )


def elect_leader(
    state: PartitionState,
    isr: tuple[int, ...],
    usable: set[int],
    unclean: bool,
    preferred: bool = False,
) -> tuple[int, tuple[int, ...]]:
    """Kafka's election rules (7.7): keep a valid current leader (or take the
    preferred replica when asked), else the first ISR member in assignment order;
    outside the ISR only with unclean election, and then the ISR is just it.
    Returns (leader or -1, isr)."""
    valid = [r for r in state.replicas if r in isr and r in usable]
    if preferred and state.replicas and state.replicas[0] in valid:
        return state.replicas[0], isr
    if state.leader in valid:
        return state.leader, isr
    if valid:
        return valid[0], isr
    if unclean:
        for r in state.replicas:
            if r in usable:
                return r, (r,)
    return -1, isr


def _unclean_allowed(image: MetadataImage, topic: str, defaults: LogConfig) -> bool:
    overrides = image.configs.get(topic, {})
    value = overrides.get("unclean.leader.election.enable")
    if value is None:
        return defaults.unclean_leader_election_enable
    return value.strip().lower() == "true"


def fence_broker_records(
    image: MetadataImage, broker_id: int, defaults: LogConfig
) -> list[MetadataRecord]:
    """A broker missed its session (or shut down): fence it, drop it from every ISR
    and move each leadership it held to another ISR member."""
    broker = image.brokers.get(broker_id)
    if broker is None or broker.fenced:
        return []
    records: list[MetadataRecord] = [BrokerFenceRecord(broker_id, broker.broker_epoch, True)]
    usable = set(image.unfenced_brokers()) - {broker_id}
    for topic in image.topics.values():
        unclean = _unclean_allowed(image, topic.name, defaults)
        for p, state in sorted(topic.partitions.items()):
            if broker_id not in state.isr and state.leader != broker_id:
                continue
            # Kafka keeps the last ISR member in the ISR so that a clean election
            # is possible again once it returns (the partition is offline meanwhile).
            remaining = tuple(r for r in state.isr if r != broker_id)
            isr = remaining or state.isr
            leader, isr = elect_leader(state, isr, usable, unclean)
            if leader == state.leader and isr == state.isr:
                continue
            records.append(_change(topic.topic_id, p, state, leader, isr))
    return records


def register_broker_records(
    image: MetadataImage,
    record: RegisterBrokerRecord,
    defaults: LogConfig,
) -> list[MetadataRecord]:
    """A broker (re-)registers: a previous incarnation that is still unfenced is fenced
    first — out of every ISR, its leaderships moved — as Kafka does for a broker back
    from an unclean shutdown: its log may have lost an unflushed tail, so it must not
    lead or count as in sync until it has caught up again. The new registration
    starts fenced (metadata_image)."""
    old = image.brokers.get(record.broker_id)
    if old is not None and record.broker_epoch <= old.broker_epoch:
        raise ControlError(
            "STALE_BROKER_EPOCH",
            f"broker {record.broker_id} epoch {record.broker_epoch} is not above the "
            f"registered {old.broker_epoch}",
        )
    return [*fence_broker_records(image, record.broker_id, defaults), record]


def next_broker_epoch(image: MetadataImage, broker_id: int, metadata_offset: int) -> int:
    """A registration's broker epoch: above the broker's previous one and, as KRaft's
    (the offset of the registration record), above every earlier registration's."""
    old = image.brokers.get(broker_id)
    return max(old.broker_epoch + 1 if old else 1, metadata_offset + 1)


def check_broker_epoch(image: MetadataImage, broker_id: int, broker_epoch: int) -> None:
    """The sender of a broker request names its own registration (Kafka's
    checkBrokerEpoch); -1 is an unchecked sender."""
    broker = image.brokers.get(broker_id)
    if broker is None:
        raise ControlError("BROKER_NOT_AVAILABLE", f"broker {broker_id} is not registered")
    if broker_epoch >= 0 and broker.broker_epoch != broker_epoch:
        raise ControlError(
            "STALE_BROKER_EPOCH",
            f"broker {broker_id} epoch {broker_epoch} is not the registered {broker.broker_epoch}",
        )


def unfence_broker_records(
    image: MetadataImage, broker_id: int, defaults: LogConfig
) -> list[MetadataRecord]:
    """A registered broker caught up: unfence it and give leaderless partitions a
    leader again if it can lead them."""
    broker = image.brokers.get(broker_id)
    if broker is None or not broker.fenced:
        return []
    records: list[MetadataRecord] = [BrokerFenceRecord(broker_id, broker.broker_epoch, False)]
    usable = set(image.unfenced_brokers()) | {broker_id}
    for topic in image.topics.values():
        unclean = _unclean_allowed(image, topic.name, defaults)
        for p, state in sorted(topic.partitions.items()):
            if state.leader != -1 or broker_id not in state.replicas:
                continue
            leader, isr = elect_leader(state, state.isr, usable, unclean)
            if leader != -1:
                records.append(_change(topic.topic_id, p, state, leader, isr))
    return records


def preferred_leader_records(image: MetadataImage) -> list[MetadataRecord]:
    """auto.leader.rebalance.enable: move leadership back to each partition's
    preferred (first) replica when it is in the ISR and unfenced."""
    usable = set(image.unfenced_brokers())
    records: list[MetadataRecord] = []
    for topic in image.topics.values():
        for p, state in sorted(topic.partitions.items()):
            if not state.replicas or state.leader == state.replicas[0]:
                continue
            leader, isr = elect_leader(state, state.isr, usable, False, preferred=True)
            if leader != state.leader and leader != -1:
                records.append(_change(topic.topic_id, p, state, leader, isr))
    return records


PREFERRED, UNCLEAN = "preferred", "unclean"  # KIP-460's election types


def elect_leaders_records(
    image: MetadataImage,
    election: str,
    partitions: Sequence[tuple[str, int]] | None,
) -> tuple[list[MetadataRecord], dict[tuple[str, int], str]]:
    """An operator's leader election (KIP-460): `preferred` moves leadership to the
    first replica when it is in the ISR and unfenced; `unclean` gives a leaderless
    partition a leader, from outside the ISR if it must (whatever the topic's
    unclean.leader.election.enable says: the operator asked for it). `partitions`
    None means every partition that needs one. Returns the records and, per partition,
    NONE or the error Kafka answers (ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
    ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION)."""
    if election not in (PREFERRED, UNCLEAN):
        raise ControlError("INVALID_REQUEST", f"unknown election type {election!r}")
    usable = set(image.unfenced_brokers())
    wanted = (
        [(t.name, p) for t in image.topics.values() for p in sorted(t.partitions)]
        if partitions is None
        else list(dict.fromkeys(partitions))
    )
    records: list[MetadataRecord] = []
    results: dict[tuple[str, int], str] = {}
    for topic, p in wanted:
        t = image.topics.get(topic)
        state = t.partitions.get(p) if t is not None else None
        if t is None or state is None:
            results[(topic, p)] = "UNKNOWN_TOPIC_OR_PARTITION"
            continue
        if election == PREFERRED:
            if state.replicas and state.leader == state.replicas[0]:
                results[(topic, p)] = "ELECTION_NOT_NEEDED"
                continue
            leader, isr = elect_leader(state, state.isr, usable, False, preferred=True)
            if not state.replicas or leader != state.replicas[0]:
                results[(topic, p)] = "PREFERRED_LEADER_NOT_AVAILABLE"
                continue
        else:
            if state.leader >= 0 and state.leader in usable:
                results[(topic, p)] = "ELECTION_NOT_NEEDED"
                continue
            leader, isr = elect_leader(state, state.isr, usable, True)
            if leader < 0:
                results[(topic, p)] = "ELIGIBLE_LEADERS_NOT_AVAILABLE"
                continue
        records.append(_change(t.topic_id, p, state, leader, isr))
        results[(topic, p)] = "NONE"
    if partitions is None:
        # Asked for everything: report what was elected or could not be, as Kafka
        # does, not every partition that already had the right leader.
        results = {k: v for k, v in results.items() if v != "ELECTION_NOT_NEEDED"}
    return records, results


def ineligible_replicas(
    image: MetadataImage, new_isr: Sequence[int], broker_epochs: Sequence[int]
) -> list[str]:
    """KIP-903: why each ISR member may not be in it (empty when all may): it must be
    registered, unfenced, and — when the leader knows the broker epoch it fetched
    with — of that registration, not of an incarnation since replaced."""
    reasons = []
    for i, r in enumerate(new_isr):
        epoch = broker_epochs[i] if i < len(broker_epochs) else -1
        broker = image.brokers.get(r)
        if broker is None:
            reasons.append(f"broker {r} is not registered")
        elif broker.fenced:
            reasons.append(f"broker {r} is fenced")
        elif epoch >= 0 and epoch != broker.broker_epoch:
            reasons.append(
                f"broker {r} fetched with broker epoch {epoch}, not the registered "
                f"{broker.broker_epoch}"
            )
    return reasons


def alter_partition_records(
    image: MetadataImage,
    topic: str,
    partition: int,
    leader_id: int,
    leader_epoch: int,
    partition_epoch: int,
    new_isr: tuple[int, ...],
    new_isr_broker_epochs: Sequence[int] = (),
) -> list[MetadataRecord]:
    """A leader's ISR change (AlterPartition), checked against the epochs it knew and
    the broker epochs of the members (KIP-903)."""
    t = image.topics.get(topic)
    state = t.partitions.get(partition) if t is not None else None
    if t is None or state is None:
        raise ControlError("UNKNOWN_TOPIC_OR_PARTITION", f"no partition {topic}-{partition}")
    if leader_epoch < state.leader_epoch:
        raise ControlError(
            "FENCED_LEADER_EPOCH",
            f"leader epoch {leader_epoch} is older than {state.leader_epoch}",
        )
    if leader_id != state.leader or leader_epoch != state.leader_epoch:
        raise ControlError(
            "NOT_LEADER_OR_FOLLOWER", f"node {leader_id} does not lead {topic}-{partition}"
        )
    if partition_epoch != state.partition_epoch:
        raise ControlError(
            "INVALID_UPDATE_VERSION",
            f"partition epoch {partition_epoch} is not the current {state.partition_epoch}",
        )
    if leader_id not in new_isr or any(r not in state.replicas for r in new_isr):
        raise ControlError(
            "INVALID_REQUEST", f"ISR {list(new_isr)} must hold the leader and only replicas"
        )
    if new_isr_broker_epochs and len(new_isr_broker_epochs) != len(new_isr):
        raise ControlError(
            "INVALID_REQUEST",
            f"{len(new_isr_broker_epochs)} broker epochs for the {len(new_isr)} ISR members",
        )
    ineligible = ineligible_replicas(image, new_isr, new_isr_broker_epochs)
    if ineligible:
        raise ControlError("INELIGIBLE_REPLICA", "; ".join(ineligible))
    if tuple(new_isr) == state.isr:
        return []
    # The ISR change that takes in a reassignment's last new replica completes it.
    usable = set(image.unfenced_brokers())
    return [change_record(t.topic_id, partition, state, state.leader, tuple(new_isr), usable)]


def alter_partitions_records(
    image: MetadataImage, broker_id: int, broker_epoch: int, changes: Sequence[IsrChange]
) -> tuple[list[MetadataRecord], list[tuple[str, str]]]:
    """One AlterPartition request of a leader: the sender's broker epoch is checked for
    the whole request (STALE_BROKER_EPOCH raised), then each change on its own;
    returns the records and (error name, message) per change, NONE when accepted."""
    check_broker_epoch(image, broker_id, broker_epoch)
    records: list[MetadataRecord] = []
    answers: list[tuple[str, str]] = []
    for c in changes:
        try:
            records += alter_partition_records(
                image,
                c.topic,
                c.partition,
                broker_id,
                c.leader_epoch,
                c.partition_epoch,
                c.new_isr,
                c.new_isr_broker_epochs,
            )
            answers.append(("NONE", ""))
        except ControlError as e:
            answers.append((e.error_name, str(e)))
    return records, answers


# --- dynamic broker configs ------------------------------------------------------------

RETENTION_CONFIGS = (
    "log.retention.ms",
    "log.retention.minutes",
    "log.retention.hours",
    "log.retention.bytes",
)
# The broker configs that may change without a restart, each with its lowest value
# (Kafka's DynamicBrokerConfig names; the others are static node properties).
DYNAMIC_BROKER_CONFIGS: dict[str, int] = {
    "log.retention.ms": -1,
    "log.retention.minutes": -1,
    "log.retention.hours": -1,
    "log.retention.bytes": -1,
    "leader.replication.throttled.rate": 1,
    "follower.replication.throttled.rate": 1,
    "log.cleaner.threads": 1,
}


def alter_broker_config_records(
    image: MetadataImage, broker: str, changes: Mapping[str, str | None]
) -> list[MetadataRecord]:
    """IncrementalAlterConfigs for a BROKER resource: `broker` is a broker id, or ""
    for the cluster-wide default; a value sets the override, None removes it."""
    if broker and not broker.isdigit():
        raise ControlError(
            "INVALID_REQUEST", f'broker config resource {broker!r} is not a broker id or ""'
        )
    for key, value in changes.items():
        if key not in DYNAMIC_BROKER_CONFIGS:
            raise ControlError(
                "INVALID_CONFIG",
                f"{key} cannot be changed without a restart; the dynamic broker configs "
                f"are {', '.join(sorted(DYNAMIC_BROKER_CONFIGS))}",
            )
        if value is None:
            continue
        try:
            number = int(value.strip())
        except ValueError:
            raise ControlError(
                "INVALID_CONFIG", f"Invalid value {value} for configuration {key}: not a number"
            ) from None
        if number < DYNAMIC_BROKER_CONFIGS[key]:
            raise ControlError(
                "INVALID_CONFIG",
                f"Invalid value {value} for configuration {key}: Value must be at least "
                f"{DYNAMIC_BROKER_CONFIGS[key]}",
            )
    return [
        ConfigRecord(broker, key, value, BROKER_RESOURCE) for key, value in sorted(changes.items())
    ]


def effective_broker_properties(
    image: MetadataImage, broker_id: int, static: Mapping[str, str]
) -> dict[str, str]:
    """Kafka's precedence: the broker's own dynamic config, then the cluster-wide
    default, then its static properties."""
    return {
        **static,
        **image.broker_configs.get("", {}),
        **image.broker_configs.get(str(broker_id), {}),
    }
