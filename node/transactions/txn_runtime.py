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

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

from seglog.controller.metadata_image import MetadataImage
from seglog.controller.metadata_records import MetadataRecord

# The plain wall clock, as the group coordinator's (docs/disk-and-clock-faults.md).
from seglog.storage.disk_and_clock import plain_wall_ms as now_ms
from seglog.storage.record_batch import NewRecord, build_batch, decode_records, iter_batches

from ..event_log import EventLogger
from ..replica_manager import FetchSpec, ReplicaManager
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

LOAD_POLL_S = 0.05
LOAD_READ_BYTES = 1 << 20
WRITE_TIMEOUT_MS = 5_000
MAX_WAITING = 50_000  # requests awaiting an answer; beyond: COORDINATOR_NOT_AVAILABLE

Call = Callable[[int, int], list[Action]]  # request id, now


class TransactionCoordinatorRuntime:
    def __init__(
        self,
        node_id: int,
        replica_manager: ReplicaManager,
        coordinator: TransactionCoordinator,
        markers: MarkerSender,
        tick_interval_ms: int = 10_000,
    ) -> None:
        self.node_id = node_id
        self.replica_manager = replica_manager
        self.coordinator = coordinator
        self.markers = markers
        self.tick_interval_ms = tick_interval_ms
        self._lock = threading.Lock()
        self._answers: dict[int, Future[TxnResult]] = {}
        self._next_request = 0
        self._waiters: dict[int, ThreadPoolExecutor] = {}
        self._stopped = threading.Event()
        self._ticker: threading.Thread | None = None
        self.topic_known = False  # whether the metadata has __transaction_state yet

    # --- lifecycle ------------------------------------------------------------------

    def start(self) -> None:
        self._ticker = threading.Thread(target=self._tick_loop, name="txn-ticks", daemon=True)
        self._ticker.start()

    def shutdown(self) -> None:
        self._stopped.set()
        with self._lock:
            out: list[Action] = []
            for p in list(self.coordinator.shards):
                out += self.coordinator.unload(p)
            self._carry_out(out)
        if self._ticker is not None:
            self._ticker.join(timeout=5)
        self.markers.shutdown()
        for waiter in list(self._waiters.values()):
            waiter.shutdown(wait=False, cancel_futures=True)

    def _tick_loop(self) -> None:
        while not self._stopped.wait(self.tick_interval_ms / 1000):
            with self._lock:
                self._carry_out(self.coordinator.tick(now_ms()))

    # --- following the metadata -----------------------------------------------------

    def on_metadata(self, image: MetadataImage, _records: list[MetadataRecord]) -> None:
        topic = image.topics.get(TRANSACTION_STATE_TOPIC)
        led: dict[int, int] = {}
        if topic is not None:
            for p, state in topic.partitions.items():
                if state.leader == self.node_id:
                    led[p] = state.leader_epoch
        to_load = []
        with self._lock:
            out: list[Action] = []
            for p in [p for p in self.coordinator.shards if p not in led]:
                _log.info("unload_transactions", partition=p)
                out += self.coordinator.unload(p)
            for p, epoch in led.items():
                shard = self.coordinator.shards.get(p)
                if shard is None or shard.leader_epoch != epoch:
                    shard, unloaded = self.coordinator.begin_loading(p, epoch)
                    out += unloaded
                    to_load.append(shard)
            self.topic_known = topic is not None
            self._carry_out(out)
        for shard in to_load:
            threading.Thread(
                target=self._load, args=(shard,), name=f"txn-load-{shard.partition}", daemon=True
            ).start()

    def _current(self, shard: TxnShard) -> bool:
        return self.coordinator.shards.get(shard.partition) is shard

    def _load(self, shard: TxnShard) -> None:
        """Replay the partition into the shard once the HW reached the log end this
        leader found; aborted writes (none are transactional here) do not occur."""
        tp = (TRANSACTION_STATE_TOPIC, shard.partition)
        end = -1
        offset = 0
        while not self._stopped.is_set():
            with self._lock:
                if not self._current(shard):
                    return
            hp = self.replica_manager.hosted(tp)
            if hp is not None and hp.replica.is_leader and hp.leader_epoch == shard.leader_epoch:
                with hp.plog.lock:
                    end = hp.plog.log.log_end_offset if end < 0 else end
                    hw, offset = hp.plog.log.high_watermark, hp.plog.log.log_start_offset
                if hw >= end:
                    break
            time.sleep(LOAD_POLL_S)
        else:
            return
        records = 0
        while offset < end:
            spec = FetchSpec(tp[0], tp[1], offset, shard.leader_epoch, LOAD_READ_BYTES)
            result = self.replica_manager.fetch(
                [spec], replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=LOAD_READ_BYTES
            )[0]
            data = bytes(result.records)
            if result.error_name != NONE or not data:
                if result.error_name != NONE:
                    _log.warning(
                        "load_transactions_failed", partition=tp[1], error=result.error_name
                    )
                    return  # a newer leadership loads again (or unloads)
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
            if len(self._answers) >= MAX_WAITING:
                answer.set_result(TxnResult(COORDINATOR_NOT_AVAILABLE))
                return answer
            if not self.topic_known:
                answer.set_result(TxnResult(COORDINATOR_NOT_AVAILABLE))
                return answer
            self._next_request += 1
            rid = self._next_request
            self._answers[rid] = answer
            self._carry_out(call(rid, now_ms()))
        return answer

    def init_producer_id(
        self, transactional_id: str, timeout_ms: int, producer_id: int, producer_epoch: int
    ) -> Future[TxnResult]:
        c = self.coordinator
        return self.submit(
            transactional_id,
            lambda rid, now: c.init_producer_id(
                rid, transactional_id, timeout_ms, producer_id, producer_epoch, now
            ),
        )

    def add_partitions(
        self, transactional_id: str, producer_id: int, producer_epoch: int,
        partitions: list[tuple[str, int]],
    ) -> Future[TxnResult]:  # fmt: skip
        c = self.coordinator
        return self.submit(
            transactional_id,
            lambda rid, now: c.add_partitions(
                rid, transactional_id, producer_id, producer_epoch, partitions, now
            ),
        )

    def add_offsets(
        self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str
    ) -> Future[TxnResult]:
        c = self.coordinator
        return self.submit(
            transactional_id,
            lambda rid, now: c.add_offsets(
                rid, transactional_id, producer_id, producer_epoch, group_id, now
            ),
        )

    def end_txn(
        self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool
    ) -> Future[TxnResult]:
        c = self.coordinator
        return self.submit(
            transactional_id,
            lambda rid, now: c.end_txn(
                rid, transactional_id, producer_id, producer_epoch, commit, now
            ),
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
                future = self._answers.pop(a.request_id, None)
                if future is not None and not future.done():
                    future.set_result(a.result)
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
        started = self.replica_manager.start_produce_all(
            [((TRANSACTION_STATE_TOPIC, a.partition), data)],
            -1,
            WRITE_TIMEOUT_MS,
            leader_epoch=a.leader_epoch,
        )

        def wait() -> None:
            try:
                error = self.replica_manager.await_produced(started)[0].error_name
            except Exception:  # noqa: BLE001 - reported to the coordinator as a failure
                _log.error("txn_write_failed", exc=True, partition=a.partition)
                error = "UNKNOWN_SERVER_ERROR"
            with self._lock:
                self._carry_out(
                    self.coordinator.on_write_done(
                        a.partition, a.leader_epoch, a.write_id, error, now_ms()
                    )
                )

        waiter = self._waiters.get(a.partition)
        if waiter is None:
            waiter = ThreadPoolExecutor(1, thread_name_prefix=f"txn-writes-{a.partition}")
            self._waiters[a.partition] = waiter
        try:
            waiter.submit(wait)
        except RuntimeError:  # shut down: never acknowledged
            pass
