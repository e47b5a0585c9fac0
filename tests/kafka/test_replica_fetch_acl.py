"""A Fetch that names a replica id is a follower's (replica.fetch.protocol=kafka): with
ACLs on, Kafka asks CLUSTER_ACTION on the cluster of its principal, and a client
without it gets CLUSTER_AUTHORIZATION_FAILED and no records; a super user's gets a
session and the partition's answer (here: node 7 is not one of its replicas). A
consumer's Fetch asks READ on the topic instead."""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka.protocol.consumer import FetchRequest as R

from seglog.client.admin import Admin, NewTopic
from seglog.harness.kafka_cluster import KafkaConnection
from seglog.harness.node_process import NodeProcess
from seglog.harness.ports import free_port
from seglog.node.kafka.errors import error_name

TOPIC = "acl-replica-fetch"


def replica_fetch(port: int) -> object:
    request = R[12](
        replica_id=7,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=0,
        topics=[
            R.FetchTopic(
                topic=TOPIC,
                partitions=[
                    R.FetchTopic.FetchPartition(
                        partition=0, fetch_offset=0, partition_max_bytes=1 << 20
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    with KafkaConnection(port) as conn:
        return conn.request(request)[1]


@pytest.mark.parametrize(
    ("super_users", "expected"), [("", "CLUSTER_AUTHORIZATION_FAILED"), ("User:ANONYMOUS", "NONE")]
)
def test_a_replica_fetch_needs_cluster_action(
    tmp_path: Path, super_users: str, expected: str
) -> None:
    kafka_port, grpc_port = free_port(), free_port()
    overrides = {
        "listeners": f"GRPC://127.0.0.1:{grpc_port},PLAINTEXT://127.0.0.1:{kafka_port}",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "auto.create.topics.enable": "false",
    }
    if super_users:
        overrides["super.users"] = super_users
    node = NodeProcess(tmp_path, port=grpc_port, overrides=overrides)
    node.start()
    try:
        if super_users:  # the topic exists: the refusal comes before any topic is looked at
            with Admin(node.bootstrap) as admin:
                admin.create_topics([NewTopic(TOPIC, 1, 1)])
        response = replica_fetch(kafka_port)
        assert error_name(response.error_code) == expected, response
        if expected == "NONE":
            assert response.session_id > 0, "a follower's fetch opens a KIP-227 session"
            [topic] = response.responses
            # Past the ACL, the replica's own check: node 7 holds no replica of it.
            assert error_name(topic.partitions[0].error_code) == "NOT_LEADER_OR_FOLLOWER"
        else:
            assert response.responses == [] and response.session_id == 0
    finally:
        node.stop()
