"""The partitions this node hosts: the I/O shell around one
`seglog.replication.partition_replica.PartitionReplica` per partition.

It feeds the replicas their events (metadata, produce, follower and consumer
fetches, ticks, fetch answers from leaders, AlterPartition answers) and carries
out what they decide: answering parked acks=-1 produces, waking long-polling
fetches when the high watermark moves, and sending ISR changes to the
controller. Followers pull with one fetcher thread per leader node.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from seglog.controller.metadata_image import MetadataImage, PartitionState
from seglog.controller.metadata_records import (
    BROKER_RESOURCE,
    BrokerFenceRecord,
    ConfigRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from seglog.proto import client_pb2 as pb
from seglog.replication import partition_replica as pr
from seglog.replication.isr_deadlines import IsrDeadlines
from seglog.replication.throttle import LONG_MAX, WINDOW_MS, WINDOW_NUM

# The replicas' timer clock: monotonic, so a wall clock stepped back cannot stall fetch
# backoffs and ISR checks, nor one stepped forward shrink every ISR at once (the log's own
# times stay wall time: PartitionReplica.log_clock).
from seglog.storage.disk_and_clock import monotonic_ms as now_ms
from seglog.storage.disk_and_clock import plain_monotonic_s, plain_perf_s
from seglog.storage.errors import KafkaStorageError, StorageError
from seglog.storage.log_config import LogConfig
from seglog.storage.log_txns import TxnMarkerAppend
from seglog.storage.producer_state import AppendOrigin
from seglog.storage.txn_verification import VerificationGuard

from . import request_timing
from .alter_partition_manager import AlterPartitionManager, BatchSender
from .delete_records import delete_records
from .doubt_refusals import DoubtRefusals
from .event_log import EventLogger
from .fetch_session import DEFAULT_SLOTS as DEFAULT_SESSION_SLOTS
from .fetch_session import FetchSessionCache
from .fetch_wakeups import FetchWaiter, FetchWakeups
from .hosted_partition import HostedPartition, PartitionError, TopicPartition
from .liveness import StallWatchdog
from .log_manager import LogManager
from .message_flusher import MessageFlusher
from .partition_reads import PartitionReads
from .partition_requests import FetchResult, FetchSpec, OffsetResult, ProduceResult, ReplicaMetrics
from .produce_errors import ProduceErrorLog
from .produce_purgatory import Pending, ProducePurgatory, StartedProduce
from .replica_fetcher import FetcherRounds, NewFetcher, grpc_fetcher
from .replica_timers import TIMER_LOOP, ReplicaTimers
from .replication_throttles import ReplicationThrottles
from .session_fetch import SessionFetch

_log = EventLogger("replica_manager")

LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3


class ReplicaManager(ReplicaTimers):
    def __init__(
        self,
        node_id: int,
        log_manager: LogManager,
        topic_config: Callable[[str], LogConfig],
        *,
        replica_lag_time_max_ms: int = 30_000,
        replica_fetch_max_bytes: int = 1 << 20,
        replica_fetch_backoff_ms: int = 1_000,
        address_of: Callable[[int], tuple[str, int] | None] = lambda _n: None,
        alter_partitions: BatchSender | None = None,
        is_replica_eligible: Callable[[int, int], bool] | None = None,
        fetch_session_slots: int = DEFAULT_SESSION_SLOTS,
        new_fetcher: NewFetcher = grpc_fetcher(None),
        leader_replication_throttled_rate: int = LONG_MAX,
        follower_replication_throttled_rate: int = LONG_MAX,
        quota_window_num: int = WINDOW_NUM,
        quota_window_size_ms: int = WINDOW_MS,
    ) -> None:
        self.node_id = node_id
        # Replication throttles (Kafka's ReplicationQuotaManager): bytes/s this node
        # sends to (leader) or fetches from (follower) out-of-sync throttled replicas.
        self.throttles = ReplicationThrottles(
            node_id,
            now_ms,
            leader_rate=leader_replication_throttled_rate,
            follower_rate=follower_replication_throttled_rate,
            window_num=quota_window_num,
            window_size_ms=quota_window_size_ms,
        )
        self.new_fetcher = new_fetcher  # the wire followers fetch over
        self.log_manager = log_manager
        self.topic_config = topic_config
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.replica_fetch_max_bytes = replica_fetch_max_bytes
        self.replica_fetch_backoff_ms = replica_fetch_backoff_ms
        self.address_of = address_of
        self._alter_partitions = (
            AlterPartitionManager(alter_partitions, self._on_alter_partition_response)
            if alter_partitions is not None
            else None
        )
        self.is_replica_eligible = is_replica_eligible
        self.broker_epoch = -1
        self._partitions: dict[TopicPartition, HostedPartition] = {}
        self._lock = threading.Lock()
        # Long-polling fetches wait on the partitions they name (Kafka's purgatory keys).
        self.wakeups = FetchWakeups()
        self._produces = ProducePurgatory()  # acks=-1 produces awaiting their ISR
        self.metrics: ReplicaMetrics | None = None  # set by the node
        self._reads = PartitionReads(
            self._hosted_or_error,
            self._schedule_isr,
            self._carry_out,
            self.throttles,
            lambda: self.metrics,
            now_ms,
        )
        # Both listeners report each refused partition of a Produce answer here.
        self.produce_errors = ProduceErrorLog()
        self._isr_proposals: dict[TopicPartition, tuple[int, int]] = {}
        self._fetchers: dict[int, FetcherRounds] = {}
        # Partitions with parked acks=-1 produces: ticked every TICK_S for timeouts.
        self._ticking: set[TopicPartition] = set()
        self._sessions = FetchSessionCache(
            fetch_session_slots, on_evict=lambda s: self.wakeups.forget(s.waiter)
        )
        # Leaders' ISR timers: ticked when due (a follower behind, an AlterPartition to
        # re-send, a follower node silent for the lag), not swept (isr_deadlines).
        self._deadlines: IsrDeadlines[TopicPartition] = IsrDeadlines()
        self._deadlines_lock = threading.Lock()
        self._stopped = threading.Event()
        self._ticker: threading.Thread | None = None
        # Beaten by the timer loop each round: a loop stuck (behind a partition lock held
        # across a hung disk write, say) tells the broker it cannot serve.
        self.watchdog: StallWatchdog | None = None
        self.own_stall_s: Callable[[float], float] | None = None
        self._stalled_at_ms = pr.NEVER
        # Why this node must not take produces as a leader now (its controller process
        # silent: fenced without knowing it), or None.
        self.leadership_doubt: Callable[[], str | None] | None = None
        self._doubt_refusals = DoubtRefusals()  # what it refused: the batches behind too
        # flush.messages' fsyncs, off the loop (each log defers them: see FlushLog).
        self._flusher = MessageFlusher(log_manager, self._on_flushed)

    def in_doubt(self) -> str | None:
        """Why this node must not act as a leader now (`leadership_doubt`), or None."""
        return self.leadership_doubt() if self.leadership_doubt is not None else None

    def start(self) -> None:
        if self._alter_partitions is not None:
            self._alter_partitions.start()
        self._ticker = threading.Thread(target=self._tick_loop, name="replica-ticks", daemon=True)
        self._ticker.start()

    def shutdown(self) -> None:
        self._stopped.set()
        if self._alter_partitions is not None:
            self._alter_partitions.shutdown()
        for f in list(self._fetchers.values()):
            f.stop()
        if self._ticker is not None:
            self._ticker.join(timeout=5)
        if self.watchdog is not None:
            self.watchdog.forget(TIMER_LOOP)
        self._flusher.shutdown()
        self.wakeups.wake_all()

    # --- carrying out the replicas' decisions ---------------------------------------------

    def _carry_out(self, hp: HostedPartition, actions: Sequence[pr.Action]) -> None:
        for a in actions:
            if isinstance(a, pr.ProduceCompleted):
                self._produces.complete(a)
            elif isinstance(a, pr.HighWatermarkUpdated):
                self.wakeups.wake_for_hw((hp.tp,))
            elif isinstance(a, pr.FlushLog):
                self._flusher.request(hp)
            elif isinstance(a, pr.SendAlterPartition):
                if self._alter_partitions is not None:
                    # The ISR the change starts from, counted once the controller
                    # accepts it (one entry per partition: a new proposal replaces it).
                    self._isr_proposals[hp.tp] = (len(hp.replica.isr), len(a.new_isr))
                    self._alter_partitions.submit(hp.tp, a)

    def _on_flushed(self, hp: HostedPartition) -> None:
        """A deferred flush.messages fsync of `hp` is done: the leader's held answers
        go; a follower's fetcher sends its next fetch."""
        with hp.plog.lock:
            actions = hp.replica.on_flushed()
            leader = None if hp.replica.is_leader else hp.replica.leader_id
        self._carry_out(hp, actions)
        fetcher = self._fetchers.get(leader) if leader is not None else None
        if fetcher is not None:
            fetcher.wake(hp.tp)

    def _on_alter_partition_response(
        self, tp: TopicPartition, response: pr.AlterPartitionResponse
    ) -> None:
        hp = self.hosted(tp)
        if hp is None:
            return  # the partition left this node meanwhile
        with hp.plog.lock:
            actions = hp.replica.on_alter_partition_response(response, now_ms())
            self._schedule_isr(hp)
        proposal = self._isr_proposals.pop(tp, None)
        if self.metrics is not None and proposal is not None and response.error == "NONE":
            self.metrics.isr_changed(*proposal)
        self._carry_out(hp, actions)

    # --- following metadata -----------------------------------------------------------------

    def on_metadata(self, image: MetadataImage, records: list[MetadataRecord]) -> None:
        """Follow the metadata: with the records of one committed update, only the
        partitions they touch are visited (Kafka applies metadata as deltas); with
        none (a new image: start-up, a snapshot, changed configs) all of them."""
        if not records:
            self._apply_all(image)
            self._sync_fetchers()
        else:
            self._sync_fetchers(self._apply_delta(image, records))
            if any(isinstance(r, (RegisterBrokerRecord, BrokerFenceRecord)) for r in records):
                # A follower that caught up while its broker was fenced joins the ISRs
                # now it is eligible (an idle partition gets no fetch to trigger that).
                # (No partition lock: a time is given, the replica is not asked.)
                t = now_ms()
                for hp in self.partitions():
                    if hp.replica.is_leader:
                        self._schedule_isr(hp, t)
        self.wakeups.wake_all()  # leaders and epochs may have moved

    def _apply_all(self, image: MetadataImage) -> None:
        wanted: set[TopicPartition] = set()
        for topic in image.topics.values():
            config = self.topic_config(topic.name)
            for p, state in topic.partitions.items():
                if self.node_id not in state.replicas:
                    continue
                tp = (topic.name, p)
                wanted.add(tp)
                self._apply(tp, topic.topic_id, state, config)
        with self._lock:
            gone = [tp for tp in self._partitions if tp not in wanted]
            removed = [self._partitions.pop(tp) for tp in gone]
        for hp in removed:
            self._stop_and_delete(hp)

    def _apply_delta(
        self, image: MetadataImage, records: list[MetadataRecord]
    ) -> set[TopicPartition]:
        """Applies the partitions the records touch; returns them."""
        topics: set[str] = set()  # every partition of these
        partitions: set[TopicPartition] = set()
        removed_ids: set[str] = set()
        for r in records:
            if isinstance(r, TopicRecord):
                topics.add(r.name)
            elif isinstance(r, PartitionRecord | PartitionChangeRecord):
                name = image.topic_names_by_id.get(r.topic_id)
                if name is not None:
                    partitions.add((name, r.partition))
            elif isinstance(r, ConfigRecord):
                if r.resource_type == BROKER_RESOURCE:
                    topics.update(image.topics)  # new broker defaults: every log's config
                else:
                    topics.add(r.resource_name)
            elif isinstance(r, RemoveTopicRecord):
                removed_ids.add(r.topic_id)
        for name in topics:
            topic = image.topics.get(name)
            if topic is not None:
                partitions.update((name, p) for p in topic.partitions)
        configs: dict[str, LogConfig] = {}
        gone: list[TopicPartition] = []
        for tp in sorted(partitions):
            topic = image.topics.get(tp[0])
            state = topic.partitions.get(tp[1]) if topic is not None else None
            if topic is None or state is None or self.node_id not in state.replicas:
                gone.append(tp)
                continue
            if tp[0] not in configs:
                configs[tp[0]] = self.topic_config(tp[0])
            self._apply(tp, topic.topic_id, state, configs[tp[0]])
        with self._lock:
            if removed_ids:
                gone += [tp for tp, hp in self._partitions.items() if hp.topic_id in removed_ids]
            stopped = [self._partitions.pop(tp) for tp in set(gone) if tp in self._partitions]
        for hp in stopped:
            self._stop_and_delete(hp)
        return partitions

    def on_log_dir_offline(self, path: Path) -> None:
        """Kafka's handleLogDirFailure: the partitions in the offline directory fail
        their parked produces with KAFKA_STORAGE_ERROR (their reads and appends
        already answer it)."""
        for hp in self.partitions():
            if hp.plog.directory.path != path:
                continue
            with hp.plog.lock:
                actions = hp.replica.on_storage_failure()
            self._carry_out(hp, actions)

    def _stop_and_delete(self, hp: HostedPartition) -> None:
        """The partition left this node (or its topic was deleted): stop the replica,
        answer what waits on it, delete the log."""
        with hp.plog.lock:
            actions = hp.replica.apply_metadata(
                PartitionState((), (), -1, hp.replica.leader_epoch + 1, 1 << 30), now_ms()
            )
        self._carry_out(hp, actions)
        self.log_manager.delete(hp.tp)

    def _apply(
        self, tp: TopicPartition, topic_id: str, state: PartitionState, config: LogConfig
    ) -> None:
        with self._lock:
            hp = self._partitions.get(tp)
            if hp is not None and hp.topic_id != topic_id:
                # The topic was deleted and created again under the same name within
                # one metadata update (e.g. a restarted node replaying both).
                del self._partitions[tp]
                stale: HostedPartition | None = hp
                hp = None
            else:
                stale = None
        if stale is not None:
            self._stop_and_delete(stale)
        plog = self.log_manager.get_or_create(tp, config, topic_id)
        with plog.lock:
            if plog.log.config != config:
                plog.log.config = config
            if hp is None:
                replica = pr.PartitionReplica(
                    self.node_id,
                    plog.log,
                    pr.ReplicaConfig(
                        min_insync_replicas=config.min_insync_replicas,
                        replica_lag_time_max_ms=self.replica_lag_time_max_ms,
                        replica_fetch_max_bytes=self.replica_fetch_max_bytes,
                        replica_fetch_backoff_ms=self.replica_fetch_backoff_ms,
                    ),
                    broker_epoch=self.broker_epoch,
                    is_replica_eligible=self.is_replica_eligible,
                    session_fetch_ms=self._session_fetch_ms,
                )
                replica.log_clock = self.log_manager.clock
                replica.serving_since_ms = self._serving_since_ms
                plog.log.defer_message_flushes = True  # run by self._flusher
                # Written by the log manager's tick or the next flush job, never on the
                # loop (storage/leader_epoch_cache.py).
                plog.log.epoch_cache.defer_writes = True
                hp = HostedPartition(tp, topic_id, plog, replica)
            was_leader_epoch = hp.replica.leader_epoch
            try:
                actions = hp.replica.apply_metadata(state, now_ms())
            except KafkaStorageError as e:
                # A leader epoch checkpoint that cannot be written (6.2): the directory
                # goes offline like for any other failed write (8.1).
                plog.directory.report_io_error(e)
                raise
            # A new leadership's followers (and a follower that may have become eligible
            # to join the ISR) are looked at now; the replica schedules what follows.
            self._schedule_isr(hp, now_ms() if hp.replica.is_leader else None)
            if hp.replica.is_leader and state.leader_epoch > was_leader_epoch:
                _log.info(
                    "became_leader",
                    topic=tp[0],
                    partition=tp[1],
                    leader_epoch=state.leader_epoch,
                    log_end_offset=plog.log.log_end_offset,
                )
        with self._lock:
            self._partitions[tp] = hp
        self._carry_out(hp, actions)

    # --- replication throttles ---------------------------------------------------------

    def set_throttle_rates(self, leader: int, follower: int) -> None:
        """leader/follower.replication.throttled.rate changed (dynamic broker configs)."""
        self.throttles.set_rates(leader, follower)

    def throttled_byte_rates(self) -> tuple[float, float]:
        """(leader, follower) bytes/s of throttled replication, as the quotas measure."""
        return self.throttles.byte_rates()

    def set_broker_epoch(self, epoch: int) -> None:
        self.broker_epoch = epoch
        for hp in self.partitions():
            hp.replica.broker_epoch = epoch

    def waiting_produces(self) -> int:
        """acks=all produces waiting for their ISR (Kafka's produce purgatory)."""
        return len(self._produces)

    def waiting_fetches(self) -> int:
        """Fetches long-polling for data right now (Kafka's fetch purgatory)."""
        return self.wakeups.in_wait

    def partitions(self) -> list[HostedPartition]:
        with self._lock:
            return list(self._partitions.values())

    def hosted(self, tp: TopicPartition) -> HostedPartition | None:
        with self._lock:
            return self._partitions.get(tp)

    def _hosted_or_error(self, tp: TopicPartition) -> HostedPartition:
        hp = self.hosted(tp)
        if hp is None:
            raise PartitionError(
                "UNKNOWN_TOPIC_OR_PARTITION",
                f"partition {tp[0]}-{tp[1]} is not hosted on node {self.node_id}",
            )
        return hp

    # --- produce ---------------------------------------------------------------------------

    def produce(
        self, tp: TopicPartition, data: bytes, acks: int, timeout_ms: int = 30_000
    ) -> ProduceResult:
        return self.produce_all([(tp, data)], acks, timeout_ms)[0]

    def produce_all(
        self, items: Sequence[tuple[TopicPartition, bytes]], acks: int, timeout_ms: int = 30_000
    ) -> list[ProduceResult]:
        """One request's batches: every partition is appended first and the answers are
        awaited together (as Kafka's purgatory does), so a request's partitions
        replicate in parallel rather than one after another."""
        return self.await_produced(self.start_produce_all(items, acks, timeout_ms))

    def start_produce_all(
        self,
        items: Sequence[tuple[TopicPartition, bytes | TxnMarkerAppend]],
        acks: int,
        timeout_ms: int = 30_000,
        leader_epoch: int | None = None,
        verification_guards: Mapping[TopicPartition, VerificationGuard] | None = None,
    ) -> StartedProduce:
        """produce_all's first half: the appends, in order, now (a connection's next
        request may be appended as soon as this returns); await_produced waits.
        With `leader_epoch` (the group coordinator's writes) a partition led at any
        other epoch refuses the append with FENCED_LEADER_EPOCH. An item may be a
        transaction coordinator's marker instead of batches (WriteTxnMarkers).
        `verification_guards`: the guards of the partitions whose transactional batches
        were verified with their transaction coordinator (KIP-890)."""
        timeout_ms = max(timeout_ms, 1)
        guards = verification_guards or {}
        started = [
            (tp, self._start_produce(tp, data, acks, timeout_ms, leader_epoch, guards.get(tp)))
            for tp, data in items
        ]
        self.wakeups.wake(tp for tp, _data in items)  # followers long-poll for new data
        return StartedProduce(started, plain_monotonic_s() + timeout_ms / 1000 + 1)

    def start_transaction_verification(
        self, tp: TopicPartition, producer_id: int, producer_epoch: int, sequence: int
    ) -> tuple[str, VerificationGuard | None]:
        """(error, guard) for a transactional batch about to be verified with its
        coordinator (Kafka's maybeStartTransactionVerificationForPartition): the guard,
        or None when the producer's transaction is open here already; an error when
        this node does not lead the partition."""
        try:
            hp = self._hosted_or_error(tp)
        except PartitionError as e:
            return e.error_name, None
        with hp.plog.lock:
            if not hp.replica.is_leader:
                return "NOT_LEADER_OR_FOLLOWER", None
            guard = hp.plog.log.maybe_start_transaction_verification(
                producer_id, sequence, producer_epoch
            )
        return "NONE", guard

    def when_produced(self, produce: StartedProduce, callback: Callable[[], None]) -> None:
        """Call `callback` (from any thread) once await_produced would not block."""
        self._produces.when_answered(produce, callback)

    def await_produced(self, produce: StartedProduce) -> list[ProduceResult]:
        """produce_all's second half: each partition's answer (acks=-1: once the HW
        passed the batch), bounded by the request's timeout."""
        return self._produces.await_produced(produce, self.node_id)

    def _start_produce(
        self,
        tp: TopicPartition,
        data: bytes | TxnMarkerAppend,  # or a transaction coordinator's marker
        acks: int,
        timeout_ms: int,
        leader_epoch: int | None = None,
        verification_guard: VerificationGuard | None = None,
    ) -> Pending | ProduceResult:
        marker, data = (data, b"") if isinstance(data, TxnMarkerAppend) else (None, data)
        try:
            hp = self._hosted_or_error(tp)
        except PartitionError as e:
            return ProduceResult(error_name=e.error_name, error_message=str(e))
        doubt = self.in_doubt()
        if doubt is not None:
            self._doubt_refusals.refused(tp, hp.replica.leader_epoch, data, plain_monotonic_s())
            return ProduceResult(error_name="NOT_LEADER_OR_FOLLOWER", error_message=doubt)
        behind = self._doubt_refusals.behind(tp, hp.replica.leader_epoch, data, plain_monotonic_s())
        if behind is not None:
            return ProduceResult(error_name="NOT_LEADER_OR_FOLLOWER", error_message=behind)
        request_id, future = self._produces.park()
        with hp.plog.lock:
            if leader_epoch is not None and (
                not hp.replica.is_leader or hp.replica.leader_epoch != leader_epoch
            ):
                self._produces.drop(request_id)
                return ProduceResult(
                    error_name="FENCED_LEADER_EPOCH",
                    error_message=f"{tp[0]}-{tp[1]} is not led at epoch {leader_epoch} "
                    f"on node {self.node_id} (now {hp.replica.leader_epoch})",
                )
            end_before = hp.plog.log.log_end_offset
            # A coordinator's own write (a leader epoch given): epochs checked, no sequences.
            origin = AppendOrigin.CLIENT if leader_epoch is None else AppendOrigin.COORDINATOR
            actions = hp.replica.produce(
                request_id, data, acks, timeout_ms, now_ms(), marker, origin, verification_guard
            )
            self._schedule_isr(hp)
            appended = hp.plog.log.log_end_offset - end_before
            if appended > 0 and self.metrics is not None:
                self.metrics.appended(tp[0], len(data), appended)
            if hp.replica.delayed_produce_count:
                with self._lock:
                    self._ticking.add(hp.tp)
        self._carry_out(hp, actions)
        return request_id, future

    # --- fetch ------------------------------------------------------------------------------

    def fetch(
        self,
        specs: Sequence[FetchSpec],
        *,
        replica_id: int,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        replica_epoch: int = -1,
        cancelled: Callable[[], bool] = lambda: False,
        zero_copy: bool = False,
    ) -> list[FetchResult]:
        """Kafka's fetch: answer at once on enough bytes, any error or a diverging
        epoch, else wait for data until max_wait_ms. `zero_copy`: a consumer's records
        come as FileSlices (for sendfile); the caller closes them."""
        if replica_id >= 0:
            self._follower_fetched(replica_id)
        deadline = plain_monotonic_s() + max(0, max_wait_ms) / 1000
        results: list[FetchResult] | None = None
        marks: list[tuple[int, ...] | None] = [None] * len(specs)
        waiter = FetchWaiter()
        self.wakeups.watch(waiter, ((spec.topic, spec.partition) for spec in specs))
        try:
            # Bounded by the deadline: each pass waits for new data or the time left.
            while True:
                waiter.arm()
                results = self._reads.read(
                    specs, replica_id, replica_epoch, max_bytes, results, marks, zero_copy
                )
                total = sum(len(r.records) for r in results)
                remaining = deadline - plain_monotonic_s()
                if self._answer_now(results, total, min_bytes, remaining, cancelled):
                    return results
                self._wait_for_data(waiter, remaining)
        finally:
            self.wakeups.forget(waiter)

    def _wait_for_data(self, waiter: FetchWaiter, remaining: float) -> None:
        """A long-polling fetch waits for a change in its partitions (counted as the
        request's remote time on a gRPC thread, see request_timing); at most 0.5 s at
        a time, so a cancelled call or a change nobody announces is noticed."""
        started = plain_perf_s()
        self.wakeups.wait(waiter, min(remaining, 0.5))
        request_timing.add_remote(plain_perf_s() - started)

    def fetch_in_session(
        self,
        session_id: int,
        session_epoch: int,
        specs: Sequence[FetchSpec],
        forgotten: Sequence[TopicPartition],
        *,
        replica_id: int,
        max_wait_ms: int,
        min_bytes: int,
        max_bytes: int,
        replica_epoch: int = -1,
        cancelled: Callable[[], bool] = lambda: False,
    ) -> tuple[int, list[FetchResult]]:
        """A follower's fetch in a KIP-227 session: `specs` are the partitions whose
        position changed, the session holds the others. Only partitions whose state
        changed since the session last examined them are read, and the answer holds
        only those with records, an error, a diverging epoch or a new HW or log start.
        Raises FetchSessionError for an unknown session or a wrong epoch."""
        fetch = self.park_session_fetch(
            session_id,
            session_epoch,
            specs,
            forgotten,
            replica_id=replica_id,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
            replica_epoch=replica_epoch,
        )
        session = fetch.session
        with session.lock:
            deadline = plain_monotonic_s() + max(0, max_wait_ms) / 1000
            # Bounded by the deadline: each pass waits for new data or the time left.
            while True:
                enough = fetch.look()
                remaining = deadline - plain_monotonic_s()
                if enough or self._answer_now((), 0, 1, remaining, cancelled):
                    break
                self._wait_for_data(session.waiter, remaining)
            return session.session_id, fetch.answer()

    def park_session_fetch(
        self,
        session_id: int,
        session_epoch: int,
        specs: Sequence[FetchSpec],
        forgotten: Sequence[TopicPartition],
        *,
        replica_id: int,
        min_bytes: int,
        max_bytes: int,
        replica_epoch: int = -1,
        topic_ids: Mapping[str, object] | None = None,
    ) -> SessionFetch:
        """fetch_in_session's steps, for the event loop (node/kafka/replica_fetch.py)
        too: the follower's session (a new one for id 0, epoch 0) updated with the
        request's changes. Raises FetchSessionError."""
        self._follower_fetched(replica_id)
        if session_id == 0 and session_epoch == 0:
            session = self._sessions.open(replica_id)
        else:
            session = self._sessions.get(session_id, session_epoch, replica_id)
        session.update(specs, forgotten, topic_ids)
        session.new_replica_epoch(replica_epoch)
        self.wakeups.unwatch(session.waiter, forgotten)
        self.wakeups.watch(session.waiter, ((spec.topic, spec.partition) for spec in specs))
        return SessionFetch(
            session,
            self._partitions,
            self._reads,
            self.wakeups,
            replica_id=replica_id,
            replica_epoch=replica_epoch,
            min_bytes=min_bytes,
            max_bytes=max_bytes,
        )

    def _answer_now(
        self,
        results: Iterable[FetchResult],
        total: int,
        min_bytes: int,
        remaining: float,
        cancelled: Callable[[], bool],
    ) -> bool:
        """Kafka's delayed-fetch rule: answer on enough bytes, any error or diverging
        epoch, the deadline, a cancelled call or a stopping node."""
        return (
            total >= min_bytes
            or any(r.error_name != "NONE" or r.diverging_epoch for r in results)
            or remaining <= 0
            or cancelled()
            or self._stopped.is_set()
        )

    # --- offsets ---------------------------------------------------------------------------

    def list_offset(
        self,
        tp: TopicPartition,
        timestamp: int,
        current_leader_epoch: int,
        replica_id: int = -1,
        read_committed: bool = False,
    ) -> OffsetResult:
        try:
            hp = self._hosted_or_error(tp)
            with hp.plog.lock:
                if timestamp == MAX_TIMESTAMP:
                    best = max((s.max_timestamp_so_far for s in hp.plog.log.segments), default=-1)
                    if best < 0:
                        return OffsetResult()
                    timestamp = best
                r = hp.replica.handle_list_offsets(
                    pr.ListOffsetsRequest(
                        timestamp, replica_id, current_leader_epoch, read_committed=read_committed
                    )
                )
            return OffsetResult(r.offset, r.timestamp, r.leader_epoch, r.error)
        except (PartitionError, StorageError) as e:
            return OffsetResult(error_name=e.error_name, error_message=str(e))

    def end_offset_for_epoch(
        self, tp: TopicPartition, leader_epoch: int, current_leader_epoch: int
    ) -> OffsetResult:
        """OffsetsForLeaderEpoch with KIP-279's answer (epoch, end offset)."""
        try:
            hp = self._hosted_or_error(tp)
            with hp.plog.lock:
                r = hp.replica.handle_offsets_for_leader_epoch(
                    pr.OffsetsForLeaderEpochRequest(-1, leader_epoch, current_leader_epoch)
                )
            return OffsetResult(
                offset=r.end_offset, leader_epoch=r.leader_epoch, error_name=r.error
            )
        except PartitionError as e:
            return OffsetResult(error_name=e.error_name, error_message=str(e))

    # --- DeleteRecords -------------------------------------------------------------------

    def delete_records(
        self,
        wanted: Sequence[tuple[TopicPartition, int]],
        timeout_ms: int,
        alive: Callable[[int], bool],
    ) -> list[OffsetResult]:
        """Kafka's DeleteRecords on this node's led partitions: each log start offset
        moves to its requested offset (-1: the high watermark; beyond it, or below -1,
        OFFSET_OUT_OF_RANGE), the followers adopt it from their next fetch answer (woken
        now), and each answer waits until the low watermark — the least start offset of
        the leader and its live followers, as they report it — reaches the request
        (REQUEST_TIMED_OUT after `timeout_ms`). The result's offset is that low
        watermark. Retention then removes the segments wholly below the start offset,
        and the log manager's checkpoint records it."""
        return delete_records(
            wanted,
            timeout_ms,
            alive,
            node_id=self.node_id,
            hosted_or_error=self._hosted_or_error,
            wake=self.wakeups.wake,
            stopped=self._stopped,
        )

    def describe_led(self, topics: set[str]) -> list[pb.PartitionReplicas]:
        """HW and every replica's log end offset of the partitions this node leads."""
        out = []
        for hp in self.partitions():
            if (topics and hp.tp[0] not in topics) or not hp.replica.is_leader:
                continue
            with hp.plog.lock:
                log = hp.plog.log
                states = [pb.ReplicaState(node_id=self.node_id, log_end_offset=log.log_end_offset)]
                for r, fs in sorted(hp.replica.followers.items()):
                    states.append(pb.ReplicaState(node_id=r, log_end_offset=fs.leo))
                out.append(
                    pb.PartitionReplicas(
                        topic=hp.tp[0],
                        partition=hp.tp[1],
                        leader_epoch=hp.replica.leader_epoch,
                        high_watermark=log.high_watermark,
                        log_start_offset=log.log_start_offset,
                        replicas=states,
                    )
                )
        return out

    # --- follower fetchers -----------------------------------------------------------------

    def _sync_fetchers(self, touched: set[TopicPartition] | None = None) -> None:
        """One fetcher per leader node that leads a partition this node follows, each
        told which partitions it pulls; `touched` (None: all) were just changed by
        metadata and ask their leader again."""
        by_leader: dict[int, set[TopicPartition]] = {}
        for hp in self.partitions():
            if hp.replica.role is pr.Role.FOLLOWER and hp.replica.leader_id >= 0:
                by_leader.setdefault(hp.replica.leader_id, set()).add(hp.tp)
        for node in set(by_leader) - set(self._fetchers):
            address = self.address_of(node)
            if address is not None:
                self._fetchers[node] = self.new_fetcher(self, self._carry_out, node, address)
        for node in set(self._fetchers) - set(by_leader):
            self._fetchers.pop(node).stop()
        for node, fetcher in self._fetchers.items():
            fetcher.set_partitions(by_leader.get(node, set()), touched)
