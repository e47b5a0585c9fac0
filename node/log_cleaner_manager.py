"""The log cleaner's threads (Kafka's LogCleaner / LogCleanerManager): `log.cleaner.threads`
threads, each with an offset map of `log.cleaner.dedupe.buffer.size / threads` bytes,
take the dirtiest compacted log in turn (`storage/cleaner_plan.py`), clean it one pass
at a time (`storage/log_cleaner.py`) and record where they stopped in each log
directory's `cleaner-offset-checkpoint`. With nothing to clean a thread waits
`log.cleaner.backoff.ms`. One throttle (`log.cleaner.io.max.bytes.per.second`) is
shared by all threads.

A log is cleaned by one thread at a time. The partition lock is taken only to look
at the log and to swap cleaned segments in, never while reading or writing data.
Deleting a partition aborts its pass and waits for it (`abort_and_wait`).
A quiet compacted log whose active segment is older than segment.ms (or
max.compaction.lag.ms) is rolled, so that its data becomes cleanable.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Protocol

from seglog.storage.cleaner_checkpoint import CleanerCheckpoint
from seglog.storage.cleaner_plan import (
    LogView,
    cleanable_range,
    compaction_delay_ms,
    idle_roll_due,
    select_filthiest,
)
from seglog.storage.cleaner_source import SourceGone
from seglog.storage.disk_and_clock import plain_monotonic_s, plain_wall_s
from seglog.storage.errors import StorageError
from seglog.storage.log import Log
from seglog.storage.log_cleaner import (
    CleanerAborted,
    CleanerConfig,
    CleanerError,
    CleanResult,
    clean_log,
    log_view,
)
from seglog.storage.log_config import BrokerLogSettings
from seglog.storage.offset_map import OffsetMap
from seglog.storage.throttler import Throttler

from .event_log import EventLogger

TopicPartition = tuple[str, int]
SCRAPE_LOCK_WAIT_S = 0.05  # a metrics scrape waits this long for a log's lock, at most
_log = EventLogger("log_cleaner")
ABORT_WAIT_S = 30.0


class _PartitionLog(Protocol):
    log: Log
    lock: threading.RLock

    @property
    def directory(self) -> _HasPath: ...


class _HasPath(Protocol):
    @property
    def path(self) -> Path: ...


@dataclass(frozen=True)
class CleanerLag:
    """How far behind the cleaner is, over every compacted log (Kafka's
    LogCleanerManager max-dirty-percent and time-since-last-run-ms, LogCleaner's
    max-compaction-delay-secs)."""

    max_dirty_percent: int  # the dirtiest log's dirty bytes share, 0..100
    max_compaction_delay_s: float  # the most overdue log's delay past max.compaction.lag.ms
    time_since_last_run_ms: int  # since a cleaner thread last looked for a log to clean


@dataclass(frozen=True)
class PassSummary:
    """The last pass over a partition, for operators (node logs, describe tools)."""

    finished_ms: int
    first_dirty: int
    checkpoint: int
    records_read: int
    records_kept: int
    bytes_read: int
    bytes_written: int
    segments_cleaned: int
    seconds: float


class LogCleanerManager:
    def __init__(
        self,
        partitions: Callable[[], Mapping[TopicPartition, _PartitionLog]],
        settings: BrokerLogSettings,
        *,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self._partitions = partitions
        self.settings = settings
        self.enabled = settings.log_cleaner_enable and settings.log_cleaner_threads > 0
        self.threads = settings.log_cleaner_threads if self.enabled else 0
        self.config = CleanerConfig(
            dedupe_buffer_size=settings.log_cleaner_dedupe_buffer_size // max(1, self.threads),
            io_buffer_size=settings.log_cleaner_io_buffer_size,
            io_buffer_load_factor=settings.log_cleaner_io_buffer_load_factor,
        )
        self.throttler = Throttler(settings.log_cleaner_io_max_bytes_per_second)
        self._clock = clock_ms or (lambda: int(plain_wall_s() * 1000))
        self._cond = threading.Condition()
        self._in_progress: dict[TopicPartition, threading.Event] = {}
        self._checkpoints: dict[Path, CleanerCheckpoint] = {}
        self._horizons: dict[TopicPartition, int] = {}
        self._truncations: dict[TopicPartition, int] = {}
        self.last_pass: dict[TopicPartition, PassSummary] = {}
        self._last_run_ms = self._clock()  # when a thread last chose (or found no) log
        self._stop = threading.Event()
        self._workers: list[threading.Thread] = []

    # --- lifecycle ----------------------------------------------------------------------

    def start(self) -> None:
        for i in range(self.threads):
            t = threading.Thread(
                target=self._run, args=(self._stop,), name=f"log-cleaner-{i}", daemon=True
            )
            t.start()
            self._workers.append(t)

    def shutdown(self) -> None:
        self._stop.set()
        with self._cond:
            for event in self._in_progress.values():
                event.set()
        for t in self._workers:
            t.join(timeout=ABORT_WAIT_S)
        self._workers.clear()

    def resize(self, threads: int) -> None:
        """log.cleaner.threads changed (a dynamic broker config): as Kafka's
        LogCleaner.reconfigure, stop the threads (passes in progress are aborted and
        done again later) and start the new number, each with its share of
        log.cleaner.dedupe.buffer.size."""
        if not self.enabled or threads == self.threads or threads < 1:
            return
        self.shutdown()
        self._stop = threading.Event()
        self.threads = threads
        self.config = replace(
            self.config, dedupe_buffer_size=self.settings.log_cleaner_dedupe_buffer_size // threads
        )
        self.start()
        _log.info("cleaner_threads_changed", threads=threads)

    def abort_and_wait(self, tp: TopicPartition) -> None:
        """Stop a pass over `tp` (its partition is being deleted) and forget the partition."""
        deadline = plain_monotonic_s() + ABORT_WAIT_S
        with self._cond:
            event = self._in_progress.get(tp)
            if event is not None:
                event.set()
            while tp in self._in_progress and plain_monotonic_s() < deadline:
                self._cond.wait(timeout=0.1)
            self._horizons.pop(tp, None)
            self._truncations.pop(tp, None)
            self.last_pass.pop(tp, None)
        for cp in list(self._checkpoints.values()):
            cp.remove(tp)

    # --- one round --------------------------------------------------------------------------

    def _checkpoint_for(self, directory: Path) -> CleanerCheckpoint:
        with self._cond:
            cp = self._checkpoints.get(directory)
            if cp is None:
                cp = self._checkpoints[directory] = CleanerCheckpoint(directory)
            return cp

    def _run(self, stop: threading.Event) -> None:
        offset_map: OffsetMap | None = None
        while not stop.is_set():
            if offset_map is None:
                offset_map = OffsetMap(
                    self.config.dedupe_buffer_size, self.config.io_buffer_load_factor
                )
            try:
                cleaned = self.clean_once(offset_map)
            except Exception:  # noqa: BLE001 - logged; the next round retries
                _log.error("cleaner_round_failed", exc=True)
                cleaned = False
            if not cleaned:
                stop.wait(self.settings.log_cleaner_backoff_ms / 1000)

    def roll_idle_logs(self, now: int) -> int:
        rolled = 0
        for plog in self._partitions().values():
            with plog.lock:
                log = plog.log
                if not log.config.compact or log.closed:
                    continue
                active = log.active_segment
                first_ts = active.rolling_base_timestamp()
                if idle_roll_due(
                    active_size=active.size,
                    first_timestamp=first_ts if first_ts is not None else -1,
                    created_ms=active.created_ms,
                    now_ms=now,
                    max_segment_ms=log.config.max_segment_ms,
                    roll_jitter_ms=active.roll_jitter_ms,
                    high_watermark=log.high_watermark,
                    log_end_offset=log.log_end_offset,
                ):
                    log.roll(time_ms=now)
                    rolled += 1
        return rolled

    def _views(self, now: int) -> list[tuple[TopicPartition, LogView]]:
        views = []
        for tp, plog in self._partitions().items():
            with self._cond:
                if tp in self._in_progress:
                    continue
            with plog.lock:
                log = plog.log
                if not log.config.compact or log.closed:
                    continue
                cp_file = self._checkpoint_for(plog.directory.path)
                checkpoint = cp_file.get(tp)
                # A log counts its truncations from when it was opened. One truncated
                # since the last pass (or since it was opened) may hold new data below
                # the checkpoint that no offset map has seen: clean it all again.
                if checkpoint is not None and self._truncations.get(tp, 0) != (
                    log.truncation_count
                ):
                    checkpoint = None
                    cp_file.remove(tp)
                    with self._cond:
                        self._truncations[tp] = log.truncation_count
                views.append((tp, log_view(log, checkpoint, self._horizons.get(tp))))
        return views

    def lag(self, now: int | None = None) -> CleanerLag:
        """The cleaner's lag now (read at scrape time; each log's lock is held only to
        take its view). Logs being cleaned count with the view they have now."""
        t = self._clock() if now is None else now
        dirty = 0.0
        delay_ms = 0
        for tp, plog in self._partitions().items():
            # A scrape never waits on a partition's lock: one held across a disk write
            # that does not return (issue 39) would hang every scrape, and with it the
            # metric saying the broker stalled. Such a log is left out of this answer.
            if not plog.log.config.compact or not plog.lock.acquire(timeout=SCRAPE_LOCK_WAIT_S):
                continue
            try:
                log = plog.log
                if not log.config.compact or log.closed:
                    continue
                checkpoint = self._checkpoint_for(plog.directory.path).get(tp)
                view = log_view(log, checkpoint, self._horizons.get(tp))
            finally:
                plog.lock.release()
            rng = cleanable_range(view, t)
            dirty = max(dirty, rng.ratio)
            delay_ms = max(delay_ms, compaction_delay_ms(view, rng, t))
        return CleanerLag(int(100 * dirty), delay_ms / 1000, max(0, t - self._last_run_ms))

    def clean_once(self, offset_map: OffsetMap, now: int | None = None) -> bool:
        """Roll quiet logs, then clean the dirtiest due log one pass; True if it did."""
        t = self._clock() if now is None else now
        self.roll_idle_logs(t)
        chosen = select_filthiest(self._views(t), t)
        self._last_run_ms = t
        if chosen is None:
            return False
        tp = chosen[0]
        assert isinstance(tp, tuple)
        plog = self._partitions().get(tp)
        if plog is None:
            return False
        abort = threading.Event()
        with self._cond:
            if tp in self._in_progress:
                return False
            self._in_progress[tp] = abort
        try:
            # LogManager.delete drops the partition before abort_and_wait: once
            # registered, either that call sees this pass or this check sees it gone.
            if self._partitions().get(tp) is not plog:
                return False
            return self._clean(tp, plog, offset_map, chosen[1].first_dirty, abort, t)
        finally:
            with self._cond:
                self._in_progress.pop(tp, None)
                self._cond.notify_all()

    def _clean(
        self,
        tp: TopicPartition,
        plog: _PartitionLog,
        offset_map: OffsetMap,
        first_dirty: int,
        abort: threading.Event,
        now: int,
    ) -> bool:
        log = plog.log
        try:
            result = clean_log(
                log,
                offset_map=offset_map,
                now_ms=now,
                checkpoint=first_dirty,
                horizon_due_ms=self._horizons.get(tp),
                config=self.config,
                locked=lambda: plog.lock,
                throttle=self.throttler.maybe_throttle,
                should_abort=lambda: abort.is_set() or self._stop.is_set(),
            )
        except (CleanerAborted, SourceGone) as e:
            _log.info("clean_abandoned", topic=tp[0], partition=tp[1], reason=str(e))
            return False
        except (CleanerError, StorageError, OSError) as e:
            _log.error("clean_failed", topic=tp[0], partition=tp[1], error=str(e))
            return False
        if result is None:
            return False
        self._record(tp, plog, result, now)
        return True

    def _record(self, tp: TopicPartition, plog: _PartitionLog, r: CleanResult, now: int) -> None:
        if not r.swapped:
            _log.info("clean_abandoned", topic=tp[0], partition=tp[1], reason="log changed")
            return
        truncations = r.truncations
        self._checkpoint_for(plog.directory.path).update(tp, r.map_end)
        summary = PassSummary(
            finished_ms=self._clock(),
            first_dirty=r.first_dirty,
            checkpoint=r.map_end,
            records_read=r.records_read,
            records_kept=r.records_kept,
            bytes_read=r.bytes_read,
            bytes_written=r.bytes_written,
            segments_cleaned=r.segments_cleaned,
            seconds=round(r.elapsed_s, 3),
        )
        with self._cond:
            self._truncations[tp] = truncations
            if r.horizon_due_ms is None:
                self._horizons.pop(tp, None)
            else:
                self._horizons[tp] = r.horizon_due_ms
            self.last_pass[tp] = summary
        # The event holds the summary's figures (`segments` its segments_cleaned).
        stats = asdict(summary)
        del stats["finished_ms"]
        stats["segments"] = stats.pop("segments_cleaned")
        _log.info(
            "log_cleaned",
            topic=tp[0],
            partition=tp[1],
            dirty_ratio=round(r.dirty_ratio, 3),
            **stats,
        )

__all__ = ["CleanerLag", "LogCleanerManager", "PassSummary"]
