"""Shared helpers for the Log / LogDirectory tests: batch builders, directory hashing,
and whole-log invariant checks against docs/architecture.md (storage)."""

from __future__ import annotations

import hashlib
from pathlib import Path

from seglog.storage.log import Log
from seglog.storage.log_config import LogConfig
from seglog.storage.record_batch import (
    HEADER_SIZE,
    BatchHeader,
    NewRecord,
    Record,
    build_batch,
    decode_records,
    iter_batches,
)

T0 = 1_700_000_000_000  # a fixed "now" for every test clock


def config(**overrides: object) -> LogConfig:
    """LogConfig from topic-level names (dots written as underscores are accepted)."""
    return LogConfig.defaults().with_overrides(
        {k.replace("_", "."): v for k, v in overrides.items()}
    )


def make_batch(
    n: int = 1,
    *,
    ts: int | list[int] = T0,
    value: bytes | None = None,
    value_size: int = 10,
    key: bytes | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """One v2 batch of `n` records as a producer sends it (baseOffset 0 by default)."""
    stamps = ts if isinstance(ts, list) else [ts] * n
    assert len(stamps) == n
    records = [
        NewRecord(
            value if value is not None else bytes([65 + i % 26]) * value_size,
            key=key,
            timestamp=stamps[i],
        )
        for i in range(n)
    ]
    return build_batch(
        records,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
    )


def sized_batch(size: int, n: int = 1, *, ts: int = T0, **kw: object) -> bytes:
    """A batch of exactly `size` bytes holding `n` records (the last record is padded)."""
    assert n < 60, "offset deltas stay single-byte varints"
    base = make_batch(n, ts=ts, value_size=1, **kw)  # type: ignore[arg-type]
    kw = dict(kw)
    pad = size - len(base)
    assert pad >= 0, f"{n} records need at least {len(base)} bytes"
    # Grow the last record's value; varint widths of its lengths change at 64 and 8192.
    key = kw.pop("key", None)
    for extra in range(pad, max(pad - 8, -1), -1):
        records = [NewRecord(b"v", key=key, timestamp=ts) for _ in range(n - 1)]
        records.append(NewRecord(b"v" * (1 + extra), key=key, timestamp=ts))
        data = build_batch(records, **kw)  # type: ignore[arg-type]
        if len(data) == size:
            return data
    raise AssertionError(f"cannot build a {size}-byte batch of {n} records")


def headers_of(data: bytes) -> list[tuple[int, BatchHeader]]:
    return list(iter_batches(data))


def records_of(data: bytes) -> list[Record]:
    out: list[Record] = []
    for pos, h in iter_batches(data):
        out.extend(decode_records(data, pos, h))
    return out


def hash_dir(path: Path) -> dict[str, str]:
    """name -> sha256 of every file in a partition directory (recursively)."""
    return {
        str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(path.rglob("*"))
        if p.is_file()
    }


def segment_file_bytes(log: Log) -> bytes:
    """The concatenated `.log` contents of every live segment, oldest first."""
    return b"".join(Path(s.log_path).read_bytes() for s in log.segments)


def read_everything(log: Log, start: int | None = None, upper: int | None = None) -> bytes:
    """Read from `start` (default: log start) up to `upper` (default: LEO) with small
    fetches, following next_offset, as a consumer does."""
    offset = log.log_start_offset if start is None else start
    bound = log.log_end_offset if upper is None else upper
    out = bytearray()
    guard = 0
    while offset < bound:
        info = log.read(offset, 1, upper_bound=bound)
        if not info.records:
            break
        out += info.records
        assert info.next_offset > offset, "a non-empty read must make progress"
        offset = info.next_offset
        guard += 1
        assert guard < 1_000_000
    return bytes(out)


def offsets_read(log: Log) -> list[int]:
    """Every record offset readable from the log start offset to the LEO."""
    start = log.log_start_offset
    return [r.offset for r in records_of(read_everything(log)) if r.offset >= start]


def check_log_invariants(log: Log, *, single_batch_chunks: bool = False) -> None:
    """Structural invariants of docs/architecture.md (storage) over every segment.

    An offset-index entry maps the last offset of an appended chunk to the chunk's first
    byte (3.4): with `single_batch_chunks` (every append carried one batch) that is exactly
    the last offset of the batch starting there; otherwise the last offset of that batch or
    of a batch after it."""
    segs = log.segments
    assert segs, "a log always has an active segment"
    assert log.log_start_offset <= log.high_watermark <= log.log_end_offset
    assert segs[0].base_offset <= log.log_start_offset or (len(segs) == 1 and segs[0].size == 0)
    expected_next = None
    for i, seg in enumerate(segs):
        name = Path(seg.log_path).name
        assert name == f"{seg.base_offset:020d}.log"
        if i:
            assert seg.base_offset > segs[i - 1].base_offset
        data = Path(seg.log_path).read_bytes()
        assert len(data) == seg.size
        batches = list(iter_batches(data))
        assert sum(h.size for _, h in batches) == len(data), "no partial batches at rest"
        starts = {pos: h for pos, h in batches}
        for _pos, h in batches:
            if expected_next is not None:
                assert h.base_offset >= expected_next
            expected_next = h.next_offset
            assert h.base_offset >= seg.base_offset
            assert h.last_offset - seg.base_offset <= 2**31 - 1
        if i + 1 < len(segs) and batches:
            assert batches[-1][1].next_offset <= segs[i + 1].base_offset
        # offset index: every entry is a batch start; its offset ends that chunk
        order = {pos: n for n, (pos, _h) in enumerate(batches)}
        prev = None
        for k in range(seg.offset_index.entries):
            off, pos = seg.offset_index.entry(k)
            assert pos in starts, f"index entry ({off}, {pos}) of {name} is not a batch start"
            if single_batch_chunks:
                assert starts[pos].last_offset == off, (name, off, pos)
            else:
                later = {h2.last_offset for _p2, h2 in batches[order[pos] :]}
                assert off in later, (name, off, pos)
            if prev is not None:
                assert off > prev[0] and pos > prev[1]
            prev = (off, pos)
        # time index: timestamps strictly increase, offsets never decrease
        prev_t = None
        for k in range(seg.time_index.entries):
            ts, off = seg.time_index.entry(k)
            assert seg.base_offset <= off
            if batches:
                assert off <= batches[-1][1].last_offset
            if prev_t is not None:
                assert ts > prev_t[0] and off >= prev_t[1]
            prev_t = (ts, off)
    last_next = None
    for seg in reversed(segs):
        data = Path(seg.log_path).read_bytes()
        hs = list(iter_batches(data))
        if hs:
            last_next = hs[-1][1].next_offset
            break
    if last_next is not None:
        assert log.log_end_offset == last_next
    else:
        assert log.log_end_offset == segs[-1].base_offset


def index_lookup_table(log: Log) -> dict[int, tuple[int, int, int]]:
    """offset -> (segment base, batch position, batch last offset) via translate_offset,
    for every offset from the log start to the LEO."""
    table = {}
    for off in range(log.log_start_offset, log.log_end_offset):
        found = log.translate_offset(off)
        assert found is not None, off
        seg, pos, h = found
        table[off] = (seg.base_offset, pos, h.last_offset)
    return table


__all__ = [
    "HEADER_SIZE",
    "T0",
    "check_log_invariants",
    "config",
    "hash_dir",
    "headers_of",
    "index_lookup_table",
    "make_batch",
    "offsets_read",
    "read_everything",
    "records_of",
    "segment_file_bytes",
    "sized_batch",
]
