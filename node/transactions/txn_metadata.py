"""One transactional id's state at its coordinator (Kafka's TransactionMetadata): the
producer id and epoch handed out, the transaction's partitions, its state and the
state a `__transaction_state` write in flight will make it (`pending`), with Kafka's
rule of which state may follow which."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .txn_records import TxnLogValue, TxnState

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
MAX_PRODUCER_EPOCH = 32_767  # Short.MAX_VALUE: an epoch is bumped only below MAX - 1

S = TxnState
# Kafka's TransactionState.validPreviousStates.
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


class IllegalTransition(AssertionError):
    """A state change Kafka's table forbids: a coordinator bug, never client input."""


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    # The producer id and epoch before the last bump (a retried InitProducerId).
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    # The transition a `__transaction_state` write in flight makes once acknowledged.
    pending: TxnLogValue | None = None

    @classmethod
    def from_log(cls, transactional_id: str, value: TxnLogValue) -> TxnMetadata:
        return cls(
            transactional_id,
            value.producer_id,
            value.producer_epoch,
            value.transaction_timeout_ms,
            value.state,
            set(value.partitions),
            value.start_ms,
            value.last_update_ms,
        )

    def as_log_value(self) -> TxnLogValue:
        return TxnLogValue(
            self.producer_id,
            self.producer_epoch,
            self.timeout_ms,
            self.state,
            frozenset(self.partitions),
            self.last_update_ms,
            self.start_ms,
        )

    def prepare(
        self, state: TxnState, now_ms: int, *, partitions: set[tuple[str, int]] | None = None,
        producer_id: int | None = None, producer_epoch: int | None = None,
        timeout_ms: int | None = None,
    ) -> TxnLogValue:  # fmt: skip
        """The value a transition to `state` writes; it becomes `pending`."""
        if self.state not in VALID_PREVIOUS[state]:
            raise IllegalTransition(
                f"transactional id {self.transactional_id}: {self.state.kafka_name} -> "
                f"{state.kafka_name} is not a valid transition"
            )
        current = self.as_log_value()
        starting = state is S.ONGOING and self.state is not S.ONGOING
        value = replace(
            current,
            state=state,
            partitions=frozenset(self.partitions if partitions is None else partitions),
            producer_id=self.producer_id if producer_id is None else producer_id,
            producer_epoch=self.producer_epoch if producer_epoch is None else producer_epoch,
            transaction_timeout_ms=self.timeout_ms if timeout_ms is None else timeout_ms,
            last_update_ms=now_ms,
            start_ms=now_ms if starting else (-1 if state is S.EMPTY else self.start_ms),
        )
        self.pending = value
        return value

    def complete(self) -> None:
        """The pending write was acknowledged: its value is the state now."""
        value = self.pending
        assert value is not None, "no transition pending"
        if (value.producer_id, value.producer_epoch) != (self.producer_id, self.producer_epoch):
            self.last_producer_id, self.last_producer_epoch = self.producer_id, self.producer_epoch
        self.producer_id, self.producer_epoch = value.producer_id, value.producer_epoch
        self.timeout_ms = value.transaction_timeout_ms
        self.state = value.state
        self.partitions = set(value.partitions)
        self.start_ms, self.last_update_ms = value.start_ms, value.last_update_ms
        self.pending = None

    def abandon_pending(self) -> None:
        """The pending write failed: the state stays what it was."""
        self.pending = None

    def next_epoch(self) -> tuple[int, int] | None:
        """(producer id, epoch) after a bump, or None when the epoch is exhausted (the
        caller then hands out a new producer id at epoch 0)."""
        if self.producer_epoch >= MAX_PRODUCER_EPOCH - 1:
            return None
        return self.producer_id, self.producer_epoch + 1
