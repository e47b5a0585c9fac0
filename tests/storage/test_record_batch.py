"""RecordBatch v2 codec (doc section 2): golden bytes, round trips, in-place rewrites,
and every way a batch can be bad."""

from __future__ import annotations

import struct
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.storage.compression import CompressionType
from seglog.storage.crc import crc32c_reference
from seglog.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    MessageTooLargeError,
    StorageError,
    UnsupportedMagicError,
)
from seglog.storage.record_batch import (
    HEADER_SIZE,
    MAX_SEQUENCE,
    NO_TIMESTAMP,
    BatchHeader,
    ControlType,
    NewRecord,
    Record,
    RecordHeader,
    TimestampType,
    assemble_batch,
    batch_size_at,
    build_batch,
    check_batch,
    control_record_type,
    decode_records,
    increment_sequence,
    iter_batches,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    validate_client_batches,
)

T0 = 1700000000000


def _hexdump(text: str) -> bytes:
    """Bytes of a doc-style dump: 'OFFS  xx xx ...' lines."""
    return bytes.fromhex("".join(line[6:] for line in text.strip().splitlines()))


EXAMPLE_1 = _hexdump(
    """
0000  00 00 00 00 00 00 00 00 00 00 00 4f 00 00 00 00
0010  02 44 69 c8 8d 00 00 00 00 00 01 00 00 01 8b cf
0020  e5 68 00 00 00 01 8b cf e5 68 05 ff ff ff ff ff
0030  ff ff ff ff ff ff ff ff ff 00 00 00 02 1a 00 00
0040  00 04 6b 31 0a 68 65 6c 6c 6f 00 1e 00 0a 02 01
0050  0a 77 6f 72 6c 64 02 02 68 02 76
"""
)

EXAMPLE_2 = _hexdump(
    """
0000  00 00 00 00 00 00 00 2a 00 00 00 39 00 00 00 07
0010  02 84 df 47 7a 00 00 00 00 00 00 00 00 01 8b cf
0020  e5 68 00 00 00 01 8b cf e5 68 00 00 00 00 00 00
0030  00 03 e8 00 00 00 00 00 05 00 00 00 01 0e 00 00
0040  00 01 02 78 00
"""
)

EXAMPLE_3 = _hexdump(
    """
0000  00 00 00 00 00 00 00 64 00 00 00 42 00 00 00 07
0010  02 95 4b e1 06 00 30 00 00 00 00 00 00 01 8b cf
0020  e5 68 00 00 00 01 8b cf e5 68 00 00 00 00 00 00
0030  00 03 e8 00 00 ff ff ff ff 00 00 00 01 20 00 00
0040  00 08 00 00 00 01 0c 00 00 00 00 00 03 00
"""
)


def _header_fields(h: BatchHeader) -> dict[str, int]:
    return {name: getattr(h, name) for name in BatchHeader.__slots__}


def _reframe(batch: bytes, payload: bytes | None = None, **overrides: int) -> bytes:
    """Re-assemble `batch` with a new payload and/or header fields and a fresh CRC, so
    the result passes check_batch and only the deliberate inconsistency remains."""
    h = BatchHeader.parse(batch)
    fields = {
        "base_offset": h.base_offset,
        "partition_leader_epoch": h.partition_leader_epoch,
        "attributes": h.attributes,
        "last_offset_delta": h.last_offset_delta,
        "base_timestamp": h.base_timestamp,
        "max_timestamp": h.max_timestamp,
        "producer_id": h.producer_id,
        "producer_epoch": h.producer_epoch,
        "base_sequence": h.base_sequence,
        "records_count": h.records_count,
    }
    fields.update(overrides)
    return assemble_batch(batch[HEADER_SIZE:] if payload is None else payload, **fields)


def _records(n: int, ts: int = T0) -> list[NewRecord]:
    return [NewRecord(f"value-{i}".encode(), f"key-{i}".encode(), ts + i) for i in range(n)]


# --- worked examples 2.10 - 2.12 ---------------------------------------------------


def test_example_1_is_built_exactly() -> None:
    batch = build_batch(
        [
            NewRecord(value=b"hello", key=b"k1", timestamp=T0),
            NewRecord(value=b"world", key=None, timestamp=T0 + 5, headers=[("h", b"v")]),
        ],
        base_offset=0,
        partition_leader_epoch=0,
    )
    assert len(batch) == 91
    assert batch == EXAMPLE_1


def test_example_2_is_built_exactly() -> None:
    batch = build_batch(
        [NewRecord(value=b"x", key=None, timestamp=T0)],
        base_offset=42,
        partition_leader_epoch=7,
        producer_id=1000,
        producer_epoch=0,
        base_sequence=5,
    )
    assert len(batch) == 69
    assert batch == EXAMPLE_2


def test_example_3_is_built_exactly() -> None:
    batch = build_batch(
        [NewRecord(value=b"\x00\x00\x00\x00\x00\x03", key=b"\x00\x00\x00\x01", timestamp=T0)],
        base_offset=100,
        partition_leader_epoch=7,
        producer_id=1000,
        producer_epoch=0,
        is_transactional=True,
        is_control=True,
    )
    assert len(batch) == 78
    assert batch == EXAMPLE_3


def test_example_1_parses() -> None:
    h = check_batch(EXAMPLE_1)
    assert _header_fields(h) == {
        "base_offset": 0,
        "batch_length": 79,
        "partition_leader_epoch": 0,
        "magic": 2,
        "crc": 0x4469C88D,
        "attributes": 0,
        "last_offset_delta": 1,
        "base_timestamp": T0,
        "max_timestamp": T0 + 5,
        "producer_id": -1,
        "producer_epoch": -1,
        "base_sequence": -1,
        "records_count": 2,
    }
    assert h.size == 91
    assert (h.last_offset, h.next_offset) == (1, 2)
    assert h.compression is CompressionType.NONE
    assert h.timestamp_type is TimestampType.CREATE_TIME
    assert not (h.is_transactional or h.is_control or h.has_delete_horizon or h.has_producer_id)
    assert h.last_sequence == -1
    assert crc32c_reference(EXAMPLE_1[21:]) == 0x4469C88D
    assert decode_records(EXAMPLE_1) == [
        Record(0, T0, b"k1", b"hello", ()),
        Record(1, T0 + 5, None, b"world", (RecordHeader("h", b"v"),)),
    ]
    assert control_record_type(EXAMPLE_1, 0, h) is None


def test_example_2_parses() -> None:
    h = check_batch(EXAMPLE_2)
    assert _header_fields(h) == {
        "base_offset": 42,
        "batch_length": 57,
        "partition_leader_epoch": 7,
        "magic": 2,
        "crc": 0x84DF477A,
        "attributes": 0,
        "last_offset_delta": 0,
        "base_timestamp": T0,
        "max_timestamp": T0,
        "producer_id": 1000,
        "producer_epoch": 0,
        "base_sequence": 5,
        "records_count": 1,
    }
    assert h.has_producer_id and not h.is_transactional
    assert (h.last_offset, h.next_offset, h.last_sequence) == (42, 43, 5)
    assert decode_records(EXAMPLE_2) == [Record(42, T0, None, b"x", ())]


def test_example_3_parses() -> None:
    h = check_batch(EXAMPLE_3)
    assert _header_fields(h) == {
        "base_offset": 100,
        "batch_length": 66,
        "partition_leader_epoch": 7,
        "magic": 2,
        "crc": 0x954BE106,
        "attributes": 0x30,
        "last_offset_delta": 0,
        "base_timestamp": T0,
        "max_timestamp": T0,
        "producer_id": 1000,
        "producer_epoch": 0,
        "base_sequence": -1,
        "records_count": 1,
    }
    assert h.is_transactional and h.is_control
    assert h.compression is CompressionType.NONE
    assert decode_records(EXAMPLE_3) == [
        Record(100, T0, b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x03", ())
    ]
    assert control_record_type(EXAMPLE_3, 0, h) == (ControlType.COMMIT, 3) == (1, 3)


def test_examples_concatenated_iterate() -> None:
    log = EXAMPLE_1 + EXAMPLE_2 + EXAMPLE_3
    found = [(pos, h.base_offset, h.size) for pos, h in iter_batches(log)]
    assert found == [(0, 0, 91), (91, 42, 69), (160, 100, 78)]
    assert validate_client_batches(EXAMPLE_1)[0].crc == 0x4469C88D


# --- control records ------------------------------------------------------------


def _control_batch(key: bytes, value: bytes | None) -> bytes:
    return build_batch(
        [NewRecord(value=value, key=key, timestamp=T0)],
        producer_id=9,
        producer_epoch=1,
        is_transactional=True,
        is_control=True,
    )


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        (b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x07", (0, 7)),
        (b"\x00\x00\x00\x01", b"\x00\x00\x7f\xff\xff\xff", (1, 2**31 - 1)),
        (b"\x00\x00\x00\x02", b"\x00\x00anything", (2, -1)),  # LEADER_CHANGE: no epoch
        (b"\x00\x00\x00\x01", None, (1, -1)),
        (b"\x00\x01\x00\x06", b"", (6, -1)),  # unknown types are reported, not rejected
    ],
)
def test_control_record_type(key: bytes, value: bytes | None, expected: tuple[int, int]) -> None:
    batch = _control_batch(key, value)
    assert control_record_type(batch, 0, check_batch(batch)) == expected


@pytest.mark.parametrize("key", [b"\xff\xff\x00\x01", b"\x00\x00\x01", b""])
def test_bad_control_key_is_corrupt(key: bytes) -> None:
    batch = _control_batch(key, b"\x00\x00\x00\x00\x00\x01")
    with pytest.raises(CorruptRecordError):
        control_record_type(batch, 0, check_batch(batch))


def test_control_batch_at_a_position() -> None:
    log = EXAMPLE_1 + EXAMPLE_3
    h = check_batch(log, 91)
    assert control_record_type(log, 91, h) == (1, 3)


# --- round trip -----------------------------------------------------------------

bytes_or_null = st.none() | st.binary(max_size=48)
header_keys = st.text(max_size=12)  # any unicode (hypothesis leaves out lone surrogates)
headers_st = st.lists(st.tuples(header_keys, bytes_or_null), max_size=4)
timestamps = st.one_of(
    st.just(NO_TIMESTAMP),  # builder stamps now_ms
    st.integers(0, 2**62),  # deltas of any size and either sign
    st.integers(T0 - 10_000, T0 + 10_000),  # small deltas either side
)
new_records = st.builds(
    NewRecord, value=bytes_or_null, key=bytes_or_null, timestamp=timestamps, headers=headers_st
)


@dataclass(frozen=True)
class Producer:
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    is_transactional: bool = False


producers = st.one_of(
    st.just(Producer()),
    st.builds(
        Producer,
        producer_id=st.integers(0, 2**63 - 1),
        producer_epoch=st.integers(0, 2**15 - 1),
        base_sequence=st.integers(0, MAX_SEQUENCE),
        is_transactional=st.booleans(),
    ),
)


@settings(max_examples=300, deadline=None)
@given(
    records=st.lists(new_records, min_size=1, max_size=12),
    compression=st.sampled_from(list(CompressionType)),
    timestamp_type=st.sampled_from(list(TimestampType)),
    producer=producers,
    base_offset=st.integers(0, 2**62),
    leader_epoch=st.integers(-1, 2**31 - 1),
    now_ms=st.integers(0, 2**50),
)
def test_round_trip(
    records: list[NewRecord],
    compression: CompressionType,
    timestamp_type: TimestampType,
    producer: Producer,
    base_offset: int,
    leader_epoch: int,
    now_ms: int,
) -> None:
    batch = build_batch(
        records,
        base_offset=base_offset,
        partition_leader_epoch=leader_epoch,
        compression=compression,
        timestamp_type=timestamp_type,
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        base_sequence=producer.base_sequence,
        is_transactional=producer.is_transactional,
        now_ms=now_ms,
    )
    stamps = [r.timestamp if r.timestamp != NO_TIMESTAMP else now_ms for r in records]
    n = len(records)

    h = check_batch(batch)
    assert batch_size_at(batch, 0) == h.size == len(batch)
    assert h.batch_length == len(batch) - 12
    assert h.magic == 2
    assert h.crc == crc32c_reference(batch[21:])
    assert (h.base_offset, h.partition_leader_epoch) == (base_offset, leader_epoch)
    assert (h.last_offset_delta, h.records_count) == (n - 1, n)
    assert h.last_offset == base_offset + n - 1
    assert (h.base_timestamp, h.max_timestamp) == (stamps[0], max(stamps))
    assert h.compression is compression
    assert h.timestamp_type is timestamp_type
    assert h.is_transactional == producer.is_transactional
    assert not h.is_control and not h.has_delete_horizon
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (
        producer.producer_id,
        producer.producer_epoch,
        producer.base_sequence,
    )
    if producer.base_sequence >= 0:
        assert h.last_sequence == (producer.base_sequence + n - 1) % 2**31
    else:
        assert h.last_sequence == -1

    def effective(ts: int) -> int:
        return max(stamps) if timestamp_type == TimestampType.LOG_APPEND_TIME else ts

    expected = [
        Record(
            base_offset + i,
            effective(ts),
            r.key,
            r.value,
            tuple(RecordHeader(k, v) for k, v in r.headers),
        )
        for i, (r, ts) in enumerate(zip(records, stamps, strict=True))
    ]
    assert decode_records(batch) == expected
    assert decode_records(bytearray(batch), 0, h) == expected

    # the same batch inside a larger buffer, found by the iterator
    log = EXAMPLE_1 + batch + EXAMPLE_2
    assert [(p, x.base_offset) for p, x in iter_batches(log)] == [
        (0, 0),
        (91, base_offset),
        (91 + len(batch), 42),
    ]
    assert decode_records(memoryview(log), 91) == expected


def test_unicode_header_keys_and_null_header_values() -> None:
    headers = [("ключ", None), ("🔑", b""), ("", b"\x00"), ("ключ", b"dup"), ("a\u0000b", None)]
    batch = build_batch([NewRecord(b"v", b"k", T0, headers)], now_ms=0)
    (record,) = decode_records(batch)
    assert record.headers == tuple(RecordHeader(k, v) for k, v in headers)
    assert "ключ".encode() in batch and "🔑".encode() in batch


def test_missing_timestamp_gets_now() -> None:
    batch = build_batch(
        [NewRecord(b"a"), NewRecord(b"b", timestamp=T0 - 5), NewRecord(b"c")], now_ms=T0
    )
    h = check_batch(batch)
    assert (h.base_timestamp, h.max_timestamp) == (T0, T0)
    assert [r.timestamp for r in decode_records(batch)] == [T0, T0 - 5, T0]


def test_timestamp_deltas_both_directions_on_the_wire() -> None:
    batch = build_batch(
        [NewRecord(b"", None, T0), NewRecord(b"", None, T0 - 1), NewRecord(b"", None, T0 + 64)]
    )
    h = check_batch(batch)
    assert (h.base_timestamp, h.max_timestamp) == (T0, T0 + 64)
    # records: length, attrs, tsDelta ...; each record here is 7 bytes long except the last
    assert batch[HEADER_SIZE + 2] == 0x00  # delta 0
    assert batch[HEADER_SIZE + 7 + 2] == 0x01  # delta -1
    assert batch[HEADER_SIZE + 14 + 2 : HEADER_SIZE + 14 + 4] == b"\x80\x01"  # delta 64
    assert [r.timestamp for r in decode_records(batch)] == [T0, T0 - 1, T0 + 64]


def test_build_rejects_no_records() -> None:
    with pytest.raises(ValueError):
        build_batch([])


# --- null versus empty ----------------------------------------------------------


def test_null_and_empty_key_are_distinct_on_the_wire() -> None:
    null_key = build_batch([NewRecord(b"v", None, T0)])
    empty_key = build_batch([NewRecord(b"v", b"", T0)])
    # record at 61: length, attributes, tsDelta, offsetDelta, keyLength
    assert null_key[HEADER_SIZE + 4] == 0x01
    assert empty_key[HEADER_SIZE + 4] == 0x00
    assert len(null_key) == len(empty_key)
    assert decode_records(null_key)[0].key is None
    assert decode_records(empty_key)[0].key == b""


def test_null_and_empty_value_are_distinct_on_the_wire() -> None:
    tombstone = build_batch([NewRecord(None, b"k", T0)])
    empty = build_batch([NewRecord(b"", b"k", T0)])
    # ... keyLength 02, 'k', valueLength
    assert tombstone[HEADER_SIZE + 6] == 0x01
    assert empty[HEADER_SIZE + 6] == 0x00
    assert decode_records(tombstone)[0].value is None
    assert decode_records(empty)[0].value == b""


def test_null_and_empty_header_value_are_distinct_on_the_wire() -> None:
    null_v = build_batch([NewRecord(None, None, T0, [("h", None)])])
    empty_v = build_batch([NewRecord(None, None, T0, [("h", b"")])])
    # ... key 01, value 01, count 02, hkeyLen 02, 'h', hvalueLen
    assert null_v[HEADER_SIZE + 9] == 0x01
    assert empty_v[HEADER_SIZE + 9] == 0x00
    assert decode_records(null_v)[0].headers == (RecordHeader("h", None),)
    assert decode_records(empty_v)[0].headers == (RecordHeader("h", b""),)


# --- sequences --------------------------------------------------------------------


def test_last_sequence_wraps() -> None:
    """Doc 5.6: base 2147483645 and 5 records -> sequences ..., 2147483647, 0, 1."""
    batch = build_batch(_records(5), producer_id=77, producer_epoch=3, base_sequence=2147483645)
    h = check_batch(batch)
    assert h.last_offset_delta == 4
    assert h.last_sequence == 1
    assert increment_sequence(h.base_sequence, h.last_offset_delta + 1) == 2  # next batch


@pytest.mark.parametrize(
    ("seq", "delta", "expected"),
    [
        (2147483645, 4, 1),
        (MAX_SEQUENCE, 1, 0),
        (MAX_SEQUENCE, 0, MAX_SEQUENCE),
        (0, 0, 0),
        (5, 3, 8),
        (0, MAX_SEQUENCE, MAX_SEQUENCE),
        (1, MAX_SEQUENCE, 0),
    ],
)
def test_increment_sequence_table(seq: int, delta: int, expected: int) -> None:
    assert increment_sequence(seq, delta) == expected


@settings(max_examples=300, deadline=None)
@given(seq=st.integers(0, MAX_SEQUENCE), delta=st.integers(0, MAX_SEQUENCE))
def test_increment_sequence_is_addition_mod_2_31(seq: int, delta: int) -> None:
    assert increment_sequence(seq, delta) == (seq + delta) % 2**31


def test_last_sequence_without_sequence() -> None:
    h = check_batch(build_batch(_records(3)))
    assert h.base_sequence == -1
    assert h.last_sequence == -1


# --- in-place rewrites --------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(
    new_base=st.integers(0, 2**63 - 5),
    epoch=st.integers(-1, 2**31 - 1),
    compression=st.sampled_from(list(CompressionType)),
)
def test_base_offset_and_epoch_rewrites_keep_the_crc(
    new_base: int, epoch: int, compression: CompressionType
) -> None:
    batch = build_batch(_records(3), compression=compression)
    log = bytearray(EXAMPLE_1 + batch + EXAMPLE_2)
    pos = len(EXAMPLE_1)
    before = bytes(log)

    set_base_offset(log, pos, new_base)
    set_partition_leader_epoch(log, pos, epoch)

    h = check_batch(log, pos)  # CRC still valid
    assert (h.base_offset, h.partition_leader_epoch) == (new_base, epoch)
    assert h.crc == check_batch(batch).crc
    # only bytes [0, 8) and [12, 16) of that batch changed
    changed = [i for i in range(len(log)) if log[i] != before[i]]
    assert all(pos <= i < pos + 8 or pos + 12 <= i < pos + 16 for i in changed)
    assert [r.offset for r in decode_records(log, pos)] == [new_base, new_base + 1, new_base + 2]
    assert [x.base_offset for _, x in iter_batches(log)] == [0, new_base, 42]


def test_rewrites_through_a_memoryview() -> None:
    buf = bytearray(EXAMPLE_2)
    view = memoryview(buf)
    set_base_offset(view, 0, 1234)
    set_partition_leader_epoch(view, 0, 99)
    h = check_batch(buf)
    assert (h.base_offset, h.partition_leader_epoch, h.crc) == (1234, 99, 0x84DF477A)


@pytest.mark.parametrize("compression", list(CompressionType), ids=lambda c: c.name.lower())
def test_set_log_append_time(compression: CompressionType) -> None:
    batch = build_batch(
        [NewRecord(b"a", b"k", T0 + 9), NewRecord(b"b", None, T0), NewRecord(None, b"", T0 + 3)],
        compression=compression,
        producer_id=5,
        producer_epoch=0,
        base_sequence=0,
    )
    old = check_batch(batch)
    log = bytearray(EXAMPLE_1 + batch + EXAMPLE_2)
    pos = len(EXAMPLE_1)
    now = T0 + 86_400_000

    set_log_append_time(log, pos, old.size, now)

    h = check_batch(log, pos)  # the CRC was recomputed
    assert h.crc != old.crc
    assert h.crc == crc32c_reference(log[pos + 21 : pos + old.size])
    assert h.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert h.attributes == old.attributes | 0x08
    assert h.compression is compression
    assert h.max_timestamp == now
    assert h.base_timestamp == old.base_timestamp
    assert (h.producer_id, h.base_sequence, h.records_count) == (5, 0, 3)
    records = decode_records(log, pos)
    assert [r.timestamp for r in records] == [now, now, now]
    assert [(r.key, r.value) for r in records] == [(b"k", b"a"), (None, b"b"), (b"", None)]
    # neighbours untouched
    assert bytes(log[:pos]) == EXAMPLE_1
    assert bytes(log[pos + old.size :]) == EXAMPLE_2


def test_set_log_append_time_twice() -> None:
    log = bytearray(EXAMPLE_1)
    set_log_append_time(log, 0, len(log), T0 + 1)
    set_log_append_time(log, 0, len(log), T0 + 2)
    assert check_batch(log).max_timestamp == T0 + 2
    assert [r.timestamp for r in decode_records(log)] == [T0 + 2, T0 + 2]


# --- iterating a log ---------------------------------------------------------------


def _three_batches() -> list[bytes]:
    return [
        build_batch(_records(2), base_offset=0),
        build_batch(_records(3), base_offset=2, compression=CompressionType.GZIP),
        build_batch(_records(1), base_offset=5, producer_id=1, producer_epoch=0, base_sequence=0),
    ]


def test_iter_batches_stops_silently_at_a_partial_tail() -> None:
    batches = _three_batches()
    whole = b"".join(batches)
    positions = [0, len(batches[0]), len(batches[0]) + len(batches[1])]
    tail = build_batch(_records(4), base_offset=6)
    for cut in range(len(tail)):  # every strict prefix, including < 17 bytes
        log = whole + tail[:cut]
        found = list(iter_batches(log))
        assert [p for p, _ in found] == positions, cut
        assert [h.base_offset for _, h in found] == [0, 2, 5]
        assert batch_size_at(log, len(whole)) is None
    assert [h.base_offset for _, h in iter_batches(whole + tail)] == [0, 2, 5, 6]


def test_iter_batches_start_position() -> None:
    batches = _three_batches()
    log = b"".join(batches)
    assert [h.base_offset for _, h in iter_batches(log, len(batches[0]))] == [2, 5]
    assert list(iter_batches(log, len(log))) == []
    assert list(iter_batches(b"")) == []


def test_iter_batches_raises_on_a_corrupt_middle_batch() -> None:
    batches = _three_batches()
    middle = bytearray(batches[1])
    middle[-1] ^= 0x01  # inside the CRC-covered records section
    log = batches[0] + bytes(middle) + batches[2]
    it = iter_batches(log)
    pos, first = next(it)
    assert (pos, first.base_offset) == (0, 0)
    with pytest.raises(CorruptRecordError):
        next(it)
    # without validation the (corrupt) batch is reported and iteration continues
    assert [h.base_offset for _, h in iter_batches(log, validate=False)] == [0, 2, 5]


def test_iter_batches_raises_on_a_bad_length_in_the_middle() -> None:
    batches = _three_batches()
    middle = bytearray(batches[1])
    struct.pack_into(">i", middle, 8, 5)
    log = batches[0] + bytes(middle) + batches[2]
    with pytest.raises(CorruptRecordError):
        list(iter_batches(log))
    with pytest.raises(CorruptRecordError):
        list(iter_batches(log, validate=False))


# --- bad input: CRC, magic, length ---------------------------------------------------


def _assert_unchanged_after(buf: bytearray, before: bytes) -> None:
    assert bytes(buf) == before, "the input buffer was modified"


CRC_TEST_BATCHES = {
    "example-1": EXAMPLE_1,
    "example-3": EXAMPLE_3,
    "gzip": build_batch(_records(4), compression=CompressionType.GZIP),
    "zstd": build_batch(
        _records(4),
        compression=CompressionType.ZSTD,
        producer_id=3,
        producer_epoch=0,
        base_sequence=0,
    ),
}


@settings(max_examples=300, deadline=None)
@given(
    name=st.sampled_from(sorted(CRC_TEST_BATCHES)),
    data=st.data(),
    flip=st.integers(1, 255),
)
def test_any_flipped_byte_after_the_crc_field_is_caught(
    name: str, data: st.DataObject, flip: int
) -> None:
    original = CRC_TEST_BATCHES[name]
    pos = data.draw(st.integers(17, len(original) - 1), label="pos")  # crc field itself too
    buf = bytearray(original)
    buf[pos] ^= flip
    before = bytes(buf)
    with pytest.raises(CorruptRecordError) as info:
        check_batch(buf)
    assert type(info.value) is CorruptRecordError
    assert "CRC" in str(info.value)
    with pytest.raises(CorruptRecordError):
        validate_client_batches(buf)
    with pytest.raises(CorruptRecordError):
        decode_records(buf)
    _assert_unchanged_after(buf, before)


def test_bytes_outside_the_crc_are_not_covered() -> None:
    """baseOffset and partitionLeaderEpoch may change freely (doc 2.1)."""
    buf = bytearray(EXAMPLE_1)
    for i in list(range(0, 8)) + list(range(12, 16)):
        buf[i] ^= 0xA5
    h = check_batch(buf)
    assert h.crc == 0x4469C88D


@pytest.mark.parametrize("magic", [0, 1, 3, 0x7F, -1])
def test_unsupported_magic(magic: int) -> None:
    buf = bytearray(EXAMPLE_1)
    struct.pack_into(">b", buf, 16, magic)  # magic is not CRC-covered: only its check can fail
    before = bytes(buf)
    with pytest.raises(UnsupportedMagicError):
        check_batch(buf)
    with pytest.raises(UnsupportedMagicError):
        batch_size_at(buf, 0)
    with pytest.raises(UnsupportedMagicError):
        validate_client_batches(buf)
    with pytest.raises(UnsupportedMagicError):
        list(iter_batches(buf))
    assert issubclass(UnsupportedMagicError, CorruptRecordError)
    _assert_unchanged_after(buf, before)


def _with_length(batch: bytes, batch_length: int, extra: bytes = b"") -> bytearray:
    buf = bytearray(batch + extra)
    struct.pack_into(">i", buf, 8, batch_length)
    return buf


@pytest.mark.parametrize("batch_length", [-(2**31), -1, 0, 1, 13])
def test_batch_length_below_minimum(batch_length: int) -> None:
    buf = _with_length(EXAMPLE_1, batch_length)
    before = bytes(buf)
    with pytest.raises(CorruptRecordError):
        check_batch(buf)
    with pytest.raises(CorruptRecordError):
        batch_size_at(buf, 0)
    with pytest.raises(CorruptRecordError):
        list(iter_batches(buf))
    with pytest.raises(CorruptRecordError):
        validate_client_batches(buf)
    _assert_unchanged_after(buf, before)


@pytest.mark.parametrize("batch_length", [14, 20, 48])  # sizes 26 .. 60 < 61
def test_batch_length_smaller_than_the_header(batch_length: int) -> None:
    buf = _with_length(EXAMPLE_1, batch_length)
    before = bytes(buf)
    with pytest.raises(CorruptRecordError):
        check_batch(buf)
    with pytest.raises(CorruptRecordError):
        batch_size_at(buf, 0)
    with pytest.raises(CorruptRecordError):
        validate_client_batches(buf)
    _assert_unchanged_after(buf, before)


@pytest.mark.parametrize("excess", [1, 100, 2**31 - 1 - 79])
def test_batch_length_larger_than_the_buffer(excess: int) -> None:
    buf = _with_length(EXAMPLE_1, 79 + excess)
    before = bytes(buf)
    with pytest.raises(CorruptRecordError):
        check_batch(buf)
    assert batch_size_at(buf, 0) is None
    assert list(iter_batches(buf)) == []
    with pytest.raises(CorruptRecordError):
        validate_client_batches(buf)
    _assert_unchanged_after(buf, before)


@pytest.mark.parametrize("shrink", [1, 10, 79 - 49])
def test_batch_length_smaller_than_the_data(shrink: int) -> None:
    """A shorter length shifts the CRC range: the CRC check catches it."""
    buf = _with_length(EXAMPLE_1, 79 - shrink)
    assert batch_size_at(buf, 0) == 91 - shrink
    with pytest.raises(CorruptRecordError):
        check_batch(buf)


def test_every_strict_prefix_is_incomplete() -> None:
    for batch in (EXAMPLE_1, EXAMPLE_2, EXAMPLE_3):
        for cut in range(len(batch)):
            prefix = batch[:cut]
            assert batch_size_at(prefix, 0) is None, cut
            with pytest.raises(CorruptRecordError):
                check_batch(prefix)
            assert list(iter_batches(prefix)) == []


def test_header_only_batch() -> None:
    """Size 61 (all records compacted away) is the minimum valid batch."""
    empty = assemble_batch(
        b"",
        base_offset=10,
        partition_leader_epoch=3,
        attributes=0,
        last_offset_delta=4,
        base_timestamp=-1,
        max_timestamp=T0,
        producer_id=8,
        producer_epoch=0,
        base_sequence=20,
        records_count=0,
    )
    assert len(empty) == HEADER_SIZE
    h = check_batch(empty)
    assert (h.batch_length, h.next_offset, h.last_sequence) == (49, 15, 24)
    assert decode_records(empty) == []
    assert batch_size_at(empty, 0) == 61


# --- client batches (doc 2.9) ------------------------------------------------------


def _client_rejects(
    data: bytes, exc: type[StorageError], match: str, **kwargs: int
) -> StorageError:
    buf = bytearray(data)
    before = bytes(buf)
    with pytest.raises(exc, match=match) as info:
        validate_client_batches(buf, **kwargs)
    assert type(info.value) is exc
    _assert_unchanged_after(buf, before)
    return info.value


def test_valid_client_payload() -> None:
    b1 = build_batch(_records(3), producer_id=4, producer_epoch=0, base_sequence=0)
    b2 = build_batch(_records(1), compression=CompressionType.LZ4)
    headers = validate_client_batches(b1 + b2, max_message_bytes=max(len(b1), len(b2)))
    assert [(h.records_count, h.size) for h in headers] == [(3, len(b1)), (1, len(b2))]


def test_client_empty_payload() -> None:
    _client_rejects(b"", InvalidRecordError, "no record batches")


@pytest.mark.parametrize("base_offset", [1, 42, 2**62])
def test_client_base_offset_must_be_zero(base_offset: int) -> None:
    batch = build_batch(_records(2), base_offset=base_offset)
    _client_rejects(batch, InvalidRecordError, "baseOffset")


def test_client_base_offset_checked_in_every_batch() -> None:
    good = build_batch(_records(2))
    bad = build_batch(_records(2), base_offset=7)
    _client_rejects(good + bad, InvalidRecordError, "baseOffset")


@pytest.mark.parametrize(("last_offset_delta", "count"), [(3, 3), (1, 3), (0, 3), (0, 0)])
def test_client_last_offset_delta_must_be_count_minus_one(
    last_offset_delta: int, count: int
) -> None:
    batch = _reframe(
        build_batch(_records(3)), last_offset_delta=last_offset_delta, records_count=count
    )
    check_batch(batch)  # structurally fine
    _client_rejects(batch, InvalidRecordError, "lastOffsetDelta")


def test_client_control_batch() -> None:
    batch = build_batch(
        [NewRecord(b"\x00\x00\x00\x00\x00\x01", b"\x00\x00\x00\x01", T0)],
        producer_id=3,
        producer_epoch=0,
        base_sequence=0,  # a sequence, so only the control rule can fire
        is_transactional=True,
        is_control=True,
    )
    _client_rejects(batch, InvalidRecordError, "control")


def test_client_producer_id_without_sequence() -> None:
    batch = build_batch(_records(2), producer_id=3, producer_epoch=0, base_sequence=-1)
    _client_rejects(batch, InvalidRecordError, "sequence")
    # no producer id and no sequence is fine; a producer id with a sequence too
    validate_client_batches(build_batch(_records(2)))
    validate_client_batches(
        build_batch(_records(2), producer_id=3, producer_epoch=0, base_sequence=0)
    )


def test_client_batch_too_large() -> None:
    batch = build_batch(_records(5))
    _client_rejects(
        batch, MessageTooLargeError, "max.message.bytes", max_message_bytes=len(batch) - 1
    )
    assert len(validate_client_batches(batch, max_message_bytes=len(batch))) == 1


def test_client_bad_crc() -> None:
    buf = bytearray(build_batch(_records(2)))
    buf[40] ^= 0xFF
    _client_rejects(bytes(buf), CorruptRecordError, "CRC")


@pytest.mark.parametrize(
    "trailing", [b"\x00", b"\x00" * 16, EXAMPLE_1[:40]], ids=["1-byte", "16-bytes", "half-batch"]
)
def test_client_partial_trailing_batch(trailing: bytes) -> None:
    """Unlike a log tail, a produce payload must consist of whole batches."""
    _client_rejects(build_batch(_records(2)) + trailing, CorruptRecordError, "truncated")


# --- decode_records consistency checks ------------------------------------------------


@pytest.mark.parametrize("compression", list(CompressionType), ids=lambda c: c.name.lower())
def test_fewer_declared_records_than_data(compression: CompressionType) -> None:
    batch = _reframe(
        build_batch(_records(3), compression=compression), last_offset_delta=1, records_count=2
    )
    check_batch(batch)
    with pytest.raises(CorruptRecordError, match="incorrect declared batch size"):
        decode_records(batch)


@pytest.mark.parametrize("compression", list(CompressionType), ids=lambda c: c.name.lower())
def test_more_declared_records_than_data(compression: CompressionType) -> None:
    batch = _reframe(
        build_batch(_records(3), compression=compression), last_offset_delta=3, records_count=4
    )
    check_batch(batch)
    with pytest.raises(CorruptRecordError):
        decode_records(batch)


def _payload_with_first_length(length_byte: int) -> bytes:
    payload = bytearray(EXAMPLE_1[HEADER_SIZE:])
    assert payload[0] == 0x1A  # record 0 length 13
    payload[0] = length_byte
    return bytes(payload)


@pytest.mark.parametrize(
    "length_byte",
    [
        0x7E,  # 63: far beyond the 30-byte records section
        0x3C,  # 30: one byte past the end of the section
        0x1C,  # 14: one byte into the next record
        0x18,  # 12: shorter than its own fields
        0x00,  # 0
        0x01,  # -1: negative
    ],
)
def test_record_length_inconsistent_with_its_batch(length_byte: int) -> None:
    batch = _reframe(EXAMPLE_1, _payload_with_first_length(length_byte))
    check_batch(batch)
    with pytest.raises(CorruptRecordError):
        decode_records(batch)


def test_last_record_length_beyond_the_batch() -> None:
    payload = bytearray(EXAMPLE_1[HEADER_SIZE:])
    assert payload[14] == 0x1E  # record 1 length 15, the last one
    payload[14] = 0x20
    batch = _reframe(EXAMPLE_1, bytes(payload))
    with pytest.raises(CorruptRecordError, match="beyond"):
        decode_records(batch)


@pytest.mark.parametrize(
    "record",
    [
        bytes.fromhex("0c 00 00 00 01 01 01"),  # header count -1
        bytes.fromhex("10 00 00 00 01 01 02 01 01"),  # header with a null key
        bytes.fromhex("0e 00 00 00 01 01 02 08 61"),  # header key longer than the record
        bytes.fromhex("0a 00 00 00 0a 01 00"),  # key length 5 but no key bytes
        bytes.fromhex("16 00 00 00 01 01 80 80 80 80 80 01"),  # 6-byte header count varint
    ],
    ids=["neg-header-count", "null-header-key", "header-key-overrun", "key-overrun", "varint"],
)
def test_malformed_record_fields(record: bytes) -> None:
    batch = _reframe(EXAMPLE_2, record, records_count=1, last_offset_delta=0)
    check_batch(batch)
    with pytest.raises(CorruptRecordError):
        decode_records(batch)


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_compression_codec_is_corrupt(codec_id: int) -> None:
    """Attributes bits 0-2 hold an id no codec has: corrupt data, refused by the
    header check (so a leader never appends it), not a ValueError from the enum."""
    batch = _reframe(EXAMPLE_1, attributes=codec_id)
    with pytest.raises(CorruptRecordError, match="unknown compression codec"):
        check_batch(batch)
    with pytest.raises(CorruptRecordError):
        decode_records(batch)
    with pytest.raises(CorruptRecordError):
        validate_client_batches(batch)


@pytest.mark.parametrize(
    "compression",
    [c for c in CompressionType if c != CompressionType.NONE],
    ids=lambda c: c.name.lower(),
)
def test_undecompressable_payload_is_corrupt(compression: CompressionType) -> None:
    batch = _reframe(EXAMPLE_1, attributes=int(compression))  # plain records, codec bits set
    check_batch(batch)
    with pytest.raises(CorruptRecordError):
        decode_records(batch)


@pytest.mark.parametrize(
    "compression",
    [c for c in CompressionType if c != CompressionType.NONE],
    ids=lambda c: c.name.lower(),
)
def test_truncated_compressed_payload_is_corrupt(compression: CompressionType) -> None:
    """The compressed stream loses its last 8 bytes (for gzip: exactly the CRC32/ISIZE
    trailer) but the batch CRC is recomputed, so only the codec can notice."""
    batch = build_batch(_records(20), compression=compression)
    truncated = _reframe(batch, batch[HEADER_SIZE:-8])
    check_batch(truncated)
    with pytest.raises(CorruptRecordError):
        decode_records(truncated)
