"""ACLs on the gRPC listeners, as a server interceptor: before a SegLog call runs,
each resource it touches is authorized for the caller (the principal of its client
certificate) with the operation Kafka checks for the same request; one refusal fails
the call with PERMISSION_DENIED and Kafka's error name first in the details
(TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED), and nothing is applied.
A Metadata answer lists only the topics the caller may describe. On the controller
listener every call is cluster business: CLUSTER_ACTION on the cluster."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import grpc

from seglog.proto import errors_pb2

from ..event_log import EventLogger
from ..grpc_wrap import WrappingInterceptor, wrap_handler
from .acls import CLUSTER_NAME, AclOperation, ResourceType
from .grpc_auth import grpc_principal
from .node_authorizer import NodeAuthorizer

_log = EventLogger("security")
SEGLOG = "/seglog.v1.SegLog/"
TOPIC, CLUSTER = ResourceType.TOPIC, ResourceType.CLUSTER
Check = tuple[AclOperation, ResourceType, str]
OPEN = ("/grpc.health.v1.Health/",)  # liveness probes need no principal


def _topics(op: AclOperation, names: Iterable[str]) -> list[Check]:
    return [(op, TOPIC, n) for n in dict.fromkeys(names)]


def _cluster(op: AclOperation) -> list[Check]:
    return [(op, CLUSTER, CLUSTER_NAME)]


def _configs(op: AclOperation, resources: Iterable[Any]) -> list[Check]:
    out: list[Check] = []
    for r in resources:
        out += _cluster(op) if r.type == 4 else [(op, TOPIC, r.name)]
    return out


def seglog_checks(method: str, request: Any) -> list[Check]:
    """What a SegLog call needs; [] for none."""
    name = method.removeprefix(SEGLOG)
    replica = getattr(request, "replica_id", -1) >= 0
    if name == "Produce":
        return _topics(AclOperation.WRITE, (t.name for t in request.topics))
    if name == "Fetch":
        if replica:
            return _cluster(AclOperation.CLUSTER_ACTION)
        return _topics(AclOperation.READ, (t.name for t in request.topics))
    if name in ("ListOffsets", "OffsetsForLeaderEpoch"):
        if replica:
            return _cluster(AclOperation.CLUSTER_ACTION)
        return _topics(AclOperation.DESCRIBE, (t.name for t in request.topics))
    if name == "DeleteTopics":
        return _topics(AclOperation.DELETE, request.names)
    if name == "DescribeConfigs":
        return _configs(AclOperation.DESCRIBE_CONFIGS, request.resources)
    if name == "AlterConfigs":
        return _configs(AclOperation.ALTER_CONFIGS, request.resources)
    if name in ("DescribeReplicas", "ListPartitionReassignments"):
        return _cluster(AclOperation.DESCRIBE)
    if name in ("AlterPartitionReassignments", "ElectLeaders"):
        return _cluster(AclOperation.ALTER)
    if name == "CreatePartitions":
        return _topics(AclOperation.ALTER, (t.name for t in request.topics))
    return []


class AuthorizingInterceptor(WrappingInterceptor):
    open_methods = OPEN

    def __init__(self, authorizer: NodeAuthorizer, controller_listener: bool = False) -> None:
        self.authorizer = authorizer
        self.controller_listener = controller_listener

    def intercept(
        self, handler: grpc.RpcMethodHandler, method: str, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        if self.controller_listener:
            cluster_action = _cluster(AclOperation.CLUSTER_ACTION)
            return self._wrap(handler, method, lambda _r, _p, _h: cluster_action)
        if method.startswith(SEGLOG):
            if method.endswith("/Metadata"):
                return self._metadata(handler)
            if method.endswith("/CreateTopics"):
                return self._wrap(handler, method, self._create_topics)
            if method.endswith("/InitProducerId"):
                return self._wrap(handler, method, self._init_producer_id)
            return self._wrap(handler, method, lambda r, _p, _h: seglog_checks(method, r))
        if method.startswith("/seglog.v1.Controller/"):
            return self._wrap(handler, method, lambda _r, _p, _h: _cluster(AclOperation.DESCRIBE))
        return handler  # the Security service checks itself

    # calls whose checks have alternatives -------------------------------------------

    def _create_topics(self, request: Any, principal: str, host: str) -> list[Check]:
        """CREATE on the cluster, else on each topic."""
        if self.authorizer.authorize(principal, host, AclOperation.CREATE, CLUSTER, CLUSTER_NAME):
            return []
        return _topics(AclOperation.CREATE, (t.name for t in request.topics))

    def _init_producer_id(self, request: Any, principal: str, host: str) -> list[Check]:
        """IDEMPOTENT_WRITE on the cluster, or WRITE on some topic."""
        if self.authorizer.allowed_on_any(principal, host, AclOperation.WRITE, TOPIC):
            return []
        return _cluster(AclOperation.IDEMPOTENT_WRITE)  # allowed there, or refused

    # the wrapping -----------------------------------------------------------------------

    def _refuse_unless_allowed(
        self, context: grpc.ServicerContext, checks: list[Check], method: str
    ) -> None:
        principal, host = grpc_principal(context)
        for op, rtype, name in checks:
            if not self.authorizer.authorize(principal, host, op, rtype, name):
                error = f"{rtype.name}_AUTHORIZATION_FAILED"  # TOPIC_ or CLUSTER_
                _log.warning(
                    "grpc_request_refused",
                    principal=principal,
                    address=host,
                    method=method,
                    error=error,
                    resource=name,
                )
                context.abort(
                    grpc.StatusCode.PERMISSION_DENIED,
                    f"{error}: {principal} may not {op.name} {rtype.name} {name}",
                )

    def _wrap(
        self,
        handler: grpc.RpcMethodHandler,
        method: str,
        checks: Callable[[Any, str, str], list[Check]],
    ) -> grpc.RpcMethodHandler:
        @contextmanager
        def checked(request: Any, context: grpc.ServicerContext) -> Iterator[None]:
            principal, host = grpc_principal(context)
            self._refuse_unless_allowed(context, checks(request, principal, host), method)
            yield

        return wrap_handler(handler, checked)

    def _metadata(self, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
        inner = handler.unary_unary
        authorizer = self.authorizer

        def metadata(request: Any, context: grpc.ServicerContext) -> Any:
            principal, host = grpc_principal(context)
            if request.allow_auto_topic_creation and not authorizer.authorize(
                principal, host, AclOperation.CREATE, CLUSTER, CLUSTER_NAME
            ):
                request.allow_auto_topic_creation = False
            response = inner(request, context)
            kept = []
            for t in response.topics:
                if authorizer.authorize(principal, host, AclOperation.DESCRIBE, TOPIC, t.name):
                    kept.append(t)
                elif not request.all_topics:  # named: Kafka's error, not a silent gap
                    t.error_code = errors_pb2.ErrorCode.Value("TOPIC_AUTHORIZATION_FAILED")
                    t.error_message = f"{principal} may not DESCRIBE topic {t.name}"
                    del t.partitions[:]
                    kept.append(t)
            if len(kept) != len(response.topics):
                del response.topics[:]
                response.topics.extend(kept)
            return response

        return grpc.unary_unary_rpc_method_handler(
            metadata, handler.request_deserializer, handler.response_serializer
        )
