"""An in-memory `ReplicaLog` for the replication simulator and unit tests.

The replication simulator's fast mode (`--storage memory`); by default it runs
production's `Log` (disk_log.py). tests/replication/test_log_equivalence.py holds the two
to the same offsets, HW, LEO, epochs, bytes and errors.

It stores real RecordBatch v2 bytes, contiguously, exactly as a segment file would hold
them: appends are checked by production's `storage/log_validator.py` (the leader's
offsets and leader epoch assigned in place, a follower's batches CRC-checked), the epoch
cache is storage's `LeaderEpochCache(None)` and idempotence is storage's
`ProducerStateManager` (never asked to write snapshots). A "flushed" prefix (the recovery
point) models the page cache: `crash()` returns the log a restarted node would find, with
the unflushed tail gone, the epoch cache as its synchronously written checkpoint left it
(then truncated to the new LEO, as the loader does, 6.1), and the HW from the last HW
checkpoint.

Not modelled: segments, indexes, retention, transactions' `.txnindex`, LogAppendTime.
"""

from __future__ import annotations

import bisect
from pathlib import Path

from seglog.storage.errors import OffsetOutOfRangeError, StorageError
from seglog.storage.file_slice import FileSlice
from seglog.storage.leader_epoch_cache import LeaderEpochCache
from seglog.storage.log import FetchDataInfo, LogAppendInfo, TimestampAndOffset
from seglog.storage.log_config import LogConfig
from seglog.storage.log_validator import validate_follower_append, validate_leader_append
from seglog.storage.producer_state import (
    AppendOrigin,
    ControlMarker,
    DuplicateBatch,
    ProducerStateManager,
)
from seglog.storage.record_batch import (
    BatchHeader,
    ControlType,
    control_record_type,
    decode_records,
)

# ProducerStateManager wants a directory for snapshots; we never take one, and it
# tolerates a missing directory when it looks for stale temporary files.
_NO_DIR = Path("/nonexistent/seglog-memory-log")


class MemoryLog:
    # Changes to any MemoryLog (data, HW, start offset): a checker can skip idle steps.
    mutations = 0

    def __init__(self, name: str = "memory-0", config: LogConfig | None = None) -> None:
        self.name = name
        self.config = config or LogConfig.defaults()
        self._buf = bytearray()
        self._headers: list[BatchHeader] = []
        self._positions: list[int] = []  # byte position of each batch in _buf
        self._last_offsets: list[int] = []  # for bisecting to the batch holding an offset
        # The base offset of the log's first segment, as production's Log has it: set
        # by a full truncation, kept by appends and truncations.
        self._data_start = 0
        self._log_end_offset = 0
        self.log_start_offset = 0
        self.high_watermark = 0
        self.recovery_point = 0  # everything below is "on disk"
        self.checkpointed_high_watermark = 0
        self.epoch_cache = LeaderEpochCache(None)
        self.producer_state = ProducerStateManager(_NO_DIR)
        # Bumped on every change of the data: lets a checker skip unchanged logs.
        self.version = 0
        self.truncations = 0

    # ------------------------------------------------------------------ queries

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    @property
    def latest_epoch(self) -> int | None:
        return self.epoch_cache.latest_epoch

    @property
    def batch_headers(self) -> list[BatchHeader]:
        return list(self._headers)

    def _index_of(self, offset: int) -> int:
        """Index of the first batch whose last offset is >= offset (len if none)."""
        return bisect.bisect_left(self._last_offsets, offset)

    def _position_of(self, offset: int) -> int:
        i = self._index_of(offset)
        return self._positions[i] if i < len(self._positions) else len(self._buf)

    def prefix(self, offset: int) -> memoryview:
        """The bytes of every batch wholly below `offset` (offset on a batch boundary)."""
        i = bisect.bisect_right(self._last_offsets, offset - 1)
        end = self._positions[i] if i < len(self._positions) else len(self._buf)
        return memoryview(self._buf)[:end]

    def batches(self) -> list[tuple[BatchHeader, bytes]]:
        out = []
        for h, p in zip(self._headers, self._positions, strict=True):
            out.append((h, bytes(self._buf[p : p + h.size])))
        return out

    # ------------------------------------------------------------------ appends

    def append_as_leader(
        self,
        data: bytes | bytearray | memoryview,
        leader_epoch: int,
        *,
        time_ms: int | None = None,
    ) -> LogAppendInfo:
        if time_ms is None:
            raise ValueError(f"append to {self.name} without the time: pass time_ms")
        buf, headers, log_append_time = validate_leader_append(
            data,
            self.config,
            first_offset=self._log_end_offset,
            leader_epoch=leader_epoch,
            now_ms=time_ms,
            topic=self.name,
            log_name=self.name,
        )
        prepared = self.producer_state.prepare_appends(headers, AppendOrigin.CLIENT)
        if isinstance(prepared, DuplicateBatch):
            return LogAppendInfo(
                first_offset=prepared.first_offset,
                last_offset=prepared.last_offset,
                max_timestamp=prepared.timestamp,
                offset_of_max_timestamp=prepared.last_offset,
                log_append_time=prepared.timestamp if log_append_time else -1,
                log_start_offset=self.log_start_offset,
                record_count=0,
                valid_bytes=0,
                duplicate=True,
            )
        info = self._append(buf, headers, time_ms if log_append_time else -1)
        self.producer_state.update(prepared)
        self.producer_state.update_map_end_offset(self._log_end_offset)
        return info

    def append_as_follower(
        self, data: bytes | bytearray | memoryview, *, time_ms: int | None = None
    ) -> LogAppendInfo:
        headers = validate_follower_append(data, self._log_end_offset, self.name)
        info = self._append(data, headers, -1)
        for h, p in zip(headers, self._positions[-len(headers) :], strict=True):
            if h.has_producer_id:
                self.producer_state.replay_batch(h, self._marker_of(p, h))
        self.producer_state.update_map_end_offset(self._log_end_offset)
        return info

    def _marker_of(self, pos: int, h: BatchHeader) -> ControlMarker | None:
        if not h.is_control:
            return None
        control = control_record_type(self._buf, pos, h)
        if control is None or control[0] not in (ControlType.ABORT, ControlType.COMMIT):
            return None
        return ControlMarker("COMMIT" if control[0] == ControlType.COMMIT else "ABORT", control[1])

    def _append(
        self, data: bytes | bytearray | memoryview, headers: list[BatchHeader], append_time: int
    ) -> LogAppendInfo:
        pos = len(self._buf)
        self._buf += data
        latest = self.epoch_cache.latest_epoch
        for h in headers:
            self._headers.append(h)
            self._positions.append(pos)
            self._last_offsets.append(h.last_offset)
            pos += h.size
            # 6.2: every append assigns (batch epoch, base offset).
            if h.partition_leader_epoch >= 0 and h.partition_leader_epoch != latest:
                self.epoch_cache.assign(h.partition_leader_epoch, h.base_offset)
                latest = self.epoch_cache.latest_epoch
        self._log_end_offset = headers[-1].next_offset
        self._touch()
        max_ts, offset_of_max = -1, headers[-1].last_offset
        for h in headers:
            if h.max_timestamp > max_ts:
                max_ts, offset_of_max = h.max_timestamp, h.last_offset
        return LogAppendInfo(
            first_offset=headers[0].base_offset,
            last_offset=headers[-1].last_offset,
            max_timestamp=max_ts,
            offset_of_max_timestamp=offset_of_max,
            log_append_time=append_time,
            log_start_offset=self.log_start_offset,
            record_count=sum(h.records_count for h in headers),
            valid_bytes=len(data),
        )

    # ------------------------------------------------------------------ reads

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        upper_bound: int | None = None,
        min_one_batch: bool = True,
    ) -> FetchDataInfo:
        if offset < self.log_start_offset or offset > self._log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is out of range for {self.name}: "
                f"[{self.log_start_offset}, {self._log_end_offset}]"
            )
        bound = (
            self._log_end_offset if upper_bound is None else min(upper_bound, self._log_end_offset)
        )
        if offset >= bound:
            return FetchDataInfo(b"", offset, offset)
        i = self._index_of(offset)
        start = end = self._positions[i] if i < len(self._positions) else len(self._buf)
        next_offset = offset
        while i < len(self._headers) and self._headers[i].base_offset < bound:
            h = self._headers[i]
            if end - start + h.size > max_bytes and not (min_one_batch and end == start):
                break
            end += h.size
            next_offset = h.next_offset
            i += 1
        return FetchDataInfo(bytes(self._buf[start:end]), offset, next_offset)

    def read_slice(
        self,
        offset: int,
        max_bytes: int,
        *,
        upper_bound: int | None = None,
        min_one_batch: bool = True,
    ) -> FileSlice:
        raise StorageError(
            f"{self.name} is a MemoryLog: it has no segment files for a zero-copy read"
        )

    def offset_for_timestamp(self, timestamp: int) -> TimestampAndOffset | None:
        for h, p in zip(self._headers, self._positions, strict=True):
            if h.max_timestamp < timestamp or h.last_offset < self.log_start_offset:
                continue
            for r in decode_records(self._buf, p, h):
                if r.timestamp >= timestamp and r.offset >= self.log_start_offset:
                    epoch = h.partition_leader_epoch
                    return TimestampAndOffset(r.timestamp, r.offset, epoch if epoch >= 0 else None)
        return None

    # ------------------------------------------------------------------ truncation

    def truncate_to(self, offset: int, *, time_ms: int | None = None) -> bool:
        """Remove everything at or after `offset`. An offset inside a batch removes that
        whole batch (the LEO becomes its base offset), as production's Log does."""
        if offset < 0:
            raise ValueError(f"cannot truncate {self.name} to negative offset {offset}")
        if offset >= self._log_end_offset:
            self.epoch_cache.truncate_from_end(self._log_end_offset)
            return False
        if offset < self._data_start:
            self.truncate_fully_and_start_at(offset)
            return True
        i = self._index_of(offset)
        new_leo = self._headers[i].base_offset if i < len(self._headers) else offset
        if i < len(self._headers):
            del self._buf[self._positions[i] :]
            del self._headers[i:]
            del self._positions[i:]
            del self._last_offsets[i:]
        self._log_end_offset = new_leo
        self.epoch_cache.truncate_from_end(new_leo)
        self.log_start_offset = min(self.log_start_offset, new_leo)
        self.recovery_point = min(self.recovery_point, new_leo)
        self.high_watermark = min(self.high_watermark, new_leo)
        self._rebuild_producer_state()
        self._touch()
        self.truncations += 1
        return True

    def truncate_fully_and_start_at(self, offset: int, *, time_ms: int | None = None) -> None:
        self._buf = bytearray()
        self._headers.clear()
        self._positions.clear()
        self._last_offsets.clear()
        self._data_start = offset
        self._log_end_offset = offset
        self.log_start_offset = offset
        self.recovery_point = offset
        self.high_watermark = offset
        self.epoch_cache.clear()
        self._rebuild_producer_state()
        self._touch()
        self.truncations += 1

    def _rebuild_producer_state(self) -> None:
        """Replay the whole retained log (5.4 without snapshots: same resulting state,
        except that up to 5 batches per producer are remembered rather than 1)."""
        self.producer_state = ProducerStateManager(_NO_DIR)
        self.producer_state.update_map_end_offset(self._data_start)
        for h, p in zip(self._headers, self._positions, strict=True):
            if h.has_producer_id:
                self.producer_state.replay_batch(h, self._marker_of(p, h))
        self.producer_state.update_map_end_offset(self._log_end_offset)

    # ------------------------------------------------------------------ HW, start offset

    def update_high_watermark(self, offset: int) -> int:
        hw = min(max(offset, self.log_start_offset), self._log_end_offset)
        if hw != self.high_watermark:
            self.high_watermark = hw
            MemoryLog.mutations += 1
        return hw

    def _touch(self) -> None:
        self.version += 1
        MemoryLog.mutations += 1

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        if offset <= self.log_start_offset:
            return False
        if offset > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot move the log start offset of {self.name} to {offset}, beyond the "
                f"high watermark {self.high_watermark}"
            )
        self.log_start_offset = offset
        self.epoch_cache.truncate_from_start(offset)
        self._touch()
        return True

    # ------------------------------------------------------------------ durability

    def flush(self, up_to: int | None = None) -> None:
        target = self._log_end_offset if up_to is None else min(up_to, self._log_end_offset)
        self.recovery_point = max(self.recovery_point, target)

    def checkpoint_high_watermark(self) -> None:
        """replica.high.watermark.checkpoint.interval.ms: what a restart will find."""
        self.checkpointed_high_watermark = self.high_watermark

    def crash(self) -> MemoryLog:
        """The log a node finds after losing power: batches wholly below the recovery
        point survive; the epoch cache (written synchronously) is re-truncated to the new
        LEO and log start offset as the loader does (6.1); HW from its checkpoint."""
        survivor = MemoryLog(self.name, self.config)
        keep = bisect.bisect_right(self._last_offsets, self.recovery_point - 1)
        survivor._data_start = self._data_start
        survivor._log_end_offset = self._data_start
        survivor.log_start_offset = self.log_start_offset
        if keep:
            end = self._positions[keep] if keep < len(self._positions) else len(self._buf)
            survivor._buf = bytearray(self._buf[:end])
            survivor._headers = list(self._headers[:keep])
            survivor._positions = list(self._positions[:keep])
            survivor._last_offsets = list(self._last_offsets[:keep])
            survivor._log_end_offset = self._headers[keep - 1].next_offset
        leo = survivor._log_end_offset
        survivor.log_start_offset = min(self.log_start_offset, leo)
        survivor.recovery_point = leo
        survivor.epoch_cache = self.epoch_cache.with_checkpoint(None)
        survivor.epoch_cache.truncate_from_end(leo)
        survivor.epoch_cache.truncate_from_start(survivor.log_start_offset)
        survivor.checkpointed_high_watermark = min(self.checkpointed_high_watermark, leo)
        survivor.high_watermark = max(
            survivor.log_start_offset, survivor.checkpointed_high_watermark
        )
        survivor._rebuild_producer_state()
        return survivor

    def __repr__(self) -> str:
        return (
            f"MemoryLog({self.name}, start={self.log_start_offset}, hw={self.high_watermark}, "
            f"leo={self._log_end_offset}, flushed={self.recovery_point}, "
            f"epochs={[tuple(e) for e in self.epoch_cache.entries()]})"
        )
