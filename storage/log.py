"""A partition replica's log: ordered segments plus the state Kafka keeps beside them
(log start offset, recovery point, high watermark, leader-epoch cache, producer state).

Not thread-safe: the node serialises calls per partition. Time is an argument
(`now_ms`) wherever a decision depends on it, so tests drive the clock.
"""

from __future__ import annotations

import bisect
import random
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, TypeVar

from .checkpoint_file import LeaderEpochCheckpointFile

# The default `Clock` of a log (Kafka's Time.SYSTEM): the plain wall clock, read when the
# Log is built without one (tools, tests); the node passes disk_and_clock.wall_ms.
from .disk_and_clock import plain_wall_ms as now_ms
from .errors import (
    CorruptIndexError,
    KafkaStorageError,
    LogDirFullError,
    OffsetOutOfRangeError,
    StorageError,
)
from .file_slice import FileSlice
from .flush_job import FlushJob
from .leader_epoch_cache import LeaderEpochCache
from .log_config import LogConfig
from .log_validator import validate_follower_append, validate_leader_append
from .partition_metadata import PartitionMetadataFile
from .producer_state import AppendOrigin, ControlMarker, DuplicateBatch, ProducerStateManager
from .record_batch import (
    BatchHeader,
    ControlType,
    check_batch,
    control_record_type,
    decode_records,
)
from .segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    file_prefix,
    offset_from_file_name,
)

T = TypeVar("T")


Clock = Callable[[], int]  # ms; a simulator passes its own
# Inactive segments of one log whose indexes stay mapped (the ones read lately): a
# mapped index holds a file descriptor (storage/segment.py), so not every segment's.
MAX_MAPPED_INACTIVE = 4


def parse_partition_dir(name: str) -> tuple[str, int]:
    """`<topic>-<partition>`; topics may contain '-', so split on the last one."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise StorageError(f"{name!r} is not a partition directory name (<topic>-<partition>)")
    return topic, int(partition)


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


@dataclass(slots=True)
class _PendingDeletion:
    segment: LogSegment
    snapshot: Path | None
    due_ms: int


class Log:
    """Open one with `Log.open(...)`."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        *,
        clock: Clock = now_ms,
        rng: random.Random | None = None,
    ) -> None:
        self.directory = directory
        self.topic, self.partition = parse_partition_dir(directory.name)
        # From partition.metadata: which incarnation of the topic this log belongs to.
        self.topic_id: str | None = None
        self.config = config
        self._segments: list[LogSegment] = []
        self._base_offsets: list[int] = []
        # Inactive segments whose indexes are mapped, least recently mapped first, and
        # the segments that mapped theirs since the last look (_unload_idle_indexes).
        self._mapped: OrderedDict[LogSegment, None] = OrderedDict()
        self._recently_mapped: deque[LogSegment] = deque()
        self._log_end_offset = 0
        self.log_start_offset = 0
        self._recovery_point = 0
        # A roll's flush of the finished segments, deferred (see flush_pending).
        self._pending_flush: int | None = None
        # Counts truncations, so a FlushJob finishing after one is ignored.
        self._truncations = 0
        self.high_watermark = 0
        self._pending_deletions: list[_PendingDeletion] = []
        self._roll_config: LogConfig | None = None
        self._max_segment_ms = 0
        self._unflushed_messages = 0
        self._last_flush_ms = 0
        # Told the seconds each successful flush's fsyncs took (a node's metrics); the
        # storage layer only calls it.
        self.flush_observer: Callable[[float], None] | None = None
        # Time and randomness are inputs (Kafka's Time): the node passes the wall clock
        # and a seeded generator, a simulator its own clock and seed.
        self.clock = clock
        self._rng = rng if rng is not None else random.Random()
        self.epoch_cache = LeaderEpochCache(LeaderEpochCheckpointFile.in_dir(directory))
        self.producer_state: ProducerStateManager
        self._closed = False
        # Kafka's LogDirFailureChannel: the log directory hears of every I/O error
        # (set by LogDirectory); once it is offline, this log answers
        # KAFKA_STORAGE_ERROR to every append and read.
        self.io_error_handler: Callable[[KafkaStorageError], None] | None = None
        self.offline_reason: str | None = None

    # --- opening and recovery ---------------------------------------------------

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
        time_ms: int | None = None,
        clock: Clock = now_ms,
        rng: random.Random | None = None,
    ) -> Log:
        t = clock() if time_ms is None else time_ms
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise KafkaStorageError(f"cannot create partition directory {directory}: {e}") from e
        log = cls(directory, config, clock=clock, rng=rng)
        log.producer_state = ProducerStateManager(directory, producer_id_expiration_ms)
        metadata = PartitionMetadataFile.in_dir(directory)
        if metadata.exists():
            try:
                log.topic_id = metadata.read().topic_id
            except StorageError:
                log.topic_id = None  # unknown: never taken for another topic's log
        elif topic_id is not None:
            # Before any record: data must never exist on disk without a topic id.
            metadata.write(topic_id)
            log.topic_id = topic_id
        log._load(recovery_point, log_start_offset, had_clean_shutdown, t)
        log.high_watermark = min(max(high_watermark, log.log_start_offset), log.log_end_offset)
        log._last_flush_ms = t
        return log

    def _load(self, recovery_point: int, log_start_offset: int, clean: bool, t: int) -> None:
        self._remove_temporary_files()
        needs_recovery: set[int] = set()
        for path in sorted(self.directory.glob(f"*{LOG_SUFFIX}")):
            base = offset_from_file_name(path.name)
            if not Path(f"{self.directory / file_prefix(base)}{INDEX_SUFFIX}").exists():
                needs_recovery.add(base)
            self._add_segment(self._new_segment(base, t))
        if not self._segments:
            self._add_segment(self._new_segment(log_start_offset, t))
        start_index = 0
        if not clean:
            start_index = max(0, bisect.bisect_right(self._base_offsets, recovery_point) - 1)
        i = 0
        while i < len(self._segments):
            seg = self._segments[i]
            recover = (not clean and i >= start_index) or seg.base_offset in needs_recovery
            if not recover:
                try:
                    seg.sanity_check()
                except StorageError:
                    recover = True  # indexes are disposable: rebuild from the .log
            if recover:
                truncated = seg.recover(self._recovery_visitor)
                if truncated and i + 1 < len(self._segments):
                    # Nothing after a torn batch can be trusted.
                    for later in self._segments[i + 1 :]:
                        later.delete()
                    del self._segments[i + 1 :]
                    del self._base_offsets[i + 1 :]
            self._unload_idle_indexes()  # checking every segment must not map them all
            i += 1
        active = self._segments[-1]
        active.offset_index.resize(self.config.segment_index_bytes)
        active.time_index.resize(self.config.segment_index_bytes)
        self._log_end_offset = active.read_next_offset()
        if active.size == 0 and len(self._segments) > 1:
            self._log_end_offset = max(self._log_end_offset, active.base_offset)
        self.log_start_offset = min(
            max(log_start_offset, self._segments[0].base_offset), self._log_end_offset
        )
        self.recovery_point = (
            self._log_end_offset if clean else min(recovery_point, self._log_end_offset)
        )
        self.epoch_cache.truncate_from_end(self._log_end_offset)
        self.epoch_cache.truncate_from_start(self.log_start_offset)
        self.producer_state.delete_stray_snapshots(self._base_offsets)
        self._rebuild_producer_state(self._log_end_offset, t)

    def _recovery_visitor(self, view: memoryview, pos: int, header: BatchHeader) -> None:
        latest = self.epoch_cache.latest_epoch
        epoch = header.partition_leader_epoch
        if epoch >= 0 and (latest is None or epoch > latest):
            self.epoch_cache.assign(epoch, header.base_offset)

    def _remove_temporary_files(self) -> None:
        """Kafka's startup clean-up of files a crash can leave behind."""
        swaps: list[Path] = []
        min_cleaned: int | None = None
        for path in list(self.directory.iterdir()):
            name = path.name
            if name.endswith(DELETED_SUFFIX) or name.endswith(".tmp"):
                path.unlink(missing_ok=True)
            elif name.endswith(CLEANED_SUFFIX):
                base = offset_from_file_name(name)
                min_cleaned = base if min_cleaned is None else min(min_cleaned, base)
                path.unlink(missing_ok=True)
            elif name.endswith(SWAP_SUFFIX):
                swaps.append(path)
        for path in swaps:
            base = offset_from_file_name(path.name)
            if min_cleaned is not None and base >= min_cleaned:
                path.unlink(missing_ok=True)  # an unfinished split
            elif path.name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
                self._commit_swap(path, base)
            else:
                path.unlink(missing_ok=True)  # swapped indexes are rebuilt from the log
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            for path in self.directory.glob(f"*{suffix}"):
                log_file = path.with_name(path.name[: -len(suffix)] + LOG_SUFFIX)
                if not log_file.exists():
                    path.unlink(missing_ok=True)  # an orphan index

    def _commit_swap(self, swap: Path, base: int) -> None:
        """A finished cleaner output replaces the segments it covers."""
        data = swap.read_bytes()
        next_offset = base
        pos = 0
        while pos < len(data):
            try:
                header = check_batch(data, pos)
            except StorageError:
                break
            next_offset = header.next_offset
            pos += header.size
        for path in self.directory.glob(f"*{LOG_SUFFIX}"):
            old = offset_from_file_name(path.name)
            if base <= old < next_offset:
                for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                    path.with_name(file_prefix(old) + suffix).unlink(missing_ok=True)
        swap.rename(swap.with_name(swap.name[: -len(SWAP_SUFFIX)]))

    def _new_segment(self, base_offset: int, t: int) -> LogSegment:
        return LogSegment(
            self.directory,
            base_offset,
            index_interval_bytes=self.config.index_interval_bytes,
            max_index_size=self.config.segment_index_bytes,
            roll_jitter_ms=self.config.random_segment_jitter(self._rng),
            now_ms=t,
        )

    def _add_segment(self, seg: LogSegment) -> None:
        assert not self._base_offsets or seg.base_offset > self._base_offsets[-1], (
            "segments must be added in offset order"
        )
        self._segments.append(seg)
        self._base_offsets.append(seg.base_offset)
        seg.on_indexes_loaded = self._recently_mapped.append
        if seg.indexes_loaded:
            self._recently_mapped.append(seg)

    def _unload_idle_indexes(self) -> None:
        """Keep the indexes of at most MAX_MAPPED_INACTIVE inactive segments mapped (the
        most recently mapped ones; the active segment's always): a mapped index holds a
        file descriptor (storage/segment.py). Under the partition lock, as every call
        that maps an index of an inactive segment is."""
        recent, mapped = self._recently_mapped, self._mapped
        # Bounded: appends come only from segments of this log mapping their indexes.
        while recent:
            seg = recent.popleft()
            mapped[seg] = None
            mapped.move_to_end(seg)
        # The active segment stays in `mapped` (it becomes inactive at the next roll)
        # but is never unloaded.
        active = self._segments[-1] if self._segments else None
        limit = MAX_MAPPED_INACTIVE + (1 if active in mapped else 0)
        if len(mapped) <= limit:
            return
        for seg in list(mapped):
            if len(mapped) <= limit:
                break
            if seg is active:
                continue
            if not seg.indexes_loaded or seg.closed or seg.unload_indexes():
                del mapped[seg]

    # --- properties ---------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def latest_epoch(self) -> int | None:
        return self.epoch_cache.latest_epoch

    @property
    def truncation_count(self) -> int:
        """Counts truncations: work taken out of the partition lock (a flush, a
        cleaning pass) compares it to know whether the log changed under it."""
        return self._truncations

    @property
    def closed(self) -> bool:
        return self._closed

    def _segment_index_for(self, offset: int) -> int:
        return max(0, bisect.bisect_right(self._base_offsets, offset) - 1)

    # --- appending ------------------------------------------------------------------

    def append_as_leader(
        self,
        data: bytes | bytearray | memoryview,
        leader_epoch: int,
        *,
        time_ms: int | None = None,
    ) -> LogAppendInfo:
        """Validate a producer's batches, assign offsets and the leader epoch in place,
        check producer state, and append. Raises before writing anything."""
        t = self.clock() if time_ms is None else time_ms
        buf, headers, log_append_time = validate_leader_append(
            data,
            self.config,
            first_offset=self._log_end_offset,
            leader_epoch=leader_epoch,
            now_ms=t,
            topic=self.topic,
            log_name=self.directory.name,
        )
        if self.offline_reason is not None:
            self._raise_offline()
        prepared = self.producer_state.prepare_appends(headers, AppendOrigin.CLIENT)
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
        self.producer_state.update_map_end_offset(self._log_end_offset)
        return info

    def append_as_follower(
        self, data: bytes | bytearray | memoryview, *, time_ms: int | None = None
    ) -> LogAppendInfo:
        """Append a leader's batches verbatim: CRC and offset order are checked, nothing
        is rewritten, producer state is replayed without validation."""
        t = self.clock() if time_ms is None else time_ms
        if self.offline_reason is not None:
            self._raise_offline()
        headers = validate_follower_append(data, self._log_end_offset, self.directory.name)
        info = self._append_batches_or_undo(data, headers, t, False)
        for h, view, p in self._iter_with_positions(data, headers):
            self.producer_state.replay_batch(h, self._marker_of(view, p, h))
        self.producer_state.update_map_end_offset(self._log_end_offset)
        return info

    @staticmethod
    def _iter_with_positions(
        data: bytes | bytearray | memoryview, headers: list[BatchHeader]
    ) -> Iterator[tuple[BatchHeader, memoryview, int]]:
        view = memoryview(data)
        pos = 0
        for h in headers:
            if h.has_producer_id:
                yield h, view, pos
            pos += h.size

    @staticmethod
    def _marker_of(view: memoryview, pos: int, h: BatchHeader) -> ControlMarker | None:
        if not h.is_control:
            return None
        control = control_record_type(view, pos, h)
        if control is None or control[0] not in (ControlType.ABORT, ControlType.COMMIT):
            return None
        if control[0] == ControlType.COMMIT:
            return ControlMarker("COMMIT", control[1])
        return ControlMarker("ABORT", control[1])

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
        end_before = self._log_end_offset
        try:
            return self._append_batches(data, headers, t, log_append_time)
        except KafkaStorageError as e:
            if isinstance(e, LogDirFullError) and self._log_end_offset > end_before:
                # truncate_to reports its own failure to the handler.
                self.truncate_to(end_before, time_ms=t)
            self._io_error(e)
            raise

    def _io_error(self, e: KafkaStorageError) -> None:
        if self.io_error_handler is not None:
            self.io_error_handler(e)

    def _raise_offline(self) -> None:
        raise KafkaStorageError(
            f"{self.directory.name} is in an offline log directory ({self.offline_reason})"
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
        for i, h in enumerate(headers):
            # A follower's fetch may exceed segment.bytes; split it at batch boundaries.
            if group_bytes and group_bytes + h.size > self.config.segment_bytes:
                self._append_group(view[start : start + group_bytes], headers[group_start:i], t)
                start += group_bytes
                group_start, group_bytes = i, 0
            group_bytes += h.size
        self._append_group(view[start : start + group_bytes], headers[group_start:], t)
        max_ts, offset_of_max = -1, headers[0].last_offset
        for h in headers:
            if h.max_timestamp > max_ts:
                max_ts, offset_of_max = h.max_timestamp, h.last_offset
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
        seg = self._maybe_roll(size, first, last, max_ts, t)
        seg.append(last, max_ts, last, data)
        assert last + 1 > self._log_end_offset, "the log end offset only grows on append"
        self._log_end_offset = last + 1
        epoch = h.partition_leader_epoch
        if epoch >= 0 and epoch != self.epoch_cache.latest_epoch:
            self.epoch_cache.assign(epoch, first)
        self._unflushed_messages += count
        if self._unflushed_messages >= self.config.flush_messages:
            self.flush()
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
        first, last = headers[0].base_offset, headers[-1].last_offset
        max_ts, offset_of_max = -1, last
        for h in headers:
            if h.max_timestamp > max_ts:
                max_ts, offset_of_max = h.max_timestamp, h.last_offset
        seg = self._maybe_roll(len(chunk), first, last, max_ts, t)
        seg.append(last, max_ts, offset_of_max, chunk)
        assert last + 1 > self._log_end_offset, "the log end offset only grows on append"
        self._log_end_offset = last + 1
        latest = self.epoch_cache.latest_epoch
        for h in headers:
            epoch = h.partition_leader_epoch
            if epoch >= 0 and epoch != latest:
                self.epoch_cache.assign(epoch, h.base_offset)
                latest = self.epoch_cache.latest_epoch
        self._unflushed_messages += sum(h.records_count for h in headers)
        if self._unflushed_messages >= self.config.flush_messages:
            self.flush()

    # --- rolling --------------------------------------------------------------------

    def _maybe_roll(
        self, size: int, first_offset: int, last_offset: int, max_timestamp: int, t: int
    ) -> LogSegment:
        seg = self._segments[-1]
        if seg.size == 0:
            if not seg.can_hold_offset(last_offset) or seg.base_offset != first_offset:
                # An empty active segment at the wrong base (a follower's gap): replace it.
                if seg.base_offset != max(first_offset, self._log_end_offset):
                    return self._replace_empty_active(max(first_offset, self._log_end_offset), t)
            return seg
        config = self.config
        if config is not self._roll_config:
            # max_segment_ms is derived (a property): worked out once per config.
            self._roll_config, self._max_segment_ms = config, config.max_segment_ms
        if seg.should_roll(
            size, last_offset, max_timestamp, t, config.segment_bytes, self._max_segment_ms
        ):
            return self.roll(first_offset, time_ms=t)
        return seg

    def _replace_empty_active(self, base: int, t: int) -> LogSegment:
        old = self._segments.pop()
        self._base_offsets.pop()
        old.delete()
        seg = self._new_segment(base, t)
        self._add_segment(seg)
        return seg

    def roll(
        self, expected_next_offset: int | None = None, *, time_ms: int | None = None
    ) -> LogSegment:
        """Close the active segment and start a new one at max(expected, LEO)."""
        t = self.clock() if time_ms is None else time_ms
        new_base = max(expected_next_offset or 0, self._log_end_offset)
        active = self._segments[-1]
        if active.base_offset == new_base and active.size == 0:
            return active
        active.on_becoming_inactive()
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            stale = self.directory / f"{file_prefix(new_base)}{suffix}"
            stale.unlink(missing_ok=True)
        seg = self._new_segment(new_base, t)
        self._add_segment(seg)
        self._unload_idle_indexes()  # a leader that is never read from rolls on and on
        self.producer_state.update_map_end_offset(new_base)
        self.producer_state.take_snapshot()
        # Kafka flushes below the new segment asynchronously: an inline fsync of a
        # whole segment (~1 GiB) would stall this append for most of a second.
        self._defer_flush(new_base, t)
        return seg

    # --- reading --------------------------------------------------------------------

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
        try:
            return self._read(offset, max_bytes, upper_bound, min_one_batch)
        finally:
            if self._recently_mapped:
                self._unload_idle_indexes()

    def _read(
        self, offset: int, max_bytes: int, upper_bound: int | None, min_one_batch: bool
    ) -> FetchDataInfo:
        if self.offline_reason is not None:
            self._raise_offline()
        if offset < self.log_start_offset or offset > self._log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is out of range for {self.directory.name}: "
                f"[{self.log_start_offset}, {self._log_end_offset}]"
            )
        bound = (
            self._log_end_offset if upper_bound is None else min(upper_bound, self._log_end_offset)
        )
        if offset >= bound:
            return FetchDataInfo(b"", offset, offset)
        segments = self._segments
        i = bisect.bisect_right(self._base_offsets, offset) - 1  # _segment_index_for, inlined
        if i < 0:
            i = 0
        # Bounded by the segment count: each pass moves to the next segment.
        while i < len(segments):
            seg = segments[i]
            try:
                result = seg.read(offset, max_bytes, bound, min_one_batch)
            except CorruptIndexError:
                result = self._rebuild_index_and_retry(
                    seg, lambda s: s.read(offset, max_bytes, bound, min_one_batch)
                )
            if result is not None and result.data:
                return _new_tuple(FetchDataInfo, (result.data, offset, result.next_offset))
            if result is not None:
                # The batch is here but lies at/after the bound or does not fit
                # max_bytes: never skip ahead to a later segment.
                break
            i += 1
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
        try:
            return self._read_slice(offset, max_bytes, upper_bound, min_one_batch)
        finally:
            if self._recently_mapped:
                self._unload_idle_indexes()

    def _read_slice(
        self, offset: int, max_bytes: int, upper_bound: int | None, min_one_batch: bool
    ) -> FileSlice:
        if self.offline_reason is not None:
            self._raise_offline()
        if offset < self.log_start_offset or offset > self._log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is out of range for {self.directory.name}: "
                f"[{self.log_start_offset}, {self._log_end_offset}]"
            )
        bound = (
            self._log_end_offset if upper_bound is None else min(upper_bound, self._log_end_offset)
        )
        if offset >= bound:
            return FileSlice(-1, 0, 0)
        segments = self._segments
        i = max(bisect.bisect_right(self._base_offsets, offset) - 1, 0)
        # Bounded by the segment count: each pass moves to the next segment.
        while i < len(segments):
            seg = segments[i]
            try:
                extent = seg.read_extent(offset, max_bytes, bound, min_one_batch)
            except CorruptIndexError:
                extent = self._rebuild_index_and_retry(
                    seg, lambda s: s.read_extent(offset, max_bytes, bound, min_one_batch)
                )
            if extent is not None and extent[1] > 0:
                return FileSlice.of(seg.fd, extent[0], extent[1])
            if extent is not None:
                break
            i += 1
        return FileSlice(-1, 0, 0)

    def _with_valid_index(self, seg: LogSegment, op: Callable[[LogSegment], T]) -> T:
        """Run a lookup; if the segment's index proves bad, rebuild it once and retry."""
        try:
            return op(seg)
        except CorruptIndexError:
            return self._rebuild_index_and_retry(seg, op)

    def _rebuild_index_and_retry(self, seg: LogSegment, op: Callable[[LogSegment], T]) -> T:
        """The recovery half of _with_valid_index, for lookups that inline the first try."""
        seg.rebuild_indexes()
        if seg is self._segments[-1]:
            seg.offset_index.resize(self.config.segment_index_bytes)
            seg.time_index.resize(self.config.segment_index_bytes)
        return op(seg)

    def translate_offset(self, offset: int) -> tuple[LogSegment, int, BatchHeader] | None:
        """Segment, byte position and header of the batch holding `offset`."""
        try:
            return self._translate_offset(offset)
        finally:
            if self._recently_mapped:
                self._unload_idle_indexes()

    def _translate_offset(self, offset: int) -> tuple[LogSegment, int, BatchHeader] | None:
        segments = self._segments
        i = bisect.bisect_right(self._base_offsets, offset) - 1  # _segment_index_for, inlined
        if i < 0:
            i = 0
        while i < len(segments):
            seg = segments[i]
            try:
                found = seg.translate_offset(offset)
            except CorruptIndexError:
                found = self._rebuild_index_and_retry(seg, lambda s: s.translate_offset(offset))
            if found is not None:
                return seg, found.position, found.header
            i += 1
        return None

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        """The first record with timestamp >= `timestamp` (Kafka's ListOffsets by time)."""
        try:
            return self._offset_for_timestamp(timestamp)
        finally:
            if self._recently_mapped:
                self._unload_idle_indexes()

    def _offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        for seg in self._segments:
            if seg.largest_timestamp < timestamp:
                continue
            found = self._with_valid_index(
                seg, lambda s: s.find_offset_by_timestamp(timestamp, self.log_start_offset)
            )
            if found is None:
                continue
            # The first batch whose max timestamp qualifies may still hold no record
            # that does (the log start can cut into it): keep scanning the segment.
            for _pos, view, p, header in seg.scan(found.position, validate=False):
                if header.max_timestamp < timestamp or header.last_offset < self.log_start_offset:
                    continue
                for record in decode_records(view, p, header):
                    if record.timestamp >= timestamp and record.offset >= self.log_start_offset:
                        epoch = header.partition_leader_epoch
                        return TimestampAndOffset(
                            record.timestamp, record.offset, epoch if epoch >= 0 else None
                        )
        return None

    # --- truncation -----------------------------------------------------------------

    def truncate_to(self, offset: int, *, time_ms: int | None = None) -> bool:
        """Remove everything at or after `offset`; an offset inside a batch removes the
        whole batch and the LEO becomes its base offset. True if data went."""
        if offset < 0:
            raise ValueError(f"cannot truncate {self.directory.name} to negative offset {offset}")
        if self.offline_reason is not None:
            self._raise_offline()
        t = self.clock() if time_ms is None else time_ms
        try:
            return self._truncate_to(offset, t)
        except KafkaStorageError as e:
            self._io_error(e)
            raise

    def _truncate_to(self, offset: int, t: int) -> bool:
        self.flush_pending()
        if offset >= self._log_end_offset:
            self.epoch_cache.truncate_from_end(self._log_end_offset)
            return False
        if offset < self._segments[0].base_offset:
            self.truncate_fully_and_start_at(offset, time_ms=t)
            return True
        self._truncations += 1
        while len(self._segments) > 1 and self._segments[-1].base_offset > offset:
            self._segments.pop().delete()
            self._base_offsets.pop()
        active = self._segments[-1]
        active.truncate_to(offset)
        # An offset inside a batch takes the whole batch: the LEO is where the data
        # ends, so a follower fetches that batch again rather than leave a hole.
        offset = min(offset, active.read_next_offset())
        self._log_end_offset = offset
        self.epoch_cache.truncate_from_end(offset)
        self.log_start_offset = min(self.log_start_offset, offset)
        self.recovery_point = min(self.recovery_point, offset)
        self.high_watermark = min(self.high_watermark, offset)
        self._rebuild_producer_state(offset, t)
        return True

    def truncate_fully_and_start_at(self, offset: int, *, time_ms: int | None = None) -> None:
        t = self.clock() if time_ms is None else time_ms
        self._pending_flush = None  # every segment it would fsync is deleted
        self._truncations += 1
        for seg in self._segments:
            seg.delete()
        self._segments.clear()
        self._base_offsets.clear()
        self._add_segment(self._new_segment(offset, t))
        self._log_end_offset = offset
        self.log_start_offset = offset
        self.recovery_point = offset
        self.high_watermark = offset
        self.epoch_cache.clear()
        self.producer_state.truncate_fully_and_start_at(offset)

    def _rebuild_producer_state(self, end_offset: int, t: int) -> None:
        start = self.producer_state.truncate_and_reload(self.log_start_offset, end_offset, t)
        if start is not None and start < end_offset:
            i = self._segment_index_for(start)
            for seg in self._segments[i:]:
                if seg.base_offset >= end_offset:
                    break
                position = seg.translate_offset(start)
                if position is None:
                    continue
                for _pos, view, p, h in seg.scan(position.position, validate=False):
                    if h.base_offset >= end_offset:
                        break
                    if h.has_producer_id and h.last_offset >= start:
                        self.producer_state.replay_batch(h, self._marker_of(view, p, h))
        self.producer_state.update_map_end_offset(end_offset)
        self.producer_state.take_snapshot()

    # --- high watermark, log start offset --------------------------------------------

    def update_high_watermark(self, offset: int) -> int:
        """Set the HW, clamped into [log start offset, LEO]; returns the value kept."""
        self.high_watermark = min(max(offset, self.log_start_offset), self._log_end_offset)
        return self.high_watermark

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """DeleteRecords and followers adopting the leader's start offset."""
        if offset <= self.log_start_offset:
            return False
        if offset > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot move the log start offset of {self.directory.name} to {offset}, "
                f"beyond the high watermark {self.high_watermark}"
            )
        self.log_start_offset = offset
        self.epoch_cache.truncate_from_start(offset)
        return True

    # --- retention -----------------------------------------------------------------

    def remove_expired_producers(self, *, time_ms: int | None = None) -> list[int]:
        """producer.id.expiration.ms: producers idle that long stop being active (the log
        manager calls this every producer.id.expiration.check.interval.ms)."""
        t = self.clock() if time_ms is None else time_ms
        return self.producer_state.remove_expired_producers(t)

    def delete_old_segments(self, *, time_ms: int | None = None) -> int:
        """One retention pass (Kafka's order: start-offset breach, size, time).
        Returns the number of segments scheduled for deletion."""
        t = self.clock() if time_ms is None else time_ms
        self.flush_pending()
        deleted = self._delete_prefix(
            lambda seg, nxt: nxt is not None and nxt.base_offset <= self.log_start_offset, t
        )
        if not self.config.delete:
            return deleted
        if self.config.retention_bytes >= 0:
            excess = self.size_in_bytes - self.config.retention_bytes
            if excess >= 0:
                budget = [excess]

                def size_breach(seg: LogSegment, _nxt: LogSegment | None) -> bool:
                    if budget[0] - seg.size >= 0:
                        budget[0] -= seg.size
                        return True
                    return False

                deleted += self._delete_prefix(size_breach, t)
        if self.config.retention_ms >= 0:
            limit = self.config.retention_ms
            deleted += self._delete_prefix(lambda seg, _nxt: t - seg.largest_timestamp > limit, t)
        return deleted

    def _delete_prefix(
        self, predicate: Callable[[LogSegment, LogSegment | None], bool], t: int
    ) -> int:
        victims: list[LogSegment] = []
        for i, seg in enumerate(self._segments):
            nxt = self._segments[i + 1] if i + 1 < len(self._segments) else None
            upper = nxt.base_offset if nxt is not None else self._log_end_offset
            if self.high_watermark < upper:
                break  # nothing at or above the high watermark is ever deleted
            if nxt is None and seg.size == 0:
                break
            if not predicate(seg, nxt):
                break
            victims.append(seg)
        if not victims:
            return 0
        if len(victims) == len(self._segments):
            # Keep an active segment: roll a fresh empty one first.
            self.roll(time_ms=t)
        for seg in victims:
            self._segments.remove(seg)
            self._base_offsets.remove(seg.base_offset)
        new_start = self._segments[0].base_offset
        if new_start > self.log_start_offset:
            self.log_start_offset = new_start
            self.epoch_cache.truncate_from_start(new_start)
        for seg in victims:
            seg.rename_with_suffix(DELETED_SUFFIX)
            snapshot = self.producer_state.rename_snapshot_for_deletion(seg.base_offset)
            self._pending_deletions.append(
                _PendingDeletion(seg, snapshot, t + self.config.file_delete_delay_ms)
            )
        return len(victims)

    def replace_segments(
        self, new: LogSegment, old: list[LogSegment], *, time_ms: int | None = None
    ) -> None:
        """The log cleaner's swap (storage/log_cleaner.py), in memory: `new` (already under
        its final file names) takes the place of the consecutive segments `old` (already
        renamed `.deleted`), which are removed after file.delete.delay.ms."""
        t = self.clock() if time_ms is None else time_ms
        i = next((k for k, seg in enumerate(self._segments) if seg is old[0]), None)
        if (
            i is None
            or self._segments[i : i + len(old)] != old
            or i + len(old) >= len(self._segments)
        ):
            raise StorageError(f"segments to replace are not in {self.directory.name}")
        if new.base_offset != old[0].base_offset:
            raise StorageError("a cleaned segment keeps the base offset of the first it replaces")
        self._segments[i : i + len(old)] = [new]
        self._base_offsets[i : i + len(old)] = [new.base_offset]
        for seg in old:
            snapshot = None
            if seg.base_offset != new.base_offset:
                snapshot = self.producer_state.rename_snapshot_for_deletion(seg.base_offset)
            self._pending_deletions.append(
                _PendingDeletion(seg, snapshot, t + self.config.file_delete_delay_ms)
            )

    @property
    def has_pending_deletions(self) -> bool:
        """Whether `.deleted` files wait for their delay (a cheap check, no lock)."""
        return bool(self._pending_deletions)

    def remove_deleted_files(self, *, time_ms: int | None = None, force: bool = False) -> int:
        """Physically delete `.deleted` files whose delay (file.delete.delay.ms) has passed."""
        t = self.clock() if time_ms is None else time_ms
        self.flush_pending()
        due = [p for p in self._pending_deletions if force or p.due_ms <= t]
        for p in due:
            p.segment.delete()
            if p.snapshot is not None:
                p.snapshot.unlink(missing_ok=True)
            self._pending_deletions.remove(p)
        return len(due)

    # --- flushing and closing -------------------------------------------------------
    #
    # A roll does not fsync the finished segment itself: it records the flush as
    # pending (_defer_flush), and flush_pending runs it. The node's flush scheduler
    # does that through flush_if_due, and so does every method that reads or moves
    # the recovery point or changes the segment list first. The recovery point only
    # moves once the data below it is fsynced, and it always reads as it would with
    # the flush done inline: only when the fsync happens changes.

    @property
    def recovery_point(self) -> int:
        """Offset below which every segment is fsynced (completes a pending flush)."""
        if self._pending_flush is not None:
            self.flush_pending()
        return self._recovery_point

    @recovery_point.setter
    def recovery_point(self, offset: int) -> None:
        self._recovery_point = offset

    @property
    def durable_offset(self) -> int:
        """Offset below which the data is fsynced now — what a crash keeps — without
        running a pending flush (the recovery point's reader runs it)."""
        return self._recovery_point

    def flush_pending(self) -> None:
        """Run the flush the last roll(s) deferred, if any."""
        target = self._pending_flush
        if target is not None:
            self._pending_flush = None
            self._sync_below(target)

    def _defer_flush(self, up_to: int, t: int) -> None:
        """flush(up_to), but the fsyncs and the recovery point wait for flush_pending;
        the flush.messages / flush.ms clocks restart now, as the inline flush did."""
        target = min(up_to, self._log_end_offset)
        flushed = self._recovery_point if self._pending_flush is None else self._pending_flush
        if target <= flushed:
            return
        self._pending_flush = target
        self._unflushed_messages = 0
        self._last_flush_ms = t

    def flush(self, up_to: int | None = None, *, time_ms: int | None = None) -> None:
        """fsync every segment holding data below `up_to` (default: the LEO) and move
        the recovery point there."""
        self.flush_pending()
        target = self._log_end_offset if up_to is None else min(up_to, self._log_end_offset)
        if target <= self._recovery_point:
            return
        self._sync_below(target)
        self._unflushed_messages = 0
        self._last_flush_ms = self.clock() if time_ms is None else time_ms

    def _sync_below(self, target: int) -> None:
        """fsync the segments holding data in [recovery point, target) and the
        directory, then move the recovery point to `target`."""
        job = self._flush_job(target, due_to_flush_ms=False)
        if not job.run():
            assert job.error is not None
            raise job.error
        self._recovery_point = target

    def _flush_job(self, target: int, *, due_to_flush_ms: bool) -> FlushJob:
        segments = []
        for i, seg in enumerate(self._segments):
            nxt = self._base_offsets[i + 1] if i + 1 < len(self._segments) else None
            if seg.base_offset >= target:
                break
            if nxt is None or nxt > self._recovery_point:
                segments.append(seg)
        return FlushJob(
            self.directory,
            segments,
            target,
            self._truncations,
            due_to_flush_ms,
            observer=self.flush_observer,
        )

    def begin_flush(self, *, time_ms: int | None = None) -> FlushJob | None:
        """The flush scheduler's share, to run outside the partition lock (see
        FlushJob): a roll's deferred flush, or the whole log when flush.ms is due.
        None when nothing is to flush. Finish with end_flush."""
        t = self.clock() if time_ms is None else time_ms
        target = self._pending_flush
        due = (
            self._log_end_offset > max(self._recovery_point, target or 0)
            and t - self._last_flush_ms >= self.config.flush_ms
        )
        if due:
            target = self._log_end_offset
            self._unflushed_messages = 0
            self._last_flush_ms = t
        if target is None or target <= self._recovery_point:
            self._pending_flush = None
            return None
        self._pending_flush = None
        return self._flush_job(target, due_to_flush_ms=due)

    def end_flush(self, job: FlushJob) -> None:
        """Under the partition lock, after job.run(): the recovery point moves to the
        job's target if it succeeded; a failed job's flush is pending again."""
        if job.truncations != self._truncations:
            return  # its segments may be gone; a later flush covers what is left
        target = min(job.target, self._log_end_offset)
        if job.error is None:
            if target > self._recovery_point:
                self._recovery_point = target
        elif target > self._recovery_point:
            self._pending_flush = max(self._pending_flush or 0, target)

    def flush_if_due(self, *, time_ms: int | None = None) -> bool:
        """flush.ms, and a roll's deferred flush, inline: True if flush.ms was due."""
        job = self.begin_flush(time_ms=time_ms)
        if job is None:
            return False
        job.run()
        self.end_flush(job)
        if job.error is not None:
            raise job.error
        return job.due_to_flush_ms

    def close(self) -> None:
        """Clean shutdown of this log: producer snapshot at the LEO, trimmed indexes."""
        if self._closed:
            return
        self.producer_state.update_map_end_offset(self._log_end_offset)
        self.producer_state.take_snapshot()
        self.flush()
        for seg in self._segments:
            seg.close()
        self.remove_deleted_files(force=True)
        self._closed = True

    def abandon(self) -> None:
        """The process died (a simulated power failure or kill): release every file
        and map without writing anything — no snapshot, no flush, no trimmed index —
        so the directory holds what a crash leaves for `open` to recover."""
        for seg in self._segments:
            seg.abandon()
        for pending in self._pending_deletions:
            pending.segment.abandon()
        self._pending_flush = None
        self._closed = True

    def delete(self) -> None:
        """Remove the whole partition directory (topic deletion)."""
        self._pending_flush = None  # every segment it would fsync is deleted
        for seg in self._segments:
            seg.delete()
        self.remove_deleted_files(force=True)
        for path in self.directory.iterdir():
            path.unlink(missing_ok=True)
        self.directory.rmdir()
        self._closed = True

    def __repr__(self) -> str:
        return (
            f"Log({self.directory.name}, start={self.log_start_offset}, "
            f"hw={self.high_watermark}, leo={self._log_end_offset}, segments={len(self._segments)})"
        )


__all__ = [
    "FetchDataInfo",
    "Log",
    "LogAppendInfo",
    "TimestampAndOffset",
    "parse_partition_dir",
]
