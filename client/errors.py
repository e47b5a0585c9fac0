"""Client-side errors, one class per Kafka error name, shaped like kafka-python's
`kafka.errors` (`errno`, `retriable`, `invalid_metadata`)."""

from __future__ import annotations

from seglog.proto import errors_pb2


class KafkaError(Exception):
    errno = -1
    message = "UNKNOWN_SERVER_ERROR"
    retriable = False
    # The client's cluster view is stale: refresh metadata before retrying.
    invalid_metadata = False

    def __str__(self) -> str:
        detail = super().__str__()
        return f"{self.message}: {detail}" if detail else self.message


class KafkaConfigurationError(KafkaError, ValueError):
    """An invalid or conflicting client setting (kafka-python's name)."""

    message = "INVALID_CONFIG"


class KafkaTimeoutError(KafkaError):
    message = "REQUEST_TIMED_OUT"
    retriable = True
    # A node that does not answer may be frozen or gone: look for the leader again.
    invalid_metadata = True


class NoBrokersAvailable(KafkaError):
    message = "NO_BROKERS_AVAILABLE"
    retriable = True
    invalid_metadata = True


class BootstrapUnreachable(NoBrokersAvailable):
    """A client that never reached its cluster found no seglog node at any bootstrap
    address (connection refused, a Kafka-protocol port, ...): said at once, not after
    request_timeout_ms of retries, since waiting does not change a wrong address.
    `nothing_listens`: every address refused the connection (or was unreachable), so a
    cluster may still start there: a Consumer keeps polling (and warns), as Kafka's."""

    retriable = False

    def __init__(self, message: str, nothing_listens: bool = False) -> None:
        super().__init__(message)
        self.nothing_listens = nothing_listens


class NodeNotReadyError(KafkaError):
    """A node could not be reached (connection refused, reset, deadline)."""

    message = "NETWORK_EXCEPTION"
    retriable = True
    invalid_metadata = True


class IllegalStateError(KafkaError):
    message = "ILLEGAL_STATE"


class CommitFailedError(KafkaError):
    """kafka-python's CommitFailedError: the member is no longer in the generation
    the commit was for (the group rebalanced, or it was removed): the partitions
    may be someone else's now, so the offsets were not committed."""

    message = "COMMIT_FAILED"


class BrokerResponseError(KafkaError):
    """An error code a node returned."""


_RETRIABLE = {
    "CORRUPT_MESSAGE",
    "UNKNOWN_TOPIC_OR_PARTITION",
    "LEADER_NOT_AVAILABLE",
    "NOT_LEADER_OR_FOLLOWER",
    "REQUEST_TIMED_OUT",
    "BROKER_NOT_AVAILABLE",
    "REPLICA_NOT_AVAILABLE",
    "NETWORK_EXCEPTION",
    "COORDINATOR_NOT_AVAILABLE",
    "NOT_ENOUGH_REPLICAS",
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    "NOT_CONTROLLER",
    "KAFKA_STORAGE_ERROR",
    "FENCED_LEADER_EPOCH",
    "UNKNOWN_LEADER_EPOCH",
    "OFFSET_NOT_AVAILABLE",
    "COORDINATOR_LOAD_IN_PROGRESS",
    "NOT_COORDINATOR",
    "UNSTABLE_OFFSET_COMMIT",
    "CONCURRENT_TRANSACTIONS",
}
_INVALID_METADATA = {
    "UNKNOWN_TOPIC_OR_PARTITION",
    "LEADER_NOT_AVAILABLE",
    "NOT_LEADER_OR_FOLLOWER",
    "BROKER_NOT_AVAILABLE",
    "NETWORK_EXCEPTION",
    "NOT_CONTROLLER",
    "KAFKA_STORAGE_ERROR",
    "FENCED_LEADER_EPOCH",
    "UNKNOWN_LEADER_EPOCH",
}


def _class_name(error_name: str) -> str:
    return "".join(part.capitalize() for part in error_name.split("_")) + "Error"


def _make_classes() -> dict[int, type[BrokerResponseError]]:
    classes: dict[int, type[BrokerResponseError]] = {}
    for name, number in errors_pb2.ErrorCode.items():
        if name == "NONE":
            continue
        errno = -1 if name == "UNKNOWN_SERVER_ERROR" else number
        cls = type(
            _class_name(name),
            (BrokerResponseError,),
            {
                "errno": errno,
                "message": name,
                "retriable": name in _RETRIABLE,
                "invalid_metadata": name in _INVALID_METADATA,
                "__module__": __name__,
            },
        )
        classes[number] = cls
        globals()[cls.__name__] = cls
    return classes


_BY_CODE = _make_classes()


def error_name(code: int) -> str:
    """Kafka's name of an ErrorCode (UNKNOWN_SERVER_ERROR for one seglog does not know)."""
    try:
        return errors_pb2.ErrorCode.Name(code)
    except ValueError:
        return "UNKNOWN_SERVER_ERROR"


def for_code(code: int, message: str = "") -> BrokerResponseError:
    """The exception for an ErrorCode a node returned (code != NONE)."""
    cls = _BY_CODE.get(code)
    if cls is None:
        cls = _BY_CODE[errors_pb2.ErrorCode.Value("UNKNOWN_SERVER_ERROR")]
        message = f"error code {code}: {message}"
    return cls(message)


def error_class(name: str) -> type[BrokerResponseError]:
    """The class for a Kafka error name, e.g. error_class("NOT_LEADER_OR_FOLLOWER")."""
    return _BY_CODE[errors_pb2.ErrorCode.Value(name)]
