"""A segment as a cleaning pass reads it: through its own file descriptor, up to the
size it had when the pass began, without the partition lock.

Reading by path with a descriptor of its own keeps the pass safe from the log
closing or deleting the segment's descriptor meanwhile; a segment renamed away
(retention, truncation) is `SourceGone`, and the pass gives up. Whatever else
happens to the log under the pass, its swap checks before replacing anything.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from .cleaner_filter import CleanerError
from .cleaner_plan import SegmentView
from .record_batch import HEADER_SIZE, BatchHeader, batch_size_at, check_batch
from .segment import LogSegment


class SourceGone(CleanerError):
    """A segment the pass was reading is no longer there (deleted or truncated)."""


@dataclass
class SourceSegment:
    segment: LogSegment
    path: Path
    size: int  # bytes when the pass began (whole batches)
    view: SegmentView

    def _open(self) -> int:
        try:
            return os.open(self.path, os.O_RDONLY)
        except FileNotFoundError as e:
            raise SourceGone(f"{self.path} went away during cleaning") from e
        except OSError as e:
            raise CleanerError(f"cannot open {self.path} for cleaning: {e}") from e

    def batches(
        self, chunk: int, on_read: Callable[[int], None], *, validate: bool = True
    ) -> Iterator[tuple[memoryview, int, BatchHeader]]:
        """(chunk view, position in it, header) of every batch, CRC-checked unless
        `validate` is false, read `chunk` bytes at a time; `on_read(n)` after every
        read (abort check, throttle)."""
        parse = check_batch if validate else BatchHeader.parse
        fd = self._open()
        try:
            pos = 0
            while pos < self.size:
                data = os.pread(fd, min(chunk, self.size - pos), pos)
                if not data:
                    raise SourceGone(f"{self.path} is shorter than {self.size} bytes")
                on_read(len(data))
                view = memoryview(data)
                p = 0
                while p < len(view):
                    size = batch_size_at(view, p)
                    if size is None:
                        break
                    yield view, p, parse(view, p)
                    p += size
                if p == 0:  # one batch larger than the chunk
                    head = BatchHeader.parse(os.pread(fd, HEADER_SIZE, pos))
                    whole = memoryview(os.pread(fd, head.size, pos))
                    if len(whole) < head.size:
                        raise SourceGone(f"{self.path} ends inside a batch at {pos}")
                    on_read(len(whole))
                    yield whole, 0, parse(whole, 0)
                    p = head.size
                pos += p
        finally:
            os.close(fd)


__all__ = ["SourceGone", "SourceSegment"]
