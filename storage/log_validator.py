"""What a log checks before it appends, in one place (Kafka's LogValidator): the
production `Log` and the replication simulator's log both call it, so a rule can only
change for both.

A leader append (a producer's batches) is checked and rewritten in memory, nothing
written yet: every batch whole, its CRC right, magic 2, baseOffset 0 and
lastOffsetDelta = count - 1, no control batch, a sequence with every producer id, at
most max.message.bytes (`record_batch.validate_client_batches`); recompressed into the
topic's compression.type when it names a codec; keys present on a compacted topic; the
append no larger than segment.bytes; CreateTime timestamps within
message.timestamp.before/after.max.ms of now, or LogAppendTime stamped; then offsets
from the log end offset and the leader epoch assigned in place. Producer id, epoch and
sequence are checked against the log's producer state by the log itself
(`ProducerStateManager.prepare_appends`), as they depend on what it holds.

A follower append (a leader's batches, written verbatim) is checked for CRC and magic
and for offsets above the log end offset.
"""

from __future__ import annotations

from typing import NamedTuple

from .cleaner_records import check_keys_for_compaction
from .compression import CompressionType
from .errors import (
    InvalidTimestampError,
    RecordListTooLargeError,
    StorageError,
    UnexpectedAppendOffsetError,
)
from .log_config import LogConfig
from .record_batch import (
    LOG_OVERHEAD,
    BatchHeader,
    NewRecord,
    TimestampType,
    build_batch,
    check_batch,
    decode_records,
    set_base_offset,
    set_log_append_time,
    set_partition_leader_epoch,
    validate_client_batches,
)

Buffer = bytes | bytearray | memoryview


class ValidatedAppend(NamedTuple):
    """A leader append ready to write: offsets and the leader epoch assigned."""

    data: bytearray
    headers: list[BatchHeader]
    log_append_time: bool  # stamped with the append time (message.timestamp.type)


def validate_leader_append(
    data: Buffer,
    config: LogConfig,
    *,
    first_offset: int,
    leader_epoch: int,
    now_ms: int,
    topic: str,
    log_name: str,
) -> ValidatedAppend:
    """Check a producer's batches and assign their offsets (from `first_offset`) and the
    leader epoch; raises a StorageError naming what is wrong before anything is written."""
    headers = validate_client_batches(data, config.max_message_bytes)
    if config.compression_type != "producer":
        data, headers = _recompress(data, headers, config.compression_type)
    if config.compact:
        check_keys_for_compaction(data, headers, topic)
    if len(data) > config.segment_bytes:
        raise RecordListTooLargeError(
            f"append of {len(data)} bytes to {log_name} exceeds "
            f"segment.bytes {config.segment_bytes}"
        )
    log_append_time = config.message_timestamp_type == "LogAppendTime"
    if not log_append_time:
        _check_timestamps(headers, config, now_ms, log_name)
    buf = bytearray(data)
    offset = first_offset
    pos = 0
    for h in headers:
        set_base_offset(buf, pos, offset)
        set_partition_leader_epoch(buf, pos, leader_epoch)
        h.base_offset = offset
        h.partition_leader_epoch = leader_epoch
        size = h.batch_length + LOG_OVERHEAD
        if log_append_time:
            set_log_append_time(buf, pos, size, now_ms)
            h.max_timestamp = now_ms
            h.attributes |= int(TimestampType.LOG_APPEND_TIME) << 3
        offset += h.last_offset_delta + 1
        pos += size
    return ValidatedAppend(buf, headers, log_append_time)


def max_timestamp_of(headers: list[BatchHeader]) -> tuple[int, int]:
    """(max timestamp, the last offset of the batch holding it) of `headers`."""
    max_ts, offset_of_max = -1, headers[-1].last_offset
    for h in headers:
        if h.max_timestamp > max_ts:
            max_ts, offset_of_max = h.max_timestamp, h.last_offset
    return max_ts, offset_of_max


def validate_follower_append(data: Buffer, log_end_offset: int, log_name: str) -> list[BatchHeader]:
    """A leader's batches as a follower appends them verbatim: each whole with a valid
    CRC, offsets rising from at least `log_end_offset`."""
    headers: list[BatchHeader] = []
    pos = 0
    previous_last = log_end_offset - 1
    while pos < len(data):
        h = check_batch(data, pos)
        if h.base_offset <= previous_last:
            raise UnexpectedAppendOffsetError(
                f"follower append to {log_name}: batch at position {pos} starts at offset "
                f"{h.base_offset}, but the log end offset is {previous_last + 1}"
            )
        headers.append(h)
        previous_last = h.last_offset
        pos += h.size
    if not headers:
        raise StorageError("follower append carries no batches")
    return headers


def _recompress(
    data: Buffer, headers: list[BatchHeader], compression_type: str
) -> tuple[Buffer, list[BatchHeader]]:
    """A topic with its own compression.type: rebuild batches in another codec (the only
    case where the leader decodes records, as in Kafka)."""
    target = CompressionType.from_name(compression_type)
    if all(h.compression == target for h in headers):
        return data, headers
    out = bytearray()
    pos = 0
    for h in headers:
        if h.compression == target:
            out += data[pos : pos + h.size]
        else:
            records = decode_records(data, pos, h)
            out += build_batch(
                [
                    NewRecord(r.value, r.key, r.timestamp, [(x.key, x.value) for x in r.headers])
                    for r in records
                ],
                compression=target,
                timestamp_type=h.timestamp_type,
                producer_id=h.producer_id,
                producer_epoch=h.producer_epoch,
                base_sequence=h.base_sequence,
                is_transactional=h.is_transactional,
            )
        pos += h.size
    return out, validate_client_batches(out, None)


def _check_timestamps(
    headers: list[BatchHeader], config: LogConfig, now_ms: int, log_name: str
) -> None:
    """Kafka checks every record; we check each batch's first and max timestamp, which
    bound its records for every producer that writes them in order."""
    before = config.message_timestamp_before_max_ms
    after = config.message_timestamp_after_max_ms
    low, high = now_ms - before, now_ms + after
    for h in headers:
        for ts in (h.base_timestamp, h.max_timestamp):
            if ts >= 0 and not low <= ts <= high:
                raise InvalidTimestampError(
                    f"timestamp {ts} of a batch for {log_name} is out of range "
                    f"(now {now_ms}, message.timestamp.before.max.ms {before}, "
                    f"message.timestamp.after.max.ms {after})"
                )
