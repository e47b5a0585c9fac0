"""Per-group configs (Kafka 4.0's GROUP config resource) against three real nodes:
confluent-kafka's and kafka-python's admin clients describe and alter them, Kafka's
checks refuse what Kafka refuses, and the group coordinator hands a KIP-848 member
the group's own heartbeat interval."""

from __future__ import annotations

import time

from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KpConfigResource
from kafka.admin import ConfigResourceType
from kafka.protocol.admin import DescribeConfigsRequest
from kafka.protocol.metadata import FindCoordinatorRequest

from seglog.harness.kafka_cluster import KafkaConnection
from seglog.node.kafka.schemas.messages import ConsumerGroupHeartbeatRequest

TIMEOUT_S = 30.0
SESSION, INTERVAL = "consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"


def group_entries(admin: AdminClient, group: str) -> dict:
    resource = ConfigResource(ResourceType.GROUP, group)
    return admin.describe_configs([resource])[resource].result(TIMEOUT_S)


def on_every_node(cluster, group: str) -> list[dict[str, tuple[str, bool]]]:
    """The group's configs as each node answers them: (value, is_default) by name.
    librdkafka sends a GROUP describe to any broker, and a broker that has not yet
    applied the config record answers the defaults, as Kafka's would."""
    R = DescribeConfigsRequest
    request = R[4](
        resources=[
            R.DescribeConfigsResource(
                resource_type=32, resource_name=group, configuration_keys=None
            )
        ],
        include_synonyms=False,
        include_documentation=False,
    )
    answers = []
    for port in cluster.kafka_ports.values():
        with KafkaConnection(port) as conn:
            (result,) = conn.request(request)[1].results
        assert result.error_code == 0, result
        answers.append({c.name: (c.value, c.config_source == 5) for c in result.configs})
    return answers


def incremental(admin: AdminClient, group: str, *entries: ConfigEntry) -> None:
    resource = ConfigResource(ResourceType.GROUP, group, incremental_configs=list(entries))
    admin.incremental_alter_configs([resource])[resource].result(TIMEOUT_S)


def test_group_configs_are_described_altered_and_checked_as_kafkas(kafka_cluster):
    admin = AdminClient({"bootstrap.servers": kafka_cluster.kafka_bootstrap})
    group = "gc-orders"
    # A group that does not exist: its configs are the broker's defaults.
    entries = group_entries(admin, group)
    assert set(entries) == {SESSION, INTERVAL}
    assert entries[SESSION].value == "45000" and entries[SESSION].is_default
    assert entries[INTERVAL].value == "5000"

    incremental(
        admin, group, ConfigEntry(SESSION, "50000", incremental_operation=AlterConfigOpType.SET)
    )
    kafka_cluster.wait(
        "the group config on every node",
        lambda: all(a[SESSION][0] == "50000" for a in on_every_node(kafka_cluster, group)),
    )
    for answer in on_every_node(kafka_cluster, group):
        assert answer[SESSION] == ("50000", False) and answer[INTERVAL] == ("5000", True)
    entries = group_entries(admin, group)
    assert not entries[SESSION].is_default and entries[INTERVAL].is_default

    # kafka-python's describe sees it with its source (DYNAMIC_GROUP_CONFIG, 8).
    kp = KafkaAdminClient(bootstrap_servers=kafka_cluster.kafka_bootstrap)
    try:

        def modified() -> dict:
            answer = kp.describe_configs([KpConfigResource(ConfigResourceType.GROUP, group)])
            (by_type,) = answer.values()
            return by_type[group]

        # Every node applies the record (the one asked may lag by a metadata update).
        kafka_cluster.wait("kafka-python sees it", lambda: SESSION in modified() or None)
        configs = modified()
        assert INTERVAL not in configs and "50000" in str(configs[SESSION]), configs
    finally:
        kp.close()

    # Kafka's refusals, each naming what was wrong.
    refused = [
        (SESSION, "40000", "must be greater than or equal to group.consumer.min.session"),
        (SESSION, "70000", "must be less than or equal to group.consumer.max.session"),
        (INTERVAL, "2000", "must be greater than or equal to group.consumer.min.heartbeat"),
        ("share.session.timeout.ms", "45000", "Unknown group config name"),
        ("no.such.config", "1", "Unknown group config name: no.such.config"),
        (SESSION, "soon", "Not a number"),
    ]
    for name, value, message in refused:
        try:
            incremental(
                admin, group, ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            )
        except Exception as e:  # noqa: BLE001 - confluent-kafka raises KafkaException
            assert message in str(e), (name, value, str(e))
        else:
            raise AssertionError(f"{name}={value} was accepted")

    incremental(
        admin, group, ConfigEntry(SESSION, "", incremental_operation=AlterConfigOpType.DELETE)
    )
    kafka_cluster.wait(
        "the group config deleted", lambda: group_entries(admin, group)[SESSION].is_default
    )


def test_a_kip_848_member_gets_its_groups_heartbeat_interval(kafka_cluster):
    admin = AdminClient({"bootstrap.servers": kafka_cluster.kafka_bootstrap})
    group = "gc-interval"
    incremental(
        admin, group, ConfigEntry(INTERVAL, "7000", incremental_operation=AlterConfigOpType.SET)
    )
    kafka_cluster.wait(
        "the group config somewhere",
        lambda: group_entries(admin, group)[INTERVAL].value == "7000",
    )
    port = kafka_cluster.kafka_ports[1]
    deadline = time.monotonic() + TIMEOUT_S
    coordinator = None
    while coordinator is None and time.monotonic() < deadline:
        with KafkaConnection(port) as conn:
            _, found = conn.request(FindCoordinatorRequest[4](key_type=0, coordinator_keys=[group]))
        (c,) = found.coordinators
        if c.error_code == 0:
            coordinator = c.port
        else:
            time.sleep(0.2)
    assert coordinator is not None
    beat = None
    # Retriable while the coordinator loads its shard (COORDINATOR_NOT_AVAILABLE, 15;
    # COORDINATOR_LOAD_IN_PROGRESS, 14), and until the coordinator's node has applied
    # the config record (the describe above may have asked another node).
    while (
        beat is None or beat.error_code in (14, 15) or beat.heartbeat_interval_ms != 7000
    ) and time.monotonic() < deadline:
        time.sleep(0 if beat is None else 0.2)
        with KafkaConnection(coordinator) as conn:
            _, beat = conn.request(
                ConsumerGroupHeartbeatRequest[0](
                    group_id=group,
                    member_id="",
                    member_epoch=0,
                    rebalance_timeout_ms=30_000,
                    subscribed_topic_names=["gc-none"],
                    topic_partitions=[],
                )
            )
    assert beat is not None and beat.error_code == 0 and beat.heartbeat_interval_ms == 7000, beat
