"""Helpers for the log cleaner tests: a compacted log, keyed appends, and reading
back every record with its batch."""

from __future__ import annotations

import struct
from pathlib import Path

from seglog.storage.log import Log
from seglog.storage.log_cleaner import CleanResult, clean_log
from seglog.storage.log_config import LogConfig
from seglog.storage.offset_map import OffsetMap
from seglog.storage.record_batch import (
    BatchHeader,
    ControlType,
    NewRecord,
    Record,
    build_batch,
    decode_records,
    iter_batches,
)

T0 = 1_700_000_000_000
RETENTION_MS = 10_000  # delete.retention.ms of the test topics
SENTINEL = b"__sentinel__"


def compact_config(**overrides: object) -> LogConfig:
    props: dict[str, object] = {
        "cleanup.policy": "compact",
        "segment.bytes": 2000,
        "delete.retention.ms": RETENTION_MS,
        "index.interval.bytes": 256,
        "file.delete.delay.ms": 0,
    }
    props.update({k.replace("_", "."): v for k, v in overrides.items()})
    return LogConfig.defaults().with_overrides(props)


def open_compacted(directory: Path, **overrides: object) -> Log:
    return Log.open(directory, compact_config(**overrides), time_ms=T0)


def keyed_batch(
    pairs: list[tuple[bytes, bytes | None]],
    *,
    ts: int = T0,
    compression: object = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    base_offset: int = 0,
    is_transactional: bool = False,
) -> bytes:
    kw: dict[str, object] = {}
    if compression is not None:
        kw["compression"] = compression
    return build_batch(
        [NewRecord(v, key=k, timestamp=ts) for k, v in pairs],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        base_offset=base_offset,
        is_transactional=is_transactional,
        now_ms=ts,
        **kw,  # type: ignore[arg-type]
    )


def marker_batch(
    offset: int, producer_id: int, producer_epoch: int, commit: bool, ts: int = T0, epoch: int = 0
) -> bytes:
    ctype = ControlType.COMMIT if commit else ControlType.ABORT
    return build_batch(
        [NewRecord(struct.pack(">hi", 0, 5), key=struct.pack(">hh", 0, ctype), timestamp=ts)],
        base_offset=offset,
        partition_leader_epoch=epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
        now_ms=ts,
    )


def seal(log: Log, t: int = T0) -> None:
    """Roll and append a sentinel record to the new active segment, then move the HW to
    the LEO: everything before the sentinel becomes cleanable."""
    log.roll(time_ms=t)
    log.append_as_leader(keyed_batch([(SENTINEL, b"s")], ts=t), 0, time_ms=t)
    log.update_high_watermark(log.log_end_offset)


def batches_on_disk(log: Log) -> list[tuple[BatchHeader, bytes]]:
    out = []
    for seg in log.segments:
        data = Path(seg.log_path).read_bytes()
        for pos, h in iter_batches(data):
            out.append((h, data[pos : pos + h.size]))
    return out


def records_on_disk(log: Log) -> list[Record]:
    out: list[Record] = []
    for h, raw in batches_on_disk(log):
        out.extend(decode_records(raw, 0, h))
    return out


def clean_fully(
    log: Log,
    now_ms: int,
    offset_map: OffsetMap,
    checkpoint: int | None = None,
    max_passes: int = 100,
) -> tuple[int | None, list[CleanResult]]:
    """Passes until the first dirty offset reaches the cleanable end; returns the
    checkpoint and the results."""
    results: list[CleanResult] = []
    for _ in range(max_passes):
        r = clean_log(log, offset_map=offset_map, now_ms=now_ms, checkpoint=checkpoint, force=True)
        if r is None:
            break
        results.append(r)
        checkpoint = r.map_end
        if r.map_end >= r.first_uncleanable:
            break
    return checkpoint, results
