"""The replication simulator's log with production's storage under it: a
`seglog.storage.log.Log` in a directory on tmpfs, with the simulator's clock and
seeded randomness passed in, and the faults the simulator models applied to its files.

A power failure (`crash`) keeps what the page cache would have made durable: every byte
below the recovery point (the log's last fsync) and, when the seed says so, a random
prefix of the unflushed bytes after it — whole batches written back by chance and maybe
half a batch (a torn last write). The process's file handles are dropped without a
write (`Log.abandon`), and the restarted node opens the directory with production's
recovery (`Log.open(had_clean_shutdown=False)`): torn batches cut off, indexes rebuilt,
the leader-epoch checkpoint and producer state truncated to what survived. The HW comes
from the node's last HW checkpoint, as replica.high.watermark.checkpoint.interval.ms
leaves it.

The same surface as `MemoryLog` for the simulator's checks (`prefix`, `version`,
`flush`, `checkpoint_high_watermark`, `crash`), so one seed can run on either.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from seglog.sim.memory_log import MemoryLog
from seglog.storage.file_slice import FileSlice
from seglog.storage.leader_epoch_cache import LeaderEpochCache
from seglog.storage.log import Clock, FetchDataInfo, Log, LogAppendInfo, TimestampAndOffset
from seglog.storage.log_config import LogConfig
from seglog.storage.segment import LOG_SUFFIX, file_prefix

# Small segments and indexes: rolls, multi-segment reads and recovery across segments
# happen within a simulated run.
SIM_LOG_CONFIG = LogConfig(segment_bytes=2048, segment_index_bytes=4096, index_interval_bytes=256)


class DiskLog:
    def __init__(
        self,
        directory: Path,
        clock: Clock,
        rng: random.Random,
        config: LogConfig = SIM_LOG_CONFIG,
        *,
        log: Log | None = None,
        checkpointed_high_watermark: int = 0,
    ) -> None:
        self.name = directory.name
        self.directory = directory
        self.config = config
        self._clock = clock
        self._rng = rng
        self.log = log or Log.open(directory, config, clock=clock, rng=rng, time_ms=clock())
        self.checkpointed_high_watermark = checkpointed_high_watermark
        self.version = 0
        self.truncations = 0
        self.recovered_torn_write = False

    def _touch(self) -> None:
        self.version += 1
        MemoryLog.mutations += 1  # one counter of log changes for the checker

    # --- ReplicaLog ------------------------------------------------------------------

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def epoch_cache(self) -> LeaderEpochCache:
        return self.log.epoch_cache

    @property
    def recovery_point(self) -> int:
        return self.log.durable_offset

    def append_as_leader(
        self, data: bytes | bytearray | memoryview, leader_epoch: int, *, time_ms: int | None = None
    ) -> LogAppendInfo:
        info = self.log.append_as_leader(data, leader_epoch, time_ms=time_ms)
        self._touch()
        return info

    def append_as_follower(
        self, data: bytes | bytearray | memoryview, *, time_ms: int | None = None
    ) -> LogAppendInfo:
        info = self.log.append_as_follower(data, time_ms=time_ms)
        self._touch()
        return info

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        upper_bound: int | None = None,
        min_one_batch: bool = True,
    ) -> FetchDataInfo:
        return self.log.read(
            offset, max_bytes, upper_bound=upper_bound, min_one_batch=min_one_batch
        )

    def read_slice(
        self,
        offset: int,
        max_bytes: int,
        *,
        upper_bound: int | None = None,
        min_one_batch: bool = True,
    ) -> FileSlice:
        return self.log.read_slice(
            offset, max_bytes, upper_bound=upper_bound, min_one_batch=min_one_batch
        )

    def truncate_to(self, offset: int, *, time_ms: int | None = None) -> bool:
        truncated = self.log.truncate_to(offset, time_ms=time_ms)
        if truncated:
            self.truncations += 1
            self._touch()
        return truncated

    def truncate_fully_and_start_at(self, offset: int, *, time_ms: int | None = None) -> None:
        self.log.truncate_fully_and_start_at(offset, time_ms=time_ms)
        self.truncations += 1
        self._touch()

    def update_high_watermark(self, offset: int) -> int:
        before = self.log.high_watermark
        hw = self.log.update_high_watermark(offset)
        if hw != before:
            MemoryLog.mutations += 1
        return hw

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        moved = self.log.maybe_increment_log_start_offset(offset)
        if moved:
            self._touch()
        return moved

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        return self.log.offset_for_timestamp(timestamp)

    # --- the simulator's side --------------------------------------------------------

    def prefix(self, offset: int) -> bytes:
        """The bytes of every batch wholly below `offset` (on a batch boundary)."""
        out = bytearray()
        position = self.log.log_start_offset
        # Bounded: each read returns at least one batch and moves `position` on.
        while position < offset:
            chunk = self.log.read(position, 1 << 20, upper_bound=offset)
            if chunk.next_offset <= position:
                break
            out += chunk.records
            position = chunk.next_offset
        return bytes(out)

    def flush(self, up_to: int | None = None) -> None:
        self.log.flush(up_to)

    def checkpoint_high_watermark(self) -> None:
        self.checkpointed_high_watermark = self.log.high_watermark

    def crash(self) -> DiskLog:
        """Power failure, then the restarted node's open of the directory."""
        durable = self.log.durable_offset
        start = self.log.log_start_offset
        found = self.log.translate_offset(durable) if durable < self.log.log_end_offset else None
        cut: tuple[int, int] | None = None  # (segment base offset, byte position)
        if found is not None:
            segment, position, _header = found
            cut = (segment.base_offset, position)
        segments = [(s.base_offset, s.log_path, s.size) for s in self.log.segments]
        self.log.abandon()
        if cut is not None:
            # Unflushed bytes, in log order, after the durable cut.
            lost = [(base, path, size) for base, path, size in segments if base >= cut[0]]
            total = sum(size for _b, _p, size in lost) - cut[1]
            keep = 0 if self._rng.random() < 0.5 else self._rng.randint(0, total)
            for base, path, size in lost:
                begin = cut[1] if base == cut[0] else 0
                kept = min(size - begin, keep)
                keep -= kept
                if kept == 0 and base != cut[0]:
                    for suffix in (LOG_SUFFIX, ".index", ".timeindex", ".snapshot"):
                        Path(f"{self.directory / file_prefix(base)}{suffix}").unlink(
                            missing_ok=True
                        )
                else:
                    os.truncate(path, begin + kept)
        on_disk = sum(p.stat().st_size for p in self.directory.glob(f"*{LOG_SUFFIX}"))
        log = Log.open(
            self.directory,
            self.config,
            recovery_point=durable,
            # The node checkpoints the log start offset when it moves (as the memory
            # log keeps it); the HW only every so often.
            log_start_offset=start,
            high_watermark=self.checkpointed_high_watermark,
            had_clean_shutdown=False,
            clock=self._clock,
            rng=self._rng,
            time_ms=self._clock(),
        )
        hw = min(self.checkpointed_high_watermark, log.log_end_offset)
        survivor = DiskLog(
            self.directory,
            self._clock,
            self._rng,
            self.config,
            log=log,
            checkpointed_high_watermark=hw,
        )
        # Recovery cut bytes off: the write-back ended inside a batch (a torn write).
        survivor.recovered_torn_write = sum(s.size for s in log.segments) < on_disk
        return survivor

    def close(self) -> None:
        self.log.abandon()

    def __repr__(self) -> str:
        return (
            f"DiskLog({self.name}, start={self.log_start_offset}, hw={self.high_watermark}, "
            f"leo={self.log_end_offset}, flushed={self.recovery_point}, "
            f"epochs={[tuple(e) for e in self.epoch_cache.entries()]})"
        )
