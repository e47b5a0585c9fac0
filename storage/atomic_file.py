"""Crash-safe whole-file replacement, as Kafka does for checkpoints and ``partition.metadata``.

The procedure is: write ``<path>.tmp``, fsync it, rename it over ``<path>``, fsync the parent
directory. After a crash a reader sees either the complete old file or the complete new one;
a stale ``<path>.tmp`` may be left behind and is simply overwritten by the next write.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from . import disk_and_clock
from .errors import KafkaStorageError

TMP_SUFFIX = ".tmp"


def tmp_path_for(path: Path) -> Path:
    """``<path>.tmp``: the suffix is appended to the full name, never substituted."""
    return path.with_name(path.name + TMP_SUFFIX)


def fsync_dir(directory: Path) -> None:
    """Make entry changes (create/rename/unlink) in ``directory`` durable.

    Raises OSError; callers translate it. Filesystems that cannot fsync a directory report
    EINVAL, which is tolerated because there is nothing more we could do there.
    """
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        disk_and_clock.disk_fsync(fd)
    except OSError as e:
        if e.errno != errno.EINVAL:
            raise
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:  # never expected from a regular file, but avoid spinning forever
            raise OSError(errno.EIO, "write returned 0")
        view = view[written:]


def write_atomically(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash never exposes a partial file.

    On any OSError (e.g. ENOSPC) the previous content of ``path`` is left untouched, the tmp
    file is removed and KafkaStorageError is raised naming the path and the OS error. If only
    the final directory fsync fails the new content is already in place (but maybe not durable).
    """
    path = Path(path)
    tmp = tmp_path_for(path)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, data)
            disk_and_clock.disk_fsync(fd)
        finally:
            os.close(fd)
        # os.replace is an atomic rename(2) on POSIX; Kafka's non-atomic fallback is not needed.
        os.replace(tmp, path)
    except OSError as e:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass  # the original error is the one worth reporting
        raise KafkaStorageError(f"Error while writing file {path}: {e}") from e
    try:
        fsync_dir(path.parent)
    except OSError as e:
        raise KafkaStorageError(
            f"Error while flushing directory {path.parent} after writing {path}: {e}"
        ) from e
