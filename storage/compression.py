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
        return lz4.frame.compress(data)
    if codec == CompressionType.ZSTD:
        return zstandard.ZstdCompressor(level=3).compress(data)
    raise CorruptRecordError(f"unknown compression codec id {int(codec)}")


def decompress(codec: int, data: bytes | memoryview) -> bytes:
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
    if codec == CompressionType.GZIP:
        d = zlib.decompressobj(wbits=31)
        out = d.decompress(data, MAX_DECOMPRESSED_BYTES)
        if d.unconsumed_tail:
            raise CorruptRecordError("gzip record data expands beyond the decompression limit")
        return out
    if codec == CompressionType.SNAPPY:
        if data.startswith(_XERIAL_MAGIC):
            return _xerial_decompress(data)
        return bytes(cramjam.snappy.decompress_raw(data))
    if codec == CompressionType.LZ4:
        return lz4.frame.decompress(data)
    if codec == CompressionType.ZSTD:
        return zstandard.ZstdDecompressor().decompress(data, max_output_size=MAX_DECOMPRESSED_BYTES)
    raise CorruptRecordError(f"unknown compression codec id {codec}")


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
        out += cramjam.snappy.decompress_raw(data[pos : pos + size])
        pos += size
        if len(out) > MAX_DECOMPRESSED_BYTES:
            raise CorruptRecordError("snappy record data expands beyond the decompression limit")
    return bytes(out)
