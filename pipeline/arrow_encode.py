"""Arrow columns → RecordBatch v2 records sections, and Kafka's key partitioning,
without a Python object per record.

A record is `length, attributes, timestampDelta, offsetDelta, keyLength, key,
valueLength, value, headerCount` (varints zig-zagged). The sink writes every
record of a batch with the batch's timestamp (CreateTime of the write, as a
Kafka producer stamps records without a timestamp), so timestampDelta is 0.
Each record becomes five pieces: the varints before the key, the key, the
value's length, the value, the header count (with the headers, if any). The
pieces of every record are made as five binary arrays with numpy, and one
Arrow `take` lays them out one after another: the bytes of the records section.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from seglog.client.partitioner import murmur2
from seglog.storage.record_batch import encode_record

_I64 = np.int64
_M = np.uint32(0x5BD1E995)
_SEED = 0x9747B28C
_VECTOR_KEY_LIMIT = 64  # longer keys are hashed one by one (padding would cost more)


def _zigzag(n: np.ndarray) -> np.ndarray:
    n = n.astype(_I64)
    return ((n << 1) ^ (n >> 63)).astype(np.uint64)


def _varint_matrix(u: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """(n × width bytes, sizes): the base-128 varint of each already zig-zagged value."""
    out = np.zeros((len(u), width), np.uint8)
    size = np.ones(len(u), _I64)
    rest = u.copy()
    for i in range(width):
        out[:, i] = (rest & np.uint64(0x7F)).astype(np.uint8)
        rest = rest >> np.uint64(7)
        more = rest > 0
        if i + 1 < width:
            out[more, i] |= 0x80
            size += more
        elif more.any():
            raise ValueError("a value is too large for its varint")
    return out, size


def _pieces(parts: list[tuple[np.ndarray, np.ndarray]]) -> pa.Array:
    """One binary element per row: the concatenated varint bytes of `parts`."""
    n = len(parts[0][0])
    matrix = np.concatenate([m for m, _ in parts], axis=1)
    keep = np.concatenate([np.arange(m.shape[1])[None, :] < s[:, None] for m, s in parts], axis=1)
    data = matrix[keep]  # row-major: each row's bytes in order
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(sum(s for _, s in parts), out=offsets[1:])
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _constant(byte: int, n: int) -> pa.Array:
    offsets = np.arange(n + 1, dtype=np.int32)
    data = np.full(n, byte, np.uint8)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _lengths(arr: pa.Array) -> np.ndarray:
    """Byte lengths, -1 for nulls."""
    offsets = np.frombuffer(arr.buffers()[1], np.int32)[arr.offset : arr.offset + len(arr) + 1]
    lengths = np.diff(offsets).astype(_I64)
    if arr.null_count:
        lengths[np.asarray(arr.is_null())] = -1
    return lengths


def as_binary(arr: pa.Array | pa.ChunkedArray | None, n: int) -> pa.Array:
    """A key or value column as binary (strings as their UTF-8 bytes); absent: nulls."""
    if arr is None:
        return pa.nulls(n, pa.binary())
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if pa.types.is_large_binary(arr.type) or pa.types.is_large_string(arr.type):
        arr = arr.cast(pa.large_binary()).cast(pa.binary())
    return arr.cast(pa.binary())  # string → binary reuses the buffers


def encode_records(
    keys: pa.Array,
    values: pa.Array,
    batch_index: np.ndarray,
    headers: list | None = None,
) -> tuple[bytes, np.ndarray]:
    """The records of rows grouped into batches (`batch_index`: the row's position in
    its batch, which is its offsetDelta) as one buffer, and the byte offset where each
    record starts (plus the end). `headers`: a list per row of (key, value) pairs,
    only when some row has headers."""
    n = len(keys)
    key_len = _lengths(keys)
    value_len = _lengths(values)
    if headers is not None:
        # Rows with headers are rare: their header count and headers come from
        # storage's encoder (the count piece of a header-less row is one zero byte).
        tail_bytes = []
        for row_headers in headers:
            if not row_headers:
                tail_bytes.append(b"\x00")
                continue
            body = bytearray()
            encode_record(body, 0, 0, None, None, row_headers)
            # encode_record writes length, attributes, deltas, two null lengths,
            # count, headers; keep only the count and headers.
            tail_bytes.append(bytes(body[6:]) if len(body) > 6 else b"\x00")
        tail = pa.array(tail_bytes, pa.binary())
        tail_len = _lengths(tail)
    else:
        tail = _constant(0, n)
        tail_len = np.ones(n, _I64)
    delta, delta_size = _varint_matrix(_zigzag(batch_index), 5)
    klen, klen_size = _varint_matrix(_zigzag(key_len), 5)
    vlen, vlen_size = _varint_matrix(_zigzag(value_len), 5)
    body = (
        2
        + delta_size
        + klen_size
        + np.maximum(key_len, 0)
        + vlen_size
        + np.maximum(value_len, 0)
        + tail_len
    )
    length, length_size = _varint_matrix(_zigzag(body), 5)
    zeros = np.zeros((n, 2), np.uint8)  # attributes, timestampDelta 0
    two = np.full(n, 2, _I64)
    head = _pieces([(length, length_size), (zeros, two), (delta, delta_size), (klen, klen_size)])
    mid = _pieces([(vlen, vlen_size)])
    parts = pa.concat_arrays([head, keys, mid, values, tail])
    order = (np.arange(5)[None, :] * n + np.arange(n)[:, None]).ravel()
    laid = parts.take(pa.array(order))
    offsets = np.frombuffer(laid.buffers()[1], np.int32)[: 5 * n + 1]
    data = laid.buffers()[2]
    start, stop = int(offsets[0]), int(offsets[-1])
    record_starts = offsets[0 : 5 * n + 1 : 5].astype(_I64) - start
    return data.to_pybytes()[start:stop] if data is not None else b"", record_starts


def partitions_for_keys(keys: pa.Array, num_partitions: int) -> np.ndarray:
    """Kafka's `toPositive(murmur2(key)) % numPartitions` for every (non-null) key;
    -1 for null keys."""
    n = len(keys)
    lengths = _lengths(keys)
    out = np.full(n, -1, _I64)
    if n == 0:
        return out
    offsets = np.frombuffer(keys.buffers()[1], np.int32)[keys.offset : keys.offset + n + 1]
    data = keys.buffers()[2]
    raw = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    short = np.flatnonzero((lengths >= 0) & (lengths <= _VECTOR_KEY_LIMIT))
    if short.size:
        h = _murmur2(raw, offsets[short].astype(_I64), lengths[short])
        out[short] = (h & np.uint32(0x7FFFFFFF)).astype(_I64) % num_partitions
    for i in np.flatnonzero(lengths > _VECTOR_KEY_LIMIT):
        begin = int(offsets[i])
        key = raw[begin : begin + int(lengths[i])].tobytes()
        out[i] = (murmur2(key) & 0x7FFFFFFF) % num_partitions
    return out


def _murmur2(raw: np.ndarray, begin: np.ndarray, length: np.ndarray) -> np.ndarray:
    """MurmurHash2 as Kafka's Utils.murmur2, for many short keys at once (uint32)."""
    width = int(length.max()) if len(length) else 0
    width4 = (width + 3) // 4 * 4
    if raw.size == 0:
        raw = np.zeros(1, np.uint8)
    idx = begin[:, None] + np.arange(max(width4, 4))[None, :]
    inside = np.arange(max(width4, 4))[None, :] < length[:, None]
    padded = np.where(inside, raw[np.minimum(idx, raw.size - 1)], 0).astype(np.uint32)
    with np.errstate(over="ignore"):
        h = (np.uint32(_SEED) ^ length.astype(np.uint32)).astype(np.uint32)
        whole = length // 4
        for w in range(width4 // 4):
            rows = whole > w
            k = (
                padded[:, 4 * w]
                | (padded[:, 4 * w + 1] << np.uint32(8))
                | (padded[:, 4 * w + 2] << np.uint32(16))
                | (padded[:, 4 * w + 3] << np.uint32(24))
            )
            k = k * _M
            k ^= k >> np.uint32(24)
            k = k * _M
            h = np.where(rows, (h * _M) ^ k, h)
        tail = length & 3
        at = whole * 4
        rows = np.arange(len(length))
        b = [padded[rows, np.minimum(at + i, padded.shape[1] - 1)] for i in range(3)]
        h = np.where(tail >= 3, h ^ (b[2] << np.uint32(16)), h)
        h = np.where(tail >= 2, h ^ (b[1] << np.uint32(8)), h)
        h = np.where(tail >= 1, (h ^ b[0]) * _M, h)
        h ^= h >> np.uint32(13)
        h = h * _M
        h ^= h >> np.uint32(15)
    return h.astype(np.uint32)
