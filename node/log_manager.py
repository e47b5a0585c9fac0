"""The node's log manager: every log directory of `log.dirs`, the partitions in them,
and the background duties Kafka's LogManager runs (retention, delayed file
deletion, flush, checkpoints). Each partition has a lock; every caller that
touches a Log holds it."""

from __future__ import annotations

import errno
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from seglog.storage.disk_and_clock import plain_monotonic_s
from seglog.storage.errors import KafkaStorageError, LogDirFullError, StorageError
from seglog.storage.flush_job import FlushJob
from seglog.storage.log import Clock, Log
from seglog.storage.log_config import BrokerLogSettings, LogConfig
from seglog.storage.log_dir import LogDirectory

from .event_log import EventLogger
from .log_cleaner_manager import LogCleanerManager

TopicPartition = tuple[str, int]
_log = EventLogger("log_manager")
# The background loop wakes at least this often; each duty keeps its own interval.
TICK_S = 0.5


@dataclass
class PartitionLog:
    log: Log
    directory: LogDirectory
    lock: threading.RLock = field(default_factory=threading.RLock)


class LogManager:
    def __init__(
        self,
        log_dirs: tuple[Path, ...],
        defaults: LogConfig,
        settings: BrokerLogSettings,
        *,
        clock: Clock,
        rng: random.Random,
    ) -> None:
        """`clock` (ms) and `rng` are handed to every log directory and through it to
        every log (segment.jitter.ms, time-based rolls and retention): inputs, as
        Kafka's Time, so a simulation can drive them."""
        self.defaults = defaults
        self.settings = settings
        self.hw_interval_ms = settings.replica_high_watermark_checkpoint_interval_ms
        self.clock = clock
        self.dirs = [
            LogDirectory(
                p,
                clock=clock,
                rng=rng,
                producer_id_expiration_ms=settings.producer_id_expiration_ms,
                transaction_verification_enabled=settings.transaction_partition_verification_enable,
            )
            for p in log_dirs
        ]
        for d in self.dirs:
            d.on_offline = self._dir_offline
            d.on_full = self._dir_full
        # Called (once per directory, on a thread of its own: the failure is seen
        # under some partition's lock) when a directory goes offline.
        self.on_dir_offline: Callable[[Path], None] | None = None
        # Called (once) when no log directory is left online: the node halts (Kafka's
        # LogDirFailureHandler with a single log dir), so its leaderships move.
        self.on_all_dirs_offline: Callable[[str], None] | None = None
        # Told the partitions whose log start offset retention moved (a fetch session
        # reads only its changed partitions: node/session_fetch.py).
        self.on_log_start_moved: Callable[[list[TopicPartition]], None] | None = None
        # Told the seconds of every log flush (the node's log flush histogram); set
        # before load(): every log loaded or created gets it.
        self.flush_observer: Callable[[float], None] | None = None
        self._full_logged_ms: dict[Path, int] = {}
        self._partitions: dict[TopicPartition, PartitionLog] = {}
        # AlterReplicaLogDirs for a partition not hosted yet: where it is to be created.
        self.preferred_dirs: dict[TopicPartition, LogDirectory] = {}
        self._lock = threading.Lock()  # guards the partition map, not the logs
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.had_clean_shutdown = True
        # Compacted topics' cleaner threads (log.cleaner.*), started with the manager.
        self.cleaner = LogCleanerManager(self.partitions, settings)

    # --- log directory failures ------------------------------------------------------

    def _dir_offline(self, d: LogDirectory, e: KafkaStorageError) -> None:
        with self._lock:
            partitions = sorted(tp for tp, p in self._partitions.items() if p.directory is d)
            online = [x for x in self.dirs if x.offline_reason is None]
        _log.error(
            "log_dir_failed",
            dir=str(d.path),
            error=str(e),
            partitions=len(partitions),
            online_dirs=len(online),
        )
        listener = self.on_dir_offline
        if listener is not None:
            threading.Thread(
                target=listener, args=(d.path,), name="log-dir-failure", daemon=True
            ).start()
        if not online and self.on_all_dirs_offline is not None:
            self.on_all_dirs_offline(f"every log directory is offline (last: {d.path}: {e})")

    def _dir_full(self, d: LogDirectory, e: LogDirFullError) -> None:
        # At most one event a second per directory: a full disk fails every produce.
        t = self.clock()
        if t - self._full_logged_ms.get(d.path, -(1 << 62)) >= 1_000:
            self._full_logged_ms[d.path] = t
            _log.warning("log_dir_full", dir=str(d.path), error=str(e))

    def offline_dirs(self) -> list[Path]:
        return [d.path for d in self.dirs if d.offline_reason is not None]

    # --- start-up ------------------------------------------------------------------

    def load(self, topic_configs: dict[str, LogConfig] | None = None) -> None:
        started = plain_monotonic_s()
        for d in self.dirs:
            logs = d.load(self.defaults, topic_configs)
            self.had_clean_shutdown &= d.had_clean_shutdown
            for tp, log in logs.items():
                log.flush_observer = self.flush_observer
                self._partitions[tp] = PartitionLog(log, d)
        _log.info(
            "logs_loaded",
            partitions=len(self._partitions),
            clean_shutdown=self.had_clean_shutdown,
            seconds=round(plain_monotonic_s() - started, 3),
        )

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="log-manager", daemon=True)
        self._thread.start()
        self.cleaner.start()

    # --- partitions ----------------------------------------------------------------

    def get(self, tp: TopicPartition) -> PartitionLog | None:
        with self._lock:
            return self._partitions.get(tp)

    def partitions(self) -> dict[TopicPartition, PartitionLog]:
        with self._lock:
            return dict(self._partitions)

    def get_or_create(
        self, tp: TopicPartition, config: LogConfig, topic_id: str | None = None
    ) -> PartitionLog:
        with self._lock:
            existing = self._partitions.get(tp)
            stale = (
                existing is not None
                and topic_id is not None
                and existing.log.topic_id is not None
                and existing.log.topic_id != topic_id
            )
            if existing is not None and not stale:
                return existing
        if stale:
            # The topic was deleted and created again under the same name while this
            # node missed the deletion (it was down, or replays both at once): the old
            # incarnation's data must not pass for the new topic's (Kafka's topic ids).
            assert existing is not None
            _log.info(
                "stale_log_deleted",
                topic=tp[0],
                partition=tp[1],
                topic_id=existing.log.topic_id,
                new_topic_id=topic_id,
            )
            self.delete(tp)
        with self._lock:
            existing = self._partitions.get(tp)
            if existing is not None:
                return existing
            # Kafka places a new partition in the directory an AlterReplicaLogDirs
            # named, else in the online directory holding the fewest.
            online = [d for d in self.dirs if d.offline_reason is None] or self.dirs
            preferred = self.preferred_dirs.pop(tp, None)
            directory = preferred if preferred in online else min(online, key=lambda d: len(d.logs))
            log = directory.create_log(tp[0], tp[1], config, topic_id=topic_id)
            log.flush_observer = self.flush_observer
            plog = self._partitions[tp] = PartitionLog(log, directory)
        _log.info("log_created", topic=tp[0], partition=tp[1], dir=str(directory.path))
        return plog

    def delete(self, tp: TopicPartition) -> None:
        with self._lock:
            plog = self._partitions.pop(tp, None)
        if plog is None:
            return
        self.cleaner.abort_and_wait(tp)
        with plog.lock:
            plog.directory.delete_log(*tp)
        _log.info("log_deleted", topic=tp[0], partition=tp[1])

    def update_config(self, tp: TopicPartition, config: LogConfig) -> None:
        plog = self.get(tp)
        if plog is not None:
            with plog.lock:
                plog.log.config = config

    # --- background duties -----------------------------------------------------------

    def _run(self) -> None:
        s = self.settings
        now = self.clock()
        due: dict[str, float] = {
            "retention": now + s.log_initial_task_delay_ms,
            "flush": now,
            "recovery_checkpoint": now + s.log_flush_offset_checkpoint_interval_ms,
            "hw_checkpoint": now + self.hw_interval_ms,
            "producer_expiration": now + s.producer_id_expiration_check_interval_ms,
        }
        intervals: dict[str, int] = {
            "retention": s.log_retention_check_interval_ms,
            "flush": min(s.log_flush_scheduler_interval_ms, 1_000),
            "recovery_checkpoint": s.log_flush_offset_checkpoint_interval_ms,
            "hw_checkpoint": self.hw_interval_ms,
            "producer_expiration": s.producer_id_expiration_check_interval_ms,
        }
        duties: dict[str, Callable[[int], None]] = {
            "retention": self.run_retention,
            "flush": self._flush_due,
            "recovery_checkpoint": self.checkpoint,
            "hw_checkpoint": self.checkpoint,
            "producer_expiration": self.remove_expired_producers,
        }
        while not self._stop.wait(TICK_S):
            t = self.clock()
            for name, at in due.items():
                if t < at:
                    continue
                due[name] = t + intervals[name]
                try:
                    duties[name](t)
                except StorageError:
                    _log.error("background_duty_failed", exc=True, duty=name)
            self._remove_deleted(t)
            self.write_epoch_checkpoints()

    def run_retention(self, t: int) -> int:
        deleted = 0
        moved = []
        for tp, plog in self.partitions().items():
            with plog.lock:
                n = plog.log.delete_old_segments(time_ms=t)
            if n:
                deleted += n
                moved.append(tp)
                _log.info(
                    "segments_deleted",
                    topic=tp[0],
                    partition=tp[1],
                    segments=n,
                    log_start_offset=plog.log.log_start_offset,
                )
        if moved and self.on_log_start_moved is not None:
            self.on_log_start_moved(moved)
        return deleted

    def remove_expired_producers(self, t: int) -> None:
        for tp, plog in self.partitions().items():
            with plog.lock:
                expired = plog.log.remove_expired_producers(time_ms=t)
            if expired:
                _log.info(
                    "producers_expired", topic=tp[0], partition=tp[1], producer_ids=expired[:20]
                )

    def _remove_deleted(self, t: int) -> None:
        # Twice a second: only logs with deletions pending take their lock.
        for plog in self.partitions().values():
            if not plog.log.has_pending_deletions:
                continue
            with plog.lock:
                plog.log.remove_deleted_files(time_ms=t)

    def write_epoch_checkpoints(self) -> None:
        """The leader epoch changes the event loop deferred (storage/leader_epoch_cache.py),
        written within a tick: fsyncs outside the partition locks, a failed write takes
        its directory offline."""
        for plog in self.partitions().values():
            if not plog.log.epoch_cache.has_unwritten or plog.directory.offline_reason:
                continue
            with plog.lock:
                write = plog.log.epoch_cache.take_unwritten()
            if write is None:
                continue
            try:
                write.run()
            except KafkaStorageError as e:
                _log.error("epoch_checkpoint_failed", error=str(e))
                plog.directory.report_io_error(e)

    def _flush_due(self, t: int) -> None:
        # The fsyncs run outside the partition lock (see FlushJob): produces and
        # fetches of the partition go on meanwhile.
        for tp, plog in self.partitions().items():
            if plog.directory.offline_reason is not None:
                continue  # nothing more is written there, nor made durable
            if not plog.log.wants_flush(time_ms=t):
                continue  # an idle log: no lock taken
            with plog.lock:
                job = plog.log.begin_flush(time_ms=t)
            if job is not None:
                self.run_flush(tp, plog, job)

    def run_flush(self, tp: TopicPartition, plog: PartitionLog, job: FlushJob) -> None:
        """A flush begun under the partition's lock: the fsyncs outside it, the end
        under it again; a failed fsync takes the directory offline."""
        job.run()
        with plog.lock:
            plog.log.end_flush(job)
            raced = job.truncations != plog.log.truncation_count
        if job.error is not None:
            _log.error("flush_failed", topic=tp[0], partition=tp[1], error=str(job.error))
            cause = job.error.__cause__
            # A segment deleted under the job (EBADF, a closed index) is a race
            # end_flush ignores; a failed fsync is the directory's failure.
            if (
                not raced
                and isinstance(cause, OSError)
                and cause.errno != errno.EBADF
                and isinstance(job.error, KafkaStorageError)
            ):
                plog.directory.report_io_error(job.error)

    def checkpoint(self, t: int | None = None) -> None:
        # Flush what rolls deferred first, outside the locks, so reading the
        # recovery points below seldom has to fsync under them.
        self._flush_due(self.clock() if t is None else t)
        for d in self.dirs:
            if d.offline_reason is not None:
                continue
            with self._lock:
                plogs = {tp: p for tp, p in self._partitions.items() if p.directory is d}
            # Hold every partition lock of the directory while reading its offsets
            # so the checkpoint sees one consistent state per log; write it (fsync)
            # after releasing them.
            for p in plogs.values():
                p.lock.acquire()
            try:
                state = d.checkpoint_state({tp: p.log for tp, p in plogs.items()})
            finally:
                for p in plogs.values():
                    p.lock.release()
            try:
                d.write_checkpoints(state)
            except KafkaStorageError as e:
                d.report_io_error(e)
                raise

    # --- shutdown ------------------------------------------------------------------------

    def shutdown(self, broker_epoch: int = -1) -> None:
        """Clean shutdown: snapshots, trimmed indexes, checkpoints, then the marker."""
        self._stop.set()
        self.cleaner.shutdown()
        if self._thread is not None:
            self._thread.join(timeout=10)
        for d in self.dirs:
            with self._lock:
                plogs = [p for p in self._partitions.values() if p.directory is d]
            for p in plogs:
                p.lock.acquire()
            try:
                d.close(broker_epoch)
            finally:
                for p in plogs:
                    p.lock.release()
        _log.info("logs_closed", partitions=len(self._partitions))
