"""The hot APIs' codec: request headers, Produce (v3-v11) and Fetch at its flexible
versions (v12-v17), written out field by field from Kafka's message schemas
(ProduceRequest.json, FetchRequest.json, their responses; the copies kafka-python ships).

Every produce and every replica fetch goes through these: kafka-python's generated
classes spend ~20 µs decoding a one-partition Fetch and as much again building and
encoding its answer (docs/perf/data-path.md), here a few µs. The decoded bodies are
plain slotted objects with kafka-python's attribute names, so handlers read either
alike. tests/kafka/test_hot_codec.py checks every function against kafka-python's
classes byte for byte over generated messages; other APIs and versions stay with
kafka-python (node/kafka/codec.py)."""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass
from typing import Any

from seglog.storage.file_slice import FileSlice

Part = bytes | FileSlice

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_HEADER = struct.Struct(">hhi")  # api key, api version, correlation id
_PARTITION_V12 = struct.Struct(">ihqqq")  # index, error, HW, LSO, log start
_PRODUCED = struct.Struct(">ihqq")  # index, error, base offset, log append time
_FETCH_TOP = struct.Struct(">iiibii")  # max wait, min bytes, max bytes, isolation, session
_FETCH_PARTITION_V12 = struct.Struct(">iiqiqi")
_EPOCH_END = struct.Struct(">iq")
_LEADER = struct.Struct(">ii")
_REPLICA_STATE = struct.Struct(">iq")
_FETCH_ANSWER_TOP = struct.Struct(">ihi")  # throttle, error, session id
_ACKS_TIMEOUT = struct.Struct(">hi")

# Records at least this large go out as a part of their own rather than copied into the
# frame (smaller ones are cheaper as one write than as a write each).
OWN_PART_BYTES = 64 * 1024
FETCH_FLEXIBLE = (12, 17)  # the Fetch versions decoded and encoded here
PRODUCE_FLEXIBLE = 9
PRODUCE_VERSIONS = (3, 11)  # the Produce versions decoded and encoded here
# KIP-951's leader hints: CurrentLeader in Produce v10+ and Fetch v12+, NodeEndpoints in
# Produce v10+ and Fetch v16+.
PRODUCE_LEADER_HINTS = 10
FETCH_NODE_ENDPOINTS = 16


_UUIDS: dict[bytes, uuid.UUID] = {}  # topic ids seen: a handful, bounded below
_UUIDS_MAX = 4096


def uuid_of(raw: bytes) -> uuid.UUID:
    """The UUID of 16 bytes, remembered: every fetch names the same few topic ids, and
    uuid.UUID() costs more than the rest of a partition's decoding."""
    known = _UUIDS.get(raw)
    if known is None:
        if len(_UUIDS) >= _UUIDS_MAX:
            _UUIDS.clear()
        known = _UUIDS[raw] = uuid.UUID(bytes=raw)
    return known


class Malformed(ValueError):
    """A message that does not decode (truncated, a negative length, a bad varint)."""


# --- reading -------------------------------------------------------------------------


class Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes | memoryview, pos: int = 0) -> None:
        self.buf = buf
        self.pos = pos

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if n < 0 or end > len(self.buf):
            raise Malformed(f"{n} bytes wanted at {self.pos}, {len(self.buf)} in the message")
        out = bytes(self.buf[self.pos : end])
        self.pos = end
        return out

    def fixed(self, s: struct.Struct) -> tuple[Any, ...]:
        try:
            out = s.unpack_from(self.buf, self.pos)
        except struct.error:
            raise Malformed(f"message truncated at {self.pos}") from None
        self.pos += s.size
        return out

    def i8(self) -> int:
        return int(self.fixed(_I8)[0])

    def i16(self) -> int:
        return int(self.fixed(_I16)[0])

    def i32(self) -> int:
        return int(self.fixed(_I32)[0])

    def i64(self) -> int:
        return int(self.fixed(_I64)[0])

    def uvarint(self) -> int:
        value, self.pos = _uvarint_at(self.buf, self.pos)
        return value

    def compact_length(self) -> int:
        """A compact array's or string's length; -1 for null."""
        return self.uvarint() - 1

    def compact_string(self) -> str | None:
        n = self.compact_length()
        return None if n < 0 else self.take(n).decode("utf-8")

    def string(self) -> str | None:
        n = self.i16()
        return None if n < 0 else self.take(n).decode("utf-8")

    def uuid(self) -> uuid.UUID:
        return uuid_of(self.take(16))

    def compact_records(self) -> bytes | None:
        n = self.compact_length()
        return None if n < 0 else self.take(n)

    def records(self) -> bytes | None:
        n = self.i32()
        return None if n < 0 else self.take(n)

    def tags(self) -> dict[int, bytes]:
        """A flexible struct's tagged fields, each tag's raw bytes."""
        count = self.uvarint()
        out: dict[int, bytes] = {}
        for _ in range(count):  # bounded by the message's length (each takes bytes)
            tag = self.uvarint()
            out[tag] = self.take(self.uvarint())
        return out

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):  # bounded as tags()
            self.uvarint()
            self.take(self.uvarint())


def parse_header(frame: bytes, flexible: bool) -> tuple[int, int, int, str | None, int]:
    """(api key, version, correlation id, client id, offset of the body) of a request
    header v1, or v2 (`flexible`: its tagged fields follow the client id, which
    stays an INT16-length string in both)."""
    r = Reader(frame)
    api_key, api_version, correlation_id = r.fixed(_HEADER)
    client_id = r.string()
    if flexible:
        r.skip_tags()
    return api_key, api_version, correlation_id, client_id, r.pos


# --- Fetch request -------------------------------------------------------------------


@dataclass(slots=True)
class ReplicaState:
    replica_id: int = -1
    replica_epoch: int = -1


class FetchPartition:
    __slots__ = (
        "current_leader_epoch",
        "fetch_offset",
        "high_watermark",
        "last_fetched_epoch",
        "log_start_offset",
        "partition",
        "partition_max_bytes",
        "replica_directory_id",
    )

    def __init__(self, fields: tuple[int, int, int, int, int, int]) -> None:
        (
            self.partition,
            self.current_leader_epoch,
            self.fetch_offset,
            self.last_fetched_epoch,
            self.log_start_offset,
            self.partition_max_bytes,
        ) = fields
        self.replica_directory_id: uuid.UUID | None = None
        self.high_watermark = (1 << 63) - 1


@dataclass(slots=True)
class FetchTopic:
    """A topic of a Fetch (by name before v13, by id from it) and its partitions: the
    request's topics and forgotten topics, and the response's topics."""

    topic: str | None
    topic_id: uuid.UUID | None
    partitions: list[Any]


class FetchRequestBody:
    __slots__ = (
        "cluster_id",
        "forgotten_topics_data",
        "isolation_level",
        "max_bytes",
        "max_wait_ms",
        "min_bytes",
        "rack_id",
        "replica_id",
        "replica_state",
        "session_epoch",
        "session_id",
        "topics",
    )
    # Declared for mypy (and mypyc, bench/build_compiled.py); set by decode_fetch_request.
    cluster_id: str | None
    forgotten_topics_data: list[FetchTopic]
    isolation_level: int
    max_bytes: int
    max_wait_ms: int
    min_bytes: int
    rack_id: str | None
    replica_id: int
    replica_state: ReplicaState | None
    session_epoch: int
    session_id: int
    topics: list[FetchTopic]


def _uvarint_at(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """An unsigned varint at pos: (value, the position after it)."""
    value = shift = 0
    # Bounded: at most five bytes for a 32-bit value.
    for _ in range(5):
        if pos >= len(buf):
            raise Malformed(f"varint truncated at {pos}")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
    raise Malformed(f"varint longer than five bytes before {pos}")


def _skip_tags_at(buf: bytes | memoryview, pos: int) -> int:
    """The position after a struct's tagged fields (none: one zero byte, the usual)."""
    if pos < len(buf) and buf[pos] == 0:
        return pos + 1
    r = Reader(buf, pos)
    r.skip_tags()
    return r.pos


def decode_fetch_request(body: bytes | memoryview, version: int) -> FetchRequestBody:
    """A Fetch request body at v12-v17. The common case (no tagged fields inside the
    topics, one-byte lengths) is read inline; anything else through Reader."""
    if not FETCH_FLEXIBLE[0] <= version <= FETCH_FLEXIBLE[1]:
        raise ValueError(f"Fetch v{version} is not decoded here")
    buf = body
    r = Reader(buf)
    out = FetchRequestBody()
    out.replica_id = r.i32() if version < 15 else -1
    (
        out.max_wait_ms,
        out.min_bytes,
        out.max_bytes,
        out.isolation_level,
        out.session_id,
        out.session_epoch,
    ) = r.fixed(_FETCH_TOP)
    by_id = version >= 13
    unpack_partition = _FETCH_PARTITION_V12.unpack_from
    partition_size = _FETCH_PARTITION_V12.size
    end = len(buf)
    topics = []
    for _ in range(max(r.compact_length(), 0)):  # bounded by the message's length
        if by_id:
            name, topic_id = None, r.uuid()
        else:
            name, topic_id = r.compact_string(), None
        n, pos = _uvarint_at(buf, r.pos)
        partitions = []
        for _ in range(max(n - 1, 0)):
            if pos + partition_size >= end:
                raise Malformed(f"Fetch request truncated at {pos}")
            p = FetchPartition(unpack_partition(buf, pos))
            pos += partition_size
            if buf[pos] == 0:
                pos += 1
            else:
                r.pos = pos
                for tag, raw in r.tags().items():
                    if tag == 0 and version >= 17:
                        p.replica_directory_id = uuid.UUID(bytes=raw[:16])
                pos = r.pos
            partitions.append(p)
        r.pos = _skip_tags_at(buf, pos)
        topics.append(FetchTopic(name, topic_id, partitions))
    out.topics = topics
    forgotten = []
    for _ in range(max(r.compact_length(), 0)):
        name = None if by_id else r.compact_string()
        topic_id = r.uuid() if by_id else None
        ps = [r.i32() for _ in range(max(r.compact_length(), 0))]
        r.skip_tags()
        forgotten.append(FetchTopic(name, topic_id, ps))
    out.forgotten_topics_data = forgotten
    out.rack_id = r.compact_string()
    out.cluster_id = None
    out.replica_state = ReplicaState() if version >= 15 else None
    for tag, raw in r.tags().items():
        if tag == 0:
            out.cluster_id = Reader(raw).compact_string()
        elif tag == 1 and version >= 15:
            state = Reader(raw)
            out.replica_state = ReplicaState(*state.fixed(_REPLICA_STATE))
    if r.pos != end:
        raise Malformed(f"{end - r.pos} bytes after the Fetch request")
    return out


# --- writing -------------------------------------------------------------------------


def uvarint(value: int) -> bytes:
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def compact_string(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    raw = value.encode("utf-8")
    return uvarint(len(raw) + 1) + raw


def string(value: str | None) -> bytes:
    if value is None:
        return _I16.pack(-1)
    raw = value.encode("utf-8")
    return _I16.pack(len(raw)) + raw


def tagged(fields: Sequence[tuple[int, bytes]]) -> bytes:
    """Tagged fields (in tag order) after their count."""
    out = uvarint(len(fields))
    for tag, raw in fields:
        out += uvarint(tag) + uvarint(len(raw)) + raw
    return out


# KIP-951's NodeEndpoint: (node id, host, port, rack).
NodeEndpoint = tuple[int, str, int, "str | None"]


def leader_id_and_epoch(leader: tuple[int, int]) -> bytes:
    """A LeaderIdAndEpoch struct (the CurrentLeader tagged field's value)."""
    return _LEADER.pack(*leader) + b"\x00"


def node_endpoints(endpoints: Sequence[NodeEndpoint]) -> bytes:
    """The NodeEndpoints tagged field's value: a compact array of NodeEndpoint."""
    out = uvarint(len(endpoints) + 1)
    for node_id, host, port, rack in endpoints:
        out += _I32.pack(node_id) + compact_string(host) + _I32.pack(port)
        out += compact_string(rack) + b"\x00"
    return out


def _read_node_endpoints(raw: bytes) -> list[NodeEndpoint]:
    r = Reader(raw)
    out: list[NodeEndpoint] = []
    for _ in range(max(r.compact_length(), 0)):  # bounded by the field's length
        node_id = r.i32()
        host = r.compact_string() or ""
        port = r.i32()
        rack = r.compact_string()
        r.skip_tags()
        out.append((node_id, host, port, rack))
    return out


def encode_fetch_request(
    correlation_id: int,
    client_id: str,
    version: int,
    *,
    replica_id: int,
    replica_epoch: int,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    isolation_level: int,
    session_id: int,
    session_epoch: int,
    topics: Sequence[tuple[uuid.UUID, Sequence[tuple[int, int, int, int, int, int]]]],
    forgotten: Sequence[tuple[uuid.UUID, Sequence[int]]],
    rack_id: str = "",
) -> bytes:
    """A replica's Fetch (v15-v17: topics by id, ReplicaState), framed with its
    header v2. Each partition: (index, current leader epoch, fetch offset, last
    fetched epoch, log start offset, max bytes)."""
    if not 15 <= version <= FETCH_FLEXIBLE[1]:
        raise ValueError(f"Fetch v{version} is not encoded here")
    out = bytearray(_HEADER.pack(1, version, correlation_id))
    out += string(client_id)
    out += b"\x00"
    out += _FETCH_TOP.pack(
        max_wait_ms, min_bytes, max_bytes, isolation_level, session_id, session_epoch
    )
    out += uvarint(len(topics) + 1)
    for topic_id, partitions in topics:
        out += topic_id.bytes
        out += uvarint(len(partitions) + 1)
        for p in partitions:
            out += _FETCH_PARTITION_V12.pack(*p)
            out += b"\x00"
        out += b"\x00"
    out += uvarint(len(forgotten) + 1)
    for topic_id, ps in forgotten:
        out += topic_id.bytes
        out += uvarint(len(ps) + 1)
        for index in ps:
            out += _I32.pack(index)
        out += b"\x00"
    out += compact_string(rack_id)
    if replica_id == -1 and replica_epoch == -1:
        out += b"\x00"
    else:
        out += tagged([(1, _REPLICA_STATE.pack(replica_id, replica_epoch) + b"\x00")])
    return _I32.pack(len(out)) + bytes(out)


# --- Fetch response ------------------------------------------------------------------


@dataclass(slots=True)
class FetchAnswer:
    """One partition of a Fetch response (encoded by encode_fetch_response, decoded
    by decode_fetch_response)."""

    partition_index: int
    error_code: int
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    records: bytes | FileSlice | None
    _: KW_ONLY
    aborted_transactions: Sequence[tuple[int, int]] | None = None
    preferred_read_replica: int = -1
    diverging_epoch: tuple[int, int] | None = None
    current_leader: tuple[int, int] | None = None


@dataclass(slots=True)
class FetchResponseBody:
    throttle_time_ms: int
    error_code: int
    session_id: int
    responses: list[FetchTopic]
    node_endpoints: Sequence[NodeEndpoint] = ()  # v16+ (KIP-951)


def encode_fetch_response(correlation_id: int, version: int, body: FetchResponseBody) -> list[Part]:
    """A Fetch response frame (v12-v17, header v1) as parts: bytes, and each
    partition's FileSlice records (sent with sendfile) or large records in place."""
    if not FETCH_FLEXIBLE[0] <= version <= FETCH_FLEXIBLE[1]:
        raise ValueError(f"Fetch v{version} is not encoded here")
    by_id = version >= 13
    parts: list[Part] = []
    out = bytearray(_I32.pack(correlation_id))
    out += b"\x00"
    out += _FETCH_ANSWER_TOP.pack(body.throttle_time_ms, body.error_code, body.session_id)
    out += uvarint(len(body.responses) + 1)
    for t in body.responses:
        if by_id:
            assert t.topic_id is not None, "Fetch v13+ names its topics by id"
            out += t.topic_id.bytes
        else:
            out += compact_string(t.topic)
        out += uvarint(len(t.partitions) + 1)
        for p in t.partitions:
            out += _PARTITION_V12.pack(
                p.partition_index,
                p.error_code,
                p.high_watermark,
                p.last_stable_offset,
                p.log_start_offset,
            )
            aborted = p.aborted_transactions
            if aborted is None:
                out += b"\x00"
            else:
                out += uvarint(len(aborted) + 1)
                for producer_id, first_offset in aborted:
                    out += _I64.pack(producer_id) + _I64.pack(first_offset) + b"\x00"
            out += _I32.pack(p.preferred_read_replica)
            records = p.records
            if records is None:
                out += b"\x00"
            elif isinstance(records, FileSlice) or len(records) >= OWN_PART_BYTES:
                # A part of its own: sent as it is, not copied into the frame.
                out += uvarint(len(records) + 1)
                parts.append(bytes(out))
                parts.append(records)
                out = bytearray()
            else:
                out += uvarint(len(records) + 1)
                out += records
            tags = []
            if p.diverging_epoch is not None:
                tags.append((0, _EPOCH_END.pack(*p.diverging_epoch) + b"\x00"))
            if p.current_leader is not None:
                tags.append((1, leader_id_and_epoch(p.current_leader)))
            out += tagged(tags) if tags else b"\x00"
        out += b"\x00"
    if body.node_endpoints and version >= FETCH_NODE_ENDPOINTS:
        out += tagged([(0, node_endpoints(body.node_endpoints))])
    else:
        out += b"\x00"
    parts.append(bytes(out))
    size = sum(len(part) for part in parts)
    first = parts[0]
    assert isinstance(first, bytes)
    parts[0] = _I32.pack(size) + first
    return parts


def decode_fetch_response(body: bytes | memoryview, version: int) -> FetchResponseBody:
    """A Fetch response body (after its header) at v12-v17."""
    if not FETCH_FLEXIBLE[0] <= version <= FETCH_FLEXIBLE[1]:
        raise ValueError(f"Fetch v{version} is not decoded here")
    by_id = version >= 13
    r = Reader(body)
    throttle, error, session_id = r.fixed(_FETCH_ANSWER_TOP)
    responses = []
    for _ in range(max(r.compact_length(), 0)):  # bounded by the message's length
        name = None if by_id else r.compact_string()
        topic_id = r.uuid() if by_id else None
        partitions = []
        for _ in range(max(r.compact_length(), 0)):
            index, err, hw, lso, log_start = r.fixed(_PARTITION_V12)
            n = r.compact_length()
            aborted = None
            if n >= 0:
                aborted = []
                for _ in range(n):
                    aborted.append((r.i64(), r.i64()))
                    r.skip_tags()
            preferred = r.i32()
            records = r.compact_records()
            p = FetchAnswer(
                index,
                err,
                hw,
                lso,
                log_start,
                records,
                aborted_transactions=aborted,
                preferred_read_replica=preferred,
            )
            for tag, raw in r.tags().items():
                if tag == 0:
                    p.diverging_epoch = Reader(raw).fixed(_EPOCH_END)  # type: ignore[assignment]
                elif tag == 1:
                    p.current_leader = Reader(raw).fixed(_LEADER)  # type: ignore[assignment]
            partitions.append(p)
        r.skip_tags()
        responses.append(FetchTopic(name, topic_id, partitions))
    endpoints: list[NodeEndpoint] = []
    for tag, raw in r.tags().items():
        if tag == 0 and version >= FETCH_NODE_ENDPOINTS:
            endpoints = _read_node_endpoints(raw)
    if r.pos != len(body):
        raise Malformed(f"{len(body) - r.pos} bytes after the Fetch response")
    return FetchResponseBody(throttle, error, session_id, responses, endpoints)


# --- Produce ---------------------------------------------------------------------------


@dataclass(slots=True)
class PartitionProduceData:
    index: int
    records: bytes | None


@dataclass(slots=True)
class TopicProduceData:
    name: str | None
    partition_data: list[PartitionProduceData]
    topic_id: uuid.UUID | None = None


@dataclass(slots=True)
class ProduceRequestBody:
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: list[TopicProduceData]


def decode_produce_request(body: bytes | memoryview, version: int) -> ProduceRequestBody:
    """A Produce request body at v3-v11 (flexible from v9; v10 and v11 are v9's body)."""
    if not PRODUCE_VERSIONS[0] <= version <= PRODUCE_VERSIONS[1]:
        raise ValueError(f"Produce v{version} is not decoded here")
    r = Reader(body)
    flexible = version >= PRODUCE_FLEXIBLE
    string_ = r.compact_string if flexible else r.string
    length = r.compact_length if flexible else r.i32
    records_ = r.compact_records if flexible else r.records
    transactional_id = string_()
    acks, timeout = r.fixed(_ACKS_TIMEOUT)
    topics = []
    for _ in range(max(length(), 0)):  # bounded by the message's length
        name = string_()
        partitions = []
        for _ in range(max(length(), 0)):
            index = r.i32()
            partitions.append(PartitionProduceData(index, records_()))
            if flexible:
                r.pos = _skip_tags_at(body, r.pos)
        if flexible:
            r.pos = _skip_tags_at(body, r.pos)
        topics.append(TopicProduceData(name, partitions))
    if flexible:
        r.pos = _skip_tags_at(body, r.pos)
    if r.pos != len(body):
        raise Malformed(f"{len(body) - r.pos} bytes after the Produce request")
    return ProduceRequestBody(transactional_id, acks, timeout, topics)


# (partition, error code, base offset, log append time, log start offset, error message,
# KIP-467's record errors: (batch index, message) of each refused record, KIP-951's
# current leader (id, epoch) or None).
Produced = tuple[
    int, int, int, int, int, "str | None", "tuple[tuple[int, str], ...]", "tuple[int, int] | None"
]


def encode_produce_response(
    correlation_id: int,
    version: int,
    topics: Sequence[tuple[str, Sequence[Produced]]],
    throttle_time_ms: int = 0,
    endpoints: Sequence[NodeEndpoint] = (),
) -> bytes:
    """A Produce response frame at v3-v11 (header v1 from v9). From v10 a partition's
    current leader and the top level's `endpoints` (KIP-951) go out as tagged fields
    when given; below v10 they are left out."""
    if not PRODUCE_VERSIONS[0] <= version <= PRODUCE_VERSIONS[1]:
        raise ValueError(f"Produce v{version} is not encoded here")
    hints = version >= PRODUCE_LEADER_HINTS
    flexible = version >= PRODUCE_FLEXIBLE
    out = bytearray(_I32.pack(correlation_id))
    if flexible:
        out += b"\x00"
        out += uvarint(len(topics) + 1)
    else:
        out += _I32.pack(len(topics))
    for name, partitions in topics:
        out += compact_string(name) if flexible else string(name)
        out += uvarint(len(partitions) + 1) if flexible else _I32.pack(len(partitions))
        for index, error, base_offset, append_time, log_start, message, bad, leader in partitions:
            out += _PRODUCED.pack(index, error, base_offset, append_time)
            if version >= 5:
                out += _I64.pack(log_start)
            if version >= 8:
                if flexible:
                    out += uvarint(len(bad) + 1)
                    for batch_index, why in bad:
                        out += _I32.pack(batch_index) + compact_string(why) + b"\x00"
                    out += compact_string(message)
                    if hints and leader is not None:
                        out += tagged([(0, leader_id_and_epoch(leader))])
                    else:
                        out += b"\x00"
                else:
                    out += _I32.pack(len(bad))
                    for batch_index, why in bad:
                        out += _I32.pack(batch_index) + string(why)
                    out += string(message)
        if flexible:
            out += b"\x00"
    out += _I32.pack(throttle_time_ms)
    if hints and endpoints:
        out += tagged([(0, node_endpoints(endpoints))])
    elif flexible:
        out += b"\x00"
    return _I32.pack(len(out)) + bytes(out)
