"""The offset map: bounded by its buffer, last offset per key, many keys at a time."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.storage.offset_map import BYTES_PER_ENTRY, EMPTY, OffsetMap, hash_keys


def test_memory_is_the_buffer_given() -> None:
    m = OffsetMap(24_000, load_factor=0.9)
    assert m.slots == 1000 and m.max_entries == 900
    assert m.memory_bytes == 1000 * BYTES_PER_ENTRY


@settings(max_examples=60, deadline=None)
@given(
    keys=st.lists(st.integers(0, 300), min_size=1, max_size=600),
    chunk=st.integers(1, 64),
    slots=st.integers(301, 700),
)
def test_the_last_offset_of_every_key_is_found(keys: list[int], chunk: int, slots: int) -> None:
    m = OffsetMap(slots * BYTES_PER_ENTRY, load_factor=1.0)
    raw = [b"key-%d" % k for k in keys]
    h1, h2 = hash_keys(raw)
    for i in range(0, len(raw), chunk):
        m.put_many(h1[i : i + chunk], h2[i : i + chunk], np.arange(i, min(i + chunk, len(raw))))
    last = {k: i for i, k in enumerate(raw)}
    assert m.size == len(last)
    got = m.get_many(*hash_keys(list(last)))
    assert got.tolist() == list(last.values())
    absent = m.get_many(*hash_keys([b"absent-%d" % i for i in range(50)]))
    assert (absent == EMPTY).all()


def test_clear_empties_it() -> None:
    m = OffsetMap(1 << 12)
    h1, h2 = hash_keys([b"a", b"b"])
    m.put_many(h1, h2, np.array([3, 4]))
    assert m.latest_offset == 4
    m.clear()
    assert m.size == 0 and (m.get_many(h1, h2) == EMPTY).all()


def test_a_full_table_is_refused_not_looped_on() -> None:
    m = OffsetMap(10 * BYTES_PER_ENTRY, load_factor=1.0)
    keys = [b"key-%d" % i for i in range(11)]
    h1, h2 = hash_keys(keys)
    try:
        m.put_many(h1, h2, np.arange(11))
    except OverflowError:
        pass
    else:
        raise AssertionError("11 keys fitted in 10 slots")
