""".kafka_cleanshutdown marker (docs/architecture.md (storage))."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from seglog.storage import clean_shutdown
from seglog.storage.atomic_file import tmp_path_for
from seglog.storage.clean_shutdown import (
    CLEAN_SHUTDOWN_FILE,
    consume_clean_shutdown,
    read_clean_shutdown_broker_epoch,
    write_clean_shutdown,
)
from seglog.storage.errors import KafkaStorageError


@pytest.mark.parametrize(
    "epoch, expected",
    [
        (-1, b'{"version":0,"brokerEpoch":-1}'),
        (42, b'{"version":0,"brokerEpoch":42}'),
        (2**63 - 1, b'{"version":0,"brokerEpoch":9223372036854775807}'),
    ],
)
def test_exact_bytes(tmp_path: Path, epoch: int, expected: bytes) -> None:
    write_clean_shutdown(tmp_path, epoch)
    assert (tmp_path / ".kafka_cleanshutdown").read_bytes() == expected
    assert CLEAN_SHUTDOWN_FILE == ".kafka_cleanshutdown"
    assert not tmp_path_for(tmp_path / CLEAN_SHUTDOWN_FILE).exists()


def test_default_broker_epoch_is_minus_one(tmp_path: Path) -> None:
    write_clean_shutdown(tmp_path)
    assert read_clean_shutdown_broker_epoch(tmp_path) == -1


def test_consume_deletes_marker(tmp_path: Path) -> None:
    write_clean_shutdown(tmp_path, 7)
    assert read_clean_shutdown_broker_epoch(tmp_path) == 7
    assert consume_clean_shutdown(tmp_path) is True
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    # A crash during the following log load must look unclean on the next start.
    assert consume_clean_shutdown(tmp_path) is False
    assert read_clean_shutdown_broker_epoch(tmp_path) is None


def test_absent_marker_means_unclean(tmp_path: Path) -> None:
    assert consume_clean_shutdown(tmp_path) is False
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "content", [b"", b"garbage", b"[1]", b'{"version":0}', b'{"version":0,"brokerEpoch":"x"}']
)
def test_presence_decides_even_if_content_unreadable(tmp_path: Path, content: bytes) -> None:
    (tmp_path / CLEAN_SHUTDOWN_FILE).write_bytes(content)
    assert read_clean_shutdown_broker_epoch(tmp_path) is None
    assert consume_clean_shutdown(tmp_path) is True
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()


def test_reader_ignores_unknown_fields(tmp_path: Path) -> None:
    (tmp_path / CLEAN_SHUTDOWN_FILE).write_bytes(b'{"version":0,"brokerEpoch":5,"x":1}')
    assert read_clean_shutdown_broker_epoch(tmp_path) == 5


def test_consume_fsyncs_dir_after_delete(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_clean_shutdown(tmp_path)
    synced: list[tuple[Path, bool]] = []

    def record(directory: Path) -> None:
        synced.append((directory, (directory / CLEAN_SHUTDOWN_FILE).exists()))

    monkeypatch.setattr(clean_shutdown, "fsync_dir", record)
    assert consume_clean_shutdown(tmp_path)
    assert synced == [(tmp_path, False)]


def test_consume_delete_failure_is_storage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_clean_shutdown(tmp_path)

    def eio(path: object) -> None:
        raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(os, "unlink", eio)
    with pytest.raises(KafkaStorageError, match=CLEAN_SHUTDOWN_FILE):
        consume_clean_shutdown(tmp_path)


def test_failed_write_leaves_no_marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A half-written marker must never make an unflushed dir look clean."""

    def enospc(fd: int, data: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", enospc)
    with pytest.raises(KafkaStorageError, match="No space left"):
        write_clean_shutdown(tmp_path, 3)
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []
    assert consume_clean_shutdown(tmp_path) is False
