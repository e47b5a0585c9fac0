"""seglog dump-log (our kafka-dump-log.sh): exact Kafka lines, verification, no writes."""

from __future__ import annotations

import builtins
import hashlib
import io
import os
import struct
from pathlib import Path

import pytest

from seglog.storage import dump_log_reader
from seglog.storage.checkpoint_file import LeaderEpochCheckpointFile
from seglog.storage.compression import CompressionType
from seglog.storage.dump_log import DumpOptions, dump_files
from seglog.storage.log import Log
from seglog.storage.log_config import LogConfig
from seglog.storage.partition_metadata import PartitionMetadataFile
from seglog.storage.producer_snapshot import SnapshotEntry, write_snapshot
from seglog.storage.record_batch import NewRecord, TimestampType, build_batch

T0 = 1_700_000_000_000
SEG0 = "00000000000000000000"


def _hex(text: str) -> bytes:
    return bytes.fromhex(" ".join(line[6:] for line in text.strip().splitlines()))


# docs/architecture.md (storage) : two records, uncompressed, offsets 0-1, leader epoch 0.
EXAMPLE_1 = _hex(
    """
0000  00 00 00 00 00 00 00 00 00 00 00 4f 00 00 00 00
0010  02 44 69 c8 8d 00 00 00 00 00 01 00 00 01 8b cf
0020  e5 68 00 00 00 01 8b cf e5 68 05 ff ff ff ff ff
0030  ff ff ff ff ff ff ff ff ff 00 00 00 02 1a 00 00
0040  00 04 6b 31 0a 68 65 6c 6c 6f 00 1e 00 0a 02 01
0050  0a 77 6f 72 6c 64 02 02 68 02 76
"""
)
# 2.11: idempotent, producer 1000 epoch 0, base sequence 5, offset 42, leader epoch 7.
EXAMPLE_2 = _hex(
    """
0000  00 00 00 00 00 00 00 2a 00 00 00 39 00 00 00 07
0010  02 84 df 47 7a 00 00 00 00 00 00 00 00 01 8b cf
0020  e5 68 00 00 00 01 8b cf e5 68 00 00 00 00 00 00
0030  00 03 e8 00 00 00 00 00 05 00 00 00 01 0e 00 00
0040  00 01 02 78 00
"""
)
# 2.12: COMMIT marker, coordinator epoch 3, offset 100.
EXAMPLE_3 = _hex(
    """
0000  00 00 00 00 00 00 00 64 00 00 00 42 00 00 00 07
0010  02 95 4b e1 06 00 30 00 00 00 00 00 00 01 8b cf
0020  e5 68 00 00 00 01 8b cf e5 68 00 00 00 00 00 00
0030  00 03 e8 00 00 ff ff ff ff 00 00 00 01 20 00 00
0040  00 08 00 00 00 01 0c 00 00 00 00 00 03 00
"""
)

EXAMPLE_1_LINE = (
    "baseOffset: 0 lastOffset: 1 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 "
    "producerEpoch: -1 partitionLeaderEpoch: 0 isTransactional: false isControl: false "
    "deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1700000000005 size: 91 "
    "magic: 2 compresscodec: none crc: 1147783309 isvalid: true"
)
EXAMPLE_2_LINE = (
    "baseOffset: 42 lastOffset: 42 count: 1 baseSequence: 5 lastSequence: 5 producerId: 1000 "
    "producerEpoch: 0 partitionLeaderEpoch: 7 isTransactional: false isControl: false "
    "deleteHorizonMs: OptionalLong.empty position: 91 CreateTime: 1700000000000 size: 69 "
    "magic: 2 compresscodec: none crc: 2229225338 isvalid: true"
)
EXAMPLE_3_LINE = (
    "baseOffset: 100 lastOffset: 100 count: 1 baseSequence: -1 lastSequence: -1 "
    "producerId: 1000 producerEpoch: 0 partitionLeaderEpoch: 7 isTransactional: true "
    "isControl: true deleteHorizonMs: OptionalLong.empty position: 160 "
    "CreateTime: 1700000000000 size: 78 magic: 2 compresscodec: none crc: 2504777990 "
    "isvalid: true"
)


def run(paths: list[Path], **kw: object) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    rc = dump_files(paths, DumpOptions(**kw), out, err)  # type: ignore[arg-type]
    return rc, out.getvalue(), err.getvalue()


def run_merged(paths: list[Path], **kw: object) -> tuple[int, str]:
    out = io.StringIO()
    rc = dump_files(paths, DumpOptions(**kw), out)  # type: ignore[arg-type]
    return rc, out.getvalue()


def write_examples(tmp_path: Path, *batches: bytes, name: str = f"{SEG0}.log") -> Path:
    path = tmp_path / name
    path.write_bytes(b"".join(batches))
    return path


def make_log(
    tmp_path: Path,
    batches: int = 12,
    epochs: tuple[int, ...] = (0, 3),
    compression: CompressionType = CompressionType.NONE,
    **overrides: object,
) -> tuple[Path, list[tuple[int, int]]]:
    """A closed partition dir t-0 with one batch per append, every batch after the
    first indexed; returns the dir and each batch's (last offset, max timestamp)."""
    directory = tmp_path / "t-0"
    config = LogConfig.defaults().with_overrides({"index.interval.bytes": 1, **overrides})
    log = Log.open(directory, config, time_ms=T0, topic_id="q4RDr2lTR8y1Wy6eYUpl6g")
    info: list[tuple[int, int]] = []
    offset = 0
    for i in range(batches):
        records = [
            NewRecord(
                value=f"value-{i}-{j}".encode(), key=f"k{j}".encode(), timestamp=T0 + 10 * i + j
            )
            for j in range(i % 3 + 1)
        ]
        batch = build_batch(
            records,
            producer_id=1000,
            producer_epoch=0,
            base_sequence=offset,
            compression=compression,
        )
        epoch = epochs[0] if i < batches // 2 else epochs[-1]
        log.append_as_leader(batch, leader_epoch=epoch, time_ms=T0 + 1000)
        offset += len(records)
        info.append((offset - 1, T0 + 10 * i + len(records) - 1))
    log.close()
    return directory, info


def read_index(path: Path) -> list[tuple[int, int]]:
    return list(struct.iter_unpack(">ii", path.read_bytes()))


def read_time_index(path: Path) -> list[tuple[int, int]]:
    return list(struct.iter_unpack(">qi", path.read_bytes()))


def tree_hashes(directory: Path) -> dict[str, tuple[str, int]]:
    return {
        p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(directory.iterdir())
    }


# ------------------------------------------------------------------------ .log


def test_worked_example_batch_line(tmp_path: Path) -> None:
    path = write_examples(tmp_path, EXAMPLE_1)
    rc, out, err = run([path])
    assert (rc, err) == (0, "")
    assert out.splitlines() == [f"Dumping {path}", "Log starting offset: 0", EXAMPLE_1_LINE]


def test_worked_examples_idempotent_and_commit_marker(tmp_path: Path) -> None:
    path = write_examples(tmp_path, EXAMPLE_1, EXAMPLE_2, EXAMPLE_3)
    rc, out, _err = run([path])
    assert rc == 0
    assert out.splitlines()[2:] == [EXAMPLE_1_LINE, EXAMPLE_2_LINE, EXAMPLE_3_LINE]


def test_print_data_log_record_lines(tmp_path: Path) -> None:
    path = write_examples(tmp_path, EXAMPLE_1, EXAMPLE_2, EXAMPLE_3)
    rc, out, err = run([path], print_data_log=True)
    assert rc == 0
    assert out.splitlines()[2:] == [
        EXAMPLE_1_LINE,
        "| offset: 0 CreateTime: 1700000000000 keySize: 2 valueSize: 5 sequence: -1 "
        "headerKeys: [] key: k1 payload: hello",
        # A null key is left out, as Kafka's DecoderMessageParser does.
        "| offset: 1 CreateTime: 1700000000005 keySize: -1 valueSize: 5 sequence: -1 "
        "headerKeys: [h] payload: world",
        EXAMPLE_2_LINE,
        "| offset: 42 CreateTime: 1700000000000 keySize: -1 valueSize: 1 sequence: 5 "
        "headerKeys: [] payload: x",
        EXAMPLE_3_LINE,
        "| offset: 100 CreateTime: 1700000000000 keySize: 4 valueSize: 6 sequence: -1 "
        "headerKeys: [] endTxnMarker: COMMIT coordinatorEpoch: 3",
    ]
    # Offsets 1 -> 42 -> 100 are reported like Kafka does, but are no error.
    assert f"Non-consecutive offsets in {path.absolute()}\n  1 is followed by 42\n" in err


def test_deep_iteration_without_print_data_log_has_no_payload(tmp_path: Path) -> None:
    path = write_examples(tmp_path, EXAMPLE_1)
    rc, out, _ = run([path], deep_iteration=True)
    assert rc == 0
    assert out.splitlines()[3] == (
        "| offset: 0 CreateTime: 1700000000000 keySize: 2 valueSize: 5 sequence: -1 headerKeys: []"
    )
    assert "payload" not in out


def test_skip_record_metadata_and_null_value(tmp_path: Path) -> None:
    batch = build_batch(
        [
            NewRecord(value=None, key=b"gone", timestamp=T0),
            NewRecord(
                value=b"\xff\xfeok", key=None, timestamp=T0, headers=[("a", b"1"), ("b", None)]
            ),
        ],
        now_ms=T0,
    )
    path = write_examples(tmp_path, batch)
    rc, out, _ = run([path], print_data_log=True, skip_record_metadata=True)
    assert rc == 0
    # Kafka's quirks: the key carries the indent, the payload always a single blank.
    assert out.splitlines()[3:] == ["| key: gone", " payload: \ufffd\ufffdok"]
    rc, out, _ = run([path], print_data_log=True)
    assert out.splitlines()[3].endswith(
        "keySize: 4 valueSize: -1 sequence: -1 headerKeys: [] key: gone"
    )
    assert out.splitlines()[4].endswith(
        "valueSize: 4 sequence: -1 headerKeys: [a,b] payload: \ufffd\ufffdok"
    )


def test_log_append_time_and_codec(tmp_path: Path) -> None:
    directory, _ = make_log(
        tmp_path,
        batches=2,
        compression=CompressionType.GZIP,
        **{"message.timestamp.type": "LogAppendTime"},
    )
    rc, out, err = run([directory / f"{SEG0}.log"], deep_iteration=True)
    assert (rc, err) == (0, "")
    lines = out.splitlines()
    appended = T0 + 1000
    assert f"LogAppendTime: {appended} " in lines[2] and "compresscodec: gzip" in lines[2]
    assert "CreateTime" not in out
    assert lines[3].startswith(f"| offset: 0 LogAppendTime: {appended} keySize: 2 valueSize: 9")


def test_real_log_batches_match_appends(tmp_path: Path) -> None:
    directory, info = make_log(tmp_path)
    rc, out, err = run([directory / f"{SEG0}.log"])
    assert (rc, err) == (0, "")
    batch_lines = out.splitlines()[2:]
    assert len(batch_lines) == len(info)
    position = 0
    for line, (last, max_ts) in zip(batch_lines, info, strict=True):
        fields = line.split()
        assert fields[fields.index("lastOffset:") + 1] == str(last)
        assert fields[fields.index("position:") + 1] == str(position)
        assert fields[fields.index("CreateTime:") + 1] == str(max_ts)
        assert line.endswith("isvalid: true")
        position += int(fields[fields.index("size:") + 1])
    assert position == (directory / f"{SEG0}.log").stat().st_size
    assert "partitionLeaderEpoch: 0" in batch_lines[0]
    assert "partitionLeaderEpoch: 3" in batch_lines[-1]


def test_truncated_tail_is_reported_as_invalid_bytes(tmp_path: Path) -> None:
    path = write_examples(tmp_path, EXAMPLE_1, EXAMPLE_2[:40])
    rc, out, err = run([path], print_data_log=True)
    assert rc == 1
    assert out.splitlines()[-1] == f"Found 40 invalid bytes at the end of {path.name}"
    assert "Traceback" not in out + err


def test_corrupt_length_tail_is_reported_not_raised(tmp_path: Path) -> None:
    # A zero-filled (preallocated) tail: batch length 0.
    path = write_examples(tmp_path, EXAMPLE_1, bytes(100))
    rc, out, err = run([path])
    assert rc == 1
    assert out.splitlines()[-1] == f"Found 100 invalid bytes at the end of {path.name}"
    assert "smaller than minimum record overhead (14)" in err


def test_legacy_and_unknown_magic_stop_the_scan(tmp_path: Path) -> None:
    legacy = bytearray(EXAMPLE_2)
    legacy[16] = 1  # a v1 message set: not decoded, and not called invalid bytes
    path = write_examples(tmp_path, EXAMPLE_1, bytes(legacy))
    rc, out, err = run([path])
    assert rc == 1
    assert out.splitlines()[2:] == [EXAMPLE_1_LINE]
    assert "magic 1 (message format v1)" in err
    legacy[16] = 3
    path.write_bytes(EXAMPLE_1 + bytes(legacy))
    rc, out, err = run([path])
    assert rc == 1
    assert out.splitlines()[2:] == [
        EXAMPLE_1_LINE,
        f"Found 69 invalid bytes at the end of {path.name}",
    ]
    assert "unknown magic 3" in err


def test_crc_mismatch_prints_isvalid_false(tmp_path: Path) -> None:
    bad = bytearray(EXAMPLE_1)
    bad[-1] ^= 0xFF  # last header value byte: CRC-covered
    path = write_examples(tmp_path, bytes(bad), EXAMPLE_2)
    rc, out, err = run([path])
    assert rc == 1
    lines = out.splitlines()
    assert lines[2] == EXAMPLE_1_LINE.replace("isvalid: true", "isvalid: false")
    assert lines[3] == EXAMPLE_2_LINE
    assert "failed its CRC check" in err


def test_max_bytes_stops_early_without_invalid_bytes(tmp_path: Path) -> None:
    path = write_examples(tmp_path, EXAMPLE_1, EXAMPLE_2, EXAMPLE_3)
    rc, out, err = run([path], max_bytes=91 + 69 + 10)
    assert (rc, err) == (0, "")
    assert out.splitlines()[2:] == [EXAMPLE_1_LINE, EXAMPLE_2_LINE]


def test_chunked_reads_give_identical_output(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory, _ = make_log(tmp_path, batches=30)
    files = [directory / f"{SEG0}{s}" for s in (".log", ".index", ".timeindex")]
    expected = run_merged(files, print_data_log=True)
    assert expected[0] == 0
    monkeypatch.setattr(dump_log_reader, "_CHUNK", 7)  # smaller than one header: refill constantly
    monkeypatch.setattr(dump_log_reader, "_STREAM_CRC_ABOVE", 0)  # streaming CRC for every batch
    assert run_merged(files, print_data_log=True) == expected
    bad = bytearray(EXAMPLE_1)
    bad[70] ^= 1
    path = write_examples(tmp_path, bytes(bad), name=f"{SEG0}.log")
    assert "isvalid: false" in run_merged([path])[1]


# ---------------------------------------------------------------------- indexes


def test_index_lines_and_verification(tmp_path: Path) -> None:
    directory, info = make_log(tmp_path)
    index = directory / f"{SEG0}.index"
    entries = read_index(index)
    assert len(entries) == len(info) - 1  # index.interval.bytes=1: every batch but the first
    rc, out, err = run([index])
    assert (rc, err) == (0, "")
    assert out.splitlines() == [f"Dumping {index}"] + [
        f"offset: {rel} position: {pos}" for rel, pos in entries
    ]
    assert [rel for rel, _ in entries] == [last for last, _ in info[1:]]
    rc, out, err = run([index], verify_index_only=True)
    assert (rc, out, err) == (0, f"Dumping {index}\n", "")


def test_tampered_index_is_reported(tmp_path: Path) -> None:
    directory, _ = make_log(tmp_path)
    index = directory / f"{SEG0}.index"
    entries = read_index(index)
    (rel3, _pos3), (rel4, pos4) = entries[3], entries[4]
    # Points at a later batch, which ends past rel3. (Pointing at an earlier batch
    # start is consistent: one append of several batches gets one entry.)
    entries[3] = (rel3, pos4)
    entries[4] = (rel4, 999_999)  # points past the end of the log
    index.write_bytes(b"".join(struct.pack(">ii", *e) for e in entries))
    rc, out, err = run([index], verify_index_only=True)
    assert rc == 1
    assert err.splitlines() == [
        f"Mismatches in :{index.absolute()}",
        f"  Index offset: {rel3}, log offset: {rel4}",
        f"  Index offset: {entries[4][0]}, log offset: -1",
        f"  Index position mismatch: offset {entries[4][0]} points at position 999999, "
        "where no valid batch starts",
    ]


def test_index_zero_tail_empty_and_missing_log(tmp_path: Path) -> None:
    directory, _ = make_log(tmp_path)
    index = directory / f"{SEG0}.index"
    entries = read_index(index)
    index.write_bytes(index.read_bytes() + bytes(8 * 5))  # preallocated tail after a crash
    rc, out, _ = run([index])
    assert rc == 0
    assert len(out.splitlines()) == 1 + len(entries)

    empty = tmp_path / f"{SEG0}.index"
    empty.write_bytes(b"")
    assert run([empty]) == (0, f"Dumping {empty}\n{empty} is empty.\n", "")

    orphan = tmp_path / "00000000000000000100.index"
    orphan.write_bytes(struct.pack(">ii", 5, 0))
    rc, out, err = run([orphan])
    assert rc == 1
    assert out.splitlines()[1] == "offset: 105 position: 0"
    assert "00000000000000000100.log not found" in err


def test_time_index_lines_and_verification(tmp_path: Path) -> None:
    directory, info = make_log(tmp_path)
    tindex = directory / f"{SEG0}.timeindex"
    entries = read_time_index(tindex)
    assert entries, "the fixture must produce time index entries"
    rc, out, err = run([tindex])
    assert (rc, err) == (0, "")
    assert out.splitlines() == [f"Dumping {tindex}"] + [
        f"timestamp: {ts} offset: {rel}" for ts, rel in entries
    ]
    by_offset = dict(info)
    for ts, rel in entries:
        assert by_offset[rel] == ts
    # Without the offset index the batches are found by scanning from position 0.
    (directory / f"{SEG0}.index").unlink()
    assert run([tindex]) == (0, out, "")


def test_tampered_time_index_is_reported(tmp_path: Path) -> None:
    directory, info = make_log(tmp_path)
    tindex = directory / f"{SEG0}.timeindex"
    entries = read_time_index(tindex)
    last_offsets = {last for last, _ in info}
    ts1, rel1 = entries[1]
    entries[1] = (ts1 + 1, rel1)  # no longer the batch's max timestamp
    # An offset inside a multi-record batch: the batch found ends elsewhere.
    j = next(j for j in range(2, len(entries)) if entries[j][1] - 1 not in last_offsets)
    ts_j, rel_j = entries[j]
    entries[j] = (ts_j, rel_j - 1)
    tindex.write_bytes(b"".join(struct.pack(">qi", *e) for e in entries))
    rc, out, err = run([tindex], verify_index_only=True)
    assert rc == 1
    assert out == f"Dumping {tindex}\n"
    assert err.splitlines() == [
        f"Found timestamp mismatch in :{tindex.absolute()}",
        f"  Index timestamp: {ts1 + 1}, log timestamp: {ts1}",
        "The following indexed offsets are not found in the log.",
        f"Indexed offset: {rel_j - 1}, found log offset: {rel_j}",
    ]


def test_time_index_out_of_order_is_reported(tmp_path: Path) -> None:
    directory, _ = make_log(tmp_path)
    tindex = directory / f"{SEG0}.timeindex"
    entries = read_time_index(tindex)
    entries[2] = (entries[1][0], entries[1][1])  # same entry twice: timestamps must grow
    tindex.write_bytes(b"".join(struct.pack(">qi", *e) for e in entries))
    rc, _out, err = run([tindex])
    assert rc == 1
    assert (
        f"Found out of order timestamp in :{tindex.absolute()}\n"
        f"  Index timestamp: {entries[1][0]}, Previously indexed timestamp: {entries[1][0]}\n"
    ) in err


def test_index_sanity_check(tmp_path: Path) -> None:
    directory, _ = make_log(tmp_path)
    index = directory / f"{SEG0}.index"
    tindex = directory / f"{SEG0}.timeindex"
    rc, out, err = run([index, tindex], index_sanity_check=True)
    assert (rc, err) == (0, "")
    assert out.splitlines() == [
        f"Dumping {index}",
        f"{index} passed sanity check.",
        f"Dumping {tindex}",
        f"{tindex} passed sanity check.",
    ]
    index.write_bytes(index.read_bytes() + b"\x00\x00\x00")  # not a whole number of entries
    rc, out, err = run([index], index_sanity_check=True)
    assert rc == 1
    assert "passed" not in out
    assert f"Index file {index} is corrupt" in err and "multiple of 8" in err


# -------------------------------------------------------- snapshot, checkpoints


def test_producer_snapshot_lines(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000061.snapshot"
    write_snapshot(
        path,
        [
            SnapshotEntry(1000, 0, 9, 41, 4, 1700000000005, -1, -1),
            SnapshotEntry(2000, 3, 119, 60, 2, 1700000000007, 12, 55),
            SnapshotEntry(3000, 1, -1, -1, 0, 1700000000009, 5, -1),
        ],
    )
    rc, out, err = run([path])
    assert (rc, err) == (0, "")
    assert out.splitlines() == [
        f"Dumping {path}",
        "producerId: 1000 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: "
        "OptionalLong.empty lastTimestamp: 1700000000005 firstSequence: 5 lastSequence: 9 "
        "lastOffset: 41 offsetDelta: 4 timestamp: 1700000000005",
        "producerId: 2000 producerEpoch: 3 coordinatorEpoch: 12 currentTxnFirstOffset: "
        "OptionalLong[55] lastTimestamp: 1700000000007 firstSequence: 117 lastSequence: 119 "
        "lastOffset: 60 offsetDelta: 2 timestamp: 1700000000007",
        # No batch: Kafka prints the entry's fields and a trailing blank.
        "producerId: 3000 producerEpoch: 1 coordinatorEpoch: 5 currentTxnFirstOffset: "
        "OptionalLong.empty lastTimestamp: 1700000000009 ",
    ]
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    rc, out, err = run([path])
    assert rc == 1 and "CRC mismatch" in err and "producerId" not in out


def test_snapshot_of_real_log(tmp_path: Path) -> None:
    directory, info = make_log(tmp_path)
    snapshots = sorted(directory.glob("*.snapshot"))
    assert snapshots
    rc, out, _ = run([snapshots[-1]])
    assert rc == 0
    last_offset, max_ts = info[-1]
    first_offset = info[-2][0] + 1
    assert out.splitlines()[1] == (
        "producerId: 1000 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: "
        f"OptionalLong.empty lastTimestamp: {max_ts} firstSequence: {first_offset} "
        f"lastSequence: {last_offset} lastOffset: {last_offset} "
        f"offsetDelta: {last_offset - first_offset} timestamp: {max_ts}"
    )


def test_leader_epoch_checkpoint(tmp_path: Path) -> None:
    directory, info = make_log(tmp_path, epochs=(0, 3))
    path = directory / "leader-epoch-checkpoint"
    assert LeaderEpochCheckpointFile(path).read() == [(0, 0), (3, info[5][0] + 1)]
    rc, out, err = run([path])
    assert (rc, err) == (0, "")
    assert out.splitlines() == [
        f"Dumping {path}",
        "epoch: 0 startOffset: 0",
        f"epoch: 3 startOffset: {info[5][0] + 1}",
    ]
    path.write_text("0\n2\n0 0\n")  # count does not match
    rc, _, err = run([path])
    assert rc == 1 and "Expected 2 entries" in err


def test_offset_checkpoint_and_partition_metadata(tmp_path: Path) -> None:
    checkpoint = tmp_path / "recovery-point-offset-checkpoint"
    checkpoint.write_text("0\n2\nt 0 5\norders 12 1500\n")
    metadata = tmp_path / "partition.metadata"
    PartitionMetadataFile(metadata).write("q4RDr2lTR8y1Wy6eYUpl6g")
    rc, out, err = run([checkpoint, metadata])
    assert (rc, err) == (0, "")
    assert out.splitlines() == [
        f"Dumping {checkpoint}",
        "topic: t partition: 0 offset: 5",
        "topic: orders partition: 12 offset: 1500",
        f"Dumping {metadata}",
        "version: 0 topicId: q4RDr2lTR8y1Wy6eYUpl6g",
    ]


def test_txn_index(tmp_path: Path) -> None:
    path = tmp_path / f"{SEG0}.txnindex"
    path.write_bytes(struct.pack(">hqqqq", 0, 2000, 55, 61, 62))
    rc, out, _ = run([path])
    assert rc == 0
    assert out.splitlines()[1] == (
        "version: 0 producerId: 2000 firstOffset: 55 lastOffset: 61 lastStableOffset: 62"
    )
    path.write_bytes(path.read_bytes() + b"\x00")
    assert run([path])[0] == 1


# ------------------------------------------------------------------ errors, safety


def test_unknown_and_missing_files_do_not_stop_the_others(tmp_path: Path) -> None:
    unknown = tmp_path / "notes.txt"
    unknown.write_text("hello")
    missing = tmp_path / f"{SEG0}.timeindex"
    good = write_examples(tmp_path, EXAMPLE_1)
    rc, out, err = run([unknown, missing, good])
    assert rc == 1
    assert out.splitlines() == [
        f"Dumping {unknown}",
        f"Dumping {missing}",
        f"Dumping {good}",
        "Log starting offset: 0",
        EXAMPLE_1_LINE,
    ]
    err_lines = err.splitlines()
    assert len(err_lines) == 2
    assert err_lines[0].startswith(f"Ignoring unknown file {unknown}")
    assert err_lines[1] == f"Cannot dump {missing}: no such file"
    assert not missing.exists()
    assert run([good]) == (0, f"Dumping {good}\nLog starting offset: 0\n{EXAMPLE_1_LINE}\n", "")


def test_dump_never_modifies_any_file(tmp_path: Path) -> None:
    directory, _ = make_log(tmp_path, compression=CompressionType.LZ4)
    # Shapes that writable index code would "fix": an odd-length index and a
    # preallocated time index tail.
    odd = directory / "00000000000000009999.index"
    odd.write_bytes(struct.pack(">ii", 1, 0) + b"\x01\x02\x03")
    tindex = directory / f"{SEG0}.timeindex"
    tindex.write_bytes(tindex.read_bytes() + bytes(12 * 4))
    os.utime(odd, ns=(1, 1))  # any write would bump the mtime
    before = tree_hashes(directory)
    files = sorted(directory.iterdir())
    files += [directory / "cleaner-offset-checkpoint", directory / "00000000000000000077.index"]
    option_sets: list[dict[str, object]] = [
        {},
        {"print_data_log": True},
        {"verify_index_only": True},
        {"index_sanity_check": True},
        {"max_bytes": 100},
    ]
    for kw in option_sets:
        run(files, **kw)
    assert tree_hashes(directory) == before
    for path in files:
        assert os.access(path, os.F_OK) == (path.name in before)


def test_no_file_is_ever_opened_for_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stronger than hashing: catches a read-write open or mmap that happens to
    leave the bytes alone (e.g. the index classes' constructors)."""
    directory, _ = make_log(tmp_path)
    (directory / "recovery-point-offset-checkpoint").write_text("0\n1\nt 0 12\n")
    files = sorted(directory.iterdir()) + [directory / "replication-offset-checkpoint"]
    watched = directory.resolve()
    writes = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
    violations: list[str] = []
    real_os_open, real_io_open = os.open, io.open

    def inside(file: object) -> bool:
        return isinstance(file, str | Path) and Path(file).resolve().parent == watched

    def guarded_os_open(path: str | Path, flags: int, *args: object, **kw: object) -> int:
        if inside(path) and flags & writes:
            violations.append(f"os.open({path}, {flags:#o})")
        return real_os_open(path, flags, *args, **kw)  # type: ignore[arg-type]

    def guarded_open(file: object, mode: str = "r", *args: object, **kw: object) -> object:
        if inside(file) and any(c in mode for c in "wax+"):
            violations.append(f"open({file}, {mode})")
        return real_io_open(file, mode, *args, **kw)  # type: ignore[call-overload]

    monkeypatch.setattr(os, "open", guarded_os_open)
    monkeypatch.setattr(io, "open", guarded_open)
    monkeypatch.setattr(builtins, "open", guarded_open)
    for kw in ({}, {"print_data_log": True}, {"index_sanity_check": True}):
        rc, _out, err = run(files, **kw)
        assert rc == 1 and err.count("Cannot dump") == 1  # the missing checkpoint only
    assert violations == []
    assert not (directory / "replication-offset-checkpoint").exists()


def test_compression_codecs_decode(tmp_path: Path) -> None:
    batches = [
        build_batch(
            [NewRecord(value=b"v" * 50, key=b"k", timestamp=T0)],
            base_offset=i,
            compression=codec,
            timestamp_type=TimestampType.CREATE_TIME,
            partition_leader_epoch=0,
        )
        for i, codec in enumerate(CompressionType)
    ]
    path = write_examples(tmp_path, *batches)
    rc, out, err = run([path], print_data_log=True)
    assert (rc, err) == (0, "")
    names = [line.split("compresscodec: ")[1].split()[0] for line in out.splitlines()[2::2]]
    assert names == ["none", "gzip", "snappy", "lz4", "zstd"]
    assert out.count("key: k payload: " + "v" * 50) == 5
