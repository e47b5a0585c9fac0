"""Interoperability with kafka-python's independent RecordBatch v2 implementation.

(a) batches kafka-python builds pass our checks and decode to the same records;
(b) batches we build parse in kafka-python, pass its CRC check and give the same records;
(c) uncompressed batches built by both from the same inputs are byte-identical.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.storage.compression import CompressionType
from seglog.storage.record_batch import (
    NewRecord,
    Record,
    RecordHeader,
    TimestampType,
    build_batch,
    check_batch,
    decode_records,
    iter_batches,
    set_log_append_time,
    validate_client_batches,
)

kafka_codec = pytest.importorskip("kafka.codec")
default_records = pytest.importorskip("kafka.record.default_records")
memory_records = pytest.importorskip("kafka.record.memory_records")
kafka_crc = pytest.importorskip("kafka.record._crc32c")

DefaultRecordBatch = default_records.DefaultRecordBatch
DefaultRecordBatchBuilder = default_records.DefaultRecordBatchBuilder
MemoryRecords = memory_records.MemoryRecords

T0 = 1700000000000

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


@dataclass(frozen=True)
class Rec:
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True)
class Producer:
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    is_transactional: bool = False


bytes_or_null = st.none() | st.binary(max_size=40)
recs = st.builds(
    Rec,
    key=bytes_or_null,
    value=bytes_or_null,
    # kafka-python has no "missing timestamp" on append once given an int; deltas may be
    # negative as well as positive
    timestamp=st.one_of(st.integers(0, 2**50), st.integers(T0 - 5000, T0 + 5000)),
    headers=st.lists(st.tuples(st.text(max_size=8), bytes_or_null), max_size=3).map(tuple),
)
record_lists = st.lists(recs, min_size=1, max_size=10)
producers = st.one_of(
    st.just(Producer()),
    st.builds(
        Producer,
        producer_id=st.integers(0, 2**63 - 1),
        producer_epoch=st.integers(0, 2**15 - 1),
        base_sequence=st.integers(0, 2**31 - 1),
        is_transactional=st.booleans(),
    ),
)

# appended to compressed batches so that kafka-python's builder, which falls back to
# no compression when compressing does not pay, really uses the codec
PADDING = Rec(b"padding", b"seglog interop " * 100, T0, ())


def kafka_build(records: list[Rec], codec: CompressionType, producer: Producer) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=int(codec),
        is_transactional=producer.is_transactional,
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        base_sequence=producer.base_sequence,
        batch_size=1 << 24,
    )
    for offset, r in enumerate(records):
        meta = builder.append(offset, r.timestamp, r.key, r.value, list(r.headers))
        assert meta is not None
    return bytes(builder.build())


def seglog_build(
    records: list[Rec],
    codec: CompressionType,
    producer: Producer,
    *,
    base_offset: int = 0,
    leader_epoch: int = 0,  # what kafka-python's builder writes
) -> bytes:
    return build_batch(
        [NewRecord(r.value, r.key, r.timestamp, list(r.headers)) for r in records],
        base_offset=base_offset,
        partition_leader_epoch=leader_epoch,
        compression=codec,
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        base_sequence=producer.base_sequence,
        is_transactional=producer.is_transactional,
    )


def expected_records(records: list[Rec], base_offset: int = 0) -> list[Record]:
    return [
        Record(
            base_offset + i,
            r.timestamp,
            r.key,
            r.value,
            tuple(RecordHeader(k, v) for k, v in r.headers),
        )
        for i, r in enumerate(records)
    ]


def kafka_read(batch: DefaultRecordBatch) -> list[Record]:
    return [
        Record(
            r.offset, r.timestamp, r.key, r.value, tuple(RecordHeader(k, v) for k, v in r.headers)
        )
        for r in batch
    ]


# --- (a) kafka-python builds, seglog reads ------------------------------------------


@settings(max_examples=60, deadline=None)
@given(records=record_lists, producer=producers)
@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_pass_our_checks(
    codec: CompressionType, records: list[Rec], producer: Producer
) -> None:
    if codec != CompressionType.NONE:
        records = [*records, PADDING]
    data = kafka_build(records, codec, producer)

    (h,) = validate_client_batches(data)
    assert check_batch(data).crc == h.crc
    assert h.compression is codec  # the codec really was used
    assert h.size == len(data)
    assert (h.base_offset, h.partition_leader_epoch, h.magic) == (0, 0, 2)
    assert (h.last_offset_delta, h.records_count) == (len(records) - 1, len(records))
    assert h.base_timestamp == records[0].timestamp
    assert h.max_timestamp == max(r.timestamp for r in records)
    assert h.timestamp_type is TimestampType.CREATE_TIME
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.is_transactional) == (
        producer.producer_id,
        producer.producer_epoch,
        producer.base_sequence,
        producer.is_transactional,
    )
    assert not h.is_control
    assert decode_records(data) == expected_records(records)


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_log_of_several_batches(codec: CompressionType) -> None:
    batches = [
        kafka_build(
            [Rec(f"k{i}".encode(), b"v" * 200, T0 + i, (("n", str(i).encode()),))] * (i + 1),
            codec,
            Producer(),
        )
        for i in range(4)
    ]
    log = b"".join(batches)
    found = list(iter_batches(log))
    assert [h.records_count for _, h in found] == [1, 2, 3, 4]
    assert len(validate_client_batches(log)) == 4
    for pos, h in found:
        assert [r.value for r in decode_records(log, pos, h)] == [b"v" * 200] * h.records_count


# --- (b) seglog builds, kafka-python reads ------------------------------------------


def _assert_kafka_header_matches(kb: DefaultRecordBatch, data: bytes) -> None:
    h = check_batch(data)
    assert kb.magic == 2
    assert kb.base_offset == h.base_offset
    assert kb.size_in_bytes == h.size == len(data)
    assert kb.leader_epoch == h.partition_leader_epoch
    assert kb.crc == h.crc
    assert kb.attributes == h.attributes
    assert kb.compression_type == int(h.compression)
    assert kb.timestamp_type == int(h.timestamp_type)
    assert kb.is_transactional == h.is_transactional
    assert kb.is_control_batch == h.is_control
    assert kb.last_offset_delta == h.last_offset_delta
    assert kb.last_offset == h.last_offset
    assert kb.next_offset == h.next_offset
    assert kb.first_timestamp == h.base_timestamp
    assert kb.max_timestamp == h.max_timestamp
    assert kb.producer_id == h.producer_id
    assert kb.producer_epoch == h.producer_epoch
    assert kb.base_sequence == h.base_sequence
    assert kb.last_sequence == h.last_sequence
    assert kb.records_count == h.records_count


@settings(max_examples=60, deadline=None)
@given(
    records=record_lists,
    producer=producers,
    base_offset=st.integers(0, 2**62),
    leader_epoch=st.integers(-1, 2**31 - 1),
)
@pytest.mark.parametrize("codec", CODECS)
def test_our_batches_parse_in_kafka_python(
    codec: CompressionType,
    records: list[Rec],
    producer: Producer,
    base_offset: int,
    leader_epoch: int,
) -> None:
    data = seglog_build(
        records, codec, producer, base_offset=base_offset, leader_epoch=leader_epoch
    )
    kb = DefaultRecordBatch(data)
    assert kb.validate_crc()
    assert kafka_crc.crc(data[21:]) == kb.crc  # kafka-python's pure-Python CRC-32C too
    _assert_kafka_header_matches(kb, data)
    assert kafka_read(kb) == expected_records(records, base_offset)


@pytest.mark.parametrize("codec", CODECS)
def test_our_log_iterates_in_kafka_python(codec: CompressionType) -> None:
    batches = []
    offset = 100
    for i in range(4):
        recs = [Rec(None if i % 2 else b"k", b"value %d" % j, T0 + j, ()) for j in range(i + 1)]
        batches.append(seglog_build(recs, codec, Producer(), base_offset=offset, leader_epoch=3))
        offset += i + 1
    log = b"".join(batches)
    seen = []
    for kb in MemoryRecords(log):
        assert kb.validate_crc()
        seen += [(r.offset, r.value) for r in kb]
    assert seen == [
        (r.offset, r.value) for pos, h in iter_batches(log) for r in decode_records(log, pos, h)
    ]
    assert [o for o, _ in seen] == list(range(100, 110))


@pytest.mark.parametrize("codec", CODECS)
def test_log_append_time_batches_in_kafka_python(codec: CompressionType) -> None:
    records = [Rec(b"a", b"1", T0 + 7, ()), Rec(b"b", b"2", T0, ()), Rec(b"c", None, T0 + 1, ())]
    buf = bytearray(seglog_build(records, codec, Producer(), base_offset=9))
    now = T0 + 3_600_000
    set_log_append_time(buf, 0, len(buf), now)
    kb = DefaultRecordBatch(bytes(buf))
    assert kb.validate_crc()
    assert kb.timestamp_type == 1
    assert kb.max_timestamp == now
    assert [(r.offset, r.timestamp, r.timestamp_type) for r in kb] == [
        (9, now, 1),
        (10, now, 1),
        (11, now, 1),
    ]


def test_our_commit_marker_in_kafka_python() -> None:
    data = build_batch(
        [NewRecord(b"\x00\x00\x00\x00\x00\x03", b"\x00\x00\x00\x01", T0)],
        base_offset=100,
        partition_leader_epoch=7,
        producer_id=1000,
        producer_epoch=0,
        is_transactional=True,
        is_control=True,
    )
    kb = DefaultRecordBatch(data)
    assert kb.validate_crc()
    assert kb.is_control_batch and kb.is_transactional
    (marker,) = list(kb)
    assert (marker.offset, marker.version, marker.type, marker.commit) == (100, 0, 1, True)


def test_kafka_python_detects_our_crc_when_corrupted() -> None:
    """Sanity check of the oracle: kafka-python does notice a bad CRC."""
    data = bytearray(seglog_build([Rec(b"k", b"v", T0, ())], CompressionType.NONE, Producer()))
    data[-1] ^= 1
    assert not DefaultRecordBatch(bytes(data)).validate_crc()


# --- (c) byte-identical output ----------------------------------------------------------


def test_example_2_10_matches_kafka_python() -> None:
    """Doc 2.10 was cross-checked against kafka-python 3.0.12: same 91 bytes, same CRC."""
    records = [
        Rec(b"k1", b"hello", T0, ()),
        Rec(None, b"world", T0 + 5, (("h", b"v"),)),
    ]
    ours = seglog_build(records, CompressionType.NONE, Producer())
    theirs = kafka_build(records, CompressionType.NONE, Producer())
    assert ours == theirs
    assert len(ours) == 91
    assert ours[17:21] == bytes.fromhex("4469c88d")


@settings(max_examples=100, deadline=None)
@given(records=record_lists, producer=producers)
def test_uncompressed_batches_are_byte_identical(records: list[Rec], producer: Producer) -> None:
    ours = seglog_build(records, CompressionType.NONE, producer)
    theirs = kafka_build(records, CompressionType.NONE, producer)
    assert ours == theirs


@settings(max_examples=30, deadline=None)
@given(records=record_lists)
def test_large_uncompressed_batch_is_byte_identical(records: list[Rec]) -> None:
    """Records whose lengths need multi-byte varints."""
    big = [Rec(r.key, (r.value or b"") * 50 + b"x" * 300, r.timestamp, r.headers) for r in records]
    assert seglog_build(big, CompressionType.NONE, Producer()) == kafka_build(
        big, CompressionType.NONE, Producer()
    )
