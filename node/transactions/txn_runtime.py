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
every transaction.abort.timed.out.transaction.cleanup.interval.ms."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future

from seglog.controller.metadata_image import MetadataImage
from seglog.controller.metadata_records import MetadataRecord

# The plain wall clock, as the group coordinator's (docs/disk-and-clock-faults.md).
from seglog.storage.disk_and_clock import plain_wall_ms as now_ms
from seglog.storage.record_batch import NewRecord, build_batch, decode_records, iter_batches

from ..coordinator_shell import (
    CoordinatorShell,
    follow_leadership,
    led_partitions,
    loadable_range,
    read_at,
)
from ..event_log import EventLogger
from ..replica_manager import ReplicaManager
from .marker_sender import MarkerSender
from .transaction_coordinator import TransactionCoordinator
from .txn_metadata import TxnMetadata
from .txn_records import TRANSACTION_STATE_TOPIC, TxnRecordError
from .txn_shard import (
    COORDINATOR_NOT_AVAILABLE,
    NONE,
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
        self.node_id = node_id
        self.replica_manager = replica_manager
        self.coordinator = coordinator
        self.markers = markers
        self.topic_known = False  # whether the metadata has __transaction_state yet

    # --- lifecycle ------------------------------------------------------------------

    def shutdown(self) -> None:
        super().shutdown()
        self.markers.shutdown()

    def _tick(self) -> list[Action]:
        return self.coordinator.tick(now_ms())

    # --- following the metadata -----------------------------------------------------

    def on_metadata(self, image: MetadataImage, _records: list[MetadataRecord]) -> None:
        led = led_partitions(image, TRANSACTION_STATE_TOPIC, self.node_id)
        with self._lock:
            out, to_load = follow_leadership(
                self.coordinator, led or {}, lambda p: _log.info("unload_transactions", partition=p)
            )
            self.topic_known = led is not None
            self._carry_out(out)
        self._start_loads(to_load)

    def _load(self, shard: TxnShard) -> None:
        """Replay the partition into the shard (coordinator_shell.loadable_range)."""
        tp = (TRANSACTION_STATE_TOPIC, shard.partition)

        def current() -> bool:
            with self._lock:
                return self._current(shard)

        found = loadable_range(self.replica_manager, tp, shard.leader_epoch, current, self._stopped)
        if found is None:
            return
        offset, end = found
        records = 0
        while offset < end:
            result = read_at(self.replica_manager, tp, shard.leader_epoch, offset)
            if result.error_name != NONE:
                _log.warning("load_transactions_failed", partition=tp[1], error=result.error_name)
                return  # a newer leadership loads again (or unloads)
            data = bytes(result.records)
            if not data:
                break
            with self._lock:
                if not self._current(shard):
                    return
                for pos, header in iter_batches(data):
                    if header.last_offset < offset:
                        continue
                    offset = header.last_offset + 1
                    if header.is_control:
                        continue
                    for r in decode_records(data, pos, header):
                        try:
                            shard.replay(r.key or b"", r.value)
                            records += 1
                        except TxnRecordError as e:
                            _log.error("txn_record_undecodable", partition=tp[1], why=str(e))
        with self._lock:
            if self._current(shard) and shard.loading:
                self._carry_out(self.coordinator.finish_loading(shard))
        _log.info("loaded_transactions", partition=tp[1], epoch=shard.leader_epoch, records=records)

    # --- requests -------------------------------------------------------------------

    def submit(self, transactional_id: str, call: Call) -> Future[TxnResult]:
        answer: Future[TxnResult] = Future()
        with self._lock:
            rid = self._park(answer) if self.topic_known else None
            if rid is None:
                answer.set_result(TxnResult(COORDINATOR_NOT_AVAILABLE))
                return answer
            self._carry_out(call(rid, now_ms()))
        return answer

    def request(self, transactional_id: str, method: str, *args: object) -> Future[TxnResult]:
        """One of the coordinator's requests — init_producer_id, add_partitions,
        add_offsets, end_txn — with its arguments after the transactional id (the
        request id before it and the time after them are added here)."""
        call = getattr(self.coordinator, method)
        return self.submit(
            transactional_id, lambda rid, now: call(rid, transactional_id, *args, now)
        )

    def describe(self, transactional_id: str) -> tuple[str, TxnMetadata | None]:
        with self._lock:
            error, meta = self.coordinator.describe(transactional_id)
            if error == NOT_COORDINATOR and not self.topic_known:
                error = COORDINATOR_NOT_AVAILABLE
            return error, meta

    def list_transactions(
        self, states: set[str], producer_ids: set[int]
    ) -> tuple[str, list[TxnMetadata]]:
        with self._lock:
            return self.coordinator.list_transactions(states, producer_ids)

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
