"""A partition leader's ISR changes (docs/replication-rules.md 7.3): which followers
are caught up, the expansions and shrinks it proposes to the controller through
AlterPartition (each member named with the broker epoch it fetched with, KIP-903), the
answers, and the timers that re-send or re-check. A part of `PartitionReplica`, kept in
its own class so each stays one idea."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from .mypyc_marks import trait
from .replica_messages import (
    FENCED_LEADER_EPOCH,
    INELIGIBLE_REPLICA,
    INVALID_UPDATE_VERSION,
    NONE,
    OPERATION_NOT_ATTEMPTED,
    UNKNOWN_TOPIC_OR_PARTITION,
    Action,
    AlterPartitionResponse,
    FollowerState,
    ReplicaConfig,
    ReplicaLog,
    Role,
    SendAlterPartition,
    _PendingIsrChange,
    check,
)


@trait  # a mixin of PartitionReplica (replication/mypyc_marks.py)
class IsrChanges:
    # The replica's state this part reads and writes (PartitionReplica sets it).
    node_id: int
    broker_epoch: int
    log: ReplicaLog
    config: ReplicaConfig
    role: Role
    leader_epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: frozenset[int]
    followers: dict[int, FollowerState]
    epoch_start_offset: int
    _eligible: Callable[[int, int], bool]
    _session_fetch_ms: Callable[[int], int] | None
    serving_since_ms: Callable[[], int] | None
    _pending_isr: _PendingIsrChange | None
    _next_alter_request_id: int

    def _maybe_increment_hw(self, now_ms: int, actions: list[Action]) -> bool:
        raise NotImplementedError

    def check_invariants(self) -> None:
        raise NotImplementedError

    @property
    def maximal_isr(self) -> frozenset[int]:
        """Committed ISR, or committed ∪ adding while an expansion is pending (7.3)."""
        if self._pending_isr is not None:
            return self._pending_isr.maximal_isr
        return self.isr

    @property
    def pending_isr_change(self) -> SendAlterPartition | None:
        return self._pending_isr.request if self._pending_isr is not None else None

    def _caught_up_at(self, replica_id: int, follower: FollowerState) -> int:
        """When the follower was last caught up (Kafka's lastCaughtUpTimeMs). In a fetch
        session (`session_fetch_ms` given) an idle partition is not named by the
        follower's fetches, yet each of them stands for a fetch of it at its position:
        at the log end, the node's last fetch is a catch-up too."""
        at = follower.last_caught_up_time_ms
        if self._session_fetch_ms is not None and follower.leo == self.log.log_end_offset:
            at = max(at, self._session_fetch_ms(replica_id))
        return at

    def _is_caught_up(self, replica_id: int, follower: FollowerState, now_ms: int) -> bool:
        """Kafka's rule, idle partitions included: caught up within
        replica.lag.time.max.ms. (Kafka also counts any follower at the log end as
        caught up, so a dead follower of an idle partition stayed in its ISR until its
        broker was fenced; issue 39.)"""
        elapsed = now_ms - self._caught_up_at(replica_id, follower)
        return elapsed <= self.config.replica_lag_time_max_ms

    def _in_sync_at(self, replica_id: int, follower: FollowerState) -> int:
        """Where an ISR follower's lag is counted from: its last catch-up, or the end of
        this leader's own last stall (`serving_since_ms`) if later. A follower cannot
        fetch from a leader whose loop or disk is stuck; blaming it would leave the
        stuck leader alone in the ISR, so its fence finds no leader to elect."""
        at = self._caught_up_at(replica_id, follower)
        if self.serving_since_ms is not None:
            at = max(at, self.serving_since_ms())
        return at

    def fold_session_fetches(self) -> None:
        """Before the log end moves: the followers at it were caught up as of their
        node's last fetch (the session's implied fetches of this idle partition), which
        the rule can no longer see once they are behind."""
        if self._session_fetch_ms is None or self.role is not Role.LEADER:
            return
        leo = self.log.log_end_offset
        for r, fs in self.followers.items():
            if fs.leo == leo:
                fs.last_caught_up_time_ms = max(
                    fs.last_caught_up_time_ms, self._session_fetch_ms(r)
                )

    def isr_deadline_ms(self, now_ms: int) -> int | None:
        """The next time this leader's ISR timers need a tick, as far as the partition
        itself knows: an AlterPartition to re-send, or the first ISR follower that falls
        out of sync unless it catches up. An ISR follower at the log end in a fetch
        session is its node's business (`IsrDeadlines.silent`) until it is out of sync
        already (a shrink the controller did not take is proposed again). None: nothing
        due."""
        if self.role is not Role.LEADER:
            return None
        pending = self._pending_isr
        if pending is not None:
            if pending.rejected:
                return None  # waits for metadata
            return pending.sent_ms + self.config.alter_partition_retry_ms
        lag = self.config.replica_lag_time_max_ms
        leo = self.log.log_end_offset
        earliest: int | None = None
        for r in self.isr:
            fs = self.followers.get(r)
            if r == self.node_id or fs is None:
                continue
            at = self._in_sync_at(r, fs) + lag + 1
            if self._session_fetch_ms is not None and fs.leo == leo and at > now_ms:
                continue
            earliest = at if earliest is None else min(earliest, at)
        return earliest

    def _maybe_expand_isr(
        self, replica_id: int, follower: FollowerState, now_ms: int, actions: list[Action]
    ) -> None:
        if self._pending_isr is not None or replica_id in self.isr:
            return
        # 7.3 expand: at least the HW, and has reached the current epoch.
        if follower.leo < self.log.high_watermark or follower.leo < self.epoch_start_offset:
            return
        if not self._eligible(replica_id, follower.broker_epoch):
            return
        new_isr = self._ordered(self.isr | {replica_id})
        self._propose_isr(new_isr, frozenset(self.isr | {replica_id}), now_ms, actions)

    def _ordered(self, members: Iterable[int]) -> tuple[int, ...]:
        wanted = set(members)
        return tuple(r for r in self.replicas if r in wanted)

    def _propose_isr(
        self,
        new_isr: tuple[int, ...],
        maximal: frozenset[int],
        now_ms: int,
        actions: list[Action],
    ) -> None:
        epochs = tuple(
            self.broker_epoch if r == self.node_id else self.followers[r].broker_epoch
            for r in new_isr
        )
        request = SendAlterPartition(
            self._next_alter_request_id,
            self.node_id,
            self.leader_epoch,
            self.partition_epoch,
            new_isr,
            epochs,
        )
        self._next_alter_request_id += 1
        self._pending_isr = _PendingIsrChange(request, maximal, now_ms)
        actions.append(request)

    def on_alter_partition_response(
        self, resp: AlterPartitionResponse, now_ms: int
    ) -> list[Action]:
        pending = self._pending_isr
        if pending is None or pending.request.request_id != resp.request_id:
            return []  # not the change we are waiting for
        actions: list[Action] = []
        if resp.error == NONE:
            if (
                resp.leader_epoch != self.leader_epoch
                or resp.partition_epoch < self.partition_epoch
            ):
                return []  # stale answer
            check(
                self.node_id in resp.isr,
                lambda: f"controller dropped the leader from the ISR {resp}",
            )
            self.isr = frozenset(resp.isr)
            self.partition_epoch = resp.partition_epoch
            self._pending_isr = None
            self._maybe_increment_hw(now_ms, actions)
        elif resp.error in (INELIGIBLE_REPLICA, OPERATION_NOT_ATTEMPTED):
            # The controller says it did not apply it and our epoch is right: back to the
            # committed state (Kafka's Partition.handleAlterPartitionError).
            self._pending_isr = None
        elif resp.error in (
            FENCED_LEADER_EPOCH,
            INVALID_UPDATE_VERSION,
            UNKNOWN_TOPIC_OR_PARTITION,
        ):
            # We are stale: the change stays pending (maximal ISR kept), unsent, until
            # fresh metadata arrives (7.3).
            pending.rejected = True
        # Any other error (NOT_CONTROLLER, REQUEST_TIMED_OUT during a controller
        # failover, ...) says nothing about our state: the change stays pending and the
        # tick sends it again, as Kafka retries unexpected AlterPartition errors.
        self.check_invariants()
        return actions

    def _isr_timers(self, now_ms: int, actions: list[Action]) -> None:
        """Re-send an unanswered AlterPartition; shrink the ISR by the followers out of
        sync (7.3; checked on every tick: the shell ticks a leader when
        `isr_deadline_ms` or its follower's node says, not on a fixed period); add
        caught-up followers that became eligible."""
        pending = self._pending_isr
        if pending is not None:
            if (
                not pending.rejected
                and now_ms - pending.sent_ms >= self.config.alter_partition_retry_ms
            ):
                pending.sent_ms = now_ms
                actions.append(pending.request)
        else:
            out_of_sync = {
                r
                for r in self.isr
                if r != self.node_id
                and r in self.followers
                and now_ms - self._in_sync_at(r, self.followers[r])
                > self.config.replica_lag_time_max_ms
            }
            if out_of_sync:
                # A pending shrink keeps the old, larger ISR as the maximal one.
                self._propose_isr(self._ordered(self.isr - out_of_sync), self.isr, now_ms, actions)
        if self._pending_isr is None:
            # A caught-up follower that was not eligible when it last fetched (its
            # broker still fenced after a restart) joins once it is: with incremental
            # fetch sessions an idle partition's follower sends no new fetch to
            # trigger the check.
            for r in sorted(self.followers):
                if r not in self.isr and self._pending_isr is None:
                    self._maybe_expand_isr(r, self.followers[r], now_ms, actions)
