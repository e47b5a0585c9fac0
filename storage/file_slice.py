"""A byte range of a segment's `.log`, handed to the network layer so that it can
`os.sendfile` the batches into a socket without reading them into Python.

The slice owns a duplicate of the segment's file descriptor: the segment may be
rolled, closed or deleted by retention while the bytes are on their way, and the
duplicate keeps the file readable until the slice is closed. A truncation below
the slice's end (a leader change) makes the read come up short; the sender then
fails the response instead of sending a frame shorter than it announced.
"""

from __future__ import annotations

import contextlib
import os


class FileSlice:
    """`size` bytes of an open file from `position`; close() (or garbage collection)
    releases the descriptor."""

    __slots__ = ("fd", "position", "size")

    def __init__(self, fd: int, position: int, size: int) -> None:
        self.fd = fd
        self.position = position
        self.size = size

    @classmethod
    def of(cls, fd: int, position: int, size: int) -> FileSlice:
        """A slice of the file open as `fd` (duplicated; the caller keeps its own)."""
        return cls(os.dup(fd), position, size)

    def __len__(self) -> int:
        return self.size

    def read(self) -> bytes:
        """The bytes themselves (for senders that cannot use sendfile, and tests)."""
        out = bytearray()
        # Bounded: every pass reads at least one byte or stops.
        while len(out) < self.size:
            chunk = os.pread(self.fd, self.size - len(out), self.position + len(out))
            if not chunk:
                raise OSError(f"file slice truncated: read {len(out)} of {self.size} bytes")
            out += chunk
        return bytes(out)

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)
            self.fd = -1

    def __repr__(self) -> str:
        return f"FileSlice(fd={self.fd}, position={self.position}, size={self.size})"
