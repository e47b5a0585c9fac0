"""Production's `Log` as the simulators hold it: the `ReplicaLog` calls pass through,
every change of the data, HW or log start offset is counted (`version` per log,
`mutations` over all of them, so a checker can skip idle steps), and the node's HW
checkpoint is kept beside it for the restart after a power failure.

Two kinds: `DiskLog` (disk_log.py), segments in files on tmpfs, and `MemoryLog`
(memory_log.py), segments in memory. Each says what a power failure leaves (`crash`).
"""

from __future__ import annotations

from seglog.storage.leader_epoch_cache import LeaderEpochCache
from seglog.storage.log import Log, LogAppendInfo
from seglog.storage.log_config import LogConfig
from seglog.storage.producer_state import AppendOrigin, ControlMarker
from seglog.storage.txn_verification import VerificationGuard


class ObservedLog:
    # Changes to any simulated log (data, HW, start offset): a checker can skip idle steps.
    mutations = 0

    def __init__(
        self, name: str, config: LogConfig, log: Log, checkpointed_high_watermark: int
    ) -> None:
        self.name = name
        self.config = config
        self.log = log
        self.checkpointed_high_watermark = checkpointed_high_watermark
        # Bumped on every change of the data: lets a checker skip unchanged logs.
        self.version = 0
        self.truncations = 0
        # Reads change nothing: production's own methods.
        self.read = log.read
        self.read_slice = log.read_slice
        self.offset_for_timestamp = log.offset_for_timestamp
        self.collect_aborted_transactions = log.collect_aborted_transactions

    def _touch(self) -> None:
        self.version += 1
        ObservedLog.mutations += 1

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
    def last_stable_offset(self) -> int:
        return self.log.last_stable_offset

    @property
    def latest_epoch(self) -> int | None:
        return self.log.epoch_cache.latest_epoch

    @property
    def epoch_cache(self) -> LeaderEpochCache:
        return self.log.epoch_cache

    @property
    def durable_offset(self) -> int:
        return self.log.durable_offset

    @property
    def awaits_flush(self) -> bool:
        # The simulators flush inline (defer_message_flushes off): never waits.
        return self.log.awaits_flush

    @property
    def recovery_point(self) -> int:
        """What a power failure keeps at least: the last fsync's offset."""
        return self.log.durable_offset

    def append_as_leader(
        self,
        data: bytes | bytearray | memoryview,
        leader_epoch: int,
        *,
        time_ms: int | None = None,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        verification_guard: VerificationGuard | None = None,
    ) -> LogAppendInfo:
        info = self.log.append_as_leader(
            data,
            leader_epoch,
            time_ms=time_ms,
            origin=origin,
            verification_guard=verification_guard,
        )
        self._touch()
        return info

    def append_as_follower(
        self, data: bytes | bytearray | memoryview, *, time_ms: int | None = None
    ) -> LogAppendInfo:
        info = self.log.append_as_follower(data, time_ms=time_ms)
        self._touch()
        return info

    def append_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        marker: ControlMarker,
        leader_epoch: int,
        *,
        time_ms: int | None = None,
    ) -> LogAppendInfo:
        info = self.log.append_marker(
            producer_id, producer_epoch, marker, leader_epoch, time_ms=time_ms
        )
        self._touch()
        return info

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
            ObservedLog.mutations += 1
        return hw

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        moved = self.log.maybe_increment_log_start_offset(offset)
        if moved:
            self._touch()
        return moved

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
        """replica.high.watermark.checkpoint.interval.ms: what a restart will find."""
        self.checkpointed_high_watermark = self.log.high_watermark

    def close(self) -> None:
        self.log.abandon()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self.name}, start={self.log_start_offset}, "
            f"hw={self.high_watermark}, leo={self.log_end_offset}, "
            f"flushed={self.recovery_point}, "
            f"epochs={[tuple(e) for e in self.epoch_cache.entries()]})"
        )
