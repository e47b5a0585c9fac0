"""The producer's ProduceStream calls (node/produce_stream.py is the node's side): one
long-lived call per node, on which the node appends requests in the order they were
sent and answers them in that order, so the sender may keep several requests of a
partition in flight, as Kafka's producer does on its one connection per broker.

Sending a request gives a future that the call's reader thread resolves with the
node's answer, or with the error that ended the call: every request unanswered when
the call ends fails with it, and the sender retries them in order as it would
unanswered Produce calls. Two endings say that nothing unanswered was appended
(NotSentError): a node without ProduceStream (UNIMPLEMENTED; remembered, and the sender
sends that node Produce calls instead), and a session token the node refused before
the next request (the next call logs in again, client/sasl.py)."""

from __future__ import annotations

import concurrent.futures
import itertools
import queue
import threading
import time
from collections import deque
from typing import Any

import grpc

from seglog.proto import client_pb2 as pb

from .cluster import rpc_error
from .errors import KafkaError, KafkaTimeoutError, NodeNotReadyError, NotSentError

Answer = concurrent.futures.Future[pb.ProduceResponse]


def _settle(
    future: Answer, response: pb.ProduceResponse | None, error: BaseException | None
) -> None:
    try:
        if error is None:
            future.set_result(response)  # type: ignore[arg-type]
        else:
            future.set_exception(error)
    except concurrent.futures.InvalidStateError:
        pass  # cancelled by a forced close


class NodeProduceStream:
    """One ProduceStream call to one node."""

    def __init__(self, stub: Any) -> None:
        self._requests: queue.SimpleQueue[pb.ProduceStreamRequest | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._waiting: deque[tuple[int, Answer, float]] = deque()  # id, answer, sent at
        self._ids = itertools.count(1)
        self._abort_error: KafkaError | None = None
        self.ended = False
        self.unsupported = False  # the node has no ProduceStream
        self._call = stub.ProduceStream(iter(self._requests.get, None))
        threading.Thread(target=self._read, name="seglog-producer-stream", daemon=True).start()

    def send(self, request: pb.ProduceRequest) -> Answer:
        future: Answer = concurrent.futures.Future()
        with self._lock:  # ids, the queue and the waiting list in one order
            if self.ended:
                future.set_exception(NodeNotReadyError("the ProduceStream call has ended"))
                return future
            correlation_id = next(self._ids)
            self._waiting.append((correlation_id, future, time.monotonic()))
            self._requests.put(
                pb.ProduceStreamRequest(correlation_id=correlation_id, request=request)
            )
        return future

    def unanswered_since(self) -> float | None:
        """When the oldest unanswered request was sent (monotonic); None: none is."""
        with self._lock:
            return self._waiting[0][2] if self._waiting else None

    def abort(self, error: KafkaError) -> None:
        """End the call now: every unanswered request fails with `error` (here too, so
        they end even if the reader has)."""
        with self._lock:
            if self._abort_error is None:
                self._abort_error = error
            self.ended = True
            left = list(self._waiting)
            self._waiting.clear()
        self._call.cancel()
        self._requests.put(None)
        for _, future, _sent in left:
            _settle(future, None, error)

    def close(self) -> None:
        """No more requests: the node answers those sent, then ends the call."""
        self._requests.put(None)

    def _read(self) -> None:
        error: KafkaError = NodeNotReadyError("the node ended the ProduceStream call")
        try:
            for answer in self._call:
                with self._lock:
                    due = self._waiting.popleft() if self._waiting else None
                if due is None or answer.correlation_id != due[0]:
                    if due is not None:
                        with self._lock:
                            self._waiting.appendleft(due)
                    error = KafkaError(
                        f"the node answered request {answer.correlation_id} of a ProduceStream "
                        f"call where {due[0] if due else 'none'} was due"
                    )
                    self._call.cancel()
                    break
                _settle(due[1], answer.response, None)
        except grpc.RpcError as e:
            error = self._ended_by(e)
        with self._lock:
            self.ended = True
            left = list(self._waiting)
            self._waiting.clear()
            if self._abort_error is not None:
                error = self._abort_error
        self._requests.put(None)  # ends gRPC's request iterator if the call broke
        for _, future, _sent in left:
            _settle(future, None, error)

    def _ended_by(self, e: grpc.RpcError) -> KafkaError:
        code = e.code() if hasattr(e, "code") else None
        detail = e.details() if hasattr(e, "details") else str(e)
        if code == grpc.StatusCode.UNIMPLEMENTED:
            self.unsupported = True
            return NotSentError(f"the node has no ProduceStream ({detail}): sending Produce calls")
        if code == grpc.StatusCode.UNAUTHENTICATED:
            return NotSentError(f"the node refused the session token ({detail}): logging in again")
        return rpc_error(e, 0.0)


class ProduceStreams:
    """The sender's calls, one per node stub; used by the sender thread only."""

    def __init__(self) -> None:
        self._streams: dict[Any, NodeProduceStream] = {}
        # Every call that may have unanswered requests, ended ones included.
        self._open: list[NodeProduceStream] = []

    def offered(self, stub: Any) -> bool:
        """False once the node answered that it has no ProduceStream."""
        stream = self._streams.get(stub)
        return stream is None or not stream.unsupported

    def send(self, stub: Any, request: pb.ProduceRequest) -> Answer:
        stream = self._streams.get(stub)
        if stream is None or stream.ended:
            try:
                stream = self._streams[stub] = NodeProduceStream(stub)
            except KafkaError as e:  # a login the call needed failed
                failed: Answer = concurrent.futures.Future()
                failed.set_exception(e)
                return failed
            self._open.append(stream)
        return stream.send(request)

    def expire(self, now: float, limit_s: float) -> None:
        """End each call with a request unanswered for `limit_s` (Kafka's producer
        closes such a connection): its unanswered requests fail, to be retried."""
        still = []
        for stream in self._open:
            since = stream.unanswered_since()
            if since is not None and now - since > limit_s:
                stream.abort(KafkaTimeoutError(f"no answer to a Produce request in {limit_s:.1f}s"))
            elif since is not None or not stream.ended:
                still.append(stream)
        self._open = still

    def close(self) -> None:
        for stream in self._streams.values():
            stream.close()
        self._streams.clear()
