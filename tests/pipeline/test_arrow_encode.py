"""The sink's vectorised encoder and partitioner against storage's decoder and the
client's murmur2 partitioner. No Spark, no node."""

from __future__ import annotations

import pytest

pytest.importorskip("pyarrow")

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.client.partitioner import partition_for_key
from seglog.pipeline.arrow_encode import as_binary, encode_records, partitions_for_keys
from seglog.storage.record_batch import assemble_batch, check_batch, decode_records

blobs = st.one_of(st.none(), st.binary(max_size=200))
headers = st.lists(
    st.tuples(st.text(max_size=6), st.one_of(st.none(), st.binary(max_size=10))), max_size=2
)


def as_batch(data: bytes, count: int) -> bytes:
    return assemble_batch(
        data,
        base_offset=0,
        partition_leader_epoch=-1,
        attributes=0,
        last_offset_delta=count - 1,
        base_timestamp=5,
        max_timestamp=5,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        records_count=count,
    )


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(blobs, blobs, headers), min_size=1, max_size=60))
def test_encoded_records_decode_to_the_rows(rows) -> None:
    keys = pa.array([r[0] for r in rows], pa.binary())
    values = pa.array([r[1] for r in rows], pa.binary())
    with_headers = [list(r[2]) for r in rows] if any(r[2] for r in rows) else None
    data, starts = encode_records(keys, values, np.arange(len(rows)), with_headers)
    assert starts[0] == 0 and starts[-1] == len(data)
    batch = as_batch(data, len(rows))
    records = decode_records(batch, 0, check_batch(batch))
    assert [(r.key, r.value) for r in records] == [(r[0], r[1]) for r in rows]
    assert [r.offset for r in records] == list(range(len(rows)))
    assert [[(h.key, h.value) for h in r.headers] for r in records] == [list(r[2]) for r in rows]


def test_rows_split_into_batches_restart_offset_deltas() -> None:
    n = 10
    keys = as_binary(pa.array([f"k{i}" for i in range(n)]), n)  # strings: their UTF-8
    values = as_binary(None, n)  # no value column: nulls
    index = np.array([0, 1, 2, 3, 0, 1, 2, 0, 1, 2])
    data, starts = encode_records(keys, values, index)
    for lo, hi in ((0, 4), (4, 7), (7, 10)):
        batch = as_batch(data[starts[lo] : starts[hi]], hi - lo)
        records = decode_records(batch, 0, check_batch(batch))
        assert [r.key for r in records] == [b"k%d" % i for i in range(lo, hi)]
        assert [r.value for r in records] == [None] * (hi - lo)


@settings(max_examples=40, deadline=None)
@given(
    keys=st.lists(st.one_of(st.none(), st.binary(max_size=100)), max_size=50),
    partitions=st.integers(1, 50),
)
def test_partitions_for_keys_is_kafkas_murmur2(keys, partitions) -> None:
    got = partitions_for_keys(pa.array(keys, pa.binary()), partitions).tolist()
    assert got == [-1 if k is None else partition_for_key(k, partitions) for k in keys]
