"""A node's configuration: Kafka's `server.properties` names and defaults."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from seglog.storage.errors import InvalidConfigError
from seglog.storage.log_config import BrokerLogSettings, LogConfig
from seglog.storage.properties_file import parse_properties


def _int(props: Mapping[str, str], key: str, default: int, at_least: int | None = None) -> int:
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


def parse_listener(key: str, value: str) -> tuple[str, int]:
    """`PLAINTEXT://host:port` (one listener serves every service of the node)."""
    first = value.split(",")[0].strip()
    _scheme, sep, address = first.partition("://")
    if not sep:
        raise InvalidConfigError(
            f"Invalid value {value} for configuration {key}: expected PLAINTEXT://host:port"
        )
    host, colon, port = address.rpartition(":")
    if not colon or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise InvalidConfigError(
            f"Invalid value {value} for configuration {key}: expected PLAINTEXT://host:port"
        )
    return host.strip("[]") or "0.0.0.0", int(port)


def parse_voters(value: str) -> dict[int, tuple[str, int]]:
    """`controller.quorum.voters=1@h:9092,2@h:9093` → {1: (h, 9092), ...}."""
    voters: dict[int, tuple[str, int]] = {}
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        node, at, address = item.partition("@")
        host, colon, port = address.rpartition(":")
        if not at or not node.strip().isdigit() or not colon or not port.isdigit():
            raise InvalidConfigError(
                f"Invalid value {value} for configuration controller.quorum.voters: "
                f"expected id@host:port entries, got {item!r}"
            )
        voters[int(node)] = (host.strip("[]"), int(port))
    return voters


@dataclass(frozen=True)
class NodeConfig:
    node_id: int
    listener: tuple[str, int]
    advertised_listener: tuple[str, int]
    log_dirs: tuple[Path, ...]
    log_config: LogConfig
    log_settings: BrokerLogSettings
    num_partitions: int = 1
    default_replication_factor: int = 1
    auto_create_topics_enable: bool = True
    fetch_max_bytes: int = 57_671_680
    num_io_threads: int = 8
    process_roles: tuple[str, ...] = ("broker", "controller")
    controller_quorum_voters: dict[int, tuple[str, int]] = field(default_factory=dict)
    cluster_id: str = "seglog-cluster"
    broker_session_timeout_ms: int = 9_000
    replica_lag_time_max_ms: int = 30_000
    replica_fetch_max_bytes: int = 1_048_576
    replica_fetch_backoff_ms: int = 1_000
    broker_heartbeat_interval_ms: int = 2_000
    controller_quorum_election_timeout_ms: int = 1_000
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    raw: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> NodeConfig:
        if "node.id" not in props:
            raise InvalidConfigError(
                "Missing required configuration node.id which has no default value"
            )
        node_id = _int(props, "node.id", 0, at_least=0)
        listener = parse_listener("listeners", props.get("listeners", "PLAINTEXT://127.0.0.1:9092"))
        advertised = listener
        if "advertised.listeners" in props:
            advertised = parse_listener("advertised.listeners", props["advertised.listeners"])
        elif listener[0] in ("0.0.0.0", "::"):
            advertised = ("127.0.0.1", listener[1])
        dirs_raw = props.get("log.dirs", props.get("log.dir", "/tmp/kafka-logs"))
        log_dirs = tuple(Path(d.strip()) for d in dirs_raw.split(",") if d.strip())
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
        return cls(
            node_id=node_id,
            listener=listener,
            advertised_listener=advertised,
            log_dirs=log_dirs,
            log_config=LogConfig.from_broker(props),
            log_settings=BrokerLogSettings.from_broker(props),
            num_partitions=_int(props, "num.partitions", 1, at_least=1),
            default_replication_factor=_int(props, "default.replication.factor", 1, at_least=1),
            auto_create_topics_enable=_bool(props, "auto.create.topics.enable", True),
            fetch_max_bytes=_int(props, "fetch.max.bytes", 57_671_680, at_least=1024),
            num_io_threads=_int(props, "num.io.threads", 8, at_least=1),
            process_roles=roles,
            controller_quorum_voters=voters,
            cluster_id=props.get("cluster.id", "seglog-cluster"),
            broker_session_timeout_ms=_int(props, "broker.session.timeout.ms", 9_000, at_least=1),
            replica_lag_time_max_ms=_int(props, "replica.lag.time.max.ms", 30_000, at_least=1),
            replica_fetch_max_bytes=_int(props, "replica.fetch.max.bytes", 1_048_576, at_least=1),
            replica_fetch_backoff_ms=_int(props, "replica.fetch.backoff.ms", 1_000, at_least=0),
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
            raw=dict(props),
        )

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
