"""A follower's side of one partition replica: the fetch loop of 7.2 — which request
goes to the leader next, and what each answer does, including the truncation of 6.4-6.5
and the OFFSET_OUT_OF_RANGE recovery of 6.6 (docs/replication-rules.md). Its state moves
only through the table of `fetch_state`."""

from __future__ import annotations

from collections.abc import Callable

from seglog.storage.errors import StorageError
from seglog.storage.leader_epoch_cache import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET

from .fetch_state import FetchEvent, FetchState, next_fetch_state
from .replica_messages import (
    EARLIEST_TIMESTAMP,
    FENCED_LEADER_EPOCH,
    FLUSH_LOG,
    LATEST_TIMESTAMP,
    NONE,
    OFFSET_OUT_OF_RANGE,
    Action,
    FetchRequest,
    FetchResponse,
    FollowerRequest,
    FollowerResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetsForLeaderEpochRequest,
    OffsetsForLeaderEpochResponse,
    Outbound,
    ReplicaConfig,
    ReplicaLog,
    check,
)


class FollowerFetcher:
    """Fetching for replica `node_id` of one partition: it owns the follower's fetch
    state and the leader it follows (given by `restart`), and writes into `log`.

    `log_time(now_ms)` turns the timers' clock into the log's (wall) time,
    `broker_epoch()` is the node's current broker epoch (sent with every fetch, KIP-903),
    and `log_changed()` is called after each change to the log (the replica's invariant
    checks)."""

    def __init__(
        self,
        node_id: int,
        log: ReplicaLog,
        config: ReplicaConfig,
        *,
        log_time: Callable[[int], int],
        broker_epoch: Callable[[], int],
        log_changed: Callable[[], None],
    ) -> None:
        self.node_id = node_id
        self.log = log
        self.config = config
        self._log_time = log_time
        self._broker_epoch = broker_epoch
        self._log_changed = log_changed
        # The leader followed: set by `restart`, cleared by `stop` (-1: none).
        self.leader_id = -1
        self.leader_epoch = -1
        self._state = FetchState.IDLE
        self.fetch_offset = 0
        self.last_fetched_epoch = -1
        self.in_flight: int | None = None  # correlation id awaiting an answer
        self.sent_ms = 0
        self.backoff_until_ms = 0
        # The leader epoch in which a fetch succeeded without divergence: from then on
        # this log is a prefix of the leader's (the truncation of 6.4/6.5 is complete).
        self.synced_epoch = -1
        self._next_correlation_id = 1

    @property
    def state(self) -> FetchState:
        return self._state

    def move(self, event: FetchEvent) -> None:
        """The one way the state changes (IllegalFetchTransition on a move the table
        does not hold)."""
        self._state = next_fetch_state(self._state, event)

    def _reset(self, event: FetchEvent) -> None:
        """Move, and start over from this log's end: nothing in flight, no backoff."""
        f = self
        f.move(event)
        f.in_flight = None
        f.backoff_until_ms = 0
        f.synced_epoch = -1
        f.fetch_offset = self.log.log_end_offset
        latest = self.log.epoch_cache.latest_epoch
        f.last_fetched_epoch = latest if latest is not None else -1

    def stop(self) -> None:
        """The replica stopped following (it leads, or left the replica set)."""
        self.leader_id = -1
        self._reset(FetchEvent.STOP)

    def restart(self, leader_id: int, leader_epoch: int) -> None:
        """Metadata named a leader (or a new epoch): fetch, or first truncate (7.2)."""
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        if leader_id < 0:
            self._reset(FetchEvent.STOP)
        elif self.log.epoch_cache.latest_epoch is not None:
            self._reset(FetchEvent.RESTART)
        else:
            self._reset(FetchEvent.RESTART_WITHOUT_EPOCHS)

    def _next_id(self) -> int:
        cid = self._next_correlation_id
        self._next_correlation_id += 1
        return cid

    def next_request(self, now_ms: int) -> Outbound | None:
        """What this follower sends its leader next, or None (idle, waiting for an answer,
        backing off, or fenced). At most one request is outstanding."""
        f = self
        if self.leader_id < 0:
            return None
        if f.in_flight is not None:
            if now_ms - f.sent_ms < self.config.replica_request_timeout_ms:
                return None
            f.in_flight = None  # no answer: give up on it and back off
            f.backoff_until_ms = now_ms + self.config.replica_fetch_backoff_ms
        if now_ms < f.backoff_until_ms:
            return None
        if self.log.awaits_flush:
            # Deferred flush.messages: the next fetch tells the leader this replica has
            # the data, so it waits for the fsync, as Kafka's follower, which flushes
            # inline before fetching again. `on_flushed` wakes the fetcher.
            return None
        if f.state is FetchState.TRUNCATING and self.log.epoch_cache.latest_epoch is None:
            # 7.2 step 1: a log without epochs truncates to its HW (legacy path).
            self._truncate(self.log.high_watermark, now_ms)
            self._reset(FetchEvent.LEGACY_TRUNCATED)
        request: FollowerRequest
        cid = self._next_id()
        if f.state is FetchState.FETCHING:
            check(
                f.fetch_offset == self.log.log_end_offset,
                lambda: f"fetch offset {f.fetch_offset} != LEO {self.log.log_end_offset}",
            )
            request = FetchRequest(
                self.node_id,
                f.fetch_offset,
                self.leader_epoch,
                f.last_fetched_epoch,
                self.log.log_start_offset,
                self.config.replica_fetch_max_bytes,
                self._broker_epoch(),
                cid,
            )
        elif f.state is FetchState.TRUNCATING:
            latest = self.log.epoch_cache.latest_epoch
            assert latest is not None
            # 6.4: the first query uses the latest cached epoch.
            request = OffsetsForLeaderEpochRequest(
                self.node_id, latest, self.leader_epoch, cid
            )
        elif f.state is FetchState.LEADER_LEO:
            request = ListOffsetsRequest(
                LATEST_TIMESTAMP, self.node_id, self.leader_epoch, cid
            )
        elif f.state is FetchState.LEADER_START:
            request = ListOffsetsRequest(
                EARLIEST_TIMESTAMP, self.node_id, self.leader_epoch, cid
            )
        else:
            return None
        f.in_flight = cid
        f.sent_ms = now_ms
        return Outbound(self.leader_id, request)

    def _accept(self, correlation_id: int) -> bool:
        f = self
        if self.leader_id < 0 or f.in_flight is None or f.in_flight != correlation_id:
            return False  # stale, duplicated, or from before a state change
        f.in_flight = None
        return True

    def _on_error(self, error: str, now_ms: int) -> None:
        f = self
        if error == FENCED_LEADER_EPOCH:
            # 7.2: our epoch is stale; nothing to do until new metadata arrives.
            f.move(FetchEvent.FENCED_LEADER_EPOCH)
        elif error == OFFSET_OUT_OF_RANGE:
            f.move(FetchEvent.OUT_OF_RANGE)
        else:
            f.backoff_until_ms = now_ms + self.config.replica_fetch_backoff_ms

    def handle_response(self, resp: FollowerResponse, now_ms: int) -> list[Action]:
        if isinstance(resp, FetchResponse):
            return self.on_fetch_response(resp, now_ms)
        if isinstance(resp, OffsetsForLeaderEpochResponse):
            return self.on_offsets_for_leader_epoch_response(resp, now_ms)
        return self.on_list_offsets_response(resp, now_ms)

    def on_fetch_response(self, resp: FetchResponse, now_ms: int) -> list[Action]:
        """7.2 step 3."""
        f = self
        if not self._accept(resp.correlation_id) or f.state is not FetchState.FETCHING:
            return []
        if resp.error != NONE:
            self._on_error(resp.error, now_ms)
            return []
        check(
            resp.fetch_offset == self.log.log_end_offset,
            lambda: (
                f"fetch response for offset {resp.fetch_offset} but LEO "
                f"{self.log.log_end_offset}"
            ),
        )
        if resp.diverging_epoch is not None:
            # 6.5: treated exactly like an OffsetsForLeaderEpoch answer; no HW update.
            d = resp.diverging_epoch
            self._truncate_on_epoch_answer(d.epoch, d.end_offset, now_ms)
            return []
        if resp.records:
            try:
                self.log.append_as_follower(
                    resp.records, time_ms=self._log_time(now_ms)
                )
            except StorageError:
                f.backoff_until_ms = now_ms + self.config.replica_fetch_backoff_ms
                return []
        self.log.update_high_watermark(resp.high_watermark)  # clamped to [start, LEO]
        if resp.log_start_offset > self.log.log_start_offset:
            self.log.maybe_increment_log_start_offset(
                min(resp.log_start_offset, self.log.high_watermark)
            )
        f.fetch_offset = self.log.log_end_offset
        latest = self.log.epoch_cache.latest_epoch
        f.last_fetched_epoch = latest if latest is not None else -1
        f.synced_epoch = self.leader_epoch
        self._log_changed()
        return [FLUSH_LOG] if self.log.awaits_flush else []

    def on_offsets_for_leader_epoch_response(
        self, resp: OffsetsForLeaderEpochResponse, now_ms: int
    ) -> list[Action]:
        if not self._accept(resp.correlation_id) or self.state is not FetchState.TRUNCATING:
            return []
        if resp.error != NONE:
            self._on_error(resp.error, now_ms)
            return []
        self._truncate_on_epoch_answer(resp.leader_epoch, resp.end_offset, now_ms)
        return []

    def _truncate_on_epoch_answer(self, leader_epoch: int, leader_end: int, now_ms: int) -> None:
        """6.4, with KIP-279's epoch in the answer."""
        leo = self.log.log_end_offset
        done = True
        if leader_end == UNDEFINED_EPOCH_OFFSET:
            # The leader knows nothing useful: the legacy HW truncation, the only case
            # where a follower truncates to its own HW.
            target = self.log.high_watermark
        elif leader_epoch == UNDEFINED_EPOCH:
            target = min(leader_end, leo)
        else:
            fe, fo = self.log.epoch_cache.end_offset_for(leader_epoch, leo)
            if fe == UNDEFINED_EPOCH or fo == UNDEFINED_EPOCH_OFFSET:
                target = min(leader_end, leo)
            elif fe != leader_epoch:
                # We never had epoch LE: cut to the end of our largest epoch below it and
                # ask again with our new latest epoch.
                target = min(fo, leo)
                done = False
            else:
                target = min(leader_end, fo, leo)
        self._truncate(target, now_ms)
        # Not done: ask again with our new latest epoch (a log left without epochs
        # takes the legacy path in next_request).
        self._reset(FetchEvent.EPOCH_ANSWERED if done else FetchEvent.EPOCH_ASK_AGAIN)

    def _truncate(self, offset: int, now_ms: int) -> None:
        # Also at offset == LEO: the log then drops epoch entries starting at the LEO
        # (an epoch we led without writing), which the next query must not use.
        if offset <= self.log.log_end_offset:
            self.log.truncate_to(offset, time_ms=self._log_time(now_ms))
        self.synced_epoch = -1

    def on_list_offsets_response(self, resp: ListOffsetsResponse, now_ms: int) -> list[Action]:
        """6.6: OFFSET_OUT_OF_RANGE recovery."""
        f = self
        if not self._accept(resp.correlation_id) or f.state not in (
            FetchState.LEADER_LEO,
            FetchState.LEADER_START,
        ):
            return []
        if resp.error != NONE:
            if resp.error == OFFSET_OUT_OF_RANGE:
                f.backoff_until_ms = now_ms + self.config.replica_fetch_backoff_ms
            else:
                self._on_error(resp.error, now_ms)
            return []
        leo = self.log.log_end_offset
        if f.state is FetchState.LEADER_LEO:
            if resp.offset < leo:
                # Step 1: the leader has less than us (unclean election): may lose data.
                self._truncate(resp.offset, now_ms)
                self._reset(FetchEvent.LEADER_HAS_LESS)
            else:
                f.move(FetchEvent.LEADER_HAS_MORE)
            return []
        # Step 2.
        if resp.offset > leo:
            self.log.truncate_fully_and_start_at(
                resp.offset, time_ms=self._log_time(now_ms)
            )
        self._reset(FetchEvent.START_ADOPTED)
        self._log_changed()
        return []
