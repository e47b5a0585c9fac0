"""The transaction coordinator in a node: the I/O shell around the pure
`TransactionCoordinator` (transaction_coordinator.py), as node/groups/offsets_topic.py
is the group coordinator's.

It follows the metadata: when this node becomes leader of a `__transaction_state`
partition it starts a shard and loads it (once the partition's high watermark reached
the log end the new leader found, every record below it is replayed; until then the
shard answers COORDINATOR_LOAD_IN_PROGRESS); when it stops leading one, the shard is
unloaded. Appends go to the replica manager with acks=all and the shard's leader epoch
(an append under any other epoch is refused), awaited in order by one waiter thread per
partition; markers go out through the MarkerSender. A ticker thread runs the timers
every transaction.abort.timed.out.transaction.cleanup.interval.ms, and wakes sooner
for the deadline of a request the coordinator holds (add.partitions.to.txn.retry.
backoff.max.ms)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future

from seglog.controller.metadata_image import MetadataImage
from seglog.controller.metadata_records import MetadataRecord, ProducerIdsRecord

# The plain wall clock, as the group coordinator's (docs/disk-and-clock-faults.md).
from seglog.storage.disk_and_clock import plain_wall_ms as now_ms
from seglog.storage.record_batch import BatchHeader, NewRecord, build_batch, decode_records

from ..coordinator_shell import (
    CoordinatorShell,
    follow_leadership,
    led_partitions,
)
from ..event_log import EventLogger
from ..replica_manager import ReplicaManager
from .marker_sender import MarkerSender
from .transaction_coordinator import TransactionCoordinator
from .txn_metadata import TxnMetadata
from .txn_records import TRANSACTION_STATE_TOPIC, TxnRecordError
from .txn_shard import (
    COORDINATOR_NOT_AVAILABLE,
    NOT_COORDINATOR,
    Action,
    Append,
    Respond,
    SendMarkers,
    TxnResult,
    TxnShard,
)

_log = EventLogger("txn_coordinator")

WRITE_TIMEOUT_MS = 5_000

Call = Callable[[int, int], list[Action]]  # request id, now


# How long a listener (Kafka's or gRPC's) waits for the coordinator's answer.
ANSWER_TIMEOUT_S = 30.0


def wait_txn_answer(future: Future[TxnResult]) -> TxnResult:
    """The coordinator's answer, or COORDINATOR_NOT_AVAILABLE (retriable) if none came
    within ANSWER_TIMEOUT_S."""
    try:
        return future.result(timeout=ANSWER_TIMEOUT_S)
    except TimeoutError:
        return TxnResult(COORDINATOR_NOT_AVAILABLE)


class TransactionCoordinatorRuntime(CoordinatorShell[TxnResult]):
    def __init__(
        self,
        node_id: int,
        replica_manager: ReplicaManager,
        coordinator: TransactionCoordinator,
        markers: MarkerSender,
        tick_interval_ms: int = 10_000,
    ) -> None:
        super().__init__("txn", tick_interval_ms / 1000)
        self.topic = TRANSACTION_STATE_TOPIC
        self.events, self.load_failed_event = _log, "load_transactions_failed"
        self.node_id = node_id
        self.replica_manager = replica_manager
        self.coordinator = coordinator
        self.markers = markers
        self.topic_known = False  # whether the metadata has __transaction_state yet
        self._wake = threading.Event()  # a held request's deadline may be sooner now

    # --- lifecycle ------------------------------------------------------------------

    def shutdown(self) -> None:
        self._stopped.set()
        self._wake.set()
        super().shutdown()
        self.markers.shutdown()

    def _tick_loop(self) -> None:
        """The timers every tick interval; in between, held requests past their
        deadline are answered."""
        next_tick = now_ms() + int(self._tick_s * 1000)
        while not self._stopped.is_set():
            with self._lock:
                deadline = self.coordinator.next_parked_deadline()
            wake_at = next_tick if deadline is None else min(next_tick, deadline)
            self._wake.wait(max(0.0, (wake_at - now_ms()) / 1000))
            self._wake.clear()
            if self._stopped.is_set():
                return
            now = now_ms()
            with self._lock:
                self._carry_out(self.coordinator.expire_parked(now))
                if now >= next_tick:
                    self._carry_out(self._tick())
                    next_tick = now + int(self._tick_s * 1000)

    def _tick(self) -> list[Action]:
        return self.coordinator.tick(now_ms())

    # --- following the metadata -----------------------------------------------------

    def on_metadata(self, image: MetadataImage, records: list[MetadataRecord]) -> None:
        if records and all(isinstance(r, ProducerIdsRecord) for r in records):
            # A block of producer ids moves no leadership. A single node's controller
            # commits it, and calls its listeners, inside init_producer_id, under this
            # runtime's lock: taking the lock here would deadlock.
            return
        led = led_partitions(image, TRANSACTION_STATE_TOPIC, self.node_id)
        with self._lock:
            out, to_load = follow_leadership(
                self.coordinator, led or {}, lambda p: _log.info("unload_transactions", partition=p)
            )
            self.topic_known = led is not None
            self._carry_out(out)
        self._start_loads(to_load)

    def _replay(
        self, shard: TxnShard, data: bytes, batches: Sequence[tuple[int, BatchHeader]]
    ) -> int | None:
        """Replay one read's records into the shard (markers are not its records)."""
        records = 0
        with self._lock:
            if not self._current(shard):
                return None
            for pos, header in batches:
                if header.is_control:
                    continue
                for r in decode_records(data, pos, header):
                    try:
                        shard.replay(r.key or b"", r.value)
                        records += 1
                    except TxnRecordError as e:
                        _log.error("txn_record_undecodable", partition=shard.partition, why=str(e))
        return records

    def _loaded(self, shard: TxnShard, records: int, ms: int) -> None:
        with self._lock:
            if self._current(shard) and shard.loading:
                self._carry_out(self.coordinator.finish_loading(shard))
        _log.info(
            "loaded_transactions",
            partition=shard.partition,
            epoch=shard.leader_epoch,
            records=records,
        )

    # --- requests -------------------------------------------------------------------

    def submit(self, transactional_id: str, call: Call) -> Future[TxnResult]:
        answer: Future[TxnResult] = Future()
        with self._lock:
            rid = self._park(answer) if self.topic_known else None
            if rid is None:
                answer.set_result(TxnResult(COORDINATOR_NOT_AVAILABLE))
                return answer
            self._carry_out(call(rid, now_ms()))
            if self.coordinator.next_parked_deadline() is not None:
                self._wake.set()
        return answer

    def request(self, transactional_id: str, method: str, *args: object) -> Future[TxnResult]:
        """One of the coordinator's requests — init_producer_id, add_partitions,
        add_offsets, end_txn — with its arguments after the transactional id (the
        request id before it and the time after them are added here)."""
        call = getattr(self.coordinator, method)
        return self.submit(
            transactional_id, lambda rid, now: call(rid, transactional_id, *args, now)
        )

    def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[tuple[str, int]],
    ) -> dict[tuple[str, int], str]:
        """AddPartitionsToTxn VerifyOnly: answered from the state now, nothing written."""
        with self._lock:
            errors = self.coordinator.verify_partitions(
                transactional_id, producer_id, producer_epoch, partitions
            )
            if not self.topic_known:
                errors = {
                    tp: COORDINATOR_NOT_AVAILABLE if e == NOT_COORDINATOR else e
                    for tp, e in errors.items()
                }
            return errors

    def describe(self, transactional_id: str) -> tuple[str, TxnMetadata | None]:
        with self._lock:
            error, meta = self.coordinator.describe(transactional_id)
            if error == NOT_COORDINATOR and not self.topic_known:
                error = COORDINATOR_NOT_AVAILABLE
            return error, meta

    def list_transactions(
        self, state_filters: set[str], producer_ids: set[int]
    ) -> tuple[str, list[TxnMetadata], list[str]]:
        with self._lock:
            return self.coordinator.list_transactions(state_filters, producer_ids)

    # --- carrying out ---------------------------------------------------------------

    def _carry_out(self, actions: list[Action]) -> None:
        """Under the lock: answers resolve their Futures; appends are made now, in
        order, and awaited on the partition's waiter; markers go to the sender."""
        for a in actions:
            if isinstance(a, Respond):
                self._resolve(a.request_id, a.result)
            elif isinstance(a, Append):
                self._append(a)
            elif isinstance(a, SendMarkers):
                self._send_markers(a)

    def _send_markers(self, m: SendMarkers) -> None:
        def done(error: str) -> None:
            with self._lock:
                self._carry_out(
                    self.coordinator.on_markers_done(
                        m.partition, m.coordinator_epoch, m.transactional_id,
                        m.producer_id, m.producer_epoch, error, now_ms(),
                    )
                )  # fmt: skip

        self.markers.send(m, done)

    def _append(self, a: Append) -> None:
        data = build_batch([NewRecord(a.value, a.key)], now_ms=now_ms())
        tp = (TRANSACTION_STATE_TOPIC, a.partition)
        self._append_and_report(
            self.replica_manager, tp, a.leader_epoch, a.write_id, data, WRITE_TIMEOUT_MS
        )
