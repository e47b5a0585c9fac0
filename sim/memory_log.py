"""The replication simulator's fast log (`--storage memory`) and the replica tests' log:
production's `Log` over a `LocalLog` of in-memory segments (memory_segment.py). Append
validation, offsets, the leader-epoch cache, producer state and the read rules are the
production ones; only where the batches are kept differs from disk_log.py's `DiskLog`.
tests/replication/test_log_equivalence.py holds the two to the same offsets, HW, LEO,
epochs, bytes and errors.

Producer state takes no snapshots (there is no directory): after a truncation or a
restart it is rebuilt by replaying the batches from the log start offset, which ends in
the same state. A "flushed" prefix (the recovery point) models the page cache:
`crash()` returns the log a restarted node would find, with the unflushed tail gone,
the epoch cache as its synchronously written checkpoint left it (then truncated to the
new LEO, as the loader does, 6.1), and the HW from the last HW checkpoint.

The `.txnindex` entries are held in memory and rebuilt by the same replay. Not
modelled: offset and time indexes, zero-copy reads (`read_slice` with
batches to send raises StorageError: no file to send them from).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import cast

from seglog.sim.memory_segment import MemorySegment
from seglog.sim.observed_log import ObservedLog
from seglog.storage.leader_epoch_cache import LeaderEpochCache
from seglog.storage.local_log import LocalLog
from seglog.storage.log import Log, LogAppendInfo
from seglog.storage.log_config import LogConfig
from seglog.storage.producer_state import AppendOrigin, ProducerStateManager
from seglog.storage.record_batch import BatchHeader
from seglog.storage.txn_verification import VerificationGuard

# What the log calls its directory in messages; nothing is ever read or written there
# (ProducerStateManager finds no snapshots in a missing directory).
_NO_DIR = Path("/nonexistent/seglog-memory-log")


class _UnsnapshottedProducerState(ProducerStateManager):
    """Producer state with nowhere to write snapshots: the log replays its batches."""

    def take_snapshot(self, sync: bool = True) -> Path | None:
        return None


def _memory_clock() -> int:
    # The simulators pass every append's time; what else reads the clock (segment
    # creation times) must not make a run depend on the wall clock.
    return 0


class MemoryLog(ObservedLog):
    def __init__(
        self,
        name: str = "memory-0",
        config: LogConfig | None = None,
        *,
        log: Log | None = None,
        checkpointed_high_watermark: int = 0,
    ) -> None:
        config = config or LogConfig.defaults()
        if log is None:
            log = _memory_log(name, config, [], LeaderEpochCache(None), 0, 0)
        super().__init__(name, config, log, checkpointed_high_watermark)

    def append_as_leader(
        self,
        data: bytes | bytearray | memoryview,
        leader_epoch: int,
        *,
        time_ms: int | None = None,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verification_guard: VerificationGuard | None = None,
    ) -> LogAppendInfo:
        if time_ms is None:
            raise ValueError(f"append to {self.name} without the time: pass time_ms")
        return super().append_as_leader(
            data,
            leader_epoch,
            time_ms=time_ms,
            origin=origin,
            verification_guard=verification_guard,
        )

    def _segments(self) -> list[MemorySegment]:
        return cast(list[MemorySegment], self.log.segments)

    @property
    def batch_headers(self) -> list[BatchHeader]:
        return [h for seg in self._segments() for _pos, _v, _p, h in seg.scan(validate=False)]

    def prefix(self, offset: int) -> bytes:
        """The bytes of every batch wholly below `offset` (on a batch boundary), from the
        first segment's base offset."""
        return b"".join(b for seg in self._segments() for b in seg.batches_below(offset))

    def crash(self) -> MemoryLog:
        """The log a node finds after losing power: batches wholly below the recovery
        point survive; the epoch cache (written synchronously) is re-truncated to the new
        LEO and log start offset as the loader does (6.1); HW from its checkpoint."""
        durable = self.log.durable_offset
        segments = self._segments()
        kept = [segments[0]] + [s for s in segments[1:] if s.base_offset < durable]
        log = _memory_log(
            self.name,
            self.config,
            [s.copy_below(durable) for s in kept],
            self.log.epoch_cache.with_checkpoint(None),
            self.log.log_start_offset,
            self.checkpointed_high_watermark,
        )
        hw = min(self.checkpointed_high_watermark, log.log_end_offset)
        return MemoryLog(self.name, self.config, log=log, checkpointed_high_watermark=hw)


def _memory_log(
    name: str,
    config: LogConfig,
    segments: list[MemorySegment],
    epoch_cache: LeaderEpochCache,
    log_start_offset: int,
    high_watermark: int,
) -> Log:
    """Production's Log over `segments` (none: an empty log at `log_start_offset`)."""
    # Roll jitter needs a generator; a fixed seed keeps a run reproducible.
    local = LocalLog(None, name, config, MemorySegment.factory, random.Random(0))
    for seg in segments:
        local.add_segment(seg)
    return Log.over(
        local,
        _NO_DIR / name,
        topic=name,
        epoch_cache=epoch_cache,
        producer_state=_UnsnapshottedProducerState(_NO_DIR),
        log_start_offset=log_start_offset,
        high_watermark=high_watermark,
        clock=_memory_clock,
    )
