"""Every API and version the Kafka listener serves, on a real node, with requests
encoded by kafka-python and every answer cross-checked with the other codec, kio:
kio decodes the request we sent and the response frame we got (all of it), and
re-encodes the response to the same bytes (so no field, tagged field or length
differs between the two codecs' reading). Then bad input: garbage, truncated and
oversized frames, unknown API keys, unsupported versions, a batch with a wrong CRC
and a partition this node does not lead each get Kafka's error code or a closed
connection; nothing is appended and the node keeps serving."""

from __future__ import annotations

import io
import struct
import uuid
from typing import Any

import pytest
from kafka.protocol.admin import (
    AlterPartitionReassignmentsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteGroupsRequest,
    DeleteTopicsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    IncrementalAlterConfigsRequest,
    ListGroupsRequest,
    ListPartitionReassignmentsRequest,
)
from kafka.protocol.consumer import (
    FetchRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    ListOffsetsRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    OffsetForLeaderEpochRequest,
    SyncGroupRequest,
)
from kafka.protocol.metadata import ApiVersionsRequest, FindCoordinatorRequest, MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest
from txn_requests import txn_request

from seglog.harness.kafka_cluster import KafkaConnection, produce_request
from seglog.node.kafka.codec import APIS
from seglog.node.kafka.schemas.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupHeartbeatRequest,
)
from seglog.storage.record_batch import NewRecord, build_batch

kio_index = pytest.importorskip("kio.index")
kio_serial = pytest.importorskip("kio.serial")

TOPIC = "proto-check"
TOPIC_ID: dict[str, uuid.UUID] = {}  # TOPIC's id, once leader_port created it


def batch(n: int = 3) -> bytes:
    return build_batch([NewRecord(b"value-%d" % i, key=b"k") for i in range(n)], base_offset=0)


def produce(v: int, records: bytes, partition: int = 0, topic: str = TOPIC):
    return produce_request(topic, partition, records, version=v)


def list_offsets(v: int, timestamp: int, topic: str = TOPIC):
    R = ListOffsetsRequest
    return R[v](
        replica_id=-1,
        isolation_level=0,
        topics=[
            R.ListOffsetsTopic(
                name=topic,
                partitions=[
                    R.ListOffsetsTopic.ListOffsetsPartition(
                        partition_index=0, current_leader_epoch=-1, timestamp=timestamp
                    )
                ],
            )
        ],
    )


def topic_metadata_request(v: int):
    """Metadata for TOPIC alone, no topic created."""
    R = MetadataRequest
    return R[v](
        topics=[R.MetadataRequestTopic(name=TOPIC)],
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )


def requests_for(api_key: int, v: int):
    if api_key == 0:
        return produce(v, batch())
    if api_key == 1:
        R = FetchRequest
        return R[v](
            replica_id=-1,
            max_wait_ms=10,
            min_bytes=1,
            max_bytes=1 << 20,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[
                R.FetchTopic(
                    topic=TOPIC,
                    topic_id=TOPIC_ID.get("id"),  # v13+ names topics by id
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
    if api_key == 2:
        return list_offsets(v, -2)
    if api_key == 3:
        return topic_metadata_request(v)
    if api_key == 10:
        return FindCoordinatorRequest[v](key="g", key_type=0, coordinator_keys=["g"])
    if api_key == 18:
        return ApiVersionsRequest[v](client_software_name="tests", client_software_version="1")
    if api_key == 19:
        R = CreateTopicsRequest
        return R[v](
            topics=[
                R.CreatableTopic(
                    name=f"proto-create-{v}",
                    num_partitions=1,
                    replication_factor=3,
                    assignments=[],
                    configs=[
                        R.CreatableTopic.CreatableTopicConfig(name="retention.ms", value="1000")
                    ],
                )
            ],
            timeout_ms=10_000,
            validate_only=True,
        )
    if api_key == 20:
        R = DeleteTopicsRequest
        return R[v](
            topic_names=["proto-missing"],
            topics=[R.DeleteTopicState(name="proto-missing")],
            timeout_ms=10_000,
        )
    if api_key == 22:
        return InitProducerIdRequest[v](transactional_id=None, transaction_timeout_ms=60_000)
    if api_key == 23:
        R = OffsetForLeaderEpochRequest
        return R[v](
            replica_id=-1,
            topics=[
                R.OffsetForLeaderTopic(
                    topic=TOPIC,
                    partitions=[
                        R.OffsetForLeaderTopic.OffsetForLeaderPartition(
                            partition=0, current_leader_epoch=-1, leader_epoch=0
                        )
                    ],
                )
            ],
        )
    if api_key == 32:
        R = DescribeConfigsRequest
        return R[v](
            resources=[
                R.DescribeConfigsResource(
                    resource_type=2, resource_name=TOPIC, configuration_keys=["retention.ms"]
                )
            ],
            include_synonyms=False,
            include_documentation=False,
        )
    if api_key == 37:
        R = CreatePartitionsRequest
        return R[v](
            topics=[R.CreatePartitionsTopic(name=TOPIC, count=5, assignments=None)],
            timeout_ms=10_000,
            validate_only=True,
        )
    if api_key == 44:
        R = IncrementalAlterConfigsRequest
        return R[v](
            resources=[
                R.AlterConfigsResource(
                    resource_type=2,
                    resource_name=TOPIC,
                    configs=[
                        R.AlterConfigsResource.AlterableConfig(
                            name="retention.ms", config_operation=0, value="86400000"
                        )
                    ],
                )
            ],
            validate_only=True,
        )
    if api_key == 60:
        return DescribeClusterRequest[v](include_cluster_authorized_operations=False)
    if api_key == 45:  # partition 0: cancel (none running); partition 1: no such partition
        return reassign_request(v, [(0, None), (1, [1, 2, 3])])
    if api_key == 46:
        return ListPartitionReassignmentsRequest[v](timeout_ms=10_000, topics=None)
    group = group_request(api_key, v)
    if group is not None:
        return group
    more = admin_request(api_key, v)
    if more is not None:
        return more
    txn = txn_request(api_key, v, TOPIC)
    if txn is not None:
        return txn
    return security_request(api_key, v)


def admin_request(api_key: int, v: int) -> object | None:
    """The admin APIs of tests/kafka/test_admin_apis.py, with answers that change
    nothing (a partition that does not exist, a preferred leader already leading)."""
    from kafka.protocol import admin as a

    if api_key == 21:
        R = a.DeleteRecordsRequest
        T = R.DeleteRecordsTopic
        return R[v](
            topics=[
                T(name=TOPIC, partitions=[T.DeleteRecordsPartition(partition_index=7, offset=0)])
            ],
            timeout_ms=1000,
        )
    if api_key == 43:
        R = a.ElectLeadersRequest
        return R[v](
            election_type=0,
            topic_partitions=[R.TopicPartitions(topic=TOPIC, partitions=[0])],
            timeout_ms=10_000,
        )
    if api_key == 75:
        R = a.DescribeTopicPartitionsRequest
        return R[v](
            topics=[R.TopicRequest(name=TOPIC), R.TopicRequest(name="proto-missing")],
            response_partition_limit=2000,
            cursor=None,
        )
    if api_key == 71:
        from seglog.node.kafka.schemas.messages import GetTelemetrySubscriptionsRequest

        return GetTelemetrySubscriptionsRequest[v](client_instance_id=uuid.UUID(int=0))
    if api_key == 33:
        R = a.AlterConfigsRequest
        Res = R.AlterConfigsResource
        return R[v](
            resources=[
                Res(
                    resource_type=2,
                    resource_name=TOPIC,
                    configs=[Res.AlterableConfig(name="retention.ms", value="86400000")],
                )
            ],
            validate_only=True,
        )
    if api_key == 55:
        R = a.DescribeQuorumRequest
        T = R.TopicData
        return R[v](
            topics=[
                T(topic_name="__cluster_metadata", partitions=[T.PartitionData(partition_index=0)])
            ]
        )
    if api_key == 35:
        R = a.DescribeLogDirsRequest
        return R[v](topics=[R.DescribableLogDirTopic(topic=TOPIC, partitions=[0])])
    if api_key == 34:  # a directory that is not one of log.dirs: LOG_DIR_NOT_FOUND
        R = a.AlterReplicaLogDirsRequest
        D = R.AlterReplicaLogDir
        return R[v](
            dirs=[
                D(
                    path="/no-such-dir",
                    topics=[D.AlterReplicaLogDirTopic(name=TOPIC, partitions=[0])],
                )
            ]
        )
    if api_key == 48:
        R = a.DescribeClientQuotasRequest
        return R[v](
            components=[R.ComponentData(entity_type="user", match_type=2, match=None)],
            strict=False,
        )
    if api_key == 49:  # validate_only: nothing is stored
        R = a.AlterClientQuotasRequest
        E = R.EntryData
        return R[v](
            entries=[
                E(
                    entity=[E.EntityData(entity_type="client-id", entity_name=f"proto-{v}")],
                    ops=[E.OpData(key="producer_byte_rate", value=1024.0, remove=False)],
                )
            ],
            validate_only=True,
        )
    return None


def reassign_request(v: int, partitions: list[tuple[int, list[int] | None]], **extra: object):
    R = AlterPartitionReassignmentsRequest
    T = R.ReassignableTopic
    return R[v](
        timeout_ms=10_000,
        topics=[
            T(
                name=TOPIC,
                partitions=[
                    T.ReassignablePartition(partition_index=p, replicas=r) for p, r in partitions
                ],
            )
        ],
        **extra,
    )


def security_request(api_key: int, v: int) -> object:
    """The security APIs, on a PLAINTEXT listener without an authorizer."""
    from kafka.protocol import admin as a
    from kafka.protocol import sasl

    if api_key == 17:
        return sasl.SaslHandshakeRequest[v](mechanism="PLAIN")
    if api_key == 36:
        return sasl.SaslAuthenticateRequest[v](auth_bytes=b"\0u\0p")
    acl = dict(principal_filter=None, host_filter=None, operation=1, permission_type=1)
    if api_key == 29:
        return a.DescribeAclsRequest[v](
            resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1, **acl
        )
    if api_key == 30:
        R = a.CreateAclsRequest
        return R[v](
            creations=[
                R.AclCreation(
                    resource_type=2,
                    resource_name=TOPIC,
                    resource_pattern_type=3,
                    principal="User:alice",
                    host="*",
                    operation=3,
                    permission_type=3,
                )
            ]
        )
    if api_key == 31:
        R = a.DeleteAclsRequest
        return R[v](
            filters=[
                R.DeleteAclsFilter(
                    resource_type_filter=2,
                    resource_name_filter=TOPIC,
                    pattern_type_filter=3,
                    **acl,
                )
            ]
        )
    if api_key == 50:
        return a.DescribeUserScramCredentialsRequest[v](users=None)
    if api_key == 51:
        R = a.AlterUserScramCredentialsRequest
        return R[v](deletions=[R.ScramCredentialDeletion(name="proto-nobody", mechanism=1)])
    raise AssertionError(f"no request for API {api_key}")


def group_request(api_key: int, v: int):
    """The group APIs' requests: for a group of their own per version (a JoinGroup
    v0-v3 joins it and waits out the rebalance), else answered with errors (an
    unknown member, or NOT_COORDINATOR from a node that is not the coordinator)."""
    gid = f"proto-g-{api_key}-{v}"
    if api_key == 8:
        R = OffsetCommitRequest
        return R[v](
            group_id=gid,
            generation_id_or_member_epoch=-1,
            member_id="",
            group_instance_id=None,
            retention_time_ms=-1,
            topics=[
                R.OffsetCommitRequestTopic(
                    name=TOPIC,
                    partitions=[
                        R.OffsetCommitRequestTopic.OffsetCommitRequestPartition(
                            partition_index=0,
                            committed_offset=1,
                            committed_leader_epoch=-1,
                            commit_timestamp=-1,
                            committed_metadata="m",
                        )
                    ],
                )
            ],
        )
    if api_key == 9:
        R = OffsetFetchRequest
        if v >= 8:
            G = R.OffsetFetchRequestGroup
            return R[v](
                groups=[
                    G(
                        group_id=gid,
                        member_id=None,
                        member_epoch=-1,
                        topics=[G.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=[0])],
                    )
                ],
                require_stable=False,
            )
        return R[v](
            group_id=gid,
            topics=[R.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=[0])],
            require_stable=False,
        )
    if api_key == 11:
        R = JoinGroupRequest
        return R[v](
            group_id=gid,
            session_timeout_ms=6000,
            rebalance_timeout_ms=6000,
            member_id="",
            group_instance_id=None,
            protocol_type="consumer",
            protocols=[R.JoinGroupRequestProtocol(name="range", metadata=b"\x00\x00")],
            reason=None,
        )
    if api_key == 12:
        return HeartbeatRequest[v](
            group_id=gid, generation_id=1, member_id="nobody", group_instance_id=None
        )
    if api_key == 13:
        R = LeaveGroupRequest
        return R[v](
            group_id=gid,
            member_id="nobody",
            members=[R.MemberIdentity(member_id="nobody", group_instance_id=None, reason=None)],
        )
    if api_key == 14:
        R = SyncGroupRequest
        return R[v](
            group_id=gid,
            generation_id=1,
            member_id="nobody",
            group_instance_id=None,
            protocol_type="consumer",
            protocol_name="range",
            assignments=[],
        )
    if api_key == 15:
        return DescribeGroupsRequest[v](groups=[gid], include_authorized_operations=False)
    if api_key == 16:
        return ListGroupsRequest[v](states_filter=[], types_filter=[])
    if api_key == 42:
        return DeleteGroupsRequest[v](groups_names=[gid])
    if api_key == 69:  # the group ConsumerGroupHeartbeat v0 made (or NOT_COORDINATOR)
        return ConsumerGroupDescribeRequest[v](
            group_ids=["proto-g-68-0", "proto-g-missing"], include_authorized_operations=False
        )
    if api_key == 68:  # KIP-848: joins (v1: with the consumer's own member id)
        return ConsumerGroupHeartbeatRequest[v](
            group_id=gid,
            member_id="" if v == 0 else "kio-member-1",
            member_epoch=0,
            rebalance_timeout_ms=30_000,
            subscribed_topic_names=[TOPIC],
            topic_partitions=[],
        )
    if api_key == 47:
        R = OffsetDeleteRequest
        return R[v](
            group_id=gid,
            topics=[
                R.OffsetDeleteRequestTopic(
                    name=TOPIC,
                    partitions=[
                        R.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(partition_index=0)
                    ],
                )
            ],
        )
    return None


SERVED = [
    (k, v) for k, spec in sorted(APIS.items()) for v in range(spec.served[0], spec.served[1] + 1)
]


@pytest.fixture(scope="module")
def leader_port(kafka_cluster) -> int:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": kafka_cluster.kafka_bootstrap})
    admin.create_topics([NewTopic(TOPIC, 1, 3)])[TOPIC].result(30)
    leader = kafka_cluster.wait("a leader", lambda: kafka_cluster.leader_of(TOPIC))
    port = kafka_cluster.kafka_ports[leader]

    def serving() -> bool | None:  # the leader has set the partition up
        with KafkaConnection(port) as conn:
            _body, r = conn.request(list_offsets(7, -1))
        return True if r.topics[0].partitions[0].error_code == 0 else None

    kafka_cluster.wait("the leader serves the partition", serving)
    with KafkaConnection(port) as conn:
        TOPIC_ID["id"] = conn.request(topic_metadata_request(12))[1].topics[0].topic_id
    return port


def kio_roundtrip(api_key: int, v: int, request_body: bytes, response_body: bytes) -> object:
    """kio reads the request and the response whole, and writes the response back to
    the same bytes."""
    req_schema = kio_index.load_request_schema(api_key, v)
    _req, end = kio_serial.entity_reader(req_schema)(request_body, 0)
    assert end == len(request_body), f"kio read {end} of {len(request_body)} request bytes"
    schema = kio_index.load_response_schema(api_key, v)
    decoded, end = kio_serial.entity_reader(schema)(response_body, 0)
    assert end == len(response_body), f"kio read {end} of {len(response_body)} response bytes"
    out = io.BytesIO()
    kio_serial.entity_writer(schema)(out, decoded)
    assert out.getvalue() == response_body, "kio re-encodes the response differently"
    return decoded


@pytest.mark.parametrize(
    ("api_key", "version"), SERVED, ids=[f"{APIS[k].name}-v{v}" for k, v in SERVED]
)
def test_every_served_api_and_version_cross_checked_with_kio(leader_port, api_key, version):
    request = requests_for(api_key, version)
    with KafkaConnection(leader_port) as conn:
        body, decoded = conn.request(request)
    request_body = bytes(request.encode())
    answer = kio_roundtrip(api_key, version, request_body, body)
    # And the answers say what they should (kafka-python's decoding).
    if api_key == 0:
        p = decoded.responses[0].partition_responses[0]
        assert p.error_code == 0 and p.base_offset >= 0, p
    elif api_key == 1:
        p = decoded.responses[0].partitions[0]
        assert p.error_code == 0 and p.high_watermark > 0 and p.records, p
    elif api_key == 3:
        t = decoded.topics[0]
        assert t.error_code == 0 and len(t.partitions) == 1 and len(decoded.brokers) == 3
    elif api_key == 18:
        keys = {k.api_key: (k.min_version, k.max_version) for k in decoded.api_keys}
        assert keys[0] == (0, 11) and keys[1] == (4, 17) and decoded.error_code == 0
        # KIP-890 part 1's versions: TRANSACTION_ABORTABLE known (part 2's are not served).
        assert (keys[22], keys[25], keys[26], keys[28]) == ((0, 5), (0, 4), (0, 4), (0, 4))
    elif api_key == 22:
        assert decoded.error_code == 0 and decoded.producer_id >= 0
    elif api_key == 43:  # the preferred replica leads already (or just became leader)
        assert decoded.replica_election_results[0].partition_result[0].error_code in (0, 84)
    elif api_key == 75:
        [known, missing] = decoded.topics
        assert known.error_code == 0 and missing.error_code == 3, decoded
        assert known.partitions[0].eligible_leader_replicas == [], known
    elif api_key == 71:
        assert decoded.error_code == 0 and decoded.requested_metrics == []
    elif api_key == 33:
        assert decoded.responses[0].error_code == 0, decoded
    elif api_key == 55:
        assert decoded.topics[0].partitions[0].leader_id in (1, 2, 3), decoded
    elif api_key == 35:
        assert len(decoded.results) == 2 and all(r.error_code == 0 for r in decoded.results)
    elif api_key == 34:
        assert decoded.results[0].partitions[0].error_code == 57, decoded  # LOG_DIR_NOT_FOUND
    elif api_key == 48:
        assert decoded.error_code == 0 and decoded.entries is not None, decoded
    elif api_key == 49:
        assert decoded.entries[0].error_code == 0, decoded
    elif api_key == 21:
        assert decoded.topics[0].partitions[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
    elif api_key == 19:
        assert decoded.topics[0].error_code == 0, decoded
    elif api_key == 20:
        assert decoded.responses[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
    elif api_key == 10:
        code = decoded.coordinators[0].error_code if version >= 4 else decoded.error_code
        assert code in (0, 15)  # NONE, or COORDINATOR_NOT_AVAILABLE while it is created
    elif api_key in (17, 36):
        assert decoded.error_code == 34  # ILLEGAL_SASL_STATE: not a SASL listener
    elif api_key == 29:
        assert decoded.error_code == 54  # SECURITY_DISABLED: no authorizer
    elif api_key == 30:
        assert decoded.results[0].error_code == 54
    elif api_key == 31:
        assert decoded.filter_results[0].error_code == 54
    elif api_key == 51:
        assert decoded.results[0].error_code == 91  # RESOURCE_NOT_FOUND
    elif api_key == 45:
        codes = [p.error_code for p in decoded.responses[0].partitions]
        assert decoded.error_code == 0 and codes == [85, 3], decoded  # NO_REASSIGNMENT..., UNKNOWN
    elif api_key == 46:
        assert decoded.error_code == 0 and decoded.topics == [], decoded
    elif api_key == 69:
        codes = [g.error_code for g in decoded.groups]
        assert codes[1] in (15, 16, 69), decoded  # GROUP_ID_NOT_FOUND from its coordinator
        assert codes[0] in (0, 15, 16, 69), decoded
    elif api_key == 68:
        # NONE with the first epoch, or NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE from
        # a node that is not (yet) the group's coordinator
        assert decoded.error_code in (0, 15, 16), decoded
        if decoded.error_code == 0:
            assert decoded.member_epoch == 1 and decoded.assignment is not None, decoded
    assert answer is not None


def test_reassignment_requests_that_name_bad_replicas_get_kafkas_errors(leader_port):
    """KIP-455 on the Kafka listener: an unregistered broker or a broker named twice is
    INVALID_REPLICA_ASSIGNMENT; with AllowReplicationFactorChange=false (v1) a target of
    another size is INVALID_REPLICATION_FACTOR; nothing starts."""
    with KafkaConnection(leader_port) as conn:
        _b, r = conn.request(reassign_request(0, [(0, [1, 2, 9])]))
        assert r.responses[0].partitions[0].error_code == 39, r
        assert "unregistered broker(s) [9]" in r.responses[0].partitions[0].error_message
        _b, r = conn.request(reassign_request(0, [(0, [1, 1, 2])]))
        assert r.responses[0].partitions[0].error_code == 39, r
        request = reassign_request(1, [(0, [1, 2])], allow_replication_factor_change=False)
        _b, r = conn.request(request)
        assert r.responses[0].partitions[0].error_code == 38, r  # INVALID_REPLICATION_FACTOR
        _b, listed = conn.request(ListPartitionReassignmentsRequest[0](timeout_ms=1, topics=None))
        assert listed.error_code == 0 and listed.topics == [], listed


def test_dynamic_broker_configs_on_the_kafka_listener(leader_port):
    """KIP-226: IncrementalAlterConfigs on the BROKER resource "" (every broker) sets a
    dynamic default that DescribeConfigs shows as DYNAMIC_DEFAULT_BROKER_CONFIG (3); a
    config that needs a restart is INVALID_CONFIG; deleting removes it."""
    R = IncrementalAlterConfigsRequest
    Res, Cfg = R.AlterConfigsResource, R.AlterConfigsResource.AlterableConfig

    def alter(name: str, op: int, value: str | None) -> Any:
        request = R[1](
            resources=[
                Res(
                    resource_type=4,
                    resource_name="",
                    configs=[Cfg(name=name, config_operation=op, value=value)],
                )
            ],
            validate_only=False,
        )
        with KafkaConnection(leader_port) as conn:
            return conn.request(request)[1].responses[0]

    def described() -> dict[str, tuple[str, int, bool]]:
        D = DescribeConfigsRequest
        request = D[4](
            resources=[
                D.DescribeConfigsResource(
                    resource_type=4, resource_name="", configuration_keys=None
                )
            ],
            include_synonyms=False,
            include_documentation=False,
        )
        with KafkaConnection(leader_port) as conn:
            result = conn.request(request)[1].results[0]
        assert result.error_code == 0, result
        return {c.name: (c.value, c.config_source, c.read_only) for c in result.configs}

    assert alter("leader.replication.throttled.rate", 0, "1048576").error_code == 0
    assert described()["leader.replication.throttled.rate"] == ("1048576", 3, False)
    refused = alter("num.io.threads", 0, "2")
    assert refused.error_code == 40 and "without a restart" in refused.error_message
    assert alter("leader.replication.throttled.rate", 1, None).error_code == 0
    assert "leader.replication.throttled.rate" not in described()


def test_api_versions_above_our_range_gets_a_v0_error_with_our_ranges(leader_port):
    with KafkaConnection(leader_port) as conn:
        frame = struct.pack(">hhi", 18, 99, 7) + struct.pack(">h", 5) + b"tests" + b"\x00" * 6
        conn.send_raw(struct.pack(">i", len(frame)) + frame)
        reply = conn.read_frame()
    assert struct.unpack_from(">i", reply)[0] == 7
    error, count = struct.unpack_from(">hi", reply, 4)
    assert error == 35  # UNSUPPORTED_VERSION
    ranges = {}
    for i in range(count):
        key, low, high = struct.unpack_from(">hhh", reply, 10 + 6 * i)
        ranges[key] = (low, high)
    assert ranges[18] == (0, 4) and ranges[0] == (0, 11)


# --- bad input -------------------------------------------------------------------------


def latest(port: int) -> int:
    with KafkaConnection(port) as conn:
        _body, r = conn.request(list_offsets(7, -1))
    return int(r.topics[0].partitions[0].offset)


def still_serves(port: int) -> None:
    with KafkaConnection(port) as conn:
        _body, r = conn.request(
            ApiVersionsRequest[3](client_software_name="t", client_software_version="1")
        )
    assert r.error_code == 0


@pytest.mark.parametrize(
    "frame",
    [
        pytest.param(b"\x00\x00\x00\x10" + b"\xde\xad\xbe\xef" * 4, id="garbage"),
        pytest.param(struct.pack(">ihhi", 8, 999, 0, 1), id="unknown-api-key"),
        pytest.param(struct.pack(">ihhih", 10, 0, 2, 1, -1), id="produce-v2"),
        pytest.param(struct.pack(">ihhih", 10, 1, 3, 1, -1), id="fetch-v3"),
        pytest.param(struct.pack(">ihh", 4, 3, 12), id="header-truncated"),
        pytest.param(struct.pack(">ihhih", 11, 3, 12, 1, 0) + b"\x05", id="body-truncated"),
        pytest.param(struct.pack(">i", 200 * 1024 * 1024), id="oversized"),
        pytest.param(struct.pack(">i", -5), id="negative-size"),
    ],
)
def test_bad_frames_close_the_connection_and_change_nothing(leader_port, frame):
    before = latest(leader_port)
    with KafkaConnection(leader_port) as conn:
        conn.send_raw(frame)
        assert conn.closed_by_peer(), "the node kept the connection open"
    assert latest(leader_port) == before
    still_serves(leader_port)


def test_a_frame_cut_short_by_the_client_leaves_the_node_serving(leader_port):
    with KafkaConnection(leader_port) as conn:
        conn.send_raw(struct.pack(">i", 100) + b"\x00\x03\x00\x0c")
    still_serves(leader_port)


def test_a_batch_with_a_wrong_crc_is_refused_and_not_appended(leader_port):
    before = latest(leader_port)
    bad = bytearray(batch())
    bad[-1] ^= 0xFF  # inside the CRC's range
    with KafkaConnection(leader_port) as conn:
        _body, r = conn.request(produce(9, bytes(bad)))
    p = r.responses[0].partition_responses[0]
    assert p.error_code == 2, p  # CORRUPT_MESSAGE
    assert latest(leader_port) == before
    still_serves(leader_port)


def test_produce_to_a_partition_this_node_does_not_lead(kafka_cluster, leader_port):
    follower = next(p for p in kafka_cluster.kafka_ports.values() if p != leader_port)
    before = latest(leader_port)
    with KafkaConnection(follower) as conn:
        _body, r = conn.request(produce(9, batch()))
        _body, missing = conn.request(produce(9, batch(), topic="proto-no-such-topic"))
    assert r.responses[0].partition_responses[0].error_code == 6  # NOT_LEADER_OR_FOLLOWER
    assert missing.responses[0].partition_responses[0].error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
    assert latest(leader_port) == before


def test_a_follower_names_the_leader_in_produce_v10_and_fetch_v16(kafka_cluster, leader_port):
    """KIP-951, as Kafka's KafkaApis answers it: a partition answered
    NOT_LEADER_OR_FOLLOWER carries its current leader (id, epoch) in Produce v10+ and
    Fetch v16+, and the answer the leader's endpoint on the listener asked (NodeEndpoints),
    so the client can go there without a metadata round trip. Produce v9 and Fetch v15
    carry neither."""
    leader = kafka_cluster.wait("a leader", lambda: kafka_cluster.leader_of(TOPIC))
    with KafkaConnection(leader_port) as conn:
        epoch = conn.request(topic_metadata_request(12))[1].topics[0].partitions[0].leader_epoch
    endpoint = [(leader, "127.0.0.1", leader_port, None)]
    follower = next(p for p in kafka_cluster.kafka_ports.values() if p != leader_port)
    before = latest(leader_port)

    def hints(r: Any, p: Any) -> tuple[Any, Any]:
        at = p.current_leader
        nodes = [(n.node_id, n.host, n.port, n.rack) for n in r.node_endpoints or []]
        return (None if at is None else (at.leader_id, at.leader_epoch)), nodes

    with KafkaConnection(follower) as conn:
        for v in (9, 10, 11):
            _body, r = conn.request(produce(v, batch()))
            p = r.responses[0].partition_responses[0]
            assert p.error_code == 6, (v, p)  # NOT_LEADER_OR_FOLLOWER
            if v >= 10:
                assert hints(r, p) == ((leader, epoch), endpoint), v
            else:
                assert getattr(p, "current_leader", None) is None
        for v in (15, 16, 17):
            _body, r = conn.request(requests_for(1, v))
            p = r.responses[0].partitions[0]
            assert p.error_code == 6, (v, p)
            expected = ((leader, epoch), endpoint) if v >= 16 else (None, [])
            assert hints(r, p) == expected, v
    assert latest(leader_port) == before


def test_list_offsets_max_timestamp_and_by_time(leader_port):
    t0 = 1_900_000_000_000
    records = [NewRecord(b"t", timestamp=t0 + d) for d in (5, 100, 50)]
    with KafkaConnection(leader_port) as conn:
        _body, r = conn.request(produce(9, build_batch(records, base_offset=0)))
        base = r.responses[0].partition_responses[0].base_offset
        assert base >= 0
        _body, top = conn.request(list_offsets(7, -3))  # MAX_TIMESTAMP (KIP-734)
        _body, at = conn.request(list_offsets(7, t0 + 60))  # first at or after t0+60
    p = top.topics[0].partitions[0]
    assert (p.error_code, p.offset, p.timestamp) == (0, base + 1, t0 + 100)
    q = at.topics[0].partitions[0]
    assert q.error_code == 0 and q.offset == base + 1, q


def test_a_fetch_by_an_unknown_topic_id_is_unknown_topic_id(leader_port):
    """Fetch v13+ (KIP-516) names topics by id: one this node does not know (a deleted
    or recreated topic) is UNKNOWN_TOPIC_ID, answered under the id it was asked by."""
    missing = uuid.uuid4()
    request = requests_for(1, 17)
    request.topics[0].topic_id = missing
    with KafkaConnection(leader_port) as conn:
        _body, r = conn.request(request)
    [t] = r.responses
    assert t.topic_id == missing and t.partitions[0].error_code == 100
