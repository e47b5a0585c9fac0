"""The error names the group coordinator answers with (Kafka's `Errors`, by name: the
listeners map them to their codes), and how a failed append of `__consumer_offsets`
is reported to the client whose request it carried."""

from __future__ import annotations

NONE = "NONE"
COORDINATOR_LOAD_IN_PROGRESS = "COORDINATOR_LOAD_IN_PROGRESS"
COORDINATOR_NOT_AVAILABLE = "COORDINATOR_NOT_AVAILABLE"
NOT_COORDINATOR = "NOT_COORDINATOR"
ILLEGAL_GENERATION = "ILLEGAL_GENERATION"
INCONSISTENT_GROUP_PROTOCOL = "INCONSISTENT_GROUP_PROTOCOL"
INVALID_GROUP_ID = "INVALID_GROUP_ID"
UNKNOWN_MEMBER_ID = "UNKNOWN_MEMBER_ID"
INVALID_SESSION_TIMEOUT = "INVALID_SESSION_TIMEOUT"
REBALANCE_IN_PROGRESS = "REBALANCE_IN_PROGRESS"
MEMBER_ID_REQUIRED = "MEMBER_ID_REQUIRED"
FENCED_INSTANCE_ID = "FENCED_INSTANCE_ID"
GROUP_ID_NOT_FOUND = "GROUP_ID_NOT_FOUND"
NON_EMPTY_GROUP = "NON_EMPTY_GROUP"
GROUP_SUBSCRIBED_TO_TOPIC = "GROUP_SUBSCRIBED_TO_TOPIC"
OFFSET_METADATA_TOO_LARGE = "OFFSET_METADATA_TOO_LARGE"
GROUP_MAX_SIZE_REACHED = "GROUP_MAX_SIZE_REACHED"
UNKNOWN_SERVER_ERROR = "UNKNOWN_SERVER_ERROR"
STALE_MEMBER_EPOCH = "STALE_MEMBER_EPOCH"
FENCED_MEMBER_EPOCH = "FENCED_MEMBER_EPOCH"
UNSUPPORTED_ASSIGNOR = "UNSUPPORTED_ASSIGNOR"
INVALID_REQUEST = "INVALID_REQUEST"

# Append errors that mean this node no longer leads the partition: the client must
# find the coordinator again (Kafka maps them the same way).
_NOT_COORDINATOR_ERRORS = frozenset(
    {
        "NOT_LEADER_OR_FOLLOWER",
        "FENCED_LEADER_EPOCH",
        "UNKNOWN_TOPIC_OR_PARTITION",
        "NOT_COORDINATOR",
        "KAFKA_STORAGE_ERROR",
    }
)
_UNAVAILABLE_ERRORS = frozenset(
    {
        "NOT_ENOUGH_REPLICAS",
        "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        "REQUEST_TIMED_OUT",
        "COORDINATOR_NOT_AVAILABLE",
    }
)


# A TxnOffsetCommit's transactional batch refused by the log: its transaction was
# ended, or never verified there (KIP-890's guard), or its producer fenced. Kafka's
# maybeConvertOffsetCommitError answers these as they are.
_TXN_APPEND_ERRORS = frozenset({"INVALID_TXN_STATE", "INVALID_PRODUCER_EPOCH"})


def append_error(error: str) -> str:
    """What a client is told when the append of its request failed."""
    if error in _NOT_COORDINATOR_ERRORS:
        return NOT_COORDINATOR
    if error in _UNAVAILABLE_ERRORS:
        return COORDINATOR_NOT_AVAILABLE
    if error in _TXN_APPEND_ERRORS:
        return error
    return UNKNOWN_SERVER_ERROR
