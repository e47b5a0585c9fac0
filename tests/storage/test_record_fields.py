"""decode_record_fields (the inlined-varint decoder the Consumer uses) against a plain
record-by-record reference written with decode_varint alone: on valid batches and on
batches whose records section was damaged but whose CRC was recomputed (so only the
record parsing can catch it), both agree: the same fields, or both CorruptRecordError."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.storage.crc import crc32c
from seglog.storage.errors import CorruptRecordError
from seglog.storage.record_batch import (
    HEADER_SIZE,
    NewRecord,
    RecordHeader,
    build_batch,
    check_batch,
    decode_record_fields,
    decode_records,
)
from seglog.storage.varint import decode_varint

blobs = st.one_of(st.none(), st.binary(max_size=40), st.binary(min_size=60, max_size=9000))
records_st = st.builds(
    NewRecord,
    value=blobs,
    key=blobs,
    timestamp=st.integers(0, 2**42),
    headers=st.lists(st.tuples(st.text(max_size=4), blobs), max_size=3),
)


def reference(batch: bytes) -> list[tuple[object, ...]]:
    """Kafka's DefaultRecord.readFrom, field by field, no fast paths."""
    h = check_batch(batch)
    data = batch[HEADER_SIZE:]
    out: list[tuple[object, ...]] = []
    p = 0

    def blob(p: int, end: int) -> tuple[bytes | None, int]:
        size, p = decode_varint(data, p, 5)
        if size < 0:
            return None, p
        if p + size > end:
            raise CorruptRecordError("field past its record")
        return data[p : p + size], p + size

    for _ in range(h.records_count):
        length, p = decode_varint(data, p, 5)
        end = p + length
        if length < 0 or end > len(data):
            raise CorruptRecordError("record past the batch")
        p += 1
        ts_delta, p = decode_varint(data, p, 10)
        offset_delta, p = decode_varint(data, p, 5)
        key, p = blob(p, end)
        value, p = blob(p, end)
        count, p = decode_varint(data, p, 5)
        if count < 0:
            raise CorruptRecordError("negative header count")
        headers = []
        for _h in range(count):
            hk, p = blob(p, end)
            if hk is None:
                raise CorruptRecordError("null header key")
            hv, p = blob(p, end)
            headers.append(RecordHeader(hk.decode("utf-8", "replace"), hv))
        if p != end:
            raise CorruptRecordError("bytes left in a record")
        out.append(
            (h.base_offset + offset_delta, h.base_timestamp + ts_delta, key, value, tuple(headers))
        )
    if p != len(data):
        raise CorruptRecordError("bytes left in the batch")
    return out


def reframe(batch: bytes, records_section: bytes) -> bytes:
    """The batch's header around another records section, length and CRC made valid."""
    head = bytearray(batch[:HEADER_SIZE])
    struct.pack_into(">i", head, 8, HEADER_SIZE - 12 + len(records_section))
    whole = head + records_section
    struct.pack_into(">I", whole, 17, crc32c(bytes(whole[21:])))
    return bytes(whole)


def outcome(decode, batch: bytes) -> object:  # type: ignore[no-untyped-def]
    try:
        return decode(batch)
    except CorruptRecordError:
        return "corrupt"


@settings(max_examples=300, deadline=None)
@given(records=st.lists(records_st, min_size=1, max_size=8), base_offset=st.integers(0, 2**40))
def test_valid_batches_decode_as_the_reference_does(
    records: list[NewRecord], base_offset: int
) -> None:
    batch = build_batch(records, base_offset=base_offset)
    fields = decode_record_fields(batch)
    assert fields == reference(batch)
    assert [
        (r.offset, r.timestamp, r.key, r.value, r.headers) for r in decode_records(batch)
    ] == fields
    assert [f[3] for f in fields] == [r.value for r in records]


@settings(max_examples=600, deadline=None)
@given(
    records=st.lists(records_st, min_size=1, max_size=4),
    data=st.data(),
)
def test_damaged_records_sections_agree_with_the_reference(
    records: list[NewRecord], data: st.DataObject
) -> None:
    batch = build_batch(records)
    section = bytearray(batch[HEADER_SIZE:])
    how = data.draw(st.sampled_from(["flip", "cut", "insert", "replace"]), label="how")
    at = data.draw(st.integers(0, len(section) - 1), label="at")
    if how == "flip":
        section[at] ^= data.draw(st.integers(1, 255), label="mask")
    elif how == "cut":
        del section[at:]
    elif how == "insert":
        section[at:at] = data.draw(st.binary(min_size=1, max_size=4), label="inserted")
    else:
        section[at : at + 3] = data.draw(st.sampled_from([b"\x80\x80\x80", b"\x01", b"\xff\x7f"]))
    damaged = reframe(batch, bytes(section))
    got = outcome(decode_record_fields, damaged)
    assert got == outcome(reference, damaged)
