"""A consumer shaped like kafka-python's KafkaConsumer, with manual assignment
only: seglog has no group coordinator, so `subscribe()` (or topics given to
the constructor) assigns every partition of the topics and positions live in
the consumer alone (nothing is committed).

    consumer = Consumer("events", bootstrap_servers="127.0.0.1:9192",
                        auto_offset_reset="earliest", consumer_timeout_ms=1000)
    for record in consumer:
        ...
"""

from __future__ import annotations

import math
import re
import time
import warnings
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .cluster import ClusterMetadata, Connections, TopicPartition
from .errors import IllegalStateError, KafkaTimeoutError
from .fetcher import (
    EARLIEST,
    EARLIEST_TIMESTAMP,
    LATEST,
    LATEST_TIMESTAMP,
    NONE,
    ConsumerRecord,
    Deserializer,
    FetchConfig,
    Fetcher,
    NoOffsetForPartitionError,
    OffsetAndTimestamp,
    OffsetOutOfRangeError,
)
from .security import ClientSecurity

__all__ = [
    "Consumer",
    "ConsumerRecord",
    "NoOffsetForPartitionError",
    "OffsetAndTimestamp",
    "OffsetOutOfRangeError",
    "TopicPartition",
]

_RESET_POLICIES = {
    "earliest": EARLIEST,
    "smallest": EARLIEST,
    "latest": LATEST,
    "largest": LATEST,
    "none": NONE,
}
# offsets_for_times wants epoch milliseconds. 10^11 ms is March 1973 while
# 10^11 s is the year 5138: a smaller positive value is almost surely seconds.
# 10^14 ms is the year 5138 too: a larger value is micro- or nanoseconds.
MIN_PLAUSIBLE_TIMESTAMP_MS = 10**11
MAX_PLAUSIBLE_TIMESTAMP_MS = 10**14
# The iterator waits in slices so an infinite consumer_timeout_ms stays bounded per wait.
_ITER_SLICE_S = 60.0


def _as_tp(obj: object) -> TopicPartition:
    """Ours, or anything with .topic and .partition (kafka-python's namedtuple)."""
    if isinstance(obj, TopicPartition):
        return obj
    topic = getattr(obj, "topic", None)
    partition = getattr(obj, "partition", None)
    if isinstance(topic, str) and isinstance(partition, int) and not isinstance(partition, bool):
        return TopicPartition(topic, partition)
    raise TypeError(f"expected a TopicPartition, got {obj!r}")


def _positive_int(name: str, value: object, minimum: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def _timeout_s(timeout_ms: float | None, default_ms: float) -> float:
    ms = default_ms if timeout_ms is None else timeout_ms
    if not isinstance(ms, int | float) or isinstance(ms, bool) or math.isnan(ms) or ms < 0:
        raise ValueError(f"timeout_ms must be a non-negative number, got {timeout_ms!r}")
    return ms / 1000


def check_timestamp_ms(tp: TopicPartition, ts: object) -> int:
    """A target time for offsets_for_times: epoch milliseconds, refused when it is
    negative or clearly in another unit."""
    if isinstance(ts, bool) or not isinstance(ts, int | float) or not math.isfinite(ts):
        raise ValueError(f"target time for {tp.topic}-{tp.partition} must be a number, got {ts!r}")
    if ts < 0:
        raise ValueError(
            f"target time for {tp.topic}-{tp.partition} is {ts}: it cannot be negative"
        )
    if 0 < ts < MIN_PLAUSIBLE_TIMESTAMP_MS:
        raise ValueError(
            f"target time for {tp.topic}-{tp.partition} is {ts}, which looks like seconds "
            f"since the epoch; offsets_for_times wants milliseconds (e.g. "
            f"int(time.time() * 1000)). Values below {MIN_PLAUSIBLE_TIMESTAMP_MS} (March "
            f"1973 in ms) are refused"
        )
    if ts >= MAX_PLAUSIBLE_TIMESTAMP_MS:
        raise ValueError(
            f"target time for {tp.topic}-{tp.partition} is {ts}, which looks like micro- or "
            f"nanoseconds since the epoch; offsets_for_times wants milliseconds"
        )
    return int(ts)


class Consumer:
    def __init__(
        self,
        *topics: str,
        bootstrap_servers: str | Sequence[str] = "127.0.0.1:9192",
        client_id: str = "seglog-consumer",
        group_id: str | None = None,
        key_deserializer: Deserializer | None = None,
        value_deserializer: Deserializer | None = None,
        auto_offset_reset: str = "latest",
        enable_auto_commit: bool = False,
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
        **security: str | None,
    ) -> None:
        credentials = ClientSecurity.from_options(security).channel_credentials()
        if group_id is not None:
            raise ValueError(
                f"group_id={group_id!r} is not supported: seglog has no group coordinator. "
                f"Use group_id=None and assign()/subscribe() with seek() to place positions; "
                f"positions are not committed anywhere"
            )
        if enable_auto_commit:
            warnings.warn(
                "enable_auto_commit has no effect without a group_id; nothing is committed",
                stacklevel=2,
            )
        policy = _RESET_POLICIES.get(str(auto_offset_reset).lower())
        if policy is None:
            raise ValueError(
                f"auto_offset_reset must be 'earliest', 'latest' or 'none', "
                f"got {auto_offset_reset!r}"
            )
        if not (consumer_timeout_ms == float("inf") or consumer_timeout_ms >= 0):
            raise ValueError(f"consumer_timeout_ms must be >= 0, got {consumer_timeout_ms!r}")
        self.client_id = client_id
        self.max_poll_records = _positive_int("max_poll_records", max_poll_records)
        self.request_timeout_ms = _positive_int("request_timeout_ms", request_timeout_ms)
        self.consumer_timeout_ms = consumer_timeout_ms
        config = FetchConfig(
            fetch_min_bytes=_positive_int("fetch_min_bytes", fetch_min_bytes, 0),
            fetch_max_wait_ms=_positive_int("fetch_max_wait_ms", fetch_max_wait_ms, 0),
            fetch_max_bytes=_positive_int("fetch_max_bytes", fetch_max_bytes),
            max_partition_fetch_bytes=_positive_int(
                "max_partition_fetch_bytes", max_partition_fetch_bytes
            ),
            request_timeout_ms=self.request_timeout_ms,
            auto_offset_reset=policy,
            retry_backoff_ms=_positive_int("retry_backoff_ms", retry_backoff_ms),
            retry_backoff_max_ms=_positive_int("retry_backoff_max_ms", retry_backoff_max_ms),
            key_deserializer=key_deserializer,
            value_deserializer=value_deserializer,
        )
        self._metadata = ClusterMetadata(
            bootstrap_servers,
            Connections(credentials),
            request_timeout_ms=self.request_timeout_ms,
            metadata_max_age_ms=_positive_int("metadata_max_age_ms", metadata_max_age_ms),
        )
        self._fetcher = Fetcher(self._metadata, config)
        self._fetcher.topics_of_interest = self._topics_of_interest
        self._fetcher.on_metadata = self._sync_subscription
        self._subscribed: set[str] | None = None
        self._pattern: re.Pattern[str] | None = None
        self._manual = False
        # Records drained for the iterator but not yet yielded:
        # (tp, generation, record, position after it).
        self._chunk: deque[tuple[TopicPartition, int, ConsumerRecord, int]] = deque()
        self._closed = False
        if topics:
            self.subscribe(topics)

    # --- assignment -----------------------------------------------------------------

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Fetch exactly these partitions (positions of ones kept are kept)."""
        self._check_open()
        if self._subscribed is not None or self._pattern is not None:
            raise IllegalStateError("assign() cannot follow subscribe(); unsubscribe() first")
        tps = [_as_tp(p) for p in partitions]
        self._abandon_chunk()
        self._fetcher.assign(tps)
        self._manual = bool(tps)

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
        if listener is not None:
            raise ValueError("rebalance listeners need group coordination, which seglog lacks")
        if self._manual:
            raise IllegalStateError("subscribe() cannot follow assign(); unsubscribe() first")
        names = [topics] if isinstance(topics, str) else list(topics)
        if bool(names) == (pattern is not None):
            raise ValueError("subscribe() needs either topics or a pattern")
        for name in names:
            if not isinstance(name, str) or not name:
                raise TypeError(f"topic names must be non-empty strings, got {name!r}")
        self._subscribed = None if pattern is not None else set(names)
        self._pattern = re.compile(pattern) if pattern is not None else None
        self._fetcher.maybe_refresh_metadata(force=True)
        self._sync_subscription()

    def subscription(self) -> set[str] | None:
        if self._subscribed is not None:
            return set(self._subscribed)
        if self._pattern is not None:
            return {t for t in self._metadata.topics() if self._pattern.fullmatch(t)}
        return None

    def unsubscribe(self) -> None:
        self._abandon_chunk()
        self._subscribed = None
        self._pattern = None
        self._manual = False
        self._fetcher.assign([])

    def _topics_of_interest(self) -> set[str] | None:
        if self._pattern is not None:
            return None
        return {tp.topic for tp in self._fetcher.states} | (self._subscribed or set())

    def _sync_subscription(self) -> bool:
        """Assign all partitions of subscribed topics; True while some are unknown."""
        if self._subscribed is None and self._pattern is None:
            return False
        if self._pattern is not None:
            topics = {t for t in self._metadata.topics() if self._pattern.fullmatch(t)}
            missing = False
        else:
            assert self._subscribed is not None
            topics = self._subscribed
            missing = any(self._metadata.partitions_for(t) is None for t in topics)
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
        tp = _as_tp(partition)
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
        tps = [_as_tp(p) for p in partitions] or list(self._fetcher.states)
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
        tp = _as_tp(partition)
        st = self._fetcher.state(tp)
        deadline = time.monotonic() + _timeout_s(timeout_ms, self.request_timeout_ms)
        while st.position is None:
            if st.error is not None:
                raise st.error
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
        return self._fetcher.state(_as_tp(partition)).highwater

    def pause(self, *partitions: TopicPartition) -> None:
        tps = [_as_tp(p) for p in partitions]
        for tp in tps:
            self._fetcher.state(tp)
        self._abandon_chunk()
        for tp in tps:
            self._fetcher.state(tp).paused = True

    def resume(self, *partitions: TopicPartition) -> None:
        for p in partitions:
            self._fetcher.state(_as_tp(p)).paused = False

    def paused(self) -> set[TopicPartition]:
        return {tp for tp, st in self._fetcher.states.items() if st.paused}

    # --- offsets lookups --------------------------------------------------------------

    def beginning_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: float | None = None
    ) -> dict[TopicPartition, int]:
        """Each partition's log start offset (the partitions need not be assigned)."""
        return self._offsets({_as_tp(p): EARLIEST_TIMESTAMP for p in partitions}, timeout_ms)

    def end_offsets(
        self, partitions: Iterable[TopicPartition], timeout_ms: float | None = None
    ) -> dict[TopicPartition, int]:
        """Each partition's high watermark: the offset the next consumable record gets."""
        return self._offsets({_as_tp(p): LATEST_TIMESTAMP for p in partitions}, timeout_ms)

    def _offsets(
        self, timestamps: dict[TopicPartition, int], timeout_ms: float | None
    ) -> dict[TopicPartition, int]:
        self._check_open()
        timeout_s = _timeout_s(timeout_ms, self.request_timeout_ms)
        found = self._fetcher.list_offsets(timestamps, timeout_s)
        return {tp: found[tp][0] for tp in timestamps}

    def offsets_for_times(
        self, timestamps: Mapping[TopicPartition, float], timeout_ms: float | None = None
    ) -> dict[TopicPartition, OffsetAndTimestamp | None]:
        """For each partition, the first record with timestamp >= the target
        (epoch milliseconds), or None when there is none below the high watermark."""
        self._check_open()
        targets = {}
        for p, ts in timestamps.items():
            tp = _as_tp(p)
            targets[tp] = check_timestamp_ms(tp, ts)
        timeout_s = _timeout_s(timeout_ms, self.request_timeout_ms)
        found = self._fetcher.list_offsets(targets, timeout_s)
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
        timeout_s = _timeout_s(timeout_ms, 0)
        limit = self.max_poll_records if max_records is None else max_records
        _positive_int("max_records", limit)
        self._abandon_chunk()
        records, positions = self._fetcher.fetch_records(limit, timeout_s)
        for tp, offset in positions.items():
            self._fetcher.states[tp].position = offset
        return records

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
            records, positions = self._fetcher.fetch_records(
                self.max_poll_records, min(remaining, _ITER_SLICE_S)
            )
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

    # --- introspection ----------------------------------------------------------------

    def metrics(self) -> dict[str, float]:
        """Counters of calls that reached no node and of outages reported (a WARNING
        is logged once an outage lasts request_timeout_ms), and the current outage."""
        reach = self._fetcher.reachability
        m: dict[str, float] = dict(reach.counters)
        m["unreachable_seconds"] = reach.unreachable_s(time.monotonic())
        m["assigned_partitions"] = len(self._fetcher.states)
        return m

    # --- lifecycle ------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise IllegalStateError("the consumer is closed")

    def close(self, autocommit: bool = True, timeout_ms: float | None = None) -> None:
        """Stop fetching and close the connections (`autocommit` is accepted for
        kafka-python compatibility; there is nothing to commit)."""
        if self._closed:
            return
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
