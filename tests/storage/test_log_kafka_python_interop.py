"""Log-level interoperability with kafka-python 3.0.12, a RecordBatch v2 implementation we
did not write.

(a) Batches kafka-python builds (several per append, plain, idempotent and transactional,
    every codec the installed libraries support) go in through Log.append_as_leader and
    come back out of Log.read; our decoder and kafka-python's MemoryRecords both give the
    original keys, values, headers and timestamps at the offsets the leader assigned.
(b) Every batch the Log wrote, found by walking the `.log` files with plain reads, parses
    in kafka-python and passes its validate_crc(); kafka-python reports the base offsets
    and partitionLeaderEpoch the leader rewrote in place, the CRC the producer computed,
    and positions / offsets / timestamps that agree with our `.index` and `.timeindex`.
"""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from seglog.storage.compression import CompressionType
from seglog.storage.log import Log
from seglog.storage.log_config import LogConfig
from seglog.storage.record_batch import BatchHeader, decode_records, iter_batches

kafka_codec = pytest.importorskip("kafka.codec")
default_records = pytest.importorskip("kafka.record.default_records")
memory_records = pytest.importorskip("kafka.record.memory_records")

DefaultRecordBatch = default_records.DefaultRecordBatch
DefaultRecordBatchBuilder = default_records.DefaultRecordBatchBuilder
MemoryRecords = memory_records.MemoryRecords

T0 = 1_700_000_000_000
TOPIC_DIR = "interop-0"
# small segments and a dense index, so the log spans several segments with several entries
# even when compression shrinks the batches
CONFIG = LogConfig(segment_bytes=2500, index_interval_bytes=300, segment_index_bytes=4096)

_AVAILABLE = {
    CompressionType.NONE: True,
    CompressionType.GZIP: kafka_codec.has_gzip(),
    CompressionType.SNAPPY: kafka_codec.has_snappy(),
    CompressionType.LZ4: kafka_codec.has_lz4(),
    CompressionType.ZSTD: kafka_codec.has_zstd(),
}
CODECS = [
    pytest.param(
        codec,
        id=codec.name.lower(),
        marks=pytest.mark.skipif(
            not available,
            reason=f"kafka-python cannot use {codec.name.lower()}: its codec library is missing",
        ),
    )
    for codec, available in _AVAILABLE.items()
]

Row = tuple[int, int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


@dataclass(frozen=True)
class Rec:
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass(frozen=True)
class Producer:
    producer_id: int = -1
    producer_epoch: int = -1
    transactional: bool = False


PLAIN = Producer()
IDEMPOTENT = Producer(producer_id=77, producer_epoch=2)
TRANSACTIONAL = Producer(producer_id=91, producer_epoch=0, transactional=True)


@dataclass
class SentBatch:
    """One kafka-python batch as the producer sent it, and what the leader assigned."""

    records: list[Rec]
    producer: Producer
    base_sequence: int
    crc: int
    size: int
    base_offset: int = -1
    leader_epoch: int = -1

    @property
    def last_offset(self) -> int:
        return self.base_offset + len(self.records) - 1

    def rows(self) -> list[Row]:
        return [
            (self.base_offset + i, r.timestamp, r.key, r.value, r.headers)
            for i, r in enumerate(self.records)
        ]


@dataclass
class Written:
    log: Log
    batches: list[SentBatch] = field(default_factory=list)
    appends: list[bytes] = field(default_factory=list)  # payloads as sent, for retries

    def rows(self) -> list[Row]:
        return [row for b in self.batches for row in b.rows()]


def kafka_build(records: list[Rec], codec: CompressionType, producer: Producer, seq: int) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=producer.transactional,
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        base_sequence=seq if producer.producer_id >= 0 else -1,
        batch_size=1 << 24,
    )
    for offset, r in enumerate(records):
        assert builder.append(offset, r.timestamp, r.key, r.value, list(r.headers)) is not None
    return bytes(builder.build())


def random_records(rng: random.Random, n: int, t: int, codec: CompressionType) -> list[Rec]:
    records = []
    for i in range(n):
        key = rng.choice([None, b"", f"key-{rng.randrange(1000)}".encode()])
        # compressible, so that kafka-python's builder really uses the codec
        value = rng.choice([None, b"", (b"value %d " % rng.randrange(100)) * rng.randint(1, 12)])
        headers = tuple(
            (rng.choice(["h", "trace-id", "ünï"]), rng.choice([None, b"", rng.randbytes(5)]))
            for _ in range(rng.randint(0, 2))
        )
        # timestamps are not sorted inside a batch: deltas can be negative
        records.append(Rec(key, value, t + i * 3 + rng.randint(-2, 2), headers))
    if codec != CompressionType.NONE:
        records.append(Rec(b"padding", b"seglog interop padding " * 20, t + n * 3))
    return records


def write_log(
    directory: Path, codec: CompressionType, *, seed: int, appends: int = 24, config=CONFIG
) -> Written:
    """Append kafka-python batches: 1-4 per append, from three kinds of producer, in two
    leader epochs; check the offsets each append is given."""
    rng = random.Random(seed)
    log = Log.open(directory, config, time_ms=T0)
    out = Written(log)
    sequences = {IDEMPOTENT.producer_id: 0, TRANSACTIONAL.producer_id: 0}
    t = T0
    for i in range(appends):
        epoch = 3 if i < appends // 2 else 5
        producer = [PLAIN, IDEMPOTENT, TRANSACTIONAL][i % 3]
        payload = bytearray()
        sent = []
        for _ in range(rng.randint(1, 4)):
            records = random_records(rng, rng.randint(1, 6), t, codec)
            seq = sequences.get(producer.producer_id, -1)
            data = kafka_build(records, codec, producer, seq)
            if len(payload) + len(data) > config.segment_bytes:
                break  # an append may not exceed segment.bytes
            t += 3 * len(records) + 5
            if producer.producer_id >= 0:
                sequences[producer.producer_id] = seq + len(records)
            kb = DefaultRecordBatch(data)
            assert kb.compression_type == int(codec)  # the codec really was used
            assert (kb.base_offset, kb.leader_epoch) == (0, 0)  # as the producer sends it
            sent.append(SentBatch(records, producer, seq, kb.crc, len(data)))
            payload += data
        leo = log.log_end_offset
        info = log.append_as_leader(bytes(payload), epoch, time_ms=t)
        assert not info.duplicate
        assert info.first_offset == leo
        offset = leo
        for b in sent:
            b.base_offset, b.leader_epoch = offset, epoch
            offset += len(b.records)
        assert info.last_offset == offset - 1 == log.log_end_offset - 1
        assert info.record_count == sum(len(b.records) for b in sent)
        out.batches += sent
        out.appends.append(bytes(payload))
    assert len(log.segments) >= 3
    # some appends carried several batches
    assert any(len(a) > DefaultRecordBatch(a).size_in_bytes for a in out.appends)
    return out


def read_everything(log: Log, max_bytes: int) -> bytes:
    out = bytearray()
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        got = log.read(offset, max_bytes)
        assert got.records and got.next_offset > offset
        out += got.records
        offset = got.next_offset
    return bytes(out)


def our_rows(data: bytes) -> list[Row]:
    return [
        (r.offset, r.timestamp, r.key, r.value, tuple((h.key, h.value) for h in r.headers))
        for pos, h in iter_batches(data)
        for r in decode_records(data, pos, h)
    ]


def kafka_rows(data: bytes) -> list[Row]:
    rows = []
    records = MemoryRecords(data)
    for kb in records:
        assert kb.validate_crc()
        rows += [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in kb]
    assert records.valid_bytes() == len(data)
    return rows


# ------------------------------------------------------------------------------------
# (a) kafka-python batches through Log.append_as_leader and Log.read
# ------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_read_back_with_assigned_offsets(
    tmp_path: Path, codec: CompressionType
) -> None:
    w = write_log(tmp_path / TOPIC_DIR, codec, seed=int(codec))
    expected = w.rows()
    assert [row[0] for row in expected] == list(range(w.log.log_end_offset))

    for max_bytes in (1, 1000, 1 << 20):  # one batch per read, a few, everything
        data = read_everything(w.log, max_bytes)
        assert our_rows(data) == expected
        assert kafka_rows(data) == expected

    # a read at any offset starts with the batch holding it, as kafka-python sees it
    for b in w.batches:
        for offset in range(b.base_offset, b.last_offset + 1):
            kb = next(iter(MemoryRecords(w.log.read(offset, 1).records)))
            assert (kb.base_offset, kb.last_offset, kb.crc) == (b.base_offset, b.last_offset, b.crc)

    # a producer retry of the last idempotent append is answered with its offsets
    leo = w.log.log_end_offset
    retry_index = max(i for i in range(len(w.appends)) if i % 3 == 1)
    first = next(b for b in w.batches if b.crc == DefaultRecordBatch(w.appends[retry_index]).crc)
    info = w.log.append_as_leader(w.appends[retry_index], 5, time_ms=T0)
    assert info.duplicate and info.first_offset == first.base_offset
    assert w.log.log_end_offset == leo
    w.log.close()


@pytest.mark.parametrize("codec", CODECS)
def test_log_append_time_topic_in_kafka_python(tmp_path: Path, codec: CompressionType) -> None:
    """The leader stamps LogAppendTime and recomputes the CRC; kafka-python agrees."""
    config = LogConfig(
        segment_bytes=9000,
        index_interval_bytes=600,
        segment_index_bytes=4096,
        message_timestamp_type="LogAppendTime",
    )
    log = Log.open(tmp_path / TOPIC_DIR, config, time_ms=T0)
    rng = random.Random(7)
    appended_at = []
    for i in range(6):
        now = T0 + 1_000 * (i + 1)
        batches = [
            kafka_build(random_records(rng, 3, T0 - 50_000, codec), codec, PLAIN, -1)
            for _ in range(2)
        ]
        info = log.append_as_leader(b"".join(batches), 1, time_ms=now)
        assert info.log_append_time == now
        appended_at += [now, now]
    data = read_everything(log, 1 << 20)
    kbs = list(MemoryRecords(data))
    assert len(kbs) == len(appended_at)
    for kb, now in zip(kbs, appended_at, strict=True):
        assert kb.validate_crc()
        assert (kb.timestamp_type, kb.max_timestamp) == (1, now)
        assert {(r.timestamp, r.timestamp_type) for r in kb} == {(now, 1)}
    assert {row[1] for row in our_rows(data)} == set(appended_at)
    log.close()


# ------------------------------------------------------------------------------------
# (b) the `.log` files, read directly, in kafka-python
# ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class FileBatch:
    position: int
    base_offset: int
    last_offset: int
    leader_epoch: int
    crc: int
    max_timestamp: int
    size: int


def kafka_walk(part_dir: Path) -> dict[int, list[FileBatch]]:
    """segment base offset -> its batches, as kafka-python parses the raw `.log` file."""
    segments = {}
    for path in sorted(part_dir.glob("*.log")):
        data = path.read_bytes()
        records = MemoryRecords(data)
        assert records.valid_bytes() == len(data), f"{path.name} ends in a partial batch"
        batches = []
        position = 0
        for kb in records:
            assert kb.magic == 2
            assert kb.validate_crc(), f"{path.name} @ {position}"
            batches.append(
                FileBatch(
                    position,
                    kb.base_offset,
                    kb.last_offset,
                    kb.leader_epoch,
                    kb.crc,
                    kb.max_timestamp,
                    kb.size_in_bytes,
                )
            )
            position += kb.size_in_bytes
        assert position == len(data)
        segments[int(path.name.split(".")[0])] = batches
    return segments


def raw_entries(path: Path, fmt: str) -> list[tuple[int, ...]]:
    entry = struct.Struct(fmt)
    raw = path.read_bytes()
    assert len(raw) % entry.size == 0, f"{path.name} is not a whole number of entries"
    return [entry.unpack_from(raw, i) for i in range(0, len(raw), entry.size)]


def check_indexes_against(part_dir: Path, segments: dict[int, list[FileBatch]]) -> int:
    """Our closed `.index` / `.timeindex` files against kafka-python's view of the `.log`;
    returns the number of offset index entries checked."""
    checked = 0
    for base, batches in segments.items():
        at = {b.position: b for b in batches}
        previous = -1
        for relative, position in raw_entries(part_dir / f"{base:020d}.index", ">ii"):
            offset = base + relative
            assert offset > previous
            previous = offset
            # the entry names a batch boundary, and a last offset at or after that batch
            assert position in at, (base, offset, position)
            assert at[position].base_offset <= offset
            assert offset in {b.last_offset for b in batches if b.position >= position}
            checked += 1
        previous_ts = -1
        for ts, relative in raw_entries(part_dir / f"{base:020d}.timeindex", ">qi"):
            offset = base + relative
            assert ts > previous_ts
            previous_ts = ts
            # the max timestamp of the segment up to that offset, carried by that batch
            (carrier,) = [b for b in batches if b.last_offset == offset]
            assert carrier.max_timestamp == ts
            assert ts == max(b.max_timestamp for b in batches if b.last_offset <= offset)
        if batches:  # a closed segment's time index ends with its max timestamp
            assert previous_ts == max(b.max_timestamp for b in batches)
    return checked


@pytest.mark.parametrize("codec", CODECS)
def test_every_batch_on_disk_parses_in_kafka_python(tmp_path: Path, codec: CompressionType) -> None:
    part_dir = tmp_path / TOPIC_DIR
    w = write_log(part_dir, codec, seed=100 + int(codec))
    segment_bases = [s.base_offset for s in w.log.segments]
    w.log.close()

    segments = kafka_walk(part_dir)
    assert list(segments) == segment_bases
    on_disk = [b for batches in segments.values() for b in batches]
    # exactly the batches sent, with the base offset and epoch the leader wrote in place
    # and the CRC the producer computed (neither field is covered by it)
    assert [(b.base_offset, b.last_offset, b.leader_epoch, b.crc, b.size) for b in on_disk] == [
        (s.base_offset, s.last_offset, s.leader_epoch, s.crc, s.size) for s in w.batches
    ]
    for base, batches in segments.items():
        assert batches[0].base_offset == base  # a segment is named after its first offset
    assert {b.leader_epoch for b in on_disk} == {3, 5}
    assert check_indexes_against(part_dir, segments) >= len(segments)

    # the leader epochs we checkpointed are where kafka-python sees each epoch begin
    epochs = (part_dir / "leader-epoch-checkpoint").read_text().split("\n")
    first_of = {5: min(b.base_offset for b in on_disk if b.leader_epoch == 5), 3: 0}
    assert epochs == ["0", "2", f"3 {first_of[3]}", f"5 {first_of[5]}", ""]

    # recovery rebuilds every index from the `.log` (per batch, not per append): the
    # rebuilt files must agree with kafka-python's view just as well
    log = Log.open(part_dir, CONFIG, recovery_point=0, time_ms=T0)
    assert log.log_end_offset == w.log.log_end_offset
    log.close()
    assert kafka_walk(part_dir) == segments
    assert check_indexes_against(part_dir, segments) >= len(segments)


def test_the_segment_files_concatenated_are_one_kafka_python_record_set(tmp_path: Path) -> None:
    """Across every segment and codec: one MemoryRecords over all `.log` files gives every
    record at the offset the leader assigned, exactly as our decoder does."""
    part_dir = tmp_path / TOPIC_DIR
    codecs = [c for c, ok in _AVAILABLE.items() if ok]
    log = Log.open(part_dir, CONFIG, time_ms=T0)
    rng = random.Random(11)
    expected: list[Row] = []
    for i in range(30):
        codec = codecs[i % len(codecs)]
        records = random_records(rng, rng.randint(1, 6), T0 + 100 * i, codec)
        data = kafka_build(records, codec, PLAIN, -1)
        info = log.append_as_leader(data, 9, time_ms=T0)
        expected += [
            (info.first_offset + j, r.timestamp, r.key, r.value, r.headers)
            for j, r in enumerate(records)
        ]
    assert len(log.segments) >= 2
    log.close()
    everything = b"".join(p.read_bytes() for p in sorted(part_dir.glob("*.log")))
    assert kafka_rows(everything) == expected
    assert our_rows(everything) == expected
    codecs_seen = {
        BatchHeader.parse(everything, pos).compression for pos, _h in iter_batches(everything)
    }
    assert codecs_seen == set(codecs)
