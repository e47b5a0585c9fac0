"""ApiVersions, Metadata and DescribeCluster: what a client learns about the cluster.
Brokers are listed with their address on the listener the request came in on, as
Kafka does; fenced brokers are left out, and a partition whose leader is not among
the live brokers answers LEADER_NOT_AVAILABLE."""

from __future__ import annotations

import random
from collections.abc import Callable, Container, Mapping
from typing import Any

from seglog.controller.cluster_control import ControlError
from seglog.controller.metadata_image import BrokerImage, MetadataImage, PartitionState
from seglog.storage.partition_metadata import topic_id_to_uuid

from ..groups.offsets_records import OFFSETS_TOPIC
from ..security.acls import AclOperation
from ..transactions.txn_records import TRANSACTION_STATE_TOPIC
from .codec import API_VERSIONS, APIS, KafkaRequest, Part, encode_response, response_class
from .errors import error_code
from .node_api import KafkaNode

UNSUPPORTED_VERSION = 35


def api_versions(request: KafkaRequest) -> list[Part]:
    """Our ranges; an ApiVersions above ours gets them in a v0 error answer (KIP-511)."""
    spec = APIS[API_VERSIONS]
    unsupported = request.body is None
    version = 0 if unsupported else request.api_version
    cls = spec.response[version]
    keys = [
        cls.ApiVersion(api_key=s.key, min_version=s.advertised[0], max_version=s.advertised[1])
        for s in sorted(APIS.values(), key=lambda s: s.key)
        if s.listed
    ]
    body = cls(
        error_code=UNSUPPORTED_VERSION if unsupported else 0,
        api_keys=keys,
        throttle_time_ms=0,
    )
    return encode_response(request, body, version=version)


def partition_leadership(index: int, state: PartitionState, live: Container[int]) -> dict[str, Any]:
    """A partition's leader and replicas as Metadata and DescribeTopicPartitions answer
    them: LEADER_NOT_AVAILABLE (and no leader) while its leader is not live."""
    leader_up = state.leader in live
    return {
        "error_code": 0 if leader_up else error_code("LEADER_NOT_AVAILABLE"),
        "partition_index": index,
        "leader_id": state.leader if leader_up else -1,
        "leader_epoch": state.leader_epoch,
        "replica_nodes": list(state.replicas),
        "isr_nodes": list(state.isr),
    }


def live_brokers(image: MetadataImage, listener: str) -> dict[int, tuple[BrokerImage, str, int]]:
    """Unfenced brokers that advertise `listener`: id → (broker, host, port)."""
    out = {}
    for b in image.brokers.values():
        if b.fenced:
            continue
        endpoint = b.endpoint(listener)
        if endpoint is not None:
            out[b.broker_id] = (b, endpoint[0], endpoint[1])
    return out


def answered_brokers(
    node: KafkaNode, image: MetadataImage, listener: str
) -> dict[int, tuple[BrokerImage, str, int]]:
    """`live_brokers` as this node answers them: without itself while it doubts its
    own leadership (its controller process silent for a session). Its image stops at
    the silence, but the controller has fenced it by then and moved its leaderships:
    naming itself, it would send clients back to be refused until their next full
    metadata refresh; without a leader, librdkafka asks again at once."""
    live = live_brokers(image, listener)
    if node.replica_manager.in_doubt() is not None:
        live.pop(node.node_id, None)
    return live


def controller_for_clients(live: Mapping[int, object]) -> int:
    """Metadata's and DescribeCluster's controller_id: a live broker at random, -1 with
    none, as Kafka's KRaft brokers answer (getRandomAliveBrokerId). Any broker takes an
    admin request and forwards it to the active controller (node/kafka/admin.py). The
    active controller's own node id could name a broker the answer does not list (its
    broker process frozen or down while its controller process runs on), and
    librdkafka's admin requests then wait for a broker it has no address for."""
    return random.choice(list(live)) if live else -1


def _topic_uuid(topic_id: str) -> Any:
    try:
        return topic_id_to_uuid(topic_id)
    except ValueError:
        return None


def metadata(
    node: KafkaNode,
    listener: str,
    request: KafkaRequest,
    may_describe: Callable[[str], bool] = lambda _topic: True,
    cluster_operations: Callable[[], set[int]] | None = None,
    topic_operations: Callable[[str], set[int]] | None = None,
) -> list[Part]:
    """`may_describe`: the ACL check; all topics lists only those, a named one that
    fails it is answered TOPIC_AUTHORIZATION_FAILED. `cluster_operations` and
    `topic_operations`: KIP-430's bit fields, answered when a v8+ request asks."""
    req = request.body
    v = request.api_version
    cls = response_class(request)
    image = node.metadata_image()
    if req.topics is None or (v == 0 and not req.topics):
        wanted = [t for t in sorted(image.topics) if may_describe(t)]
    else:
        wanted = []
        for t in req.topics:
            name = t.name
            if name is None and getattr(t, "topic_id", None) is not None:
                for tname, topic in image.topics.items():
                    if _topic_uuid(topic.topic_id) == t.topic_id:
                        name = tname
            wanted.append(name)
    auto_create = (req.allow_auto_topic_creation if v >= 4 else True) and (
        node.auto_create_topics_enable
    )
    topics = []
    for name in wanted:
        if name is None:
            topics.append(
                cls.MetadataResponseTopic(error_code=error_code("UNKNOWN_TOPIC_ID"), name=None)
            )
            continue
        if not may_describe(name):
            topics.append(
                cls.MetadataResponseTopic(
                    error_code=error_code("TOPIC_AUTHORIZATION_FAILED"), name=name
                )
            )
            continue
        topic = image.topics.get(name)
        if topic is None and auto_create:
            try:
                node.create_topic(
                    name, node.num_partitions, node.default_replication_factor, {}, False
                )
            except ControlError as e:
                if e.error_name != "TOPIC_ALREADY_EXISTS":
                    topics.append(
                        cls.MetadataResponseTopic(error_code=error_code(e.error_name), name=name)
                    )
                    continue
            image = node.metadata_image()
            topic = image.topics.get(name)
            if topic is None:
                topics.append(
                    cls.MetadataResponseTopic(
                        error_code=error_code("LEADER_NOT_AVAILABLE"), name=name
                    )
                )
                continue
        if topic is None:
            topics.append(
                cls.MetadataResponseTopic(
                    error_code=error_code("UNKNOWN_TOPIC_OR_PARTITION"), name=name
                )
            )
            continue
        live = answered_brokers(node, image, listener)
        partitions = []
        for p, state in sorted(topic.partitions.items()):
            partitions.append(
                cls.MetadataResponseTopic.MetadataResponsePartition(
                    **partition_leadership(p, state, live),
                    offline_replicas=[r for r in state.replicas if r not in live],
                )
            )
        answered = cls.MetadataResponseTopic(
            error_code=0,
            name=name,
            topic_id=_topic_uuid(topic.topic_id),
            is_internal=name in (OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC),
            partitions=partitions,
        )
        if v >= 8 and req.include_topic_authorized_operations and topic_operations:
            answered.authorized_operations = topic_operations(name)
        topics.append(answered)
    listed = answered_brokers(node, node.metadata_image(), listener)
    brokers = [
        cls.MetadataResponseBroker(node_id=i, host=host, port=port, rack=b.rack)
        for i, (b, host, port) in sorted(listed.items())
    ]
    body = cls(
        throttle_time_ms=0,
        brokers=brokers,
        cluster_id=node.cluster_id,
        controller_id=controller_for_clients(listed),
        topics=topics,
    )
    if 8 <= v <= 10 and req.include_cluster_authorized_operations and cluster_operations:
        ops = cluster_operations()
        body.authorized_operations = ops if AclOperation.DESCRIBE in ops else set()
    return encode_response(request, body)


def describe_cluster(
    node: KafkaNode,
    listener: str,
    request: KafkaRequest,
    cluster_operations: Callable[[], set[int]] = lambda: set(),
) -> list[Part]:
    """Answered to anyone, as Kafka's broker does; only the KIP-430 bit field the
    client may ask for (`include_cluster_authorized_operations`) is authorized: the
    caller's operations on the cluster, 0 without DESCRIBE there."""
    req = request.body
    cls = response_class(request)
    endpoint_type = getattr(req, "endpoint_type", 1)
    if endpoint_type != 1:
        body = cls(
            error_code=error_code("INVALID_REQUEST"),
            error_message="only broker endpoints (endpoint type 1) are served",
            endpoint_type=endpoint_type,
            cluster_id=node.cluster_id,
            brokers=[],
        )
        return encode_response(request, body)
    image = node.metadata_image()
    listed = answered_brokers(node, image, listener)
    brokers = [
        cls.DescribeClusterBroker(broker_id=i, host=host, port=port, rack=b.rack)
        for i, (b, host, port) in sorted(listed.items())
    ]
    if request.api_version >= 2 and req.include_fenced_brokers:
        # KIP-1073: the fenced brokers too, flagged.
        for b in sorted(image.brokers.values(), key=lambda b: b.broker_id):
            endpoint = b.endpoint(listener)
            if b.fenced and endpoint is not None:
                brokers.append(
                    cls.DescribeClusterBroker(
                        broker_id=b.broker_id,
                        host=endpoint[0],
                        port=endpoint[1],
                        rack=b.rack,
                        is_fenced=True,
                    )
                )
    body = cls(
        throttle_time_ms=0,
        error_code=0,
        endpoint_type=endpoint_type,
        cluster_id=node.cluster_id,
        controller_id=controller_for_clients(listed),
        brokers=brokers,
    )
    if req.include_cluster_authorized_operations:
        ops = cluster_operations()
        body.authorized_operations = ops if AclOperation.DESCRIBE in ops else set()
    return encode_response(request, body)
