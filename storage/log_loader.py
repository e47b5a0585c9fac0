"""Opening a log's directory (Kafka's LogLoader): the clean-up of files a crash leaves
behind (`.deleted`, `.cleaned`, `.tmp`, orphan indexes), the commit of a finished
cleaner `.swap`, and recovery: every segment from the recovery point on (all of them
after an unclean shutdown) is validated batch by batch, a torn tail cut off with the
segments after it, indexes rebuilt, and the leader-epoch cache taken back to what
survived (the producer-state replay `Log` runs next then starts at or below the first
recovered segment, rebuilding its `.txnindex` entries). The result is the loaded
segment list and the offsets `Log` starts from.
"""

from __future__ import annotations

import bisect
from pathlib import Path
from typing import NamedTuple

from .errors import StorageError
from .leader_epoch_cache import LeaderEpochCache
from .local_log import LocalLog
from .partition_metadata import PartitionMetadataFile
from .producer_state import ProducerStateManager
from .record_batch import BatchHeader, check_batch
from .segment import (
    CLEANED_SUFFIX,
    DELETED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    file_prefix,
    offset_from_file_name,
)


class LoadedLogOffsets(NamedTuple):
    log_start_offset: int
    recovery_point: int
    log_end_offset: int


class LogLoader:
    def __init__(
        self,
        directory: Path,
        local: LocalLog,
        epoch_cache: LeaderEpochCache,
        producer_state: ProducerStateManager,
    ) -> None:
        self.directory = directory
        self.local = local
        self.epoch_cache = epoch_cache
        self.producer_state = producer_state

    def load_topic_id(self, topic_id: str | None) -> str | None:
        """The topic id of partition.metadata, written first if the file is new."""
        metadata = PartitionMetadataFile.in_dir(self.directory)
        if metadata.exists():
            try:
                return metadata.read().topic_id
            except StorageError:
                return None  # unknown: never taken for another topic's log
        if topic_id is not None:
            # Before any record: data must never exist on disk without a topic id.
            metadata.write(topic_id)
        return topic_id

    def load(
        self, recovery_point: int, log_start_offset: int, clean: bool, t: int
    ) -> LoadedLogOffsets:
        """Fill `local` with the directory's segments, recovered where they need it."""
        local = self.local
        self._remove_temporary_files()
        needs_recovery: set[int] = set()
        for path in sorted(self.directory.glob(f"*{LOG_SUFFIX}")):
            base = offset_from_file_name(path.name)
            if not Path(f"{self.directory / file_prefix(base)}{INDEX_SUFFIX}").exists():
                needs_recovery.add(base)
            local.add_segment(local.new_segment(base, t))
        if not local.segments:
            local.add_segment(local.new_segment(log_start_offset, t))
        start_index = 0
        if not clean:
            start_index = max(0, bisect.bisect_right(local.base_offsets, recovery_point) - 1)
        first_recovered: int | None = None
        i = 0
        while i < len(local.segments):
            seg = local.segments[i]
            recover = (not clean and i >= start_index) or seg.base_offset in needs_recovery
            if not recover:
                try:
                    seg.sanity_check()
                except StorageError:
                    recover = True  # indexes are disposable: rebuild from the .log
            if recover:
                if first_recovered is None:
                    first_recovered = seg.base_offset
                truncated = seg.recover(self._recovery_visitor)
                if truncated and i + 1 < len(local.segments):
                    # Nothing after a torn batch can be trusted.
                    for later in local.segments[i + 1 :]:
                        later.delete()
                    del local.segments[i + 1 :]
                    del local.base_offsets[i + 1 :]
            local.unload_idle_indexes()  # checking every segment must not map them all
            i += 1
        local.resize_active_indexes()
        offsets = loaded_offsets(local, self.epoch_cache, log_start_offset, recovery_point, clean)
        self.producer_state.delete_stray_snapshots(local.base_offsets)
        if first_recovered is not None:
            # The producer-state replay rebuilds the `.txnindex` entries of what it
            # replays: make it start at or below the first recovered segment.
            self.producer_state.delete_snapshots_after(first_recovered)
        return offsets

    def _recovery_visitor(self, view: memoryview, pos: int, header: BatchHeader) -> None:
        latest = self.epoch_cache.latest_epoch
        epoch = header.partition_leader_epoch
        if epoch >= 0 and (latest is None or epoch > latest):
            self.epoch_cache.assign(epoch, header.base_offset)

    def _remove_temporary_files(self) -> None:
        """Kafka's startup clean-up of files a crash can leave behind."""
        swaps: list[Path] = []
        min_cleaned: int | None = None
        for path in list(self.directory.iterdir()):
            name = path.name
            if name.endswith(DELETED_SUFFIX) or name.endswith(".tmp"):
                path.unlink(missing_ok=True)
            elif name.endswith(CLEANED_SUFFIX):
                base = offset_from_file_name(name)
                min_cleaned = base if min_cleaned is None else min(min_cleaned, base)
                path.unlink(missing_ok=True)
            elif name.endswith(SWAP_SUFFIX):
                swaps.append(path)
        for path in swaps:
            base = offset_from_file_name(path.name)
            if min_cleaned is not None and base >= min_cleaned:
                path.unlink(missing_ok=True)  # an unfinished split
            elif path.name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
                self._commit_swap(path, base)
            else:
                path.unlink(missing_ok=True)  # swapped indexes are rebuilt from the log
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            for path in self.directory.glob(f"*{suffix}"):
                log_file = path.with_name(path.name[: -len(suffix)] + LOG_SUFFIX)
                if not log_file.exists():
                    path.unlink(missing_ok=True)  # an orphan index

    def _commit_swap(self, swap: Path, base: int) -> None:
        """A finished cleaner output replaces the segments it covers."""
        data = swap.read_bytes()
        next_offset = base
        pos = 0
        while pos < len(data):
            try:
                header = check_batch(data, pos)
            except StorageError:
                break
            next_offset = header.next_offset
            pos += header.size
        for path in self.directory.glob(f"*{LOG_SUFFIX}"):
            old = offset_from_file_name(path.name)
            if base <= old < next_offset:
                for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                    path.with_name(file_prefix(old) + suffix).unlink(missing_ok=True)
        swap.rename(swap.with_name(swap.name[: -len(SWAP_SUFFIX)]))


def loaded_offsets(
    local: LocalLog,
    epoch_cache: LeaderEpochCache,
    log_start_offset: int,
    recovery_point: int,
    clean: bool,
) -> LoadedLogOffsets:
    """The offsets of a log whose segments are loaded (from files or memory): the LEO
    where the last segment's data ends, the log start and recovery point kept inside
    the data, and the epoch cache cut to match."""
    active = local.segments[-1]
    log_end_offset = active.read_next_offset()
    if active.size == 0 and len(local.segments) > 1:
        log_end_offset = max(log_end_offset, active.base_offset)
    log_start_offset = min(max(log_start_offset, local.segments[0].base_offset), log_end_offset)
    recovery_point = log_end_offset if clean else min(recovery_point, log_end_offset)
    local.log_end_offset = log_end_offset
    local.recovery_point = recovery_point
    epoch_cache.truncate_from_end(log_end_offset)
    epoch_cache.truncate_from_start(log_start_offset)
    return LoadedLogOffsets(log_start_offset, recovery_point, log_end_offset)
