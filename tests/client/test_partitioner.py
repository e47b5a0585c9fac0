"""The partitioner: Kafka's murmur2 and key → partition mapping (checked against
the Java client's published vectors and kafka-python), and the sticky choice for
records without a key."""

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from seglog.client.partitioner import (
    CallablePartitioner,
    DefaultPartitioner,
    PartitionIds,
    as_partitioner,
    murmur2,
    partition_for_key,
    to_positive,
)

# org.apache.kafka.common.utils.UtilsTest#testMurmur2 (signed Java ints).
JAVA_MURMUR2 = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
]

# kafka-python's test_murmur2_java_compatibility: key → partition out of 1000, as
# Kafka's Java DefaultPartitioner picks it.
JAVA_PARTITIONS_OF_1000 = [
    (b"", 681),
    (b"a", 524),
    (b"ab", 434),
    (b"abc", 107),
    (b"123456789", 566),
    (b"\x00 ", 742),
]


def _signed(n: int) -> int:
    return n - (1 << 32) if n & 0x80000000 else n


@pytest.mark.parametrize(("data", "expected"), JAVA_MURMUR2)
def test_murmur2_matches_the_java_client(data, expected):
    assert murmur2(data) == expected
    # kafka-python returns the same 32 bits unsigned.
    assert _signed(kafka_python_murmur2(data)) == expected


@pytest.mark.parametrize(("key", "expected"), JAVA_PARTITIONS_OF_1000)
def test_key_partition_matches_the_java_client(key, expected):
    assert partition_for_key(key, 1000) == expected
    p = DefaultPartitioner()
    assert p.partition("t", key, list(range(1000)), list(range(1000))) == expected


@given(st.binary(max_size=64))
def test_murmur2_agrees_with_kafka_python(data):
    assert murmur2(data) == _signed(kafka_python_murmur2(data))
    assert -(2**31) <= murmur2(data) < 2**31
    # The compiled hash takes bytes only: other buffers are converted, not refused.
    assert murmur2(bytearray(data)) == murmur2(memoryview(data)) == murmur2(data)


@given(st.binary(max_size=32), st.integers(min_value=1, max_value=500))
def test_key_partition_is_in_range_and_uses_the_sign_bit_mask(key, n):
    p = partition_for_key(key, n)
    assert 0 <= p < n
    assert p == (kafka_python_murmur2(key) & 0x7FFFFFFF) % n
    assert partition_for_key(bytearray(key), n) == p


def test_to_positive_clears_the_sign_bit_rather_than_taking_abs():
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0  # abs() would give 2**31, out of int32 range
    assert to_positive(-973932308) == (-973932308) & 0x7FFFFFFF


def test_partition_for_key_rejects_no_partitions():
    with pytest.raises(ValueError):
        partition_for_key(b"k", 0)


def test_murmur2_accepts_bytearray_and_memoryview():
    assert murmur2(bytearray(b"foobar")) == murmur2(memoryview(b"foobar")) == -790332482


def test_keyed_records_ignore_availability():
    # Kafka hashes over all partitions, so a key keeps its partition while a leader is away.
    p = DefaultPartitioner()
    expected = partition_for_key(b"foobar", 6)
    assert p.partition("t", b"foobar", list(range(6)), [0]) == expected


def test_partition_ids_are_indexed_in_sorted_order():
    p = DefaultPartitioner()
    ids = [0, 1, 2, 3]
    for key in (b"a", b"b", b"c", b"21"):
        assert p.partition("t", key, ids, ids) == ids[partition_for_key(key, 4)]


def test_unkeyed_records_stick_to_one_partition():
    p = DefaultPartitioner(random.Random(7))
    ids = list(range(8))
    chosen = {p.partition("t", None, ids, ids) for _ in range(200)}
    assert len(chosen) == 1
    assert p.sticky_partition("t") in chosen


def test_new_batch_moves_to_another_available_partition():
    p = DefaultPartitioner(random.Random(3))
    ids = list(range(5))
    available = [1, 3, 4]
    current = p.partition("t", None, ids, available)
    assert current in available
    seen = {current}
    for _ in range(60):
        p.on_new_batch("t", current, ids, available)
        nxt = p.partition("t", None, ids, available)
        assert nxt != current and nxt in available
        seen.add(nxt)
        current = nxt
    assert seen == set(available)  # random, not stuck on two of them


def test_stale_new_batch_call_changes_nothing():
    p = DefaultPartitioner(random.Random(1))
    ids = list(range(4))
    current = p.partition("t", None, ids, ids)
    other = (current + 1) % 4
    p.on_new_batch("t", other, ids, ids)  # another thread already moved off `other`
    assert p.partition("t", None, ids, ids) == current


def test_sticky_state_is_per_topic():
    p = DefaultPartitioner(random.Random(5))
    ids = list(range(16))
    a = p.partition("a", None, ids, ids)
    p.partition("b", None, ids, ids)
    p.on_new_batch("b", p.sticky_partition("b"), ids, ids)
    assert p.partition("a", None, ids, ids) == a


def test_single_partition_topic_stays_put():
    p = DefaultPartitioner()
    assert p.partition("t", None, [0], [0]) == 0
    p.on_new_batch("t", 0, [0], [0])
    assert p.partition("t", None, [0], [0]) == 0


def test_no_available_partition_falls_back_to_all():
    p = DefaultPartitioner(random.Random(2))
    assert p.partition("t", None, [0, 1, 2], []) in (0, 1, 2)


def test_sticky_partition_that_lost_its_leader_is_replaced():
    p = DefaultPartitioner(random.Random(4))
    ids = [0, 1, 2]
    first = p.partition("t", None, ids, ids)
    without = [i for i in ids if i != first]
    assert p.partition("t", None, ids, without) in without


def test_as_partitioner_adapts_kafka_python_callables():
    assert isinstance(as_partitioner(None), DefaultPartitioner)
    custom = DefaultPartitioner()
    assert as_partitioner(custom) is custom
    adapted = as_partitioner(lambda key, all_ids, available: all_ids[-1])
    assert isinstance(adapted, CallablePartitioner)
    assert adapted.partition("t", b"k", [0, 1, 2], [0]) == 2
    with pytest.raises(TypeError):
        as_partitioner(42)


def test_empty_topic_is_an_error():
    with pytest.raises(ValueError):
        DefaultPartitioner().partition("t", None, [], [])


@given(st.lists(st.integers(0, 5000), unique=True), st.integers(-5, 5005))
def test_partition_ids_answer_in_and_everything_else_as_the_sorted_list(ids, probe):
    """PartitionIds looks its members up in a set (send() checks each record's partition
    against them) and is otherwise the sorted list the partitioner indexes."""
    listed = sorted(ids)
    held = PartitionIds(listed)
    assert (probe in held) == (probe in listed) and (probe in held.members) == (probe in listed)
    assert list(held) == listed and len(held) == len(listed) and bool(held) == bool(listed)
    if listed:
        assert held[len(held) // 2] == listed[len(listed) // 2]
    assert "0" not in held and None not in held
    p = DefaultPartitioner(random.Random(3))
    if listed:
        chosen = p.partition("t", None, held, held)
        assert chosen in listed and p.partition("t", None, held, held) == chosen
