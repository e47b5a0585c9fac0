"""A consumer shaped like kafka-python's KafkaConsumer.

Without a `group_id`, `subscribe()` (or topics given to the constructor) assigns
every partition of the topics and positions live in the consumer alone. With a
`group_id`, the consumer is a member of a consumer group (Kafka's classic
protocol, against the nodes' group coordinator): the group's assignor splits the
partitions among its members, positions start at the group's committed offsets
(`auto_offset_reset` when none), and offsets are committed automatically every
`auto_commit_interval_ms` or with `commit()` / `commit_async()`.

    consumer = Consumer("events", bootstrap_servers="127.0.0.1:9192",
                        group_id="billing", auto_offset_reset="earliest")
    for record in consumer:
        ...

`isolation_level="read_committed"` reads only committed transactional records: up to
the last stable offset, without the aborted transactions' records (fetched_batches.py;
docs/transactions.md); `group_metadata()` is what a transactional Producer's
send_offsets_to_transaction takes.

What it reads is in subscription_state.py, positions and fetching in fetcher.py,
the argument checks in consumer_args.py. The membership logic is a state machine
in group_membership.py; the I/O with the coordinator in group_coordinator.py; the
assignors in assignors.py.
"""

from __future__ import annotations

import logging
import random
import time
import warnings
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .assignors import make_assignors
from .cluster import ClusterMetadata, Connections, TopicPartition
from .consumer_args import (
    ISOLATION_LEVELS,
    RESET_POLICIES,
    as_tp,
    check_timestamp_ms,
    offsets_arg,
    positive_int,
    to_seconds,
)
from .errors import IllegalStateError, KafkaError, KafkaTimeoutError
from .fetched_batches import ConsumerRecord, Deserializer
from .fetcher import (
    EARLIEST,
    EARLIEST_TIMESTAMP,
    LATEST,
    LATEST_TIMESTAMP,
    NONE,
    FetchConfig,
    Fetcher,
    NoOffsetForPartitionError,
    OffsetAndTimestamp,
    OffsetOutOfRangeError,
)
from .group_coordinator import ConsumerCoordinator, OffsetAndMetadata
from .group_membership import Assign, GroupMembership, Lost, MembershipConfig, PrepareJoin
from .security import ClientSecurity
from .subscription_state import ConsumerRebalanceListener, SubscriptionState
from .transaction_manager import ConsumerGroupMetadata

_log = logging.getLogger(__name__)
# The iterator waits in slices so an infinite consumer_timeout_ms stays bounded per wait.
_ITER_SLICE_S = 60.0

__all__ = [
    "Consumer",
    "ConsumerRebalanceListener",
    "OffsetAndMetadata",
    "ConsumerRecord",
    "NoOffsetForPartitionError",
    "OffsetAndTimestamp",
    "OffsetOutOfRangeError",
    "TopicPartition",
]


class Consumer:
    def __init__(
        self,
        *topics: str,
        bootstrap_servers: str | Sequence[str] = "127.0.0.1:9192",
        client_id: str = "seglog-consumer",
        group_id: str | None = None,
        group_instance_id: str | None = None,
        key_deserializer: Deserializer | None = None,
        value_deserializer: Deserializer | None = None,
        auto_offset_reset: str = "latest",
        enable_auto_commit: bool | None = None,
        auto_commit_interval_ms: int = 5000,
        session_timeout_ms: int = 45000,
        heartbeat_interval_ms: int = 3000,
        max_poll_interval_ms: int = 300000,
        partition_assignment_strategy: str | Sequence[str] = ("range", "cooperative-sticky"),
        default_api_timeout_ms: int = 60000,
        fetch_min_bytes: int = 1,
        fetch_max_wait_ms: int = 500,
        fetch_max_bytes: int = 52428800,
        max_partition_fetch_bytes: int = 1048576,
        max_poll_records: int = 500,
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        metadata_max_age_ms: int = 300000,
        consumer_timeout_ms: float = float("inf"),
        isolation_level: str = "read_uncommitted",
        **security: str | None,
    ) -> None:
        client_security = ClientSecurity.from_options(security)
        if isolation_level not in ISOLATION_LEVELS:
            raise ValueError(
                f"isolation_level must be 'read_uncommitted' or 'read_committed', "
                f"got {isolation_level!r}"
            )
        if group_id is not None and (not isinstance(group_id, str) or not group_id):
            raise ValueError(f"group_id must be a non-empty string, got {group_id!r}")
        if group_instance_id is not None and group_id is None:
            raise ValueError("group_instance_id needs a group_id")
        if enable_auto_commit is None:
            enable_auto_commit = group_id is not None  # Kafka's default with a group
        elif enable_auto_commit and group_id is None:
            warnings.warn(
                "enable_auto_commit has no effect without a group_id; nothing is committed",
                stacklevel=2,
            )
            enable_auto_commit = False
        policy = RESET_POLICIES.get(str(auto_offset_reset).lower())
        if policy is None:
            raise ValueError(
                f"auto_offset_reset must be 'earliest', 'latest' or 'none', "
                f"got {auto_offset_reset!r}"
            )
        if not (consumer_timeout_ms == float("inf") or consumer_timeout_ms >= 0):
            raise ValueError(f"consumer_timeout_ms must be >= 0, got {consumer_timeout_ms!r}")
        self.client_id = client_id
        self.max_poll_records = positive_int("max_poll_records", max_poll_records)
        self.request_timeout_ms = positive_int("request_timeout_ms", request_timeout_ms)
        self.consumer_timeout_ms = consumer_timeout_ms
        config = FetchConfig(
            fetch_min_bytes=positive_int("fetch_min_bytes", fetch_min_bytes, 0),
            fetch_max_wait_ms=positive_int("fetch_max_wait_ms", fetch_max_wait_ms, 0),
            fetch_max_bytes=positive_int("fetch_max_bytes", fetch_max_bytes),
            max_partition_fetch_bytes=positive_int(
                "max_partition_fetch_bytes", max_partition_fetch_bytes
            ),
            request_timeout_ms=self.request_timeout_ms,
            auto_offset_reset=policy,
            retry_backoff_ms=positive_int("retry_backoff_ms", retry_backoff_ms),
            retry_backoff_max_ms=positive_int("retry_backoff_max_ms", retry_backoff_max_ms),
            key_deserializer=key_deserializer,
            value_deserializer=value_deserializer,
            isolation_level=ISOLATION_LEVELS[isolation_level],
        )
        self._metadata = ClusterMetadata(
            bootstrap_servers,
            Connections(client_security),
            request_timeout_ms=self.request_timeout_ms,
            metadata_max_age_ms=positive_int("metadata_max_age_ms", metadata_max_age_ms),
        )
        self._fetcher = Fetcher(self._metadata, config)
        self._fetcher.topics_of_interest = self._topics_of_interest
        self._fetcher.on_metadata = self._sync_subscription
        self._subscription = SubscriptionState()
        # Records drained for the iterator but not yet yielded:
        # (tp, generation, record, position after it).
        self._chunk: deque[tuple[TopicPartition, int, ConsumerRecord, int]] = deque()
        self._closed = False
        self.group_id = group_id
        self.enable_auto_commit = bool(enable_auto_commit)
        self.auto_commit_interval_ms = positive_int(
            "auto_commit_interval_ms", auto_commit_interval_ms
        )
        self.default_api_timeout_ms = positive_int("default_api_timeout_ms", default_api_timeout_ms)
        self._next_auto_commit = time.monotonic() + self.auto_commit_interval_ms / 1000
        self._coordinator: ConsumerCoordinator | None = None
        if group_id is not None:
            membership = GroupMembership(
                MembershipConfig(
                    group_id=group_id,
                    group_instance_id=group_instance_id,
                    client_id=client_id,
                    session_timeout_ms=positive_int("session_timeout_ms", session_timeout_ms),
                    rebalance_timeout_ms=positive_int("max_poll_interval_ms", max_poll_interval_ms),
                    heartbeat_interval_ms=positive_int(
                        "heartbeat_interval_ms", heartbeat_interval_ms
                    ),
                    max_poll_interval_ms=max_poll_interval_ms,
                    retry_backoff_ms=config.retry_backoff_ms,
                    retry_backoff_max_ms=config.retry_backoff_max_ms,
                ),
                make_assignors(partition_assignment_strategy),
                time.monotonic(),
                random.Random(),
            )
            self._coordinator = ConsumerCoordinator(
                membership, self._metadata, self.request_timeout_ms, self._fetcher.wakeup
            )
        if topics:
            try:
                self.subscribe(topics)
            except BaseException:
                # No cluster at the bootstrap addresses (BootstrapUnreachable): nothing
                # of this consumer (its coordinator thread, channels) stays behind.
                self.close(autocommit=False, timeout_ms=1000)
                raise

    # --- assignment -----------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Fetch exactly these partitions (positions of ones kept are kept)."""
        self._check_open()
        if self._subscription.subscribed:
            raise IllegalStateError("assign() cannot follow subscribe(); unsubscribe() first")
        tps = [as_tp(p) for p in partitions]
        self._abandon_chunk()
        before = set(self._fetcher.states)
        self._fetcher.assign(tps)
        self._subscription.manual = bool(tps)
        if self._coordinator is not None:
            # With a group, a partition starts at the group's committed offset.
            self._fetcher.awaiting_committed |= {tp for tp in tps if tp not in before}

    def assignment(self) -> set[TopicPartition]:
        return set(self._fetcher.states)

    def subscribe(
        self,
        topics: Iterable[str] | str = (),
        pattern: str | None = None,
        listener: object = None,
    ) -> None:
        """Assign every partition of the topics (or of topics matching `pattern`),
        following new partitions and topics at each metadata refresh."""
        self._check_open()
        if listener is not None and self._coordinator is None:
            raise ValueError("a rebalance listener needs a group_id")
        self._subscription.subscribe(topics, pattern, listener)
        self._fetcher.maybe_refresh_metadata(force=True)
        self._sync_subscription()

    def subscription(self) -> set[str] | None:
        sub = self._subscription
        if sub.topics is not None:
            return set(sub.topics)
        if sub.pattern is not None:
            return sub.matching(self._metadata.topics())
        return None

    def unsubscribe(self) -> None:
        if self._coordinator is not None and self._group_managed():
            self._leave_group("the consumer unsubscribed", self.default_api_timeout_ms / 1000)
        self._abandon_chunk()
        self._subscription.unsubscribe()
        self._fetcher.assign([])

    def _group_managed(self) -> bool:
        """Partitions come from the group's assignor (subscribe() with a group_id)."""
        return self._coordinator is not None and self._subscription.subscribed

    def _topics_of_interest(self) -> set[str] | None:
        sub = self._subscription
        if sub.pattern is not None:
            return None
        leader = set(self._coordinator.m.leader_counts) if self._coordinator else set()
        return {tp.topic for tp in self._fetcher.states} | (sub.topics or set()) | leader

    def _sync_subscription(self) -> bool:
        """Assign all partitions of subscribed topics; True while some are unknown."""
        sub = self._subscription
        if not sub.subscribed:
            return False
        if sub.pattern is not None:
            topics = sub.matching(self._metadata.topics())
            missing = False
        else:
            assert sub.topics is not None
            topics = sub.topics
            missing = any(self._metadata.partitions_for(t) is None for t in topics)
        if self._coordinator is not None:
            # The group's assignor decides the partitions; the member tells its topics.
            self._coordinator.set_subscription(set(topics))
            counts = {}
            for t in self._coordinator.m.leader_counts:
                parts = self._metadata.partitions_for(t)
                counts[t] = len(parts) if parts else 0
            self._coordinator.check_metadata(counts)
            # The leader keeps asking until every topic it assigned from exists.
            return missing or any(n == 0 for n in counts.values())
        wanted = [
            TopicPartition(t, p)
            for t in sorted(topics)
            for p in sorted(self._metadata.partitions_for(t) or {})
        ]
        if set(wanted) != set(self._fetcher.states):
            self._abandon_chunk()
            self._fetcher.assign(wanted)
        return missing

    # --- positions ------------------------------------------------------------------

    def seek(self, partition: TopicPartition, offset: int) -> None:
        """Fetch from `offset` at the next poll."""
        tp = as_tp(partition)
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ValueError(f"offset must be an int >= 0, got {offset!r}")
        self._fetcher.state(tp)  # raises when unassigned
        self._abandon_chunk()
        self._fetcher.seek(tp, offset)

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        """Move to the log start offset; resolved lazily, at the next poll/position()."""
        self._request_reset(partitions, EARLIEST)

    def seek_to_end(self, *partitions: TopicPartition) -> None:
        """Move to the high watermark; resolved lazily, at the next poll/position()."""
        self._request_reset(partitions, LATEST)

    def _request_reset(self, partitions: Sequence[TopicPartition], strategy: str) -> None:
        tps = [as_tp(p) for p in partitions] or list(self._fetcher.states)
        if not tps:
            raise IllegalStateError("no partitions are assigned")
        for tp in tps:
            self._fetcher.state(tp)
        self._abandon_chunk()
        for tp in tps:
            self._fetcher.request_reset(tp, strategy)

    def position(self, partition: TopicPartition, timeout_ms: float | None = None) -> int:
        """The offset of the next record poll() returns for the partition, resolving
        a pending reset (ListOffsets) first. KafkaTimeoutError if that cannot finish."""
        self._check_open()
        tp = as_tp(partition)
        st = self._fetcher.state(tp)
        deadline = time.monotonic() + to_seconds(timeout_ms, self.request_timeout_ms)
        while st.position is None:
            if st.error is not None:
                raise st.error
            if self._coordinator is not None:
                self._group_poll(deadline)
            self._fetcher.maybe_refresh_metadata()
            self._fetcher.reset_positions()
            if st.position is not None:
                break
            if st.error is not None:
                raise st.error
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise KafkaTimeoutError(
                    f"no position for {tp.topic}-{tp.partition} within the timeout"
                )
            time.sleep(min(remaining, self._fetcher.next_retry_in() or 0.05))
        return st.position

    def highwater(self, partition: TopicPartition) -> int | None:
        """The high watermark the last fetch reported, or None before any fetch."""
        return self._fetcher.state(as_tp(partition)).highwater

    def pause(self, *partitions: TopicPartition) -> None:
        tps = [as_tp(p) for p in partitions]
        for tp in tps:
            self._fetcher.state(tp)
        self._abandon_chunk()
        for tp in tps:
            self._fetcher.state(tp).paused = True

    def resume(self, *partitions: TopicPartition) -> None:
        for p in partitions:
            self._fetcher.state(as_tp(p)).paused = False

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, st in self._fetcher.states.items() if st.paused}

    # --- offsets lookups --------------------------------------------------------------

    def beginning_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: float | None = None
    ) -> dict[TopicPartition, int]:
        """Each partition's log start offset (the partitions need not be assigned)."""
        return self._offsets({as_tp(p): EARLIEST_TIMESTAMP for p in partitions}, timeout_ms)

    def end_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: float | None = None
    ) -> dict[TopicPartition, int]:
        """Each partition's high watermark: the offset the next consumable record gets."""
        return self._offsets({as_tp(p): LATEST_TIMESTAMP for p in partitions}, timeout_ms)

    def _offsets(
        self, timestamps: dict[TopicPartition, int], timeout_ms: float | None
    ) -> dict[TopicPartition, int]:
        self._check_open()
        timeout_s = to_seconds(timeout_ms, self.request_timeout_ms)
        found = self._fetcher.offsets.list_offsets(timestamps, timeout_s)
        return {tp: found[tp][0] for tp in timestamps}

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, float], timeout_ms: float | None = None
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition, the first record with timestamp >= the target
        (epoch milliseconds), or None when there is none below the high watermark."""
        self._check_open()
        targets = {}
        for p, ts in timestamps.items():
            tp = as_tp(p)
            targets[tp] = check_timestamp_ms(tp, ts)
        timeout_s = to_seconds(timeout_ms, self.request_timeout_ms)
        found = self._fetcher.offsets.list_offsets(targets, timeout_s)
        return {tp: OffsetAndTimestamp(*found[tp]) if found[tp][0] >= 0 else None for tp in targets}

    # --- cluster view -----------------------------------------------------------------

    def topics(self) -> set[str]:
        self._check_open()
        self._metadata.refresh(None)
        self._sync_subscription()
        return self._metadata.topics()

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        """Partition ids of the topic, or None if it does not exist."""
        self._check_open()
        parts = self._metadata.partitions_for(topic)
        if parts is None:
            interest = self._topics_of_interest()
            self._metadata.refresh(None if interest is None else interest | {topic})
            self._sync_subscription()
            parts = self._metadata.partitions_for(topic)
        return set(parts) if parts is not None else None

    # --- consuming ----------------------------------------------------------------------

    def poll(
        self, timeout_ms: float = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records past each partition's position, waiting up to timeout_ms for some.
        Positions move past the records returned."""
        self._check_open()
        timeout_s = to_seconds(timeout_ms, 0)
        limit = self.max_poll_records if max_records is None else max_records
        positive_int("max_records", limit)
        self._abandon_chunk()
        records, positions = self._fetch(limit, timeout_s)
        for tp, offset in positions.items():
            self._fetcher.states[tp].position = offset
        return records

    def _fetch(
        self, limit: int, timeout_s: float
    ) -> tuple[dict[TopicPartition, list[ConsumerRecord]], dict[TopicPartition, int]]:
        """Fetched records, with the group's work (rebalance steps, committed
        offsets, auto-commit) done in between, in this (the polling) thread."""
        deadline = time.monotonic() + timeout_s
        while True:
            if self._coordinator is not None:
                self._group_poll(deadline)
            remaining = max(deadline - time.monotonic(), 0.0)
            records, positions = self._fetcher.fetch_records(limit, remaining)
            if records or time.monotonic() >= deadline:
                return records, positions

    def __iter__(self) -> Consumer:
        return self

    def __next__(self) -> ConsumerRecord:
        """The next record, waiting at most consumer_timeout_ms (StopIteration after)."""
        if self._closed:
            raise StopIteration
        deadline = time.monotonic() + self.consumer_timeout_ms / 1000
        while True:
            while self._chunk:
                tp, generation, record, after = self._chunk.popleft()
                st = self._fetcher.states.get(tp)
                if st is None or st.generation != generation:
                    continue  # reset or unassigned since it was drained
                # The position moves per record yielded, so leaving the loop early
                # loses nothing: the rest is fetched again.
                st.position = after
                return record
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise StopIteration
            records, positions = self._fetch(self.max_poll_records, min(remaining, _ITER_SLICE_S))
            for tp, recs in records.items():
                generation = self._fetcher.states[tp].generation
                for i, r in enumerate(recs):
                    after = positions[tp] if i == len(recs) - 1 else r.offset + 1
                    self._chunk.append((tp, generation, r, after))

    def _abandon_chunk(self) -> None:
        """Drop records drained for the iterator but not yielded; they are refetched."""
        if not self._chunk:
            return
        for tp in {entry[0] for entry in self._chunk}:
            self._fetcher.rewind(tp)
        self._chunk.clear()

    # --- the group ------------------------------------------------------------------------

    def _require_group(self, what: str) -> ConsumerCoordinator:
        self._check_open()
        if self._coordinator is None:
            raise IllegalStateError(f"{what} needs a group_id")
        return self._coordinator

    def _consumed(self) -> dict[TopicPartition, OffsetAndMetadata]:
        """The positions to commit: the next offset of each partition with one."""
        return {
            tp: OffsetAndMetadata(st.position)
            for tp, st in self._fetcher.states.items()
            if st.position is not None
        }

    def _group_poll(self, deadline: float) -> None:
        """The group's work for the polling thread: rebalance steps with their
        listener calls, committed offsets of new partitions, auto-commit."""
        c = self._coordinator
        assert c is not None
        c.run_commit_callbacks()
        listener_error: BaseException | None = None
        # Each step changes the membership (Lost → PrepareJoin → Assign at most).
        for _ in range(8):
            step = c.app_step(time.monotonic())
            if step is None:
                break
            try:
                self._handle_step(c, step)
            except KafkaError:
                raise
            except Exception as e:  # noqa: BLE001 - the app's listener: raised after the step
                listener_error = listener_error or e
        self._init_committed_positions(c, deadline)
        self._maybe_auto_commit(c)
        if listener_error is not None:
            raise listener_error

    def _handle_step(self, c: ConsumerCoordinator, step: Lost | PrepareJoin | Assign) -> None:
        cooperative = c.m.protocol == "COOPERATIVE"
        if isinstance(step, Lost):
            self._abandon_chunk()
            self._fetcher.assign([tp for tp in self._fetcher.states if tp not in step.lost])
            c.app_done(step)
            _log.info("group %s: partitions lost: %s", self.group_id, _names(step.lost))
            self._subscription.call_listener("on_partitions_lost", step.lost)
        elif isinstance(step, PrepareJoin):
            if self.enable_auto_commit:
                self._commit_quietly(c, self._consumed(), "before rejoining")
            self._abandon_chunk()
            self._fetcher.assign([tp for tp in self._fetcher.states if tp not in step.revoked])
            c.app_done(step)
            if step.revoked or not cooperative:
                self._subscription.call_listener("on_partitions_revoked", step.revoked)
        else:
            if step.revoked:
                if self.enable_auto_commit:
                    consumed = self._consumed()
                    revoked = {tp: consumed[tp] for tp in step.revoked if tp in consumed}
                    self._commit_quietly(c, revoked, "of revoked partitions")
            self._abandon_chunk()
            keep = [tp for tp in self._fetcher.states if tp in step.assigned]
            added = sorted(step.assigned - set(keep), key=lambda tp: (tp.topic, tp.partition))
            self._fetcher.assign(keep + added)
            self._fetcher.awaiting_committed |= set(added)
            c.app_done(step)
            _log.info(
                "group %s: assigned %s (revoked %s)",
                self.group_id,
                _names(step.assigned),
                _names(step.revoked),
            )
            if step.revoked:
                self._subscription.call_listener("on_partitions_revoked", step.revoked)
            self._subscription.call_listener(
                "on_partitions_assigned",
                step.added if cooperative else step.assigned,
            )

    def _commit_quietly(
        self, c: ConsumerCoordinator, offsets: dict[TopicPartition, OffsetAndMetadata], when: str
    ) -> None:
        try:
            c.commit_sync(offsets, self.default_api_timeout_ms / 1000)
        except KafkaError as e:
            _log.warning("group %s: auto-commit %s failed: %s", self.group_id, when, e)

    def _init_committed_positions(self, c: ConsumerCoordinator, deadline: float) -> None:
        """Partitions new to this member start at the group's committed offset,
        else where auto_offset_reset says."""
        waiting = [tp for tp in self._fetcher.states if tp in self._fetcher.awaiting_committed]
        if not waiting:
            return
        timeout_s = min(max(deadline - time.monotonic(), 1.0), self.request_timeout_ms / 1000)
        try:
            committed = c.fetch_committed(waiting, timeout_s)
        except KafkaError as e:
            if not (e.retriable or isinstance(e, KafkaTimeoutError)):
                raise
            # Retried at the next poll; meanwhile they are not reset to a guess.
            _log.warning(
                "group %s: committed offsets not fetched yet (%s); retrying", self.group_id, e
            )
            return
        for tp, om in committed.items():
            if tp not in self._fetcher.awaiting_committed:
                continue  # sought or unassigned meanwhile
            if om is not None:
                self._fetcher.seek(tp, om.offset)
            elif self._fetcher.config.auto_offset_reset != NONE:
                self._fetcher.request_reset(tp, self._fetcher.config.auto_offset_reset)
            else:
                self._fetcher.awaiting_committed.discard(tp)  # NoOffsetForPartition next

    def _maybe_auto_commit(self, c: ConsumerCoordinator) -> None:
        if not self.enable_auto_commit:
            return
        now = time.monotonic()
        if now < self._next_auto_commit:
            return
        self._next_auto_commit = now + self.auto_commit_interval_ms / 1000
        offsets = self._consumed()
        if offsets:
            c.commit_async(offsets, self._auto_commit_done)

    def _auto_commit_done(self, offsets: dict, outcome: object) -> None:
        if isinstance(outcome, KafkaError):
            # During a rebalance an auto-commit may be refused; the next one follows it.
            quiet = outcome.retriable or outcome.message == "REBALANCE_IN_PROGRESS"
            level = logging.DEBUG if quiet else logging.WARNING
            _log.log(level, "group %s: auto-commit failed: %s", self.group_id, outcome)

    def group_metadata(self) -> ConsumerGroupMetadata:
        """Kafka's ConsumerGroupMetadata, for Producer.send_offsets_to_transaction: the
        group, and the member and generation its TxnOffsetCommit is checked against."""
        c = self._require_group("group_metadata()")
        generation, member_id, instance = c.generation()
        return ConsumerGroupMetadata(self.group_id or "", generation, member_id, instance or None)

    def commit(self, offsets: Mapping[TopicPartition, object] | None = None) -> None:
        """Commit `offsets` (the next offset to read, per partition), or every
        assigned partition's position; blocks until committed or
        default_api_timeout_ms. CommitFailedError when the group rebalanced away."""
        c = self._require_group("commit()")
        values = self._consumed() if offsets is None else offsets_arg(offsets)
        c.commit_sync(values, self.default_api_timeout_ms / 1000)

    def commit_async(
        self,
        offsets: Mapping[TopicPartition, object] | None = None,
        callback: Any = None,
    ) -> None:
        """Commit without waiting; `callback(offsets, response_or_exception)` runs in
        a later poll()/commit()/close() of this thread."""
        c = self._require_group("commit_async()")
        c.run_commit_callbacks()  # earlier ones first, as Kafka does
        values = self._consumed() if offsets is None else offsets_arg(offsets)
        c.commit_async(values, callback or self._auto_commit_done)

    def committed(
        self, partition: TopicPartition, metadata: bool = False
    ) -> int | OffsetAndMetadata | None:
        """The group's committed offset of the partition (None: none), asked of the
        coordinator; with metadata=True, the OffsetAndMetadata."""
        c = self._require_group("committed()")
        tp = as_tp(partition)
        om = c.fetch_committed([tp], self.default_api_timeout_ms / 1000)[tp]
        if om is None:
            return None
        return om if metadata else om.offset

    def metrics(self) -> dict[str, float]:
        """Counters of the group membership (Kafka's consumer-coordinator-metrics
        names: heartbeat-total, rebalance-total, ...; coordinator-lookup-failed-total
        and coordinator-unknown-seconds show a coordinator that cannot be reached)."""
        out: dict[str, float] = {"assigned-partitions": len(self._fetcher.states)}
        if self._coordinator is not None:
            out.update(self._coordinator.metrics())
            out["assigned-partitions"] = len(self._fetcher.states)
        # Calls that reached no node at all (a WARNING is logged once such an outage
        # lasts request_timeout_ms), and how long the current one has lasted.
        reach = self._fetcher.reachability
        out.update({k.replace("_", "-"): v for k, v in reach.counters.items()})
        out["unreachable-seconds"] = reach.unreachable_s(time.monotonic())
        return out

    def _leave_group(self, reason: str, timeout_s: float) -> None:
        c = self._coordinator
        assert c is not None
        # Commits already sent land while this is still a member (as Kafka's close).
        c.wait_async_commits(timeout_s)
        owned = frozenset(self._fetcher.states)
        if self.enable_auto_commit and c.in_generation():
            self._commit_quietly(c, self._consumed(), "before leaving")
        try:
            if owned:
                lost = not c.in_generation()
                self._subscription.call_listener(
                    "on_partitions_lost" if lost else "on_partitions_revoked", owned
                )
        finally:
            c.leave(reason, timeout_s)
            self._fetcher.assign([])

    # --- lifecycle ------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("the consumer is closed")

    def close(self, autocommit: bool = True, timeout_ms: float | None = None) -> None:
        """Stop fetching and close the connections. In a group: commit the positions
        (when auto-committing and `autocommit`), revoke, and leave the group (a
        static member does not leave: its session timeout ends it)."""
        if self._closed:
            return
        c = self._coordinator
        if c is not None:
            timeout_s = to_seconds(timeout_ms, 30_000)
            try:
                if not autocommit:
                    self.enable_auto_commit = False
                if self._group_managed():
                    self._leave_group("the consumer is being closed", timeout_s)
                elif self.enable_auto_commit:
                    self._commit_quietly(c, self._consumed(), "on close")
                c.wait_async_commits(timeout_s)
            finally:
                c.close(timeout_s)
        self._closed = True
        self._chunk.clear()
        self._fetcher.close()
        self._metadata.close()

    def __enter__(self) -> Consumer:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        tps = sorted(self.assignment(), key=lambda tp: (tp.topic, tp.partition))
        return f"Consumer(client_id={self.client_id!r}, assignment={tps})"


def _names(tps: frozenset[TopicPartition]) -> str:
    return (
        ", ".join(
            f"{tp.topic}-{tp.partition}" for tp in sorted(tps, key=lambda t: (t.topic, t.partition))
        )
        or "none"
    )
