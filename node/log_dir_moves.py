"""Moving a replica between the node's log directories (AlterReplicaLogDirs), as Kafka's
ReplicaManager.alterReplicaLogDirs and its ReplicaAlterLogDirsThread do it:

- the destination must be one of `log.dirs` (else LOG_DIR_NOT_FOUND) and online (else
  KAFKA_STORAGE_ERROR); a partition this node does not host yet is REPLICA_NOT_AVAILABLE,
  and its destination is remembered so the log is created there when it arrives;
- a future replica, `<topic>-<partition>.<id>-future` in the destination, copies the
  current log from its log start offset (whole batches, verbatim: offsets, leader
  epochs and producer state as they are) while the replica goes on serving from the
  current log; the log cleaner leaves the partition alone meanwhile;
- once it has caught up, under the partition's lock: the last batches are copied, the
  future log is closed (flushed, producer snapshot) and renamed to `<topic>-<partition>`,
  opened again, given the high watermark, and swapped in for the current log, which is
  deleted. Reads and appends after the swap go to the new files.

A move the node does not finish (a restart) is abandoned: its future directory is
removed at start and the replica stays where it was, so the request is sent again.
One thread moves one replica at a time (Kafka's num.replica.alter.log.dirs.threads
defaults to the number of log dirs; here moves queue)."""

from __future__ import annotations

import shutil
import threading
import uuid
from collections import deque
from collections.abc import Callable
from pathlib import Path

from seglog.storage.errors import StorageError
from seglog.storage.log import Log
from seglog.storage.log_dir import LogDirectory

from .event_log import EventLogger
from .hosted_partition import HostedPartition
from .log_manager import LogManager, PartitionLog

TopicPartition = tuple[str, int]
_log = EventLogger("log_dir_moves")
COPY_BYTES = 1 << 20  # copied per step, outside the partition's lock
FUTURE_SUFFIX = "-future"


def remove_abandoned_futures(dirs: list[LogDirectory]) -> None:
    """Future replicas a restart interrupted: their moves are not resumed."""
    for d in dirs:
        for entry in d.path.glob(f"*{FUTURE_SUFFIX}"):
            if entry.is_dir():
                _log.info("future_replica_removed", dir=str(entry))
                shutil.rmtree(entry, ignore_errors=True)


class LogDirMoves:
    def __init__(
        self, log_manager: LogManager, hosted: Callable[[TopicPartition], HostedPartition | None]
    ) -> None:
        self.log_manager = log_manager
        self.hosted = hosted
        self._lock = threading.Lock()
        self._queue: deque[TopicPartition] = deque()
        self.moving: dict[TopicPartition, LogDirectory] = {}  # queued or copying
        self.futures: dict[TopicPartition, Log] = {}  # the future replica being filled
        self._wake = threading.Condition(self._lock)
        self._stopped = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        remove_abandoned_futures(self.log_manager.dirs)
        self._thread = threading.Thread(
            target=self._run, name="replica-alter-log-dirs", daemon=True
        )
        self._thread.start()

    def shutdown(self) -> None:
        with self._lock:
            self._stopped = True
            self._wake.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=10)  # a copy step ends; the move is abandoned

    def directory(self, path: str) -> LogDirectory | None:
        wanted = Path(path).resolve()
        for d in self.log_manager.dirs:
            if d.path.resolve() == wanted:
                return d
        return None

    def alter(self, tp: TopicPartition, path: str) -> str:
        """Kafka's error name for moving `tp` to `path` (NONE: moving, or there)."""
        dest = self.directory(path)
        if dest is None:
            return "LOG_DIR_NOT_FOUND"
        if dest.offline_reason is not None:
            return "KAFKA_STORAGE_ERROR"
        plog = self.log_manager.get(tp)
        if plog is None or self.hosted(tp) is None:
            self.log_manager.preferred_dirs[tp] = dest
            return "REPLICA_NOT_AVAILABLE"
        with self._lock:
            if self.moving.get(tp) is dest:
                return "NONE"
            if plog.directory is dest:
                self.moving.pop(tp, None)  # a move elsewhere, if queued, is cancelled
                return "NONE"
            queued = tp in self.moving
            self.moving[tp] = dest
            if not queued:
                self._queue.append(tp)
            self._wake.notify_all()
        _log.info("replica_move_requested", topic=tp[0], partition=tp[1], dir=str(dest.path))
        return "NONE"

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._queue and not self._stopped:
                    self._wake.wait()
                if self._stopped:
                    return
                tp = self._queue.popleft()
                dest = self.moving.get(tp)
            if dest is None:
                continue
            try:
                self._move(tp, dest)
            except (StorageError, OSError) as e:
                _log.error("replica_move_failed", topic=tp[0], partition=tp[1], error=str(e))
            finally:
                with self._lock:
                    if self.moving.get(tp) is dest:
                        del self.moving[tp]
                    self.futures.pop(tp, None)

    def _still_wanted(self, tp: TopicPartition, dest: LogDirectory) -> bool:
        with self._lock:
            return self.moving.get(tp) is dest and not self._stopped

    def _move(self, tp: TopicPartition, dest: LogDirectory) -> None:
        plog = self.log_manager.get(tp)
        if plog is None or plog.directory is dest:
            return
        self.log_manager.cleaner.abort_and_wait(tp)
        future_dir = dest.path / f"{tp[0]}-{tp[1]}.{uuid.uuid4().hex}{FUTURE_SUFFIX}"
        with plog.lock:
            source = plog.log
            future = Log.open(
                future_dir,
                source.config,
                topic_id=source.topic_id,
                clock=dest.clock,
                rng=dest.rng,
                topic_partition=tp,
            )
            future.truncate_fully_and_start_at(source.log_start_offset)
        with self._lock:
            self.futures[tp] = future
        try:
            # Bounded by the source's growth: each pass copies what was there; the
            # reads hold the partition's lock, the writes to the future log do not.
            while self._still_wanted(tp, dest):
                with plog.lock:
                    if plog.log is not source or self.log_manager.get(tp) is not plog:
                        raise StorageError(f"{tp[0]}-{tp[1]} changed during its move")
                    if future.log_end_offset >= source.log_end_offset:
                        self._swap(tp, plog, dest, future, future_dir)
                        return
                    data = source.read(
                        future.log_end_offset, COPY_BYTES, upper_bound=source.log_end_offset
                    ).records
                    start = source.log_start_offset
                if data:
                    future.append_as_follower(data)
                else:  # below the source's start: retention or DeleteRecords moved it
                    future.truncate_fully_and_start_at(start)
            future.delete()
        except BaseException:
            if not future.closed:
                future.delete()
            shutil.rmtree(future_dir, ignore_errors=True)
            raise

    def _swap(
        self,
        tp: TopicPartition,
        plog: PartitionLog,
        dest: LogDirectory,
        future: Log,
        future_dir: Path,
    ) -> None:
        """Under the partition's lock, the future replica caught up: it takes over."""
        source, source_dir = plog.log, plog.directory
        if future.log_start_offset < source.log_start_offset:
            future.maybe_increment_log_start_offset(source.log_start_offset)
        end, start, hw = future.log_end_offset, future.log_start_offset, source.high_watermark
        future.close()
        final = dest.path / f"{tp[0]}-{tp[1]}"
        future_dir.rename(final)
        moved = Log.open(
            final,
            source.config,
            recovery_point=end,
            log_start_offset=start,
            high_watermark=hw,
            had_clean_shutdown=True,
            clock=dest.clock,
            rng=dest.rng,
        )
        moved.flush_observer = source.flush_observer
        # The node's deferrals carry over (node/replica_manager.py sets them).
        moved.defer_message_flushes = source.defer_message_flushes
        moved.epoch_cache.defer_writes = source.epoch_cache.defer_writes
        dest.logs[tp] = dest.adopt(moved)
        source_dir.logs.pop(tp, None)
        plog.log, plog.directory = moved, dest
        hp = self.hosted(tp)
        if hp is not None:
            hp.replica.replace_log(moved)
        source.delete()
        _log.info(
            "replica_moved",
            topic=tp[0],
            partition=tp[1],
            dir=str(dest.path),
            log_end_offset=end,
        )
