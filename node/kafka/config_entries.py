"""DescribeConfigs' entries as Kafka builds them (its ConfigHelper): every config of the
resource with its value, source, type, read-only and sensitive flags, its synonyms
(KIP-226: every layer that sets it, highest precedence first, down to the default) and
a line of documentation. Pure: the config layers come in, entries go out.

Sources are Kafka's wire ids: DYNAMIC_TOPIC_CONFIG 1, DYNAMIC_BROKER_CONFIG 2 (one
broker's), DYNAMIC_DEFAULT_BROKER_CONFIG 3 (the cluster default), STATIC_BROKER_CONFIG 4
(server.properties), DEFAULT_CONFIG 5."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from seglog.node.config import DEFAULT_LISTENERS, DEFAULT_SECURITY_PROTOCOL_MAP
from seglog.storage.log_config import (
    BROKER_LOG_SETTING_KEYS,
    BROKER_SYNONYMS,
    TOPIC_CONFIG_KEYS,
    ConfigKey,
    ConfigType,
)

from .socket_settings import SocketSettings

TOPIC_CONFIG, DYNAMIC_BROKER, DYNAMIC_DEFAULT_BROKER, STATIC_BROKER, DEFAULT = 1, 2, 3, 4, 5
# Kafka's DescribeConfigs config types (UNKNOWN: a property no config defines).
UNKNOWN, BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST, CLASS, PASSWORD = range(10)
WIRE_TYPES = {
    ConfigType.BOOLEAN: BOOLEAN,
    ConfigType.STRING: STRING,
    ConfigType.INT: INT,
    ConfigType.LONG: LONG,
    ConfigType.DOUBLE: DOUBLE,
    ConfigType.LIST: LIST,
}


@dataclass(frozen=True)
class Synonym:
    name: str
    value: str | None
    source: int


@dataclass(frozen=True)
class Entry:
    name: str
    value: str | None
    source: int
    read_only: bool
    sensitive: bool
    config_type: int
    documentation: str
    synonyms: tuple[Synonym, ...]


@dataclass(frozen=True)
class Layers:
    """Where a broker's settings come from: this broker's dynamic configs, the
    cluster-wide dynamic default, the node's own server.properties (only known for
    the node answering)."""

    dynamic: Mapping[str, str]
    dynamic_default: Mapping[str, str]
    static: Mapping[str, str]


# Topic configs: what each one does, in a line.
TOPIC_DOCS = {
    "segment.bytes": "The size of a log segment file; a full segment rolls.",
    "segment.ms": "The time after which the active segment rolls even if not full.",
    "segment.jitter.ms": "The largest random jitter subtracted from segment.ms per segment.",
    "segment.index.bytes": "The size of the offset and time indexes of a segment.",
    "index.interval.bytes": "How many log bytes between two offset index entries.",
    "flush.messages": "How many records are appended before the log is fsynced.",
    "flush.ms": "How long appended records may wait before the log is fsynced.",
    "retention.bytes": "The most bytes a partition keeps before deleting old segments; "
    "-1 for no size limit.",
    "retention.ms": "How long a record is kept before its segment is deleted; -1 for ever.",
    "max.message.bytes": "The largest record batch accepted, after compression.",
    "file.delete.delay.ms": "How long a deleted segment stays on disk (as .deleted).",
    "delete.retention.ms": "How long tombstones stay in a compacted topic.",
    "min.compaction.lag.ms": "The least time a record stays uncompacted.",
    "max.compaction.lag.ms": "The most time a record may stay uncompacted.",
    "min.cleanable.dirty.ratio": "The dirty share of a log above which it is compacted.",
    "cleanup.policy": "delete (retention), compact, or both.",
    "unclean.leader.election.enable": "Whether a replica outside the ISR may become "
    "leader, at the cost of losing records.",
    "min.insync.replicas": "The fewest in-sync replicas that acks=all produces need.",
    "compression.type": "The stored compression: a codec, or producer to keep the producer's.",
    "preallocate": "Whether a new segment file is preallocated to segment.bytes.",
    "message.timestamp.type": "CreateTime (the producer's) or LogAppendTime (the broker's).",
    "message.timestamp.before.max.ms": "How far in the past a record's timestamp may be.",
    "message.timestamp.after.max.ms": "How far in the future a record's timestamp may be.",
    "leader.replication.throttled.replicas": "The replicas whose leader-side "
    "replication is throttled: partition:broker entries or *.",
    "follower.replication.throttled.replicas": "The replicas whose follower-side "
    "replication is throttled: partition:broker entries or *.",
}

_SOCKETS = SocketSettings()
# The node's own broker configs (beyond the log ones in storage/log_config.py):
# name -> (type, seglog's default (Kafka's but where docs/compatibility.md says) or
# None, documentation).
NODE_CONFIGS: dict[str, tuple[int, str | None, str]] = {
    "node.id": (INT, None, "This node's id, as a broker and as a controller voter."),
    "process.roles": (LIST, "broker,controller", "broker, controller, or both."),
    "listeners": (LIST, DEFAULT_LISTENERS, "The listeners, NAME://host:port each."),
    "advertised.listeners": (
        LIST,
        None,
        "The addresses clients are given for each listener; unset: the listeners'.",
    ),
    "listener.security.protocol.map": (
        STRING,
        DEFAULT_SECURITY_PROTOCOL_MAP,
        "Each listener's security protocol, NAME:PROTOCOL entries.",
    ),
    "controller.listener.names": (LIST, "CONTROLLER", "The listeners the controller serves."),
    "inter.broker.listener.name": (STRING, None, "The listener brokers replicate over."),
    "controller.quorum.voters": (LIST, "", "The controller voters, id@host:port each."),
    "log.dirs": (LIST, None, "The directories holding the partition logs."),
    "log.dir": (STRING, "/tmp/kafka-logs", "The log directory when log.dirs is unset."),
    "num.partitions": (INT, "1", "The partition count of an auto-created topic."),
    "default.replication.factor": (INT, "1", "The replication factor of auto-created topics."),
    "auto.create.topics.enable": (BOOLEAN, "true", "Whether Metadata creates unknown topics."),
    "num.network.threads": (
        INT,
        str(_SOCKETS.num_network_threads),
        "The network threads of each listener.",
    ),
    "num.io.threads": (INT, "8", "The threads handling requests."),
    "queued.max.requests": (INT, str(_SOCKETS.queued_max_requests), "Requests queued."),
    "socket.request.max.bytes": (
        INT,
        str(_SOCKETS.socket_request_max_bytes),
        "The largest request accepted.",
    ),
    "max.connections": (INT, str(_SOCKETS.max_connections), "The most connections a node takes."),
    "connections.max.idle.ms": (
        LONG,
        str(_SOCKETS.connections_max_idle_ms),
        "Idle connections close after this.",
    ),
    "fetch.max.bytes": (INT, "57671680", "The most bytes one fetch answer holds."),
    "broker.session.timeout.ms": (INT, "9000", "A broker without heartbeats this long is fenced."),
    "broker.heartbeat.interval.ms": (INT, "2000", "How often a broker heartbeats."),
    "controller.quorum.election.timeout.ms": (INT, "1000", "The controller election timeout."),
    "replica.lag.time.max.ms": (LONG, "30000", "A follower this far behind leaves the ISR."),
    "replica.fetch.max.bytes": (INT, "1048576", "The bytes a follower fetches per partition."),
    "replica.fetch.backoff.ms": (INT, "1000", "A follower's pause after a failed fetch."),
    "auto.leader.rebalance.enable": (BOOLEAN, "true", "Whether preferred leaders are restored."),
    "leader.imbalance.check.interval.seconds": (LONG, "300", "How often leaders are checked."),
    "leader.replication.throttled.rate": (
        LONG,
        "9223372036854775807",
        "Bytes/s a leader sends to throttled replicas.",
    ),
    "follower.replication.throttled.rate": (
        LONG,
        "9223372036854775807",
        "Bytes/s a follower fetches for throttled replicas.",
    ),
    "offsets.topic.num.partitions": (INT, "50", "The partitions of __consumer_offsets."),
    "offsets.topic.replication.factor": (SHORT, "3", "The replication of __consumer_offsets."),
    "offsets.retention.minutes": (INT, "10080", "How long an empty group's offsets are kept."),
    "offset.metadata.max.bytes": (INT, "4096", "The largest commit metadata."),
    "group.min.session.timeout.ms": (INT, "6000", "The shortest session a member may ask."),
    "group.max.session.timeout.ms": (INT, "1800000", "The longest session a member may ask."),
    "group.initial.rebalance.delay.ms": (INT, "3000", "The wait for more members to join."),
    "group.max.size": (INT, "2147483647", "The most members a group may have."),
}

_LOG_SETTING_DOCS = "A broker-wide log manager, producer-id or log cleaner setting."


def _render(key: ConfigKey) -> str | None:
    return None if key.default is None else key.render(key.default)


def broker_catalog() -> dict[str, tuple[int, str | None, str]]:
    """Every broker config seglog knows: name -> (type, default, documentation)."""
    out = dict(NODE_CONFIGS)
    for topic_name, synonyms in BROKER_SYNONYMS.items():
        for s in synonyms:
            doc = f"The broker default of the topic config {topic_name}."
            out.setdefault(s.key.name, (WIRE_TYPES[s.key.type], _render(s.key), doc))
    for name, key in BROKER_LOG_SETTING_KEYS.items():
        out.setdefault(name, (WIRE_TYPES[key.type], _render(key), _LOG_SETTING_DOCS))
    return out


def _layers_of(name: str, layers: Layers, default: str | None) -> list[Synonym]:
    """The layers that set `name`, highest precedence first, then its default."""
    out = []
    for values, source in (
        (layers.dynamic, DYNAMIC_BROKER),
        (layers.dynamic_default, DYNAMIC_DEFAULT_BROKER),
        (layers.static, STATIC_BROKER),
    ):
        if name in values:
            out.append(Synonym(name, values[name], source))
    if default is not None:
        out.append(Synonym(name, default, DEFAULT))
    return out


def broker_synonym_family(name: str) -> tuple[str, ...]:
    """A broker config and its siblings that set the same thing (log.retention.ms,
    .minutes, .hours), highest precedence first; the name alone for most."""
    for synonyms in BROKER_SYNONYMS.values():
        names = tuple(s.key.name for s in synonyms)
        if name in names and len(names) > 1:
            return names
    return (name,)


def broker_entries(
    layers: Layers,
    dynamic_names: frozenset[str] | set[str],
    sensitive: Callable[[str], bool],
) -> list[Entry]:
    """A BROKER resource: every known config, the value its highest layer gives."""
    catalog = broker_catalog()
    # Kafka's allConfigs: every property the node was given, and every known config.
    names = set(catalog) | set(layers.dynamic) | set(layers.dynamic_default) | set(layers.static)
    out = []
    for name in sorted(names):
        wire_type, default, doc = catalog.get(name, (UNKNOWN, None, ""))
        synonyms = [
            s
            for family_name in broker_synonym_family(name)
            for s in _layers_of(
                family_name,
                layers,
                default if family_name == name else catalog.get(family_name, (0, None))[1],
            )
        ]
        own = _layers_of(name, layers, default)
        top = own[0] if own else Synonym(name, None, DEFAULT)
        secret = sensitive(name)
        out.append(
            Entry(
                name,
                None if secret else top.value,
                top.source,
                name not in dynamic_names,
                secret,
                PASSWORD if secret else wire_type,
                doc,
                tuple(Synonym(s.name, None if secret else s.value, s.source) for s in synonyms),
            )
        )
    return out


def default_broker_entries(
    dynamic_default: Mapping[str, str], sensitive: Callable[[str], bool]
) -> list[Entry]:
    """The BROKER resource "" (the cluster default): only its dynamic configs, as Kafka."""
    catalog = broker_catalog()
    out = []
    for name, value in sorted(dynamic_default.items()):
        wire_type, _default, doc = catalog.get(name, (UNKNOWN, None, ""))
        secret = sensitive(name)
        shown = None if secret else value
        out.append(
            Entry(
                name,
                shown,
                DYNAMIC_DEFAULT_BROKER,
                False,
                secret,
                wire_type,
                doc,
                (Synonym(name, shown, DYNAMIC_DEFAULT_BROKER),),
            )
        )
    return out


def topic_entries(
    effective: Mapping[str, str], topic_overrides: Mapping[str, str], layers: Layers
) -> list[Entry]:
    """A TOPIC resource: each topic config's effective value; its source is the topic's
    override, else the highest broker layer of its broker synonyms, else the default.
    Synonyms: the override, then each broker synonym's layers and default."""
    out = []
    for name, value in effective.items():
        key = TOPIC_CONFIG_KEYS[name]
        synonyms: list[Synonym] = []
        if name in topic_overrides:
            synonyms.append(Synonym(name, topic_overrides[name], TOPIC_CONFIG))
        for s in BROKER_SYNONYMS.get(name, ()):
            synonyms += _layers_of(s.key.name, layers, _render(s.key))
        set_layers = [s for s in synonyms if s.source != DEFAULT]
        source = set_layers[0].source if set_layers else DEFAULT
        out.append(
            Entry(
                name,
                value,
                source,
                False,
                False,
                WIRE_TYPES[key.type],
                TOPIC_DOCS.get(name, ""),
                tuple(synonyms),
            )
        )
    return out
