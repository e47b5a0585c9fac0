"""DescribeLogDirs (API 35, v1-v4) and AlterReplicaLogDirs (API 34, v1-v2) on the Kafka
listener. Describe: this node's log directories with each hosted partition's size and
offset lag (how far its log end is behind the high watermark, as Kafka reports it),
a future replica being filled by a move listed with IsFutureKey (its lag: how far it
is behind the current log's end), and the volume's total and usable bytes (v4). An
offline directory answers KAFKA_STORAGE_ERROR with no partitions. Needs DESCRIBE on
the cluster. Alter moves replicas of this node between its directories
(node/log_dir_moves.py); needs ALTER on the cluster. Without the permission:
CLUSTER_AUTHORIZATION_FAILED, as Kafka."""

from __future__ import annotations

import shutil
from typing import Any

from ..security.acls import CLUSTER_NAME, AclOperation, ResourceType
from ..security.kafka_gate import allowed
from ..security.node_authorizer import NodeAuthorizer
from .codec import KafkaRequest, Part, encode_response, response_class
from .errors import error_code
from .node_api import KafkaNode


def describe_log_dirs(
    node: KafkaNode, request: KafkaRequest, authorizer: NodeAuthorizer | None
) -> list[Part]:
    req = request.body
    cls = response_class(request)
    if not allowed(authorizer, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        body = cls(throttle_time_ms=0, results=[])
        body.error_code = error_code("CLUSTER_AUTHORIZATION_FAILED")
        return encode_response(request, body)
    wanted = (
        None if req.topics is None else {(t.topic, p) for t in req.topics for p in t.partitions}
    )
    lm = node.replica_manager.log_manager
    by_dir: dict[Any, dict[str, list[Any]]] = {d.path: {} for d in lm.dirs}
    R = cls.DescribeLogDirsResult
    T = R.DescribeLogDirsTopic
    for tp, plog in sorted(lm.partitions().items()):
        if wanted is not None and tp not in wanted:
            continue
        if plog.directory.offline_reason is not None:
            continue
        with plog.lock:
            log = plog.log
            size, lag = log.size_in_bytes, max(log.high_watermark - log.log_end_offset, 0)
        by_dir.setdefault(plog.directory.path, {}).setdefault(tp[0], []).append(
            T.DescribeLogDirsPartition(
                partition_index=tp[1], partition_size=size, offset_lag=lag, is_future_key=False
            )
        )
        moves = node.log_dir_moves
        future, dest = moves.futures.get(tp), moves.moving.get(tp)
        if future is not None and dest is not None:
            with plog.lock:
                lag = max(plog.log.log_end_offset - future.log_end_offset, 0)
                size = future.size_in_bytes
            by_dir.setdefault(dest.path, {}).setdefault(tp[0], []).append(
                T.DescribeLogDirsPartition(
                    partition_index=tp[1], partition_size=size, offset_lag=lag, is_future_key=True
                )
            )
    results = []
    for d in lm.dirs:
        offline = d.offline_reason is not None
        result = R(
            error_code=error_code("KAFKA_STORAGE_ERROR") if offline else 0,
            log_dir=str(d.path.resolve()),
            topics=[]
            if offline
            else [T(name=name, partitions=parts) for name, parts in by_dir[d.path].items()],
        )
        if not offline:
            try:
                usage = shutil.disk_usage(d.path)
                result.total_bytes, result.usable_bytes = usage.total, usage.free
            except OSError:
                pass  # the defaults, -1: unknown (Kafka's answer when it cannot tell)
        results.append(result)
    body = cls(throttle_time_ms=0, results=results)
    body.error_code = 0
    return encode_response(request, body)


def alter_replica_log_dirs(
    node: KafkaNode, request: KafkaRequest, authorizer: NodeAuthorizer | None
) -> list[Part]:
    req = request.body
    cls = response_class(request)
    may = allowed(authorizer, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME)
    errors: dict[tuple[str, int], str] = {}
    for d in req.dirs:
        for t in d.topics:
            for p in t.partitions:
                tp = (t.name, p)
                errors[tp] = (
                    node.log_dir_moves.alter(tp, d.path) if may else "CLUSTER_AUTHORIZATION_FAILED"
                )
    R = cls.AlterReplicaLogDirTopicResult
    by_topic: dict[str, list[Any]] = {}
    for (topic, p), error in errors.items():
        by_topic.setdefault(topic, []).append(
            R.AlterReplicaLogDirPartitionResult(partition_index=p, error_code=error_code(error))
        )
    results = [R(topic_name=name, partitions=parts) for name, parts in by_topic.items()]
    return encode_response(request, cls(throttle_time_ms=0, results=results))
