"""The gRPC Controller service: Raft messages into the quorum, and the KRaft
broker-to-controller calls answered by the active controller."""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Iterator

import grpc

from seglog.controller.cluster_control import ControlError
from seglog.controller.metadata_image import MetadataImage
from seglog.controller.metadata_records import MetadataRecord, encode_record
from seglog.node.admin_answers import answer_election, answer_reassignments
from seglog.node.controller.controller_requests import IsrChange
from seglog.node.controller.quorum_controller import QuorumController
from seglog.node.controller.raft_transport import from_proto
from seglog.node.event_log import EventLogger
from seglog.node.grpc_errors import code, refused
from seglog.proto import client_pb2 as pb
from seglog.proto import cluster_pb2 as cpb
from seglog.proto import cluster_pb2_grpc
from seglog.storage.errors import InvalidConfigError

_log = EventLogger("controller")
# Updates a watching broker may fall behind by before its stream is ended (it then
# reconnects and starts again from a snapshot): the queue never grows past this.
WATCH_QUEUE_LIMIT = 10_000
WATCH_IDLE_S = 1.0  # how often an idle watch checks that its broker is still there


class ControllerServicer(cluster_pb2_grpc.ControllerServicer):
    def __init__(
        self,
        controller: QuorumController,
        cluster_id: str,
        on_broker_applied: Callable[[int, int], None] = lambda _b, _o: None,
    ) -> None:
        self.controller = controller
        self.cluster_id = cluster_id
        self.on_broker_applied = on_broker_applied
        self._ending = threading.Event()
        self._watches: set[queue.Queue[cpb.MetadataUpdate | None]] = set()
        self._raft_streams: set[grpc.ServicerContext] = set()
        self._watches_lock = threading.Lock()  # and the Raft streams

    def end_watches(self) -> None:
        """End every metadata watch and peer's Raft stream now (the controller is
        stopping): an idle one would otherwise hold the listener's graceful stop for
        its whole grace."""
        with self._watches_lock:
            self._ending.set()
            for updates in self._watches:
                with contextlib.suppress(queue.Full):  # full: it looks at _ending next
                    updates.put_nowait(None)
            for stream in self._raft_streams:
                stream.cancel()

    def Raft(self, request: cpb.RaftMessage, context: grpc.ServicerContext) -> cpb.RaftAck:
        if request.dst == self.controller.node_id:
            self.controller.deliver(from_proto(request))
        return cpb.RaftAck()

    def RaftStream(
        self, request_iterator: Iterator[cpb.RaftMessage], context: grpc.ServicerContext
    ) -> cpb.RaftAck:
        """A peer's messages, until it ends the stream or this controller stops (it
        would otherwise hold the listener's graceful stop for its whole grace)."""
        with self._watches_lock:
            if self._ending.is_set():
                context.abort(grpc.StatusCode.UNAVAILABLE, "the controller is stopping")
            self._raft_streams.add(context)
        try:
            for message in request_iterator:
                if message.dst == self.controller.node_id:
                    self.controller.deliver(from_proto(message))
        except grpc.RpcError:
            pass  # the peer went, or end_watches cancelled the stream
        finally:
            with self._watches_lock:
                self._raft_streams.discard(context)
        return cpb.RaftAck()

    def RegisterBroker(
        self, request: cpb.RegisterBrokerRequest, context: grpc.ServicerContext
    ) -> cpb.RegisterBrokerResponse:
        if request.cluster_id and request.cluster_id != self.cluster_id:
            return cpb.RegisterBrokerResponse(
                error_code=code("INVALID_REQUEST"),
                error_message=f"cluster id {request.cluster_id} is not {self.cluster_id}",
            )
        try:
            epoch = self.controller.register_broker(
                request.broker_id,
                request.host,
                request.port,
                tuple((e.name, e.host, e.port) for e in request.endpoints),
            )
            return cpb.RegisterBrokerResponse(broker_epoch=epoch)
        except ControlError as e:
            return cpb.RegisterBrokerResponse(**refused(e))

    def BrokerHeartbeat(
        self, request: cpb.BrokerHeartbeatRequest, context: grpc.ServicerContext
    ) -> cpb.BrokerHeartbeatResponse:
        try:
            fenced = self.controller.heartbeat(
                request.broker_id,
                request.broker_epoch,
                request.metadata_offset,
                request.want_shutdown,
            )
            return cpb.BrokerHeartbeatResponse(fenced=fenced)
        except ControlError as e:
            return cpb.BrokerHeartbeatResponse(**refused(e))

    def AlterPartition(
        self, request: cpb.AlterPartitionRequest, context: grpc.ServicerContext
    ) -> cpb.AlterPartitionResponse:
        remaining = context.time_remaining()
        if remaining is not None and remaining <= 0:
            # The broker gave up on this request while it queued: doing it now is work
            # nobody waits for (its changes come again in the broker's next request).
            return cpb.AlterPartitionResponse(
                error_code=code("REQUEST_TIMED_OUT"), error_message="deadline passed in queue"
            )
        changes = [
            IsrChange(
                i.topic,
                i.partition,
                i.leader_epoch,
                i.partition_epoch,
                tuple(i.new_isr),
                tuple(i.new_isr_broker_epochs),
            )
            for i in request.items
        ]
        try:
            answers = self.controller.alter_partitions(
                request.broker_id, request.broker_epoch, changes
            )
        except ControlError as e:
            return cpb.AlterPartitionResponse(**refused(e))
        response = cpb.AlterPartitionResponse()
        image = self.controller.image
        for change, (error, message) in zip(changes, answers, strict=True):
            result = response.results.add(
                topic=change.topic,
                partition=change.partition,
                error_code=code(error),
                error_message=message,
            )
            state = image.partition(change.topic, change.partition)
            if state is not None:
                result.leader_id = state.leader
                result.leader_epoch = state.leader_epoch
                result.partition_epoch = state.partition_epoch
                result.isr.extend(state.isr)
        return response

    # --- admin changes a broker forwards --------------------------------------------

    def CreateTopic(
        self, request: cpb.CreateTopicRequest, context: grpc.ServicerContext
    ) -> cpb.ControlResponse:
        return self._control(
            lambda: self.controller.create_topic(
                request.name,
                request.num_partitions,
                request.replication_factor,
                dict(request.configs),
                request.validate_only,
                [(a.partition, tuple(a.replicas)) for a in request.assignments],
            )
        )

    def DeleteTopic(
        self, request: cpb.DeleteTopicRequest, context: grpc.ServicerContext
    ) -> cpb.ControlResponse:
        return self._control(lambda: self.controller.delete_topic(request.name))

    def CreatePartitions(
        self, request: cpb.CreatePartitionsRequest, context: grpc.ServicerContext
    ) -> cpb.ControlResponse:
        return self._control(
            lambda: self.controller.create_partitions(
                request.name,
                request.total_count,
                request.validate_only,
                [tuple(a.replicas) for a in request.assignments] if request.manual else None,
            )
        )

    def ElectLeaders(
        self, request: cpb.ElectLeadersControlRequest, context: grpc.ServicerContext
    ) -> cpb.ElectLeadersControlResponse:
        wanted = (
            None if request.all_partitions else [(p.topic, p.partition) for p in request.partitions]
        )
        return answer_election(
            lambda: self.controller.elect_leaders(request.election_type, wanted),
            cpb.ElectLeadersControlResponse,
            cpb.ElectionPartition,
        )

    def AlterPartitionReassignments(
        self, request: pb.AlterPartitionReassignmentsRequest, context: grpc.ServicerContext
    ) -> pb.AlterPartitionReassignmentsResponse:
        return answer_reassignments(request, self.controller.alter_partition_reassignments)

    def AlterTopicConfigs(
        self, request: cpb.AlterTopicConfigsRequest, context: grpc.ServicerContext
    ) -> cpb.ControlResponse:
        changes: dict[str, str | None] = dict(request.set)
        changes.update({name: None for name in request.delete})
        if request.broker_resource:
            return self._control(
                lambda: self.controller.alter_broker_configs(
                    request.topic, changes, request.validate_only
                )
            )
        return self._control(
            lambda: self.controller.alter_configs(request.topic, changes, request.validate_only)
        )

    def _control(self, op: Callable[[], object]) -> cpb.ControlResponse:
        try:
            result = op()
        except ControlError as e:
            return cpb.ControlResponse(**refused(e))
        except InvalidConfigError as e:
            return cpb.ControlResponse(error_code=code("INVALID_CONFIG"), error_message=str(e))
        return cpb.ControlResponse(topic_id=result if isinstance(result, str) else "")

    # --- the co-located broker's metadata ---------------------------------------------

    def WatchMetadata(
        self, request_iterator: Iterator[cpb.MetadataApplied], context: grpc.ServicerContext
    ) -> Iterator[cpb.MetadataUpdate]:
        updates: queue.Queue[cpb.MetadataUpdate | None] = queue.Queue(WATCH_QUEUE_LIMIT)
        overflow = threading.Event()

        def listener(image: MetadataImage, records: list[MetadataRecord]) -> None:
            # On the Raft thread: encode and queue, never block.
            snapshot = not records
            rs = image.to_records() if snapshot else records
            update = cpb.MetadataUpdate(
                offset=self.controller.metadata_offset,
                snapshot=snapshot,
                records=[encode_record(r) for r in rs],
            )
            try:
                updates.put_nowait(update)
            except queue.Full:
                overflow.set()

        def acks() -> None:
            try:
                for applied in request_iterator:
                    self.on_broker_applied(applied.broker_id, applied.offset)
            except grpc.RpcError:
                pass  # the stream ended

        threading.Thread(target=acks, name="metadata-acks", daemon=True).start()
        with self._watches_lock:
            self._watches.add(updates)
        self.controller.add_listener(listener)
        try:
            while context.is_active() and not self._ending.is_set():
                if overflow.is_set():
                    _log.warning("metadata_watch_overflow", limit=WATCH_QUEUE_LIMIT)
                    context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "metadata watch fell behind")
                try:
                    update = updates.get(timeout=WATCH_IDLE_S)
                except queue.Empty:
                    continue
                if update is None:
                    return  # end_watches
                yield update
        finally:
            self.controller.remove_listener(listener)
            with self._watches_lock:
                self._watches.discard(updates)

    def AllocateProducerIds(
        self, request: cpb.AllocateProducerIdsRequest, context: grpc.ServicerContext
    ) -> cpb.AllocateProducerIdsResponse:
        try:
            first, end = self.controller.allocate_producer_ids(
                request.broker_id, request.broker_epoch
            )
            return cpb.AllocateProducerIdsResponse(first_producer_id=first, end_producer_id=end)
        except ControlError as e:
            return cpb.AllocateProducerIdsResponse(**refused(e))

    def DescribeQuorum(
        self, request: cpb.DescribeQuorumRequest, context: grpc.ServicerContext
    ) -> cpb.DescribeQuorumResponse:
        d = self.controller.describe()
        return cpb.DescribeQuorumResponse(
            node_id=int(d["node_id"]),  # type: ignore[call-overload]
            leader_id=int(d["leader_id"]),  # type: ignore[call-overload]
            term=int(d["term"]),  # type: ignore[call-overload]
            commit_index=int(d["commit_index"]),  # type: ignore[call-overload]
            published_offset=int(d["published_offset"]),  # type: ignore[call-overload]
            role=str(d["role"]),
            voters=[
                cpb.QuorumVoter(
                    node_id=v,
                    log_end_index=end,
                    last_fetch_timestamp_ms=fetched,
                    last_caught_up_timestamp_ms=caught_up,
                )
                for v, end, fetched, caught_up in d["voters"]  # type: ignore[attr-defined]
            ],
        )
