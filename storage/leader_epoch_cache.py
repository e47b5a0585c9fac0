"""Per-partition leader epoch cache, Kafka's LeaderEpochFileCache (replication-rules 6.1-6.3).

An ordered list of ``(epoch, start_offset)``: ``start_offset`` is the first offset written in
``epoch``. Both columns strictly increase; this is checked after every change.

Persistence: every change is written to ``leader-epoch-checkpoint`` atomically (tmp + fsync
+ rename + dir fsync). By default synchronously, as Kafka writes an ``assign``. A node on an
event loop defers the writes (``defer_writes``): an fsync there would stall every partition
the loop serves, and a leader change across a thousand partitions makes a thousand. A
deferred change only marks the cache; the file is written by whoever makes the log durable
next — a FlushJob before it moves the recovery point, the node's log manager within half a
second, the log's close. A crash first loses nothing: recovery re-assigns the epoch of every
batch above the recovery point, and the recovery point never passes an entry not yet on disk:
a flush job, and a close, wait for a write another thread took (``durable_through``).
Kafka defers its truncations' writes the same way.

Loading contract: the cache is rebuilt from the checkpoint by replaying ``assign`` (as Kafka
does, which also drops any non-monotonic entries). Because in Kafka a truncation may be lost
in a crash (its flush is asynchronous), the log loader must always re-apply
``truncate_from_end(log_end_offset)`` and ``truncate_from_start(log_start_offset)`` after
constructing the cache; with our synchronous writes this is still required, e.g. for files
written by Kafka itself or when the log was truncated but the checkpoint write failed.

If a checkpoint write fails (KafkaStorageError) the in-memory state has already changed; as in
Kafka, the caller is expected to take the whole log dir offline.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable
from typing import NamedTuple

from .checkpoint_file import INT32_MAX, INT64_MAX, LeaderEpochCheckpointFile
from .errors import CheckpointError, KafkaStorageError

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


class LeaderEpochCache:
    """Epoch -> start offset map of one replica, mirrored in its checkpoint file.

    ``checkpoint=None`` gives a purely in-memory cache (e.g. for computing answers on a copy).
    Not thread-safe: the owning log serialises access.
    """

    def __init__(self, checkpoint: LeaderEpochCheckpointFile | None = None) -> None:
        self._checkpoint = checkpoint
        self._entries: list[EpochEntry] = []
        # Deferred writes (see the module's text): changes made, changes handed to a
        # write (under the owning log's lock), changes on disk (under _write_lock).
        self.defer_writes = False
        self._changes = 0
        self._taken = 0
        self._written = 0
        self._write_lock = threading.Lock()
        self._write_ended = threading.Condition(self._write_lock)
        if checkpoint is None:
            return
        for epoch, start_offset in checkpoint.read():
            if epoch < 0 or start_offset < 0:
                raise CheckpointError(
                    f"Invalid leader epoch entry ({epoch}, {start_offset}) "
                    f"in checkpoint file {checkpoint.path}"
                )
            self._assign(EpochEntry(epoch, start_offset))
        self._check_invariants()

    def with_checkpoint(self, checkpoint: LeaderEpochCheckpointFile | None) -> LeaderEpochCache:
        """A copy with the same entries backed by another file (e.g. after the partition dir
        was renamed); nothing is written."""
        copy = LeaderEpochCache(None)
        copy._entries = list(self._entries)
        copy._checkpoint = checkpoint
        copy.defer_writes = self.defer_writes
        if self._written != self._changes:
            copy._changes = 1  # a deferred change the old file never got: owed to the new
        return copy

    # ------------------------------------------------------------------ queries

    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def latest_entry(self) -> EpochEntry | None:
        return self._entries[-1] if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    @property
    def latest_epoch(self) -> int | None:
        return self._entries[-1].epoch if self._entries else None

    def epoch_entry(self, epoch: int) -> EpochEntry | None:
        i = bisect.bisect_left(self._epochs(), epoch)
        if i < len(self._entries) and self._entries[i].epoch == epoch:
            return self._entries[i]
        return None

    def previous_epoch(self, epoch: int) -> int | None:
        """The largest cached epoch strictly below ``epoch``."""
        i = bisect.bisect_left(self._epochs(), epoch)
        return self._entries[i - 1].epoch if i > 0 else None

    def next_epoch(self, epoch: int) -> int | None:
        """The smallest cached epoch strictly above ``epoch``."""
        i = bisect.bisect_right(self._epochs(), epoch)
        return self._entries[i].epoch if i < len(self._entries) else None

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch whose range contains ``offset`` (None if it precedes every entry).

        The latest epoch's range is open-ended: the LEO is not known here.
        """
        i = bisect.bisect_right([e.start_offset for e in self._entries], offset)
        return self._entries[i - 1].epoch if i > 0 else None

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """The OffsetsForLeaderEpoch answer ``(epoch, end_offset)`` (KIP-279).

        ``epoch`` is the largest cached epoch <= ``requested_epoch`` and ``end_offset`` the start
        of the next cached epoch, or the LEO for the latest epoch. ``(-1, -1)`` means undefined.
        """
        if requested_epoch == UNDEFINED_EPOCH:
            # A bootstrapping follower or one without epoch information.
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if self._entries and self._entries[-1].epoch == requested_epoch:
            # The leader's current epoch is still being written: it ends at the LEO.
            return requested_epoch, log_end_offset
        i = bisect.bisect_right(self._epochs(), requested_epoch)  # first epoch > requested
        if i == len(self._entries):
            # Above every cached epoch (cannot happen on a leader, which caches its own epoch).
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        higher = self._entries[i]
        if i == 0:
            # Older than everything we know: that data was deleted, so the requester should
            # resume from our earliest epoch's start. The requested epoch is echoed back.
            return requested_epoch, higher.start_offset
        return self._entries[i - 1].epoch, higher.start_offset

    # ---------------------------------------------------------------- mutations

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` starts at ``start_offset``; True if the cache changed.

        No-op if the latest entry has the same epoch and starts at or before ``start_offset``.
        Otherwise every tail entry that conflicts (epoch >= ``epoch`` or start >=
        ``start_offset``) is removed before appending, and the checkpoint is written.
        """
        if not 0 <= epoch <= INT32_MAX or not 0 <= start_offset <= INT64_MAX:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        if not self._assign(EpochEntry(epoch, start_offset)):
            return False
        self._check_invariants()
        self._write()
        return True

    def truncate_from_end(self, end_offset: int) -> list[EpochEntry]:
        """Drop every entry starting at or after ``end_offset`` (the log was truncated to it).

        Returns the removed entries, oldest first. A negative ``end_offset`` is ignored.
        """
        if end_offset < 0 or not self._entries or self._entries[-1].start_offset < end_offset:
            return []
        keep = bisect.bisect_left([e.start_offset for e in self._entries], end_offset)
        removed = self._entries[keep:]
        del self._entries[keep:]
        self._check_invariants()
        self._write(if_dir_exists=True)
        return removed

    def truncate_from_start(self, start_offset: int) -> list[EpochEntry]:
        """Forget epochs wholly below ``start_offset`` (the log start offset moved up).

        Entries starting at or before ``start_offset`` are removed and the last of them is
        re-inserted starting at ``start_offset``, so the epoch covering that offset survives.
        Returns the removed entries (with their original start offsets).
        """
        cut = bisect.bisect_right([e.start_offset for e in self._entries], start_offset)
        if cut == 0:
            return []
        removed = self._entries[:cut]
        self._entries[:cut] = [EpochEntry(removed[-1].epoch, start_offset)]
        self._check_invariants()
        self._write(if_dir_exists=True)
        return removed

    def clear(self) -> None:
        """Delete all entries (e.g. after a legacy-format append) and write the empty file."""
        self._entries.clear()
        self._write()

    # ---------------------------------------------------------------- internals

    def _epochs(self) -> list[int]:
        return [e.epoch for e in self._entries]

    def _assign(self, entry: EpochEntry) -> bool:
        latest = self.latest_entry
        if (
            latest is not None
            and latest.epoch == entry.epoch
            and latest.start_offset <= entry.start_offset
        ):
            return False
        # Conflicting entries form a suffix because both columns increase.
        while self._entries and (
            self._entries[-1].epoch >= entry.epoch
            or self._entries[-1].start_offset >= entry.start_offset
        ):
            self._entries.pop()
        self._entries.append(entry)
        return True

    def _check_invariants(self) -> None:
        # Explicit raise rather than `assert`, so the check survives `python -O`.
        for prev, cur in zip(self._entries, self._entries[1:], strict=False):
            if not (prev.epoch < cur.epoch and prev.start_offset < cur.start_offset):
                raise AssertionError(f"leader epoch cache not monotonic: {self._entries}")
        if self._entries and (self._entries[0].epoch < 0 or self._entries[0].start_offset < 0):
            raise AssertionError(f"negative leader epoch entry: {self._entries[0]}")

    def _write(self, if_dir_exists: bool = False) -> None:
        if self._checkpoint is None:
            return
        if self.defer_writes:
            self._changes += 1
            return
        # Kafka's deferred flush after truncation skips a partition dir that has meanwhile been
        # deleted or renamed; the synchronous equivalent is to check the dir here.
        if if_dir_exists and not self._checkpoint.path.parent.is_dir():
            return
        self._checkpoint.write(self._entries)

    # ---------------------------------------------------------------- deferred writes

    @property
    def has_unwritten(self) -> bool:
        """A deferred change is not yet handed to a write."""
        return self._taken != self._changes

    def take_unwritten(self) -> EpochCheckpointWrite | None:
        """Under the owning log's lock: the entries a deferred write still owes the file
        (run the write outside the lock), or None."""
        if self._checkpoint is None or self._taken == self._changes:
            return None
        self._taken = self._changes
        return EpochCheckpointWrite(self, list(self._entries), self._changes)

    def write_unwritten(self) -> None:
        """Under the owning log's lock: every change so far on disk when this returns
        (a close), a write another thread took included."""
        self.durable_through(self._changes)

    def take_for_flush(self) -> Callable[[], None] | None:
        """Under the owning log's lock, for a flush job: what makes every change so far
        durable before the job moves the recovery point, or None when it is already."""
        if self._checkpoint is None or self._written == self._changes:
            return None
        version = self._changes
        return lambda: self.durable_through(version)

    def durable_through(self, version: int) -> None:
        """Return once the changes up to `version` are on disk: a write still owed is
        made here; one another thread took is waited for, and made again if it failed.
        Raises KafkaStorageError."""
        if self._checkpoint is None:
            return
        while True:
            write = self.take_unwritten()
            if write is not None:
                write.run()
            with self._write_ended:
                # Taken by another thread: its write ends (written, or owed again).
                while self._written < version and not self.has_unwritten:
                    self._write_ended.wait(0.05)
                if self._written >= version:
                    return

    def _write_taken(self, write: EpochCheckpointWrite) -> None:
        checkpoint = self._checkpoint
        assert checkpoint is not None
        with self._write_lock:
            if write.version <= self._written:
                return  # a later state is on disk already
            directory = checkpoint.path.parent
            try:
                checkpoint.write(write.entries)
            except KafkaStorageError:
                if directory.is_dir():
                    self._taken = self._written  # owed again, unless the directory went
                    self._write_ended.notify_all()
                    raise
            # Written, or its partition's directory is gone (deleted or moved): nothing
            # is owed to it (Kafka's writeIfDirExists).
            self._written = write.version
            self._write_ended.notify_all()


class EpochCheckpointWrite:
    """A leader epoch cache's entries as they were when taken, for a deferred write
    (tmp + fsync + rename + dir fsync) outside the owning log's lock. Raises
    KafkaStorageError when the write fails."""

    __slots__ = ("cache", "entries", "version")

    def __init__(self, cache: LeaderEpochCache, entries: list[EpochEntry], version: int) -> None:
        self.cache = cache
        self.entries = entries
        self.version = version

    def run(self) -> None:
        self.cache._write_taken(self)
