"""The gRPC Controller service: Raft messages into the quorum, and the KRaft
broker-to-controller calls answered by the active controller."""

from __future__ import annotations

import grpc

from seglog.proto import cluster_pb2 as cpb
from seglog.proto import cluster_pb2_grpc
from seglog.replication.cluster_control import ControlError

from .quorum_controller import QuorumController
from .raft_transport import from_proto
from .servicer import code


class ControllerServicer(cluster_pb2_grpc.ControllerServicer):
    def __init__(self, controller: QuorumController, cluster_id: str) -> None:
        self.controller = controller
        self.cluster_id = cluster_id

    def Raft(self, request: cpb.RaftMessage, context: grpc.ServicerContext) -> cpb.RaftAck:  # noqa: N802
        if request.dst == self.controller.node_id:
            self.controller.deliver(from_proto(request))
        return cpb.RaftAck()

    def RegisterBroker(  # noqa: N802
        self, request: cpb.RegisterBrokerRequest, context: grpc.ServicerContext
    ) -> cpb.RegisterBrokerResponse:
        if request.cluster_id and request.cluster_id != self.cluster_id:
            return cpb.RegisterBrokerResponse(
                error_code=code("INVALID_REQUEST"),
                error_message=f"cluster id {request.cluster_id} is not {self.cluster_id}",
            )
        try:
            epoch = self.controller.register_broker(
                request.broker_id, request.host, request.port, request.listeners
            )
            return cpb.RegisterBrokerResponse(broker_epoch=epoch)
        except ControlError as e:
            return cpb.RegisterBrokerResponse(error_code=code(e.error_name), error_message=str(e))

    def BrokerHeartbeat(  # noqa: N802
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
            return cpb.BrokerHeartbeatResponse(error_code=code(e.error_name), error_message=str(e))

    def AlterPartition(  # noqa: N802
        self, request: cpb.AlterPartitionRequest, context: grpc.ServicerContext
    ) -> cpb.AlterPartitionResponse:
        try:
            self.controller.alter_partition(
                request.broker_id,
                request.topic,
                request.partition,
                request.leader_epoch,
                request.partition_epoch,
                tuple(request.new_isr),
            )
            error, message = "NONE", ""
        except ControlError as e:
            error, message = e.error_name, str(e)
        state = self.controller.image.partition(request.topic, request.partition)
        response = cpb.AlterPartitionResponse(error_code=code(error), error_message=message)
        if state is not None:
            response.leader_id = state.leader
            response.leader_epoch = state.leader_epoch
            response.partition_epoch = state.partition_epoch
            response.isr.extend(state.isr)
        return response

    def AllocateProducerIds(  # noqa: N802
        self, request: cpb.AllocateProducerIdsRequest, context: grpc.ServicerContext
    ) -> cpb.AllocateProducerIdsResponse:
        try:
            first, end = self.controller.allocate_producer_ids(
                request.broker_id, request.broker_epoch
            )
            return cpb.AllocateProducerIdsResponse(first_producer_id=first, end_producer_id=end)
        except ControlError as e:
            return cpb.AllocateProducerIdsResponse(
                error_code=code(e.error_name), error_message=str(e)
            )

    def DescribeQuorum(  # noqa: N802
        self, request: cpb.DescribeQuorumRequest, context: grpc.ServicerContext
    ) -> cpb.DescribeQuorumResponse:
        d = self.controller.describe()
        return cpb.DescribeQuorumResponse(
            node_id=int(d["node_id"]),  # type: ignore[call-overload]
            leader_id=int(d["leader_id"]),  # type: ignore[call-overload]
            term=int(d["term"]),  # type: ignore[call-overload]
            commit_index=int(d["commit_index"]),  # type: ignore[call-overload]
            role=str(d["role"]),
        )
