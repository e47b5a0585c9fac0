"""The gRPC services' error codes: seglog's `errors.proto` by Kafka's error name (one
it does not know is UNKNOWN_SERVER_ERROR), and a controller's refusal as a response
entry's error fields."""

from __future__ import annotations

from typing import Any

from seglog.controller.cluster_control import ControlError
from seglog.proto import errors_pb2

E = errors_pb2.ErrorCode


def code(name: str) -> int:
    try:
        return int(E.Value(name))
    except ValueError:
        return int(E.Value("UNKNOWN_SERVER_ERROR"))


def refused(e: ControlError) -> dict[str, Any]:
    """A response entry's error fields for the controller's refusal."""
    return {"error_code": code(e.error_name), "error_message": str(e)}
