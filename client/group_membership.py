"""A consumer's membership in a group, as a state machine without I/O: Kafka's
classic rebalance protocol seen from the member (find the coordinator, JoinGroup,
SyncGroup, heartbeats, LeaveGroup) and the error rules of Kafka's consumer.

Events go in (responses, transport failures, the application's poll and what it
did with its partitions, time); decisions come out: `next_request(now)` says which
request the I/O shell sends next (one at a time), `app_step()` what the
application thread must do with its partitions (the rebalance listener runs there,
as in Kafka). The shell (client/group_coordinator.py) holds a lock around it.

Partition ownership follows Kafka's consumer:
- eager assignors: before rejoining, the member revokes everything it owns;
- cooperative ones: it keeps what it owns, sends it in its subscription, revokes
  only what the new assignment takes away, and then rejoins once more so the
  leader can hand those partitions on;
- a member that lost its generation (UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION, a
  poll timeout) lost its partitions: `Lost`, no commit.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from seglog.proto import errors_pb2
from seglog.proto import groups_pb2 as gpb

from .assignors import COOPERATIVE, Assignor, rebalance_protocol
from .cluster import FATAL_ERRORS, TopicPartition
from .consumer_protocol import (
    NO_GENERATION,
    PROTOCOL_TYPE,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from .errors import KafkaError, for_code

E = errors_pb2.ErrorCode

# Request kinds the shell sends to the coordinator (FIND to any node).
FIND = "FindCoordinator"
JOIN = "JoinGroup"
SYNC = "SyncGroup"
HEARTBEAT = "Heartbeat"
LEAVE = "LeaveGroup"
# Not a request: the leader needs partition counts to run its assignor.
ASSIGN = "Assign"

# Errors after which a member must find its coordinator again.
COORDINATOR_ERRORS = {E.COORDINATOR_NOT_AVAILABLE, E.NOT_COORDINATOR}
# Errors a group request cannot recover from: raised to the application.
FATAL_GROUP_ERRORS = {
    E.FENCED_INSTANCE_ID,
    E.GROUP_AUTHORIZATION_FAILED,
    E.INVALID_GROUP_ID,
    E.INCONSISTENT_GROUP_PROTOCOL,
    E.INVALID_SESSION_TIMEOUT,
    E.GROUP_MAX_SIZE_REACHED,
    E.UNRELEASED_INSTANCE_ID,
    E.UNSUPPORTED_VERSION,
    E.INVALID_REQUEST,
}


class MemberState(Enum):
    UNJOINED = "UNJOINED"  # not in a generation (maybe waiting to rejoin)
    JOINING = "JOINING"  # JoinGroup sent
    ASSIGNING = "ASSIGNING"  # the leader, computing the assignment
    SYNCING = "SYNCING"  # SyncGroup due or sent
    STABLE = "STABLE"  # in a generation, heartbeating
    FATAL = "FATAL"
    CLOSED = "CLOSED"


@dataclass(frozen=True)
class Coordinator:
    node_id: int
    host: str
    port: int


@dataclass(frozen=True)
class Send:
    """A request for the shell to send: `kind` is the RPC; `request` its message.
    For ASSIGN, `topics` are those whose partition counts the leader needs."""

    kind: str
    request: object = None
    topics: frozenset[str] = frozenset()


# --- what the application thread must do -----------------------------------------------


@dataclass(frozen=True)
class PrepareJoin:
    """Before rejoining: commit if auto-committing, then revoke `revoked` (all owned
    partitions with an eager protocol, none with a cooperative one)."""

    revoked: frozenset[TopicPartition]


@dataclass(frozen=True)
class Lost:
    """The generation is gone: these partitions may already be someone else's."""

    lost: frozenset[TopicPartition]


@dataclass(frozen=True)
class Assign:
    """A new assignment: revoke `revoked` (cooperative only), take `assigned`;
    `added` is what is new (what a cooperative listener is told about)."""

    assigned: frozenset[TopicPartition]
    added: frozenset[TopicPartition]
    revoked: frozenset[TopicPartition]


AppStep = PrepareJoin | Lost | Assign


def _error_name(code: int) -> str:
    try:
        return E.Name(code)
    except ValueError:
        return f"error code {code}"


@dataclass
class MembershipConfig:
    group_id: str
    group_instance_id: str | None
    client_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    heartbeat_interval_ms: int
    max_poll_interval_ms: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int


@dataclass
class MembershipCounters:
    """Kafka's consumer-coordinator-metrics names where one exists."""

    values: dict[str, float] = field(
        default_factory=lambda: {
            "heartbeat-total": 0,
            "join-total": 0,
            "sync-total": 0,
            "rebalance-total": 0,
            "failed-rebalance-total": 0,
            "coordinator-lookup-failed-total": 0,
            "heartbeat-failed-total": 0,
            "poll-timeout-leave-total": 0,
        }
    )

    def add(self, name: str, n: float = 1) -> None:
        self.values[name] = self.values.get(name, 0) + n


class GroupMembership:
    def __init__(
        self,
        config: MembershipConfig,
        assignors: list[Assignor],
        now: float,
        rng: random.Random | None = None,
    ) -> None:
        if not assignors:
            raise ValueError("a group member needs at least one assignor")
        if config.heartbeat_interval_ms >= config.session_timeout_ms:
            raise ValueError(
                f"heartbeat_interval_ms ({config.heartbeat_interval_ms}) must be lower than "
                f"session_timeout_ms ({config.session_timeout_ms})"
            )
        self.config = config
        self.assignors = assignors
        self.protocol = rebalance_protocol(assignors)
        self.rng = rng or random.Random()
        self.counters = MembershipCounters()
        self.state = MemberState.UNJOINED
        self.fatal_error: KafkaError | None = None
        # The coordinator and finding it.
        self.coordinator: Coordinator | None = None
        self.coordinator_failures = 0
        self.coordinator_retry_at = 0.0
        self.coordinator_lost_at: float | None = now  # when it became unknown
        self.last_coordinator_error: str = ""
        self.wants_coordinator = False  # a commit or fetch of offsets needs it
        # The member.
        self.member_id = ""
        self.generation = NO_GENERATION
        self.protocol_name: str | None = None
        self.leader_id = ""
        self.subscription: tuple[str, ...] = ()
        self.owned: frozenset[TopicPartition] = frozenset()
        self.pending_assignment: frozenset[TopicPartition] | None = None
        # Rebalancing.
        self.rejoin_needed = False
        self.join_prepared = False
        self._rejoin_epoch = 0  # bumped by every rejoin request
        self._join_epoch = 0  # the epoch the join in progress serves
        self._join_retry_at = 0.0
        self._join_failures = 0
        self._join_members: list[gpb.JoinGroupMember] = []
        self._sync_request: gpb.SyncGroupRequest | None = None
        self.leader_counts: dict[str, int] = {}  # partition counts the leader assigned from
        # Heartbeats and the poll timer.
        self.last_heartbeat_sent = now
        self.last_heartbeat_ok = now
        self.heartbeat_retry_at = 0.0
        self.last_poll = now
        # Requests.
        self.in_flight: str | None = None
        self._leave: gpb.LeaveGroupRequest | None = None

    # --- derived ---------------------------------------------------------------------

    @property
    def dynamic(self) -> bool:
        return not self.config.group_instance_id

    @property
    def subscribed(self) -> bool:
        return bool(self.subscription)

    def generation_if_stable(self) -> tuple[int, str] | None:
        if self.state is MemberState.STABLE and self.generation != NO_GENERATION:
            return self.generation, self.member_id
        return None

    def rebalancing(self) -> bool:
        return self.state in (MemberState.JOINING, MemberState.ASSIGNING, MemberState.SYNCING)

    def backoff(self, failures: int) -> float:
        """Exponential retry backoff (retry.backoff.ms up to retry.backoff.max.ms), jittered."""
        return self._backoff(failures)

    def _backoff(self, failures: int) -> float:
        base = min(
            self.config.retry_backoff_max_ms,
            self.config.retry_backoff_ms * 2 ** min(max(failures - 1, 0), 16),
        )
        return base / 1000 * self.rng.uniform(0.8, 1.2)

    # --- the application's events -------------------------------------------------------

    def set_subscription(self, topics: Iterable[str]) -> None:
        new = tuple(sorted(set(topics)))
        if new != self.subscription:
            self.subscription = new
            if new:
                self.request_rejoin()

    def request_rejoin(self) -> None:
        self.rejoin_needed = True
        self._rejoin_epoch += 1

    def poll(self, now: float) -> None:
        """The application called poll(): the max.poll.interval.ms timer restarts."""
        self.last_poll = now

    def app_step(self) -> AppStep | None:
        """What the application thread must do next with its partitions (None: nothing).
        Raises the fatal error once the membership cannot go on."""
        if self.fatal_error is not None:
            raise self.fatal_error
        if self.owned and self.generation == NO_GENERATION and not self.rebalancing():
            return Lost(self.owned)
        if self.pending_assignment is not None:
            assigned = self.pending_assignment
            revoked = self.owned - assigned if self.protocol == COOPERATIVE else frozenset()
            return Assign(assigned, assigned - self.owned, revoked)
        if (
            self.subscribed
            and self.rejoin_needed
            and not self.join_prepared
            and self.state in (MemberState.UNJOINED, MemberState.STABLE)
        ):
            revoked = self.owned if self.protocol != COOPERATIVE else frozenset()
            return PrepareJoin(revoked)
        return None

    def app_done(self, step: AppStep) -> None:
        """The application thread finished `step` (listener called, fetcher updated)."""
        if isinstance(step, Lost):
            self.owned = frozenset()
        elif isinstance(step, Assign):
            assert self.pending_assignment == step.assigned, "a stale assignment step"
            self.owned = step.assigned
            self.pending_assignment = None
            if step.revoked:
                # Cooperative: the leader hands these on in one more rebalance.
                self.request_rejoin()
        else:
            self.owned = self.owned - step.revoked
            self.join_prepared = True

    def leave(self, now: float, reason: str) -> None:
        """Leave the group (unsubscribe, close): a dynamic member says so, a static
        one just stops (its session ends, as Kafka's static members do)."""
        # As Kafka's maybeLeaveGroup: any member id the coordinator gave, a generation
        # or not: a member still in its join (KIP-394's id, the JoinGroup held for the
        # rebalance) is in the group too, and would stay there a whole session.
        if self.member_id and self.dynamic:
            self._leave = gpb.LeaveGroupRequest(
                group_id=self.config.group_id,
                members=[gpb.MemberIdentity(member_id=self.member_id, reason=reason)],
            )
        self.subscription = ()
        self._reset_generation(reset_member_id=True)
        self.owned = frozenset()
        self.pending_assignment = None
        self.rejoin_needed = False
        self.join_prepared = False
        self.state = MemberState.UNJOINED

    def close(self) -> None:
        self.state = MemberState.CLOSED

    @property
    def abandon_in_flight(self) -> bool:
        """A LeaveGroup waits behind a JoinGroup or SyncGroup the coordinator may hold
        until the rebalance ends: the shell cancels that call so the leave goes out."""
        return self._leave is not None and self.in_flight in (JOIN, SYNC)

    @property
    def leave_pending(self) -> bool:
        """A LeaveGroup is still to be sent or awaiting its answer."""
        return self._leave is not None or self.in_flight == LEAVE

    def check_metadata(self, counts: Mapping[str, int]) -> None:
        """The leader watches the partition counts it assigned from: a change
        (partitions added, a topic created or deleted) means a new assignment. Also
        while its SyncGroup is in flight: metadata that arrives then would otherwise
        be compared with nothing afterwards (a topic created a moment before the
        leader counted it stayed unassigned)."""
        if self.state not in (MemberState.SYNCING, MemberState.STABLE):
            return
        if self.leader_id != self.member_id:
            return
        for topic, count in counts.items():
            if topic in self.leader_counts and self.leader_counts[topic] != count:
                self.request_rejoin()
                return

    # --- decisions ----------------------------------------------------------------------

    def next_request(self, now: float) -> Send | None:
        """The request to send now, if any; it is in flight until its response or
        failure is reported."""
        if self.in_flight is not None or self.state in (MemberState.FATAL, MemberState.CLOSED):
            return None
        if self._leave is not None and self.coordinator is not None:
            self.in_flight = LEAVE
            request, self._leave = self._leave, None
            return Send(LEAVE, request)
        if self.coordinator is None:
            if (self.subscribed or self.wants_coordinator or self._leave is not None) and (
                now >= self.coordinator_retry_at
            ):
                self.in_flight = FIND
                return Send(FIND, gpb.FindCoordinatorRequest(key=self.config.group_id))
            return None
        if self._poll_timer_expired(now):
            return self._leave_on_poll_timeout(now)
        if self.state is MemberState.ASSIGNING:
            topics = frozenset(t for m in self._join_members for t in self._topics_of(m))
            self.in_flight = ASSIGN
            return Send(ASSIGN, topics=topics)
        if self.state is MemberState.SYNCING and self._sync_request is not None:
            self.in_flight = SYNC
            return Send(SYNC, self._sync_request)
        if (
            self.subscribed
            and self.rejoin_needed
            and self.join_prepared
            and self.pending_assignment is None
            and self.state in (MemberState.UNJOINED, MemberState.STABLE)
            and now >= self._join_retry_at
        ):
            return self._join(now)
        if self.state is MemberState.STABLE:
            if now - self.last_heartbeat_ok > self.config.session_timeout_ms / 1000:
                # No heartbeat got through for a whole session: the coordinator is
                # gone or cut off; find it again (it expired us, or will say so).
                self._coordinator_dead(now, "no heartbeat answered within the session timeout")
                return self.next_request(now)
            due = max(
                self.last_heartbeat_sent + self.config.heartbeat_interval_ms / 1000,
                self.heartbeat_retry_at,
            )
            if now >= due:
                self.in_flight = HEARTBEAT
                self.last_heartbeat_sent = now
                return Send(
                    HEARTBEAT,
                    gpb.HeartbeatRequest(
                        group_id=self.config.group_id,
                        generation_id=self.generation,
                        member_id=self.member_id,
                        group_instance_id=self.config.group_instance_id or "",
                    ),
                )
        return None

    def next_wakeup(self, now: float) -> float:
        """Seconds until `next_request` may have something new to send on time alone."""
        times = [now + 1.0]
        if self.coordinator is None:
            times.append(self.coordinator_retry_at)
        else:
            if self.state is MemberState.STABLE:
                times.append(
                    max(
                        self.last_heartbeat_sent + self.config.heartbeat_interval_ms / 1000,
                        self.heartbeat_retry_at,
                    )
                )
            if self.rejoin_needed:
                times.append(self._join_retry_at)
            if self.member_id and self.subscribed:
                times.append(self.last_poll + self.config.max_poll_interval_ms / 1000)
        return max(0.0, min(times) - now)

    def _topics_of(self, member: gpb.JoinGroupMember) -> tuple[str, ...]:
        try:
            return decode_subscription(member.metadata).topics
        except ValueError:
            return ()

    def _join(self, now: float) -> Send:
        metadata = encode_subscription(Subscription(self.subscription, self.owned, self.generation))
        self.state = MemberState.JOINING
        self.in_flight = JOIN
        self._join_epoch = self._rejoin_epoch
        self.counters.add("join-total")
        return Send(
            JOIN,
            gpb.JoinGroupRequest(
                group_id=self.config.group_id,
                session_timeout_ms=self.config.session_timeout_ms,
                rebalance_timeout_ms=self.config.rebalance_timeout_ms,
                member_id=self.member_id,
                group_instance_id=self.config.group_instance_id or "",
                protocol_type=PROTOCOL_TYPE,
                protocols=[
                    gpb.JoinGroupProtocol(name=a.name, metadata=metadata) for a in self.assignors
                ],
                client_id=self.config.client_id,
            ),
        )

    def _poll_timer_expired(self, now: float) -> bool:
        return (
            self.subscribed
            and bool(self.member_id)
            and self.generation != NO_GENERATION
            and now - self.last_poll > self.config.max_poll_interval_ms / 1000
        )

    def _leave_on_poll_timeout(self, now: float) -> Send | None:
        """The application stopped polling: give the partitions to the others (as
        Kafka's heartbeat thread does); the next poll rejoins."""
        self.counters.add("poll-timeout-leave-total")
        reason = (
            f"consumer poll timeout has expired: no poll() within max.poll.interval.ms "
            f"({self.config.max_poll_interval_ms} ms)"
        )
        subscription = self.subscription
        owned = self.owned
        self.leave(now, reason)
        self.subscription = subscription
        self.owned = owned  # reported Lost to the application at its next poll
        self.request_rejoin()
        return self.next_request(now)

    # --- responses ----------------------------------------------------------------------

    def on_failure(self, now: float, kind: str, error: KafkaError) -> None:
        """The request could not be sent or got no answer (transport failure)."""
        assert self.in_flight == kind, f"{kind} failed but {self.in_flight} was in flight"
        self.in_flight = None
        if isinstance(error, FATAL_ERRORS):
            # Even a new login failed (the password was changed, the user deleted), or
            # no bootstrap server is a seglog node: fatal, as Kafka's heartbeat thread
            # stops on an AuthenticationException, rather than retrying; poll() raises it.
            self.state = MemberState.FATAL
            self.fatal_error = error
            return
        if kind == FIND:
            self._lookup_failed(now, str(error))
        elif kind == ASSIGN:
            # No metadata for the leader's assignment: try the join again.
            self._rejoin_later(now, failed=True)
        elif kind == LEAVE:
            pass  # best effort: the session timeout removes the member anyway
        elif kind in (JOIN, SYNC) and self._leave is not None:
            pass  # abandoned for the LeaveGroup (abandon_in_flight): the coordinator is fine
        else:
            if kind == HEARTBEAT:
                self.counters.add("heartbeat-failed-total")
            self._coordinator_dead(now, f"{kind} failed: {error}")

    def on_find_coordinator(self, now: float, response: gpb.FindCoordinatorResponse) -> None:
        self._done(FIND)
        code = response.error_code
        if code == E.NONE and response.node_id >= 0 and response.port > 0:
            self.coordinator = Coordinator(response.node_id, response.host, response.port)
            self.coordinator_failures = 0
            self.coordinator_lost_at = None
            self.last_heartbeat_ok = now  # the session timer starts over with a new coordinator
            return
        if code in FATAL_GROUP_ERRORS:
            self._fatal(code, response.error_message)
            return
        detail = _error_name(code) if code != E.NONE else "no coordinator in the answer"
        self._lookup_failed(now, f"{detail}: {response.error_message}".rstrip(": "))

    def on_join_group(self, now: float, response: gpb.JoinGroupResponse) -> None:
        self._done(JOIN)
        if self.state is not MemberState.JOINING:
            return  # the member left or lost its coordinator meanwhile: stale
        code = response.error_code
        if code == E.NONE:
            self._join_failures = 0
            self.member_id = response.member_id
            self.generation = response.generation_id
            self.protocol_name = response.protocol_name
            self.leader_id = response.leader
            if response.leader == response.member_id and not response.skip_assignment:
                self._join_members = list(response.members)
                self.state = MemberState.ASSIGNING
            else:
                self._sync_request = self._sync([])
                self.state = MemberState.SYNCING
            return
        self.state = MemberState.UNJOINED
        if code == E.MEMBER_ID_REQUIRED:
            # KIP-394: the coordinator gives the id to join with; rejoin at once.
            self.member_id = response.member_id
            return
        self.counters.add("failed-rebalance-total")
        if code == E.UNKNOWN_MEMBER_ID:
            self._reset_generation(reset_member_id=True)
            self._rejoin_later(now, failed=True)
        elif code == E.ILLEGAL_GENERATION:
            self._reset_generation(reset_member_id=False)
            self._rejoin_later(now, failed=True)
        elif code in (E.REBALANCE_IN_PROGRESS, E.COORDINATOR_LOAD_IN_PROGRESS):
            self._rejoin_later(now, failed=True)
        elif code in COORDINATOR_ERRORS:
            self._coordinator_dead(now, f"JoinGroup: {_error_name(code)}")
        else:
            self._fatal(code, f"JoinGroup of group {self.config.group_id!r}")

    def on_assignment_input(self, now: float, counts: Mapping[str, int]) -> None:
        """The leader's partition counts arrived: run the chosen assignor."""
        self._done(ASSIGN)
        if self.state is not MemberState.ASSIGNING:
            return
        assignor = next((a for a in self.assignors if a.name == self.protocol_name), None)
        if assignor is None:
            self._fatal(
                E.INCONSISTENT_GROUP_PROTOCOL,
                f"the coordinator chose assignor {self.protocol_name!r}, which this "
                f"member does not have",
            )
            return
        subscriptions: dict[str, Subscription] = {}
        for m in self._join_members:
            try:
                subscriptions[m.member_id] = decode_subscription(
                    m.metadata, m.group_instance_id or None
                )
            except ValueError:
                # A member whose metadata cannot be read gets nothing (it can still
                # consume nothing rather than break the whole group).
                subscriptions[m.member_id] = Subscription((), group_instance_id=None)
        # Topics not (yet) in the metadata count 0: when they appear, check_metadata
        # sees the change and the leader assigns them in a new generation.
        wanted = {t for sub in subscriptions.values() for t in sub.topics}
        self.leader_counts = {t: counts.get(t, 0) for t in wanted}
        result = assignor.assign(counts, subscriptions)
        self._sync_request = self._sync(
            [
                gpb.SyncGroupAssignment(member_id=m, assignment=encode_assignment(tps))
                for m, tps in sorted(result.items())
            ]
        )
        self._join_members = []
        self.state = MemberState.SYNCING

    def _sync(self, assignments: list[gpb.SyncGroupAssignment]) -> gpb.SyncGroupRequest:
        return gpb.SyncGroupRequest(
            group_id=self.config.group_id,
            generation_id=self.generation,
            member_id=self.member_id,
            group_instance_id=self.config.group_instance_id or "",
            protocol_type=PROTOCOL_TYPE,
            protocol_name=self.protocol_name or "",
            assignments=assignments,
        )

    def on_sync_group(self, now: float, response: gpb.SyncGroupResponse) -> None:
        self._done(SYNC)
        if self.state is not MemberState.SYNCING:
            return  # the member left or lost its coordinator meanwhile: stale
        self._sync_request = None
        code = response.error_code
        if code == E.NONE:
            try:
                assigned = frozenset(decode_assignment(response.assignment))
            except ValueError as e:
                self._fatal(E.INCONSISTENT_GROUP_PROTOCOL, str(e))
                return
            self.counters.add("sync-total")
            self.counters.add("rebalance-total")
            self.state = MemberState.STABLE
            self.pending_assignment = assigned
            self.join_prepared = False
            self.rejoin_needed = self._rejoin_epoch != self._join_epoch
            self.last_heartbeat_ok = self.last_heartbeat_sent = now
            self.heartbeat_retry_at = 0.0
            return
        self.counters.add("failed-rebalance-total")
        self.state = MemberState.UNJOINED
        if code == E.REBALANCE_IN_PROGRESS:
            self.request_rejoin()
        elif code == E.COORDINATOR_LOAD_IN_PROGRESS:
            self._rejoin_later(now, failed=True)
        elif code == E.UNKNOWN_MEMBER_ID:
            self._reset_generation(reset_member_id=True)
        elif code == E.ILLEGAL_GENERATION:
            self._reset_generation(reset_member_id=False)
        elif code in COORDINATOR_ERRORS:
            self._coordinator_dead(now, f"SyncGroup: {_error_name(code)}")
        else:
            self._fatal(code, f"SyncGroup of group {self.config.group_id!r}")

    def on_heartbeat(self, now: float, response: gpb.HeartbeatResponse) -> None:
        self._done(HEARTBEAT)
        self.counters.add("heartbeat-total")
        code = response.error_code
        if self.state is not MemberState.STABLE:
            return  # answered after the member moved on (left, rejoined)
        if code == E.NONE:
            self.last_heartbeat_ok = now
            return
        if code == E.REBALANCE_IN_PROGRESS:
            # The generation is still ours: keep heartbeating until the app rejoins.
            self.last_heartbeat_ok = now
            if not self.rejoin_needed:
                self.request_rejoin()
        elif code == E.UNKNOWN_MEMBER_ID:
            self._reset_generation(reset_member_id=True)
            self.state = MemberState.UNJOINED
        elif code == E.ILLEGAL_GENERATION:
            self._reset_generation(reset_member_id=False)
            self.state = MemberState.UNJOINED
        elif code in COORDINATOR_ERRORS:
            self._coordinator_dead(now, f"Heartbeat: {_error_name(code)}")
        elif code == E.COORDINATOR_LOAD_IN_PROGRESS:
            self.heartbeat_retry_at = now + self._backoff(1)
        else:
            self._fatal(code, f"Heartbeat in group {self.config.group_id!r}")

    def on_leave_group(self, now: float, response: gpb.LeaveGroupResponse) -> None:
        self._done(LEAVE)
        if response.error_code in COORDINATOR_ERRORS:
            self._coordinator_dead(now, f"LeaveGroup: {_error_name(response.error_code)}")

    def on_commit_error(self, now: float, code: int) -> None:
        """An OffsetCommit partition error, applied to the membership (Kafka's rules);
        the caller raises the matching error to the committer."""
        if code == E.UNKNOWN_MEMBER_ID:
            self._reset_generation(reset_member_id=True)
            if self.state is MemberState.STABLE:
                self.state = MemberState.UNJOINED
        elif code == E.ILLEGAL_GENERATION:
            self._reset_generation(reset_member_id=False)
            if self.state is MemberState.STABLE:
                self.state = MemberState.UNJOINED
        elif code == E.REBALANCE_IN_PROGRESS:
            if self.subscribed and not self.rejoin_needed:
                self.request_rejoin()
        elif code in COORDINATOR_ERRORS:
            self._coordinator_dead(now, f"OffsetCommit: {_error_name(code)}")
        elif code == E.FENCED_INSTANCE_ID:
            self._fatal(code, f"OffsetCommit in group {self.config.group_id!r}")

    def coordinator_failed(self, now: float, why: str) -> None:
        """A commit or offset fetch could not reach the coordinator."""
        self._coordinator_dead(now, why)

    # --- internals ----------------------------------------------------------------------

    def _done(self, kind: str) -> None:
        assert self.in_flight == kind, f"a {kind} answer while {self.in_flight} was in flight"
        self.in_flight = None

    def _lookup_failed(self, now: float, why: str) -> None:
        self.coordinator_failures += 1
        self.counters.add("coordinator-lookup-failed-total")
        self.last_coordinator_error = why
        self.coordinator_retry_at = now + self._backoff(self.coordinator_failures)

    def _coordinator_dead(self, now: float, why: str) -> None:
        if self.coordinator is not None:
            self.coordinator = None
            self.coordinator_lost_at = now
            # Ask again after a backoff: a node may name itself coordinator a moment
            # before it serves the group (NOT_COORDINATOR meanwhile).
            self.coordinator_retry_at = now + self._backoff(1)
        self.last_coordinator_error = why
        if self.rebalancing():
            # The join in progress is lost with the coordinator: join again once found.
            self.state = MemberState.UNJOINED
            self._sync_request = None
            self._join_members = []
            self.rejoin_needed = True

    def _reset_generation(self, reset_member_id: bool) -> None:
        self.generation = NO_GENERATION
        self.protocol_name = None
        self.leader_id = ""
        if reset_member_id:
            self.member_id = ""
        if self.subscribed:
            self.request_rejoin()

    def _rejoin_later(self, now: float, failed: bool) -> None:
        self.state = MemberState.UNJOINED
        self.rejoin_needed = True
        if failed:
            self._join_failures += 1
            self._join_retry_at = now + self._backoff(self._join_failures)

    def _fatal(self, code: int, context: str) -> None:
        self.state = MemberState.FATAL
        self.fatal_error = for_code(code, context)
