"""Record-batch codecs (doc 2.7): round trips, stream formats, and hostile input."""

from __future__ import annotations

import contextlib
import gzip
import os
import struct

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.storage import compression
from seglog.storage.compression import CompressionType, compress, decompress
from seglog.storage.errors import CorruptRecordError

ALL_CODECS = list(CompressionType)
REAL_CODECS = [c for c in CompressionType if c != CompressionType.NONE]
XERIAL_MAGIC = b"\x82SNAPPY\x00"

# mixes incompressible and highly compressible stretches, so every code path of
# every codec (literals, matches, several blocks) is exercised
payloads = st.one_of(
    st.binary(max_size=4096),
    st.builds(lambda chunk, n: chunk * n, st.binary(min_size=1, max_size=64), st.integers(1, 200)),
)


def _compressible(size: int) -> bytes:
    words = [b"seglog", b"kafka", b"record", b"batch", b"offset", b"\x00\x01\x02"]
    out = bytearray()
    i = 0
    while len(out) < size:
        out += words[i % len(words)] + str(i).encode()
        i += 1
    return bytes(out[:size])


@settings(max_examples=100, deadline=None)
@given(data=payloads)
@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name.lower())
def test_round_trip(codec: CompressionType, data: bytes) -> None:
    packed = compress(codec, data)
    assert decompress(codec, packed) == data
    assert decompress(codec, memoryview(packed)) == data
    assert decompress(int(codec), bytearray(packed)) == data


@pytest.mark.parametrize("codec", ALL_CODECS, ids=lambda c: c.name.lower())
@pytest.mark.parametrize("size", [0, 1, 32 * 1024, 32 * 1024 + 1, 200_000])
def test_round_trip_block_boundaries(codec: CompressionType, size: int) -> None:
    data = _compressible(size // 2) + os.urandom(size - size // 2)
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", REAL_CODECS, ids=lambda c: c.name.lower())
def test_real_codecs_actually_compress(codec: CompressionType) -> None:
    data = _compressible(50_000)
    assert len(compress(codec, data)) < len(data) * 3 // 4


def test_none_is_identity() -> None:
    data = os.urandom(100)
    assert compress(CompressionType.NONE, data) == data
    assert decompress(CompressionType.NONE, data) == data


def test_from_name() -> None:
    assert CompressionType.from_name(None) is CompressionType.NONE
    assert CompressionType.from_name("none") is CompressionType.NONE
    assert CompressionType.from_name("uncompressed") is CompressionType.NONE
    assert CompressionType.from_name("zstd") is CompressionType.ZSTD
    assert CompressionType.from_name("GZIP") is CompressionType.GZIP
    assert [int(c) for c in CompressionType] == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="brotli"):
        CompressionType.from_name("brotli")


# --- stream formats -----------------------------------------------------------


def test_gzip_is_a_standard_gzip_stream() -> None:
    data = _compressible(10_000)
    packed = compress(CompressionType.GZIP, data)
    assert packed[:3] == b"\x1f\x8b\x08"  # magic + deflate
    assert gzip.decompress(packed) == data


def test_snappy_uses_the_xerial_stream_format() -> None:
    data = _compressible(100_000)  # 4 xerial blocks of at most 32 KiB
    packed = compress(CompressionType.SNAPPY, data)
    assert packed.startswith(XERIAL_MAGIC)
    assert struct.unpack_from(">ii", packed, 8) == (1, 1)  # version, compatible version
    # walk the length-prefixed raw snappy blocks
    pos = 16
    out = bytearray()
    blocks = 0
    while pos < len(packed):
        (size,) = struct.unpack_from(">i", packed, pos)
        pos += 4
        block = bytes(cramjam.snappy.decompress_raw(packed[pos : pos + size]))
        assert len(block) <= 32 * 1024
        out += block
        pos += size
        blocks += 1
    assert pos == len(packed)
    assert blocks == 4
    assert bytes(out) == data


@settings(max_examples=50, deadline=None)
@given(data=payloads)
def test_snappy_xerial_magic_for_any_input(data: bytes) -> None:
    assert compress(CompressionType.SNAPPY, data).startswith(XERIAL_MAGIC)


@settings(max_examples=100, deadline=None)
@given(data=payloads)
def test_raw_snappy_is_accepted_on_read(data: bytes) -> None:
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert not raw.startswith(XERIAL_MAGIC)
    assert decompress(CompressionType.SNAPPY, raw) == data


@pytest.mark.parametrize("size", [1000, 300_000], ids=["one-block", "several-blocks"])
def test_lz4_frame_format_kafka_can_read(size: int) -> None:
    """Kafka's Lz4BlockInputStream (FLG.validate/BD.validate) rejects frames whose FLG
    lacks block independence ("Dependent block stream is unsupported"), has a version
    other than 01 or set reserved bits, or whose BD block size is outside 64 KiB..4 MiB."""
    data = _compressible(size)  # 300 000 bytes span several 64 KiB blocks
    packed = compress(CompressionType.LZ4, data)
    assert packed[:4] == b"\x04\x22\x4d\x18"
    flg, bd = packed[4], packed[5]
    assert flg >> 6 == 0b01, "version"
    assert flg & 0x20, "block independence"
    assert flg & 0x03 == 0, "reserved bits"
    assert bd & 0x8F == 0, "reserved BD bits"
    assert 4 <= (bd >> 4) & 0x07 <= 7, "block max size"
    assert lz4.frame.decompress(packed) == data


def test_zstd_is_a_standard_frame() -> None:
    data = _compressible(10_000)
    packed = compress(CompressionType.ZSTD, data)
    assert packed[:4] == b"\x28\xb5\x2f\xfd"
    assert zstandard.ZstdDecompressor().decompress(packed) == data


def test_zstd_several_frames_are_read_whole() -> None:
    """Doc 2.7: 'zstd = standard zstd frame(s)'; the Java reader reads across frames."""
    first, second = _compressible(1000), os.urandom(1000)
    cctx = zstandard.ZstdCompressor()
    packed = cctx.compress(first) + cctx.compress(second)
    assert decompress(CompressionType.ZSTD, packed) == first + second


def test_zstd_frame_without_content_size() -> None:
    data = _compressible(5000)
    cobj = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    packed = cobj.compress(data) + cobj.flush()
    assert decompress(CompressionType.ZSTD, packed) == data


def test_gzip_several_members_are_read_whole() -> None:
    """A gzip stream may hold several members; java.util.zip.GZIPInputStream reads them all."""
    first, second = _compressible(1000), os.urandom(1000)
    packed = gzip.compress(first) + gzip.compress(second)
    assert decompress(CompressionType.GZIP, packed) == first + second


# --- garbage ------------------------------------------------------------------

GARBAGE = {
    "empty": b"",
    "nul": b"\x00",  # (a valid raw snappy stream of nothing, so not used for snappy)
    "text": b"this is not compressed data at all, not even a little bit",
    "ramp": bytes(range(256)),
}
GARBAGE_CASES = [
    pytest.param(codec, data, id=f"{codec.name.lower()}-{name}")
    for codec in REAL_CODECS
    for name, data in GARBAGE.items()
    if not (codec == CompressionType.SNAPPY and name == "nul")
]


@pytest.mark.parametrize(("codec", "garbage"), GARBAGE_CASES)
def test_garbage_is_corrupt_record(codec: CompressionType, garbage: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decompress(codec, garbage)


@settings(max_examples=200, deadline=None)
@given(garbage=st.binary(max_size=300))
@pytest.mark.parametrize("codec", REAL_CODECS, ids=lambda c: c.name.lower())
def test_random_input_never_leaks_a_library_exception(
    codec: CompressionType, garbage: bytes
) -> None:
    """Random bytes may by chance be a valid stream; anything else is CorruptRecordError."""
    try:
        out = decompress(codec, garbage)
    except CorruptRecordError:
        return
    assert isinstance(out, bytes)


@pytest.mark.parametrize("codec", REAL_CODECS, ids=lambda c: c.name.lower())
def test_truncated_stream_is_corrupt(codec: CompressionType) -> None:
    data = _compressible(20_000) + os.urandom(2000)
    packed = compress(codec, data)
    for cut in (1, 4, 8, len(packed) // 2):
        with pytest.raises(CorruptRecordError):
            decompress(codec, packed[:-cut])


@pytest.mark.parametrize("codec", REAL_CODECS, ids=lambda c: c.name.lower())
def test_flipped_byte_in_stream_is_corrupt_or_detected(codec: CompressionType) -> None:
    """A damaged stream either fails with CorruptRecordError or yields different bytes;
    it never raises a library-specific exception."""
    data = _compressible(5000)
    packed = bytearray(compress(codec, data))
    for pos in range(0, len(packed), max(1, len(packed) // 64)):
        packed[pos] ^= 0x5A
        with contextlib.suppress(CorruptRecordError):
            decompress(codec, bytes(packed))
        packed[pos] ^= 0x5A


def test_xerial_block_length_past_the_end_is_corrupt() -> None:
    packed = bytearray(compress(CompressionType.SNAPPY, _compressible(1000)))
    struct.pack_into(">i", packed, 16, len(packed))  # first block claims more than remains
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.SNAPPY, bytes(packed))
    struct.pack_into(">i", packed, 16, -5)
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.SNAPPY, bytes(packed))


def test_xerial_truncated_block_length_is_corrupt() -> None:
    packed = compress(CompressionType.SNAPPY, _compressible(1000)) + b"\x00\x00"
    with pytest.raises(CorruptRecordError):
        decompress(CompressionType.SNAPPY, packed)


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_id_is_corrupt(codec_id: int) -> None:
    with pytest.raises(CorruptRecordError):
        decompress(codec_id, b"anything")


# --- decompression bombs --------------------------------------------------------

LIMIT = 4096


@pytest.fixture
def small_limit(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(compression, "MAX_DECOMPRESSED_BYTES", LIMIT)
    return LIMIT


def _bombs() -> dict[str, tuple[CompressionType, bytes]]:
    big = bytes(LIMIT * 50)
    cobj = zstandard.ZstdCompressor().compressobj()
    zstd_streamed = cobj.compress(big) + cobj.flush()  # no content size in the header
    return {
        "gzip": (CompressionType.GZIP, gzip.compress(big)),
        "zstd": (CompressionType.ZSTD, zstandard.ZstdCompressor().compress(big)),
        "zstd-streamed": (CompressionType.ZSTD, zstd_streamed),
        "snappy-xerial": (CompressionType.SNAPPY, compress(CompressionType.SNAPPY, big)),
        "snappy-raw": (CompressionType.SNAPPY, bytes(cramjam.snappy.compress_raw(big))),
        "lz4": (CompressionType.LZ4, lz4.frame.compress(big)),
    }


@pytest.mark.parametrize("name", list(_bombs()))
def test_decompression_bomb_is_corrupt(small_limit: int, name: str) -> None:
    codec, packed = _bombs()[name]
    assert len(packed) * 10 < small_limit * 50  # small on the wire ...
    with pytest.raises(CorruptRecordError):
        decompress(codec, packed)  # ... but 50x the limit once expanded


@pytest.mark.parametrize("codec", REAL_CODECS, ids=lambda c: c.name.lower())
def test_data_at_the_limit_is_fine(small_limit: int, codec: CompressionType) -> None:
    data = _compressible(small_limit)
    assert decompress(codec, compress(codec, data)) == data
