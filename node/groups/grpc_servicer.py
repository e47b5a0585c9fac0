"""The gRPC GroupCoordinator service (proto/groups.proto): a thin shell that turns
each request into a call on the node's group coordinator and its answer back into
the response, with Kafka's fields and error codes. The Kafka listener serves the same
coordinator (node/kafka/groups.py)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import grpc

from seglog.proto import groups_pb2 as gpb
from seglog.proto import groups_pb2_grpc

from ..grpc_errors import code
from ..security.acls import AclOperation, ResourceType
from ..security.group_acls import GROUP_DENIED, GuardedGroups
from ..security.grpc_auth import grpc_principal
from .group_errors import NONE
from .group_messages import (
    DescribedGroup,
    JoinRequest,
    JoinResult,
    LeaveResult,
    OffsetDeleteResult,
    OffsetFetchResult,
    Result,
    SyncRequest,
    SyncResult,
)
from .listener_results import (
    ANSWER_TIMEOUT_S,
    SYNC_TIMEOUT_S,
    commit_errors,
    commit_partitions,
    error_of,
    errors_by_topic,
    expected,
    join_timeout_s,
    offsets_by_topic,
    stable_only,
    wait_answer,
)

if TYPE_CHECKING:
    from ..node_services import NodeServices

# Group calls waiting at once on one node's gRPC workers (server.py sizes the pool at
# twice this at least), so that the rest stay free for fetches and produces.
MAX_WAITING_CALLS = 32


def _peer_host(context: grpc.ServicerContext) -> str:
    peer = context.peer() or ""  # "ipv4:127.0.0.1:5555"
    kind, _, rest = peer.partition(":")
    host = rest.rpartition(":")[0] if kind in ("ipv4", "ipv6") else rest
    return "/" + host.strip("[]")


class GroupCoordinatorServicer(groups_pb2_grpc.GroupCoordinatorServicer):
    def __init__(self, node: NodeServices) -> None:
        self.node = node
        self.slots = threading.BoundedSemaphore(MAX_WAITING_CALLS)

    def _groups(self, context: grpc.ServicerContext) -> Any:
        """The coordinator, behind Kafka's group ACLs for this caller when an
        authorizer is on (node/security/group_acls.py)."""
        authorizer = self.node.authorizer
        if authorizer is None:
            return self.node.groups
        principal, host = grpc_principal(context)
        return GuardedGroups(
            self.node.groups,
            lambda op, rtype, name: authorizer.authorize(principal, host, op, rtype, name),
        )

    def _wait(
        self,
        context: grpc.ServicerContext,
        submit: Callable[[], Future[Result]],
        timeout: float = ANSWER_TIMEOUT_S,
    ) -> Result:
        """Submit to the coordinator and wait for its answer on this gRPC worker, at
        most MAX_WAITING_CALLS at once: a commit waits for replication, and workers all
        waiting would leave none for the follower fetches that replication needs.
        Beyond the bound the call is refused with RESOURCE_EXHAUSTED, which seglog's
        clients retry after a backoff (as for queued.max.requests)."""
        if not self.slots.acquire(blocking=False):
            context.abort(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{MAX_WAITING_CALLS} group calls already wait on this node; retry",
            )
        try:
            return wait_answer(submit(), timeout)
        finally:
            self.slots.release()

    def FindCoordinator(
        self, request: gpb.FindCoordinatorRequest, context: grpc.ServicerContext
    ) -> gpb.FindCoordinatorResponse:
        if request.key_type not in (0, 1):
            return gpb.FindCoordinatorResponse(
                error_code=code("INVALID_REQUEST"),
                error_message=f"key type {request.key_type} is not served (0 group, 1 transaction)",
                node_id=-1,
            )
        txn = request.key_type == 1
        if not request.key:
            return gpb.FindCoordinatorResponse(
                error_code=code("INVALID_REQUEST" if txn else "INVALID_GROUP_ID"),
                error_message="empty transactional id" if txn else "empty group id",
                node_id=-1,
            )
        rtype = ResourceType.TRANSACTIONAL_ID if txn else ResourceType.GROUP
        authorizer = self.node.authorizer
        if authorizer is not None:
            principal, host = grpc_principal(context)
            if not authorizer.authorize(principal, host, AclOperation.DESCRIBE, rtype, request.key):
                denied = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED" if txn else GROUP_DENIED
                return gpb.FindCoordinatorResponse(
                    error_code=code(denied),
                    error_message=f"{principal} may not DESCRIBE {rtype.name} {request.key}",
                    node_id=-1,
                )
        find = self.node.find_transaction_coordinator if txn else self.node.find_group_coordinator
        error, node_id = find(request.key)
        if error != NONE:
            return gpb.FindCoordinatorResponse(error_code=code(error), node_id=-1)
        broker = self.node.metadata_image().brokers.get(node_id)
        if broker is None:
            return gpb.FindCoordinatorResponse(
                error_code=code("COORDINATOR_NOT_AVAILABLE"), node_id=-1
            )
        return gpb.FindCoordinatorResponse(
            error_code=0, node_id=node_id, host=broker.host, port=broker.port
        )

    def JoinGroup(
        self, request: gpb.JoinGroupRequest, context: grpc.ServicerContext
    ) -> gpb.JoinGroupResponse:
        groups = self._groups(context)
        req = JoinRequest(
            request.group_id,
            request.member_id,
            request.group_instance_id or None,
            request.session_timeout_ms,
            request.rebalance_timeout_ms or request.session_timeout_ms,
            request.protocol_type,
            tuple((p.name, bytes(p.metadata)) for p in request.protocols),
            True,
            request.client_id,
            request.client_host or _peer_host(context),
            supports_skip_assignment=True,  # seglog's clients honour skip_assignment
        )
        timeout = join_timeout_s(self.node.groups.config, req)
        r = expected(
            self._wait(context, lambda: groups.join_group(req), timeout),
            JoinResult,
            lambda error: JoinResult(error, member_id=request.member_id),
        )
        return gpb.JoinGroupResponse(
            error_code=code(r.error),
            generation_id=r.generation,
            protocol_type=r.protocol_type or "",
            protocol_name=r.protocol_name or "",
            leader=r.leader,
            skip_assignment=r.skip_assignment,
            member_id=r.member_id,
            members=[
                gpb.JoinGroupMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id or "",
                    metadata=m.metadata,
                )
                for m in r.members
            ],
        )

    def SyncGroup(
        self, request: gpb.SyncGroupRequest, context: grpc.ServicerContext
    ) -> gpb.SyncGroupResponse:
        groups = self._groups(context)
        req = SyncRequest(
            request.group_id,
            request.generation_id,
            request.member_id,
            request.group_instance_id or None,
            request.protocol_type or None,
            request.protocol_name or None,
            tuple((a.member_id, bytes(a.assignment)) for a in request.assignments),
        )
        r = expected(
            self._wait(context, lambda: groups.sync_group(req), SYNC_TIMEOUT_S),
            SyncResult,
            SyncResult,
        )
        return gpb.SyncGroupResponse(
            error_code=code(r.error),
            protocol_type=r.protocol_type or "",
            protocol_name=r.protocol_name or "",
            assignment=r.assignment,
        )

    def Heartbeat(
        self, request: gpb.HeartbeatRequest, context: grpc.ServicerContext
    ) -> gpb.HeartbeatResponse:
        groups = self._groups(context)
        r = self._wait(
            context,
            lambda: groups.heartbeat(
                request.group_id,
                request.generation_id,
                request.member_id,
                request.group_instance_id or None,
            ),
        )
        return gpb.HeartbeatResponse(error_code=code(error_of(r)))

    def LeaveGroup(
        self, request: gpb.LeaveGroupRequest, context: grpc.ServicerContext
    ) -> gpb.LeaveGroupResponse:
        groups = self._groups(context)
        members = [(m.member_id, m.group_instance_id or None) for m in request.members]
        r = expected(
            self._wait(context, lambda: groups.leave_group(request.group_id, members)),
            LeaveResult,
            LeaveResult,
        )
        return gpb.LeaveGroupResponse(
            error_code=code(r.error),
            members=[
                gpb.LeaveGroupMemberResponse(
                    member_id=m, group_instance_id=i or "", error_code=code(e)
                )
                for m, i, e in r.members
            ],
        )

    def OffsetCommit(
        self, request: gpb.OffsetCommitRequest, context: grpc.ServicerContext
    ) -> gpb.OffsetCommitResponse:
        groups = self._groups(context)
        partitions = commit_partitions(request.topics)
        r = self._wait(
            context,
            lambda: groups.offset_commit(
                request.group_id,
                request.generation_id,
                request.member_id,
                request.group_instance_id or None,
                partitions,
            ),
        )
        errors = commit_errors(r, partitions)
        response = gpb.OffsetCommitResponse()
        for t in request.topics:
            topic = response.topics.add(name=t.name)
            for p in t.partitions:
                topic.partitions.add(
                    partition_index=p.partition_index,
                    error_code=code(errors.get((t.name, p.partition_index), NONE)),
                )
        return response

    def OffsetFetch(
        self, request: gpb.OffsetFetchRequest, context: grpc.ServicerContext
    ) -> gpb.OffsetFetchResponse:
        groups = self._groups(context)
        wanted = (
            None
            if request.all_topics
            else [(t.name, p) for t in request.topics for p in t.partition_indexes]
        )
        r = expected(
            self._wait(context, lambda: groups.offset_fetch(request.group_id, wanted)),
            OffsetFetchResult,
            OffsetFetchResult,
        )
        if request.require_stable:
            r = stable_only(r, self.node.groups.pending_txn_offsets(request.group_id))
        response = gpb.OffsetFetchResponse(error_code=code(r.error))
        for name, offsets in offsets_by_topic(r):
            topic = response.topics.add(name=name)
            for f in offsets:
                topic.partitions.add(
                    partition_index=f.partition,
                    committed_offset=f.offset,
                    committed_leader_epoch=f.leader_epoch,
                    metadata=f.metadata,
                    error_code=code(f.error),
                )
        return response

    def ListGroups(
        self, request: gpb.ListGroupsRequest, context: grpc.ServicerContext
    ) -> gpb.ListGroupsResponse:
        error, listed = self._groups(context).list_groups(set(request.states_filter))
        return gpb.ListGroupsResponse(
            error_code=code(error),
            groups=[
                gpb.ListedGroup(
                    group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state
                )
                for g in listed
            ],
        )

    def DescribeGroups(
        self, request: gpb.DescribeGroupsRequest, context: grpc.ServicerContext
    ) -> gpb.DescribeGroupsResponse:
        groups = self._groups(context)
        response = gpb.DescribeGroupsResponse()
        for group_id in request.groups:
            r = self._wait(context, lambda g=group_id: groups.describe_group(g))
            if not isinstance(r, DescribedGroup):
                r = DescribedGroup(error_of(r), group_id, "", "", "")
            response.groups.add(
                error_code=code(r.error),
                group_id=group_id,
                group_state=r.state,
                protocol_type=r.protocol_type,
                protocol_data=r.protocol,
                members=[
                    gpb.DescribedGroupMember(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id or "",
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata,
                        member_assignment=m.assignment,
                    )
                    for m in r.members
                ],
            )
        return response

    def DeleteGroups(
        self, request: gpb.DeleteGroupsRequest, context: grpc.ServicerContext
    ) -> gpb.DeleteGroupsResponse:
        groups = self._groups(context)
        response = gpb.DeleteGroupsResponse()
        for group_id in request.groups_names:
            r = self._wait(context, lambda g=group_id: groups.delete_group(g))
            response.results.add(group_id=group_id, error_code=code(error_of(r)))
        return response

    def OffsetDelete(
        self, request: gpb.OffsetDeleteRequest, context: grpc.ServicerContext
    ) -> gpb.OffsetDeleteResponse:
        groups = self._groups(context)
        wanted = [(t.name, p) for t in request.topics for p in t.partition_indexes]
        r = expected(
            self._wait(context, lambda: groups.offset_delete(request.group_id, wanted)),
            OffsetDeleteResult,
            OffsetDeleteResult,
        )
        response = gpb.OffsetDeleteResponse(error_code=code(r.error))
        for name, errors in errors_by_topic(r.errors):
            topic = response.topics.add(name=name)
            for p, e in errors:
                topic.partitions.add(partition_index=p, error_code=code(e))
        return response
