"""`cleaner-offset-checkpoint`: where the cleaner stopped, per compacted partition of a
log directory (`<topic> <partition> <firstDirtyOffset>` lines, Kafka's text
checkpoint format). Reads and updates are serialised; a write replaces the file
atomically."""

from __future__ import annotations

import threading
from pathlib import Path

from .checkpoint_file import CLEANER_OFFSET_CHECKPOINT, OffsetCheckpointFile
from .errors import StorageError

TopicPartition = tuple[str, int]


class CleanerCheckpoint:
    def __init__(self, log_dir: Path) -> None:
        self._file = OffsetCheckpointFile(Path(log_dir) / CLEANER_OFFSET_CHECKPOINT)
        self._lock = threading.Lock()
        try:
            self._offsets = self._file.read()
        except StorageError:
            # An unreadable checkpoint only costs a full re-clean (Kafka starts over too).
            self._offsets = {}

    @property
    def path(self) -> Path:
        return self._file.path

    def get(self, tp: TopicPartition) -> int | None:
        with self._lock:
            return self._offsets.get(tp)

    def all(self) -> dict[TopicPartition, int]:
        with self._lock:
            return dict(self._offsets)

    def update(self, tp: TopicPartition, offset: int) -> None:
        with self._lock:
            self._offsets[tp] = offset
            self._file.write(self._offsets)

    def remove(self, tp: TopicPartition) -> None:
        with self._lock:
            if self._offsets.pop(tp, None) is not None:
                self._file.write(self._offsets)


__all__ = ["CleanerCheckpoint"]
