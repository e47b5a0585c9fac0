"""The producer's batch as pure logic (no node): records encoded into the open batch
decode back to what was sent, and the light per-record futures resolve from the
batch's one shared outcome."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seglog.client.accumulator import ProducerBatch
from seglog.client.cluster import TopicPartition
from seglog.client.errors import KafkaError, KafkaTimeoutError
from seglog.client.future import failed_future
from seglog.storage.compression import CompressionType
from seglog.storage.record_batch import check_batch, decode_records

TP = TopicPartition("t", 3)


def _fill(batch: ProducerBatch, records) -> list:
    futures = []
    for ts, key, value, headers in records:
        sizes = (len(key) if key else -1, len(value) if value else -1, -1)
        f = batch.try_append((ts, key, value, headers), 50, 1 << 20, sizes)
        assert f is not None
        futures.append(f)
    return futures


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.GZIP])
def test_appended_records_decode_back_with_header_framed_at_drain(codec) -> None:
    records = [
        (1000, None, b"v0", ()),
        (1005, b"k1", None, (("h", b"x"), ("empty", None))),
        (999, b"", b"v" * 300, ()),  # earlier timestamp: a negative delta
    ]
    batch = ProducerBatch(TP, 0.0)
    _fill(batch, records)
    data = batch.encode(codec, producer_id=7, producer_epoch=2, base_sequence=40)
    header = check_batch(data)  # the CRC holds
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, 40)
    assert header.records_count == 3 and header.last_offset_delta == 2
    assert header.max_timestamp == 1005 and header.base_timestamp == 1000
    decoded = decode_records(data)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in decoded] == [
        (0, 1000, None, b"v0"),
        (1, 1005, b"k1", None),
        (2, 999, b"", b"v" * 300),
    ]
    assert [(h.key, h.value) for h in decoded[1].headers] == [("h", b"x"), ("empty", None)]


def test_futures_resolve_from_the_batch_offsets_and_callbacks_run_in_order() -> None:
    batch = ProducerBatch(TP, 0.0)
    futures = _fill(batch, [(100 + i, None, b"%d" % i, ()) for i in range(4)])
    seen: list[tuple[int, int]] = []
    # Registered out of record order: they still run in offset order.
    futures[2].add_callback(lambda md: seen.append((2, md.offset)))
    futures[0].add_callback(lambda md: seen.append((0, md.offset)))
    # A callback may read its own future (done before the latch is set): no deadlock.
    futures[1].add_callback(lambda md: seen.append((1, futures[1].get(timeout=1).offset)))
    futures[3].add_errback(lambda e: seen.append((3, -99)))
    assert not futures[0].is_done and futures[0].value is None
    with pytest.raises(KafkaTimeoutError):
        futures[0].get(timeout=0.01)
    batch.complete(base_offset=50, log_append_time=-1, log_start_offset=7)
    assert seen == [(0, 50), (1, 51), (2, 52)]  # no errback on success
    md = futures[3].get(timeout=0)
    assert (md.topic, md.partition, md.offset, md.timestamp, md.log_start_offset) == (
        "t",
        3,
        53,
        103,  # CreateTime: the record's own timestamp
        7,
    )
    assert md.serialized_value_size == 1 and md.serialized_key_size == -1
    assert all(f.succeeded() and not f.failed() and f.exception is None for f in futures)
    late: list[int] = []
    futures[0].add_callback(lambda m: late.append(m.offset))  # already done: at once
    assert late == [50]


def test_a_failed_batch_fails_every_record_and_wakes_waiters() -> None:
    batch = ProducerBatch(TP, 0.0)
    futures = _fill(batch, [(1, None, b"a", ()), (2, None, b"b", ())])
    errors: list[BaseException] = []
    futures[1].add_errback(errors.append)
    futures[1].add_callback(lambda md: errors.append(RuntimeError("called on failure")))
    got: list[BaseException] = []

    def waiter() -> None:
        try:
            futures[0].get(timeout=10)
        except KafkaError as e:
            got.append(e)

    t = threading.Thread(target=waiter)
    t.start()
    boom = KafkaError("boom")
    batch.fail(boom)
    t.join(10)
    assert got == [boom] and errors == [boom]
    assert futures[0].failed() and futures[0].exception is boom and futures[0].value is None
    with pytest.raises(RuntimeError, match="already complete"):
        batch.outcome.resolve(0, -1, 0)  # completed twice
    f = failed_future(ValueError("too large"))
    assert f.is_done and f.failed()
    with pytest.raises(ValueError, match="too large"):
        f.get(timeout=0)


def test_a_waiting_caller_is_let_go_only_after_the_batch_callbacks() -> None:
    """The latch is made on the first wait: a caller already waiting when the batch
    completes is let go after every callback has run, and a latch first asked for
    after completion is already set."""
    batch = ProducerBatch(TP, 0.0)
    futures = _fill(batch, [(1, None, b"a", ()), (2, None, b"b", ())])
    gate = threading.Event()
    order: list[str] = []

    def slow(_md: object) -> None:
        assert gate.wait(10)
        order.append("callback")

    futures[0].add_callback(slow)
    waiting = threading.Event()

    def waiter() -> None:
        waiting.set()
        futures[1].get(timeout=10)
        order.append("waiter")

    w = threading.Thread(target=waiter)
    w.start()
    assert waiting.wait(10)
    while batch.outcome._latch is None:  # the waiter has made the latch and waits on it
        time.sleep(0.001)
    completer = threading.Thread(target=batch.complete, args=(10, -1, 0))
    completer.start()
    w.join(0.3)
    assert w.is_alive(), "the waiter went before the batch's callbacks had run"
    gate.set()
    w.join(10)
    completer.join(10)
    assert order == ["callback", "waiter"]
    later = ProducerBatch(TP, 0.0)
    _fill(later, [(1, None, b"c", ())])
    later.complete(0, -1, 0)
    assert later.latch.is_set()  # made after completion: set at once


_BOUNDARY = st.sampled_from([0, 1, 63, 64, 8191, 8192, 16383, 16384, 16385, 70_000])
_TIMESTAMPS = st.one_of(
    st.integers(0, 2**41),
    st.builds(lambda d: 10**12 + d, _BOUNDARY),  # deltas on both sides of the lookup table
    st.builds(lambda d: 10**12 - d, _BOUNDARY),  # earlier than the first: negative deltas
)
_BLOBS = st.one_of(st.none(), st.binary(max_size=40), _BOUNDARY.map(lambda n: b"\x5a" * n))
_HEADERS = st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=8))))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_TIMESTAMPS, _BLOBS, _BLOBS, _HEADERS), min_size=1, max_size=12))
def test_any_records_decode_back_whatever_their_sizes(records) -> None:
    """The looked-up varints (deltas and lengths below 2^14) and the encoded ones above
    frame records the storage decoder reads back exactly."""
    batch = ProducerBatch(TP, 0.0)
    _fill(batch, [(ts, key, value, tuple(h)) for ts, key, value, h in records])
    data = batch.encode(CompressionType.NONE, producer_id=-1, producer_epoch=-1, base_sequence=-1)
    check_batch(data)
    decoded = decode_records(data)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in decoded] == [
        (i, ts, key, value) for i, (ts, key, value, _h) in enumerate(records)
    ]
    assert [[(h.key, h.value) for h in r.headers] for r in decoded] == [
        [(k, v) for k, v in h] for *_rest, h in records
    ]
