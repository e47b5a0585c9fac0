"""Record-batch compression codecs, in the stream formats Kafka's Java client writes.

gzip: a standard GZIP stream. snappy: the xerial snappy-java stream format
(magic header plus length-prefixed raw snappy blocks), which is what Kafka
writes; plain raw snappy is also accepted when reading, as other clients send
it. lz4: the LZ4 frame format. zstd: standard zstd frames.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from enum import IntEnum

import cramjam
import lz4.frame
import zstandard

from .errors import CorruptRecordError


class CompressionType(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str | None) -> CompressionType:
        if name is None or name in ("none", "uncompressed"):
            return cls.NONE
        try:
            return cls[name.upper()]
        except KeyError:
            raise ValueError(
                f"unknown compression type {name!r}: expected none, gzip, snappy, lz4 or zstd"
            ) from None


_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size
# Decompressed data may not exceed this: a small corrupt or hostile payload
# must not be able to allocate without bound.
MAX_DECOMPRESSED_BYTES = 256 * 1024 * 1024
# A frame that does not declare its size is fed in steps this small: zstd expands
# at most ~32768x, so one step can overshoot the limit by at most ~32 MiB.
_ZSTD_UNSIZED_STEP = 1024


def compress(codec: CompressionType, data: bytes) -> bytes:
    if codec == CompressionType.NONE:
        return data
    if codec == CompressionType.GZIP:
        return gzip.compress(data, compresslevel=6, mtime=0)
    if codec == CompressionType.SNAPPY:
        out = bytearray(_XERIAL_HEADER)
        for i in range(0, len(data), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(data[i : i + _XERIAL_BLOCK]))
            out += struct.pack(">i", len(block))
            out += block
        return bytes(out)
    if codec == CompressionType.LZ4:
        # Kafka's Java reader refuses linked blocks ("Dependent block stream is unsupported").
        return bytes(lz4.frame.compress(data, block_linked=False))
    if codec == CompressionType.ZSTD:
        return zstandard.ZstdCompressor(level=3).compress(data)
    raise CorruptRecordError(f"unknown compression codec id {int(codec)}")


def decompress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    try:
        return _decompress(codec, bytes(data))
    except CorruptRecordError:
        raise
    except Exception as e:  # every codec library has its own error types
        name = (
            CompressionType(codec).name.lower()
            if codec in CompressionType._value2member_map_
            else codec
        )
        raise CorruptRecordError(f"cannot decompress {name} record data: {e}") from e


def _decompress(codec: int, data: bytes) -> bytes:
    if codec == CompressionType.NONE:
        return data
    if not data:
        raise CorruptRecordError("compressed record data is empty")
    if codec == CompressionType.GZIP:
        return _gzip_decompress(data)
    if codec == CompressionType.SNAPPY:
        if data.startswith(_XERIAL_MAGIC):
            return _xerial_decompress(data)
        _check_limit(_snappy_raw_length(data), "snappy")
        return bytes(cramjam.snappy.decompress_raw(data))
    if codec == CompressionType.LZ4:
        return _lz4_decompress(data)
    if codec == CompressionType.ZSTD:
        return _zstd_decompress(data)
    raise CorruptRecordError(f"unknown compression codec id {codec}")


def _check_limit(size: int, codec: str) -> None:
    if size > MAX_DECOMPRESSED_BYTES:
        raise CorruptRecordError(
            f"{codec} record data expands beyond the decompression limit "
            f"of {MAX_DECOMPRESSED_BYTES} bytes"
        )


def _gzip_decompress(data: bytes) -> bytes:
    """Every member of the stream, each checked to its end (CRC and length)."""
    out = bytearray()
    rest = data
    while rest:
        d = zlib.decompressobj(wbits=31)
        out += d.decompress(rest, MAX_DECOMPRESSED_BYTES + 1 - len(out))
        _check_limit(len(out), "gzip")
        if d.unconsumed_tail:
            _check_limit(MAX_DECOMPRESSED_BYTES + 1, "gzip")
        if not d.eof:
            raise CorruptRecordError("gzip record data ends before its stream does")
        rest = d.unused_data
    return bytes(out)


def _lz4_decompress(data: bytes) -> bytes:
    out = bytearray()
    rest = data
    while rest:
        d = lz4.frame.LZ4FrameDecompressor()
        out += d.decompress(rest, max_length=MAX_DECOMPRESSED_BYTES + 1 - len(out))
        _check_limit(len(out), "lz4")
        if not d.eof:
            if d.needs_input:
                raise CorruptRecordError("lz4 record data ends before its frame does")
            _check_limit(MAX_DECOMPRESSED_BYTES + 1, "lz4")
        rest = d.unused_data
    return bytes(out)


def _zstd_decompress(data: bytes) -> bytes:
    """Every frame, each checked to its end, without trusting a frame's declared size."""
    out = bytearray()
    rest = data
    while rest:
        declared = zstandard.frame_content_size(rest)
        if declared >= 0:
            _check_limit(len(out) + declared, "zstd")
            step = len(rest)  # the declared size bounds the output
        else:
            step = _ZSTD_UNSIZED_STEP
        d = zstandard.ZstdDecompressor().decompressobj()
        pos = 0
        while not d.eof and pos < len(rest):
            out += d.decompress(rest[pos : pos + step])
            pos += step
            _check_limit(len(out), "zstd")
        if not d.eof:
            raise CorruptRecordError("zstd record data ends before its frame does")
        rest = d.unused_data
    return bytes(out)


def _snappy_raw_length(data: bytes) -> int:
    """Raw snappy starts with the uncompressed length as an unsigned varint."""
    length = 0
    for i in range(min(5, len(data))):
        length |= (data[i] & 0x7F) << (7 * i)
        if not data[i] & 0x80:
            return length
    raise CorruptRecordError("raw snappy record data has no valid length header")


def _xerial_decompress(data: bytes) -> bytes:
    out = bytearray()
    pos = len(_XERIAL_HEADER)
    while pos < len(data):
        if pos + 4 > len(data):
            raise CorruptRecordError("truncated xerial snappy block length")
        (size,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise CorruptRecordError("xerial snappy block length runs past the data")
        block = data[pos : pos + size]
        _check_limit(len(out) + _snappy_raw_length(block), "snappy")
        out += cramjam.snappy.decompress_raw(block)
        pos += size
    return bytes(out)
