"""The I/O shell around a consumer's GroupMembership: a background thread that
sends what the membership decides (FindCoordinator, JoinGroup, SyncGroup,
heartbeats, LeaveGroup) over seglog's GroupCoordinator gRPC service, and the
offset calls the application thread makes (OffsetCommit, OffsetFetch).

Threads: the membership is touched only under `self.cond`. The background thread
never runs application code; rebalance listeners and commit callbacks run in the
application thread (Consumer.poll), as in Kafka.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import grpc

from seglog.proto import errors_pb2, groups_pb2_grpc
from seglog.proto import groups_pb2 as gpb

from .cluster import ClusterMetadata, TopicPartition, call
from .errors import (
    CommitFailedError,
    KafkaError,
    KafkaTimeoutError,
    error_class,
    for_code,
)
from .group_membership import (
    ASSIGN,
    COORDINATOR_ERRORS,
    FIND,
    HEARTBEAT,
    JOIN,
    LEAVE,
    SYNC,
    AppStep,
    GroupMembership,
    MemberState,
    Send,
)

E = errors_pb2.ErrorCode
_log = logging.getLogger(__name__)

RebalanceInProgressError = error_class("REBALANCE_IN_PROGRESS")
CoordinatorNotAvailableError = error_class("COORDINATOR_NOT_AVAILABLE")
# A coordinator that stays unknown is reported at WARNING this often, not per retry.
WARN_EVERY_S = 10.0
# Async commits queued or awaiting their answer; beyond this, commit_async waits.
MAX_ASYNC_COMMITS = 10
# Retriable offset-call errors: find the coordinator again (or wait for it) and resend.
_RETRY_OFFSET_CODES = COORDINATOR_ERRORS | {
    E.COORDINATOR_LOAD_IN_PROGRESS,
    E.REQUEST_TIMED_OUT,
    E.UNSTABLE_OFFSET_COMMIT,
}


class OffsetAndMetadata(NamedTuple):
    """kafka-python's OffsetAndMetadata: the next offset to consume, with metadata."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


class ConsumerCoordinator:
    def __init__(
        self,
        membership: GroupMembership,
        metadata: ClusterMetadata,
        request_timeout_ms: int,
        wakeup: Callable[[], None],
    ) -> None:
        self.m = membership
        self.metadata = metadata
        self.request_timeout_s = request_timeout_ms / 1000
        self.group_id = membership.config.group_id
        self.cond = threading.Condition()
        self._wakeup_app = wakeup
        self._stopping = False
        self._find_turn = 0
        self._warned_at = 0.0
        self._async: deque[tuple[dict[TopicPartition, OffsetAndMetadata], Any, Callable]] = deque()
        # Async commits queued or on the wire (at most one on the wire: see commit_async).
        self._async_queue: deque[tuple[gpb.OffsetCommitRequest, dict, Callable]] = deque()
        self._async_pending = 0
        self._async_sending = False
        self._in_flight_future: grpc.Future | None = None
        self._thread = threading.Thread(
            target=self._run, name=f"seglog-consumer-coordinator-{self.group_id}", daemon=True
        )
        self._thread.start()

    # --- the background thread ------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self.cond:
                if self._stopping:
                    return
                now = time.monotonic()
                send = self.m.next_request(now)
                if send is None:
                    self.cond.wait(max(self.m.next_wakeup(now), 0.005))
                    continue
            try:
                self._execute(send)
            except Exception:  # noqa: BLE001 - a bug must not silently stop the heartbeats
                _log.exception("group %s: %s failed unexpectedly", self.group_id, send.kind)
                with self.cond:
                    if self.m.in_flight == send.kind:
                        self.m.on_failure(
                            time.monotonic(), send.kind, KafkaError("unexpected failure")
                        )
            self._wakeup_app()

    def _execute(self, send: Send) -> None:
        if send.kind == FIND:
            self._find(send.request)
            return
        if send.kind == ASSIGN:
            self._counts_for_leader(send.topics)
            return
        with self.cond:
            coordinator = self.m.coordinator
        if coordinator is None:  # lost meanwhile (a failed commit)
            with self.cond:
                self.m.on_failure(time.monotonic(), send.kind, CoordinatorNotAvailableError())
            return
        stub = self.metadata.connections.group_stub((coordinator.host, coordinator.port))
        timeout_s = self.request_timeout_s
        if send.kind == JOIN:
            # The coordinator holds a JoinGroup until every member rejoined or the
            # rebalance timeout passed.
            timeout_s += self.m.config.rebalance_timeout_ms / 1000
        elif send.kind == HEARTBEAT:
            timeout_s = min(timeout_s, self.m.config.session_timeout_ms / 1000)
        try:
            response = self._call(getattr(stub, send.kind), send.request, timeout_s)
        except KafkaError as e:
            with self.cond:
                self.m.on_failure(time.monotonic(), send.kind, e)
                self.cond.notify_all()
            if send.kind != LEAVE:
                _log.info("group %s: %s to the coordinator failed: %s", self.group_id, send.kind, e)
            return
        handler = {
            JOIN: self.m.on_join_group,
            SYNC: self.m.on_sync_group,
            HEARTBEAT: self.m.on_heartbeat,
            LEAVE: self.m.on_leave_group,
        }[send.kind]
        with self.cond:
            handler(time.monotonic(), response)
            _log.debug(
                "group %s: %s answered %s; now %s generation %d member %r",
                self.group_id,
                send.kind,
                E.Name(getattr(response, "error_code", 0)),
                self.m.state.value,
                self.m.generation,
                self.m.member_id,
            )
            self.cond.notify_all()

    def _call(self, fn: Any, request: object, timeout_s: float) -> Any:
        """A call the stop of the consumer can cut short (a JoinGroup may be held)."""
        future = fn.future(request, timeout=timeout_s)
        with self.cond:
            self._in_flight_future = future
        try:
            return call(lambda _r, timeout: future.result(), None, timeout_s)
        except grpc.FutureCancelledError as e:
            raise KafkaError("cancelled: the consumer is closing") from e
        finally:
            with self.cond:
                self._in_flight_future = None

    def _find(self, request: gpb.FindCoordinatorRequest) -> None:
        """Ask one node (a different one after each failure) where the group lives."""
        known = self.metadata.broker_addresses()
        candidates = known + [a for a in self.metadata.bootstrap if a not in known]
        address = candidates[self._find_turn % len(candidates)]
        try:
            response = self._call(
                self.metadata.connections.group_stub(address).FindCoordinator,
                request,
                self.request_timeout_s,
            )
        except KafkaError as e:
            self._find_turn += 1
            with self.cond:
                self.m.on_failure(time.monotonic(), FIND, e)
                self._maybe_warn()
                self.cond.notify_all()
            return
        with self.cond:
            self.m.on_find_coordinator(time.monotonic(), response)
            if self.m.coordinator is None:
                self._find_turn += 1
                self._maybe_warn()
            elif self._warned_at:
                _log.warning(
                    "group %s: coordinator found: node %d at %s:%d",
                    self.group_id,
                    self.m.coordinator.node_id,
                    self.m.coordinator.host,
                    self.m.coordinator.port,
                )
                self._warned_at = 0.0
            self.cond.notify_all()

    def _maybe_warn(self) -> None:
        now = time.monotonic()
        if now - self._warned_at >= WARN_EVERY_S:
            self._warned_at = now
            _log.warning(
                "group %s: no coordinator after %d attempts (last: %s); retrying",
                self.group_id,
                self.m.coordinator_failures,
                self.m.last_coordinator_error,
            )

    def _counts_for_leader(self, topics: frozenset[str]) -> None:
        _log.debug("group %s: leading: partition counts of %s", self.group_id, sorted(topics))
        counts: dict[str, int] = {}
        try:
            if topics:
                self.metadata.refresh(topics)
            for t in topics:
                parts = self.metadata.partitions_for(t)
                if parts:
                    counts[t] = len(parts)
            if len(counts) < len(topics):
                self.metadata.request_update()  # the polling thread watches for them
        except KafkaError as e:
            with self.cond:
                self.m.on_failure(time.monotonic(), ASSIGN, e)
            return
        with self.cond:
            self.m.on_assignment_input(time.monotonic(), counts)
            _log.debug("group %s: assigned from %s", self.group_id, counts)
            self.cond.notify_all()

    # --- the application thread ---------------------------------------------------------

    def app_step(self, now: float) -> AppStep | None:
        with self.cond:
            self.m.poll(now)
            step = self.m.app_step()
            self.cond.notify_all()
            return step

    def app_done(self, step: AppStep) -> None:
        with self.cond:
            self.m.app_done(step)
            self.cond.notify_all()

    def set_subscription(self, topics: set[str]) -> None:
        with self.cond:
            self.m.set_subscription(topics)
            self.cond.notify_all()

    def check_metadata(self, counts: Mapping[str, int]) -> None:
        with self.cond:
            self.m.check_metadata(counts)
            self.cond.notify_all()

    def in_generation(self) -> bool:
        """In a Stable generation: what it owns is still its own."""
        with self.cond:
            return self.m.generation_if_stable() is not None

    def state(self) -> MemberState:
        with self.cond:
            return self.m.state

    def _coordinator_stub(self, deadline: float) -> groups_pb2_grpc.GroupCoordinatorStub:
        """The coordinator's stub, waiting for the background thread to find it."""
        with self.cond:
            self.m.wants_coordinator = True
            self.cond.notify_all()
            while self.m.coordinator is None:
                if self.m.fatal_error is not None:
                    raise self.m.fatal_error
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise KafkaTimeoutError(
                        f"no coordinator for group {self.group_id!r} found within the "
                        f"timeout (last: {self.m.last_coordinator_error or 'none'})"
                    )
                self.cond.wait(min(remaining, 0.2))
            c = self.m.coordinator
        return self.metadata.connections.group_stub((c.host, c.port))

    def generation(self) -> tuple[int, str, str]:
        """(generation, member id, instance id) to commit with; raises when a group
        member is between generations (Kafka's CommitFailed / RebalanceInProgress)."""
        with self.cond:
            m = self.m
            if m.fatal_error is not None:
                raise m.fatal_error
            instance = m.config.group_instance_id or ""
            if not m.subscribed:
                return -1, "", instance  # manual assignment: a commit from outside the group
            stable = m.generation_if_stable()
            if stable is not None:
                return stable[0], stable[1], instance
            if m.rebalancing() or m.rejoin_needed:
                raise RebalanceInProgressError(
                    f"group {self.group_id!r} is rebalancing: the offsets were not committed; "
                    f"poll() to finish the rebalance and commit again"
                )
            raise CommitFailedError(
                f"this member is not in a generation of group {self.group_id!r}: its "
                f"partitions may have moved to other members, so the commit was refused"
            )

    def _commit_request(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> gpb.OffsetCommitRequest:
        generation, member_id, instance = self.generation()
        request = gpb.OffsetCommitRequest(
            group_id=self.group_id,
            generation_id=generation,
            member_id=member_id,
            group_instance_id=instance,
        )
        by_topic: dict[str, gpb.OffsetCommitTopic] = {}
        for tp in sorted(offsets, key=lambda tp: (tp.topic, tp.partition)):
            om = offsets[tp]
            t = by_topic.get(tp.topic)
            if t is None:
                t = by_topic[tp.topic] = request.topics.add(name=tp.topic)
            t.partitions.add(
                partition_index=tp.partition,
                committed_offset=om.offset,
                committed_leader_epoch=om.leader_epoch,
                committed_metadata=om.metadata or "",
            )
        return request

    def _commit_outcome(self, response: gpb.OffsetCommitResponse) -> KafkaError | None:
        """Apply the partition errors to the membership; the error to report, if any."""
        worst: KafkaError | None = None
        with self.cond:
            now = time.monotonic()
            for t in response.topics:
                for p in t.partitions:
                    if p.error_code == E.NONE:
                        continue
                    self.m.on_commit_error(now, p.error_code)
                    where = f"{t.name}-{p.partition_index}"
                    if p.error_code in (E.UNKNOWN_MEMBER_ID, E.ILLEGAL_GENERATION):
                        error: KafkaError = CommitFailedError(
                            f"{where}: {E.Name(p.error_code)}: the group rebalanced and this "
                            f"member's generation is gone; the partitions may be another "
                            f"member's now"
                        )
                    else:
                        error = for_code(p.error_code, f"commit of {where} in {self.group_id!r}")
                    if worst is None or (worst.retriable and not error.retriable):
                        worst = error
            self.cond.notify_all()
        return worst

    def commit_sync(
        self, offsets: Mapping[TopicPartition, OffsetAndMetadata], timeout_s: float
    ) -> None:
        """Commit, retrying coordinator moves until `timeout_s`; raise otherwise."""
        if not offsets:
            return
        deadline = time.monotonic() + timeout_s
        with self.cond:  # after the async commits made before it, as Kafka orders them
            while self._async_pending and time.monotonic() < deadline:
                self.cond.wait(min(0.1, max(deadline - time.monotonic(), 0.001)))
        attempt = 0
        while True:
            request = self._commit_request(offsets)
            stub = self._coordinator_stub(deadline)
            remaining = max(deadline - time.monotonic(), 0.01)
            try:
                response = call(stub.OffsetCommit, request, min(remaining, self.request_timeout_s))
                error = self._commit_outcome(response)
            except KafkaError as e:
                with self.cond:
                    self.m.coordinator_failed(time.monotonic(), f"OffsetCommit failed: {e}")
                    self.cond.notify_all()
                error = e
            if error is None:
                return
            if not error.retriable or isinstance(error, RebalanceInProgressError):
                raise error
            attempt += 1
            delay = self.m.backoff(attempt)
            if time.monotonic() + delay >= deadline:
                raise KafkaTimeoutError(f"commit to group {self.group_id!r} failed: {error}")
            time.sleep(delay)

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, OffsetAndMetadata],
        callback: Callable[[dict, Any], None],
    ) -> None:
        """Send once, no retry (as Kafka); `callback(offsets, response_or_error)` runs
        in the application thread at a later poll/commit/close.

        One OffsetCommit at a time, in call order: a node may serve concurrent gRPC
        calls in any order, and a later commit must not be overtaken by an earlier
        one (Kafka gets this order from its single connection)."""
        done = dict(offsets)
        try:
            request = self._commit_request(done)
        except KafkaError as e:
            with self.cond:
                self._async.append((done, e, callback))
            return
        with self.cond:
            while self._async_pending >= MAX_ASYNC_COMMITS:
                self.cond.wait(0.1)  # bounded: the oldest completes or fails in time
            self._async_pending += 1
            self._async_queue.append((request, done, callback))
        self._send_next_async()

    def _send_next_async(self) -> None:
        """Send the oldest queued async commit unless one is on the wire."""
        while True:
            with self.cond:
                if self._async_sending or not self._async_queue:
                    return
                request, done, callback = self._async_queue.popleft()
                c = self.m.coordinator
                if c is None:
                    self.m.wants_coordinator = True
                    self._async_pending -= 1
                    self._async.append(
                        (
                            done,
                            CoordinatorNotAvailableError(
                                f"no coordinator known for group {self.group_id!r} yet"
                            ),
                            callback,
                        )
                    )
                    self.cond.notify_all()
                    continue
                self._async_sending = True
            stub = self.metadata.connections.group_stub((c.host, c.port))
            future = stub.OffsetCommit.future(request, timeout=self.request_timeout_s)
            future.add_done_callback(
                lambda f, done=done, callback=callback: self._async_finished(f, done, callback)
            )
            return

    def _async_finished(
        self, f: grpc.Future, done: dict[TopicPartition, OffsetAndMetadata], callback: Callable
    ) -> None:
        try:
            outcome: Any = call(lambda _r, timeout: f.result(), None, self.request_timeout_s)
            error = self._commit_outcome(outcome)
            if error is not None:
                outcome = error
        except (KafkaError, grpc.FutureCancelledError) as e:
            outcome = e if isinstance(e, KafkaError) else KafkaError("cancelled")
            with self.cond:
                self.m.coordinator_failed(time.monotonic(), f"OffsetCommit failed: {e}")
        with self.cond:
            self._async_sending = False
            self._async_pending -= 1
            self._async.append((done, outcome, callback))
            self.cond.notify_all()
        self._send_next_async()
        self._wakeup_app()

    def run_commit_callbacks(self) -> None:
        """Completed async commits' callbacks, in the calling (application) thread."""
        while True:
            with self.cond:
                if not self._async:
                    return
                offsets, outcome, callback = self._async.popleft()
            try:
                callback(offsets, outcome)
            except Exception:  # noqa: BLE001 - the app's callback must not stop commits
                _log.exception("group %s: a commit callback raised", self.group_id)

    def wait_async_commits(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        with self.cond:
            while self._async_pending and time.monotonic() < deadline:
                self.cond.wait(min(0.1, max(deadline - time.monotonic(), 0.001)))
        self.run_commit_callbacks()

    def fetch_committed(
        self, partitions: list[TopicPartition], timeout_s: float
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets (None: none committed), retrying coordinator
        moves and unstable offsets until `timeout_s`."""
        if not partitions:
            return {}
        deadline = time.monotonic() + timeout_s
        request = gpb.OffsetFetchRequest(group_id=self.group_id, require_stable=True)
        for topic in sorted({tp.topic for tp in partitions}):
            request.topics.add(
                name=topic,
                partition_indexes=sorted(tp.partition for tp in partitions if tp.topic == topic),
            )
        attempt = 0
        while True:
            stub = self._coordinator_stub(deadline)
            remaining = max(deadline - time.monotonic(), 0.01)
            error: KafkaError | None = None
            try:
                response = call(stub.OffsetFetch, request, min(remaining, self.request_timeout_s))
            except KafkaError as e:
                with self.cond:
                    self.m.coordinator_failed(time.monotonic(), f"OffsetFetch failed: {e}")
                error = e
            else:
                codes = [response.error_code] + [
                    p.error_code for t in response.topics for p in t.partitions
                ]
                bad = next((c for c in codes if c != E.NONE), E.NONE)
                if bad == E.NONE:
                    out: dict[TopicPartition, OffsetAndMetadata | None] = {
                        tp: None for tp in partitions
                    }
                    for t in response.topics:
                        for p in t.partitions:
                            tp = TopicPartition(t.name, p.partition_index)
                            if tp in out and p.committed_offset >= 0:
                                out[tp] = OffsetAndMetadata(
                                    p.committed_offset, p.metadata, p.committed_leader_epoch
                                )
                    return out
                if bad in COORDINATOR_ERRORS:
                    with self.cond:
                        self.m.coordinator_failed(time.monotonic(), f"OffsetFetch: {E.Name(bad)}")
                error = for_code(bad, f"OffsetFetch of group {self.group_id!r}")
                if bad not in _RETRY_OFFSET_CODES:
                    raise error
            attempt += 1
            delay = self.m.backoff(attempt)
            if time.monotonic() + delay >= deadline:
                raise KafkaTimeoutError(
                    f"committed offsets of group {self.group_id!r} not fetched: {error}"
                )
            time.sleep(delay)

    # --- leaving ------------------------------------------------------------------------

    def leave(self, reason: str, timeout_s: float) -> None:
        """Leave the group; waits (at most timeout_s) for the LeaveGroup to go out."""
        deadline = time.monotonic() + timeout_s
        with self.cond:
            self.m.leave(time.monotonic(), reason)
            if self.m.abandon_in_flight and self._in_flight_future is not None:
                self._in_flight_future.cancel()
            self.cond.notify_all()
            while self.m.leave_pending and time.monotonic() < deadline:
                if self.m.coordinator is None and self.m.coordinator_failures > 3:
                    break  # nobody to tell; the session timeout removes us
                self.cond.wait(min(0.1, max(deadline - time.monotonic(), 0.001)))

    def close(self, timeout_s: float) -> None:
        with self.cond:
            self._stopping = True
            self.m.close()
            future = self._in_flight_future
            self.cond.notify_all()
        if future is not None:
            future.cancel()
        self._thread.join(timeout=max(timeout_s, 0.1))

    def metrics(self) -> dict[str, float]:
        with self.cond:
            out = dict(self.m.counters.values)
            now = time.monotonic()
            lost = self.m.coordinator_lost_at
            out["coordinator-unknown-seconds"] = now - lost if lost is not None else 0.0
            out["last-heartbeat-seconds-ago"] = now - self.m.last_heartbeat_ok
            out["assigned-partitions"] = len(self.m.owned)
            out["generation-id"] = self.m.generation
            return out


__all__ = ["ConsumerCoordinator", "OffsetAndMetadata"]
