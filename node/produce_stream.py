"""ProduceStream: a producer's Produce requests on one long-lived gRPC call, as they
travel on one Kafka connection. gRPC gives no order between separate calls (the node
runs them on a thread pool), so a producer that sends Produce calls may keep only one
request of a partition in flight; on this call it may keep several and they are still
written in the order sent.

Two threads per call: a reader appends each request's batches as it arrives, in order,
and the call's own thread answers the requests in that same order, each once its
appends are acknowledged (acks=all: once the ISR has them), as a Kafka broker answers a
connection's requests in order. At most queued.max.requests of a call's requests wait
for their answers: past that the reader stops reading and gRPC's flow control holds
the producer back.

Each request is authorized on its own: WRITE on each of its topics (a refused topic's
partitions are answered TOPIC_AUTHORIZATION_FAILED and the others appended, as Kafka
answers a Produce), and a call made with a SASL session token has the token verified
again before each request; once it no longer holds, nothing more is read, the requests
before it are answered, and the call ends UNAUTHENTICATED (the producer logs in again
and knows the unanswered requests were never appended)."""

from __future__ import annotations

import contextvars
import queue
import threading
from collections.abc import Callable, Iterator
from typing import NamedTuple

import grpc

from seglog.proto import client_pb2 as pb
from seglog.storage.disk_and_clock import plain_perf_s

from . import request_timing
from .event_log import EventLogger
from .node_services import NodeServices
from .partition_requests import ProduceResult
from .security.acls import AclOperation, ResourceType
from .security.grpc_auth import TOKEN_METADATA, grpc_principal, peer_host
from .security.session_token import TokenError

_log = EventLogger("produce_stream")
API, LISTENER = "Produce", "GRPC"  # each request counts in the node's Produce metrics


class _Waiting(NamedTuple):
    """A request appended and waiting for its answer."""

    correlation_id: int
    finish: Callable[[], pb.ProduceResponse]
    read_at: float  # plain_perf_s() when it was read
    local_s: float  # its appends


class _End(NamedTuple):
    """No more requests: the producer closed its side, or the call must end."""

    status: grpc.StatusCode | None = None
    details: str = ""


# A Produce request's appends, now, with the refusals of some of its topics; what it
# returns waits for the appends and gives the answer (SegLogServicer.begin_produce).
BeginProduce = Callable[
    [pb.ProduceRequest, dict[str, ProduceResult]], Callable[[], pb.ProduceResponse]
]


def answer_in_order(
    node: NodeServices,
    begin_produce: BeginProduce,
    requests: Iterator[pb.ProduceStreamRequest],
    context: grpc.ServicerContext,
) -> Iterator[pb.ProduceStreamResponse]:
    waiting: queue.Queue[_Waiting | _End] = queue.Queue(maxsize=node.queued_max_requests)
    stop = threading.Event()  # the call ended: the reader appends nothing more
    principal, host = grpc_principal(context)
    token = next((str(v) for k, v in context.invocation_metadata() if k == TOKEN_METADATA), None)

    def still_authenticated() -> str | None:
        """Why the call's session token no longer holds; None while it does."""
        if token is None or node.grpc_sasl is None:
            return None
        try:
            node.grpc_sasl.principal_of(token)
        except TokenError as e:
            return str(e)
        return None

    def refused_topics(request: pb.ProduceRequest) -> dict[str, ProduceResult]:
        authorizer = node.authorizer
        if authorizer is None:
            return {}
        refused = {}
        for name in dict.fromkeys(t.name for t in request.topics):
            if not authorizer.authorize(
                principal, host, AclOperation.WRITE, ResourceType.TOPIC, name
            ):
                error = "TOPIC_AUTHORIZATION_FAILED"
                _log.warning(
                    "grpc_request_refused",
                    principal=principal,
                    address=host,
                    method="ProduceStream",
                    error=error,
                    resource=name,
                )
                refused[name] = ProduceResult(
                    error_name=error,
                    error_message=f"{error}: {principal} may not WRITE TOPIC {name}",
                )
        return refused

    def put(item: _Waiting | _End) -> bool:
        """Queue `item` for the answering thread, waiting while queued.max.requests
        wait; False once the call has ended."""
        while not stop.is_set():
            try:
                waiting.put(item, timeout=0.5)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        end = _End()
        try:
            for message in requests:
                if stop.is_set():
                    return
                expired = still_authenticated()
                if expired is not None:
                    _log.warning(
                        "grpc_authentication_failed",
                        address=peer_host(context.peer()),
                        method="ProduceStream",
                        reason=f"session token: {expired}",
                    )
                    end = _End(
                        grpc.StatusCode.UNAUTHENTICATED, f"SASL_AUTHENTICATION_FAILED: {expired}"
                    )
                    return
                read_at = plain_perf_s()
                finish = begin_produce(message.request, refused_topics(message.request))
                item = _Waiting(message.correlation_id, finish, read_at, plain_perf_s() - read_at)
                if not put(item):
                    return
        except grpc.RpcError:
            return  # the call was cancelled or broke: nobody is left to answer
        except Exception as e:  # noqa: BLE001 - the call ends with the reason
            _log.error("produce_stream_failed", exc=True)
            end = _End(grpc.StatusCode.INTERNAL, f"UNKNOWN_SERVER_ERROR: {e!r}")
        finally:
            put(end)

    # The reader runs in this call's context (the principal of a SASL token).
    reader = threading.Thread(
        target=contextvars.copy_context().run, args=(read,), name="produce-stream", daemon=True
    )
    reader.start()
    try:
        while True:
            item = waiting.get()
            if isinstance(item, _End):
                if item.status is not None:
                    context.abort(item.status, item.details)
                return
            request_timing.begin()
            failed = True
            try:
                response = item.finish()
                failed = False
            finally:
                remote = request_timing.end()
                node.metrics.observe_request(
                    API,
                    LISTENER,
                    plain_perf_s() - item.read_at,
                    failed,
                    local_s=item.local_s,
                    remote_s=remote,
                )
            yield pb.ProduceStreamResponse(correlation_id=item.correlation_id, response=response)
    finally:
        stop.set()
