"""The idempotent batches a leader refused while in doubt of its leadership, so that the
batches behind them are refused the same way rather than as a sequence gap.

A broker whose controller process has been silent for a session refuses produces with
NOT_LEADER_OR_FOLLOWER (node/controller/remote_controller.py): it is fenced by then, most
likely. When it was not, and still leads at the same leader epoch, the producer's next
batch, sent before the refusal came back, finds the refused sequence missing. Kafka's
answer to that would be OUT_OF_ORDER_SEQUENCE_NUMBER, and librdkafka answers that by
bumping its producer epoch and renumbering every partition's unacknowledged records,
written ones included: duplicates (docs/chaos-reports/2026-12-02-gray-failures/). A
Kafka broker never gives that refusal (it has no such doubt), so seglog answers the
batches behind it as it answered the refused one; the producer then sends them all
again, in order, and the first of them closes the gap. Pure: time is an argument.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from seglog.storage.record_batch import BatchHeader

TopicPartition = tuple[str, int]

# A producer retries a refused batch within its retry backoff and a metadata refresh;
# one that never does (it gave the message up) meets Kafka's answers again after this.
GAP_BOUND_S = 10.0
MAX_REMEMBERED = 10_000


@dataclass(frozen=True, slots=True)
class _Refused:
    leader_epoch: int
    producer_epoch: int
    base_sequence: int
    at: float


def _idempotent(data: bytes) -> tuple[int, int, int] | None:
    """(producer id, epoch, base sequence) of the first batch, or None."""
    try:
        h = BatchHeader.parse(data, 0)
    except Exception:  # noqa: BLE001 - the append path reports malformed batches
        return None
    if h.producer_id < 0 or h.base_sequence < 0:
        return None
    return h.producer_id, h.producer_epoch, h.base_sequence


class DoubtRefusals:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._refused: dict[tuple[TopicPartition, int], _Refused] = {}

    def refused(self, tp: TopicPartition, leader_epoch: int, data: bytes, now: float) -> None:
        """A batch for `tp`, led at `leader_epoch`, refused in doubt."""
        found = _idempotent(data)
        if found is None:
            return
        pid, epoch, seq = found
        with self._lock:
            old = self._refused.get((tp, pid))
            if (
                old is not None
                and (old.leader_epoch, old.producer_epoch) == (leader_epoch, epoch)
                and old.base_sequence <= seq
            ):
                seq = old.base_sequence  # the gap starts at the earliest refused
            if len(self._refused) >= MAX_REMEMBERED:
                self._expire(now)
            if len(self._refused) < MAX_REMEMBERED:
                self._refused[(tp, pid)] = _Refused(leader_epoch, epoch, seq, now)

    def behind(self, tp: TopicPartition, leader_epoch: int, data: bytes, now: float) -> str | None:
        """Why this batch is refused as the one before it was, or None (taken as usual).
        The refused batch's own retry, or anything under another producer or leader
        epoch, forgets the refusal."""
        if not self._refused:
            return None
        found = _idempotent(data)
        if found is None:
            return None
        pid, epoch, seq = found
        with self._lock:
            old = self._refused.get((tp, pid))
            if old is None:
                return None
            if (
                (old.leader_epoch, old.producer_epoch) != (leader_epoch, epoch)
                or seq <= old.base_sequence
                or now - old.at > GAP_BOUND_S
            ):
                del self._refused[(tp, pid)]
                return None
        return (
            f"producer {pid}'s batch at sequence {old.base_sequence}, before this one, was "
            f"refused as this broker doubted its leadership: this one is refused too, so "
            "they come again in order"
        )

    def _expire(self, now: float) -> None:
        for key, r in list(self._refused.items()):
            if now - r.at > GAP_BOUND_S:
                del self._refused[key]
