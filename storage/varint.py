"""Zig-zag base-128 varints, as Kafka's records encode every length and delta."""

from __future__ import annotations

from .errors import CorruptRecordError

_MASK64 = 0xFFFFFFFFFFFFFFFF


def encode_varint(n: int, out: bytearray) -> None:
    """Append the zig-zag varint of `n` (a signed 64-bit value) to `out`.

    Zig-zag on 64 bits gives the same bytes as the 32-bit form for any int32,
    so one encoder serves both Kafka's varint and varlong.
    """
    u = ((n << 1) ^ (n >> 63)) & _MASK64
    while u > 0x7F:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)


def varint_size(n: int) -> int:
    u = ((n << 1) ^ (n >> 63)) & _MASK64
    size = 1
    while u > 0x7F:
        u >>= 7
        size += 1
    return size


def decode_varint(
    buf: bytes | bytearray | memoryview, pos: int, max_bytes: int = 10
) -> tuple[int, int]:
    """Decode a zig-zag varint at `pos`; returns (value, next position).

    `max_bytes` is 5 for Kafka's int32 varints and 10 for varlongs; a longer
    run of continuation bits is corrupt data, not a bigger number.
    """
    u = 0
    shift = 0
    end = len(buf)
    for _ in range(max_bytes):
        if pos >= end:
            raise CorruptRecordError("varint runs past the end of the record data")
        b = buf[pos]
        pos += 1
        u |= (b & 0x7F) << shift
        if not b & 0x80:
            return (u >> 1) ^ -(u & 1), pos
        shift += 7
    raise CorruptRecordError(f"varint longer than {max_bytes} bytes")
