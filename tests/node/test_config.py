"""NodeConfig: Kafka's names and defaults for the failure-detection settings, the
local cluster's faster profile, and bad values refused with the setting's name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from seglog.harness.local_cluster import LOCAL_DEFAULTS, node_properties
from seglog.harness.node_process import NodeProcess
from seglog.node.config import ConfigProperties, NodeConfig
from seglog.storage.errors import InvalidConfigError


def test_failure_detection_defaults_are_kafkas() -> None:
    c = NodeConfig.from_properties({"node.id": "1"})
    assert c.broker_session_timeout_ms == 9_000
    assert c.broker_heartbeat_interval_ms == 2_000
    assert c.controller_quorum_election_timeout_ms == 1_000
    assert c.replica_fetch_backoff_ms == 1_000
    assert c.replica_lag_time_max_ms == 30_000


def test_local_cluster_profile_detects_failures_within_a_second(tmp_path: Path) -> None:
    props = node_properties(1, 3, 9092, tmp_path)
    c = NodeConfig.from_properties(props)
    assert c.broker_session_timeout_ms == int(LOCAL_DEFAULTS["broker.session.timeout.ms"])
    assert c.broker_session_timeout_ms < 1_000
    # Several heartbeats fit in a session, so one late heartbeat does not fence a broker.
    assert c.broker_session_timeout_ms >= 4 * c.broker_heartbeat_interval_ms
    assert c.controller_quorum_election_timeout_ms < 1_000
    assert c.replica_fetch_backoff_ms == 100


def test_compose_profile_matches_the_local_one() -> None:
    text = (Path(__file__).resolve().parents[2] / "compose" / "node.properties").read_text()
    settings = dict(
        line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#")
    )
    for key in (
        "broker.session.timeout.ms",
        "broker.heartbeat.interval.ms",
        "controller.quorum.election.timeout.ms",
        "replica.fetch.backoff.ms",
    ):
        assert settings[key].strip() == LOCAL_DEFAULTS[key], key


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("replica.fetch.backoff.ms", "soon", "Not a number"),
        ("replica.fetch.backoff.ms", "-1", "at least 0"),
        ("controller.quorum.election.timeout.ms", "0", "at least 1"),
        ("broker.session.timeout.ms", "1.5", "Not a number"),
        ("group.consumer.assignors", "uniform,roundrobin", "the assignors are range, uniform"),
        ("group.consumer.heartbeat.interval.ms", "0", "at least 1"),
        ("kafka.listener.model", "fibers", "one of: event-loop, threads"),
        ("replica.fetch.protocol", "http", "one of: grpc, kafka"),
        ("add.partitions.to.txn.retry.backoff.max.ms", "-1", "at least 0"),
        ("transaction.partition.verification.enable", "yes", "either true or false"),
    ],
)
def test_bad_values_name_the_setting(key: str, value: str, says: str) -> None:
    with pytest.raises(InvalidConfigError) as e:
        NodeConfig.from_properties({"node.id": "1", key: value})
    assert key in str(e.value) and says in str(e.value)


def test_the_hold_of_an_add_partitions_to_txn_is_kafkas_bound_and_may_be_off() -> None:
    key = "add.partitions.to.txn.retry.backoff.max.ms"
    default = NodeConfig.from_properties({"node.id": "1"}).txn_config
    assert default.add_partitions_to_txn_retry_backoff_max_ms == 100
    off = NodeConfig.from_properties({"node.id": "1", key: "0"}).txn_config
    assert off.add_partitions_to_txn_retry_backoff_max_ms == 0


def test_transactional_appends_are_verified_unless_turned_off() -> None:
    key = "transaction.partition.verification.enable"
    default = NodeConfig.from_properties({"node.id": "1"}).log_settings
    assert default.transaction_partition_verification_enable is True  # Kafka's default
    off = NodeConfig.from_properties({"node.id": "1", key: "false"}).log_settings
    assert off.transaction_partition_verification_enable is False


# --- named listeners ----------------------------------------------------------------


def test_replication_over_kafka_takes_a_kafka_listener() -> None:
    base = {
        "node.id": "1",
        "listeners": "GRPC://127.0.0.1:9192,SECURE://127.0.0.1:9094,PLAINTEXT://127.0.0.1:9092",
        "listener.security.protocol.map": (
            "GRPC:PLAINTEXT,SECURE:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT"
        ),
        "sasl.enabled.mechanisms": "PLAIN",
    }
    c = NodeConfig.from_properties({**base, "replica.fetch.protocol": "kafka"})
    assert (c.replica_fetch_protocol, c.inter_broker_listener_name) == ("kafka", "PLAINTEXT")
    # The default: Kafka's protocol over the Kafka listener the followers can use.
    c = NodeConfig.from_properties(base)
    assert (c.replica_fetch_protocol, c.inter_broker_listener_name) == ("kafka", "PLAINTEXT")
    # The threaded listener model keeps the design it was: followers over gRPC.
    c = NodeConfig.from_properties({**base, "kafka.listener.model": "threads"})
    assert (c.replica_fetch_protocol, c.inter_broker_listener_name) == ("grpc", "GRPC")
    # A gRPC inter-broker listener named, or none but gRPC listeners: over gRPC.
    c = NodeConfig.from_properties({**base, "inter.broker.listener.name": "GRPC"})
    assert (c.replica_fetch_protocol, c.inter_broker_listener_name) == ("grpc", "GRPC")
    c = NodeConfig.from_properties({"node.id": "1", "listeners": "GRPC://127.0.0.1:9192"})
    assert (c.replica_fetch_protocol, c.inter_broker_listener_name) == ("grpc", "GRPC")
    with pytest.raises(InvalidConfigError, match="a Kafka listener among listeners") as e:
        NodeConfig.from_properties(
            {**base, "replica.fetch.protocol": "kafka", "inter.broker.listener.name": "GRPC"}
        )
    assert "GRPC" in str(e.value)
    with pytest.raises(InvalidConfigError, match="inter.broker.listener.name"):
        NodeConfig.from_properties(
            {
                "node.id": "1",
                "listeners": "GRPC://127.0.0.1:9192",
                "replica.fetch.protocol": "kafka",
            }
        )


def test_replication_over_a_sasl_listener_needs_the_followers_login() -> None:
    base = {
        "node.id": "1",
        "listeners": "GRPC://127.0.0.1:9192,SECURE://127.0.0.1:9094",
        "listener.security.protocol.map": "GRPC:PLAINTEXT,SECURE:SASL_PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "replica.fetch.protocol": "kafka",
    }
    # Kafka's default mechanism, GSSAPI, is named in the refusal.
    with pytest.raises(InvalidConfigError, match="GSSAPI for configuration sasl.mechanism"):
        NodeConfig.from_properties(base)
    scram = {**base, "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"}
    with pytest.raises(InvalidConfigError, match="listener.name.secure.scram-sha-256.sasl.jaas"):
        NodeConfig.from_properties(scram)
    jaas = 'ScramLoginModule required username="broker" password="b-secret";'
    c = NodeConfig.from_properties(
        {**scram, "listener.name.secure.scram-sha-256.sasl.jaas.config": jaas}
    )
    assert (c.replica_fetch_protocol, c.inter_broker_listener_name) == ("kafka", "SECURE")
    # Without the login configured, the default stays gRPC rather than failing the start.
    del base["replica.fetch.protocol"]
    c = NodeConfig.from_properties(base)
    assert (c.replica_fetch_protocol, c.inter_broker_listener_name) == ("grpc", "GRPC")


def listeners_config(**props: str) -> NodeConfig:
    return NodeConfig.from_properties({"node.id": "1", **props})


def test_named_listeners_and_the_inter_broker_one() -> None:
    c = listeners_config(
        listeners="PLAINTEXT://0.0.0.0:9092,GRPC://0.0.0.0:9192,"
        "REPLICATION://0.0.0.0:9392,CONTROLLER://0.0.0.0:9292",
        **{
            "advertised.listeners": "GRPC://127.0.0.1:19192,REPLICATION://node1:9392",
            "inter.broker.listener.name": "REPLICATION",
            "controller.quorum.voters": "1@node1:9292",
        },
    )
    assert [lst.name for lst in c.kafka_listeners] == ["PLAINTEXT"]
    assert [lst.name for lst in c.grpc_listeners] == ["GRPC", "REPLICATION"]
    assert c.controller_listener is not None and c.controller_listener.port == 9292
    assert c.advertised_listener == ("127.0.0.1", 19192)
    assert c.inter_broker_address == ("node1", 9392)
    assert "CONTROLLER" not in c.advertised_listeners  # a controller is never advertised


@pytest.mark.parametrize(
    ("props", "says"),
    [
        ({"listeners": "SSL://127.0.0.1:9093,GRPC://127.0.0.1:9192"}, "listener SSL"),
        (
            {
                "listeners": "SECURE://127.0.0.1:9093,GRPC://127.0.0.1:9192",
                "listener.security.protocol.map": "SECURE:SASL_SSL,GRPC:PLAINTEXT",
            },
            "listener SECURE",
        ),
        ({"listeners": "ODD://127.0.0.1:9093,GRPC://127.0.0.1:9192"}, "ODD has no security"),
        ({"listeners": "GRPC://127.0.0.1:9192,GRPC://127.0.0.1:9193"}, "GRPC appears twice"),
        ({"listeners": "GRPC://127.0.0.1:9192,PLAINTEXT://127.0.0.1:9192"}, "different port"),
        ({"listeners": "PLAINTEXT://127.0.0.1:9092"}, "no gRPC listener"),
        ({"listeners": "GRPC://127.0.0.1"}, "NAME://host:port"),
        (
            {
                "listeners": "GRPC://127.0.0.1:9192",
                "controller.quorum.voters": "1@127.0.0.1:9292",
            },
            "needs a listener named in controller.listener.names",
        ),
        (
            {
                "listeners": "GRPC://127.0.0.1:9192,CONTROLLER://127.0.0.1:9293",
                "controller.quorum.voters": "1@127.0.0.1:9292",
            },
            "listens on 9293",
        ),
        (
            {
                "listeners": "GRPC://127.0.0.1:9192,CONTROLLER://127.0.0.1:9292",
                "advertised.listeners": "CONTROLLER://h:9292",
            },
            "is not advertised",
        ),
        (
            {"listeners": "GRPC://127.0.0.1:9192", "inter.broker.listener.name": "PLAINTEXT"},
            "inter.broker.listener.name",
        ),
    ],
)
def test_bad_listeners_are_refused_naming_what_is_wrong(props: dict[str, str], says: str) -> None:
    """A listener seglog cannot serve as configured (e.g. SSL) is refused at start,
    never served as something else."""
    with pytest.raises(InvalidConfigError, match=says):
        listeners_config(**props)


def test_properties_remember_what_was_read() -> None:
    props = ConfigProperties({"node.id": "1", "log.retenton.hours": "5"})
    config = NodeConfig.from_properties(props)
    assert config.raw is props
    assert props.unused() == ["log.retenton.hours"]
    assert dict(props) == {"node.id": "1", "log.retenton.hours": "5"}  # a copy reads nothing
    assert props.unused() == ["log.retenton.hours"]


def test_a_node_warns_once_about_each_config_it_does_not_know(tmp_path: Path) -> None:
    """A misspelt key was silently ignored: the node now names it at start, once, and
    says nothing about the keys it uses."""
    node = NodeProcess(
        tmp_path, overrides={"log.retenton.hours": "5", "num.replica.fetchers": "4"}
    ).start()
    try:
        warnings = [
            json.loads(line)
            for line in node.log_path.read_text().splitlines()
            if '"unknown_config"' in line
        ]
    finally:
        node.stop()
    assert sorted(w["key"] for w in warnings) == ["log.retenton.hours", "num.replica.fetchers"]
    assert all(w["level"] == "warning" for w in warnings)
    assert "The configuration 'log.retenton.hours' was supplied but isn't a known config." in [
        w["message"] for w in warnings
    ]


def test_the_assignors_the_config_accepts_are_the_coordinators() -> None:
    """node/config.py checks group.consumer.assignors against names it holds without
    importing the group coordinator (the controller process reads the config too)."""
    from seglog.node.groups.consumer_group import ASSIGNORS
    from seglog.node.groups.group_config import SERVER_ASSIGNORS

    assert sorted(ASSIGNORS) == sorted(SERVER_ASSIGNORS)
