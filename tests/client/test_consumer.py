"""The consumer against a real node process: topics are created and records
produced with raw gRPC, so these tests depend only on the node and the consumer."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import grpc
import pytest

from seglog.client.consumer import (
    Consumer,
    ConsumerRecord,
    NoOffsetForPartitionError,
    OffsetAndTimestamp,
    OffsetOutOfRangeError,
    TopicPartition,
)
from seglog.client.errors import IllegalStateError, KafkaError, KafkaTimeoutError
from seglog.client.fetcher import MAX_BUFFERED_FETCHES
from seglog.proto import client_pb2 as pb
from seglog.proto import client_pb2_grpc
from seglog.storage.compression import CompressionType
from seglog.storage.record_batch import HEADER_SIZE, NewRecord, build_batch, iter_batches

# Record timestamps: recent (an hour ago, whole seconds) so retention.ms, which
# counts from record timestamps, leaves them alone.
T0 = (int(time.time()) - 3600) * 1000


# --- helpers -----------------------------------------------------------------------------


class Cluster:
    """Raw gRPC access to the node, independent of the clients under test."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.channel = grpc.insecure_channel(bootstrap)
        self.stub = client_pb2_grpc.SegLogStub(self.channel)

    def create_topic(self, name: str, partitions: int = 1) -> None:
        response = self.stub.CreateTopics(
            pb.CreateTopicsRequest(
                topics=[
                    pb.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1)
                ]
            ),
            timeout=10,
        )
        assert response.topics[0].error_code == 0, response

    def produce(
        self,
        topic: str,
        partition: int,
        records: Sequence[NewRecord],
        compression: CompressionType = CompressionType.NONE,
    ) -> int:
        batch = build_batch(records, compression=compression)
        response = self.stub.Produce(
            pb.ProduceRequest(
                acks=-1,
                timeout_ms=5000,
                topics=[
                    pb.TopicProduceData(
                        name=topic,
                        partitions=[pb.PartitionProduceData(partition=partition, records=batch)],
                    )
                ],
            ),
            timeout=10,
        )
        result = response.topics[0].partitions[0]
        assert result.error_code == 0, result
        return result.base_offset

    def close(self) -> None:
        self.channel.close()


@pytest.fixture
def cluster(shared_node) -> Iterator[Cluster]:
    c = Cluster(shared_node.bootstrap)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def make_consumer(shared_node) -> Iterator[Callable[..., Consumer]]:
    """Consumers closed after the test; bootstrap defaults to the shared node."""
    made: list[Consumer] = []

    def make(*topics: str, **config) -> Consumer:
        config.setdefault("bootstrap_servers", shared_node.bootstrap)
        config.setdefault("request_timeout_ms", 10_000)
        c = Consumer(*topics, **config)
        made.append(c)
        return c

    try:
        yield make
    finally:
        for c in made:
            c.close()


def records_for(partition: int, batch: int, count: int) -> list[NewRecord]:
    """Varied records: null keys and values, headers with null values, distinct timestamps."""
    out = []
    for i in range(count):
        n = batch * 1000 + i
        out.append(
            NewRecord(
                value=None if i % 7 == 3 else f"value-{partition}-{n}".encode() * (1 + i % 3),
                key=None if i % 5 == 2 else f"key-{n}".encode(),
                timestamp=T0 + batch * 1000 + i,
                headers=[("h", f"{n}".encode()), ("empty", None)] if i % 4 == 0 else [],
            )
        )
    return out


def consume_until(
    consumer: Consumer, ends: dict[TopicPartition, int], timeout_s: float = 20.0, **poll_args
) -> dict[TopicPartition, list[ConsumerRecord]]:
    """Poll until every partition's position reaches its end offset (bounded)."""
    got: dict[TopicPartition, list[ConsumerRecord]] = {tp: [] for tp in ends}
    deadline = time.monotonic() + timeout_s
    while any(consumer.position(tp) != end for tp, end in ends.items()):
        assert time.monotonic() < deadline, {tp: len(v) for tp, v in got.items()}
        for tp, recs in consumer.poll(timeout_ms=500, **poll_args).items():
            got[tp].extend(recs)
    return got


def assert_offsets_contiguous(records: Sequence[ConsumerRecord], start: int, end: int) -> None:
    assert [r.offset for r in records] == list(range(start, end))


def segment_files(node, topic: str, partition: int) -> list[Path]:
    found = []
    for log_dir in node.log_dirs:
        found.extend(sorted((log_dir / f"{topic}-{partition}").glob("*.log")))
    return found


# --- consuming -----------------------------------------------------------------------------


def test_consumes_everything_from_beginning_across_partitions(cluster, make_consumer) -> None:
    cluster.create_topic("events", partitions=3)
    codecs = list(CompressionType)
    expected: dict[TopicPartition, list[NewRecord]] = {}
    for p in range(3):
        tp = TopicPartition("events", p)
        expected[tp] = []
        for b in range(6):
            recs = records_for(p, b, 40 + 7 * b)
            cluster.produce("events", p, recs, codecs[(p + b) % len(codecs)])
            expected[tp].extend(recs)

    consumer = make_consumer("events", auto_offset_reset="earliest")
    assert consumer.assignment() == set(expected)
    got = consume_until(consumer, {tp: len(v) for tp, v in expected.items()})

    for tp, want in expected.items():
        recs = got[tp]
        assert_offsets_contiguous(recs, 0, len(want))
        for r, w in zip(recs, want, strict=True):
            assert (r.topic, r.partition) == (tp.topic, tp.partition)
            assert r.key == w.key
            assert r.value == w.value
            assert r.timestamp == w.timestamp
            assert r.timestamp_type == 0
            assert r.headers == list(w.headers)
            assert r.checksum is None
            assert r.leader_epoch >= 0
            assert r.serialized_key_size == (len(w.key) if w.key is not None else -1)
            assert r.serialized_value_size == (len(w.value) if w.value is not None else -1)
            if w.headers:
                assert r.serialized_header_size == sum(len(k) + len(v or b"") for k, v in w.headers)
            else:
                assert r.serialized_header_size == -1
        assert consumer.position(tp) == len(want)
        assert consumer.highwater(tp) == len(want)
    # Nothing more arrives.
    assert consumer.poll(timeout_ms=300) == {}


def test_deserializers_apply_to_keys_and_values(cluster, make_consumer) -> None:
    cluster.create_topic("ser")
    cluster.produce("ser", 0, [NewRecord(value=b"41", key=b"a"), NewRecord(value=None)])
    consumer = make_consumer(
        bootstrap_servers=cluster.bootstrap,
        auto_offset_reset="earliest",
        key_deserializer=lambda k: k.decode() if k is not None else None,
        value_deserializer=lambda v: int(v) + 1 if v is not None else None,
    )
    tp = TopicPartition("ser", 0)
    consumer.assign([tp])
    got = consume_until(consumer, {tp: 2})[tp]
    assert [(r.key, r.value) for r in got] == [("a", 42), (None, None)]
    assert got[0].serialized_value_size == 2

    # A deserializer failure stops at its record, after the ones before it.
    cluster.produce("ser", 0, [NewRecord(value=b"1"), NewRecord(value=b"x"), NewRecord(value=b"3")])
    got = []
    deadline = time.monotonic() + 10
    with pytest.raises(KafkaError, match="cannot deserialize ser-0 offset 3"):
        while True:
            assert time.monotonic() < deadline
            got.extend(consumer.poll(timeout_ms=300).get(tp, []))
    assert [r.value for r in got] == [2]
    assert consumer.position(tp) == 3
    consumer.seek(tp, 4)
    assert [r.value for r in consume_until(consumer, {tp: 5})[tp]] == [4]


def test_max_poll_records_keeps_the_rest_for_later(cluster, make_consumer) -> None:
    cluster.create_topic("many", partitions=2)
    for p in range(2):
        cluster.produce("many", p, records_for(p, 0, 95), CompressionType.GZIP)
    consumer = make_consumer("many", auto_offset_reset="earliest", max_poll_records=13)
    sizes: list[int] = []
    got: dict[TopicPartition, list[ConsumerRecord]] = {tp: [] for tp in consumer.assignment()}
    deadline = time.monotonic() + 20
    while sum(len(v) for v in got.values()) < 190:
        assert time.monotonic() < deadline
        batch = consumer.poll(timeout_ms=500)
        if batch:
            sizes.append(sum(len(v) for v in batch.values()))
        for tp, recs in batch.items():
            got[tp].extend(recs)
    assert max(sizes) == 13
    for recs in got.values():
        assert_offsets_contiguous(recs, 0, 95)
    # The per-call limit overrides the configured one.
    consumer.seek(TopicPartition("many", 0), 10)
    deadline = time.monotonic() + 10
    batch: dict[TopicPartition, list[ConsumerRecord]] = {}
    while not batch:
        assert time.monotonic() < deadline
        batch = consumer.poll(timeout_ms=500, max_records=4)
    assert [r.offset for r in batch[TopicPartition("many", 0)]] == [10, 11, 12, 13]
    with pytest.raises(ValueError):
        consumer.poll(max_records=0)


def test_seek_and_position(cluster, make_consumer) -> None:
    cluster.create_topic("seeks")
    cluster.produce("seeks", 0, records_for(0, 0, 30))
    cluster.produce("seeks", 0, records_for(0, 1, 30))
    tp = TopicPartition("seeks", 0)
    consumer = make_consumer(auto_offset_reset="latest")
    consumer.assign([tp])
    assert consumer.position(tp) == 60  # 'latest': the high watermark
    consumer.seek(tp, 25)
    assert consumer.position(tp) == 25
    got = consume_until(consumer, {tp: 60}, max_records=10)[tp]
    assert_offsets_contiguous(got, 25, 60)
    consumer.seek_to_beginning(tp)
    assert consumer.position(tp) == 0
    consumer.seek(tp, 59)
    got = consume_until(consumer, {tp: 60})[tp]
    assert [r.offset for r in got] == [59]
    with pytest.raises(ValueError):
        consumer.seek(tp, -1)
    with pytest.raises(IllegalStateError):
        consumer.seek(TopicPartition("seeks", 7), 0)
    with pytest.raises(IllegalStateError):
        consumer.position(TopicPartition("other", 0))


def test_seek_into_compressed_batch_returns_only_records_at_or_after_position(
    cluster, make_consumer
) -> None:
    cluster.create_topic("packed")
    for codec in (CompressionType.ZSTD, CompressionType.SNAPPY):
        cluster.produce("packed", 0, records_for(0, int(codec), 50), codec)
    tp = TopicPartition("packed", 0)
    consumer = make_consumer()
    consumer.assign([tp])
    for start in (23, 49, 50, 77):
        consumer.seek(tp, start)
        got = consume_until(consumer, {tp: 100})[tp]
        assert_offsets_contiguous(got, start, 100)


def test_seek_to_end_then_new_data_arrives_during_a_long_poll(cluster, make_consumer) -> None:
    cluster.create_topic("live", partitions=2)
    for p in range(2):
        cluster.produce("live", p, records_for(p, 0, 10))
    consumer = make_consumer("live", auto_offset_reset="earliest", fetch_max_wait_ms=2000)
    consumer.seek_to_end()
    tps = sorted(consumer.assignment(), key=lambda tp: tp.partition)
    assert [consumer.position(tp) for tp in tps] == [10, 10]
    fresh = records_for(1, 5, 3)

    def produce_later() -> None:
        time.sleep(0.3)
        cluster.produce("live", 1, fresh)

    producer = threading.Thread(target=produce_later)
    producer.start()
    try:
        got: dict[TopicPartition, list[ConsumerRecord]] = {}
        deadline = time.monotonic() + 15
        while not got:
            assert time.monotonic() < deadline
            got = consumer.poll(timeout_ms=5000)
    finally:
        producer.join()
    assert list(got) == [tps[1]]
    assert [(r.offset, r.value) for r in got[tps[1]]] == [
        (10 + i, r.value) for i, r in enumerate(fresh)
    ]
    assert consumer.position(tps[0]) == 10
    assert consumer.position(tps[1]) == 13


def test_beginning_and_end_offsets(cluster, make_consumer) -> None:
    cluster.create_topic("ends", partitions=2)
    cluster.produce("ends", 1, records_for(1, 0, 17))
    cluster.produce("ends", 1, records_for(1, 1, 4))
    tps = [TopicPartition("ends", 0), TopicPartition("ends", 1)]
    consumer = make_consumer()  # nothing assigned: lookups need no assignment
    assert consumer.beginning_offsets(tps) == {tps[0]: 0, tps[1]: 0}
    assert consumer.end_offsets(tps) == {tps[0]: 0, tps[1]: 21}
    assert consumer.topics() >= {"ends"}
    assert consumer.partitions_for_topic("ends") == {0, 1}
    assert consumer.partitions_for_topic("no-such-topic") is None
    with pytest.raises(KafkaTimeoutError):
        consumer.end_offsets([TopicPartition("no-such-topic", 0)], timeout_ms=500)


def test_offsets_for_times(cluster, make_consumer) -> None:
    cluster.create_topic("times", partitions=2)
    # Batch b holds offsets 10b..10b+9 with timestamps T0 + 1000b + i.
    for b in range(3):
        cluster.produce("times", 0, records_for(0, b, 10), CompressionType.LZ4 if b else 0)
    tp, empty = TopicPartition("times", 0), TopicPartition("times", 1)
    consumer = make_consumer()

    def lookup(ts: int) -> OffsetAndTimestamp | None:
        return consumer.offsets_for_times({tp: ts})[tp]

    assert lookup(0) == OffsetAndTimestamp(0, T0)
    assert lookup(T0) == OffsetAndTimestamp(0, T0)  # first record of the first batch
    assert lookup(T0 + 1000) == OffsetAndTimestamp(10, T0 + 1000)  # a batch boundary
    assert lookup(T0 + 2000) == OffsetAndTimestamp(20, T0 + 2000)
    assert lookup(T0 + 9) == OffsetAndTimestamp(9, T0 + 9)  # last record of a batch
    assert lookup(T0 + 1004) == OffsetAndTimestamp(14, T0 + 1004)  # inside a batch
    assert lookup(T0 + 500) == OffsetAndTimestamp(10, T0 + 1000)  # between batches
    assert lookup(T0 + 2009) == OffsetAndTimestamp(29, T0 + 2009)
    assert lookup(T0 + 2010) is None  # after the last record
    assert consumer.offsets_for_times({empty: T0}) == {empty: None}

    with pytest.raises(ValueError, match="seconds"):
        consumer.offsets_for_times({tp: T0 // 1000})
    with pytest.raises(ValueError, match="seconds"):
        consumer.offsets_for_times({tp: time.time()})
    with pytest.raises(ValueError, match="negative"):
        consumer.offsets_for_times({tp: -1})
    with pytest.raises(ValueError, match="microseconds|nanoseconds"):
        consumer.offsets_for_times({tp: T0 * 1000})


# --- offset resets --------------------------------------------------------------------------


def test_out_of_range_resets_to_earliest(cluster, make_consumer) -> None:
    cluster.create_topic("oor-earliest")
    cluster.produce("oor-earliest", 0, records_for(0, 0, 20))
    tp = TopicPartition("oor-earliest", 0)
    consumer = make_consumer(auto_offset_reset="earliest")
    consumer.assign([tp])
    consumer.seek(tp, 500)
    got = consume_until(consumer, {tp: 20})[tp]
    assert_offsets_contiguous(got, 0, 20)


def test_out_of_range_resets_to_latest(cluster, make_consumer) -> None:
    cluster.create_topic("oor-latest")
    cluster.produce("oor-latest", 0, records_for(0, 0, 20))
    tp = TopicPartition("oor-latest", 0)
    consumer = make_consumer(auto_offset_reset="latest")
    consumer.assign([tp])
    consumer.seek(tp, 500)
    deadline = time.monotonic() + 10
    while consumer.position(tp) != 20:  # the reset happens when the fetch reports it
        assert time.monotonic() < deadline
        assert consumer.poll(timeout_ms=200) == {}
    cluster.produce("oor-latest", 0, records_for(0, 1, 5))
    got = consume_until(consumer, {tp: 25})[tp]
    assert_offsets_contiguous(got, 20, 25)


def test_out_of_range_with_reset_none_raises_until_seek(cluster, make_consumer) -> None:
    cluster.create_topic("oor-none")
    cluster.produce("oor-none", 0, records_for(0, 0, 20))
    tp = TopicPartition("oor-none", 0)
    consumer = make_consumer(auto_offset_reset="none")
    consumer.assign([tp])
    with pytest.raises(NoOffsetForPartitionError):
        consumer.poll(timeout_ms=100)
    consumer.seek(tp, 500)
    deadline = time.monotonic() + 10
    with pytest.raises(OffsetOutOfRangeError, match="auto_offset_reset='none'"):
        while True:
            assert time.monotonic() < deadline
            assert consumer.poll(timeout_ms=200) == {}
    # Sticky until the application moves the position.
    with pytest.raises(OffsetOutOfRangeError):
        consumer.poll()
    assert consumer.position(tp) == 500
    consumer.seek(tp, 15)
    got = consume_until(consumer, {tp: 20})[tp]
    assert_offsets_contiguous(got, 15, 20)


# --- iteration ---------------------------------------------------------------------------------


def test_iteration_stops_after_consumer_timeout(cluster, make_consumer) -> None:
    cluster.create_topic("iter-timeout", partitions=2)
    for p in range(2):
        cluster.produce("iter-timeout", p, records_for(p, 0, 120), CompressionType.GZIP)
    consumer = make_consumer(
        "iter-timeout", auto_offset_reset="earliest", consumer_timeout_ms=700, max_poll_records=50
    )
    got = list(consumer)
    by_partition = {p: [r.offset for r in got if r.partition == p] for p in range(2)}
    assert by_partition == {0: list(range(120)), 1: list(range(120))}
    assert list(consumer) == []  # again: nothing new, stops after the timeout

    cluster.produce("iter-timeout", 1, records_for(1, 1, 3))
    assert [r.offset for r in consumer] == [120, 121, 122]


def test_leaving_the_iterator_early_loses_nothing(cluster, make_consumer) -> None:
    cluster.create_topic("iter-early")
    cluster.produce("iter-early", 0, records_for(0, 0, 100))
    tp = TopicPartition("iter-early", 0)
    consumer = make_consumer(consumer_timeout_ms=5000, max_poll_records=40)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    seen = []
    for record in consumer:
        seen.append(record.offset)
        if record.offset == 14:
            break  # records 15..39 were drained but not yielded
    assert consumer.position(tp) == 15
    got = consume_until(consumer, {tp: 100})[tp]
    assert seen + [r.offset for r in got] == list(range(100))


# --- pipelining and bounds ---------------------------------------------------------------------


def test_fetches_are_pipelined_and_buffers_bounded(cluster, make_consumer) -> None:
    cluster.create_topic("pipe")
    for b in range(12):
        cluster.produce("pipe", 0, records_for(0, b, 20))
    tp = TopicPartition("pipe", 0)
    # Small fetches (one batch each) so consuming takes many round trips.
    consumer = make_consumer(max_partition_fetch_bytes=64, fetch_max_wait_ms=100)
    consumer.assign([tp])
    consumer.seek(tp, 0)
    state = consumer._fetcher.states[tp]
    got: list[ConsumerRecord] = []
    read_ahead = 0
    deadline = time.monotonic() + 20
    while len(got) < 240:
        assert time.monotonic() < deadline
        recs = consumer.poll(timeout_ms=500, max_records=7).get(tp, [])
        got.extend(recs)
        assert len(state.buffers) <= MAX_BUFFERED_FETCHES
        if recs:
            # The next fetch is already on its way while the application works.
            assert state.in_flight or len(state.buffers) == MAX_BUFFERED_FETCHES
            if state.buffers and state.in_flight:
                read_ahead += 1
        time.sleep(0.005)  # "processing"
    assert_offsets_contiguous(got, 0, 240)
    assert read_ahead > 0


def test_pause_and_resume(cluster, make_consumer) -> None:
    cluster.create_topic("pz", partitions=2)
    for p in range(2):
        cluster.produce("pz", p, records_for(p, 0, 10))
    a, b = TopicPartition("pz", 0), TopicPartition("pz", 1)
    consumer = make_consumer(auto_offset_reset="earliest")
    consumer.assign([a, b])
    consumer.pause(a)
    assert consumer.paused() == {a}
    seen: set[TopicPartition] = set()
    deadline = time.monotonic() + 10
    while consumer.position(b) != 10:
        assert time.monotonic() < deadline
        seen.update(consumer.poll(timeout_ms=300))
    assert seen == {b}
    assert consumer.poll(timeout_ms=300) == {}
    assert consumer.position(a) == 0
    consumer.resume(a)
    assert consumer.paused() == set()
    got = consume_until(consumer, {a: 10})
    assert_offsets_contiguous(got[a], 0, 10)


# --- failures ------------------------------------------------------------------------------------


def test_node_restart_mid_consumption_loses_and_duplicates_nothing(node, make_consumer) -> None:
    # A node of its own: this test stops it.
    cluster = Cluster(node.bootstrap)
    cluster.create_topic("restart", partitions=2)
    for p in range(2):
        for b in range(5):
            cluster.produce("restart", p, records_for(p, b, 40), CompressionType.LZ4)
    cluster.close()
    consumer = make_consumer(
        "restart",
        bootstrap_servers=node.bootstrap,
        auto_offset_reset="earliest",
        max_poll_records=30,
        retry_backoff_max_ms=300,
    )
    got: dict[TopicPartition, list[int]] = {tp: [] for tp in consumer.assignment()}
    deadline = time.monotonic() + 20
    while sum(len(v) for v in got.values()) < 150:
        assert time.monotonic() < deadline
        for tp, recs in consumer.poll(timeout_ms=500).items():
            got[tp].extend(r.offset for r in recs)

    node.stop()
    # While the node is down polls may drain what was buffered, then return nothing.
    for _ in range(3):
        for tp, recs in consumer.poll(timeout_ms=200).items():
            got[tp].extend(r.offset for r in recs)
    node.start()
    restarted = Cluster(node.bootstrap)
    try:
        for p in range(2):
            restarted.produce("restart", p, records_for(p, 9, 25))
    finally:
        restarted.close()

    deadline = time.monotonic() + 30
    while any(len(v) < 225 for v in got.values()):
        assert time.monotonic() < deadline, {tp: len(v) for tp, v in got.items()}
        for tp, recs in consumer.poll(timeout_ms=500).items():
            got[tp].extend(r.offset for r in recs)
    for offsets in got.values():
        assert offsets == list(range(225))


def test_corrupt_batch_raises_a_clear_error_after_the_good_records(
    shared_node, cluster, make_consumer
) -> None:
    cluster.create_topic("rot")
    for b in range(3):
        cluster.produce("rot", 0, records_for(0, b, 10))
    (segment,) = segment_files(shared_node, "rot", 0)
    data = bytearray(segment.read_bytes())
    positions = [pos for pos, _header in iter_batches(bytes(data))]
    assert len(positions) == 3
    # Flip one byte inside the records of the second batch (offsets 10..19).
    data[positions[1] + HEADER_SIZE + 5] ^= 0xFF
    with open(segment, "r+b") as f:
        f.seek(positions[1])
        f.write(data[positions[1] : positions[2]])

    tp = TopicPartition("rot", 0)
    consumer = make_consumer()
    consumer.assign([tp])
    consumer.seek(tp, 0)
    got: list[ConsumerRecord] = []
    deadline = time.monotonic() + 10
    with pytest.raises(KafkaError, match="CORRUPT_MESSAGE.*rot-0.*CRC") as raised:
        while True:
            assert time.monotonic() < deadline
            got.extend(consumer.poll(timeout_ms=300).get(tp, []))
    assert "offset 10" in str(raised.value)
    assert_offsets_contiguous(got, 0, 10)
    assert consumer.position(tp) == 10
    with pytest.raises(KafkaError, match="CORRUPT_MESSAGE"):
        consumer.poll(timeout_ms=300)  # it recurs: the position does not move past it
    consumer.seek(tp, 20)
    got = consume_until(consumer, {tp: 30})[tp]
    assert_offsets_contiguous(got, 20, 30)


# --- configuration --------------------------------------------------------------------------------


def test_configuration_errors(make_consumer) -> None:
    with pytest.raises(ValueError, match="group_id must be a non-empty string"):
        make_consumer(group_id="")
    with pytest.raises(ValueError, match="group_instance_id needs a group_id"):
        make_consumer(group_instance_id="i")
    with pytest.raises(ValueError, match="'sticky' is unknown"):
        make_consumer(group_id="g", partition_assignment_strategy="sticky")
    with pytest.raises(ValueError, match="heartbeat_interval_ms"):
        make_consumer(group_id="g", session_timeout_ms=1000, heartbeat_interval_ms=1000)
    with pytest.raises(IllegalStateError, match="needs a group_id"):
        make_consumer().commit()
    with pytest.raises(ValueError, match="auto_offset_reset"):
        make_consumer(auto_offset_reset="begin")
    with pytest.raises(ValueError, match="max_poll_records"):
        make_consumer(max_poll_records=0)
    consumer = make_consumer()
    consumer.assign([TopicPartition("x", 0)])
    with pytest.raises(IllegalStateError):
        consumer.subscribe(["x"])
    consumer.close()
    with pytest.raises(IllegalStateError):
        consumer.poll()
    assert list(consumer) == []


def test_subscribe_by_pattern_assigns_every_matching_partition(cluster, make_consumer) -> None:
    cluster.create_topic("logs-a", partitions=2)
    cluster.create_topic("logs-b")
    cluster.create_topic("metrics")
    consumer = make_consumer()
    consumer.subscribe(pattern=r"logs-.*")
    assert consumer.assignment() == {
        TopicPartition("logs-a", 0),
        TopicPartition("logs-a", 1),
        TopicPartition("logs-b", 0),
    }
    assert consumer.subscription() == {"logs-a", "logs-b"}
    consumer.unsubscribe()
    assert consumer.assignment() == set()
