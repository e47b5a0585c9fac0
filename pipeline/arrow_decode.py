"""RecordBatch v2 bytes → Arrow columns, without a Python object per record.

A fetch answer (or a chunk of a `.log` file) is a run of whole batches. Each
batch is CRC-checked and, when compressed, decompressed once; the records
sections of all batches are then decoded together:

1. framing: one short Python loop per record reads only the record's length
   varint (the start of record i+1 depends on the length of record i, so this
   step cannot be vectorised with numpy; it touches one or two bytes per record);
2. fields: every other varint (timestamp delta, offset delta, key and value
   lengths, header count, header key/value lengths) is decoded for all records
   at once with numpy, byte position by byte position;
3. keys and values: one binary array over the whole buffer whose elements
   alternate between "a key" and "the bytes between two keys", then
   `take(every other element)`: Arrow copies the keys out in C.

The same checks as `record_batch.decode_records`: each record's fields end
exactly at its declared length, the records fill the records section exactly,
the batch holds `recordsCount` records; a violation raises CorruptRecordError
naming the batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from seglog.storage.compression import CompressionType, decompress
from seglog.storage.errors import CorruptRecordError
from seglog.storage.record_batch import HEADER_SIZE, BatchHeader, TimestampType
from seglog.storage.varint import decode_varint

from .arrow_types import HEADER_STRUCT, HEADERS_ARROW_TYPE

_HEADER_STRUCT = HEADER_STRUCT
_I64 = np.int64


@dataclass
class Columns:
    """Decoded records, one entry per record, in offset order."""

    offsets: np.ndarray  # int64
    timestamps_ms: np.ndarray  # int64
    timestamp_types: np.ndarray  # int32
    keys: pa.Array  # binary
    values: pa.Array  # binary
    headers: pa.Array | None  # list<struct<key:string,value:binary>>, when asked for
    key_value_bytes: int

    def __len__(self) -> int:
        return len(self.offsets)


def empty_columns(include_headers: bool) -> Columns:
    return Columns(
        offsets=np.zeros(0, _I64),
        timestamps_ms=np.zeros(0, _I64),
        timestamp_types=np.zeros(0, np.int32),
        keys=pa.array([], pa.binary()),
        values=pa.array([], pa.binary()),
        headers=pa.array([], HEADERS_ARROW_TYPE) if include_headers else None,
        key_value_bytes=0,
    )


def decode_batches(
    data: bytes,
    batches: Sequence[tuple[int, BatchHeader]],
    start: int = 0,
    end: int | None = None,
    include_headers: bool = False,
) -> Columns:
    """The records of `batches` (positions in `data` and their already CRC-checked
    headers; no control batches) with offsets in [start, end)."""
    if not batches:
        return empty_columns(include_headers)
    buf, sections = _records_sections(data, batches)
    a = np.frombuffer(buf, np.uint8)
    starts, ends, batch_of = _frame(buf, a, sections, batches)
    cols = _decode_fields(buf, a, starts, ends, batches, batch_of, include_headers)
    hi = end if end is not None else np.iinfo(_I64).max
    keep = (cols.offsets >= start) & (cols.offsets < hi)
    if not keep.all():
        cols = _select(cols, np.flatnonzero(keep))
    return cols


def _records_sections(
    data: bytes, batches: Sequence[tuple[int, BatchHeader]]
) -> tuple[bytes, list[tuple[int, int]]]:
    """One buffer holding every batch's records section, and [begin, end) of each.

    Uncompressed fetches are decoded in place; with a compressed batch among
    them every section is copied into one new buffer (decompressed once)."""
    if all(h.compression == CompressionType.NONE for _, h in batches):
        return data, [(pos + HEADER_SIZE, pos + h.size) for pos, h in batches]
    view = memoryview(data)
    pieces: list[bytes | memoryview] = []
    sections = []
    at = 0
    for pos, h in batches:
        section: bytes | memoryview = view[pos + HEADER_SIZE : pos + h.size]
        if h.compression != CompressionType.NONE:
            try:
                section = decompress(h.compression, section)
            except Exception as e:  # any codec's own error type: re-raised as corruption
                raise CorruptRecordError(
                    f"batch at offset {h.base_offset} does not decompress with "
                    f"{h.compression.name}: {e}"
                ) from e
        pieces.append(section)
        sections.append((at, at + len(section)))
        at += len(section)
    return b"".join(pieces), sections


def _frame(
    buf: bytes,
    a: np.ndarray,
    sections: list[tuple[int, int]],
    batches: Sequence[tuple[int, BatchHeader]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where each record's body starts and ends, and which batch holds it."""
    heads: list[int] = []  # where each record's length varint is
    add = heads.append
    stops = []
    for (begin, stop), (_, h) in zip(sections, batches, strict=True):
        p = begin
        n = h.records_count
        if n > stop - begin:  # each record takes at least one byte
            raise CorruptRecordError(
                f"batch at offset {h.base_offset} declares {n} records in {stop - begin} bytes"
            )
        # The hot loop: one or two bytes read per record (the zig-zag length); every
        # check is left to the vectorised pass below, which sees the same positions.
        try:
            for _ in range(n):
                add(p)
                z = buf[p]
                if z < 0x80:
                    p += 1 + ((z >> 1) ^ -(z & 1))
                    continue
                z2 = buf[p + 1]
                if z2 < 0x80:
                    z = (z & 0x7F) | (z2 << 7)
                    p += 2 + ((z >> 1) ^ -(z & 1))
                    continue
                length, p = decode_varint(buf, p, 5)
                p += length
        except IndexError:
            raise CorruptRecordError(
                f"batch at offset {h.base_offset} ends before its {n} records"
            ) from None
        if p != stop:
            raise CorruptRecordError(
                f"incorrect declared batch size: batch at offset {h.base_offset} holds "
                f"{stop - p} bytes after its {n} records"
            )
        stops.append(stop)
    head = np.array(heads, _I64)
    counts = np.array([h.records_count for _, h in batches])
    batch_of = np.repeat(np.arange(len(batches)), counts)
    # A record ends where the next one's length begins; a batch's last at its stop.
    limit = np.empty_like(head)
    limit[:-1] = head[1:]
    last = np.cumsum(counts) - 1
    limit[last[counts > 0]] = np.array(stops)[counts > 0]
    begin_of = np.array([s for s, _ in sections], _I64)[batch_of]
    if ((head < begin_of) | (head >= limit)).any():
        raise CorruptRecordError("a record's length points outside its batch")
    length, start = _varints(a, head, limit, 5, "record length")
    if (length < 0).any() or (start + length != limit).any():
        i = int(np.flatnonzero((length < 0) | (start + length != limit))[0])
        raise CorruptRecordError(
            f"record in batch at offset {batches[int(batch_of[i])][1].base_offset} declares "
            f"length {int(length[i])} beyond the batch's data"
        )
    return start, limit, batch_of


def _varints(
    a: np.ndarray, pos: np.ndarray, limit: np.ndarray, max_bytes: int, what: str
) -> tuple[np.ndarray, np.ndarray]:
    """Zig-zag varints at every position of `pos` at once: (values, next positions).

    Each must end before its record's `limit`; `what` names the field in errors."""
    n = len(pos)
    if n == 0:
        return np.zeros(0, _I64), pos
    last = len(a) - 1
    b = a[np.minimum(pos, last)]
    u = (b & 0x7F).astype(np.uint64)
    size = np.ones(n, _I64)
    more = np.flatnonzero(b >= 0x80)
    shift = 7
    while more.size:
        if shift >= 7 * max_bytes:
            raise CorruptRecordError(f"{what}: varint longer than {max_bytes} bytes")
        b = a[np.minimum(pos[more] + size[more], last)]
        u[more] |= (b & 0x7F).astype(np.uint64) << np.uint64(shift)
        size[more] += 1
        more = more[b >= 0x80]
        shift += 7
    nxt = pos + size
    if (nxt > limit).any():
        raise CorruptRecordError(f"{what}: varint runs past the end of its record")
    values = (u >> np.uint64(1)).astype(_I64) ^ -(u & np.uint64(1)).astype(_I64)
    return values, nxt


def _slices(buf: bytes, begin: np.ndarray, length: np.ndarray, valid: np.ndarray) -> pa.Array:
    """binary array of buf[begin[i] : begin[i] + length[i]] (null where not valid).

    Built as one zero-copy array alternating slices and the gaps between them,
    then every other element taken: Arrow copies the slices in C."""
    n = len(begin)
    if n == 0:
        return pa.array([], pa.binary())
    stop = begin + length
    if len(buf) >= 2**31:
        raise CorruptRecordError("a fetch of 2 GiB or more cannot be decoded in one piece")
    bounds = np.empty(2 * n, np.int32)
    bounds[0::2] = begin
    bounds[1::2] = stop
    if n > 1 and (bounds[1:] < bounds[:-1]).any():
        raise CorruptRecordError("record fields overlap")
    mask = np.ones(2 * n - 1, np.bool_)
    mask[0::2] = valid
    validity = None
    if not valid.all():
        validity = pa.py_buffer(np.packbits(mask, bitorder="little"))
    both = pa.Array.from_buffers(
        pa.binary(), 2 * n - 1, [validity, pa.py_buffer(bounds), pa.py_buffer(buf)]
    )
    return both.take(pa.array(np.arange(0, 2 * n - 1, 2)))


def _decode_fields(
    buf: bytes,
    a: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    batches: Sequence[tuple[int, BatchHeader]],
    batch_of: np.ndarray,
    include_headers: bool,
) -> Columns:
    pos = starts + 1  # attributes: unused
    if (pos > ends).any():
        raise CorruptRecordError("a record is too short to hold its attributes")
    ts_delta, pos = _varints(a, pos, ends, 10, "timestampDelta")
    offset_delta, pos = _varints(a, pos, ends, 5, "offsetDelta")
    key_len, pos = _varints(a, pos, ends, 5, "key length")
    key_at = pos
    pos = pos + np.maximum(key_len, 0)
    value_len, pos = _varints(a, pos, ends, 5, "value length")
    value_at = pos
    pos = pos + np.maximum(value_len, 0)
    header_count, pos = _varints(a, pos, ends, 5, "header count")
    if (key_len < -1).any() or (value_len < -1).any() or (header_count < 0).any():
        raise CorruptRecordError("a record has a negative key/value length or header count")
    headers, pos = _headers(buf, a, pos, ends, header_count, include_headers)
    if (pos != ends).any():
        i = int(np.flatnonzero(pos != ends)[0])
        base = batches[int(batch_of[i])][1].base_offset
        raise CorruptRecordError(
            f"record in batch at offset {base} has {int(ends[i] - pos[i])} bytes beyond its "
            f"declared fields"
        )

    base_offset = np.array([h.base_offset for _, h in batches], _I64)
    base_ts = np.array([h.base_timestamp for _, h in batches], _I64)
    max_ts = np.array([h.max_timestamp for _, h in batches], _I64)
    ts_type = np.array([int(h.timestamp_type) for _, h in batches], np.int32)
    log_append = ts_type == int(TimestampType.LOG_APPEND_TIME)
    per_batch_counts = np.array([h.records_count for _, h in batches])
    offsets = np.repeat(base_offset, per_batch_counts) + offset_delta
    timestamps = np.where(
        np.repeat(log_append, per_batch_counts),
        np.repeat(max_ts, per_batch_counts),
        np.repeat(base_ts, per_batch_counts) + ts_delta,
    )
    return Columns(
        offsets=offsets,
        timestamps_ms=timestamps,
        timestamp_types=np.repeat(ts_type, per_batch_counts),
        keys=_slices(buf, key_at, np.maximum(key_len, 0), key_len >= 0),
        values=_slices(buf, value_at, np.maximum(value_len, 0), value_len >= 0),
        headers=headers,
        key_value_bytes=int(np.maximum(key_len, 0).sum() + np.maximum(value_len, 0).sum()),
    )


def _headers(
    buf: bytes,
    a: np.ndarray,
    pos: np.ndarray,
    ends: np.ndarray,
    count: np.ndarray,
    include: bool,
) -> tuple[pa.Array | None, np.ndarray]:
    """Skip (or decode, when `include`) the headers: header h of every record that
    has more than h headers at once, for h = 0, 1, ..."""
    pos = pos.copy()
    most = int(count.max()) if len(count) else 0
    if most and most > int((ends - pos).max()):  # each header takes at least two bytes
        raise CorruptRecordError(f"a record declares {most} headers, more than its bytes")
    key_at, key_len, value_at, value_len = [], [], [], []
    for h in range(most):
        rows = np.flatnonzero(count > h)
        p, limit = pos[rows], ends[rows]
        klen, p = _varints(a, p, limit, 5, "header key length")
        if (klen < 0).any():
            raise CorruptRecordError("record header with a null key")
        k_at = p
        p = p + klen
        vlen, p = _varints(a, p, limit, 5, "header value length")
        v_at = p
        p = p + np.maximum(vlen, 0)
        if (p > limit).any():
            raise CorruptRecordError("header runs past the end of its record")
        pos[rows] = p
        if include:
            key_at.append(k_at)
            key_len.append(klen)
            value_at.append(v_at)
            value_len.append(vlen)
    if not include:
        return None, pos
    list_offsets = np.zeros(len(count) + 1, np.int32)
    np.cumsum(count, out=list_offsets[1:])
    if most == 0:
        items = pa.array([], _HEADER_STRUCT)
    else:
        # Order every header by its position in the buffer: record by record, in order.
        k_at_all = np.concatenate(key_at)
        order = np.argsort(k_at_all, kind="stable")
        k_at_all = k_at_all[order]
        k_len_all = np.concatenate(key_len)[order]
        v_at_all = np.concatenate(value_at)[order]
        v_len_all = np.concatenate(value_len)[order]
        raw_keys = _slices(buf, k_at_all, k_len_all, np.ones(len(order), np.bool_))
        try:
            keys = pc.cast(raw_keys, pa.string())
        except pa.ArrowInvalid:  # Kafka decodes header keys leniently
            keys = pa.array(
                [k.decode("utf-8", "replace") for k in raw_keys.to_pylist()], pa.string()
            )
        values = _slices(buf, v_at_all, np.maximum(v_len_all, 0), v_len_all >= 0)
        items = pa.StructArray.from_arrays([keys, values], fields=list(_HEADER_STRUCT))
    return (
        pa.ListArray.from_arrays(pa.array(list_offsets), items, type=HEADERS_ARROW_TYPE),
        pos,
    )


def _select(cols: Columns, rows: np.ndarray) -> Columns:
    idx = pa.array(rows)
    return Columns(
        offsets=cols.offsets[rows],
        timestamps_ms=cols.timestamps_ms[rows],
        timestamp_types=cols.timestamp_types[rows],
        keys=cols.keys.take(idx),
        values=cols.values.take(idx),
        headers=cols.headers.take(idx) if cols.headers is not None else None,
        key_value_bytes=cols.key_value_bytes,
    )


def concat(parts: Sequence[Columns], include_headers: bool) -> Columns:
    if not parts:
        return empty_columns(include_headers)
    if len(parts) == 1:
        return parts[0]
    return Columns(
        offsets=np.concatenate([c.offsets for c in parts]),
        timestamps_ms=np.concatenate([c.timestamps_ms for c in parts]),
        timestamp_types=np.concatenate([c.timestamp_types for c in parts]),
        keys=pa.concat_arrays([c.keys for c in parts]),
        values=pa.concat_arrays([c.values for c in parts]),
        headers=pa.concat_arrays([c.headers for c in parts if c.headers is not None])
        if include_headers
        else None,
        key_value_bytes=sum(c.key_value_bytes for c in parts),
    )
