"""The Admin's partition operations: leader elections (KIP-460), replica
reassignments (KIP-455) and offset look-ups (ListOffsets)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from seglog.proto import client_pb2 as pb
from seglog.proto import errors_pb2

from .admin_requests import AdminRequests, StaleLeadership, topic_error
from .admin_types import OffsetResult, PartitionReassignment
from .cluster import TopicPartition, call
from .errors import KafkaError, error_class, for_code


class PartitionAdmin(AdminRequests):
    def perform_leader_election(
        self,
        election_type: int | str,
        topic_partitions: Iterable[TopicPartition] | None = None,
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, str]:
        """KIP-460 (kafka-python's shape; election_type 0 or "preferred", 1 or
        "unclean"); None: every partition that needs one. Per partition the outcome by
        Kafka's error name: NONE (elected), ELECTION_NOT_NEEDED,
        PREFERRED_LEADER_NOT_AVAILABLE, ELIGIBLE_LEADERS_NOT_AVAILABLE,
        UNKNOWN_TOPIC_OR_PARTITION. A request the controller refuses as a whole raises."""
        names = {0: "preferred", 1: "unclean"}
        election = (
            names.get(election_type)
            if isinstance(election_type, int)
            else str(election_type).lower()
        )
        if election not in names.values():
            raise ValueError(
                f"election_type must be preferred (0) or unclean (1), not {election_type!r}"
            )
        by_topic: dict[str, list[int]] = {}
        for tp in topic_partitions or ():
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        if topic_partitions is not None and not by_topic:
            return {}
        request = pb.ElectLeadersRequest(
            election_type=election,
            topics=[pb.ElectLeadersTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
            timeout_ms=self._timeout_ms(timeout_ms),
        )
        response: pb.ElectLeadersResponse = self._rpc(
            "ElectLeaders", request, lambda r: [r.error_code]
        )
        if response.error_code:
            raise for_code(response.error_code, response.error_message or "ElectLeaders failed")
        self._metadata.request_update()
        return {
            TopicPartition(r.topic, r.partition): errors_pb2.ErrorCode.Name(r.error_code)
            for r in response.results
        }

    def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, Sequence[int] | None],
        timeout_ms: int | None = None,
    ) -> dict[TopicPartition, tuple[str, str]]:
        """KIP-455: move each partition to its target replicas (the first is the
        preferred leader), or cancel its running reassignment (None). Per partition
        (Kafka's error name, message): NONE, INVALID_REPLICA_ASSIGNMENT,
        NO_REASSIGNMENT_IN_PROGRESS, UNKNOWN_TOPIC_OR_PARTITION. The moves go on in
        the background; list_partition_reassignments shows the running ones. A
        request the controller refuses as a whole raises."""
        request = pb.AlterPartitionReassignmentsRequest(
            partitions=[
                pb.PartitionReassignment(
                    topic=tp.topic,
                    partition=tp.partition,
                    replicas=() if target is None else list(target),
                    cancel=target is None,
                )
                for tp, target in reassignments.items()
            ],
            timeout_ms=self._timeout_ms(timeout_ms),
        )
        if not request.partitions:
            return {}
        response: pb.AlterPartitionReassignmentsResponse = self._rpc(
            "AlterPartitionReassignments", request, lambda r: [r.error_code]
        )
        if response.error_code:
            raise for_code(
                response.error_code, response.error_message or "AlterPartitionReassignments failed"
            )
        self._metadata.request_update()
        return {
            TopicPartition(r.topic, r.partition): (
                errors_pb2.ErrorCode.Name(r.error_code),
                r.error_message,
            )
            for r in response.results
        }

    def list_partition_reassignments(
        self, topic_partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, PartitionReassignment]:
        """The running reassignments among the partitions (None: all of them)."""
        request = pb.ListPartitionReassignmentsRequest(
            partitions=[
                pb.PartitionReassignment(topic=tp.topic, partition=tp.partition)
                for tp in topic_partitions or ()
            ],
            all_partitions=topic_partitions is None,
        )
        response: pb.ListPartitionReassignmentsResponse = self._rpc(
            "ListPartitionReassignments", request, lambda r: [r.error_code], controller=False
        )
        if response.error_code:
            raise for_code(response.error_code, response.error_message)
        return {
            TopicPartition(r.topic, r.partition): PartitionReassignment(
                tuple(r.replicas), tuple(r.adding_replicas), tuple(r.removing_replicas)
            )
            for r in response.reassignments
        }

    def list_offsets(
        self, specs: Mapping[TopicPartition, int], isolation_level: int = 0
    ) -> dict[TopicPartition, OffsetResult]:
        """Kafka's Admin.listOffsets: per partition a timestamp in ms, or
        LATEST_TIMESTAMP / EARLIEST_TIMESTAMP / MAX_TIMESTAMP. Asks each partition's
        leader; leadership changes are retried until the request timeout."""
        if not specs:
            return {}
        pending = dict(specs)
        out: dict[TopicPartition, OffsetResult] = {}

        def attempt(timeout_s: float) -> None:
            self._metadata.refresh({tp.topic for tp in pending})
            by_leader: dict[int, list[TopicPartition]] = {}
            for tp in pending:
                error = self._metadata.topic_error(tp.topic)
                if error is not None:
                    raise type(error)(*error.args)
                info = self._metadata.partition(tp)
                if info is None:
                    raise error_class("UNKNOWN_TOPIC_OR_PARTITION")(
                        f"partition {tp.topic}-{tp.partition} does not exist"
                    )
                if info.leader < 0:
                    raise StaleLeadership(
                        error_class("LEADER_NOT_AVAILABLE")(
                            f"partition {tp.topic}-{tp.partition} has no leader"
                        )
                    )
                by_leader.setdefault(info.leader, []).append(tp)
            retry: KafkaError | None = None
            for leader, tps in by_leader.items():
                request = pb.ListOffsetsRequest(replica_id=-1, isolation_level=isolation_level)
                for topic in sorted({tp.topic for tp in tps}):
                    t = request.topics.add(name=topic)
                    for tp in tps:
                        if tp.topic == topic:
                            t.partitions.add(
                                partition=tp.partition,
                                current_leader_epoch=-1,
                                timestamp=pending[tp],
                            )
                response = call(self._metadata.stub_for(leader).ListOffsets, request, timeout_s)
                for t in response.topics:
                    for p in t.partitions:
                        tp = TopicPartition(t.name, p.partition)
                        if p.error_code:
                            error = topic_error(t.name, p.error_code, p.error_message)
                            if not error.invalid_metadata:
                                raise error
                            retry = error
                            continue
                        out[tp] = OffsetResult(p.offset, p.timestamp, p.leader_epoch)
                        pending.pop(tp, None)
            if retry is not None:
                raise StaleLeadership(retry)

        self._retrying(attempt)
        return out
