"""A log flush taken out of the partition lock.

After gigabytes of writes an fsync can take a second; done under the partition
lock it would stall every produce and fetch of that partition. `Log.begin_flush`
(under the lock) decides what to fsync and returns a FlushJob, the caller runs it
without the lock, and `Log.end_flush` (under the lock again) moves the recovery
point, unless the log was truncated meanwhile: then the job's data may be gone
and the recovery point stays where it was, which is always safe (recovery only
re-reads more)."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from . import disk_and_clock
from .disk_and_clock import plain_perf_s
from .errors import KafkaStorageError, StorageError
from .producer_snapshot import fsync_snapshot
from .segment import LogSegment


@dataclass
class FlushJob:
    directory: Path | None  # None: segments in memory, no directory to fsync
    segments: list[LogSegment]
    target: int  # the recovery point once every segment is fsynced
    truncations: int  # the log's truncation count when the job was taken
    due_to_flush_ms: bool  # flush.ms was due (not only a roll's deferred flush)
    error: StorageError | None = None
    # Told the seconds a successful run took (the node's log flush histogram).
    observer: Callable[[float], None] | None = None
    # Producer snapshots written at rolls without fsync (Kafka's takeSnapshot(false)),
    # made durable before the segments, as Kafka's scheduled flush after a roll does.
    snapshots: list[Path] = field(default_factory=list)
    # The leader epoch cache's deferred write (storage/leader_epoch_cache.py), run first:
    # the recovery point must not pass an epoch entry that is not on disk.
    epoch_checkpoint: Callable[[], None] | None = None

    def run(self) -> bool:
        """fsync the segments and the directory; False (and `error`) if one failed.
        A segment deleted by a concurrent truncation or retention fails here too, as
        EBADF or a closed index, and end_flush then ignores the job."""
        started = plain_perf_s()
        try:
            if self.epoch_checkpoint is not None:
                self.epoch_checkpoint()
            for snapshot in self.snapshots:
                _fsync_if_present(snapshot)
            for seg in self.segments:
                seg.flush()
            if self.directory is not None:
                fd = os.open(self.directory, os.O_RDONLY)
                try:
                    disk_and_clock.disk_fsync(fd)
                finally:
                    os.close(fd)
        except StorageError as e:
            self.error = e
        except (OSError, ValueError) as e:
            self.error = KafkaStorageError(f"cannot flush {self.directory}: {e}")
            self.error.__cause__ = e  # the log manager tells a failed fsync from a race
        if self.error is None and self.observer is not None:
            self.observer(plain_perf_s() - started)
        return self.error is None


def _fsync_if_present(snapshot: Path) -> None:
    """fsync a producer snapshot; one deleted since (retention, a truncation) needs none."""
    try:
        fsync_snapshot(snapshot)
    except KafkaStorageError as e:
        if not isinstance(e.__cause__, FileNotFoundError):
            raise
