"""``.kafka_cleanshutdown``: marks a log dir whose logs were closed cleanly.

Content is Jackson's compact JSON, no trailing newline: ``{"version":0,"brokerEpoch":<long>}``.
On startup its presence means "skip log recovery for this dir". Kafka deletes it right after
checking, *before* loading logs, so that a crash while loading is seen as an unclean shutdown
on the next start (KAFKA-10471); we also fsync the dir so that the deletion itself is durable.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .atomic_file import fsync_dir, write_atomically
from .errors import KafkaStorageError

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
CURRENT_VERSION = 0


def clean_shutdown_path(log_dir: Path) -> Path:
    return Path(log_dir) / CLEAN_SHUTDOWN_FILE


def encode_clean_shutdown(broker_epoch: int = -1) -> bytes:
    """The exact bytes Kafka writes (field order and separators as Jackson emits them)."""
    return json.dumps(
        {"version": CURRENT_VERSION, "brokerEpoch": broker_epoch}, separators=(",", ":")
    ).encode("utf-8")


def write_clean_shutdown(log_dir: Path, broker_epoch: int = -1) -> None:
    """Mark ``log_dir`` as cleanly shut down.

    Kafka writes in place (+ fsync); we write atomically so that a crash can never leave a
    truncated marker. Call only after every log in the dir has been flushed and closed.
    """
    write_atomically(clean_shutdown_path(log_dir), encode_clean_shutdown(broker_epoch))


def read_clean_shutdown_broker_epoch(log_dir: Path) -> int | None:
    """The broker epoch stored in the marker, or None if it is absent or unreadable.

    Like Kafka this never fails: the epoch is an optimisation for broker registration (KIP-966),
    and presence alone is what decides whether recovery is skipped.
    """
    try:
        content = json.loads(clean_shutdown_path(log_dir).read_bytes())
    except (OSError, ValueError):
        return None
    epoch = content.get("brokerEpoch") if isinstance(content, dict) else None
    return epoch if type(epoch) is int else None


def consume_clean_shutdown(log_dir: Path) -> bool:
    """True if ``log_dir`` was shut down cleanly, i.e. the marker exists.

    A present marker is deleted, and the deletion fsynced, before this returns: if the
    subsequent log loading crashes, the next start must run recovery.
    """
    path = clean_shutdown_path(log_dir)
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    except OSError as e:
        raise KafkaStorageError(f"Error deleting clean shutdown file {path}: {e}") from e
    try:
        fsync_dir(Path(log_dir))
    except OSError as e:
        raise KafkaStorageError(f"Error flushing log dir {log_dir}: {e}") from e
    return True
