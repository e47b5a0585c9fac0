"""The node's gRPC server interceptors (ACL checks, a SASL token's principal, request
timing): which calls they intercept, and a method handler of any kind wrapped so
that each call runs inside a context."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import grpc

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
