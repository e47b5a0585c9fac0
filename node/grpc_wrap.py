"""The node's gRPC servers: the options both (the broker's and the controller
process's) run with, and their interceptors (ACL checks, a SASL token's principal,
request timing): which calls they intercept, and a method handler of any kind wrapped
so that each call runs inside a context."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import grpc

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
SERVER_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.so_reuseport", 0),
    # Clients and followers ping every second during long polls to notice a frozen
    # peer: never answer that with GOAWAY (too_many_pings).
    ("grpc.http2.min_recv_ping_interval_without_data_ms", 500),
    ("grpc.http2.max_ping_strikes", 0),
    ("grpc.keepalive_permit_without_calls", 1),
]

# A call's context, given its request (None for a client stream) and its gRPC context.
Around = Callable[[Any, grpc.ServicerContext], AbstractContextManager[object]]


def wrap_handler(handler: grpc.RpcMethodHandler, around: Around) -> grpc.RpcMethodHandler:
    """The same handler, each call run inside `around`; a streamed answer is
    produced inside it too."""
    if handler.unary_unary is not None:
        inner = handler.unary_unary

        def unary(request: Any, context: grpc.ServicerContext) -> Any:
            with around(request, context):
                return inner(request, context)

        return grpc.unary_unary_rpc_method_handler(
            unary, handler.request_deserializer, handler.response_serializer
        )
    if handler.unary_stream is not None:
        inner_us = handler.unary_stream

        def unary_stream(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            with around(request, context):
                yield from inner_us(request, context)

        return grpc.unary_stream_rpc_method_handler(
            unary_stream, handler.request_deserializer, handler.response_serializer
        )
    if handler.stream_stream is not None:
        inner_ss = handler.stream_stream

        def stream_stream(requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
            with around(None, context):
                yield from inner_ss(requests, context)

        return grpc.stream_stream_rpc_method_handler(
            stream_stream, handler.request_deserializer, handler.response_serializer
        )
    inner_su = handler.stream_unary

    def stream_unary(requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
        with around(None, context):
            return inner_su(requests, context)

    return grpc.stream_unary_rpc_method_handler(
        stream_unary, handler.request_deserializer, handler.response_serializer
    )


class WrappingInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]
    """A server interceptor that may replace the handler of every call but those whose
    method starts with one of `open_methods`."""

    open_methods: tuple[str, ...] = ()

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(details)
        method: str = details.method
        if handler is None or method.startswith(self.open_methods):
            return handler
        return self.intercept(handler, method, details)

    def intercept(
        self, handler: grpc.RpcMethodHandler, method: str, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        raise NotImplementedError
