"""A partition replica's log (Kafka's UnifiedLog): the offsets and state Kafka keeps
beside the segments — log start offset, high watermark, leader-epoch cache, producer
state — over a `LocalLog` (storage/local_log.py), which holds the segments. Opening
and recovery are storage/log_loader.py's.

Not thread-safe: the node serialises calls per partition. Time is an argument
(`now_ms`) wherever a decision depends on it, so tests drive the clock.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from . import log_txns
from .checkpoint_file import LeaderEpochCheckpointFile

# The default `Clock` of a log (Kafka's Time.SYSTEM): the plain wall clock, read when the
# Log is built without one (tools, tests); the node passes disk_and_clock.wall_ms.
from .disk_and_clock import plain_wall_ms as now_ms
from .errors import (
    KafkaStorageError,
    LogDirFullError,
    OffsetOutOfRangeError,
)
from .file_slice import FileSlice
from .leader_epoch_cache import LeaderEpochCache
from .local_log import MAX_MAPPED_INACTIVE, LocalLog, file_segments, parse_partition_dir
from .log_config import LogConfig
from .log_flushing import LogFlushing
from .log_loader import LogLoader, loaded_offsets
from .log_validator import max_timestamp_of, validate_follower_append, validate_leader_append
from .producer_state import AppendOrigin, ControlMarker, DuplicateBatch, ProducerStateManager
from .record_batch import BatchHeader, check_batch
from .segment import LogSegment
from .txn_index import AbortedTxn
from .txn_verification import VerificationGuard

Clock = Callable[[], int]  # ms; a simulator passes its own


# LogAppendInfo and FetchDataInfo are built on every append / read: named tuples
# are as immutable as frozen dataclasses and several times cheaper to construct.
# The hot paths build them with tuple.__new__, which is what their generated
# __new__ runs, minus a Python-level call (so every field is passed, in order).
_new_tuple = tuple.__new__


class LogAppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    max_timestamp: int
    offset_of_max_timestamp: int
    log_append_time: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int
    record_count: int
    valid_bytes: int
    duplicate: bool = False  # a producer retry answered with its original offsets


class FetchDataInfo(NamedTuple):
    records: bytes
    fetch_offset: int
    next_offset: int  # offset after the last batch returned (fetch_offset if none)


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    timestamp: int
    offset: int
    leader_epoch: int | None


class Log(LogFlushing):
    """Open one with `Log.open(...)` (a partition directory), or `Log.over(...)` (a
    LocalLog whose segments are already loaded, e.g. held in memory)."""

    def __init__(
        self,
        local: LocalLog,
        directory: Path,
        *,
        topic: str,
        partition: int,
        epoch_cache: LeaderEpochCache,
        producer_state: ProducerStateManager,
        clock: Clock = now_ms,
    ) -> None:
        self._local = local
        self.directory = directory
        self.topic, self.partition = topic, partition
        # From partition.metadata: which incarnation of the topic this log belongs to.
        self.topic_id: str | None = None
        self.log_start_offset = 0
        self.high_watermark = 0
        # Time and randomness are inputs (Kafka's Time): the node passes the wall clock
        # and a seeded generator, a simulator its own clock and seed.
        self.clock = clock
        self.epoch_cache = epoch_cache
        local.take_epoch_checkpoint = epoch_cache.take_for_flush
        self.producer_state = producer_state
        self._roll_config: LogConfig | None = None
        self._max_segment_ms = 0
        self._closed = False
        # Kafka's LogDirFailureChannel: the log directory hears of every I/O error
        # (set by LogDirectory); once it is offline, this log answers
        # KAFKA_STORAGE_ERROR to every append and read.
        self.io_error_handler: Callable[[KafkaStorageError], None] | None = None
        self.offline_reason: str | None = None
        # flush.messages: inline, the append that reaches it fsyncs (Kafka's way, and
        # the library's default). A node on an event loop defers it (set by its shell):
        # the append asks for the flush (`durability_demanded`), a pool runs it, and the
        # replica holds the appends' answers, or its next fetch, until it is done.
        self.defer_message_flushes = False
        self.durability_demanded = 0

    # --- opening --------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        high_watermark: int = 0,
        had_clean_shutdown: bool = False,
        topic_id: str | None = None,
        producer_id_expiration_ms: int = 86_400_000,
        transaction_verification_enabled: bool = False,
        time_ms: int | None = None,
        clock: Clock = now_ms,
        rng: random.Random | None = None,
        topic_partition: tuple[str, int] | None = None,
    ) -> Log:
        """`topic_partition`: for a directory not named `<topic>-<partition>` (a future
        replica's `<topic>-<partition>.<id>-future`, Kafka's intra-broker move)."""
        t = clock() if time_ms is None else time_ms
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise KafkaStorageError(f"cannot create partition directory {directory}: {e}") from e
        topic, partition = topic_partition or parse_partition_dir(directory.name)
        rng = rng if rng is not None else random.Random()
        local = LocalLog(directory, directory.name, config, file_segments(directory), rng)
        log = cls(
            local,
            directory,
            topic=topic,
            partition=partition,
            epoch_cache=LeaderEpochCache(LeaderEpochCheckpointFile.in_dir(directory)),
            producer_state=ProducerStateManager(
                directory,
                producer_id_expiration_ms,
                transaction_verification_enabled=transaction_verification_enabled,
            ),
            clock=clock,
        )
        loader = LogLoader(directory, local, log.epoch_cache, log.producer_state)
        log.topic_id = loader.load_topic_id(topic_id)
        loaded = loader.load(recovery_point, log_start_offset, had_clean_shutdown, t)
        log._start(loaded.log_start_offset, high_watermark, t)
        return log

    @classmethod
    def over(
        cls,
        local: LocalLog,
        directory: Path,
        *,
        topic: str,
        epoch_cache: LeaderEpochCache,
        producer_state: ProducerStateManager,
        log_start_offset: int = 0,
        high_watermark: int = 0,
        clock: Clock = now_ms,
        time_ms: int | None = None,
    ) -> Log:
        """A log over `local`'s segments as they are (none is checked or recovered: a
        clean open), an empty one at `log_start_offset` when there are none."""
        t = clock() if time_ms is None else time_ms
        if not local.segments:
            local.add_segment(local.new_segment(log_start_offset, t))
        log = cls(
            local,
            directory,
            topic=topic,
            partition=0,
            epoch_cache=epoch_cache,
            producer_state=producer_state,
            clock=clock,
        )
        loaded = loaded_offsets(local, epoch_cache, log_start_offset, 0, clean=True)
        log._start(loaded.log_start_offset, high_watermark, t)
        return log

    def _start(self, log_start_offset: int, high_watermark: int, t: int) -> None:
        self.log_start_offset = log_start_offset
        self._rebuild_producer_state(self._local.log_end_offset, t)
        self.high_watermark = min(
            max(high_watermark, self.log_start_offset), self._local.log_end_offset
        )
        self.producer_state.on_high_watermark_updated(self.high_watermark)
        self._local.last_flush_ms = t

    # --- properties -----------------------------------------------------------------

    @property
    def name(self) -> str:
        return self._local.name

    @property
    def config(self) -> LogConfig:
        return self._local.config

    @config.setter
    def config(self, config: LogConfig) -> None:
        self._local.config = config

    @property
    def flush_observer(self) -> Callable[[float], None] | None:
        """Told the seconds each successful flush's fsyncs took (a node's metrics); the
        storage layer only calls it."""
        return self._local.flush_observer

    @flush_observer.setter
    def flush_observer(self, observer: Callable[[float], None] | None) -> None:
        self._local.flush_observer = observer

    @property
    def log_end_offset(self) -> int:
        return self._local.log_end_offset

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._local.segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._local.segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._local.segments)

    @property
    def latest_epoch(self) -> int | None:
        return self.epoch_cache.latest_epoch

    @property
    def truncation_count(self) -> int:
        """Counts truncations: work taken out of the partition lock (a flush, a
        cleaning pass) compares it to know whether the log changed under it."""
        return self._local.truncations

    @property
    def closed(self) -> bool:
        return self._closed

    # --- appending ------------------------------------------------------------------

    def append_as_leader(
        self,
        data: bytes | bytearray | memoryview,
        leader_epoch: int,
        *,
        time_ms: int | None = None,
        origin: AppendOrigin = AppendOrigin.CLIENT,  # COORDINATOR: epochs, no sequences
        verification_guard: VerificationGuard | None = None,
    ) -> LogAppendInfo:
        """Validate a producer's batches, assign offsets and the leader epoch in place,
        check producer state, and append. Raises before writing anything.
        `verification_guard`: from maybe_start_transaction_verification, for a client's
        transactional batch that opens a transaction (KIP-890)."""
        t = self.clock() if time_ms is None else time_ms
        buf, headers, log_append_time = validate_leader_append(
            data,
            self._local.config,
            first_offset=self._local.log_end_offset,
            leader_epoch=leader_epoch,
            now_ms=t,
            topic=self.topic,
            log_name=self._local.name,
        )
        if self.offline_reason is not None:
            self._raise_offline()
        prepared = self.producer_state.prepare_appends(headers, origin, verification_guard)
        if isinstance(prepared, DuplicateBatch):
            return LogAppendInfo(
                first_offset=prepared.first_offset,
                last_offset=prepared.last_offset,
                max_timestamp=prepared.timestamp,
                offset_of_max_timestamp=prepared.last_offset,
                log_append_time=prepared.timestamp if log_append_time else -1,
                log_start_offset=self.log_start_offset,
                record_count=0,
                valid_bytes=0,
                duplicate=True,
            )
        info = self._append_batches_or_undo(buf, headers, t, log_append_time)
        self.producer_state.update(prepared)
        self.producer_state.update_map_end_offset(self._local.log_end_offset)
        return info

    def maybe_start_transaction_verification(
        self, producer_id: int, sequence: int, producer_epoch: int
    ) -> VerificationGuard | None:
        """The guard for verifying the producer's next transactional append, or None
        when its transaction is open here already (no verification needed)."""
        return self.producer_state.maybe_start_transaction_verification(
            producer_id, sequence, producer_epoch, self.clock()
        )

    def append_as_follower(
        self, data: bytes | bytearray | memoryview, *, time_ms: int | None = None
    ) -> LogAppendInfo:
        """Append a leader's batches verbatim: CRC and offset order are checked, nothing
        is rewritten, producer state is replayed without validation."""
        t = self.clock() if time_ms is None else time_ms
        if self.offline_reason is not None:
            self._raise_offline()
        headers = validate_follower_append(data, self._local.log_end_offset, self._local.name)
        info = self._append_batches_or_undo(data, headers, t, False)
        log_txns.replay(self._local, self.producer_state, log_txns.with_positions(data, headers))
        self.producer_state.update_map_end_offset(self._local.log_end_offset)
        return info

    def append_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        marker: ControlMarker,
        leader_epoch: int,
        *,
        time_ms: int | None = None,
    ) -> LogAppendInfo:
        """A transaction coordinator's COMMIT/ABORT marker, appended as leader (Kafka's
        appendAsLeader with origin COORDINATOR): producer epoch and coordinator epoch
        are checked, the `.txnindex` entry written (storage/log_txns.py)."""
        t = self.clock() if time_ms is None else time_ms
        if self.offline_reason is not None:
            self._raise_offline()
        data = log_txns.marker_batch(
            producer_id, producer_epoch, marker,
            base_offset=self._local.log_end_offset, leader_epoch=leader_epoch, now_ms=t,
        )  # fmt: skip
        h = check_batch(data, 0)
        prepared = self.producer_state.prepare_append(h, AppendOrigin.COORDINATOR, marker)
        assert not isinstance(prepared, DuplicateBatch)  # never for COORDINATOR
        info = self._append_batches_or_undo(data, [h], t, False)
        self.producer_state.update(prepared)
        log_txns.record_completed(self._local, self.producer_state, prepared.completed_txns)
        self.producer_state.update_map_end_offset(self._local.log_end_offset)
        return info

    def _append_batches_or_undo(
        self,
        data: bytes | bytearray | memoryview,
        headers: list[BatchHeader],
        t: int,
        log_append_time: bool,
    ) -> LogAppendInfo:
        """_append_batches; on a full disk every batch of `data` already written is cut
        again (the epoch cache and producer state with them), so the append fails
        whole. Every I/O error goes to the log directory's handler."""
        end_before = self._local.log_end_offset
        try:
            return self._append_batches(data, headers, t, log_append_time)
        except KafkaStorageError as e:
            if isinstance(e, LogDirFullError) and self._local.log_end_offset > end_before:
                # truncate_to reports its own failure to the handler.
                self.truncate_to(end_before, time_ms=t)
            self._io_error(e)
            raise

    def _io_error(self, e: KafkaStorageError) -> None:
        if self.io_error_handler is not None:
            self.io_error_handler(e)

    def _raise_offline(self) -> None:
        raise KafkaStorageError(
            f"{self._local.name} is in an offline log directory ({self.offline_reason})"
        )

    def _append_batches(
        self,
        data: bytes | bytearray | memoryview,
        headers: list[BatchHeader],
        t: int,
        log_append_time: bool,
    ) -> LogAppendInfo:
        """Write validated batches (offsets already final), rolling where Kafka would."""
        if len(headers) == 1:
            return self._append_batch(data, headers[0], t, log_append_time)
        view = memoryview(data)
        start = 0
        group_start = 0
        group_bytes = 0
        segment_bytes = self._local.config.segment_bytes
        for i, h in enumerate(headers):
            # A follower's fetch may exceed segment.bytes; split it at batch boundaries.
            if group_bytes and group_bytes + h.size > segment_bytes:
                self._append_group(view[start : start + group_bytes], headers[group_start:i], t)
                start += group_bytes
                group_start, group_bytes = i, 0
            group_bytes += h.size
        self._append_group(view[start : start + group_bytes], headers[group_start:], t)
        max_ts, offset_of_max = max_timestamp_of(headers)
        return LogAppendInfo(
            first_offset=headers[0].base_offset,
            last_offset=headers[-1].last_offset,
            max_timestamp=max_ts,
            offset_of_max_timestamp=offset_of_max,
            log_append_time=t if log_append_time else -1,
            log_start_offset=self.log_start_offset,
            record_count=sum(h.records_count for h in headers),
            valid_bytes=len(data),
        )

    def _append_batch(
        self, data: bytes | bytearray | memoryview, h: BatchHeader, t: int, log_append_time: bool
    ) -> LogAppendInfo:
        """_append_batches for a single batch, the produce hot path: one group, whose
        offsets, max timestamp and count are the batch's own, worked out once."""
        first = h.base_offset
        last = first + h.last_offset_delta
        max_ts = h.max_timestamp if h.max_timestamp > -1 else -1
        count = h.records_count
        size = len(data)
        self._append_chunk(data, first, last, max_ts, last, t)
        epoch = h.partition_leader_epoch
        if epoch >= 0 and epoch != self.epoch_cache.latest_epoch:
            self.epoch_cache.assign(epoch, first)
        self._count_unflushed(count)
        return _new_tuple(
            LogAppendInfo,
            (
                first,  # first_offset
                last,  # last_offset
                max_ts,  # max_timestamp
                last,  # offset_of_max_timestamp
                t if log_append_time else -1,  # log_append_time
                self.log_start_offset,
                count,  # record_count
                size,  # valid_bytes
                False,  # duplicate
            ),
        )

    def _append_group(self, chunk: memoryview, headers: list[BatchHeader], t: int) -> None:
        max_ts, offset_of_max = max_timestamp_of(headers)
        self._append_chunk(
            chunk, headers[0].base_offset, headers[-1].last_offset, max_ts, offset_of_max, t
        )
        latest = self.epoch_cache.latest_epoch
        for h in headers:
            epoch = h.partition_leader_epoch
            if epoch >= 0 and epoch != latest:
                self.epoch_cache.assign(epoch, h.base_offset)
                latest = self.epoch_cache.latest_epoch
        self._count_unflushed(sum(h.records_count for h in headers))

    def _append_chunk(
        self,
        chunk: bytes | bytearray | memoryview,
        first: int,
        last: int,
        max_ts: int,
        offset_of_max: int,
        t: int,
    ) -> None:
        """Write whole batches to the active segment (a new one where Kafka rolls)."""
        seg = self._maybe_roll(len(chunk), first, last, max_ts, t)
        seg.append(last, max_ts, offset_of_max, chunk)
        local = self._local
        assert last + 1 > local.log_end_offset, "the log end offset only grows on append"
        local.log_end_offset = last + 1

    # --- rolling --------------------------------------------------------------------

    def _maybe_roll(
        self, size: int, first_offset: int, last_offset: int, max_timestamp: int, t: int
    ) -> LogSegment:
        local = self._local
        seg = local.segments[-1]
        if seg.size == 0:
            if not seg.can_hold_offset(last_offset) or seg.base_offset != first_offset:
                # An empty active segment at the wrong base (a follower's gap): replace it.
                base = max(first_offset, local.log_end_offset)
                if seg.base_offset != base:
                    return local.replace_empty_active(base, t)
            return seg
        config = local.config
        if config is not self._roll_config:
            # max_segment_ms is derived (a property): worked out once per config.
            self._roll_config, self._max_segment_ms = config, config.max_segment_ms
        if seg.should_roll(
            size, last_offset, max_timestamp, t, config.segment_bytes, self._max_segment_ms
        ):
            return self.roll(first_offset, time_ms=t)
        return seg

    def roll(
        self, expected_next_offset: int | None = None, *, time_ms: int | None = None
    ) -> LogSegment:
        """Close the active segment and start a new one at max(expected, LEO)."""
        t = self.clock() if time_ms is None else time_ms
        new_base = max(expected_next_offset or 0, self._local.log_end_offset)
        seg = self._local.roll(new_base, t)
        if seg is None:
            return self._local.segments[-1]
        self.producer_state.update_map_end_offset(new_base)
        # Kafka flushes below the new segment asynchronously, the snapshot too: an inline
        # fsync would stall this append (on a node's event loop, every partition).
        snapshot = self.producer_state.take_snapshot(sync=False)
        self._local.defer_flush(new_base, t, snapshot)
        return seg

    # --- reading --------------------------------------------------------------------

    def _read_bound(self, offset: int, upper_bound: int | None) -> int:
        """Where a read from `offset` must stop; raises for an offset outside the log."""
        if self.offline_reason is not None:
            self._raise_offline()
        end = self._local.log_end_offset
        if offset < self.log_start_offset or offset > end:
            raise OffsetOutOfRangeError(
                f"offset {offset} is out of range for {self._local.name}: "
                f"[{self.log_start_offset}, {end}]"
            )
        return end if upper_bound is None else min(upper_bound, end)

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        upper_bound: int | None = None,
        min_one_batch: bool = True,
    ) -> FetchDataInfo:
        """Whole batches from the batch containing `offset`; none at or past `upper_bound`
        (the high watermark for consumers, the LEO for followers)."""
        bound = self._read_bound(offset, upper_bound)
        if offset < bound:
            found = self._local.locate(
                offset, lambda s: s.read(offset, max_bytes, bound, min_one_batch)
            )
            # A batch found at/after the bound or beyond max_bytes reads as nothing:
            # never skip ahead to a later segment.
            if found is not None and found[1].data:
                return _new_tuple(FetchDataInfo, (found[1].data, offset, found[1].next_offset))
        return FetchDataInfo(b"", offset, offset)

    def read_slice(
        self,
        offset: int,
        max_bytes: int,
        *,
        upper_bound: int | None = None,
        min_one_batch: bool = True,
    ) -> FileSlice:
        """`read`'s batches as a FileSlice of their segment (nothing is read but the
        batch headers): what a Kafka fetch response sends with sendfile."""
        bound = self._read_bound(offset, upper_bound)
        if offset < bound:
            found = self._local.locate(
                offset, lambda s: s.read_extent(offset, max_bytes, bound, min_one_batch)
            )
            if found is not None and found[1][1] > 0:
                return FileSlice.of(found[0].fd, found[1][0], found[1][1])
        return FileSlice(-1, 0, 0)

    def translate_offset(self, offset: int) -> tuple[LogSegment, int, BatchHeader] | None:
        """Segment, byte position and header of the batch holding `offset`."""
        found = self._local.locate(offset, lambda s: s.translate_offset(offset))
        if found is None:
            return None
        return found[0], found[1].position, found[1].header

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """The first record with timestamp >= `timestamp` (Kafka's ListOffsets by time)."""
        found = self._local.find_by_timestamp(timestamp, self.log_start_offset)
        if found is None:
            return None
        record, epoch = found
        return TimestampAndOffset(record.timestamp, record.offset, epoch if epoch >= 0 else None)

    # --- truncation -----------------------------------------------------------------

    def truncate_to(self, offset: int, *, time_ms: int | None = None) -> bool:
        """Remove everything at or after `offset`; an offset inside a batch removes the
        whole batch and the LEO becomes its base offset. True if data went."""
        if offset < 0:
            raise ValueError(f"cannot truncate {self._local.name} to negative offset {offset}")
        if self.offline_reason is not None:
            self._raise_offline()
        t = self.clock() if time_ms is None else time_ms
        try:
            return self._truncate_to(offset, t)
        except KafkaStorageError as e:
            self._io_error(e)
            raise

    def _truncate_to(self, offset: int, t: int) -> bool:
        local = self._local
        local.flush_pending()
        if offset >= local.log_end_offset:
            self.epoch_cache.truncate_from_end(local.log_end_offset)
            return False
        if offset < local.segments[0].base_offset:
            self.truncate_fully_and_start_at(offset, time_ms=t)
            return True
        offset = local.truncate_to(offset)
        self.epoch_cache.truncate_from_end(offset)
        self.log_start_offset = min(self.log_start_offset, offset)
        self.high_watermark = min(self.high_watermark, offset)
        self._rebuild_producer_state(offset, t)
        return True

    def truncate_fully_and_start_at(self, offset: int, *, time_ms: int | None = None) -> None:
        t = self.clock() if time_ms is None else time_ms
        self._local.truncate_fully(offset, t)
        self.log_start_offset = offset
        self.high_watermark = offset
        self.epoch_cache.clear()
        self.producer_state.truncate_fully_and_start_at(offset)

    def _rebuild_producer_state(self, end_offset: int, t: int) -> None:
        """Producer state from its snapshot and a replay to `end_offset`; the replay
        rewrites the `.txnindex` entries of the batches it covers."""
        start = self.producer_state.truncate_and_reload(self.log_start_offset, end_offset, t)
        log_txns.truncate_indexes(self._local, start)
        batches = self._local.batches_between(start, end_offset)
        log_txns.replay(self._local, self.producer_state, batches)
        self.producer_state.update_map_end_offset(end_offset)
        self.producer_state.take_snapshot()
        self.producer_state.on_high_watermark_updated(self.high_watermark)

    # --- transactions (storage/log_txns.py) ------------------------------------------

    @property
    def last_stable_offset(self) -> int:
        """The LSO: what a read_committed consumer may read up to."""
        return log_txns.last_stable_offset(self.producer_state, self.high_watermark)

    def collect_aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [fetch_offset, upper_bound)."""
        return log_txns.collect_aborted(self._local, fetch_offset, upper_bound)

    # --- high watermark, log start offset --------------------------------------------

    def update_high_watermark(self, offset: int) -> int:
        """Set the HW, clamped into [log start offset, LEO]; returns the value kept."""
        self.high_watermark = min(max(offset, self.log_start_offset), self._local.log_end_offset)
        self.producer_state.on_high_watermark_updated(self.high_watermark)
        return self.high_watermark

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """DeleteRecords and followers adopting the leader's start offset."""
        if offset <= self.log_start_offset:
            return False
        if offset > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot move the log start offset of {self._local.name} to {offset}, "
                f"beyond the high watermark {self.high_watermark}"
            )
        self.log_start_offset = offset
        self.epoch_cache.truncate_from_start(offset)
        return True

    # --- retention and the cleaner's swap ---------------------------------------------

    def remove_expired_producers(self, *, time_ms: int | None = None) -> list[int]:
        """producer.id.expiration.ms: producers idle that long stop being active (the log
        manager calls this every producer.id.expiration.check.interval.ms)."""
        t = self.clock() if time_ms is None else time_ms
        return self.producer_state.remove_expired_producers(t)

    def delete_old_segments(self, *, time_ms: int | None = None) -> int:
        """One retention pass (Kafka's order: start-offset breach, size, time).
        Returns the number of segments scheduled for deletion."""
        t = self.clock() if time_ms is None else time_ms
        self._local.flush_pending()
        deleted = self._delete_prefix(
            lambda seg, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset, t
        )
        for breach in self._local.retention_breaches(t):
            deleted += self._delete_prefix(breach, t)
        return deleted

    def _delete_prefix(
        self, predicate: Callable[[LogSegment, LogSegment | None], bool], t: int
    ) -> int:
        local = self._local
        victims = local.deletable_prefix(predicate, self.high_watermark)
        if not victims:
            return 0
        if len(victims) == len(local.segments):
            # Keep an active segment: roll a fresh empty one first.
            self.roll(time_ms=t)
        local.remove_segments(victims)
        new_start = local.segments[0].base_offset
        if new_start > self.log_start_offset:
            self.log_start_offset = new_start
            self.epoch_cache.truncate_from_start(new_start)
        for seg in victims:
            local.mark_deleted(seg)
            snapshot = self.producer_state.rename_snapshot_for_deletion(seg.base_offset)
            local.schedule_deletion(seg, snapshot, t)
        return len(victims)

    def replace_segments(
        self, new: LogSegment, old: list[LogSegment], *, time_ms: int | None = None
    ) -> None:
        """The log cleaner's swap (storage/log_cleaner.py), in memory: `new` (already under
        its final file names) takes the place of the consecutive segments `old` (already
        renamed `.deleted`), which are removed after file.delete.delay.ms."""
        t = self.clock() if time_ms is None else time_ms
        self._local.replace_segments(new, old)
        for seg in old:
            snapshot = None
            if seg.base_offset != new.base_offset:
                snapshot = self.producer_state.rename_snapshot_for_deletion(seg.base_offset)
            self._local.schedule_deletion(seg, snapshot, t)

    @property
    def has_pending_deletions(self) -> bool:
        """Whether `.deleted` files wait for their delay (a cheap check, no lock)."""
        return bool(self._local.pending_deletions)

    def remove_deleted_files(self, *, time_ms: int | None = None, force: bool = False) -> int:
        """Physically delete `.deleted` files whose delay (file.delete.delay.ms) has passed."""
        t = self.clock() if time_ms is None else time_ms
        return self._local.remove_deleted_files(t, force)

    # --- closing (flushing: storage/log_flushing.py) ----------------------------------

    def close(self) -> None:
        """Clean shutdown of this log: producer snapshot at the LEO, trimmed indexes."""
        if self._closed:
            return
        # A clean shutdown skips recovery: a deferred epoch entry must be on disk.
        self.epoch_cache.write_unwritten()
        self.producer_state.update_map_end_offset(self._local.log_end_offset)
        self.producer_state.take_snapshot()
        self.flush()
        self._local.close()
        self.remove_deleted_files(force=True)
        self._closed = True

    def abandon(self) -> None:
        """The process died (a simulated power failure or kill): release every file
        and map without writing anything — no snapshot, no flush, no trimmed index —
        so the directory holds what a crash leaves for `open` to recover."""
        self._local.abandon()
        self._closed = True

    def delete(self) -> None:
        """Remove the whole partition directory (topic deletion)."""
        self._local.delete()
        self._closed = True

    def __repr__(self) -> str:
        return (
            f"Log({self._local.name}, start={self.log_start_offset}, hw={self.high_watermark}, "
            f"leo={self._local.log_end_offset}, segments={len(self._local.segments)})"
        )


__all__ = [
    "MAX_MAPPED_INACTIVE",
    "Clock",
    "FetchDataInfo",
    "Log",
    "LogAppendInfo",
    "TimestampAndOffset",
    "now_ms",
    "parse_partition_dir",
]
