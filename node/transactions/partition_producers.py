"""A partition leader's view of its producers, as DescribeProducers answers it on
both listeners (node/kafka/txn_apis.py, grpc_servicer.py), and the markers an admin
writes there to end a hanging transaction (WriteTxnMarkers)."""

from __future__ import annotations

from dataclasses import dataclass

from seglog.storage.log_txns import TxnMarkerAppend
from seglog.storage.producer_state import ControlMarker

from ..replica_manager import ReplicaManager

MARKER_TIMEOUT_MS = 30_000  # Kafka's request.timeout.ms for the coordinator's markers


@dataclass(frozen=True)
class ActiveProducer:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int  # -1: no open transaction


def active_producers(
    rm: ReplicaManager, topic: str, partition: int
) -> tuple[str, list[ActiveProducer]]:
    """(error, producers) of a partition this node leads: UNKNOWN_TOPIC_OR_PARTITION
    if it hosts no replica, NOT_LEADER_OR_FOLLOWER if it does not lead it (Kafka's)."""
    hp = rm.hosted((topic, partition))
    if hp is None:
        return "UNKNOWN_TOPIC_OR_PARTITION", []
    if not hp.replica.is_leader:
        return "NOT_LEADER_OR_FOLLOWER", []
    with hp.plog.lock:
        entries = list(hp.plog.log.producer_state.active_producers.values())
    return "NONE", [
        ActiveProducer(
            e.producer_id,
            e.producer_epoch,
            e.last_seq,
            e.last_timestamp,
            e.coordinator_epoch,
            -1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
        )
        for e in entries
    ]


def marker_appends(
    producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int
) -> TxnMarkerAppend:
    """What a leader appends for one WriteTxnMarkers entry on one partition."""
    marker = ControlMarker("COMMIT" if commit else "ABORT", coordinator_epoch)
    return TxnMarkerAppend(producer_id, producer_epoch, marker)
