"""One `__transaction_state` partition at its leader (the share of Kafka's
TransactionStateManager and TransactionCoordinator that one partition holds): the
transactional ids it keeps, loaded from the partition and fenced by the leader epoch
it was loaded at (the coordinator epoch its markers carry), and what each request,
write outcome, marker outcome and timer decides. No I/O: actions out, time in."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import txn_records as rec
from .txn_metadata import TxnMetadata
from .txn_records import TxnLogValue, TxnState

NONE = "NONE"
NOT_COORDINATOR = "NOT_COORDINATOR"
COORDINATOR_NOT_AVAILABLE = "COORDINATOR_NOT_AVAILABLE"
COORDINATOR_LOAD_IN_PROGRESS = "COORDINATOR_LOAD_IN_PROGRESS"
CONCURRENT_TRANSACTIONS = "CONCURRENT_TRANSACTIONS"
INVALID_PRODUCER_ID_MAPPING = "INVALID_PRODUCER_ID_MAPPING"
PRODUCER_FENCED = "PRODUCER_FENCED"
INVALID_TXN_STATE = "INVALID_TXN_STATE"

S = TxnState


@dataclass(frozen=True)
class TxnResult:
    error: str
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass(frozen=True)
class Respond:
    request_id: int
    result: TxnResult


@dataclass(frozen=True)
class Append:
    """One record for `__transaction_state`-`partition`, to append as leader of
    `leader_epoch` only, with acks=all; its outcome goes to on_write_done."""

    partition: int
    leader_epoch: int
    write_id: int
    key: bytes
    value: bytes | None


@dataclass(frozen=True)
class SendMarkers:
    """Write a COMMIT/ABORT marker of the producer to each partition's leader (Kafka's
    WriteTxnMarkers, coordinator epoch = the shard's leader epoch); the outcome goes to
    on_markers_done."""

    partition: int
    coordinator_epoch: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: frozenset[tuple[str, int]]


Action = Respond | Append | SendMarkers
WriteDone = Callable[[str, int], None]  # (append error, now_ms)
Retry = Callable[[int], None]  # a parked request taken up again (now_ms)


@dataclass(frozen=True)
class Parked:
    """A request that met its transaction completing (Prepare* with the markers or
    the Complete* write in flight), held until the transaction completes or
    `deadline_ms`, instead of answered CONCURRENT_TRANSACTIONS at once."""

    request_id: int
    deadline_ms: int
    retry: Retry


def write_error(error: str) -> str:
    """What a client hears when a `__transaction_state` append failed (Kafka's mapping)."""
    if error in ("UNKNOWN_TOPIC_OR_PARTITION", "NOT_ENOUGH_REPLICAS",
                 "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "REQUEST_TIMED_OUT"):  # fmt: skip
        return COORDINATOR_NOT_AVAILABLE
    if error in ("NOT_LEADER_OR_FOLLOWER", "KAFKA_STORAGE_ERROR", NOT_COORDINATOR):
        return NOT_COORDINATOR
    return error


class TxnShard:
    def __init__(self, partition: int, leader_epoch: int) -> None:
        self.partition = partition
        self.leader_epoch = leader_epoch
        self.loading = True
        self.txns: dict[str, TxnMetadata] = {}
        self._writes: dict[int, WriteDone] = {}
        self._next_write = 0
        self._sending: set[str] = set()  # transactional ids with markers in flight
        self._parked: dict[str, list[Parked]] = {}  # transactional id -> its held requests
        self._out: list[Action] = []

    def take(self) -> list[Action]:
        out, self._out = self._out, []
        return out

    def take_into(self, actions: list[Action]) -> None:
        """Actions taken out meanwhile (a held request's retry) go back, in order."""
        self._out.extend(actions)

    def respond(self, request_id: int, error: str, meta: TxnMetadata | None = None) -> None:
        if meta is None:
            self._out.append(Respond(request_id, TxnResult(error)))
        else:
            result = TxnResult(error, meta.producer_id, meta.producer_epoch)
            self._out.append(Respond(request_id, result))

    # --- loading --------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> None:
        """One record of the partition, in log order (raises TxnRecordError)."""
        transactional_id = rec.decode_key(key)
        decoded = rec.decode_value(value)
        if decoded is None:
            self.txns.pop(transactional_id, None)
        else:
            self.txns[transactional_id] = TxnMetadata.from_log(transactional_id, decoded)

    def finish_loading(self) -> None:
        """Transactions a previous coordinator decided but did not finish get their
        markers again (Kafka's loadTransactionsForTxnTopicPartition)."""
        self.loading = False
        for meta in self.txns.values():
            if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
                self.send_markers(meta)

    def unload(self) -> None:
        """The partition is led elsewhere: writes in flight are never acknowledged,
        held requests are answered NOT_COORDINATOR (the client finds the new one)."""
        for done in list(self._writes.values()):
            done(NOT_COORDINATOR, -1)
        self._writes.clear()
        for held in self._parked.values():
            for p in held:
                self.respond(p.request_id, NOT_COORDINATOR)
        self._parked.clear()

    # --- requests held while a transaction completes ------------------------------------

    def completing(self, meta: TxnMetadata) -> bool:
        """Whether `meta`'s transaction is decided and on its way to Complete*: the
        markers are being written, or the Complete* record is."""
        if meta.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return False
        if meta.pending is not None:
            return meta.pending.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
        return meta.transactional_id in self._sending

    def park(self, transactional_id: str, held: Parked) -> None:
        self._parked.setdefault(transactional_id, []).append(held)

    def release(self, transactional_id: str, now_ms: int) -> None:
        """The transaction completed, or its completion failed: its held requests are
        taken up again (each is answered, or held again while still completing)."""
        for held in self._parked.pop(transactional_id, []):
            held.retry(now_ms)

    def expire_parked(self, now_ms: int) -> None:
        """Held requests past their deadline are answered CONCURRENT_TRANSACTIONS (the
        client retries after its backoff, as it would have at once)."""
        for tid in list(self._parked):
            keep = []
            for held in self._parked[tid]:
                if held.deadline_ms <= now_ms:
                    self.respond(held.request_id, CONCURRENT_TRANSACTIONS)
                else:
                    keep.append(held)
            if keep:
                self._parked[tid] = keep
            else:
                del self._parked[tid]

    def next_parked_deadline(self) -> int | None:
        deadlines = [p.deadline_ms for held in self._parked.values() for p in held]
        return min(deadlines) if deadlines else None

    # --- writes and markers -----------------------------------------------------------

    def write(self, meta: TxnMetadata, value: TxnLogValue | None, done: WriteDone) -> None:
        """Append `value` (None: a tombstone) for `meta`; `meta.pending` holds the
        transition until `done` runs with the append's outcome."""
        self._next_write += 1
        self._writes[self._next_write] = done
        encoded = None if value is None else rec.encode_value(value)
        key = rec.encode_key(meta.transactional_id)
        self._out.append(Append(self.partition, self.leader_epoch, self._next_write, key, encoded))

    def on_write_done(self, write_id: int, error: str, now_ms: int) -> None:
        done = self._writes.pop(write_id, None)
        if done is not None:
            done(error, now_ms)

    def send_markers(self, meta: TxnMetadata) -> None:
        if meta.transactional_id in self._sending:
            return
        self._sending.add(meta.transactional_id)
        self._out.append(
            SendMarkers(
                self.partition,
                self.leader_epoch,
                meta.transactional_id,
                meta.producer_id,
                meta.producer_epoch,
                meta.state is S.PREPARE_COMMIT,
                frozenset(meta.partitions),
            )
        )

    def on_markers_done(
        self, transactional_id: str, producer_id: int, producer_epoch: int, error: str,
        now_ms: int,
    ) -> None:  # fmt: skip
        """Every partition has its marker (NONE), or the send failed (the timer sends
        them again). Then the transaction completes: CompleteCommit / CompleteAbort."""
        self._sending.discard(transactional_id)
        meta = self.txns.get(transactional_id)
        if (
            error != NONE
            or meta is None
            or meta.pending is not None
            or (meta.producer_id, meta.producer_epoch) != (producer_id, producer_epoch)
            or meta.state not in (S.PREPARE_COMMIT, S.PREPARE_ABORT)
        ):
            self.release(transactional_id, now_ms)
            return
        target = S.COMPLETE_COMMIT if meta.state is S.PREPARE_COMMIT else S.COMPLETE_ABORT
        value = meta.prepare(target, now_ms, partitions=set())

        def done(write_error_: str, now: int) -> None:
            if write_error_ == NONE:
                meta.complete()
            else:
                meta.abandon_pending()  # still Prepare*: the timer finishes it
            self.release(transactional_id, now)

        self.write(meta, value, done)

    def retry_unfinished(self) -> None:
        """Prepare* transactions whose markers or completion failed are taken up again."""
        for meta in self.txns.values():
            if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT) and meta.pending is None:
                self.send_markers(meta)

    def __repr__(self) -> str:
        return (
            f"TxnShard({rec.TRANSACTION_STATE_TOPIC}-{self.partition}, "
            f"epoch={self.leader_epoch}, loading={self.loading}, txns={len(self.txns)})"
        )
