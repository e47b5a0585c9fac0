"""The metadata image: what applying the metadata records in order gives.

Plain data, no I/O. Every node applies the same committed records in the same
order and so holds the same image; `canonical()` makes that comparable.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from seglog.controller.metadata_records import (
    BROKER_RESOURCE,
    GROUP_RESOURCE,
    AccessControlEntryRecord,
    BrokerFenceRecord,
    ClientQuotaRecord,
    ConfigRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UserScramCredentialRecord,
)


@dataclass(frozen=True, slots=True)
class PartitionState:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    # KIP-455: while a reassignment runs, replicas = target + removing_replicas and
    # adding_replicas are the target's members that were not replicas before.
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing_replicas)

    @property
    def original_replicas(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding_replicas)


@dataclass(slots=True)
class TopicImage:
    name: str
    topic_id: str
    partitions: dict[int, PartitionState] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BrokerImage:
    broker_id: int
    broker_epoch: int
    host: str
    port: int
    fenced: bool
    rack: str | None = None
    endpoints: tuple[tuple[str, str, int], ...] = ()

    def endpoint(self, listener: str) -> tuple[str, int] | None:
        for name, host, port in self.endpoints:
            if name == listener:
                return host, port
        return None


class MetadataImage:
    def __init__(self) -> None:
        self.topics: dict[str, TopicImage] = {}
        self.topic_names_by_id: dict[str, str] = {}
        self.configs: dict[str, dict[str, str]] = {}
        # Dynamic broker configs by broker id ("": the cluster-wide default).
        self.broker_configs: dict[str, dict[str, str]] = {}
        # Per-group configs (Kafka 4.0's GROUP resource) by group id.
        self.group_configs: dict[str, dict[str, str]] = {}
        # Client quotas: entity ((type, name) pairs, name None: default) -> key -> value.
        self.client_quotas: dict[tuple[tuple[str, str | None], ...], dict[str, float]] = {}
        self.brokers: dict[int, BrokerImage] = {}
        self.next_producer_id = 0
        # Security: SCRAM credentials by (user, mechanism code), ACL entries by id.
        self.scram_credentials: dict[tuple[str, int], UserScramCredentialRecord] = {}
        self.acls: dict[str, AccessControlEntryRecord] = {}

    def apply(self, record: MetadataRecord) -> None:
        match record:
            case RegisterBrokerRecord():
                old = self.brokers.get(record.broker_id)
                assert old is None or record.broker_epoch > old.broker_epoch, (
                    f"broker {record.broker_id} epoch must rise: {old} -> {record}"
                )
                # A (re-)registered broker starts fenced until it has caught up.
                self.brokers[record.broker_id] = BrokerImage(
                    record.broker_id,
                    record.broker_epoch,
                    record.host,
                    record.port,
                    True,
                    record.rack,
                    record.endpoints,
                )
            case BrokerFenceRecord():
                old = self.brokers.get(record.broker_id)
                if old is not None and old.broker_epoch == record.broker_epoch:
                    self.brokers[record.broker_id] = replace(old, fenced=record.fenced)
            case TopicRecord():
                assert record.name not in self.topics, f"topic {record.name} exists"
                self.topics[record.name] = TopicImage(record.name, record.topic_id)
                self.topic_names_by_id[record.topic_id] = record.name
            case PartitionRecord():
                topic = self.topics[self.topic_names_by_id[record.topic_id]]
                topic.partitions[record.partition] = PartitionState(
                    tuple(record.replicas),
                    tuple(record.isr),
                    record.leader,
                    record.leader_epoch,
                    record.partition_epoch,
                    tuple(record.adding_replicas),
                    tuple(record.removing_replicas),
                )
            case PartitionChangeRecord():
                topic = self.topics[self.topic_names_by_id[record.topic_id]]
                old_state = topic.partitions[record.partition]
                assert record.partition_epoch > old_state.partition_epoch, "partition epochs rise"
                assert record.leader_epoch >= old_state.leader_epoch, "leader epochs never fall"
                topic.partitions[record.partition] = replace(
                    old_state,
                    leader=record.leader,
                    isr=tuple(record.isr),
                    leader_epoch=record.leader_epoch,
                    partition_epoch=record.partition_epoch,
                    replicas=old_state.replicas
                    if record.replicas is None
                    else tuple(record.replicas),
                    adding_replicas=old_state.adding_replicas
                    if record.adding_replicas is None
                    else tuple(record.adding_replicas),
                    removing_replicas=old_state.removing_replicas
                    if record.removing_replicas is None
                    else tuple(record.removing_replicas),
                )
            case RemoveTopicRecord():
                name = self.topic_names_by_id.pop(record.topic_id)
                del self.topics[name]
                self.configs.pop(name, None)
            case ConfigRecord():
                by_name = {
                    BROKER_RESOURCE: self.broker_configs,
                    GROUP_RESOURCE: self.group_configs,
                }.get(record.resource_type, self.configs)
                overrides = by_name.setdefault(record.resource_name, {})
                if record.value is None:
                    overrides.pop(record.name, None)
                else:
                    overrides[record.name] = record.value
                if not overrides:
                    del by_name[record.resource_name]
            case ClientQuotaRecord():
                values = self.client_quotas.setdefault(record.entity, {})
                if record.remove:
                    values.pop(record.key, None)
                else:
                    values[record.key] = record.value
                if not values:
                    del self.client_quotas[record.entity]
            case ProducerIdsRecord():
                assert record.next_producer_id > self.next_producer_id, "producer ids only rise"
                self.next_producer_id = record.next_producer_id
            case UserScramCredentialRecord():
                self.scram_credentials[(record.name, record.mechanism)] = record
            case RemoveUserScramCredentialRecord():
                self.scram_credentials.pop((record.name, record.mechanism), None)
            case AccessControlEntryRecord():
                assert record.id not in self.acls, f"ACL id {record.id} taken"
                self.acls[record.id] = record
            case RemoveAccessControlEntryRecord():
                self.acls.pop(record.id, None)
            case _:
                raise TypeError(f"not a metadata record: {record!r}")

    def topic(self, name: str) -> TopicImage | None:
        return self.topics.get(name)

    def partition(self, topic: str, partition: int) -> PartitionState | None:
        t = self.topics.get(topic)
        return t.partitions.get(partition) if t is not None else None

    def unfenced_brokers(self) -> list[int]:
        return sorted(b.broker_id for b in self.brokers.values() if not b.fenced)

    def canonical(self) -> tuple[object, ...]:
        """A value equal on two nodes exactly when their images are equal."""
        return (
            tuple(
                (t.name, t.topic_id, tuple(sorted(t.partitions.items())))
                for t in sorted(self.topics.values(), key=lambda t: t.name)
            ),
            tuple(sorted((k, tuple(sorted(v.items()))) for k, v in self.configs.items())),
            tuple(sorted((k, tuple(sorted(v.items()))) for k, v in self.broker_configs.items())),
            tuple(sorted((k, tuple(sorted(v.items()))) for k, v in self.group_configs.items())),
            tuple(
                sorted((str(k), tuple(sorted(v.items()))) for k, v in self.client_quotas.items())
            ),
            tuple(sorted(self.brokers.items())),
            self.next_producer_id,
            tuple(sorted(self.scram_credentials.items())),
            tuple(sorted(self.acls.items())),
        )

    def to_records(self) -> list[MetadataRecord]:
        """Records that rebuild this image from empty (a metadata snapshot)."""
        out: list[MetadataRecord] = []
        for b in sorted(self.brokers.values(), key=lambda b: b.broker_id):
            out.append(
                RegisterBrokerRecord(
                    b.broker_id, b.broker_epoch, b.host, b.port, b.rack, b.endpoints
                )
            )
            out.append(BrokerFenceRecord(b.broker_id, b.broker_epoch, b.fenced))
        for t in sorted(self.topics.values(), key=lambda t: t.name):
            out.append(TopicRecord(t.name, t.topic_id))
            for p, s in sorted(t.partitions.items()):
                out.append(
                    PartitionRecord(
                        t.topic_id,
                        p,
                        s.replicas,
                        s.isr,
                        s.leader,
                        s.leader_epoch,
                        s.partition_epoch,
                        s.adding_replicas,
                        s.removing_replicas,
                    )
                )
        for name, overrides in sorted(self.configs.items()):
            for key, value in sorted(overrides.items()):
                out.append(ConfigRecord(name, key, value))
        for broker, overrides in sorted(self.broker_configs.items()):
            for key, value in sorted(overrides.items()):
                out.append(ConfigRecord(broker, key, value, BROKER_RESOURCE))
        for group, overrides in sorted(self.group_configs.items()):
            for key, value in sorted(overrides.items()):
                out.append(ConfigRecord(group, key, value, GROUP_RESOURCE))
        for entity, values in sorted(self.client_quotas.items(), key=lambda kv: str(kv[0])):
            for key, number in sorted(values.items()):
                out.append(ClientQuotaRecord(entity, key, number))
        if self.next_producer_id:
            out.append(ProducerIdsRecord(-1, -1, self.next_producer_id))
        out.extend(v for _, v in sorted(self.scram_credentials.items()))
        out.extend(v for _, v in sorted(self.acls.items()))
        return out
