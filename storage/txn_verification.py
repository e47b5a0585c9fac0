"""KIP-890's guard on a partition's first transactional append (Kafka's VerificationGuard
and VerificationStateEntry, kept by ProducerStateManager).

Before a leader appends a producer's first transactional batch of a transaction, it asks
the transaction coordinator whether the partition is in that producer's ongoing
transaction. A guard is made when the question is asked and must come back with the
append: an ABORT marker (or any transactional batch of the producer) appended in
between clears the guard, so a verification answered before the transaction ended can
no longer open a transaction the coordinator does not know about (the ABA case of
Kafka's UnifiedLog.analyzeAndValidateProducerState). No I/O, no clock: time is passed in.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

_ids = itertools.count(1)


class VerificationGuard:
    """A unique token: verified only by itself (Kafka's SENTINEL is None here)."""

    __slots__ = ("id",)

    def __init__(self) -> None:
        self.id = next(_ids)

    def verify(self, other: VerificationGuard | None) -> bool:
        return other is self

    def __repr__(self) -> str:
        return f"VerificationGuard({self.id})"


@dataclass(slots=True)
class VerificationStateEntry:
    """A producer's verification in progress on one partition: when it began, its guard,
    the lowest sequence and the newest epoch of the batches that asked for it."""

    timestamp_ms: int
    lowest_sequence: int
    epoch: int
    guard: VerificationGuard = field(default_factory=VerificationGuard)

    def maybe_update_lowest_sequence_and_epoch(self, sequence: int, epoch: int) -> None:
        """Kafka's rule: a newer epoch restarts the sequence; the same epoch keeps the
        lowest sequence seen (a later batch may not append before an earlier one)."""
        if epoch > self.epoch:
            self.lowest_sequence, self.epoch = sequence, epoch
        elif epoch == self.epoch and sequence < self.lowest_sequence:
            self.lowest_sequence = sequence
