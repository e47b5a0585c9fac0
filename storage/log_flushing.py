"""A partition log's flushing (a part of storage/log.py's Log): the recovery point,
the flushes a roll or `flush.ms` defers to the node's flush scheduler (storage/
local_log.py's pending flush, run as a FlushJob outside the partition lock), and
`flush.messages` — inline, or, with `defer_message_flushes` (a node on an event loop),
asked of the node's flush pool while the replica holds what must wait for it."""

from __future__ import annotations

from collections.abc import Callable

from .flush_job import FlushJob
from .local_log import LocalLog


class LogFlushing:
    # Set by Log.__init__.
    _local: LocalLog
    clock: Callable[[], int]
    defer_message_flushes: bool
    durability_demanded: int

    def _count_unflushed(self, messages: int) -> None:
        local = self._local
        local.unflushed_messages += messages
        if local.unflushed_messages >= local.config.flush_messages:
            if self.defer_message_flushes:
                local.defer_flush(local.log_end_offset, self.clock())
                self.durability_demanded = local.log_end_offset
            else:
                self.flush()

    @property
    def recovery_point(self) -> int:
        """Offset below which every segment is fsynced (completes a pending flush)."""
        local = self._local
        if local.pending_flush is not None:
            local.flush_pending()
        return local.recovery_point

    @property
    def durable_offset(self) -> int:
        """Offset below which the data is fsynced now — what a crash keeps — without
        running a pending flush (the recovery point's reader runs it)."""
        return self._local.recovery_point

    def flush_pending(self) -> None:
        """Run the flush the last roll(s) deferred, if any."""
        self._local.flush_pending()

    @property
    def awaits_flush(self) -> bool:
        """Deferred flush.messages: data the rule says must be fsynced before it is
        acknowledged (or, on a follower, fetched past) is not yet."""
        local = self._local
        return local.recovery_point < min(self.durability_demanded, local.log_end_offset)

    def begin_demanded_flush(self, *, time_ms: int | None = None) -> FlushJob | None:
        """begin_flush, covering at least what flush.messages demands (a job that
        raced a truncation was dropped, so it is asked for again here)."""
        local = self._local
        target = min(self.durability_demanded, local.log_end_offset)
        if target > max(local.recovery_point, local.pending_flush or 0):
            local.pending_flush = target
        return self.begin_flush(time_ms=time_ms)

    def flush(self, up_to: int | None = None, *, time_ms: int | None = None) -> None:
        """fsync every segment holding data below `up_to` (default: the LEO) and move
        the recovery point there."""
        self._local.flush(up_to, self.clock, time_ms)

    def begin_flush(self, *, time_ms: int | None = None) -> FlushJob | None:
        """The flush scheduler's share, to run outside the partition lock (see
        FlushJob): a roll's deferred flush, or the whole log when flush.ms is due.
        None when nothing is to flush. Finish with end_flush."""
        return self._local.begin_flush(self.clock() if time_ms is None else time_ms)

    def wants_flush(self, *, time_ms: int) -> bool:
        """Whether begin_flush may have work; safe to call without the partition lock."""
        return self._local.wants_flush(time_ms)

    def end_flush(self, job: FlushJob) -> None:
        """Under the partition lock, after job.run(): the recovery point moves to the
        job's target if it succeeded; a failed job's flush is pending again."""
        self._local.end_flush(job)

    def flush_if_due(self, *, time_ms: int | None = None) -> bool:
        """flush.ms, and a roll's deferred flush, inline: True if flush.ms was due."""
        return self._local.flush_if_due(self.clock() if time_ms is None else time_ms)
