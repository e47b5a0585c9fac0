"""The gRPC SegLog service: turns protobuf requests into calls on the replica
manager and the controller, and their results back into responses. No logic
of its own beyond request shape checks."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import grpc

from seglog.controller.cluster_control import DYNAMIC_BROKER_CONFIGS, ControlError
from seglog.proto import client_pb2 as pb
from seglog.proto import client_pb2_grpc
from seglog.storage.disk_and_clock import plain_perf_s
from seglog.storage.errors import InvalidConfigError

from . import request_timing
from .admin_answers import answer_election, answer_reassignments
from .event_log import EventLogger
from .fetch_session import FetchSessionError
from .groups.offsets_records import OFFSETS_TOPIC
from .grpc_errors import E, code, refused
from .kafka.read_committed import READ_COMMITTED, last_stable_offset
from .node_services import NodeServices
from .partition_requests import FetchSpec, ProduceResult
from .transactions.grpc_servicer import init_transactional_producer
from .transactions.txn_verification import produce_error
from .transactions.verification_sender import Verification, start_verification

_log = EventLogger("servicer")


def config_results(
    resources: Iterable[Any], results: Any, action: str
) -> Iterator[tuple[Any, Any]]:
    """Each TOPIC or BROKER resource with its result entry; any other type is
    answered INVALID_REQUEST here ("only TOPIC and BROKER config resources `action`")."""
    for resource in resources:
        result = results.add(type=resource.type, name=resource.name)
        if resource.type not in (pb.TOPIC, pb.BROKER):
            result.error_code = E.INVALID_REQUEST
            result.error_message = f"only TOPIC and BROKER config resources {action}"
            continue
        yield resource, result


def answer_partitions(
    topics: Iterable[Any], response_topics: Any, answer: Callable[[str, Any], dict[str, Any]]
) -> None:
    """Each requested partition's entry in the response, under its topic's, with the
    fields `answer(topic, partition)` gives (called in request order)."""
    for t in topics:
        tr = response_topics.add(name=t.name)
        for p in t.partitions:
            tr.partitions.add(partition=p.partition, **answer(t.name, p))


class SegLogServicer(client_pb2_grpc.SegLogServicer):
    def __init__(self, node: NodeServices) -> None:
        self.node = node

    # --- metadata ------------------------------------------------------------------

    def Metadata(
        self, request: pb.MetadataRequest, context: grpc.ServicerContext
    ) -> pb.MetadataResponse:
        image = self.node.metadata_image()
        response = pb.MetadataResponse(
            cluster_id=self.node.cluster_id, controller_id=self.node.controller_id()
        )
        # In doubt of its leadership (its controller process silent for a session), this
        # broker is fenced by now and its image stale: as the Kafka listener answers
        # (node/kafka/metadata.py), it names itself neither live nor a leader.
        doubted = self.node.replica_manager.in_doubt() is not None
        me = self.node.node_id

        def down(broker_id: int) -> bool:  # the image as it is when asked (auto-create)
            b = image.brokers.get(broker_id)
            return b is None or b.fenced or (doubted and broker_id == me)

        for b in sorted(image.brokers.values(), key=lambda b: b.broker_id):
            response.brokers.add(
                node_id=b.broker_id, host=b.host, port=b.port, fenced=down(b.broker_id)
            )
        names = sorted(image.topics) if request.all_topics else list(request.topics)
        for name in names:
            topic = image.topics.get(name)
            if (
                topic is None
                and request.allow_auto_topic_creation
                and self.node.auto_create_topics_enable
            ):
                try:
                    self.node.create_topic(
                        name,
                        self.node.num_partitions,
                        self.node.default_replication_factor,
                        {},
                        False,
                    )
                except ControlError as e:
                    if e.error_name != "TOPIC_ALREADY_EXISTS":
                        response.topics.add(name=name, **refused(e))
                        continue
                image = self.node.metadata_image()
                topic = image.topics.get(name)
            if topic is None:
                response.topics.add(
                    name=name,
                    error_code=E.UNKNOWN_TOPIC_OR_PARTITION,
                    error_message=f"topic {name!r} does not exist",
                )
                continue
            t = response.topics.add(name=name, topic_id=topic.topic_id)
            for p, state in sorted(topic.partitions.items()):
                t.partitions.add(
                    partition=p,
                    leader_id=-1 if doubted and state.leader == me else state.leader,
                    leader_epoch=state.leader_epoch,
                    replica_nodes=state.replicas,
                    isr_nodes=state.isr,
                    partition_epoch=state.partition_epoch,
                    offline_replicas=[r for r in state.replicas if down(r)],
                )
        return response

    # --- admin ---------------------------------------------------------------------

    def CreateTopics(
        self, request: pb.CreateTopicsRequest, context: grpc.ServicerContext
    ) -> pb.CreateTopicsResponse:
        response = pb.CreateTopicsResponse()
        for t in request.topics:
            partitions = t.num_partitions if t.num_partitions != -1 else self.node.num_partitions
            rf = t.replication_factor
            if rf == -1:
                rf = self.node.default_replication_factor
            try:
                topic_id = self.node.create_topic(
                    t.name, partitions, rf, dict(t.configs), request.validate_only
                )
                response.topics.add(
                    name=t.name, topic_id=topic_id, num_partitions=partitions, replication_factor=rf
                )
            except ControlError as e:
                response.topics.add(name=t.name, **refused(e))
        return response

    def CreatePartitions(
        self, request: pb.CreateTopicPartitionsRequest, context: grpc.ServicerContext
    ) -> pb.CreateTopicPartitionsResponse:
        response = pb.CreateTopicPartitionsResponse()
        for t in request.topics:
            try:
                self.node.create_partitions(t.name, t.count, request.validate_only)
                response.results.add(name=t.name)
            except ControlError as e:
                response.results.add(name=t.name, **refused(e))
        return response

    def AlterPartitionReassignments(
        self, request: pb.AlterPartitionReassignmentsRequest, context: grpc.ServicerContext
    ) -> pb.AlterPartitionReassignmentsResponse:
        return answer_reassignments(request, self.node.alter_partition_reassignments)

    def ListPartitionReassignments(
        self, request: pb.ListPartitionReassignmentsRequest, context: grpc.ServicerContext
    ) -> pb.ListPartitionReassignmentsResponse:
        wanted = (
            None if request.all_partitions else [(r.topic, r.partition) for r in request.partitions]
        )
        return pb.ListPartitionReassignmentsResponse(
            reassignments=[
                pb.PartitionReassignment(
                    topic=r.topic,
                    partition=r.partition,
                    replicas=r.replicas,
                    adding_replicas=r.adding_replicas,
                    removing_replicas=r.removing_replicas,
                )
                for r in self.node.list_partition_reassignments(wanted)
            ]
        )

    def ElectLeaders(
        self, request: pb.ElectLeadersRequest, context: grpc.ServicerContext
    ) -> pb.ElectLeadersResponse:
        wanted = (
            [(t.topic, p) for t in request.topics for p in t.partitions] if request.topics else None
        )
        return answer_election(
            lambda: self.node.elect_leaders(request.election_type, wanted),
            pb.ElectLeadersResponse,
            pb.ElectLeadersResult,
        )

    def DeleteTopics(
        self, request: pb.DeleteTopicsRequest, context: grpc.ServicerContext
    ) -> pb.DeleteTopicsResponse:
        response = pb.DeleteTopicsResponse()
        for name in request.names:
            try:
                self.node.delete_topic(name)
                response.topics.add(name=name)
            except ControlError as e:
                response.topics.add(name=name, **refused(e))
        return response

    def DescribeConfigs(
        self, request: pb.DescribeConfigsRequest, context: grpc.ServicerContext
    ) -> pb.DescribeConfigsResponse:
        response = pb.DescribeConfigsResponse()
        for resource, result in config_results(
            request.resources, response.results, "are supported"
        ):
            try:
                entries = (
                    self.node.describe_topic_config(resource.name)
                    if resource.type == pb.TOPIC
                    else self.node.describe_broker_config(resource.name)
                )
            except ControlError as e:
                result.error_code, result.error_message = code(e.error_name), str(e)
                continue
            wanted = set(resource.config_names)
            for name, value, source in entries:
                if wanted and name not in wanted:
                    continue
                result.configs.add(
                    name=name,
                    value=value,
                    source=source,
                    is_default=source == 5,
                    read_only=resource.type == pb.BROKER and name not in DYNAMIC_BROKER_CONFIGS,
                )
        return response

    def AlterConfigs(
        self, request: pb.AlterConfigsRequest, context: grpc.ServicerContext
    ) -> pb.AlterConfigsResponse:
        response = pb.AlterConfigsResponse()
        for resource, result in config_results(
            request.resources, response.results, "can be altered"
        ):
            changes: dict[str, str | None] = {
                c.name: (None if c.op == pb.DELETE else c.value) for c in resource.configs
            }
            try:
                if resource.type == pb.BROKER:
                    self.node.alter_broker_configs(resource.name, changes, request.validate_only)
                else:
                    self.node.alter_configs(resource.name, changes, request.validate_only)
            except ControlError as e:
                result.error_code, result.error_message = code(e.error_name), str(e)
            except InvalidConfigError as e:
                result.error_code, result.error_message = E.INVALID_CONFIG, str(e)
        return response

    # --- data ----------------------------------------------------------------------

    def Produce(
        self, request: pb.ProduceRequest, context: grpc.ServicerContext
    ) -> pb.ProduceResponse:
        response = pb.ProduceResponse()
        if request.acks not in (-1, 0, 1):
            refused = {
                "error_code": E.INVALID_REQUIRED_ACKS,
                "error_message": f"acks must be -1, 0 or 1, got {request.acks}",
            }
            answer_partitions(request.topics, response.topics, lambda _t, _p: refused)
            return response
        # Only the group coordinator writes the internal offsets topic (Kafka's rule).
        items = [
            ((t.name, p.partition), p.records)
            for t in request.topics
            for p in t.partitions
            if t.name != OFFSETS_TOPIC
        ]
        rm = self.node.replica_manager
        timeout = request.timeout_ms or 30_000
        verification = self._verify(request.transactional_id, items, timeout)
        unverified = verification.errors
        todo = [(tp, data) for tp, data in items if tp not in unverified]
        started = rm.start_produce_all(
            todo, request.acks, timeout, verification_guards=verification.guards
        )
        waiting = plain_perf_s()
        appended = iter(rm.await_produced(started))  # acks=all: the wait for the ISR
        request_timing.add_remote(plain_perf_s() - waiting)
        results = iter(
            [
                ProduceResult(error_name=unverified[tp][0], error_message=unverified[tp][1] or "")
                if tp in unverified
                else next(appended)
                for tp, _data in items
            ]
        )
        internal = ProduceResult(
            error_name="INVALID_TOPIC_EXCEPTION",
            error_message=f"{OFFSETS_TOPIC} is an internal topic: only its coordinators write it",
        )

        def answer(topic: str, p: pb.PartitionProduceData) -> dict[str, Any]:
            result = internal if topic == OFFSETS_TOPIC else next(results)
            if result.error_name != "NONE":
                rm.produce_errors.report(
                    "GRPC", topic, p.partition, result.error_name, result.error_message
                )
            return {
                "error_code": code(result.error_name),
                "error_message": result.error_message,
                "base_offset": result.base_offset,
                "log_append_time_ms": result.log_append_time,
                "log_start_offset": result.log_start_offset,
            }

        answer_partitions(request.topics, response.topics, answer)
        return response

    def _verify(
        self, transactional_id: str, items: list[tuple[tuple[str, int], bytes]], timeout: int
    ) -> Verification:
        """KIP-890: a transactional Produce's partitions where the producer has no
        transaction open yet are verified with its coordinator first (this service's
        thread waits; the sender answers by the deadline)."""
        box: Future[Verification] = Future()
        now = start_verification(
            self.node.txn_verification,
            self.node.replica_manager,
            transactional_id,
            items,
            timeout,
            box.set_result,
        )
        if now is not None:
            return now
        try:
            return box.result(timeout=timeout / 1000 + 5)
        except FutureTimeout:
            return Verification({tp: produce_error("NETWORK_EXCEPTION") for tp, _ in items})

    def Fetch(self, request: pb.FetchRequest, context: grpc.ServicerContext) -> pb.FetchResponse:
        specs = [
            FetchSpec(
                t.name,
                p.partition,
                p.fetch_offset,
                p.current_leader_epoch,
                p.partition_max_bytes if p.partition_max_bytes > 0 else 1 << 20,
                p.last_fetched_epoch if request.replica_id >= 0 else -1,
                p.log_start_offset,
                read_committed=request.isolation_level == READ_COMMITTED,
            )
            for t in request.topics
            for p in t.partitions
        ]
        max_bytes = min(
            request.max_bytes if request.max_bytes > 0 else self.node.fetch_max_bytes,
            self.node.fetch_max_bytes,
        )
        # Who fetches, and how long and for how many bytes it waits: either kind of fetch.
        wait: dict[str, Any] = {
            "replica_id": request.replica_id,
            "max_wait_ms": request.max_wait_ms,
            "min_bytes": max(request.min_bytes, 1),
            "max_bytes": max_bytes,
            "replica_epoch": request.replica_epoch,
            "cancelled": lambda: not context.is_active(),
        }
        response = pb.FetchResponse()
        rm = self.node.replica_manager
        if request.replica_id >= 0:
            # Followers fetch in KIP-227 sessions; consumers' fetches are sessionless.
            forgotten = [(t.name, p.partition) for t in request.forgotten for p in t.partitions]
            try:
                response.session_id, results = rm.fetch_in_session(
                    request.session_id, request.session_epoch, specs, forgotten, **wait
                )
            except FetchSessionError as e:
                response.error_code = code(e.error_name)
                return response
        else:
            results = rm.fetch(specs, **wait)
        by_topic: dict[str, pb.FetchTopicResponse] = {}
        for r in results:
            tr = by_topic.get(r.topic)
            if tr is None:
                tr = by_topic[r.topic] = response.topics.add(name=r.topic)
            pr = tr.partitions.add(
                partition=r.partition,
                error_code=code(r.error_name),
                error_message=r.error_message,
                high_watermark=r.high_watermark,
                last_stable_offset=last_stable_offset(r),
                log_start_offset=r.log_start_offset,
                records=r.records,
            )
            if request.isolation_level == READ_COMMITTED:
                for a in r.aborted_transactions or ():
                    pr.aborted_transactions.add(
                        producer_id=a.producer_id, first_offset=a.first_offset
                    )
            pr.current_leader.leader_id, pr.current_leader.leader_epoch = r.leader
            if r.diverging_epoch is not None:
                pr.diverging_epoch.epoch, pr.diverging_epoch.end_offset = r.diverging_epoch
        return response

    def ListOffsets(
        self, request: pb.ListOffsetsRequest, context: grpc.ServicerContext
    ) -> pb.ListOffsetsResponse:
        response = pb.ListOffsetsResponse()
        rm = self.node.replica_manager

        def answer(topic: str, p: pb.ListOffsetsPartition) -> dict[str, Any]:
            r = rm.list_offset(
                (topic, p.partition), p.timestamp, p.current_leader_epoch, request.replica_id,
                read_committed=request.isolation_level == READ_COMMITTED,
            )  # fmt: skip
            return {
                "error_code": code(r.error_name),
                "error_message": r.error_message,
                "timestamp": r.timestamp,
                "offset": r.offset,
                "leader_epoch": r.leader_epoch,
            }

        answer_partitions(request.topics, response.topics, answer)
        return response

    def OffsetsForLeaderEpoch(
        self, request: pb.OffsetsForLeaderEpochRequest, context: grpc.ServicerContext
    ) -> pb.OffsetsForLeaderEpochResponse:
        response = pb.OffsetsForLeaderEpochResponse()
        rm = self.node.replica_manager

        def answer(topic: str, p: pb.OffsetForLeaderPartition) -> dict[str, Any]:
            r = rm.end_offset_for_epoch(
                (topic, p.partition), p.leader_epoch, p.current_leader_epoch
            )
            return {
                "error_code": code(r.error_name),
                "leader_epoch": r.leader_epoch,
                "end_offset": r.offset,
            }

        answer_partitions(request.topics, response.topics, answer)
        return response

    def DescribeReplicas(
        self, request: pb.DescribeReplicasRequest, context: grpc.ServicerContext
    ) -> pb.DescribeReplicasResponse:
        led = self.node.replica_manager.describe_led(set(request.topics))
        return pb.DescribeReplicasResponse(partitions=led)

    def InitProducerId(
        self, request: pb.InitProducerIdRequest, context: grpc.ServicerContext
    ) -> pb.InitProducerIdResponse:
        if request.transactional_id:
            return init_transactional_producer(self.node, request, context)
        return pb.InitProducerIdResponse(producer_id=self.node.next_producer_id(), producer_epoch=0)
