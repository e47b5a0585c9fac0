"""DescribeQuorum (API 55, v0-v2) on the Kafka listener: the metadata quorum
(`__cluster_metadata-0`) as its leader sees it — the leader, its epoch (the Raft term),
the high watermark (the commit index) and each voter's log end and last fetch. Every
seglog node is a voter, so there are no observers; v2's nodes are the voters'
CONTROLLER endpoints (controller.quorum.voters). Needs DESCRIBE on the cluster."""

from __future__ import annotations

from collections.abc import Mapping

from seglog.controller.cluster_control import ControlError

from .codec import KafkaRequest, Part, encode_response, response_class
from .errors import error_code
from .node_api import KafkaNode

METADATA_TOPIC = "__cluster_metadata"


def describe_quorum(
    node: KafkaNode,
    request: KafkaRequest,
    voters: Mapping[int, tuple[str, int]],
    may_describe_cluster: bool,
) -> list[Part]:
    cls = response_class(request)
    T = cls.TopicData
    P = T.PartitionData
    v = request.api_version
    if not may_describe_cluster:
        body = cls(error_code=error_code("CLUSTER_AUTHORIZATION_FAILED"), topics=[])
        if v >= 2:
            body.error_message = "DESCRIBE on the cluster is needed"
            body.nodes = []
        return encode_response(request, body)
    try:
        q = node.describe_metadata_quorum()
    except ControlError as e:
        part = P(
            partition_index=0,
            error_code=error_code(e.error_name),
            leader_id=-1,
            leader_epoch=-1,
            high_watermark=-1,
            current_voters=[],
            observers=[],
        )
        if v >= 2:
            part.error_message = str(e)
        body = cls(error_code=0, topics=[T(topic_name=METADATA_TOPIC, partitions=[part])])
        if v >= 2:
            body.nodes = []
        return encode_response(request, body)
    states = []
    for voter in sorted(q.voters, key=lambda x: x.node_id):
        state = P.ReplicaState(replica_id=voter.node_id, log_end_offset=voter.log_end_index)
        if v >= 1:
            state.last_fetch_timestamp = voter.last_fetch_timestamp_ms
            state.last_caught_up_timestamp = voter.last_caught_up_timestamp_ms
        states.append(state)
    part = P(
        partition_index=0,
        error_code=0,
        leader_id=q.leader_id,
        leader_epoch=q.term,
        high_watermark=q.commit_index,
        current_voters=states,
        observers=[],
    )
    body = cls(error_code=0, topics=[T(topic_name=METADATA_TOPIC, partitions=[part])])
    if v >= 2:
        body.nodes = [
            cls.Node(
                node_id=n,
                listeners=[cls.Node.Listener(name="CONTROLLER", host=host, port=port)],
            )
            for n, (host, port) in sorted(voters.items())
        ]
    return encode_response(request, body)
