"""Zig-zag varints (doc 2.5)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.storage.errors import CorruptRecordError
from seglog.storage.varint import decode_varint, encode_varint, varint_size

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)

DOC_TABLE = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (-2, "03"),
    (2, "04"),
    (63, "7e"),
    (-64, "7f"),
    (64, "80 01"),
    (150, "ac 02"),
    (300, "d8 04"),
    (-300, "d7 04"),
]


def _encode(n: int) -> bytes:
    out = bytearray()
    encode_varint(n, out)
    return bytes(out)


def _doc_zz(n: int, bits: int) -> bytes:
    """The doc's reference encoder (2.5): 31/0xFFFFFFFF for varint, 63/64-bit mask for varlong."""
    mask = (1 << bits) - 1
    u = ((n << 1) ^ (n >> (bits - 1))) & mask
    out = bytearray()
    while u & ~0x7F:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


@pytest.mark.parametrize(("n", "hexbytes"), DOC_TABLE, ids=[str(n) for n, _ in DOC_TABLE])
def test_doc_table(n: int, hexbytes: str) -> None:
    wire = bytes.fromhex(hexbytes)
    assert _encode(n) == wire
    assert varint_size(n) == len(wire)
    assert decode_varint(wire, 0, 5) == (n, len(wire))
    assert decode_varint(wire, 0, 10) == (n, len(wire))


@pytest.mark.parametrize(
    ("n", "hexbytes"),
    [
        (2**31 - 1, "fe ff ff ff 0f"),
        (-(2**31), "ff ff ff ff 0f"),
        (2**63 - 1, "fe ff ff ff ff ff ff ff ff 01"),
        (-(2**63), "ff ff ff ff ff ff ff ff ff 01"),
    ],
)
def test_extremes(n: int, hexbytes: str) -> None:
    wire = bytes.fromhex(hexbytes)
    assert _encode(n) == wire
    assert varint_size(n) == len(wire)
    assert decode_varint(wire, 0, len(wire)) == (n, len(wire))


def test_encode_appends() -> None:
    out = bytearray(b"\xaa")
    encode_varint(300, out)
    encode_varint(-1, out)
    assert bytes(out) == b"\xaa\xd8\x04\x01"


@settings(max_examples=500, deadline=None)
@given(n=INT32)
def test_int32_round_trip(n: int) -> None:
    wire = _encode(n)
    assert wire == _doc_zz(n, 32)  # 64-bit zig-zag == 32-bit zig-zag for any int32
    assert 1 <= len(wire) <= 5
    assert varint_size(n) == len(wire)
    assert decode_varint(wire, 0, 5) == (n, len(wire))


@settings(max_examples=500, deadline=None)
@given(n=INT64)
def test_int64_round_trip(n: int) -> None:
    wire = _encode(n)
    assert wire == _doc_zz(n, 64)
    assert 1 <= len(wire) <= 10
    assert varint_size(n) == len(wire)
    assert decode_varint(wire, 0, 10) == (n, len(wire))


@settings(max_examples=200, deadline=None)
@given(
    n=INT64,
    prefix=st.binary(max_size=8),
    suffix=st.binary(max_size=8),
    kind=st.sampled_from([bytes, bytearray, memoryview]),
)
def test_decode_inside_a_buffer(n: int, prefix: bytes, suffix: bytes, kind: type) -> None:
    wire = _encode(n)
    buf = kind(prefix + wire + suffix)
    assert decode_varint(buf, len(prefix), 10) == (n, len(prefix) + len(wire))


@settings(max_examples=200, deadline=None)
@given(values=st.lists(INT64, max_size=20))
def test_sequence_of_varints(values: list[int]) -> None:
    out = bytearray()
    for v in values:
        encode_varint(v, out)
    pos = 0
    decoded = []
    for _ in values:
        v, pos = decode_varint(out, pos, 10)
        decoded.append(v)
    assert decoded == values
    assert pos == len(out)


def test_five_byte_int32_is_accepted() -> None:
    assert decode_varint(b"\x80\x80\x80\x80\x01", 0, 5) == (2**27, 5)


@pytest.mark.parametrize(
    "wire",
    [
        b"\x80\x80\x80\x80\x80\x01",  # 6-byte run terminating properly
        b"\xff\xff\xff\xff\xff\x00",
        b"\x80" * 10,
    ],
)
def test_int32_varint_longer_than_five_bytes_is_corrupt(wire: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decode_varint(wire, 0, 5)


def test_int64_varint_longer_than_ten_bytes_is_corrupt() -> None:
    eleven = b"\x80" * 10 + b"\x01"
    with pytest.raises(CorruptRecordError):
        decode_varint(eleven, 0, 10)
    # one continuation byte fewer is a valid 10-byte varlong (zig-zag of 2^63 is 2^62)
    assert decode_varint(b"\x80" * 9 + b"\x01", 0, 10) == (2**62, 10)


@settings(max_examples=200, deadline=None)
@given(n=INT64.filter(lambda v: varint_size(v) >= 2), data=st.data())
def test_truncated_varint_is_corrupt(n: int, data: st.DataObject) -> None:
    wire = _encode(n)
    cut = data.draw(st.integers(0, len(wire) - 1), label="cut")
    with pytest.raises(CorruptRecordError):
        decode_varint(wire[:cut], 0, 10)


@pytest.mark.parametrize("buf", [b"", b"\x80", b"\xff\xff", b"\x00\x80"])
def test_truncated_at_end_of_buffer(buf: bytes) -> None:
    start = 1 if buf == b"\x00\x80" else 0
    with pytest.raises(CorruptRecordError):
        decode_varint(buf, start, 5)


def test_position_past_end_is_corrupt() -> None:
    with pytest.raises(CorruptRecordError):
        decode_varint(b"\x02", 1, 5)
