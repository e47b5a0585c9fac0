"""A controller quorum of one: the node commits metadata records by appending them
to its own `__cluster_metadata-0` log and applies them to the image in order.

The decisions themselves are pure functions in `seglog.controller.cluster_control`;
this class only serialises them, persists the records and tells listeners.
"""

from __future__ import annotations

import random
import threading
from pathlib import Path

from seglog.controller.cluster_control import METADATA_TOPIC, ControlError
from seglog.controller.metadata_image import MetadataImage
from seglog.controller.metadata_records import (
    BrokerFenceRecord,
    MetadataRecord,
    RegisterBrokerRecord,
    decode_record,
    encode_record,
)
from seglog.node.controller.controller_requests import ControllerRequests, Decision, Listener
from seglog.node.event_log import EventLogger
from seglog.storage.log import Log
from seglog.storage.log_config import LogConfig
from seglog.storage.record_batch import NewRecord, build_batch, decode_records, iter_batches

_log = EventLogger("controller")
# The metadata log keeps everything: the image is rebuilt from it at start.
METADATA_LOG_CONFIG = {
    "retention.ms": "-1",
    "retention.bytes": "-1",
    "segment.bytes": str(64 << 20),
}


class LocalController(ControllerRequests):
    def __init__(self, metadata_dir: Path, broker_defaults: LogConfig, rng: random.Random) -> None:
        self.metadata_dir = metadata_dir
        self.broker_defaults = broker_defaults
        self.rng = rng
        self.image = MetadataImage()
        self._lock = threading.RLock()
        self._image_lock = self._lock
        self._listeners: list[Listener] = []
        self.metadata_offset = -1
        self._log: Log | None = None

    def load(self, clean: bool) -> None:
        """Open the metadata log and replay every committed record. `clean`: whether
        the log directory holding it was shut down cleanly."""
        config = LogConfig.defaults().with_overrides(METADATA_LOG_CONFIG)
        self._log = Log.open(
            self.metadata_dir / f"{METADATA_TOPIC}-0", config, had_clean_shutdown=clean
        )
        log = self._log
        offset = log.log_start_offset
        count = 0
        # Bounded by the log end offset: each read moves past at least one batch.
        while offset < log.log_end_offset:
            chunk = log.read(offset, 4 << 20)
            if not chunk.records:
                break
            for pos, header in iter_batches(chunk.records):
                for record in decode_records(chunk.records, pos, header):
                    if record.offset >= offset and record.value is not None:
                        self.image.apply(decode_record(record.value))
                        count += 1
                offset = header.next_offset
        self.metadata_offset = log.log_end_offset - 1
        _log.info("metadata_loaded", records=count, offset=self.metadata_offset, clean=clean)

    def add_listener(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.append(listener)
            listener(self.image, [])

    def _commit(self, records: list[MetadataRecord]) -> None:
        """Append the records as one batch (all or nothing), apply, notify."""
        assert self._log is not None, "load() first"
        if not records:
            return
        batch = build_batch([NewRecord(encode_record(r)) for r in records])
        info = self._log.append_as_leader(batch, leader_epoch=0)
        # One voter: committed once durable on this node.
        self._log.flush()
        self._log.update_high_watermark(self._log.log_end_offset)
        for r in records:
            self.image.apply(r)
        self.metadata_offset = info.last_offset
        for listener in self._listeners:
            listener(self.image, records)

    # --- requests ------------------------------------------------------------------

    def register_broker(
        self,
        broker_id: int,
        host: str,
        port: int,
        endpoints: tuple[tuple[str, str, int], ...] = (),
    ) -> int:
        """A new broker epoch for this incarnation; unfenced at once (a single node
        is caught up with its own metadata by construction)."""
        with self._lock:
            old = self.image.brokers.get(broker_id)
            epoch = (old.broker_epoch + 1) if old is not None else 1
            self._commit(
                [
                    RegisterBrokerRecord(broker_id, epoch, host, port, None, endpoints),
                    BrokerFenceRecord(broker_id, epoch, False),
                ]
            )
            _log.info("broker_registered", broker=broker_id, epoch=epoch)
            return epoch

    def _op(self, decide: Decision) -> None:
        with self._lock:
            self._commit(decide(self.image))

    def shutdown(self) -> None:
        with self._lock:
            if self._log is not None:
                # The log manager writes the directory's clean-shutdown marker after this.
                self._log.close()
                self._log = None


__all__ = ["ControlError", "LocalController"]
