"""A node's configuration: Kafka's `server.properties` names and defaults."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from seglog.node.groups.group_config import SERVER_ASSIGNORS, ConsumerConfig, GroupConfig
from seglog.node.transactions.txn_config import TxnConfig
from seglog.storage.errors import InvalidConfigError
from seglog.storage.log_config import BrokerLogSettings, LogConfig
from seglog.storage.properties_file import parse_properties

from .security.inter_broker_sasl import inter_broker_login
from .security.listener_security import check_listener_security


def int_setting(
    props: Mapping[str, str], key: str, default: int, at_least: int | None = None
) -> int:
    """An INT setting by its Kafka name: the default when absent, else a clear error
    naming the key for a value that is not a number or is below `at_least`."""
    raw = props.get(key)
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise InvalidConfigError(
            f"Invalid value {raw} for configuration {key}: Not a number of type INT"
        ) from None
    if at_least is not None and value < at_least:
        raise InvalidConfigError(
            f"Invalid value {raw} for configuration {key}: Value must be at least {at_least}"
        )
    return value


_int = int_setting  # the short name the long list below uses


class ConfigProperties(dict[str, str]):
    """A node's properties that remember which keys were read, as Kafka's
    AbstractConfig does: a key nobody read once the node has started is one seglog
    does not know (a typo, or a Kafka setting seglog does not implement), and the
    node says so at start instead of ignoring it in silence. A plain copy (`dict(p)`)
    reads nothing."""

    def __init__(self, props: Mapping[str, str] = ()) -> None:  # type: ignore[assignment]
        super().__init__(props)
        self._read: set[str] = set()

    def __getitem__(self, key: str) -> str:
        self._read.add(key)
        return super().__getitem__(key)

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        self._read.add(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self._read.add(key)
        return super().__contains__(key)

    def unused(self) -> list[str]:
        """The keys given but never read, sorted."""
        return sorted(k for k in self.keys() if k not in self._read)


def _bool(props: Mapping[str, str], key: str, default: bool) -> bool:
    raw = props.get(key)
    if raw is None:
        return default
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise InvalidConfigError(
            f"Invalid value {raw} for configuration {key}: "
            "Expected value to be either true or false"
        )
    return text == "true"


def _choice(props: Mapping[str, str], key: str, default: str, allowed: tuple[str, ...]) -> str:
    value = str(props.get(key, default)).strip()
    if value not in allowed:
        raise InvalidConfigError(
            f"Invalid value {value} for configuration {key}: "
            f"String must be one of: {', '.join(allowed)}"
        )
    return value


# seglog's own (no Kafka key): how the Kafka listeners run, on the node's event loop
# (node/kafka/loop_server.py) or on Kafka's threads (node/kafka/socket_server.py).
KAFKA_LISTENER_MODELS = ("event-loop", "threads")
# How followers fetch from leaders: gRPC's Fetch on the inter-broker gRPC listener, or
# Kafka's inter-broker Fetch on a Kafka listener, on the node's event loop.
REPLICA_FETCH_PROTOCOLS = ("grpc", "kafka")

# Security protocols a listener may be mapped to, and the ones served today.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SUPPORTED_SECURITY_PROTOCOLS = SECURITY_PROTOCOLS  # SASL_*: Kafka listeners only
# Kafka's default map, plus seglog's own listener names (gRPC for seglog's clients
# and replication; the controller quorum), which Kafka users would have to map.
DEFAULT_SECURITY_PROTOCOL_MAP = (
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL,"
    "GRPC:PLAINTEXT,REPLICATION:PLAINTEXT,CONTROLLER:PLAINTEXT"
)
DEFAULT_LISTENERS = "GRPC://127.0.0.1:9192,CONTROLLER://127.0.0.1:9292"


@dataclass(frozen=True, slots=True)
class Listener:
    """One `NAME://host:port` entry of `listeners` or `advertised.listeners`."""

    name: str
    host: str
    port: int

    @property
    def address(self) -> tuple[str, int]:
        return self.host, self.port


def parse_csv_list(value: str) -> list[str]:
    """The entries of a comma-separated list, stripped, empty ones dropped (Kafka's
    CoreUtils.parseCsvList)."""
    return [item.strip() for item in value.split(",") if item.strip()]


def parse_listeners(key: str, value: str) -> dict[str, Listener]:
    """`NAME://host:port,...` with unique names (Kafka's listener syntax)."""
    out: dict[str, Listener] = {}
    for item in parse_csv_list(value):
        name, sep, address = item.partition("://")
        host, colon, port = address.rpartition(":")
        if not sep or not name or not colon or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise InvalidConfigError(
                f"Invalid value {value} for configuration {key}: "
                f"expected NAME://host:port entries, got {item!r}"
            )
        name = name.upper()
        if name in out:
            raise InvalidConfigError(
                f"Invalid value {value} for configuration {key}: "
                f"each listener must have a different name, {name} appears twice"
            )
        out[name] = Listener(name, host.strip("[]") or "0.0.0.0", int(port))
    if not out:
        raise InvalidConfigError(f"Invalid value {value} for configuration {key}: no listener")
    return out


def parse_protocol_map(value: str) -> dict[str, str]:
    """`listener.security.protocol.map=NAME:PROTOCOL,...`."""
    out: dict[str, str] = {}
    for item in parse_csv_list(value):
        name, colon, protocol = item.partition(":")
        protocol = protocol.strip().upper()
        if not colon or protocol not in SECURITY_PROTOCOLS:
            raise InvalidConfigError(
                f"Invalid value {value} for configuration listener.security.protocol.map: "
                f"{item!r} is not NAME:PROTOCOL with a protocol among {list(SECURITY_PROTOCOLS)}"
            )
        out[name.strip().upper()] = protocol
    return out


def _names(props: Mapping[str, str], key: str, default: str) -> tuple[str, ...]:
    return tuple(n.upper() for n in parse_csv_list(props.get(key, default)))


INTER_BROKER_ADDRESS_OVERRIDES = "seglog.inter.broker.address.overrides"


def parse_voters(value: str, key: str = "controller.quorum.voters") -> dict[int, tuple[str, int]]:
    """`controller.quorum.voters=1@h:9292,2@h:9293` → {1: (h, 9292), ...}; `key` is the
    configuration named in errors (the same id@host:port list serves other keys)."""
    voters: dict[int, tuple[str, int]] = {}
    for item in parse_csv_list(value):
        node, at, address = item.partition("@")
        host, colon, port = address.rpartition(":")
        if not at or not node.strip().isdigit() or not colon or not port.isdigit():
            raise InvalidConfigError(
                f"Invalid value {value} for configuration {key}: "
                f"expected id@host:port entries, got {item!r}"
            )
        voters[int(node)] = (host.strip("[]"), int(port))
    return voters


def _consumer_group_config(props: Mapping[str, str]) -> ConsumerConfig:
    """KIP-848's group.consumer.* settings."""
    names = props.get("group.consumer.assignors", ",".join(SERVER_ASSIGNORS))
    assignors = tuple(parse_csv_list(names))
    unknown = [a for a in assignors if a not in SERVER_ASSIGNORS]
    if not assignors or unknown:
        raise InvalidConfigError(
            f"Invalid value {names} for configuration group.consumer.assignors: "
            f"the assignors are {', '.join(sorted(SERVER_ASSIGNORS))}"
        )
    return ConsumerConfig(
        heartbeat_interval_ms=_int(props, "group.consumer.heartbeat.interval.ms", 5_000, 1),
        session_timeout_ms=_int(props, "group.consumer.session.timeout.ms", 45_000, 1),
        assignors=assignors,
        max_size=_int(props, "group.consumer.max.size", 2**31 - 1, at_least=1),
    )


def _txn_config(props: Mapping[str, str]) -> TxnConfig:
    """The transaction coordinator's settings (Kafka's names and defaults)."""
    return TxnConfig(
        transaction_state_log_num_partitions=_int(
            props, "transaction.state.log.num.partitions", 50, at_least=1
        ),
        transaction_max_timeout_ms=_int(props, "transaction.max.timeout.ms", 900_000, 1),
        transactional_id_expiration_ms=_int(
            props, "transactional.id.expiration.ms", 604_800_000, at_least=1
        ),
        offsets_topic_num_partitions=_int(props, "offsets.topic.num.partitions", 50, 1),
        add_partitions_to_txn_retry_backoff_max_ms=_int(
            props, "add.partitions.to.txn.retry.backoff.max.ms", 100, at_least=0
        ),
    )


def _group_config(props: Mapping[str, str]) -> GroupConfig:
    """The group coordinator's settings (Kafka's names and defaults)."""
    config = GroupConfig(
        group_min_session_timeout_ms=_int(props, "group.min.session.timeout.ms", 6_000, 1),
        group_max_session_timeout_ms=_int(props, "group.max.session.timeout.ms", 1_800_000, 1),
        group_initial_rebalance_delay_ms=_int(
            props, "group.initial.rebalance.delay.ms", 3_000, at_least=0
        ),
        group_max_size=_int(props, "group.max.size", 2**31 - 1, at_least=1),
        offsets_retention_minutes=_int(props, "offsets.retention.minutes", 10_080, 1),
        offsets_retention_check_interval_ms=_int(
            props, "offsets.retention.check.interval.ms", 600_000, at_least=1
        ),
        offset_metadata_max_bytes=_int(props, "offset.metadata.max.bytes", 4_096, at_least=0),
        offsets_topic_num_partitions=_int(props, "offsets.topic.num.partitions", 50, 1),
        consumer=_consumer_group_config(props),
    )
    if config.group_min_session_timeout_ms > config.group_max_session_timeout_ms:
        raise InvalidConfigError(
            f"group.min.session.timeout.ms {config.group_min_session_timeout_ms} is above "
            f"group.max.session.timeout.ms {config.group_max_session_timeout_ms}"
        )
    return config


@dataclass(frozen=True)
class NodeConfig:
    node_id: int
    listeners: dict[str, Listener]
    advertised_listeners: dict[str, Listener]
    log_dirs: tuple[Path, ...]
    log_config: LogConfig
    log_settings: BrokerLogSettings
    num_partitions: int = 1
    default_replication_factor: int = 1
    auto_create_topics_enable: bool = True
    fetch_max_bytes: int = 57_671_680
    num_io_threads: int = 8
    queued_max_requests: int = 500
    kafka_listener_model: str = "event-loop"
    process_roles: tuple[str, ...] = ("broker", "controller")
    controller_quorum_voters: dict[int, tuple[str, int]] = field(default_factory=dict)
    # seglog's own (no Kafka key): where this node dials another broker for replication
    # instead of the inter-broker endpoint that broker registered. The chaos harness
    # routes each link through a proxy of its own with it (chaos/link_proxy.py).
    inter_broker_address_overrides: dict[int, tuple[str, int]] = field(default_factory=dict)
    cluster_id: str = "seglog-cluster"
    broker_session_timeout_ms: int = 9_000
    replica_lag_time_max_ms: int = 30_000
    replica_fetch_max_bytes: int = 1_048_576
    replica_fetch_backoff_ms: int = 1_000
    # Replication throttles, bytes/s: the static values; dynamic broker configs override.
    leader_replication_throttled_rate: int = (1 << 63) - 1
    follower_replication_throttled_rate: int = (1 << 63) - 1
    replication_quota_window_num: int = 11
    replication_quota_window_size_seconds: int = 1
    broker_heartbeat_interval_ms: int = 2_000
    controller_quorum_election_timeout_ms: int = 1_000
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    security_protocol_map: dict[str, str] = field(default_factory=dict)
    controller_listener_names: tuple[str, ...] = ("CONTROLLER",)
    grpc_listener_names: tuple[str, ...] = ("GRPC", "REPLICATION")
    inter_broker_listener_name: str = "GRPC"
    # How followers fetch: "kafka" (the default when the node has a Kafka listener) or "grpc".
    replica_fetch_protocol: str = "grpc"
    metrics_port: int = -1  # -1: no /metrics endpoint
    metrics_host: str = "0.0.0.0"
    group_config: GroupConfig = field(default_factory=GroupConfig)
    offsets_topic_replication_factor: int = 3
    txn_config: TxnConfig = field(default_factory=TxnConfig)
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_min_isr: int = 2
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    raw: ConfigProperties = field(default_factory=ConfigProperties, compare=False, repr=False)

    @classmethod
    def from_properties(cls, given: Mapping[str, str]) -> NodeConfig:
        props = given if isinstance(given, ConfigProperties) else ConfigProperties(given)
        if "node.id" not in props:
            raise InvalidConfigError(
                "Missing required configuration node.id which has no default value"
            )
        node_id = int_setting(props, "node.id", 0, at_least=0)
        listeners = parse_listeners("listeners", props.get("listeners", DEFAULT_LISTENERS))
        protocol_map = parse_protocol_map(
            props.get("listener.security.protocol.map", DEFAULT_SECURITY_PROTOCOL_MAP)
        )
        controller_names = _names(props, "controller.listener.names", "CONTROLLER")
        grpc_names = _names(props, "grpc.listener.names", "GRPC,REPLICATION")
        for listener in listeners.values():
            protocol = protocol_map.get(listener.name)
            if protocol is None:
                raise InvalidConfigError(
                    f"Invalid value {props.get('listeners')} for configuration listeners: "
                    f"listener {listener.name} has no security protocol in "
                    f"listener.security.protocol.map"
                )
            if protocol not in SUPPORTED_SECURITY_PROTOCOLS:
                raise InvalidConfigError(
                    f"listener {listener.name} ({listener.host}:{listener.port}) is mapped to "
                    f"{protocol}, which seglog does not serve yet: only "
                    f"{', '.join(SUPPORTED_SECURITY_PROTOCOLS)} listeners are supported"
                )
            check_listener_security(
                props,
                listener.name,
                protocol,
                grpc=listener.name in grpc_names or listener.name in controller_names,
            )
        ports = [listener.port for listener in listeners.values() if listener.port]
        if len(ports) != len(set(ports)):
            raise InvalidConfigError(
                f"Invalid value {props.get('listeners')} for configuration listeners: "
                "each listener must have a different port"
            )
        advertised = {
            n: Listener(n, "127.0.0.1" if lst.host in ("0.0.0.0", "::") else lst.host, lst.port)
            for n, lst in listeners.items()
            if n not in controller_names
        }
        if "advertised.listeners" in props:
            for n, lst in parse_listeners(
                "advertised.listeners", props["advertised.listeners"]
            ).items():
                if n in controller_names:
                    raise InvalidConfigError(
                        f"Invalid value {props['advertised.listeners']} for configuration "
                        f"advertised.listeners: the controller listener {n} is not advertised"
                    )
                if n not in listeners:
                    raise InvalidConfigError(
                        f"Invalid value {props['advertised.listeners']} for configuration "
                        f"advertised.listeners: {n} is not among listeners"
                    )
                advertised[n] = lst
        listener_model = _choice(props, "kafka.listener.model", "event-loop", KAFKA_LISTENER_MODELS)
        replica_fetch_protocol, inter_broker = _replication_wire(
            props, list(listeners), grpc_names, controller_names, protocol_map, listener_model
        )
        dirs_raw = props.get("log.dirs", props.get("log.dir", "/tmp/kafka-logs"))
        log_dirs = tuple(Path(d) for d in parse_csv_list(dirs_raw))
        if not log_dirs:
            raise InvalidConfigError("Invalid value for configuration log.dirs: no directory given")
        roles = tuple(r.strip() for r in props.get("process.roles", "broker,controller").split(","))
        for role in roles:
            if role not in ("broker", "controller"):
                raise InvalidConfigError(
                    f"Invalid value {props['process.roles']} for configuration process.roles: "
                    f"unknown role {role!r} (expected broker and/or controller)"
                )
        voters = parse_voters(props.get("controller.quorum.voters", ""))
        if not any(n in grpc_names for n in listeners):
            raise InvalidConfigError(
                f"Invalid value {props.get('listeners')} for configuration listeners: "
                f"no gRPC listener (one named in grpc.listener.names: {', '.join(grpc_names)})"
            )
        kafka_replication = _kafka_replication_listeners(listeners, grpc_names, controller_names)
        if replica_fetch_protocol == "kafka" and inter_broker not in kafka_replication:
            raise InvalidConfigError(
                f"Invalid value {inter_broker or '(none)'} for configuration "
                "inter.broker.listener.name: with replica.fetch.protocol=kafka it must name "
                "a Kafka listener among listeners"
            )
        if replica_fetch_protocol == "kafka":
            # Fails here, at start, when the follower's SASL login is not configured.
            inter_broker_login(props, inter_broker, protocol_map.get(inter_broker, "PLAINTEXT"))
        if replica_fetch_protocol == "grpc" and (
            inter_broker not in listeners or inter_broker not in grpc_names
        ):
            raise InvalidConfigError(
                f"Invalid value {inter_broker} for configuration inter.broker.listener.name: "
                "it must name a gRPC listener among listeners"
            )
        if voters and "controller" in roles:
            own = [listeners[n] for n in controller_names if n in listeners]
            if not own:
                raise InvalidConfigError(
                    f"Invalid value {props.get('listeners')} for configuration listeners: "
                    f"a controller needs a listener named in controller.listener.names "
                    f"({', '.join(controller_names)})"
                )
            if node_id in voters and voters[node_id][1] != own[0].port:
                raise InvalidConfigError(
                    f"controller.quorum.voters gives node {node_id} port {voters[node_id][1]}, "
                    f"but its controller listener {own[0].name} listens on {own[0].port}"
                )
        return cls(
            node_id=node_id,
            listeners=listeners,
            advertised_listeners=advertised,
            security_protocol_map=protocol_map,
            controller_listener_names=controller_names,
            grpc_listener_names=grpc_names,
            inter_broker_listener_name=inter_broker,
            replica_fetch_protocol=replica_fetch_protocol,
            log_dirs=log_dirs,
            log_config=LogConfig.from_broker(props),
            log_settings=BrokerLogSettings.from_broker(props),
            num_partitions=_int(props, "num.partitions", 1, at_least=1),
            default_replication_factor=_int(props, "default.replication.factor", 1, at_least=1),
            auto_create_topics_enable=_bool(props, "auto.create.topics.enable", True),
            fetch_max_bytes=_int(props, "fetch.max.bytes", 57_671_680, at_least=1024),
            num_io_threads=_int(props, "num.io.threads", 8, at_least=1),
            queued_max_requests=_int(props, "queued.max.requests", 500, at_least=1),
            kafka_listener_model=listener_model,
            process_roles=roles,
            controller_quorum_voters=voters,
            inter_broker_address_overrides=parse_voters(
                props.get(INTER_BROKER_ADDRESS_OVERRIDES, ""), INTER_BROKER_ADDRESS_OVERRIDES
            ),
            cluster_id=props.get("cluster.id", "seglog-cluster"),
            broker_session_timeout_ms=_int(props, "broker.session.timeout.ms", 9_000, at_least=1),
            replica_lag_time_max_ms=_int(props, "replica.lag.time.max.ms", 30_000, at_least=1),
            replica_fetch_max_bytes=_int(props, "replica.fetch.max.bytes", 1_048_576, at_least=1),
            replica_fetch_backoff_ms=_int(props, "replica.fetch.backoff.ms", 1_000, at_least=0),
            leader_replication_throttled_rate=_int(
                props, "leader.replication.throttled.rate", (1 << 63) - 1, at_least=1
            ),
            follower_replication_throttled_rate=_int(
                props, "follower.replication.throttled.rate", (1 << 63) - 1, at_least=1
            ),
            replication_quota_window_num=_int(
                props, "replication.quota.window.num", 11, at_least=1
            ),
            replication_quota_window_size_seconds=_int(
                props, "replication.quota.window.size.seconds", 1, at_least=1
            ),
            broker_heartbeat_interval_ms=_int(
                props, "broker.heartbeat.interval.ms", 2_000, at_least=1
            ),
            controller_quorum_election_timeout_ms=_int(
                props, "controller.quorum.election.timeout.ms", 1_000, at_least=1
            ),
            auto_leader_rebalance_enable=_bool(props, "auto.leader.rebalance.enable", True),
            leader_imbalance_check_interval_seconds=_int(
                props, "leader.imbalance.check.interval.seconds", 300, at_least=1
            ),
            metrics_port=_int(props, "metrics.port", -1, at_least=-1),
            metrics_host=props.get("metrics.host", "0.0.0.0") or "0.0.0.0",
            group_config=_group_config(props),
            offsets_topic_replication_factor=_int(
                props, "offsets.topic.replication.factor", 3, at_least=1
            ),
            txn_config=_txn_config(props),
            transaction_state_log_replication_factor=_int(
                props, "transaction.state.log.replication.factor", 3, at_least=1
            ),
            transaction_state_log_min_isr=_int(
                props, "transaction.state.log.min.isr", 2, at_least=1
            ),
            transaction_abort_timed_out_transaction_cleanup_interval_ms=_int(
                props, "transaction.abort.timed.out.transaction.cleanup.interval.ms", 10_000, 1
            ),
            raw=props,
        )

    @property
    def grpc_listeners(self) -> list[Listener]:
        return [lst for n, lst in self.listeners.items() if n in self.grpc_listener_names]

    @property
    def controller_listener(self) -> Listener | None:
        for n in self.controller_listener_names:
            if n in self.listeners:
                return self.listeners[n]
        return None

    @property
    def kafka_listeners(self) -> list[Listener]:
        """Listeners that serve Kafka's wire protocol: every one that is neither gRPC
        nor the controller's."""
        return [
            lst
            for n, lst in self.listeners.items()
            if n not in self.grpc_listener_names and n not in self.controller_listener_names
        ]

    @property
    def listener(self) -> tuple[str, int]:
        """Where seglog's gRPC clients connect (the first gRPC listener)."""
        return self.grpc_listeners[0].address

    @property
    def advertised_listener(self) -> tuple[str, int]:
        name = self.grpc_listeners[0].name
        return self.advertised_listeners[name].address

    @property
    def inter_broker_address(self) -> tuple[str, int]:
        """Where other brokers reach this one for replication."""
        return self.advertised_listeners[self.inter_broker_listener_name].address

    @classmethod
    def load(cls, path: Path, overrides: Sequence[str] = ()) -> NodeConfig:
        """A `server.properties` file plus `key=value` overrides from the command line."""
        try:
            props = parse_properties(path.read_text(encoding="utf-8"))
        except OSError as e:
            raise InvalidConfigError(f"cannot read config file {path}: {e}") from e
        for item in overrides:
            key, eq, value = item.partition("=")
            if not eq or not key.strip():
                raise InvalidConfigError(f"override {item!r} is not key=value")
            props[key.strip()] = value.strip()
        return cls.from_properties(props)


def _kafka_replication_listeners(
    listeners: Sequence[str], grpc_names: Sequence[str], controller_names: Sequence[str]
) -> list[str]:
    """Kafka listeners able to carry replication: neither gRPC nor the controller's."""
    return [n for n in listeners if n not in grpc_names and n not in controller_names]


def _replication_wire(
    props: Mapping[str, str],
    listeners: Sequence[str],
    grpc_names: Sequence[str],
    controller_names: Sequence[str],
    protocol_map: Mapping[str, str],
    listener_model: str,
) -> tuple[str, str]:
    """replica.fetch.protocol and inter.broker.listener.name. Followers fetch over
    Kafka's protocol, as Kafka's do, unless told otherwise or the node has no Kafka
    listener they can use: an explicit inter.broker.listener.name decides by its kind,
    else a PLAINTEXT or SSL Kafka listener (REPLICATION first), or a SASL one whose
    login (sasl.mechanism.inter.broker.protocol, its JAAS username) is configured. A
    node with gRPC listeners only fetches over gRPC, and so does the threaded listener
    model (kept whole as the design the event loop replaced, for comparison)."""
    kafka = _kafka_replication_listeners(listeners, grpc_names, controller_names)
    named = props.get("inter.broker.listener.name", "").strip().upper()

    def usable(name: str) -> bool:
        try:
            inter_broker_login(props, name, protocol_map.get(name, "PLAINTEXT"))
        except InvalidConfigError:
            return False
        return True

    if listener_model == "threads" and not named:
        derived = "grpc"
    elif named:
        derived = "kafka" if named in kafka else "grpc"
    else:
        derived = "kafka" if any(usable(n) for n in kafka) else "grpc"
    protocol = _choice(props, "replica.fetch.protocol", derived, REPLICA_FETCH_PROTOCOLS)
    if named:
        return protocol, named
    if protocol == "kafka":
        ordered = sorted(kafka, key=lambda n: (not usable(n), n != "REPLICATION"))
        return protocol, ordered[0] if ordered else ""
    grpc = [n for n in listeners if n in grpc_names]
    return protocol, next((n for n in grpc if n != "REPLICATION"), grpc[0] if grpc else "GRPC")
