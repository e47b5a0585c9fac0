"""Marks admin requests one node forwards to the active controller, so that the
receiver never forwards them again (no request circles between nodes)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

import grpc

FORWARDED_HEADER = "x-seglog-forwarded"
F = TypeVar("F", bound=Callable[..., Any])


class _Forwarded(threading.local):
    active = False


FORWARDED = _Forwarded()


def marks_forwarded(method: F) -> F:
    """Servicer method decorator: FORWARDED.active while serving a forwarded call."""

    @wraps(method)
    def wrapper(self: object, request: object, context: grpc.ServicerContext) -> object:
        metadata = dict(context.invocation_metadata() or ())
        FORWARDED.active = metadata.get(FORWARDED_HEADER) == "1"
        try:
            return method(self, request, context)
        finally:
            FORWARDED.active = False

    return wrapper  # type: ignore[return-value]
