"""`seglog log-dirs --describe --log-dirs DIR[,DIR...]`: what kafka-log-dirs --describe
reports (each partition's size), read straight from the log directories, plus what
the log cleaner left there: its `cleaner-offset-checkpoint` (the first dirty offset),
and the bytes below and above it (the dirty ratio the cleaner weighs). Read-only:
nothing is opened for writing, so it can run beside a live node.

The last pass's figures (records and bytes read and kept, seconds) are in the node's
log, one `log_cleaned` event per pass.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

# storage/ is imported where it is used: `seglog --help` builds this parser too.

MAX_HEADERS = 1_000_000  # batches walked to find a partition's end offset


def _read_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    from seglog.storage.checkpoint_file import OffsetCheckpointFile
    from seglog.storage.errors import StorageError

    if not path.exists():
        return {}
    try:
        # Constructing the file object would create a missing file: checked above.
        return OffsetCheckpointFile(path).read()
    except StorageError:
        return {}


def _end_offset(segment: Path, base: int) -> int:
    """The offset after the segment's last whole batch, walking headers only."""
    from seglog.storage.record_batch import HEADER_SIZE, BatchHeader

    end = base
    with open(segment, "rb") as f:
        pos = 0
        for _ in range(MAX_HEADERS):
            f.seek(pos)
            raw = f.read(HEADER_SIZE)
            if len(raw) < HEADER_SIZE:
                break
            h = BatchHeader.parse(raw)
            if h.size < HEADER_SIZE:
                break
            end = h.next_offset
            pos += h.size
    return end


def describe_dir(log_dir: Path) -> dict[str, Any]:
    from seglog.storage.checkpoint_file import (
        CLEANER_OFFSET_CHECKPOINT,
        LOG_START_OFFSET_CHECKPOINT,
    )
    from seglog.storage.errors import StorageError
    from seglog.storage.log import parse_partition_dir
    from seglog.storage.segment import LOG_SUFFIX, offset_from_file_name

    cleaner = _read_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT)
    starts = _read_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT)
    partitions = []
    for entry in sorted(log_dir.iterdir()) if log_dir.is_dir() else []:
        if not entry.is_dir():
            continue
        try:
            tp = parse_partition_dir(entry.name)
        except StorageError:
            continue
        segments = sorted((offset_from_file_name(p.name), p) for p in entry.glob(f"*{LOG_SUFFIX}"))
        sizes = [(base, p.stat().st_size) for base, p in segments]
        first_dirty = cleaner.get(tp)
        info: dict[str, Any] = {
            "partition": entry.name,
            "size": sum(size for _b, size in sizes),
            "offsetLag": 0,
            "isFuture": False,
            "segments": len(sizes),
            "logStartOffset": starts.get(tp, sizes[0][0] if sizes else 0),
            "logEndOffset": _end_offset(segments[-1][1], segments[-1][0]) if segments else 0,
        }
        if first_dirty is not None:
            clean = sum(size for base, size in sizes if base < first_dirty)
            dirty = sum(size for base, size in sizes if base >= first_dirty)
            info["cleaner"] = {
                "firstDirtyOffset": first_dirty,
                "cleanBytes": clean,
                "dirtyBytes": dirty,
                "dirtyRatio": round(dirty / (clean + dirty), 4) if clean + dirty else 0.0,
            }
        partitions.append(info)
    return {"logDir": str(log_dir), "error": None, "partitions": partitions}


def describe(log_dirs: list[Path]) -> dict[str, Any]:
    return {
        "version": 1,
        "brokers": [{"broker": -1, "logDirs": [describe_dir(d) for d in log_dirs]}],
    }


def run(args: argparse.Namespace) -> int:
    dirs = [Path(d.strip()) for d in args.log_dirs.split(",") if d.strip()]
    missing = [str(d) for d in dirs if not d.is_dir()]
    if missing:
        print(f"no such log directory: {', '.join(missing)}", file=sys.stderr)
        return 1
    print("Querying log directories " + ",".join(str(d) for d in dirs))
    print("Received log directory information")
    print(json.dumps(describe(dirs)))
    return 0


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--describe", action="store_true", required=True)
    p.add_argument("--log-dirs", required=True, help="comma-separated log directories")
