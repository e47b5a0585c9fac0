"""A log directory (one entry of `log.dirs`): its partitions and the checkpoint files
Kafka keeps beside them.

Opening consumes the clean-shutdown marker and loads every `<topic>-<n>/`
with its recovery point, log start offset and high watermark; closing writes
the checkpoints and the marker again. Threads and timers belong to the node;
this is the file side only.
"""

from __future__ import annotations

import random
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .checkpoint_file import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    OffsetCheckpointFile,
)
from .clean_shutdown import consume_clean_shutdown, write_clean_shutdown
from .disk_and_clock import plain_wall_ms
from .errors import KafkaStorageError, LogDirFullError, StorageError
from .log import Clock, Log, parse_partition_dir
from .log_config import LogConfig
from .producer_state import DEFAULT_PRODUCER_ID_EXPIRATION_MS

TopicPartition = tuple[str, int]
# Logs a consensus layer owns (KRaft's metadata log), not the log manager.
RAFT_MANAGED_TOPICS = frozenset({"__cluster_metadata"})
_SPECIAL_DIR = re.compile(r"^(\S+)-(\S+)\.(\S+)-(delete|future|stray)$")


@dataclass(frozen=True)
class CheckpointState:
    recovery_points: dict[TopicPartition, int]
    high_watermarks: dict[TopicPartition, int]
    log_start_offsets: dict[TopicPartition, int]


class LogDirectory:
    def __init__(
        self,
        path: Path,
        *,
        clock: Clock = plain_wall_ms,
        rng: random.Random | None = None,
        producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        transaction_verification_enabled: bool = False,
    ) -> None:
        self.path = path
        self.producer_id_expiration_ms = producer_id_expiration_ms
        # transaction.partition.verification.enable, for every log's producer state.
        self.transaction_verification_enabled = transaction_verification_enabled
        # Time and randomness are inputs, handed to every log opened here.
        self.clock = clock
        self.rng = rng if rng is not None else random.Random()
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise KafkaStorageError(f"cannot create log directory {path}: {e}") from e
        self.recovery_points = OffsetCheckpointFile(path / RECOVERY_POINT_CHECKPOINT)
        self.log_start_offsets = OffsetCheckpointFile(path / LOG_START_OFFSET_CHECKPOINT)
        self.high_watermarks = OffsetCheckpointFile(path / REPLICATION_OFFSET_CHECKPOINT)
        # What each checkpoint file last had written: an unchanged one is not written
        # (and fsynced) again every few seconds while the logs are idle.
        self._written: dict[str, dict[TopicPartition, int]] = {}
        self._write_lock = threading.Lock()
        self.logs: dict[TopicPartition, Log] = {}
        self.had_clean_shutdown = False
        # Kafka's LogDirFailureChannel: the first unrecoverable I/O error takes the
        # whole directory offline; a full disk (LogDirFullError) does not.
        self.offline_reason: str | None = None
        self.on_offline: Callable[[LogDirectory, KafkaStorageError], None] | None = None
        self.on_full: Callable[[LogDirectory, LogDirFullError], None] | None = None

    def report_io_error(self, e: KafkaStorageError) -> None:
        """An I/O error in this directory: a full disk is told to `on_full`; any other
        takes every log here offline (appends and reads answer KAFKA_STORAGE_ERROR)
        and is told to `on_offline` once."""
        if isinstance(e, LogDirFullError):
            if self.on_full is not None:
                self.on_full(self, e)
            return
        if self.offline_reason is not None:
            return
        self.offline_reason = str(e)
        for log in list(self.logs.values()):  # a copy: a log may be added meanwhile
            log.offline_reason = self.offline_reason
        if self.on_offline is not None:
            self.on_offline(self, e)

    def adopt(self, log: Log) -> Log:
        """A log of this directory: its I/O errors are the directory's."""
        log.io_error_handler = self.report_io_error
        log.offline_reason = self.offline_reason
        # A log moved here from another directory (log_dir_moves) opens without it.
        log.producer_state.transaction_verification_enabled = self.transaction_verification_enabled
        return log

    def load(
        self,
        broker_config: LogConfig,
        topic_configs: dict[str, LogConfig] | None = None,
        *,
        time_ms: int | None = None,
    ) -> dict[TopicPartition, Log]:
        """Open every partition directory found here, recovering after a crash."""
        t = self.clock() if time_ms is None else time_ms
        self.had_clean_shutdown = consume_clean_shutdown(self.path)
        recovery = self.recovery_points.read()
        starts = self.log_start_offsets.read()
        hws = self.high_watermarks.read()
        for entry in sorted(self.path.iterdir()):
            if not entry.is_dir() or _SPECIAL_DIR.match(entry.name):
                continue
            try:
                tp = parse_partition_dir(entry.name)
            except StorageError:
                continue  # not a partition (e.g. an operator's own folder)
            if tp[0] in RAFT_MANAGED_TOPICS:
                continue
            config = (topic_configs or {}).get(tp[0], broker_config)
            self.logs[tp] = self.adopt(
                Log.open(
                    entry,
                    config,
                    recovery_point=recovery.get(tp, 0),
                    log_start_offset=starts.get(tp, 0),
                    high_watermark=hws.get(tp, 0),
                    had_clean_shutdown=self.had_clean_shutdown,
                    producer_id_expiration_ms=self.producer_id_expiration_ms,
                    transaction_verification_enabled=self.transaction_verification_enabled,
                    time_ms=t,
                    clock=self.clock,
                    rng=self.rng,
                )
            )
        return self.logs

    def create_log(
        self,
        topic: str,
        partition: int,
        config: LogConfig,
        *,
        topic_id: str | None = None,
        time_ms: int | None = None,
    ) -> Log:
        tp = (topic, partition)
        if tp in self.logs:
            return self.logs[tp]
        if self.offline_reason is not None:
            raise KafkaStorageError(
                f"cannot create {topic}-{partition}: log directory {self.path} is offline "
                f"({self.offline_reason})"
            )
        log = Log.open(
            self.path / f"{topic}-{partition}",
            config,
            topic_id=topic_id,
            producer_id_expiration_ms=self.producer_id_expiration_ms,
            transaction_verification_enabled=self.transaction_verification_enabled,
            time_ms=time_ms,
            clock=self.clock,
            rng=self.rng,
        )
        self.logs[tp] = self.adopt(log)
        return log

    def delete_log(self, topic: str, partition: int) -> None:
        log = self.logs.pop((topic, partition), None)
        if log is not None:
            log.delete()

    def checkpoint(self) -> None:
        """Write the recovery-point, log-start-offset and high-watermark checkpoints."""
        self.write_checkpoints(self.checkpoint_state())

    def checkpoint_state(self, logs: dict[TopicPartition, Log] | None = None) -> CheckpointState:
        """The offsets the checkpoints record for `logs` (default: all of this
        directory's); read it under the logs' locks and write it (write_checkpoints,
        which fsyncs) after releasing them."""
        logs = self.logs if logs is None else logs
        return CheckpointState(
            recovery_points={tp: log.recovery_point for tp, log in logs.items()},
            high_watermarks={tp: log.high_watermark for tp, log in logs.items()},
            # Only starts beyond the first segment's base need remembering (Kafka's rule).
            log_start_offsets={
                tp: log.log_start_offset
                for tp, log in logs.items()
                if log.log_start_offset > log.segments[0].base_offset
            },
        )

    def write_checkpoints(self, state: CheckpointState) -> None:
        """Write the checkpoints whose offsets changed since this object last wrote them."""
        with self._write_lock:
            for file, offsets in (
                (self.recovery_points, state.recovery_points),
                (self.high_watermarks, state.high_watermarks),
                (self.log_start_offsets, state.log_start_offsets),
            ):
                name = file.path.name
                if self._written.get(name) == offsets:
                    continue
                self._written.pop(name, None)  # unknown until this write succeeds
                file.write(offsets)
                self._written[name] = dict(offsets)

    def close(self, broker_epoch: int = -1) -> None:
        """Clean shutdown: close every log, write checkpoints, then the marker. An
        offline directory is only let go of: after a failed write or fsync nothing
        here may claim a clean shutdown, the next start recovers it."""
        if self.offline_reason is not None:
            for log in self.logs.values():
                log.abandon()
            return
        for log in self.logs.values():
            log.close()
        self.checkpoint()
        write_clean_shutdown(self.path, broker_epoch)
