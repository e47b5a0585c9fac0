"""Cleaned segments read by kafka-python 3.0.12's record reader: every batch of every
`.log` file parses, passes validate_crc(), and gives the records our decoder gives,
after passes that copy, filter, empty and re-stamp (delete horizon) batches in every
codec the installed libraries support."""

from __future__ import annotations

from pathlib import Path

import pytest
from cleaner_fixtures import RETENTION_MS, T0, clean_fully, compact_config, seal

from seglog.storage.compression import CompressionType
from seglog.storage.log import Log
from seglog.storage.offset_map import OffsetMap
from seglog.storage.record_batch import NewRecord, build_batch, decode_records, iter_batches

kafka_codec = pytest.importorskip("kafka.codec")
memory_records = pytest.importorskip("kafka.record.memory_records")
MemoryRecords = memory_records.MemoryRecords

_AVAILABLE = {
    CompressionType.NONE: True,
    CompressionType.GZIP: kafka_codec.has_gzip(),
    CompressionType.SNAPPY: kafka_codec.has_snappy(),
    CompressionType.LZ4: kafka_codec.has_lz4(),
    CompressionType.ZSTD: kafka_codec.has_zstd(),
}
CODECS = [c for c, ok in _AVAILABLE.items() if ok]

Row = tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


def ours(data: bytes) -> list[Row]:
    return [
        (r.offset, r.timestamp, r.key, r.value, tuple((h.key, h.value) for h in r.headers))
        for pos, h in iter_batches(data)
        for r in decode_records(data, pos, h)
    ]


def theirs(data: bytes) -> tuple[list[Row], list[tuple[int, int, int]]]:
    rows: list[Row] = []
    batches = []
    records = MemoryRecords(data)
    for kb in records:
        assert kb.magic == 2
        assert kb.validate_crc()
        batches.append((kb.base_offset, kb.last_offset, kb.producer_id))
        rows += [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in kb]
    assert records.valid_bytes() == len(data)
    return rows, batches


def check_files(directory: Path) -> list[Row]:
    all_rows: list[Row] = []
    for path in sorted(directory.glob("*.log")):
        data = path.read_bytes()
        rows, batches = theirs(data)
        assert rows == ours(data), path.name
        assert batches == [
            (h.base_offset, h.last_offset, h.producer_id) for _p, h in iter_batches(data)
        ]
        all_rows += rows
    return all_rows


def test_kafka_python_reads_every_cleaned_segment(tmp_path: Path) -> None:
    directory = tmp_path / "interop-0"
    log = Log.open(directory, compact_config(segment_bytes=3000), time_ms=T0)
    seq = 0
    for i in range(60):
        codec = CODECS[i % len(CODECS)]
        records = [
            NewRecord(
                None if (i + j) % 11 == 0 else b"value-%d-%d" % (i, j) * (1 + j),
                key=b"key-%d" % ((i * 3 + j) % 9),
                timestamp=T0 + i * 10 + j,
                headers=[("h", b"%d" % j)] if j % 2 else [],
            )
            for j in range(3)
        ]
        pid = 77 if i % 4 == 0 else -1
        batch = build_batch(
            records,
            compression=codec,
            producer_id=pid,
            producer_epoch=0 if pid >= 0 else -1,
            base_sequence=seq if pid >= 0 else -1,
            now_ms=T0,
        )
        if pid >= 0:
            seq += 3
        log.append_as_leader(batch, 3, time_ms=T0 + 1000)
    for codec in CODECS:  # the last word on two keys: tombstones, kept for a while
        tombstones = [NewRecord(None, key=b"key-%d" % j, timestamp=T0 + 900) for j in (0, 1)]
        log.append_as_leader(
            build_batch(tombstones, compression=codec, now_ms=T0), 3, time_ms=T0 + 1000
        )
    seal(log, T0 + 1000)
    before = check_files(directory)
    m = OffsetMap(1 << 16)
    cp, _ = clean_fully(log, T0 + 1000, m)  # filters, empties, sets delete horizons
    first = check_files(directory)
    assert any(r[3] is None for r in first)  # tombstones kept, in re-stamped batches
    assert len(first) < len(before)
    assert set(first) <= set(before)  # same offsets, timestamps, keys, values, headers
    clean_fully(log, T0 + 1000 + RETENTION_MS, m, cp)  # horizons passed: tombstones go
    second = check_files(directory)
    assert not any(r[3] is None for r in second if r[0] < log.active_segment.base_offset)
    assert set(second) <= set(first)
    log.close()
