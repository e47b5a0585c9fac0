"""The Admin's topic operations: create, grow, delete, list and describe topics,
and describe the cluster. Batch calls raise as admin.py's docstring says."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from seglog.proto import client_pb2 as pb

from .admin_requests import AdminRequests, raise_batch, topic_error
from .admin_types import (
    BrokerDescription,
    ClusterDescription,
    CreateTopicResult,
    NewPartitions,
    NewTopic,
    PartitionDescription,
    TopicDescription,
)
from .errors import KafkaError, error_class


class TopicAdmin(AdminRequests):
    def create_topics(
        self,
        new_topics: Sequence[NewTopic],
        timeout_ms: int | None = None,
        validate_only: bool = False,
    ) -> dict[str, CreateTopicResult]:
        """Create every topic it can; raise the first topic's error if any failed
        (see the module docstring). `validate_only`: check, create nothing."""
        request = pb.CreateTopicsRequest(
            timeout_ms=self._timeout_ms(timeout_ms),
            validate_only=validate_only,
        )
        for t in new_topics:
            request.topics.add(
                name=t.name,
                num_partitions=t.num_partitions,
                replication_factor=t.replication_factor,
                configs={str(k): str(v) for k, v in t.topic_configs.items()},
            )
        response: pb.CreateTopicsResponse = self._rpc(
            "CreateTopics", request, lambda r: [t.error_code for t in r.topics]
        )
        results: dict[str, CreateTopicResult] = {}
        errors: dict[str, KafkaError] = {}
        for r in response.topics:
            if r.error_code:
                errors[r.name] = topic_error(r.name, r.error_code, r.error_message)
            else:
                results[r.name] = CreateTopicResult(
                    r.name, r.topic_id, r.num_partitions, r.replication_factor
                )
        self._metadata.request_update()
        raise_batch(errors, results, [t.name for t in new_topics])
        return results

    def create_partitions(
        self,
        topic_partitions: Mapping[str, NewPartitions],
        timeout_ms: int | None = None,
        validate_only: bool = False,
    ) -> list[str]:
        """Raise each topic's partition count to its NewPartitions.total_count (kafka-
        python's shape); the topics changed. Raises like create_topics."""
        request = pb.CreateTopicPartitionsRequest(
            timeout_ms=self._timeout_ms(timeout_ms),
            validate_only=validate_only,
        )
        for name, new in topic_partitions.items():
            if new.new_assignments is not None:
                raise ValueError(
                    f"{name}: new_assignments is not supported; the controller places "
                    f"the new partitions' replicas"
                )
            request.topics.add(name=name, count=new.total_count)
        response: pb.CreateTopicPartitionsResponse = self._rpc(
            "CreatePartitions", request, lambda r: [t.error_code for t in r.results]
        )
        return self._names_done(response.results, list(topic_partitions))

    def delete_topics(self, topics: Sequence[str], timeout_ms: int | None = None) -> list[str]:
        """Delete the topics; the names deleted. Raises like create_topics."""
        request = pb.DeleteTopicsRequest(
            names=list(topics),
            timeout_ms=self._timeout_ms(timeout_ms),
        )
        response: pb.DeleteTopicsResponse = self._rpc(
            "DeleteTopics", request, lambda r: [t.error_code for t in r.topics]
        )
        return self._names_done(response.topics, list(topics))

    def _names_done(self, results: Iterable[Any], asked: list[str]) -> list[str]:
        """Per-topic results (name, error_code, error_message) of a batch call: the
        names that succeeded; raises like create_topics if any failed."""
        done: dict[str, str] = {}
        errors: dict[str, KafkaError] = {}
        for r in results:
            if r.error_code:
                errors[r.name] = topic_error(r.name, r.error_code, r.error_message)
            else:
                done[r.name] = r.name
        self._metadata.request_update()
        raise_batch(errors, done, asked)
        return list(done)

    def list_topics(self) -> list[str]:
        """Every topic name, sorted."""
        response = self._retrying(lambda _t: self._metadata.refresh(None))
        return sorted(t.name for t in response.topics if not t.error_code)

    def describe_topics(
        self, topics: Sequence[str] | None = None, *, allow_auto_topic_creation: bool = False
    ) -> list[TopicDescription]:
        """Descriptions of the named topics (all when None), in the order asked
        (sorted by name for all); an unknown topic raises UnknownTopicOrPartitionError.
        `allow_auto_topic_creation`: let the node create missing topics as a
        producer's metadata request would (when auto.create.topics.enable)."""
        names = None if topics is None else list(topics)
        if names is not None and not names:
            return []
        response = self._retrying(
            lambda _t: self._metadata.refresh(names, allow_auto_topic_creation)
        )
        by_name = {t.name: t for t in response.topics}
        out = []
        for name in names if names is not None else sorted(by_name):
            t = by_name.get(name)
            if t is None:
                raise error_class("UNKNOWN_TOPIC_OR_PARTITION")(f"topic {name!r} does not exist")
            if t.error_code:
                raise topic_error(name, t.error_code, t.error_message)
            out.append(
                TopicDescription(
                    name=t.name,
                    topic_id=t.topic_id,
                    partitions=tuple(
                        PartitionDescription(
                            partition=p.partition,
                            leader=p.leader_id,
                            leader_epoch=p.leader_epoch,
                            replicas=tuple(p.replica_nodes),
                            isr=tuple(p.isr_nodes),
                            offline_replicas=tuple(p.offline_replicas),
                        )
                        for p in sorted(t.partitions, key=lambda p: p.partition)
                    ),
                    is_internal=t.name.startswith("__"),
                )
            )
        return out

    def describe_cluster(self) -> ClusterDescription:
        response = self._retrying(lambda _t: self._metadata.refresh([]))
        return ClusterDescription(
            cluster_id=response.cluster_id,
            controller_id=response.controller_id,
            brokers=tuple(
                BrokerDescription(b.node_id, b.host, b.port, b.fenced) for b in response.brokers
            ),
        )
