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
    "LOG_DIR_NOT_FOUND": 57,
    # Transactions (docs/transactions.md).
    "INVALID_PRODUCER_ID_MAPPING": 49,
    "INVALID_TRANSACTION_TIMEOUT": 50,
    "CONCURRENT_TRANSACTIONS": 51,
    "TRANSACTION_COORDINATOR_FENCED": 52,
    "PRODUCER_FENCED": 90,
    "TRANSACTIONAL_ID_NOT_FOUND": 105,
    "OPERATION_NOT_ATTEMPTED": 55,
    "TRANSACTION_ABORTABLE": 120,  # KIP-890 (AddPartitionsToTxn v5)
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


_NAMES = {code: name for name, code in _EXTRA.items()}


def error_name(code: int) -> str:
    """Kafka's error name for a code from the wire (UNKNOWN_SERVER_ERROR if unknown)."""
    if code == 0:
        return "NONE"
    name = _NAMES.get(code)
    if name is not None:
        return name
    try:
        return str(errors_pb2.ErrorCode.Name(code))
    except ValueError:
        return "UNKNOWN_SERVER_ERROR"
