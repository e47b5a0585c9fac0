"""The vectorised decoder against storage's record-by-record decode_records: same
records, same errors on corrupt bytes. No Spark, no node."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

pytest.importorskip("pyarrow")

from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.pipeline import arrow_decode
from seglog.pipeline.arrow_decode import decode_batches
from seglog.storage.compression import CompressionType
from seglog.storage.errors import CorruptRecordError
from seglog.storage.record_batch import (
    NewRecord,
    TimestampType,
    assemble_batch,
    build_batch,
    decode_records,
    iter_batches,
)

blobs = st.one_of(st.none(), st.binary(max_size=300))
headers = st.lists(
    st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20))), max_size=3
)
records = st.builds(
    NewRecord,
    value=blobs,
    key=blobs,
    timestamp=st.integers(0, 2**41),
    headers=headers,
)
batch_specs = st.lists(
    st.tuples(
        st.lists(records, min_size=1, max_size=40),
        st.sampled_from(list(CompressionType)),
        st.sampled_from(list(TimestampType)),
    ),
    min_size=1,
    max_size=5,
)


def make_log(specs: list) -> bytes:
    out = b""
    base = 0
    for recs, codec, ts_type in specs:
        out += build_batch(recs, base_offset=base, compression=codec, timestamp_type=ts_type)
        base += len(recs) + 3  # gaps between batches, as compaction leaves them
    return out


def expected_rows(data: bytes, start: int, end: int) -> list[tuple]:
    rows = []
    for pos, h in iter_batches(data):
        for r in decode_records(data, pos, h):
            if start <= r.offset < end:
                hdrs = [{"key": x.key, "value": x.value} for x in r.headers]
                rows.append((r.offset, r.timestamp, int(h.timestamp_type), r.key, r.value, hdrs))
    return rows


@contextmanager
def framing(speculative: bool) -> Iterator[None]:
    """The decoder frames answers of few records with its Python loop; the tests'
    small answers go through the numpy rounds too (speculative) or only the loop."""
    saved = arrow_decode._LOOP_RECORDS
    arrow_decode._LOOP_RECORDS = 0 if speculative else 2**62
    try:
        yield
    finally:
        arrow_decode._LOOP_RECORDS = saved


def decoded_rows(data: bytes, start: int, end: int) -> list[tuple]:
    """The rows decoded with numpy framing; with the Python loop's they must be the same."""
    with framing(speculative=True):
        rows = _decoded_rows(data, start, end)
    with framing(speculative=False):
        assert _decoded_rows(data, start, end) == rows
    return rows


def _decoded_rows(data: bytes, start: int, end: int) -> list[tuple]:
    cols = decode_batches(data, list(iter_batches(data)), start, end, include_headers=True)
    assert cols.headers is not None
    return list(
        zip(
            cols.offsets.tolist(),
            cols.timestamps_ms.tolist(),
            cols.timestamp_types.tolist(),
            cols.keys.to_pylist(),
            cols.values.to_pylist(),
            cols.headers.to_pylist(),
            strict=True,
        )
    )


@settings(max_examples=60, deadline=None)
@given(specs=batch_specs, cut=st.tuples(st.integers(0, 60), st.integers(0, 250)))
def test_same_records_as_decode_records(specs, cut) -> None:
    data = make_log(specs)
    start, end = cut[0], cut[0] + cut[1]
    assert decoded_rows(data, start, end) == expected_rows(data, start, end)


def test_without_headers_column_still_checks_header_bytes() -> None:
    recs = [NewRecord(b"v%d" % i, b"k", 5, [("h", b"x")] * (i % 3)) for i in range(10)]
    data = build_batch(recs)
    cols = decode_batches(data, list(iter_batches(data)))
    assert cols.headers is None
    assert cols.values.to_pylist() == [b"v%d" % i for i in range(10)]
    assert cols.key_value_bytes == sum(len(b"v%d" % i) + 1 for i in range(10))


# The first record's length, key length and value length; the last header count.
@pytest.mark.parametrize("speculative", [True, False])
@pytest.mark.parametrize("where", [61, 65, 69, -1])
def test_corrupt_records_section_is_refused(where, speculative) -> None:
    data = bytearray(build_batch([NewRecord(b"value-%d" % i, b"key") for i in range(5)]))
    header = next(iter_batches(bytes(data)))[1]  # before the damage: the CRC is checked apart
    data[where] ^= 0x7F
    with pytest.raises(CorruptRecordError):
        decode_records(bytes(data), 0, header)
    with pytest.raises(CorruptRecordError), framing(speculative):
        decode_batches(bytes(data), [(0, header)])


def test_batches_compaction_left_empty() -> None:
    """Compaction may keep a batch with no records (for its producer state)."""
    empty = assemble_batch(
        b"",
        base_offset=0,
        partition_leader_epoch=0,
        attributes=0,
        last_offset_delta=4,
        base_timestamp=1,
        max_timestamp=1,
        producer_id=7,
        producer_epoch=0,
        base_sequence=0,
        records_count=0,
    )
    data = empty + build_batch([NewRecord(b"v", b"k")], base_offset=5)
    for batches in (list(iter_batches(empty)), list(iter_batches(data))):
        cols = decode_batches(data, batches, include_headers=True)
        assert len(cols) == len(batches) - 1
    assert decode_batches(data, list(iter_batches(data))).offsets.tolist() == [5]


# Runs of records of one shape, as producers write them: the framing guesses that a
# run's records all have the first one's size and must notice every place where that
# stops being true (a key or value of another length, a null, a timestamp or offset
# delta whose varint gets wider, a header more), including lengths of 3 and more
# varint bytes (values of 8 KiB and more) and runs of one record.
_sizes = st.sampled_from([0, 1, 2, 61, 62, 63, 64, 100, 101, 8100, 8200, 70_000])
runs = st.lists(
    st.tuples(
        st.integers(1, 200),  # records in the run (big values: at most 2)
        st.one_of(st.none(), _sizes),  # value length, or a null value
        st.one_of(st.none(), st.binary(max_size=3)),  # the run's key
        st.sampled_from([0, 1, 3, 70]),  # ms between the run's records
        st.integers(0, 2),  # headers per record
    ),
    min_size=1,
    max_size=5,
)
shaped_batches = st.lists(
    st.tuples(runs, st.sampled_from([CompressionType.NONE, CompressionType.LZ4])),
    min_size=1,
    max_size=4,
)


def shaped_log(specs: list, ts0: int = 1_700_000_000_000) -> bytes:
    out = b""
    base = 0
    for batch_runs, codec in specs:
        recs = []
        ts = ts0
        for count, size, key, step, n_headers in batch_runs:
            if size is not None and size > 1000:
                count = min(count, 2)
            value = None if size is None else bytes(i % 251 for i in range(size))
            hdrs = [(f"h{h}", b"x" * h) for h in range(n_headers)]
            for _ in range(count):
                recs.append(NewRecord(value, key, ts, hdrs))
                ts += step
        out += build_batch(recs, base_offset=base, compression=codec)
        base += len(recs)
    return out


@settings(max_examples=80, deadline=None)
@given(specs=shaped_batches)
def test_runs_of_one_shape_decode_as_decode_records(specs) -> None:
    data = shaped_log(specs)
    assert decoded_rows(data, 0, 2**62) == expected_rows(data, 0, 2**62)


@settings(max_examples=150, deadline=None)
@given(specs=shaped_batches, at=st.floats(0, 1, exclude_max=True), flip=st.integers(1, 255))
def test_damaged_runs_are_refused_or_decoded_as_decode_records(specs, at, flip) -> None:
    """One byte of a records section changed (the CRC is checked elsewhere): the
    decoder refuses it, or decodes what decode_records decodes (it never reads other
    records than the bytes hold). It may be stricter: a key length below -1 is
    corrupt to it and a null key to decode_records."""
    data = bytearray(shaped_log(specs))
    framed = list(iter_batches(bytes(data)))
    if any(h.compression != CompressionType.NONE for _, h in framed):
        return  # a damaged compressed section mostly fails to decompress: not framing
    sections = [i for pos, h in framed for i in range(pos + 61, pos + h.size)]
    data[sections[int(at * len(sections))]] ^= flip
    data = bytes(data)
    try:
        want = [
            (r.offset, r.key, r.value, [(x.key, x.value) for x in r.headers])
            for pos, h in framed
            for r in decode_records(data, pos, h)
        ]
    except CorruptRecordError:
        want = None
    for speculative in (True, False):
        try:
            with framing(speculative):
                cols = decode_batches(data, framed, -(2**62), None, include_headers=True)
        except CorruptRecordError:
            continue
        got = [
            (o, k, v, [(x["key"], x["value"]) for x in hs])
            for o, k, v, hs in zip(
                cols.offsets.tolist(),
                cols.keys.to_pylist(),
                cols.values.to_pylist(),
                cols.headers.to_pylist(),
                strict=True,
            )
        ]
        assert got == want


@pytest.mark.parametrize("value_bytes", [0, 100, 70_000])
def test_batch_of_one_record(value_bytes) -> None:
    data = build_batch([NewRecord(b"v" * value_bytes, None, 5)], base_offset=9)
    assert decoded_rows(data, 0, 100) == expected_rows(data, 0, 100)
