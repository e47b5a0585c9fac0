"""Records as the cleaner sees them, and the batches it writes back.

The cleaner needs of each record only where it lies in the batch, its offset
delta, timestamp delta, key and whether its value is null (a tombstone); the
bytes of a kept record are copied, never re-encoded, unless the batch's base
timestamp changes (a delete horizon is set), which moves every timestamp delta.

A rewritten batch keeps baseOffset, lastOffsetDelta, partitionLeaderEpoch,
producer id / epoch / base sequence and the transactional and control flags;
its records count, length, max timestamp and CRC are recomputed. A batch whose
records are all removed but that must stay (producer state) becomes a 61-byte
header: no compression, baseTimestamp -1, its old maxTimestamp.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from .compression import CompressionType, compress, decompress
from .errors import CorruptRecordError, InvalidRecordError
from .record_batch import (
    HEADER_SIZE,
    NO_TIMESTAMP,
    BatchHeader,
    TimestampType,
    assemble_batch,
)
from .varint import decode_varint, encode_varint

Buffer = bytes | bytearray | memoryview

DELETE_HORIZON_FLAG = 0x40
_new_tuple = tuple.__new__
_CODEC_MASK = 0x07


class ScannedRecord(NamedTuple):
    start: int  # first byte of the record (its length varint) in the payload
    end: int  # one past its last byte
    offset_delta: int
    timestamp_delta: int
    ts_end: int  # one past the timestamp delta's last byte
    key: bytes | None
    tombstone: bool  # null value


def _varint(buf: Buffer, pos: int, max_bytes: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    b2 = buf[pos + 1]
    if b2 < 0x80:
        u = (b & 0x7F) | (b2 << 7)
        return (u >> 1) ^ -(u & 1), pos + 2
    return decode_varint(buf, pos, max_bytes)


def batch_payload(buf: Buffer, pos: int, header: BatchHeader) -> bytes | memoryview:
    """The records section of the batch at `pos`, decompressed."""
    payload = memoryview(buf)[pos + HEADER_SIZE : pos + header.size]
    if header.attributes & _CODEC_MASK:
        return decompress(header.compression, payload)
    return payload


def _length_beyond_data(base_offset: int, length: int) -> CorruptRecordError:
    return CorruptRecordError(
        f"record in batch at offset {base_offset} declares length {length} beyond the batch's data"
    )


def _past_its_length(base_offset: int) -> CorruptRecordError:
    return CorruptRecordError(
        f"record in batch at offset {base_offset} runs past its declared length"
    )


def _cut_short(base_offset: int) -> CorruptRecordError:
    return CorruptRecordError(f"records of batch at offset {base_offset} are cut short")


def _check_all_read(p: int, n: int, base_offset: int, count: int) -> None:
    """The `count` records ended at `p`: exactly where the `n` bytes of the section do."""
    if p != n:
        raise CorruptRecordError(
            f"incorrect declared batch size: batch at offset {base_offset} holds "
            f"{n - p} bytes after its {count} records"
        )


def scan_records(payload: Buffer, count: int, base_offset: int = 0) -> list[ScannedRecord]:
    """The `count` records of a decompressed records section, checked for framing."""
    out: list[ScannedRecord] = []
    append = out.append
    new = _new_tuple
    n = len(payload)
    p = 0
    varint = _varint
    try:
        for _ in range(count):
            start = p
            length, p = varint(payload, p, 5)
            end = p + length
            if length < 1 or end > n:
                raise _length_beyond_data(base_offset, length)
            ts_delta, p = varint(payload, p + 1, 10)
            ts_end = p
            offset_delta, p = varint(payload, p, 5)
            key_len, p = varint(payload, p, 5)
            if key_len < 0:
                key = None
            else:
                key = bytes(payload[p : p + key_len])
                p += key_len
            value_len, p = varint(payload, p, 5)
            if p > end or (value_len > 0 and p + value_len > end):
                raise _past_its_length(base_offset)
            append(
                new(
                    ScannedRecord,
                    (start, end, offset_delta, ts_delta, ts_end, key, value_len < 0),
                )
            )
            p = end
    except IndexError as e:
        raise _cut_short(base_offset) from e
    _check_all_read(p, n, base_offset, count)
    return out


def scan_keys(
    payload: Buffer, count: int, base_offset: int, keys: list[bytes], offsets: list[int]
) -> None:
    """Append the key and offset of every keyed record to `keys` / `offsets`: what the
    offset map needs, without the rest of scan_records' work."""
    n = len(payload)
    p = 0
    varint = _varint
    kappend = keys.append
    oappend = offsets.append
    try:
        for _ in range(count):
            length, p = varint(payload, p, 5)
            end = p + length
            if length < 1 or end > n:
                raise _length_beyond_data(base_offset, length)
            _ts, p = varint(payload, p + 1, 10)
            offset_delta, p = varint(payload, p, 5)
            key_len, p = varint(payload, p, 5)
            if key_len >= 0:
                if p + key_len > end:
                    raise _past_its_length(base_offset)
                kappend(bytes(payload[p : p + key_len]))
                oappend(base_offset + offset_delta)
            p = end
    except IndexError as e:
        raise _cut_short(base_offset) from e
    _check_all_read(p, n, base_offset, count)


def first_null_key(buf: Buffer, pos: int, header: BatchHeader) -> int | None:
    """Offset delta of the batch's first record without a key, None if every record has one."""
    payload = batch_payload(buf, pos, header)
    for r in scan_records(payload, header.records_count, header.base_offset):
        if r.key is None:
            return r.offset_delta
    return None


def check_keys_for_compaction(buf: Buffer, headers: Sequence[BatchHeader], topic: str) -> None:
    """A compacted topic refuses records without a key (Kafka's INVALID_RECORD), each
    one named as Kafka's LogValidator does (KIP-467's record errors: its index in the
    batch)."""
    pos = 0
    for h in headers:
        payload = batch_payload(buf, pos, h)
        keyless = [
            i
            for i, r in enumerate(scan_records(payload, h.records_count, h.base_offset))
            if r.key is None
        ]
        if keyless:
            why = f"Compacted topic cannot accept message without key in topic partition {topic}."
            raise InvalidRecordError(
                f"Compacted topic {topic} cannot accept a message without a key: record "
                f"{keyless[0]} of the batch at position {pos} has none",
                tuple((i, why) for i in keyless),
            )
        pos += h.size


def record_timestamp(header: BatchHeader, record: ScannedRecord) -> int:
    if header.timestamp_type == TimestampType.LOG_APPEND_TIME:
        return header.max_timestamp
    return header.base_timestamp + record.timestamp_delta


def empty_batch(header: BatchHeader) -> bytes:
    """The header-only batch that keeps an emptied batch's offsets and producer fields."""
    attributes = header.attributes & ~(_CODEC_MASK | DELETE_HORIZON_FLAG)
    return assemble_batch(
        b"",
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=NO_TIMESTAMP,
        max_timestamp=header.max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        records_count=0,
    )


def rebuild_batch(
    header: BatchHeader,
    payload: Buffer,
    kept: Sequence[ScannedRecord],
    delete_horizon_ms: int | None,
) -> bytes:
    """The batch holding only `kept` (non-empty) records, in the original codec.

    With `delete_horizon_ms` the batch gets the delete-horizon flag and that base
    timestamp, and every record's timestamp delta is re-encoded so its timestamp
    stays what it was."""
    if not kept:
        raise ValueError("a rebuilt batch needs at least one record; use empty_batch")
    attributes = header.attributes
    base_ts = header.base_timestamp
    log_append = header.timestamp_type == TimestampType.LOG_APPEND_TIME
    view = memoryview(payload)
    if delete_horizon_ms is not None and (
        not header.has_delete_horizon or delete_horizon_ms != base_ts
    ):
        attributes |= DELETE_HORIZON_FLAG
        body = bytearray()
        for r in kept:
            ts = header.base_timestamp + r.timestamp_delta
            inner = bytearray(b"\x00")  # attributes
            encode_varint(ts - delete_horizon_ms, inner)
            inner += view[r.ts_end : r.end]
            encode_varint(len(inner), body)
            body += inner
        base_ts = delete_horizon_ms
    else:
        body = bytearray()
        for r in kept:
            body += view[r.start : r.end]
    if log_append:
        max_ts = header.max_timestamp
    else:
        max_ts = max(header.base_timestamp + r.timestamp_delta for r in kept)
    codec = CompressionType(attributes & _CODEC_MASK)
    data = compress(codec, bytes(body)) if codec != CompressionType.NONE else bytes(body)
    return assemble_batch(
        data,
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=base_ts,
        max_timestamp=max_ts,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        records_count=len(kept),
    )


__all__ = [
    "DELETE_HORIZON_FLAG",
    "ScannedRecord",
    "batch_payload",
    "check_keys_for_compaction",
    "empty_batch",
    "first_null_key",
    "rebuild_batch",
    "record_timestamp",
    "scan_keys",
    "scan_records",
]
