"""Kafka's transaction coordinator without I/O: one `TxnShard` (txn_shard.py) per
`__transaction_state` partition this node leads, loaded from it and fenced by the
leader epoch it was loaded at, and the requests of transaction version 1 —
InitProducerId with a transactional id (epoch bump, zombie fencing), AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn — the transaction timeout (transaction.timeout.ms, at most
transaction.max.timeout.ms) and transactional.id.expiration.ms. Each call returns the
actions to carry out (answers, `__transaction_state` appends, marker writes); the
node's shell and a simulator drive the same object.

A transaction's life (docs/transactions.md): Empty --AddPartitions--> Ongoing
--EndTxn--> PrepareCommit|PrepareAbort (written, then the client is answered and the
markers go out) --markers written--> CompleteCommit|CompleteAbort (written). A
transaction open past its timeout, or whose id is initialised again while it is open,
is aborted with the producer epoch bumped (Kafka's PrepareEpochFence), which fences
the producer that opened it."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..groups.offsets_records import OFFSETS_TOPIC
from ..groups.offsets_records import partition_for as offsets_partition_for
from . import txn_records as rec
from .txn_config import TxnConfig
from .txn_metadata import NO_PRODUCER_EPOCH, TxnMetadata
from .txn_records import TxnLogValue, TxnState
from .txn_shard import (
    CONCURRENT_TRANSACTIONS,
    COORDINATOR_LOAD_IN_PROGRESS,
    INVALID_PRODUCER_ID_MAPPING,
    INVALID_TXN_STATE,
    NONE,
    NOT_COORDINATOR,
    PRODUCER_FENCED,
    Action,
    Parked,
    TxnShard,
    write_error,
)

INVALID_TRANSACTION_TIMEOUT = "INVALID_TRANSACTION_TIMEOUT"
INVALID_REQUEST = "INVALID_REQUEST"
# KIP-890: a verified partition that is not in the transaction (AddPartitionsToTxn v5;
# INVALID_TXN_STATE to an older request, as Kafka's partition leaders map it).
TRANSACTION_ABORTABLE = "TRANSACTION_ABORTABLE"

S = TxnState


class TransactionCoordinator:
    def __init__(self, config: TxnConfig, new_producer_id: Callable[[], int]) -> None:
        self.config = config
        # A fresh producer id (the controller's block allocator in a node, a counter in
        # a simulator); called for a new transactional id or an exhausted epoch.
        self.new_producer_id = new_producer_id
        self.shards: dict[int, TxnShard] = {}

    def partition_for(self, transactional_id: str) -> int:
        return rec.partition_for(transactional_id, self.config.transaction_state_log_num_partitions)

    # --- leadership -----------------------------------------------------------------

    def begin_loading(self, partition: int, leader_epoch: int) -> tuple[TxnShard, list[Action]]:
        out = self.unload(partition)
        shard = TxnShard(partition, leader_epoch)
        self.shards[partition] = shard
        return shard, out

    def finish_loading(self, shard: TxnShard) -> list[Action]:
        if self.shards.get(shard.partition) is not shard:
            return []
        shard.finish_loading()
        return shard.take()

    def unload(self, partition: int) -> list[Action]:
        shard = self.shards.pop(partition, None)
        if shard is None:
            return []
        shard.unload()
        return shard.take()

    def _shard(self, partition: int, leader_epoch: int) -> TxnShard | None:
        shard = self.shards.get(partition)
        return shard if shard is not None and shard.leader_epoch == leader_epoch else None

    def on_write_done(
        self, partition: int, leader_epoch: int, write_id: int, error: str, now_ms: int
    ) -> list[Action]:
        shard = self._shard(partition, leader_epoch)
        if shard is None:
            return []  # fenced: the shard that wrote it is gone
        shard.on_write_done(write_id, error, now_ms)
        return shard.take()

    def on_markers_done(
        self, partition: int, leader_epoch: int, transactional_id: str, producer_id: int,
        producer_epoch: int, error: str, now_ms: int,
    ) -> list[Action]:  # fmt: skip
        shard = self._shard(partition, leader_epoch)
        if shard is None:
            return []
        shard.on_markers_done(transactional_id, producer_id, producer_epoch, error, now_ms)
        return shard.take()

    def shard_for(self, transactional_id: str) -> tuple[TxnShard | None, str]:
        shard = self.shards.get(self.partition_for(transactional_id))
        if shard is None:
            return None, NOT_COORDINATOR
        if shard.loading:
            return None, COORDINATOR_LOAD_IN_PROGRESS
        return shard, NONE

    def _reject(self, request_id: int, error: str) -> list[Action]:
        shard = TxnShard(-1, -1)  # only to build the answer
        shard.respond(request_id, error)
        return shard.take()

    # --- InitProducerId ---------------------------------------------------------------

    def init_producer_id(
        self, request_id: int, transactional_id: str, timeout_ms: int, producer_id: int,
        producer_epoch: int, now_ms: int,
    ) -> list[Action]:  # fmt: skip
        """A producer (re)starting with its transactional id: the epoch is bumped, which
        fences every older instance; an open transaction is aborted first (the client
        hears CONCURRENT_TRANSACTIONS and retries)."""
        if not transactional_id:
            return self._reject(request_id, INVALID_REQUEST)
        if timeout_ms <= 0 or timeout_ms > self.config.transaction_max_timeout_ms:
            return self._reject(request_id, INVALID_TRANSACTION_TIMEOUT)
        shard, error = self.shard_for(transactional_id)
        if shard is None:
            return self._reject(request_id, error)
        meta = shard.txns.get(transactional_id)
        if meta is None:
            meta = TxnMetadata(
                transactional_id, self.new_producer_id(), NO_PRODUCER_EPOCH, timeout_ms
            )
            shard.txns[transactional_id] = meta
        if meta.pending is not None or meta.state in (
            S.PREPARE_COMMIT, S.PREPARE_ABORT, S.PREPARE_EPOCH_FENCE, S.DEAD,
        ):  # fmt: skip
            shard.respond(request_id, CONCURRENT_TRANSACTIONS)
        elif meta.state is S.ONGOING:
            self._abort_fencing(shard, meta, now_ms)
            shard.respond(request_id, CONCURRENT_TRANSACTIONS)
        elif producer_id >= 0 and (producer_id, producer_epoch) not in (
            (meta.producer_id, meta.producer_epoch),
            (meta.last_producer_id, meta.last_producer_epoch),
        ):
            # KIP-360: a producer that names its id and epoch must be the current one.
            shard.respond(request_id, PRODUCER_FENCED)
        else:
            bumped = meta.next_epoch()
            pid, epoch = bumped if bumped is not None else (self.new_producer_id(), 0)
            value = meta.prepare(
                S.EMPTY, now_ms, partitions=set(), producer_id=pid, producer_epoch=epoch,
                timeout_ms=timeout_ms,
            )  # fmt: skip
            self._write_then_answer(shard, meta, value, request_id)
        return shard.take()

    @staticmethod
    def _write_then_answer(
        shard: TxnShard, meta: TxnMetadata, value: TxnLogValue, request_id: int
    ) -> None:
        """Write `meta`'s pending transition; answer with its producer id and epoch once
        acknowledged, or with the append's error (the state stays what it was)."""

        def done(error: str, _now: int) -> None:
            if error == NONE:
                meta.complete()
                shard.respond(request_id, NONE, meta)
            else:
                meta.abandon_pending()
                shard.respond(request_id, write_error(error))

        shard.write(meta, value, done)

    # --- AddPartitionsToTxn, AddOffsetsToTxn -------------------------------------------

    def _check_producer(
        self, shard: TxnShard, meta: TxnMetadata | None, producer_id: int, producer_epoch: int
    ) -> str:
        if meta is None or meta.producer_id != producer_id:
            return INVALID_PRODUCER_ID_MAPPING
        if meta.producer_epoch != producer_epoch:
            return PRODUCER_FENCED
        if meta.pending is not None or meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return CONCURRENT_TRANSACTIONS
        if meta.state in (S.DEAD, S.PREPARE_EPOCH_FENCE):
            return CONCURRENT_TRANSACTIONS
        return NONE

    def add_partitions(
        self, request_id: int, transactional_id: str, producer_id: int, producer_epoch: int,
        partitions: Iterable[tuple[str, int]], now_ms: int, deadline_ms: int | None = None,
    ) -> list[Action]:  # fmt: skip
        """The partitions join the transaction (it becomes Ongoing), written before the
        answer, so that a new coordinator knows where to send the markers.

        A request that meets the previous transaction completing (its markers or its
        Complete* record being written) is held until that is done, at most
        add.partitions.to.txn.retry.backoff.max.ms (`deadline_ms` once held), then
        taken up again; only past that is it answered CONCURRENT_TRANSACTIONS. Kafka's
        own server-side retry of this wait (KIP-890's add.partitions.to.txn.retry.*),
        instead of the client's backoff (20 ms in librdkafka and the Java client)."""
        shard, error = self.shard_for(transactional_id)
        if shard is None:
            return self._reject(request_id, error)
        meta = shard.txns.get(transactional_id)
        error = self._check_producer(shard, meta, producer_id, producer_epoch)
        wanted = set(partitions)
        if error == CONCURRENT_TRANSACTIONS and meta is not None and shard.completing(meta):
            wait_ms = self.config.add_partitions_to_txn_retry_backoff_max_ms
            if deadline_ms is None and wait_ms > 0:
                deadline_ms = now_ms + wait_ms
            if deadline_ms is not None and now_ms < deadline_ms:
                held = deadline_ms

                def retry(now: int) -> None:
                    shard.take_into(
                        self.add_partitions(
                            request_id, transactional_id, producer_id, producer_epoch,
                            wanted, now, held,
                        )
                    )  # fmt: skip

                shard.park(transactional_id, Parked(request_id, held, retry))
                return shard.take()
        if error != NONE or meta is None:
            shard.respond(request_id, error)
            return shard.take()
        if meta.state is S.ONGOING and wanted <= meta.partitions:
            shard.respond(request_id, NONE, meta)
            return shard.take()
        value = meta.prepare(S.ONGOING, now_ms, partitions=meta.partitions | wanted)
        self._write_then_answer(shard, meta, value, request_id)
        return shard.take()

    def add_offsets(
        self, request_id: int, transactional_id: str, producer_id: int, producer_epoch: int,
        group_id: str, now_ms: int,
    ) -> list[Action]:  # fmt: skip
        """The group's `__consumer_offsets` partition joins the transaction (its
        TxnOffsetCommits become visible with the COMMIT marker there)."""
        partition = offsets_partition_for(group_id, self.config.offsets_topic_num_partitions)
        return self.add_partitions(
            request_id, transactional_id, producer_id, producer_epoch,
            [(OFFSETS_TOPIC, partition)], now_ms,
        )  # fmt: skip

    # --- AddPartitionsToTxn v4+ VerifyOnly (KIP-890) ------------------------------------

    def verify_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int,
        partitions: Iterable[tuple[str, int]],
    ) -> dict[tuple[str, int], str]:  # fmt: skip
        """Whether each partition is in the producer's ongoing transaction at this
        epoch, from the state alone (nothing is written): a partition leader asks it
        before a transactional batch opens a transaction there (Kafka's
        handleVerifyPartitionsInTransaction). A pending write is not looked at: the
        leader's append is checked again against its verification guard."""
        wanted = list(partitions)
        if not transactional_id:
            return dict.fromkeys(wanted, INVALID_REQUEST)
        shard, error = self.shard_for(transactional_id)
        if shard is None:
            return dict.fromkeys(wanted, error)
        meta = shard.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return dict.fromkeys(wanted, INVALID_PRODUCER_ID_MAPPING)
        if meta.producer_epoch != producer_epoch:
            return dict.fromkeys(wanted, PRODUCER_FENCED)
        if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            return dict.fromkeys(wanted, CONCURRENT_TRANSACTIONS)
        # The partitions are removed when Complete* is written, so a finished
        # transaction verifies none.
        return {tp: NONE if tp in meta.partitions else TRANSACTION_ABORTABLE for tp in wanted}

    # --- EndTxn -----------------------------------------------------------------------

    def end_txn(
        self, request_id: int, transactional_id: str, producer_id: int, producer_epoch: int,
        commit: bool, now_ms: int,
    ) -> list[Action]:  # fmt: skip
        shard, error = self.shard_for(transactional_id)
        if shard is None:
            return self._reject(request_id, error)
        meta = shard.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            shard.respond(request_id, INVALID_PRODUCER_ID_MAPPING)
        elif meta.producer_epoch != producer_epoch:
            shard.respond(request_id, PRODUCER_FENCED)
        elif meta.pending is not None:
            shard.respond(request_id, CONCURRENT_TRANSACTIONS)
        elif meta.state is S.ONGOING:
            self._prepare_end(shard, meta, commit, now_ms, request_id)
        elif meta.state in (S.COMPLETE_COMMIT, S.COMPLETE_ABORT):
            # A retry of an EndTxn already carried out answers as it did.
            same = (meta.state is S.COMPLETE_COMMIT) == commit
            shard.respond(request_id, NONE if same else INVALID_TXN_STATE, meta)
        elif meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
            same = (meta.state is S.PREPARE_COMMIT) == commit
            shard.respond(request_id, CONCURRENT_TRANSACTIONS if same else INVALID_TXN_STATE)
        else:  # Empty (nothing to end), Dead, PrepareEpochFence
            shard.respond(request_id, INVALID_TXN_STATE)
        return shard.take()

    def _prepare_end(
        self, shard: TxnShard, meta: TxnMetadata, commit: bool, now_ms: int,
        request_id: int | None, producer_epoch: int | None = None,
    ) -> None:  # fmt: skip
        """Write PrepareCommit / PrepareAbort; once acknowledged the client (if any) is
        answered and the markers go out."""
        target = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        value = meta.prepare(target, now_ms, producer_epoch=producer_epoch)

        def done(error: str, _now: int) -> None:
            if error == NONE:
                meta.complete()
                if request_id is not None:
                    shard.respond(request_id, NONE, meta)
                shard.send_markers(meta)
            else:
                meta.abandon_pending()
                if request_id is not None:
                    shard.respond(request_id, write_error(error))

        shard.write(meta, value, done)

    def _abort_fencing(self, shard: TxnShard, meta: TxnMetadata, now_ms: int) -> None:
        """Kafka's prepareFenceProducerEpoch + abort: the open transaction is aborted
        under the next epoch, so its producer's later writes and EndTxn are fenced."""
        bumped = meta.next_epoch()
        epoch = bumped[1] if bumped is not None else meta.producer_epoch
        self._prepare_end(shard, meta, False, now_ms, None, producer_epoch=epoch)

    # --- timers -----------------------------------------------------------------------

    def tick(self, now_ms: int) -> list[Action]:
        """Abort transactions open past their timeout; expire transactional ids idle
        for transactional.id.expiration.ms; take up unfinished Prepare* transactions."""
        out: list[Action] = []
        expiration = self.config.transactional_id_expiration_ms
        for shard in list(self.shards.values()):
            if shard.loading:
                continue
            for meta in list(shard.txns.values()):
                if meta.pending is not None:
                    continue
                if meta.state is S.ONGOING and now_ms >= meta.start_ms + meta.timeout_ms:
                    self._abort_fencing(shard, meta, now_ms)
                elif (
                    meta.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
                    and now_ms >= meta.last_update_ms + expiration
                ):
                    self._expire(shard, meta, now_ms)
            shard.retry_unfinished()
            shard.expire_parked(now_ms)
            out += shard.take()
        return out

    def expire_parked(self, now_ms: int) -> list[Action]:
        """Answer the held requests past their deadline (CONCURRENT_TRANSACTIONS)."""
        out: list[Action] = []
        for shard in self.shards.values():
            shard.expire_parked(now_ms)
            out += shard.take()
        return out

    def next_parked_deadline(self) -> int | None:
        """The earliest deadline of a held request, if any (the shell's next wake-up)."""
        deadlines = [d for s in self.shards.values() if (d := s.next_parked_deadline()) is not None]
        return min(deadlines) if deadlines else None

    def _expire(self, shard: TxnShard, meta: TxnMetadata, now_ms: int) -> None:
        meta.prepare(S.DEAD, now_ms)

        def done(error: str, _now: int) -> None:
            if error == NONE and shard.txns.get(meta.transactional_id) is meta:
                del shard.txns[meta.transactional_id]
            else:
                meta.abandon_pending()

        shard.write(meta, None, done)

    # --- DescribeTransactions, ListTransactions ---------------------------------------

    def describe(self, transactional_id: str) -> tuple[str, TxnMetadata | None]:
        shard, error = self.shard_for(transactional_id)
        if shard is None:
            return error, None
        meta = shard.txns.get(transactional_id)
        return (NONE, meta) if meta is not None else ("TRANSACTIONAL_ID_NOT_FOUND", None)

    def list_transactions(
        self, state_filters: set[str], producer_ids: set[int]
    ) -> tuple[str, list[TxnMetadata], list[str]]:
        """Every loaded transactional id (Kafka's ListTransactions), filtered by Kafka's
        state names and producer ids when given: (error, the transactions, the state
        filters that name no state). Filters naming only unknown states match none."""
        known = {s.kafka_name for s in TxnState}
        states = state_filters & known
        unknown = sorted(state_filters - known)
        error = NONE
        found = []
        for shard in self.shards.values():
            if shard.loading:
                error = COORDINATOR_LOAD_IN_PROGRESS
                continue
            for meta in shard.txns.values():
                if states and meta.state.kafka_name not in states:
                    continue
                if producer_ids and meta.producer_id not in producer_ids:
                    continue
                found.append(meta)
        if state_filters and not states:
            found = []  # only unknown states asked for: none match
        return error, sorted(found, key=lambda m: m.transactional_id), unknown
