"""Kafka's error codes by name: seglog's `errors.proto` holds Kafka's numbers (except
UNKNOWN_SERVER_ERROR, which is -1 on Kafka's wire), plus the few only this listener
answers with."""

from __future__ import annotations

from seglog.proto import errors_pb2

_EXTRA = {
    "UNKNOWN_SERVER_ERROR": -1,
    "UNKNOWN_TOPIC_ID": 100,
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": 53,
    "THROTTLING_QUOTA_EXCEEDED": 89,
}


def error_code(name: str) -> int:
    """Kafka's code for an error name; an unknown name is UNKNOWN_SERVER_ERROR (-1)."""
    extra = _EXTRA.get(name)
    if extra is not None:
        return extra
    try:
        return int(errors_pb2.ErrorCode.Value(name))
    except ValueError:
        return -1
