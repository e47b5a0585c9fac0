"""One partition replica on one node, as a plain state machine (docs/replication-rules.md).

No sockets, threads or clocks: every event is a method call carrying `now_ms`, and the
replica answers with responses and `Action`s for the I/O shell to carry out (send an
AlterPartition to the controller, complete a parked produce, wake consumers after a high
watermark move). It reads and writes its log directly through the small `ReplicaLog`
protocol, which the real `seglog.storage.log.Log` and the simulator's `MemoryLog` satisfy.

Roles:
* leader - client produce with acks 0/1/-1 and the delayed-produce queue (7.5), follower
  fetches with epoch fencing and diverging-epoch detection (6.5, 7.2, 7.6), follower state
  and ISR shrink/expand through AlterPartition (7.3), the high watermark (7.4), consumer
  reads below the HW and ListOffsets (8.1-8.3), OffsetsForLeaderEpoch answers (6.3);
* follower - the fetch loop of one partition (7.2): which request to send next, and the
  handling of its answers, including the truncation algorithm (6.4) and
  OFFSET_OUT_OF_RANGE recovery (6.6).

The shell's side of the contract (calls serialised per partition):
* metadata for the partition -> `apply_metadata(state, now)`;
* a produce -> `produce(request_id, data, acks, timeout_ms, now)`; answer each
  `ProduceCompleted` (whenever it comes out of any call; request ids unique per replica);
* a follower fetch / OffsetsForLeaderEpoch / ListOffsets -> `handle_fetch` (returns the
  response; a long poll may call it again later), `handle_offsets_for_leader_epoch`,
  `handle_list_offsets`; consumers -> `read_for_consumer` or `consumer_read_bound`;
* the fetcher loop -> `next_request(now)` gives the request and its destination (at most
  one outstanding); feed the answer to `handle_response(resp, now)`;
* `SendAlterPartition` -> the controller; its answer -> `on_alter_partition_response`;
* a timer -> `tick(now)` while produces are parked (their timeouts) and for a leader
  when `isr_deadline_ms(now)` comes or a follower's node stopped fetching (ISR checks,
  AlterPartition resends); `HighWatermarkUpdated` -> wake long-polling consumer fetches.

Errors are Kafka's error names ("NONE", "NOT_LEADER_OR_FOLLOWER", ...), as elsewhere in
seglog. Broken invariants raise `ReplicaInvariantError` (explicitly, so `python -O` keeps
the checks).
"""

from __future__ import annotations

from collections.abc import Callable

from seglog.controller.metadata_image import PartitionState
from seglog.replication.fetch_state import FetchState
from seglog.replication.follower_fetcher import FollowerFetcher
from seglog.replication.isr_changes import IsrChanges
from seglog.replication.leader_reads import LeaderReads
from seglog.replication.replica_messages import (
    EARLIEST_TIMESTAMP,
    FENCED_LEADER_EPOCH,
    FLUSH_LOG,
    INELIGIBLE_REPLICA,
    INVALID_REQUEST,
    INVALID_REQUIRED_ACKS,
    INVALID_UPDATE_VERSION,
    LATEST_TIMESTAMP,
    NEVER,
    NEW_LEADER_ELECTED,
    NO_REPLICA,
    NONE,
    NOT_ENOUGH_REPLICAS,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    NOT_LEADER_OR_FOLLOWER,
    OFFSET_NOT_AVAILABLE,
    OFFSET_OUT_OF_RANGE,
    OPERATION_NOT_ATTEMPTED,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    REQUEST_TIMED_OUT,
    UNKNOWN_LEADER_EPOCH,
    UNKNOWN_TOPIC_OR_PARTITION,
    Action,
    AlterPartitionResponse,
    ConsumerFetchResponse,
    EpochEndOffset,
    FetchRequest,
    FetchResponse,
    FlushLog,
    FollowerRequest,
    FollowerResponse,
    FollowerState,
    HighWatermarkUpdated,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    Outbound,
    ProduceCompleted,
    ReplicaConfig,
    ReplicaInvariantError,
    ReplicaLog,
    Role,
    SendAlterPartition,
    _DelayedProduce,
    _PendingIsrChange,
    check,
    storage_error_name,
)
from seglog.storage.errors import StorageError
from seglog.storage.leader_epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from seglog.storage.log_txns import TxnMarkerAppend
from seglog.storage.producer_state import AppendOrigin
from seglog.storage.txn_verification import VerificationGuard

# --- the replica ----------------------------------------------------------------------


class PartitionReplica(IsrChanges, LeaderReads):
    """The replica of one partition on node `node_id`.

    `is_replica_eligible(replica_id, broker_epoch)` tells the leader whether a follower may
    join the ISR: registered, unfenced, not shutting down, and fetching with the broker
    epoch the metadata holds (7.3, KIP-903). Default: always.
    """

    def __init__(
        self,
        node_id: int,
        log: ReplicaLog,
        config: ReplicaConfig | None = None,
        *,
        broker_epoch: int = -1,
        is_replica_eligible: Callable[[int, int], bool] | None = None,
        session_fetch_ms: Callable[[int], int] | None = None,
    ) -> None:
        self.node_id = node_id
        self.log = log
        self.config = config or ReplicaConfig()
        self.broker_epoch = broker_epoch
        self._eligible = is_replica_eligible or (lambda _replica, _epoch: True)
        self._session_fetch_ms = session_fetch_ms
        # When this leader was last seen in a stall of its own (the node's loop or disk
        # stuck; IsrChanges._in_sync_at). Set by the node's shell; None: never stalls.
        self.serving_since_ms: Callable[[], int] | None = None
        self.role = Role.NONE
        self.leader_id = -1
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: frozenset[int] = frozenset()  # committed ISR (from the controller)
        # Leader state.
        self.followers: dict[int, FollowerState] = {}
        self.epoch_start_offset = -1  # LEO when this leadership's epoch began
        self._pending_isr: _PendingIsrChange | None = None
        self._delayed: dict[int, _DelayedProduce] = {}
        # acks=1 answers held for a deferred flush.messages fsync: (offset it must
        # reach, the answer). Bounded by the connections' in-flight requests.
        self._unflushed: dict[int, tuple[int, ProduceCompleted]] = {}
        self._next_alter_request_id = 1
        self._leader_hw_floor = -1
        # Follower state.
        self.fetcher = FollowerFetcher(
            node_id,
            log,
            self.config,
            log_time=self.log_time,
            broker_epoch=lambda: self.broker_epoch,
            log_changed=self.check_invariants,
        )
        # The timers' `now_ms` may be a monotonic clock (the node's: a stepped wall
        # clock must not stall fetches or shrink every ISR); the log's times (append
        # and roll times, LogAppendTime) are wall time: this clock when set.
        self.log_clock: Callable[[], int] | None = None

    def log_time(self, now_ms: int) -> int:
        """The time to hand the log for an event the timers see at `now_ms`."""
        return now_ms if self.log_clock is None else self.log_clock()

    # ------------------------------------------------------------------ queries

    @property
    def is_leader(self) -> bool:
        return self.role is Role.LEADER

    def replace_log(self, log: ReplicaLog) -> None:
        """The replica's log moved to another log directory (Kafka's future replica
        swapped in, AlterReplicaLogDirs): the same offsets, epochs and producer state
        in new files; its reads and its follower fetches go on from the new one."""
        self.log = log
        self.fetcher.log = log

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def effective_min_isr(self) -> int:
        return min(self.config.min_insync_replicas, max(1, len(self.replicas)))

    @property
    def delayed_produce_count(self) -> int:
        return len(self._delayed)

    def is_synced_follower(self) -> bool:
        """A follower whose log is known to be a prefix of the current leader's (6.5)."""
        return self.role is Role.FOLLOWER and self.fetcher.synced_epoch == self.leader_epoch

    # ------------------------------------------------------------------ metadata

    def apply_metadata(self, state: PartitionState, now_ms: int) -> list[Action]:
        """The controller's registration of this partition (7.6, 7.7)."""
        if state.partition_epoch < self.partition_epoch or (
            state.partition_epoch == self.partition_epoch and tuple(state.replicas) == self.replicas
        ):
            # Stale (or already applied): partition epochs rise on every change (7.6).
            # An equal epoch with other replicas is news: the leader took the epoch
            # from its AlterPartition answer, whose change also completed a
            # reassignment (KIP-455) that only the metadata tells it about.
            return []
        check(
            state.leader_epoch >= self.leader_epoch,
            lambda: (
                f"partition epoch rose {self.partition_epoch}->{state.partition_epoch} but the "
                f"leader epoch fell {self.leader_epoch}->{state.leader_epoch}"
            ),
        )
        if self.node_id not in state.replicas:
            return self._stop(state)
        latest = self.log.epoch_cache.latest_epoch
        if state.leader == self.node_id and latest is not None and state.leader_epoch < latest:
            # This log already holds a later epoch than the one offered: the state is
            # stale (a metadata replay behind this log), so leading would fork the log.
            return []
        new_epoch = state.leader_epoch > self.leader_epoch
        if state.leader == self.node_id:
            actions = self._become_leader(state, new_epoch, now_ms)
        else:
            actions = self._become_follower(state, new_epoch)
        self.check_invariants()
        return actions

    def _adopt(self, state: PartitionState) -> None:
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.replicas = tuple(state.replicas)
        self.isr = frozenset(state.isr)

    def _stop(self, state: PartitionState) -> list[Action]:
        actions = self._fail_delayed(NOT_LEADER_OR_FOLLOWER)
        self._adopt(state)
        self.role = Role.NONE
        self.followers.clear()
        self._pending_isr = None
        self.fetcher.stop()
        return actions

    def _become_leader(self, state: PartitionState, new_epoch: bool, now_ms: int) -> list[Action]:
        was_leader = self.role is Role.LEADER
        check(
            new_epoch or was_leader,
            lambda: f"node {self.node_id} became leader without a new leader epoch ({state})",
        )
        self._adopt(state)
        self.role = Role.LEADER
        # Metadata replaces any pending ISR change (Kafka: CommittedPartitionState).
        self._pending_isr = None
        self.fetcher.stop()
        if new_epoch:
            leo = self.log.log_end_offset
            latest = self.log.epoch_cache.latest_epoch
            check(
                latest is None or latest <= state.leader_epoch,
                lambda: f"new leader epoch {state.leader_epoch} below cached epoch {latest}",
            )
            # 6.2: record (epoch, LEO) before any batch of the epoch exists, so this
            # leader can answer queries about epochs it never wrote.
            self.log.epoch_cache.assign(state.leader_epoch, leo)
            self.epoch_start_offset = leo
            # 7.3 last paragraph: lastCaughtUp := now for ISR members, "0" (NEVER)
            # otherwise; a replica that was not leader before forgets the followers'
            # positions.
            followers: dict[int, FollowerState] = {}
            for r in self.replicas:
                if r == self.node_id:
                    continue
                fs = self.followers.get(r) if was_leader else None
                fs = fs or FollowerState()
                fs.last_caught_up_time_ms = now_ms if r in self.isr else NEVER
                followers[r] = fs
            self.followers = followers
            self._leader_hw_floor = self.log.high_watermark
        else:
            for r in self.replicas:
                if r != self.node_id:
                    self.followers.setdefault(r, FollowerState())
            for r in list(self.followers):
                if r not in self.replicas:
                    del self.followers[r]
        actions: list[Action] = []
        self._maybe_increment_hw(now_ms, actions)
        return actions

    def _become_follower(self, state: PartitionState, new_epoch: bool) -> list[Action]:
        was_leader = self.role is Role.LEADER
        old_leader = self.leader_id
        actions = self._fail_delayed(NOT_LEADER_OR_FOLLOWER) if was_leader else []
        self._adopt(state)
        self.role = Role.FOLLOWER
        self.followers.clear()
        self._pending_isr = None
        self.epoch_start_offset = -1
        self._leader_hw_floor = -1
        if (
            new_epoch
            or was_leader
            or old_leader != state.leader
            or (self.fetcher.state is FetchState.IDLE and state.leader >= 0)
        ):
            # 7.2 step 4 / 7.6: a new epoch restarts fetching, and thus truncation.
            self._restart_fetching()
        return actions

    # ------------------------------------------------------------------ leader: produce

    def produce(
        self,
        request_id: int,
        data: bytes,
        acks: int,
        timeout_ms: int,
        now_ms: int,
        marker: TxnMarkerAppend | None = None,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verification_guard: VerificationGuard | None = None,
    ) -> list[Action]:
        """A client's batches for this partition (7.5), or with `marker` a transaction
        coordinator's COMMIT/ABORT marker instead (WriteTxnMarkers). A transactional
        batch that opens a transaction carries its verification's guard (KIP-890). The answer is a
        ProduceCompleted action, now or - for acks=-1 - once the HW passes the append,
        on leadership loss, or on timeout (via `tick`)."""
        actions: list[Action] = []

        def fail(error: str) -> list[Action]:
            actions.append(ProduceCompleted(request_id, error, acks))
            return actions

        if acks not in (-1, 0, 1):
            return fail(INVALID_REQUIRED_ACKS)
        if self.role is not Role.LEADER:
            return fail(NOT_LEADER_OR_FOLLOWER)
        if acks == -1:
            # Checked before appending, on the committed ISR (Kafka's partitionState.isr).
            if len(self.isr) < self.effective_min_isr:
                return fail(NOT_ENOUGH_REPLICAS)
            if len(self._delayed) >= self.config.max_delayed_produces:
                # The bounded purgatory is full: the ISR is not keeping up with the acks=all
                # appends already waiting. Refused before writing, so the answer must say
                # "not written" (REQUEST_TIMED_OUT would mean "possibly written" to a client,
                # which may then take a later batch's success as this one's: docs/
                # replication-rules.md, "Produce errors"). The producer backs off and retries.
                return fail(NOT_ENOUGH_REPLICAS)
            check(
                request_id not in self._delayed,
                lambda: f"duplicate produce request id {request_id}",
            )
        self.fold_session_fetches()
        try:
            if marker is None:
                t = self.log_time(now_ms)
                info = self.log.append_as_leader(
                    data,
                    self.leader_epoch,
                    time_ms=t,
                    origin=origin,
                    verification_guard=verification_guard,
                )
            else:
                pid, epoch, end = marker
                t = self.log_time(now_ms)
                info = self.log.append_marker(pid, epoch, end, self.leader_epoch, time_ms=t)
        except StorageError as exc:
            # As Kafka: a refused batch's answer carries the log start offset, which tells a
            # client whether its producer state may have gone with removed segments.
            actions.append(
                ProduceCompleted(
                    request_id,
                    storage_error_name(exc),
                    acks,
                    log_start_offset=self.log.log_start_offset,
                    error_message=str(exc),
                    record_errors=getattr(exc, "record_errors", ()),
                )
            )
            return actions
        self._maybe_increment_hw(now_ms, actions)
        done = ProduceCompleted(
            request_id, NONE, acks, info.first_offset, info.log_append_time, info.log_start_offset
        )
        # Deferred flush.messages: answered once fsynced, as the inline flush answered.
        flushing = self.log.awaits_flush
        if flushing:
            actions.append(FLUSH_LOG)
        if acks == 1 and flushing:
            self._unflushed[request_id] = (info.last_offset + 1, done)
        elif acks != -1:
            actions.append(done)
        else:
            parked = _DelayedProduce(
                request_id,
                info.last_offset + 1,
                now_ms + timeout_ms,
                info.first_offset,
                info.log_append_time,
                info.last_offset + 1 if flushing else 0,
            )
            self._delayed[request_id] = parked
            self._complete_delayed(actions)
        self.check_invariants()
        return actions

    def _complete_delayed(self, actions: list[Action]) -> None:
        """Re-check parked acks=-1 produces against the HW (7.5)."""
        if not self._delayed:
            return
        hw = self.log.high_watermark
        durable = self.log.durable_offset
        enough = len(self.maximal_isr) >= self.effective_min_isr
        for rid, d in list(self._delayed.items()):
            if hw >= d.required_offset and durable >= d.durable_offset:
                del self._delayed[rid]
                error = NONE if enough else NOT_ENOUGH_REPLICAS_AFTER_APPEND
                if error == NONE:
                    actions.append(
                        ProduceCompleted(
                            rid,
                            NONE,
                            -1,
                            d.base_offset,
                            d.log_append_time,
                            self.log.log_start_offset,
                        )
                    )
                else:
                    actions.append(ProduceCompleted(rid, error, -1))

    def on_storage_failure(self) -> list[Action]:
        """The log's directory went offline: every parked produce fails now with
        KAFKA_STORAGE_ERROR rather than wait for a high watermark that cannot move."""
        return self._fail_delayed("KAFKA_STORAGE_ERROR")

    def _fail_delayed(self, error: str) -> list[Action]:
        actions: list[Action] = [ProduceCompleted(rid, error, -1) for rid in self._delayed]
        actions += [ProduceCompleted(rid, error, 1) for rid in self._unflushed]
        self._delayed.clear()
        self._unflushed.clear()
        return actions

    def on_flushed(self) -> list[Action]:
        """A deferred flush.messages fsync finished (or was dropped by a truncation):
        the answers it held go, and a flush still owed is asked for again."""
        actions: list[Action] = []
        durable = self.log.durable_offset
        for rid, (required, done) in list(self._unflushed.items()):
            if durable >= required:
                del self._unflushed[rid]
                actions.append(done)
        self._complete_delayed(actions)
        if self.log.awaits_flush:
            actions.append(FLUSH_LOG)
        return actions

    # ------------------------------------------------------------------ leader: fetches

    def handle_fetch(self, req: FetchRequest, now_ms: int) -> tuple[FetchResponse, list[Action]]:
        """A follower's fetch (7.2 leader side, 6.5). Reads up to the LEO."""

        def error(name: str) -> tuple[FetchResponse, list[Action]]:
            return FetchResponse(name, req.correlation_id, req.fetch_offset), []

        fenced = self._fence(req.current_leader_epoch)
        if fenced is not None:
            return error(fenced)
        follower = self.followers.get(req.replica_id)
        if follower is None:
            # Not an assigned replica (7.2 step 1).
            return error(
                UNKNOWN_LEADER_EPOCH if req.current_leader_epoch >= 0 else NOT_LEADER_OR_FOLLOWER
            )
        if req.replica_epoch >= 0 and follower.broker_epoch > req.replica_epoch:
            # A fetch from an older incarnation of that broker (KIP-903).
            return error(NOT_LEADER_OR_FOLLOWER)
        # 7.2 leader step 2: the response carries the values from before the read.
        hw = self.log.high_watermark
        log_start = self.log.log_start_offset
        leo = self.log.log_end_offset
        if req.last_fetched_epoch >= 0:
            # 6.5: the divergence check.
            epoch, end = self.log.epoch_cache.end_offset_for(req.last_fetched_epoch, leo)
            if epoch == UNDEFINED_EPOCH or end == UNDEFINED_EPOCH_OFFSET:
                return error(OFFSET_OUT_OF_RANGE)
            if req.fetch_offset < log_start:
                return error(OFFSET_OUT_OF_RANGE)
            if epoch < req.last_fetched_epoch or end < req.fetch_offset:
                diverging = EpochEndOffset(epoch, end)
                response = FetchResponse(
                    NONE, req.correlation_id, req.fetch_offset, hw, log_start, b"", diverging
                )
                return response, []
        if req.fetch_offset < log_start or req.fetch_offset > leo:
            return error(OFFSET_OUT_OF_RANGE)
        data = self.log.read(req.fetch_offset, req.max_bytes, upper_bound=leo, min_one_batch=True)
        actions: list[Action] = []
        if not req.from_purgatory:
            self._update_follower(req, follower, leo, now_ms, actions)
        response = FetchResponse(
            NONE, req.correlation_id, req.fetch_offset, hw, log_start, bytes(data.records)
        )
        self.check_invariants()
        return response, actions

    def _update_follower(
        self,
        req: FetchRequest,
        follower: FollowerState,
        leader_leo: int,
        now_ms: int,
        actions: list[Action],
    ) -> None:
        """7.3: lastCaughtUp rules, then maybe expand the ISR and advance the HW."""
        f = req.fetch_offset
        if f >= leader_leo:
            follower.last_caught_up_time_ms = max(follower.last_caught_up_time_ms, now_ms)
        elif f >= follower.last_fetch_leader_leo:
            follower.last_caught_up_time_ms = max(
                follower.last_caught_up_time_ms, follower.last_fetch_time_ms
            )
        follower.last_fetch_leader_leo = max(leader_leo, follower.last_fetch_leader_leo)
        follower.last_fetch_time_ms = now_ms
        follower.leo = f
        follower.log_start_offset = req.log_start_offset
        if req.replica_epoch >= 0:
            follower.broker_epoch = req.replica_epoch
        self._maybe_expand_isr(req.replica_id, follower, now_ms, actions)
        self._maybe_increment_hw(now_ms, actions)

    def _maybe_increment_hw(self, now_ms: int, actions: list[Action]) -> bool:
        """7.4: HW = min LEO over the maximal ISR and caught-up eligible followers."""
        if self.role is not Role.LEADER:
            return False
        if self.config.stall_hw_under_min_isr and len(self.isr) < self.effective_min_isr:
            return False  # Kafka >= 3.7 (KAFKA-15583): no advance under min ISR
        candidate = self.log.log_end_offset
        maximal = self.maximal_isr
        for r, fs in self.followers.items():
            if fs.leo < candidate and (
                r in maximal
                or (self._is_caught_up(r, fs, now_ms) and self._eligible(r, fs.broker_epoch))
            ):
                candidate = fs.leo
        old = self.log.high_watermark
        if candidate <= old:
            return False
        new = self.log.update_high_watermark(candidate)
        check(
            new >= self._leader_hw_floor,
            lambda: f"leader HW went back {self._leader_hw_floor}->{new}",
        )
        self._leader_hw_floor = new
        actions.append(HighWatermarkUpdated(new))
        self._complete_delayed(actions)
        return True

    # ------------------------------------------------------------------ leader: other reads

    # ------------------------------------------------------------------ leader: ISR

    # ------------------------------------------------------------------ timers

    def tick(self, now_ms: int) -> list[Action]:
        """Timers: delayed-produce timeouts, the ISR shrink check every lag/2 (7.3), and
        re-sending an unanswered AlterPartition."""
        actions: list[Action] = []
        for rid, d in list(self._delayed.items()):
            if now_ms >= d.deadline_ms:
                del self._delayed[rid]
                actions.append(ProduceCompleted(rid, REQUEST_TIMED_OUT, -1))
        if self.role is not Role.LEADER:
            return actions
        self._isr_timers(now_ms, actions)
        self._maybe_increment_hw(now_ms, actions)
        return actions

    # ------------------------------------------------------------------ follower: fetching

    def _restart_fetching(self) -> None:
        self.fetcher.restart(self.leader_id, self.leader_epoch)

    def next_request(self, now_ms: int) -> Outbound | None:
        """What this follower sends its leader next (fetcher.next_request)."""
        return self.fetcher.next_request(now_ms)

    def handle_response(self, resp: FollowerResponse, now_ms: int) -> list[Action]:
        return self.fetcher.handle_response(resp, now_ms)

    # ------------------------------------------------------------------ invariants

    def check_invariants(self) -> None:
        hw, leo = self.log.high_watermark, self.log.log_end_offset
        check(
            self.log.log_start_offset <= hw <= leo,
            lambda: (
                f"node {self.node_id}: start {self.log.log_start_offset} <= HW {hw} <= LEO {leo}"
            ),
        )
        if self.role is Role.LEADER:
            check(
                self.node_id in self.isr, lambda: f"leader {self.node_id} not in its ISR {self.isr}"
            )
            check(
                hw >= self._leader_hw_floor,
                lambda: f"leader HW went back {self._leader_hw_floor}->{hw}",
            )
            self._leader_hw_floor = hw
            latest = self.log.epoch_cache.latest_epoch
            check(
                latest == self.leader_epoch,
                lambda: f"leader epoch {self.leader_epoch} but latest cached epoch {latest}",
            )

    def __repr__(self) -> str:
        return (
            f"PartitionReplica(node={self.node_id}, role={self.role.value}, "
            f"leader={self.leader_id}, epoch={self.leader_epoch}, "
            f"partition_epoch={self.partition_epoch}, isr={sorted(self.isr)}, "
            f"hw={self.log.high_watermark}, leo={self.log.log_end_offset}, "
            f"fetch={self.fetcher.state.value})"
        )


__all__ = [
    "FLUSH_LOG",
    "Action",
    "AlterPartitionResponse",
    "ConsumerFetchResponse",
    "EARLIEST_TIMESTAMP",
    "EpochEndOffset",
    "FlushLog",
    "FENCED_LEADER_EPOCH",
    "FetchRequest",
    "FetchResponse",
    "FetchState",
    "FollowerFetcher",
    "FollowerRequest",
    "FollowerResponse",
    "FollowerState",
    "HighWatermarkUpdated",
    "INELIGIBLE_REPLICA",
    "INVALID_REQUEST",
    "INVALID_REQUIRED_ACKS",
    "INVALID_UPDATE_VERSION",
    "LATEST_TIMESTAMP",
    "ListOffsetsRequest",
    "ListOffsetsResponse",
    "NEVER",
    "NEW_LEADER_ELECTED",
    "NONE",
    "NOT_ENOUGH_REPLICAS",
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    "NOT_LEADER_OR_FOLLOWER",
    "NO_REPLICA",
    "OFFSET_NOT_AVAILABLE",
    "OFFSET_OUT_OF_RANGE",
    "OPERATION_NOT_ATTEMPTED",
    "OUT_OF_ORDER_SEQUENCE_NUMBER",
    "OffsetsForLeaderEpochRequest",
    "OffsetsForLeaderEpochResponse",
    "Outbound",
    "PartitionReplica",
    "ProduceCompleted",
    "REQUEST_TIMED_OUT",
    "ReplicaConfig",
    "ReplicaInvariantError",
    "ReplicaLog",
    "Role",
    "SendAlterPartition",
    "UNKNOWN_LEADER_EPOCH",
    "UNKNOWN_TOPIC_OR_PARTITION",
    "check",
    "storage_error_name",
]
