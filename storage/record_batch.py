"""RecordBatch v2 (magic 2): the unit Kafka writes to `.log` files and moves over the wire.

The append path only ever parses the fixed 61-byte header and checks one CRC
per batch; records are decoded only for consumers and tools.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from .compression import CompressionType, compress, decompress
from .crc import crc32c
from .disk_and_clock import plain_wall_s
from .errors import (
    CorruptRecordError,
    InvalidRecordError,
    MessageTooLargeError,
    UnsupportedMagicError,
)
from .varint import decode_varint, encode_varint

Buffer = bytes | bytearray | memoryview

LOG_OVERHEAD = 12  # baseOffset + batchLength
HEADER_SIZE = 61
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21  # the CRC covers [21, end)
MAX_TIMESTAMP_OFFSET = 35
# Kafka's smallest legacy record overhead: a smaller batchLength cannot be any batch.
MIN_BATCH_LENGTH = 14
CURRENT_MAGIC = 2

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
MAX_SEQUENCE = 2**31 - 1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_PREFIX = struct.Struct(">qiib")  # the 17 bytes a reader inspects before anything else
# What a search for an offset needs of each header it steps over: baseOffset,
# batchLength, magic and lastOffsetDelta (the first 27 bytes), without a BatchHeader.
BATCH_SCAN = struct.Struct(">qi4xb6xi")
_BASE_OFFSET = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_INT64 = struct.Struct(">q")
_INT16 = struct.Struct(">h")

_CODEC_MASK = 0x07
_TIMESTAMP_TYPE_MASK = 0x08
_TRANSACTIONAL_MASK = 0x10
_CONTROL_MASK = 0x20
_DELETE_HORIZON_MASK = 0x40
# A constant: max() over the enum walks it, a measurable cost per batch.
_MAX_CODEC_ID = int(max(CompressionType))


class TimestampType(IntEnum):
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


class ControlType(IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2


def increment_sequence(sequence: int, delta: int) -> int:
    """`sequence + delta` with Kafka's wrap from 2^31-1 to 0."""
    if sequence > MAX_SEQUENCE - delta:
        return delta - (MAX_SEQUENCE - sequence) - 1
    return sequence + delta


@dataclass(slots=True, eq=False)
class BatchHeader:
    """The 61-byte header of one batch, parsed."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @classmethod
    def parse(cls, buf: Buffer, pos: int = 0) -> BatchHeader:
        if len(buf) - pos < HEADER_SIZE:
            raise CorruptRecordError(
                f"batch header at position {pos} needs {HEADER_SIZE} bytes, {len(buf) - pos} remain"
            )
        return cls(*_HEADER.unpack_from(buf, pos))

    @property
    def size(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> CompressionType:
        return CompressionType(self.attributes & _CODEC_MASK)

    @property
    def timestamp_type(self) -> TimestampType:
        return TimestampType((self.attributes & _TIMESTAMP_TYPE_MASK) >> 3)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & _DELETE_HORIZON_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    def __repr__(self) -> str:
        return (
            f"BatchHeader(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"size={self.size}, epoch={self.partition_leader_epoch}, count={self.records_count}, "
            f"max_timestamp={self.max_timestamp}, producer_id={self.producer_id}, "
            f"base_sequence={self.base_sequence})"
        )


@dataclass(frozen=True, slots=True)
class RecordHeader:
    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[RecordHeader, ...] = ()


@dataclass(frozen=True, slots=True)
class NewRecord:
    """A record as a producer hands it to the batch builder."""

    value: bytes | None
    key: bytes | None = None
    timestamp: int = NO_TIMESTAMP
    headers: Sequence[tuple[str, bytes | None]] = field(default_factory=tuple)


# --- reading ---------------------------------------------------------------


def batch_size_at(buf: Buffer, pos: int) -> int | None:
    """Size of the batch starting at `pos`, or None when the bytes left cannot
    hold a whole batch (a partial tail is end-of-data, not corruption).

    Raises CorruptRecordError for a length that cannot be a batch.
    """
    remaining = len(buf) - pos
    if remaining < MAGIC_OFFSET + 1:
        return None
    base_offset, batch_length, _epoch, magic = _PREFIX.unpack_from(buf, pos)
    if batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"batch at position {pos} (baseOffset {base_offset}) declares length "
            f"{batch_length}, below the minimum {MIN_BATCH_LENGTH}"
        )
    if magic != CURRENT_MAGIC:
        raise UnsupportedMagicError(
            f"batch at position {pos} (baseOffset {base_offset}) has magic {magic}; "
            f"only magic {CURRENT_MAGIC} is supported"
        )
    size = batch_length + LOG_OVERHEAD
    if size < HEADER_SIZE:
        raise CorruptRecordError(
            f"batch at position {pos} is {size} bytes, smaller than the {HEADER_SIZE}-byte header"
        )
    if size > remaining:
        return None
    return int(size)


def check_batch(buf: Buffer, pos: int = 0) -> BatchHeader:
    """Validate the whole batch at `pos` (length, magic, CRC) and return its header.

    A batch that does not fit in `buf` is corrupt here: callers that treat a
    partial tail as end-of-data use `batch_size_at` first.
    """
    # One unpack serves both the framing checks and the header; any framing
    # problem goes through batch_size_at so the error is exactly the reader's.
    fields = None
    remaining = len(buf) - pos
    if remaining >= HEADER_SIZE:
        fields = _HEADER.unpack_from(buf, pos)
        size = fields[1] + LOG_OVERHEAD
        if fields[3] != CURRENT_MAGIC or not HEADER_SIZE <= size <= remaining:
            fields = None
    if fields is None:
        batch_size_at(buf, pos)  # raises for a bad length or magic, else None: cut short
        raise CorruptRecordError(
            f"batch at position {pos} is truncated: {len(buf) - pos} bytes remain"
        )
    actual = crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])
    if actual != fields[4]:
        raise CorruptRecordError(
            f"batch at position {pos} (baseOffset {fields[0]}) failed its CRC check: "
            f"stored 0x{fields[4]:08x}, computed 0x{actual:08x}"
        )
    if fields[5] & _CODEC_MASK > _MAX_CODEC_ID:
        raise CorruptRecordError(
            f"batch at position {pos} (baseOffset {fields[0]}) names unknown "
            f"compression codec id {fields[5] & _CODEC_MASK}"
        )
    if fields[6] < 0:
        raise CorruptRecordError(
            f"batch at position {pos} has a negative lastOffsetDelta {fields[6]}"
        )
    if fields[12] < 0:
        raise CorruptRecordError(
            f"batch at position {pos} has a negative record count {fields[12]}"
        )
    return BatchHeader(*fields)


def iter_batches(
    buf: Buffer, start: int = 0, validate: bool = True
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each whole batch; stops silently at a partial tail."""
    pos = start
    end = len(buf)
    while pos < end:
        size = batch_size_at(buf, pos)
        if size is None:
            return
        header = check_batch(buf, pos) if validate else BatchHeader.parse(buf, pos)
        yield pos, header
        pos += size


def validate_client_batches(
    data: Buffer, max_message_bytes: int | None = None
) -> list[BatchHeader]:
    """Check a producer's append payload as a Kafka leader does before assigning offsets.

    Every batch must be whole and pass its CRC; baseOffset must be 0;
    lastOffsetDelta + 1 must equal recordsCount; control batches and
    producer batches without a sequence are refused. Nothing is decoded.
    """
    end = len(data)
    if end == 0:
        raise InvalidRecordError("the append carries no record batches")
    headers: list[BatchHeader] = []
    pos = 0
    while pos < end:
        header = check_batch(data, pos)
        if header.base_offset != 0:
            raise InvalidRecordError(
                f"batch at position {pos} has baseOffset {header.base_offset}; a producer "
                f"batch must have baseOffset 0"
            )
        count = header.records_count
        if header.last_offset_delta + 1 != count or count <= 0:
            raise InvalidRecordError(
                f"batch at position {pos} has lastOffsetDelta {header.last_offset_delta} but "
                f"{count} records; lastOffsetDelta must be count - 1"
            )
        if header.attributes & _CONTROL_MASK:
            raise InvalidRecordError(
                f"batch at position {pos} is a control batch; clients may not send one"
            )
        if header.producer_id >= 0 and header.base_sequence < 0:
            raise InvalidRecordError(
                f"batch at position {pos} has producerId {header.producer_id} but no base sequence"
            )
        size = header.batch_length + LOG_OVERHEAD
        if max_message_bytes is not None and size > max_message_bytes:
            raise MessageTooLargeError(
                f"batch at position {pos} is {size} bytes, larger than "
                f"max.message.bytes {max_message_bytes}"
            )
        headers.append(header)
        pos += size
    return headers


# One record's decoded fields: (offset, timestamp, key, value, headers).
RecordFields = tuple[int, int, "bytes | None", "bytes | None", tuple[RecordHeader, ...]]


def decode_records(buf: Buffer, pos: int = 0, header: BatchHeader | None = None) -> list[Record]:
    """Decode every record of the batch at `pos` (checks count and exact length)."""
    return [Record(*f) for f in decode_record_fields(buf, pos, header)]


def decode_record_fields(
    buf: Buffer, pos: int = 0, header: BatchHeader | None = None
) -> list[RecordFields]:
    """decode_records as plain tuples, for readers that build their own record objects
    (the Consumer): the same checks, without a Record per record.

    Varints of one or two bytes (lengths under 8 KiB, small deltas: nearly all of
    them) are decoded without decode_varint's loop; longer ones by decode_varint,
    which also bounds them."""
    if header is None:
        header = check_batch(buf, pos)
    end = pos + header.size
    data: bytes
    if header.compression != CompressionType.NONE:
        data = decompress(header.compression, memoryview(buf)[pos + HEADER_SIZE : end])
        p, n = 0, len(data)
    elif isinstance(buf, bytes):
        # Read in place: no copy of the batch. A read past `n` cannot make a record
        # valid: positions only grow and each record must end exactly at its length.
        data, p, n = buf, pos + HEADER_SIZE, end
    else:
        data = bytes(memoryview(buf)[pos + HEADER_SIZE : end])
        p, n = 0, len(data)
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    log_append = header.timestamp_type == TimestampType.LOG_APPEND_TIME
    records: list[RecordFields] = []
    try:
        for _ in range(header.records_count):
            length, p = _short_varint(data, p)
            body_end = p + length
            if length < 0 or body_end > n:
                raise CorruptRecordError(
                    f"record in batch at offset {base_offset} declares length {length} "
                    f"beyond the batch's data"
                )
            p += 1  # attributes: unused
            ts_delta, p = _short_varint(data, p, 10)
            offset_delta, p = _short_varint(data, p)
            key: bytes | None = None
            if data[p] == 1:  # zig-zag -1: a null key
                p += 1
            else:
                key, p = _inline_blob(data, p, body_end)
            value: bytes | None = None
            if data[p] == 1:
                p += 1
            else:
                value, p = _inline_blob(data, p, body_end)
            headers: tuple[RecordHeader, ...] = ()
            if data[p] == 0:
                p += 1
            else:
                headers, p = _read_headers(data, p, body_end)
            if p != body_end:
                raise CorruptRecordError(
                    f"record in batch at offset {base_offset} has {body_end - p} bytes "
                    f"beyond its declared fields"
                )
            records.append(
                (
                    base_offset + offset_delta,
                    header.max_timestamp if log_append else base_timestamp + ts_delta,
                    key,
                    value,
                    headers,
                )
            )
    except IndexError:
        raise CorruptRecordError(
            f"record in batch at offset {base_offset} runs past the end of the batch's data"
        ) from None
    if p != n:
        raise CorruptRecordError(
            f"incorrect declared batch size: batch at offset {base_offset} holds "
            f"{n - p} bytes after its {header.records_count} records"
        )
    return records


def _short_varint(data: bytes, p: int, max_bytes: int = 5) -> tuple[int, int]:
    """A varint for decode_record_fields: one or two bytes (values within ±8191)
    decoded inline, longer ones by decode_varint up to `max_bytes`."""
    b = data[p]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), p + 1
    c = data[p + 1]
    if c < 0x80:
        u = (b & 0x7F) | (c << 7)
        return (u >> 1) ^ -(u & 1), p + 2
    return decode_varint(data, p, max_bytes)


def _inline_blob(data: bytes, p: int, limit: int) -> tuple[bytes | None, int]:
    """_read_bytes for decode_record_fields, its length read by _short_varint."""
    size, p = _short_varint(data, p)
    if size < 0:
        return None, p
    if p + size > limit:
        raise CorruptRecordError(f"field of {size} bytes runs past the end of its record")
    return data[p : p + size], p + size


def _read_headers(data: bytes, p: int, body_end: int) -> tuple[tuple[RecordHeader, ...], int]:
    n_headers, p = decode_varint(data, p, 5)
    if n_headers < 0:
        raise CorruptRecordError(f"record has a negative header count {n_headers}")
    headers = []
    for _h in range(n_headers):
        hkey, p = _read_bytes(data, p, body_end)
        if hkey is None:
            raise CorruptRecordError("record header with a null key")
        hvalue, p = _read_bytes(data, p, body_end)
        headers.append(RecordHeader(hkey.decode("utf-8", "replace"), hvalue))
    return tuple(headers), p


def _read_bytes(buf: Buffer, pos: int, limit: int) -> tuple[bytes | None, int]:
    length, pos = decode_varint(buf, pos, 5)
    if length < 0:
        return None, pos
    if pos + length > limit:
        raise CorruptRecordError(f"field of {length} bytes runs past the end of its record")
    return bytes(buf[pos : pos + length]), pos + length


# --- writing ---------------------------------------------------------------


def encode_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] = (),
) -> None:
    body = bytearray(b"\x00")  # attributes
    encode_varint(timestamp_delta, body)
    encode_varint(offset_delta, body)
    _write_bytes(body, key)
    _write_bytes(body, value)
    encode_varint(len(headers), body)
    for hkey, hvalue in headers:
        _write_bytes(body, hkey.encode("utf-8"))
        _write_bytes(body, hvalue)
    encode_varint(len(body), out)
    out += body


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out.append(0x01)  # zig-zag -1
        return
    encode_varint(len(data), out)
    out += data


def build_batch(
    records: Sequence[NewRecord],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    compression: CompressionType = CompressionType.NONE,
    timestamp_type: TimestampType = TimestampType.CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    is_control: bool = False,
    now_ms: int | None = None,
) -> bytes:
    """Encode `records` as one v2 batch. Records without a timestamp get `now_ms`."""
    if not records:
        raise ValueError("a batch needs at least one record")
    if now_ms is None:
        now_ms = int(plain_wall_s() * 1000)
    timestamps = [r.timestamp if r.timestamp >= 0 else now_ms for r in records]
    base_ts = timestamps[0]
    body = bytearray()
    for i, (r, ts) in enumerate(zip(records, timestamps, strict=True)):
        encode_record(body, i, ts - base_ts, r.key, r.value, r.headers)
    payload = compress(compression, bytes(body))
    attributes = int(compression) | (int(timestamp_type) << 3)
    if is_transactional:
        attributes |= _TRANSACTIONAL_MASK
    if is_control:
        attributes |= _CONTROL_MASK
    return assemble_batch(
        payload,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        attributes=attributes,
        last_offset_delta=len(records) - 1,
        base_timestamp=base_ts,
        max_timestamp=max(timestamps),
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        records_count=len(records),
    )


def assemble_batch(
    payload: bytes,
    *,
    base_offset: int,
    partition_leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    records_count: int,
) -> bytes:
    """Frame an already encoded (and compressed) records section as a batch with its CRC."""
    size = HEADER_SIZE + len(payload)
    buf = bytearray(size)
    _HEADER.pack_into(
        buf,
        0,
        base_offset,
        size - LOG_OVERHEAD,
        partition_leader_epoch,
        CURRENT_MAGIC,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        records_count,
    )
    buf[HEADER_SIZE:] = payload
    _UINT32.pack_into(buf, CRC_OFFSET, crc32c(memoryview(buf)[ATTRIBUTES_OFFSET:]))
    return bytes(buf)


# --- in-place rewrites a leader makes ----------------------------------------


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Not covered by the CRC: the leader rewrites it without recomputing."""
    _BASE_OFFSET.pack_into(buf, pos, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Not covered by the CRC either."""
    _INT32.pack_into(buf, pos + 12, epoch)


def set_log_append_time(buf: bytearray | memoryview, pos: int, size: int, now_ms: int) -> None:
    """Switch a batch to LogAppendTime stamped `now_ms`; attributes and maxTimestamp
    are CRC-covered, so the CRC is recomputed."""
    (attributes,) = _INT16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)
    _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes | _TIMESTAMP_TYPE_MASK)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, now_ms)
    crc = crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size])
    _UINT32.pack_into(buf, pos + CRC_OFFSET, crc)


def control_record_type(buf: Buffer, pos: int, header: BatchHeader) -> tuple[int, int] | None:
    """(control type, coordinator epoch or -1) of a control batch's single record."""
    if not header.is_control or header.records_count == 0:
        return None
    (record,) = decode_records(buf, pos, header)[:1]
    if record.key is None or len(record.key) < 4:
        raise CorruptRecordError(f"control batch at offset {header.base_offset} has no valid key")
    version, ctype = struct.unpack_from(">hh", record.key)
    if version < 0:
        raise CorruptRecordError(f"control record key version {version} is negative")
    coordinator_epoch = -1
    if ctype in (ControlType.ABORT, ControlType.COMMIT) and record.value and len(record.value) >= 6:
        (_v, coordinator_epoch) = struct.unpack_from(">hi", record.value)
    return ctype, coordinator_epoch
