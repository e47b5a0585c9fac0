"""RecordBatch v2 bytes → Arrow columns, without a Python object per record.

A fetch answer (or a chunk of a `.log` file) is a run of whole batches. Each
batch is CRC-checked and, when compressed, decompressed once; the records
sections of all batches are then decoded together:

1. framing: where each record starts. Record i+1 starts where record i's length
   varint says, a chain; it is followed speculatively with numpy (guess that the
   next records have this one's size, check every guess at once, keep the run of
   guesses that holds; see `_chain`), all batches at once. Producers write runs
   of equal-sized records, so a round keeps hundreds; where sizes vary record by
   record, a short Python loop reads each length instead;
2. fields: every varint (record length, timestamp delta, offset delta, key and
   value lengths, header count, header key/value lengths) is decoded for all
   records at once with numpy: the one- and two-byte ones from one 16-bit read;
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
    bv = _Bytes(buf)
    starts, ends, batch_of = _frame(buf, bv, sections, batches)
    cols = _decode_fields(buf, bv, starts, ends, batches, batch_of, include_headers)
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
    bv: _Bytes,
    sections: list[tuple[int, int]],
    batches: Sequence[tuple[int, BatchHeader]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where each record's body starts and ends, and which batch holds it."""
    counts = np.array([h.records_count for _, h in batches], _I64)
    begins = np.array([s for s, _ in sections], _I64)
    stops = np.array([s for _, s in sections], _I64)
    too_many = np.flatnonzero(counts > stops - begins)  # each record takes at least one byte
    if too_many.size:
        b = int(too_many[0])
        raise CorruptRecordError(
            f"batch at offset {batches[b][1].base_offset} declares {int(counts[b])} records "
            f"in {int(stops[b] - begins[b])} bytes"
        )
    head, after = _chain(buf, bv, begins, stops, counts, batches)
    bad = np.flatnonzero(after != stops)
    if bad.size:
        b = int(bad[0])
        raise CorruptRecordError(
            f"incorrect declared batch size: batch at offset {batches[b][1].base_offset} "
            f"holds {int(stops[b] - after[b])} bytes after its {int(counts[b])} records"
        )
    batch_of = np.repeat(np.arange(len(batches)), counts)
    # A record ends where the next one's length begins; a batch's last at its stop.
    limit = np.empty_like(head)
    limit[:-1] = head[1:]
    last = np.cumsum(counts) - 1
    limit[last[counts > 0]] = stops[counts > 0]
    begin_of = begins[batch_of]
    if ((head < begin_of) | (head >= limit)).any():
        raise CorruptRecordError("a record's length points outside its batch")
    length, start = _varints(bv, head, limit, 5, "record length")
    if (length < 0).any() or (start + length != limit).any():
        i = int(np.flatnonzero((length < 0) | (start + length != limit))[0])
        raise CorruptRecordError(
            f"record in batch at offset {batches[int(batch_of[i])][1].base_offset} declares "
            f"length {int(length[i])} beyond the batch's data"
        )
    return start, limit, batch_of


# Speculative framing (see _chain): a batch's first guess covers this many records;
# the window doubles while every guess holds, up to the cap, and shrinks to about
# twice the run that held when one fails.
_FIRST_WINDOW = 256
_MAX_WINDOW = 1 << 16
_MIN_WINDOW = 256
# Record sizes that vary from record to record: the Python loop, which costs less
# per record than a round's numpy calls then, finishes every batch when a round
# keeps fewer than _MIN_RUN records per unfinished batch on average, and a batch
# that still averages fewer than that after _SLOW_ROUNDS rounds.
_SLOW_ROUNDS = 3
_MIN_RUN = 16
# Fewer records than this in a whole answer (a small micro-batch's fetch): the
# Python loop frames them in less time than a round's numpy calls take.
_LOOP_RECORDS = 2048


def _chain(
    buf: bytes,
    bv: _Bytes,
    begins: np.ndarray,
    stops: np.ndarray,
    counts: np.ndarray,
    batches: Sequence[tuple[int, BatchHeader]],
) -> tuple[np.ndarray, np.ndarray]:
    """Where every record's length varint is, and where each batch's chain of
    records ends (which must be its stop; the caller checks).

    Record i+1 starts where record i's length says, so the starts form a chain.
    It is followed speculatively, for all batches at once: from a batch's last
    known start p, where the record is s bytes long, guess that the next k
    records start at p, p+s, p+2s, ...; compare the length varint's bytes at
    every guess with those at p in one numpy pass and keep the guesses up to the
    first one whose length differs (that one included: it is a start, but the
    next guess is not). Every kept guess is a true start (by induction from p);
    the next p is where the last kept one's record ends. A producer's records
    often have one size for long runs (the size changes with a field's varint
    width or a key's length), so a round keeps hundreds; a batch that keeps few
    per round goes to the Python loop, as do batches whose next record is
    malformed.
    Nothing here is trusted: `_frame` decodes the length at every start strictly
    and requires it to end exactly at the next start (or the batch's end)."""
    head = np.empty(int(counts.sum()), _I64)
    first = np.zeros(len(counts), _I64)
    np.cumsum(counts[:-1], out=first[1:])
    p = begins.copy()
    done = np.zeros_like(counts)
    window = np.full_like(counts, _FIRST_WINDOW)
    rounds = 0
    runs: list[tuple[np.ndarray, ...]] = []  # kept: (first record index, start, size, count)
    to_loop: list[int] = []
    act = np.flatnonzero(counts > 0)
    if len(head) < _LOOP_RECORDS:
        to_loop, act = act.tolist(), act[:0]
    while act.size:
        pa_, stop = p[act], stops[act]
        safe = np.maximum(pa_, 0)
        length, width = _varint_at(bv, safe, 5, None)
        size = width + length
        odd = (pa_ < begins[act]) | (size <= 0) | (pa_ + size > stop)
        if odd.any():
            to_loop.extend(act[odd].tolist())
            keep = ~odd
            act, pa_, safe, stop = act[keep], pa_[keep], safe[keep], stop[keep]
            size, width = size[keep], width[keep]
            if not act.size:
                break
        # No guess past the batch's end: that would be a record of its own.
        k = np.minimum(window[act], counts[act] - done[act])
        k = np.minimum(k, (stop - pa_ + size - 1) // size)
        seg_end = np.cumsum(k)
        seg_start = seg_end - k
        guess = np.repeat(pa_ - size * seg_start, k) + np.repeat(size, k) * np.arange(
            int(seg_end[-1])
        )
        # A guess (a true start, by induction) is followed by the next guess when its
        # length varint has the same bytes as the run's first: compared as the 16-bit
        # words there (and at +2, +4 for the rare lengths of 3 to 5 bytes), masked to
        # the varint's width.
        same = _same_bytes(bv, guess, safe, width, k, 0)
        if int(width.max()) > 2:
            same &= _same_bytes(bv, guess, safe, width, k, 2)
            same &= _same_bytes(bv, guess, safe, width, k, 4)
        # The last guess kept in each segment: the first whose record has another
        # length, or the segment's last.
        at = np.flatnonzero(~same)
        last_kept = seg_end - 1
        if at.size:
            first_break = at[np.minimum(np.searchsorted(at, seg_start), at.size - 1)]
            last_kept = np.where(
                first_break >= seg_start, np.minimum(first_break, last_kept), last_kept
            )
        nxt = _next_starts(bv, guess[last_kept])
        kept = last_kept - seg_start + 1
        runs.append((first[act] + done[act], pa_, size, kept))
        p[act] = nxt
        done[act] += kept
        window[act] = np.where(
            kept == k, np.minimum(2 * window[act], _MAX_WINDOW), np.maximum(2 * kept, _MIN_WINDOW)
        )
        rounds += 1
        left = done[act] < counts[act]
        if int(kept[left].sum()) < _MIN_RUN * int(left.sum()):  # in most batches
            slow = left
        elif rounds >= _SLOW_ROUNDS:  # in some batches
            slow = left & (done[act] < _MIN_RUN * rounds)
        else:
            slow = None
        if slow is not None:
            to_loop.extend(act[slow].tolist())
            left &= ~slow
        act = act[left]
    if runs:
        index, start, size, kept = (np.concatenate(x) for x in zip(*runs, strict=True))
        step = np.arange(int(kept.sum())) - np.repeat(np.cumsum(kept) - kept, kept)
        head[np.repeat(index, kept) + step] = np.repeat(start, kept) + np.repeat(size, kept) * step
    for b in to_loop:
        at_b, n = int(first[b] + done[b]), int(counts[b] - done[b])
        heads, p[b] = _walk(buf, int(p[b]), n, batches[b][1].base_offset)
        head[at_b : at_b + n] = heads
    return head, p


def _same_bytes(
    bv: _Bytes, guess: np.ndarray, first: np.ndarray, width: np.ndarray, k: np.ndarray, at: int
) -> np.ndarray:
    """Per guess: are bytes at..at+1 of its length varint (those within the varint's
    `width`) the same as at its segment's first record?"""
    keep = np.clip(width - at, 0, 2)  # bytes of this word inside the varint
    mask = np.array([0, 0xFF, 0xFFFF], np.int32)[keep]
    want = bv.words(first + at) & mask
    return (bv.words(guess + at) & np.repeat(mask, k)) == np.repeat(want, k)


def _walk(buf: bytes, p: int, n: int, base_offset: int) -> tuple[list[int], int]:
    """The next `n` record starts from `p` (and the position after them), one by one."""
    heads: list[int] = []
    add = heads.append
    # One or two bytes read per record (the zig-zag length); every check is left to
    # the vectorised pass over all starts, which sees the same positions.
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
        raise CorruptRecordError(f"batch at offset {base_offset} ends before its records") from None
    return heads, p


def _next_starts(b: _Bytes, pos: np.ndarray) -> np.ndarray:
    """For records starting at each of `pos` (none negative): where the next record
    starts (the position after the length varint plus the length). Positions past
    the buffer and varints longer than 5 bytes give some position: the caller only
    compares it, and the strict pass over the kept starts raises on them."""
    values, size = _varint_at(b, pos, 5, None)
    return pos + size + values


class _Bytes:
    """A buffer as bytes and as overlapping little-endian 16-bit words (the word at i
    is bytes i and i+1), so that the one- and two-byte varints almost every field
    has are read with one gather."""

    __slots__ = ("u8", "u16")

    def __init__(self, buf: bytes) -> None:
        self.u8 = np.frombuffer(buf, np.uint8)
        if len(buf) >= 2:
            self.u16 = np.ndarray((len(buf) - 1,), "<u2", buffer=buf, strides=(1,))
        else:
            self.u16 = self.u8.astype("<u2")

    def words(self, pos: np.ndarray) -> np.ndarray:
        """The 16-bit words at `pos` (none negative) as int32; at the last byte its
        byte alone, past it anything (every caller checks positions against limits
        that end within the buffer)."""
        top = len(self.u16) - 1
        if pos.size and int(pos.max()) > top:
            if top < 0:  # an empty buffer
                return np.zeros(len(pos), np.int32)
            w = self.u16[np.minimum(pos, top)].astype(np.int32)
            w[pos > top] = self.u8[-1]
            return w
        return self.u16[pos].astype(np.int32)


def _varint_at(
    b: _Bytes, pos: np.ndarray, max_bytes: int, what: str | None
) -> tuple[np.ndarray, np.ndarray]:
    """Zig-zag varints at every position of `pos` at once: (values, sizes in bytes).

    One or two bytes are decoded from one word per position, in int32; the rare
    longer ones byte by byte. A varint longer than `max_bytes` raises naming `what`
    (None: its value is left unfinished)."""
    w = b.words(pos)
    cont = (w >> 7) & 1
    u = (w & 0x7F) | ((w >> 1) & 0x3F80) * cont
    size = 1 + cont
    longer = np.flatnonzero((w & 0x8080) == 0x8080)
    if not longer.size:
        return (u >> 1) ^ -(u & 1), size
    wide = u.astype(np.uint64)
    last = len(b.u8) - 1
    shift = 14
    while longer.size:
        if shift >= 7 * max_bytes:
            if what is None:
                break
            raise CorruptRecordError(f"{what}: varint longer than {max_bytes} bytes")
        x = b.u8[np.minimum(pos[longer] + size[longer], last)]
        wide[longer] |= (x & 0x7F).astype(np.uint64) << np.uint64(shift)
        size[longer] += 1
        longer = longer[x >= 0x80]
        shift += 7
    return (wide >> np.uint64(1)).astype(_I64) ^ -(wide & np.uint64(1)).astype(_I64), size


def _varints(
    b: _Bytes, pos: np.ndarray, limit: np.ndarray, max_bytes: int, what: str
) -> tuple[np.ndarray, np.ndarray]:
    """Zig-zag varints at every position of `pos` at once: (values, next positions).

    Each must end before its record's `limit`; `what` names the field in errors."""
    if len(pos) == 0:
        return np.zeros(0, _I64), pos
    values, size = _varint_at(b, pos, max_bytes, what)
    nxt = pos + size
    if (nxt > limit).any():
        raise CorruptRecordError(f"{what}: varint runs past the end of its record")
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
    bv: _Bytes,
    starts: np.ndarray,
    ends: np.ndarray,
    batches: Sequence[tuple[int, BatchHeader]],
    batch_of: np.ndarray,
    include_headers: bool,
) -> Columns:
    pos = starts + 1  # attributes: unused
    if (pos > ends).any():
        raise CorruptRecordError("a record is too short to hold its attributes")
    ts_delta, pos = _varints(bv, pos, ends, 10, "timestampDelta")
    offset_delta, pos = _varints(bv, pos, ends, 5, "offsetDelta")
    key_len, pos = _varints(bv, pos, ends, 5, "key length")
    key_at = pos
    pos = pos + np.maximum(key_len, 0)
    value_len, pos = _varints(bv, pos, ends, 5, "value length")
    value_at = pos
    pos = pos + np.maximum(value_len, 0)
    header_count, pos = _varints(bv, pos, ends, 5, "header count")
    if (key_len < -1).any() or (value_len < -1).any() or (header_count < 0).any():
        raise CorruptRecordError("a record has a negative key/value length or header count")
    headers, pos = _headers(buf, bv, pos, ends, header_count, include_headers)
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
    bv: _Bytes,
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
        klen, p = _varints(bv, p, limit, 5, "header key length")
        if (klen < 0).any():
            raise CorruptRecordError("record header with a null key")
        k_at = p
        p = p + klen
        vlen, p = _varints(bv, p, limit, 5, "header value length")
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
