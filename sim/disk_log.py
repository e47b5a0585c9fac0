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

The simulator's side (`prefix`, `version`, `flush`, `checkpoint_high_watermark`) is
observed_log.py's, shared with `MemoryLog`, so one seed can run on either.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from seglog.sim.observed_log import ObservedLog
from seglog.storage.log import Clock, Log
from seglog.storage.log_config import LogConfig
from seglog.storage.segment import LOG_SUFFIX, file_prefix

# Small segments and indexes: rolls, multi-segment reads and recovery across segments
# happen within a simulated run.
SIM_LOG_CONFIG = LogConfig(segment_bytes=2048, segment_index_bytes=4096, index_interval_bytes=256)


class DiskLog(ObservedLog):
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
        log = log or Log.open(directory, config, clock=clock, rng=rng, time_ms=clock())
        super().__init__(directory.name, config, log, checkpointed_high_watermark)
        self.directory = directory
        self._clock = clock
        self._rng = rng
        self.recovered_torn_write = False

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
