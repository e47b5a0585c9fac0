"""The producer against a real node process. Topics are created and the logs read
back with raw gRPC (CreateTopics, Fetch) and storage's batch decoder, so these
tests depend only on the node and the producer."""

from __future__ import annotations

import concurrent.futures
import math
import threading
import time
from collections.abc import Iterator

import grpc
import pytest

from seglog.client.cluster import TopicPartition
from seglog.client.errors import (
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    NoBrokersAvailable,
    error_class,
)
from seglog.client.future import RecordMetadata
from seglog.client.partitioner import partition_for_key
from seglog.client.producer import KafkaConfigurationError, MessageTooLargeError, Producer
from seglog.harness.node_process import NodeProcess
from seglog.proto import client_pb2 as pb
from seglog.proto import client_pb2_grpc, errors_pb2
from seglog.storage.compression import CompressionType
from seglog.storage.record_batch import (
    BatchHeader,
    NewRecord,
    Record,
    build_batch,
    decode_records,
    iter_batches,
)

# Explicit timestamps an hour back, so retention (counted from them) leaves them be.
T0 = (int(time.time()) - 3600) * 1000
# Bounds, never expectations: how long a test waits before calling it a failure.
WAIT_S = 30


# --- helpers -----------------------------------------------------------------------------


class Raw:
    """Raw gRPC access to the node, independent of the producer under test."""

    def __init__(self, bootstrap: str) -> None:
        self.channel = grpc.insecure_channel(bootstrap)
        self.stub = client_pb2_grpc.SegLogStub(self.channel)

    def create_topic(
        self, name: str, partitions: int = 1, configs: dict[str, str] | None = None
    ) -> None:
        response = self.stub.CreateTopics(
            pb.CreateTopicsRequest(
                topics=[
                    pb.CreatableTopic(
                        name=name,
                        num_partitions=partitions,
                        replication_factor=1,
                        configs=configs or {},
                    )
                ],
                timeout_ms=10_000,
            ),
            timeout=WAIT_S,
        )
        assert response.topics[0].error_code == 0, response

    def batches(self, topic: str, partition: int) -> list[tuple[BatchHeader, list[Record]]]:
        """Every batch of the partition up to its high watermark, decoded."""
        out: list[tuple[BatchHeader, list[Record]]] = []
        offset = 0
        while True:
            response = self.stub.Fetch(
                pb.FetchRequest(
                    replica_id=-1,
                    max_wait_ms=0,
                    min_bytes=1,
                    max_bytes=8 << 20,
                    topics=[
                        pb.FetchTopic(
                            name=topic,
                            partitions=[
                                pb.FetchPartition(
                                    partition=partition,
                                    current_leader_epoch=-1,
                                    fetch_offset=offset,
                                    partition_max_bytes=4 << 20,
                                )
                            ],
                        )
                    ],
                ),
                timeout=WAIT_S,
            )
            p = response.topics[0].partitions[0]
            assert p.error_code == 0, p
            if not p.records:
                assert offset == p.high_watermark
                return out
            for pos, header in iter_batches(p.records):
                out.append((header, decode_records(p.records, pos, header)))
                offset = header.next_offset

    def records(self, topic: str, partition: int) -> list[Record]:
        return [r for _, records in self.batches(topic, partition) for r in records]

    def produce_raw(self, topic: str, partition: int, batch: bytes) -> pb.PartitionProduceResponse:
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
            timeout=WAIT_S,
        )
        return response.topics[0].partitions[0]

    def close(self) -> None:
        self.channel.close()


@pytest.fixture
def raw(shared_node: NodeProcess) -> Iterator[Raw]:
    r = Raw(shared_node.bootstrap)
    yield r
    r.close()


_topic_ids = iter(range(1_000_000))


def topic_name(prefix: str) -> str:
    return f"{prefix}-{next(_topic_ids)}"


@pytest.fixture
def make_producer(shared_node: NodeProcess) -> Iterator:
    """Producers against the shared node, closed (forcefully if need be) afterwards."""
    made: list[Producer] = []

    def make(**kwargs: object) -> Producer:
        kwargs.setdefault("bootstrap_servers", shared_node.bootstrap)
        p = Producer(**kwargs)  # type: ignore[arg-type]
        made.append(p)
        return p

    yield make
    for p in made:
        p.close(timeout=10)


class Unavailable(grpc.RpcError):
    """What gRPC raises when the connection drops before the answer arrives."""

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE

    def details(self) -> str:
        return "simulated: connection lost before the response"


class Finished:
    """A finished call, as returned by `stub.Produce.future`."""

    def __init__(self, response: pb.ProduceResponse | None = None) -> None:
        self.response = response

    def add_done_callback(self, fn) -> None:
        fn(self)

    def result(self, timeout: float | None = None) -> pb.ProduceResponse:
        if self.response is None:
            raise Unavailable()
        return self.response

    def cancel(self) -> bool:
        return False


def lose_responses(producer: Producer, count: int) -> list[pb.ProduceRequest]:
    """The next `count` Produce calls reach the node and are processed, but their
    answers are lost (as when a connection drops); later calls are untouched."""
    sender = producer._sender
    real = sender.start_produce
    lost: list[pb.ProduceRequest] = []

    def start_produce(stub, request, timeout_s) -> object:
        if len(lost) < count:
            stub.Produce(request, timeout=timeout_s)  # the node writes the data
            lost.append(request)
            return Finished(None)
        return real(stub, request, timeout_s)

    sender.start_produce = start_produce  # type: ignore[method-assign]
    return lost


def get_all(futures, timeout: float = WAIT_S) -> list[RecordMetadata]:
    return [f.get(timeout=timeout) for f in futures]


# --- sending and reading back ------------------------------------------------------------


def test_many_records_keyed_unkeyed_headers_timestamps(raw, make_producer):
    topic = topic_name("many")
    raw.create_topic(topic, partitions=3)
    p = make_producer(linger_ms=2)
    sent = []
    for i in range(900):
        key = f"key-{i % 23}".encode() if i % 3 else None
        headers = [("i", str(i).encode()), ("empty", None)] if i % 5 == 0 else None
        ts = T0 + i if i % 2 else None
        value = f"value-{i}".encode() * (1 + i % 7)
        future = p.send(topic, value=value, key=key, headers=headers, timestamp_ms=ts)
        sent.append((future, key, value, headers, ts))
    p.flush(timeout=WAIT_S)

    by_partition: dict[int, dict[int, tuple]] = {0: {}, 1: {}, 2: {}}
    for future, key, value, headers, ts in sent:
        assert future.is_done and future.succeeded() and future.exception is None
        md = future.get(timeout=0)
        assert md.topic == topic and md.topic_partition == TopicPartition(topic, md.partition)
        if key is not None:
            assert md.partition == partition_for_key(key, 3)
        if ts is not None:
            assert md.timestamp == ts
        assert md.serialized_key_size == (len(key) if key is not None else -1)
        assert md.serialized_value_size == len(value)
        assert md.serialized_header_size == (
            sum(len(k) + len(v or b"") for k, v in headers) if headers else -1
        )
        assert md.log_start_offset == 0 and md.checksum is None
        assert md.offset not in by_partition[md.partition]
        by_partition[md.partition][md.offset] = (key, value, headers, md.timestamp)

    total = 0
    for partition, expected in by_partition.items():
        records = raw.records(topic, partition)
        # Offsets are contiguous from 0 and every acknowledged offset holds its record.
        assert [r.offset for r in records] == list(range(len(records)))
        assert sorted(expected) == list(range(len(records)))
        for r in records:
            key, value, headers, ts = expected[r.offset]
            assert (r.key, r.value, r.timestamp) == (key, value, ts)
            assert [(h.key, h.value) for h in r.headers] == list(headers or [])
        total += len(records)
    assert total == 900
    assert all(by_partition.values()), "unkeyed and keyed records should reach every partition"


def test_keyed_records_keep_their_order_within_a_partition(raw, make_producer):
    topic = topic_name("order")
    raw.create_topic(topic, partitions=4)
    p = make_producer(linger_ms=0, batch_size=512)
    keys = [f"k{j}".encode() for j in range(8)]
    futures = [p.send(topic, value=b"%d" % i, key=keys[i % 8]) for i in range(800)]
    get_all(futures)
    for partition in range(4):
        seen: dict[bytes, int] = {}
        for r in raw.records(topic, partition):
            assert r.key is not None and partition_for_key(r.key, 4) == partition
            i = int(r.value)
            assert seen.get(r.key, -1) < i, "records of one key were reordered"
            seen[r.key] = i


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_each_compression_codec(raw, make_producer, codec):
    topic = topic_name(f"codec-{codec}")
    raw.create_topic(topic)
    p = make_producer(compression_type=codec, linger_ms=5)
    values = [(b"record %d " % i) * (i % 13 + 1) for i in range(300)]
    futures = [p.send(topic, value=v, key=b"k%d" % (i % 3)) for i, v in enumerate(values)]
    offsets = [md.offset for md in get_all(futures)]
    assert offsets == list(range(300))
    batches = raw.batches(topic, 0)
    expected = CompressionType.from_name(codec)
    assert all(h.compression == expected for h, _ in batches)
    assert [r.value for _, rs in batches for r in rs] == values


def test_log_append_time_topic_reports_the_node_timestamp(raw, make_producer):
    topic = topic_name("append-time")
    raw.create_topic(topic, configs={"message.timestamp.type": "LogAppendTime"})
    p = make_producer()
    before = int(time.time() * 1000)
    md = p.send(topic, value=b"x", timestamp_ms=T0).get(timeout=WAIT_S)
    assert md.timestamp != T0 and md.timestamp >= before - 60_000
    (record,) = raw.records(topic, 0)
    assert record.timestamp == md.timestamp


@pytest.mark.parametrize("acks", [0, 1, -1, "all"])
def test_acks(raw, make_producer, acks):
    topic = topic_name("acks")
    raw.create_topic(topic)
    p = make_producer(acks=acks)
    futures = [p.send(topic, value=b"v%d" % i) for i in range(50)]
    results = get_all(futures)
    p.flush(timeout=WAIT_S)
    if acks == 0:
        assert all(md.offset == -1 for md in results)
    else:
        assert [md.offset for md in results] == list(range(50))
    batches = raw.batches(topic, 0)
    assert [r.value for _, rs in batches for r in rs] == [b"v%d" % i for i in range(50)]
    # Idempotence is Kafka 3.x's default, silently off when acks is not 'all'.
    idempotent = acks in (-1, "all")
    assert p.idempotent is idempotent
    for header, _ in batches:
        assert (header.producer_id >= 0) is idempotent
        assert (header.base_sequence >= 0) is idempotent


def test_sequences_grow_per_partition(raw, make_producer):
    topic = topic_name("seq")
    raw.create_topic(topic, partitions=2)
    p = make_producer(batch_size=256, linger_ms=0)
    get_all([p.send(topic, value=b"x" * 40, partition=i % 2) for i in range(120)])
    for partition in (0, 1):
        batches = raw.batches(topic, partition)
        assert len(batches) > 3
        pids = {h.producer_id for h, _ in batches}
        assert len(pids) == 1 and pids.pop() >= 0
        expected = 0
        for header, records in batches:
            assert header.base_sequence == expected
            assert header.producer_epoch == 0
            expected += len(records)


def test_ready_partitions_of_a_node_share_one_request(raw, make_producer):
    topic = topic_name("pack")
    raw.create_topic(topic, partitions=8)
    # Nothing is sendable before flush(); then all eight batches are, at once.
    p = make_producer(linger_ms=600_000, delivery_timeout_ms=700_000)
    futures = [p.send(topic, value=b"v", partition=i) for i in range(8)]
    assert not any(f.is_done for f in futures)
    p.flush(timeout=WAIT_S)
    assert [f.get(timeout=0).partition for f in futures] == list(range(8))
    m = p.metrics()
    assert m["batches_sent"] == 8
    assert m["requests_sent"] == 1


def test_metrics_split_a_records_time_into_queue_time_and_request_latency(raw, make_producer):
    topic = topic_name("split-time")
    raw.create_topic(topic)
    p = make_producer(linger_ms=200)
    before = p.metrics()
    # Nothing measured yet reads NaN (as in Kafka), not a zero that looks measured.
    assert all(
        math.isnan(before[name])
        for name in ("request-latency-avg", "record-queue-time-max", "records-per-request-avg")
    )
    started = time.monotonic()
    futures = [p.send(topic, value=b"v%d" % i) for i in range(3)]
    get_all(futures)
    took_ms = (time.monotonic() - started) * 1000
    m = p.metrics()
    # One batch of three records lingered 200 ms, then went in one request.
    assert 190 <= m["record-queue-time-avg"] <= m["record-queue-time-max"] <= took_ms
    assert m["records-per-request-avg"] == 3
    # A gRPC call to another process takes well over 0.05 ms (in seconds it would not).
    assert 0.05 < m["request-latency-avg"] <= m["request-latency-max"] <= took_ms
    assert m["record-queue-time-max"] + m["request-latency-max"] <= took_ms


def test_max_request_size_splits_requests(raw, make_producer):
    topic = topic_name("split-req")
    raw.create_topic(topic, partitions=6)
    p = make_producer(linger_ms=600_000, delivery_timeout_ms=700_000, max_request_size=2500)
    futures = [p.send(topic, value=b"z" * 1000, partition=i) for i in range(6)]
    p.flush(timeout=WAIT_S)
    assert all(md.offset == 0 for md in get_all(futures))
    assert p.metrics()["requests_sent"] >= 3  # at most two 1 KB batches fit in 2500 bytes


def test_several_batches_of_a_partition_in_one_request(raw, make_producer):
    topic = topic_name("multi")
    raw.create_topic(topic)
    p = make_producer(linger_ms=600_000, delivery_timeout_ms=700_000, batch_size=1000)
    futures = [p.send(topic, value=b"%03d" % i + b"." * 200) for i in range(16)]
    p.flush(timeout=WAIT_S)
    assert [md.offset for md in get_all(futures)] == list(range(16))
    batches = raw.batches(topic, 0)
    assert len(batches) >= 4  # Kafka's batches, one per batch_size, kept on disk as such
    assert p.metrics()["requests_sent"] < len(batches)
    assert [r.value[:3] for _, rs in batches for r in rs] == [b"%03d" % i for i in range(16)]


def test_a_lingering_batch_rides_along_with_a_ready_one_to_its_node(raw, make_producer):
    """Kafka's drain: once a request goes to a node, the node's other partitions send
    their lingering batches with it instead of waiting out linger_ms."""
    topic = topic_name("riders")
    raw.create_topic(topic, partitions=2)
    p = make_producer(linger_ms=600_000, delivery_timeout_ms=700_000, batch_size=1000)
    rider = p.send(topic, value=b"lingering", partition=1)
    time.sleep(0.2)
    assert not rider.is_done  # alone it lingers
    # Two full batches on partition 0: its first batch is ready and goes at once.
    full = [p.send(topic, value=b"." * 400, partition=0) for _ in range(6)]
    assert rider.get(timeout=WAIT_S).offset == 0
    assert full[0].get(timeout=WAIT_S).offset == 0
    assert p.metrics()["requests_sent"] == 1
    p.flush(timeout=WAIT_S)


def test_many_threads_send_concurrently(raw, make_producer):
    topic = topic_name("threads")
    raw.create_topic(topic, partitions=3)
    p = make_producer(linger_ms=1)
    results: dict[int, list] = {}
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        try:
            key = b"thread-%d" % t
            results[t] = [p.send(topic, value=b"%d:%d" % (t, i), key=key) for i in range(150)]
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S)
    assert not errors
    for futures in results.values():
        get_all(futures)
    values = [r.value for partition in range(3) for r in raw.records(topic, partition)]
    assert sorted(values) == sorted(b"%d:%d" % (t, i) for t in range(6) for i in range(150))
    for partition in range(3):
        last: dict[bytes, int] = {}
        for r in raw.records(topic, partition):
            t, i = r.value.split(b":")
            assert last.get(t, -1) < int(i)  # one thread's records stay in order
            last[t] = int(i)


# --- futures, callbacks, flush, close ----------------------------------------------------


def test_futures_and_callbacks(raw, make_producer):
    topic = topic_name("cb")
    raw.create_topic(topic, partitions=2)
    p = make_producer(linger_ms=600_000, delivery_timeout_ms=700_000)
    seen: list[tuple[str, object]] = []
    lock = threading.Lock()

    def on_ok(tag: str, md: RecordMetadata) -> None:
        with lock:
            seen.append((tag, md.offset))

    futures = []
    for i in range(20):
        f = p.send(topic, value=b"%d" % i, partition=0)
        f.add_callback(on_ok, f"ok{i}")
        f.add_errback(lambda e: seen.append(("err", e)))
        futures.append(f)
    assert not futures[0].is_done
    with pytest.raises(KafkaTimeoutError):
        futures[0].get(timeout=0.05)  # lingering: no result yet
    p.flush(timeout=WAIT_S)
    assert all(f.succeeded() and not f.failed() for f in futures)
    # Callbacks of one partition run in offset order.
    assert seen == [(f"ok{i}", i) for i in range(20)]
    late: list[RecordMetadata] = []
    futures[3].add_callback(late.append)  # already done: runs at once
    assert late == [futures[3].value] and late[0].offset == 3


def test_callback_that_raises_does_not_break_the_producer(raw, make_producer):
    topic = topic_name("cb-raise")
    raw.create_topic(topic)
    p = make_producer()
    f = p.send(topic, value=b"a")
    f.add_callback(lambda md: 1 / 0)
    assert f.get(timeout=WAIT_S).offset == 0
    assert p.send(topic, value=b"b").get(timeout=WAIT_S).offset == 1


def test_flush_sends_lingering_records(raw, make_producer):
    topic = topic_name("flush")
    raw.create_topic(topic)
    p = make_producer(linger_ms=600_000, delivery_timeout_ms=700_000)
    futures = [p.send(topic, value=b"%d" % i) for i in range(10)]
    time.sleep(0.2)
    assert not any(f.is_done for f in futures)  # held by linger_ms
    p.flush(timeout=WAIT_S)
    assert [f.get(timeout=0).offset for f in futures] == list(range(10))
    p.flush(timeout=WAIT_S)  # nothing pending: returns


def test_close_delivers_queued_records_then_refuses_sends(raw, make_producer):
    topic = topic_name("close")
    raw.create_topic(topic)
    p = make_producer(linger_ms=600_000, delivery_timeout_ms=700_000)
    futures = [p.send(topic, value=b"%d" % i) for i in range(25)]
    p.close(timeout=WAIT_S)
    assert [f.get(timeout=0).offset for f in futures] == list(range(25))
    assert len(raw.records(topic, 0)) == 25
    with pytest.raises(IllegalStateError):
        p.send(topic, value=b"late")
    p.close()  # twice is fine


def test_close_timeout_fails_what_was_not_delivered(raw, make_producer):
    topic = topic_name("close-timeout")
    raw.create_topic(topic)
    p = make_producer(linger_ms=0)
    lose_responses(p, 10**9)  # no answer ever arrives: records retry until closed
    futures = [p.send(topic, value=b"%d" % i) for i in range(5)]
    p.close(timeout=0.5)
    for f in futures:
        assert f.failed() and isinstance(f.exception, KafkaError)
        assert "closed" in str(f.exception)


def test_no_reachable_node(tmp_path):
    ghost = NodeProcess(tmp_path / "ghost")  # never started: nothing listens there
    p = Producer(ghost.bootstrap, max_block_ms=60_000)
    started = time.monotonic()
    # At once, naming the address (client/bootstrap_probe.py), not after max_block_ms.
    with pytest.raises(NoBrokersAvailable, match=f"cannot reach {ghost.bootstrap}: connection"):
        p.send("t", value=b"x")
    assert time.monotonic() - started < 10  # a bound, far below max_block_ms
    p.close(timeout=0)
    assert p.closed


def test_context_manager_closes(raw, shared_node):
    topic = topic_name("ctx")
    raw.create_topic(topic)
    with Producer(shared_node.bootstrap, linger_ms=600_000, delivery_timeout_ms=700_000) as p:
        f = p.send(topic, value=b"x")
    assert f.get(timeout=0).offset == 0
    assert p.closed


def test_partitions_for_and_metrics(raw, make_producer):
    topic = topic_name("meta")
    raw.create_topic(topic, partitions=5)
    p = make_producer()
    assert p.partitions_for(topic) == {0, 1, 2, 3, 4}
    p.send(topic, value=b"x", partition=4).get(timeout=WAIT_S)
    m = p.metrics()
    assert m["records_sent"] == 1 and m["records_failed"] == 0
    assert m["buffer_available_bytes"] == m["buffer_total_bytes"]
    assert m["producer_id"] >= 0


# --- errors ----------------------------------------------------------------------------


def test_unknown_topic_times_out_after_max_block_ms(make_producer):
    p = make_producer(max_block_ms=300, allow_auto_create_topics=False)
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError, match="not present in metadata"):
        p.send(topic_name("missing"), value=b"x")
    assert time.monotonic() - started < WAIT_S
    with pytest.raises(KafkaTimeoutError):
        p.partitions_for(topic_name("missing"))


def test_missing_partition_times_out(raw, make_producer):
    topic = topic_name("few")
    raw.create_topic(topic, partitions=2)
    p = make_producer(max_block_ms=300)
    with pytest.raises(KafkaTimeoutError, match="partition 7"):
        p.send(topic, value=b"x", partition=7)


def test_topic_is_auto_created_on_first_send(raw, make_producer):
    topic = topic_name("auto")
    p = make_producer()
    assert p.send(topic, value=b"x").get(timeout=WAIT_S).offset == 0
    assert [r.value for r in raw.records(topic, 0)] == [b"x"]


def test_invalid_topic_name_fails_fast(make_producer):
    p = make_producer(max_block_ms=WAIT_S * 1000)
    started = time.monotonic()
    with pytest.raises(KafkaError) as e:
        p.send("bad/name", value=b"x")
    assert not isinstance(e.value, KafkaTimeoutError), e.value
    assert time.monotonic() - started < WAIT_S


def test_record_larger_than_max_request_size_fails_its_future(raw, make_producer):
    topic = topic_name("big")
    raw.create_topic(topic)
    p = make_producer(max_request_size=10_000)
    errors: list[BaseException] = []
    f = p.send(topic, value=b"x" * 20_000)
    f.add_errback(errors.append)
    assert f.is_done and f.failed() and not f.succeeded()
    assert isinstance(f.exception, MessageTooLargeError)
    assert errors == [f.exception]
    with pytest.raises(MessageTooLargeError):
        f.get(timeout=0)
    # The producer goes on; a record that fits is delivered.
    assert p.send(topic, value=b"y" * 5000).get(timeout=WAIT_S).offset == 0
    assert len(raw.records(topic, 0)) == 1


def test_batch_the_node_refuses_fails_alone(raw, make_producer):
    """A request holding several batches is refused as a whole when one is over the
    topic's max.message.bytes; the producer resends them one by one, so only the
    oversized one fails and the others keep their order and sequences."""
    topic = topic_name("refused")
    raw.create_topic(topic, configs={"max.message.bytes": "3000"})
    p = make_producer(linger_ms=600_000, delivery_timeout_ms=700_000, batch_size=1000)
    small1 = [p.send(topic, value=b"a%02d" % i + b"." * 100) for i in range(12)]
    big = p.send(topic, value=b"B" * 5000)
    small2 = [p.send(topic, value=b"c%02d" % i + b"." * 100) for i in range(6)]
    p.flush(timeout=WAIT_S)
    assert isinstance(big.exception, error_class("MESSAGE_TOO_LARGE"))
    offsets = [f.get(timeout=0).offset for f in small1 + small2]
    assert offsets == list(range(18))
    records = raw.records(topic, 0)
    assert [r.value[:3] for r in records] == [b"a%02d" % i for i in range(12)] + [
        b"c%02d" % i for i in range(6)
    ]
    assert p.metrics()["producer_id_resets"] == 0  # nothing was written: no reset needed


def test_buffer_memory_blocks_send_then_times_out(raw, make_producer):
    topic = topic_name("memory")
    raw.create_topic(topic)
    p = make_producer(
        buffer_memory=4000,
        max_block_ms=200,
        linger_ms=600_000,
        delivery_timeout_ms=700_000,
        batch_size=100_000,
    )
    futures = []
    with pytest.raises(KafkaTimeoutError, match="buffer memory"):
        for _ in range(100):
            futures.append(p.send(topic, value=b"m" * 500))
    assert 3 <= len(futures) < 100
    p.flush(timeout=WAIT_S)  # delivering frees the memory
    again = p.send(topic, value=b"again")
    p.flush(timeout=WAIT_S)
    assert again.get(timeout=0).offset == len(futures)


def test_delivery_timeout_fails_records_when_no_node_answers(tmp_path, raw, shared_node):
    topic = topic_name("timeout")
    raw.create_topic(topic)
    p = Producer(
        shared_node.bootstrap, request_timeout_ms=300, delivery_timeout_ms=800, linger_ms=0
    )
    try:
        assert p.send(topic, value=b"ok").get(timeout=WAIT_S).offset == 0
        lost = lose_responses(p, 10_000)  # from now on no answer ever arrives
        f = p.send(topic, value=b"never acknowledged")
        with pytest.raises(KafkaTimeoutError, match="delivery_timeout_ms"):
            f.get(timeout=WAIT_S)
        assert len(lost) >= 2  # it was retried until the deadline
    finally:
        p.close(timeout=5)


def test_config_errors():
    cases = [
        dict(acks=2),
        dict(acks="most"),
        dict(acks=1, enable_idempotence=True),
        dict(acks=0, enable_idempotence=True),
        dict(retries=0, enable_idempotence=True),
        dict(max_in_flight_requests_per_connection=6, enable_idempotence=True),
        dict(max_in_flight_requests_per_connection=0),
        dict(compression_type="brotli"),
        dict(batch_size=-1),
        dict(linger_ms=10, request_timeout_ms=1000, delivery_timeout_ms=1005),
        dict(key_serializer="not callable"),
        dict(enable_idempotence="yes"),
    ]
    for kwargs in cases:
        with pytest.raises(KafkaConfigurationError):
            Producer("127.0.0.1:1", **kwargs)
    for name in ("metrics_num_samples", "metrics_sample_window_ms"):
        with pytest.raises(KafkaConfigurationError, match=name):
            Producer("127.0.0.1:1", **{name: 0})


def test_conflicting_defaults_turn_idempotence_off(shared_node):
    for kwargs, idempotent in [
        (dict(), True),
        (dict(acks="all"), True),
        (dict(acks=1), False),
        (dict(retries=0), False),
        (dict(max_in_flight_requests_per_connection=6), False),
        (dict(acks=1, enable_idempotence=False), False),
        (dict(enable_idempotence=False), False),
    ]:
        p = Producer(shared_node.bootstrap, **kwargs)
        try:
            assert p.idempotent is idempotent, kwargs
        finally:
            p.close()


def test_argument_errors(raw, make_producer):
    topic = topic_name("args")
    raw.create_topic(topic)
    p = make_producer()
    with pytest.raises(TypeError):
        p.send(topic, value="a str without a serializer")
    with pytest.raises(TypeError):
        p.send(topic, value=b"x", headers=[("k", "not bytes")])
    with pytest.raises(ValueError):
        p.send(topic, value=b"x", partition=-1)
    with pytest.raises(ValueError):
        p.send(topic, value=b"x", timestamp_ms=-5)
    with pytest.raises(ValueError):
        p.send("", value=b"x")


def test_serializers(raw, make_producer):
    topic = topic_name("ser")
    raw.create_topic(topic, partitions=3)
    p = make_producer(key_serializer=str.encode, value_serializer=lambda v: repr(v).encode())
    md = p.send(topic, value={"a": 1}, key="user-1").get(timeout=WAIT_S)
    assert md.partition == partition_for_key(b"user-1", 3)
    (record,) = raw.records(topic, md.partition)
    assert (record.key, record.value) == (b"user-1", b"{'a': 1}")


# --- idempotence: retries, lost responses, sequence errors ------------------------------


def test_lost_response_is_retried_and_written_exactly_once(raw, make_producer):
    topic = topic_name("lost")
    raw.create_topic(topic)
    p = make_producer(linger_ms=600_000, delivery_timeout_ms=700_000)
    first = p.send(topic, value=b"first")
    p.flush(timeout=WAIT_S)
    assert first.get(timeout=0).offset == 0
    lost = lose_responses(p, 1)
    futures = [p.send(topic, value=b"r%d" % i) for i in range(10)]
    p.flush(timeout=WAIT_S)
    assert len(lost) == 1, "the response of the first attempt was lost"
    assert p.metrics()["retries"] >= 1
    # The node answered the retry from its duplicate window with the original offsets.
    assert [f.get(timeout=0).offset for f in futures] == list(range(1, 11))
    values = [r.value for r in raw.records(topic, 0)]
    assert values == [b"first"] + [b"r%d" % i for i in range(10)]
    after = p.send(topic, value=b"after")
    p.flush(timeout=WAIT_S)
    assert after.get(timeout=0).offset == 11
    assert p.metrics()["producer_id_resets"] == 0


def test_lost_response_without_idempotence_duplicates(raw, make_producer):
    """The counterpart: the same lost response with acks=1 (no idempotence) writes the
    data twice, as in Kafka — which shows the test above really exercises dedup."""
    topic = topic_name("lost-plain")
    raw.create_topic(topic)
    p = make_producer(acks=1, linger_ms=600_000, delivery_timeout_ms=700_000)
    lose_responses(p, 1)
    futures = [p.send(topic, value=b"r%d" % i) for i in range(3)]
    p.flush(timeout=WAIT_S)
    assert [f.get(timeout=0).offset for f in futures] == [3, 4, 5]
    assert [r.value for r in raw.records(topic, 0)] == [b"r0", b"r1", b"r2"] * 2


def test_lost_responses_across_partitions_and_requests(raw, make_producer):
    topic = topic_name("lost-many")
    raw.create_topic(topic, partitions=4)
    p = make_producer(linger_ms=1, batch_size=400)
    lost = lose_responses(p, 5)
    futures = [p.send(topic, value=b"%04d" % i, partition=i % 4) for i in range(400)]
    results = get_all(futures)
    assert len(lost) == 5
    for partition in range(4):
        values = [r.value for r in raw.records(topic, partition)]
        assert values == [b"%04d" % i for i in range(partition, 400, 4)]
        offsets = [md.offset for md in results if md.partition == partition]
        assert offsets == list(range(100))


@pytest.mark.parametrize("error", ["OUT_OF_ORDER_SEQUENCE_NUMBER", "INVALID_PRODUCER_EPOCH"])
def test_sequence_errors_fail_the_batch_and_reset_the_producer_id(raw, make_producer, error):
    topic = topic_name("seq-err")
    raw.create_topic(topic)
    p = make_producer(linger_ms=600_000, delivery_timeout_ms=700_000)
    first = p.send(topic, value=b"first")
    p.flush(timeout=WAIT_S)
    assert first.get(timeout=0).offset == 0
    pid = p.metrics()["producer_id"]
    # Someone else writes under our producer id: with our next sequence but another
    # length (so it is no duplicate), or with a newer epoch (which fences ours).
    intruder = build_batch(
        [NewRecord(b"x"), NewRecord(b"y"), NewRecord(b"z")],
        producer_id=int(pid),
        producer_epoch=0 if error == "OUT_OF_ORDER_SEQUENCE_NUMBER" else 1,
        base_sequence=1 if error == "OUT_OF_ORDER_SEQUENCE_NUMBER" else 0,
    )
    assert raw.produce_raw(topic, 0, intruder).error_code == 0
    doomed = [p.send(topic, value=b"d%d" % i) for i in range(2)]
    p.flush(timeout=WAIT_S)
    for f in doomed:
        assert isinstance(f.exception, error_class(error)), f.exception
    # A new producer id: later records go through.
    future = p.send(topic, value=b"after")
    p.flush(timeout=WAIT_S)
    assert future.get(timeout=0).offset == 4
    m = p.metrics()
    assert m["producer_id_resets"] == 1 and m["producer_id"] != pid
    batches = raw.batches(topic, 0)
    assert [r.value for _, rs in batches for r in rs] == [b"first", b"x", b"y", b"z", b"after"]
    assert (batches[-1][0].producer_id, batches[-1][0].base_sequence) == (m["producer_id"], 0)


def test_a_batch_past_sequence_zero_from_an_unknown_producer_fails_cleanly(raw, make_producer):
    """The node refuses it with UNKNOWN_PRODUCER_ID (an earlier batch may be missing: docs/
    replication-rules.md); the records fail with that error, nothing is written, and the
    producer takes a fresh id so later sends go through from sequence 0."""
    topic = topic_name("unknown-pid")
    raw.create_topic(topic)
    p = make_producer(linger_ms=600_000, delivery_timeout_ms=700_000)
    sender = p._sender
    real_init = sender._init_producer_id

    def init_near_the_end() -> bool:
        ok = real_init()
        sender._next_seq[TopicPartition(topic, 0)] = 2**31 - 3
        sender._init_producer_id = real_init
        return ok

    sender._init_producer_id = init_near_the_end
    first = [p.send(topic, value=b"a%d" % i) for i in range(5)]
    p.flush(timeout=WAIT_S)
    for f in first:
        assert isinstance(f.exception, error_class("UNKNOWN_PRODUCER_ID")), f.exception
    assert raw.batches(topic, 0) == []
    second = [p.send(topic, value=b"b%d" % i) for i in range(2)]
    p.flush(timeout=WAIT_S)
    assert [f.get(timeout=0).offset for f in second] == [0, 1]
    [(header, records)] = raw.batches(topic, 0)
    assert header.base_sequence == 0 and header.producer_id == p.metrics()["producer_id"]
    assert [r.value for r in records] == [b"b0", b"b1"]


def hold_first_refusal(producer: Producer, tp: tuple[str, int], error: str, hold_s: float = 2.0):
    """An in-process proxy on the Producer's transport (tests/kafka/produce_hold_proxy.py
    does the same on the Kafka wire): the first Produce naming `tp` is answered with
    `error` without reaching the node, and that answer is held until the node has answered
    the next Produce for `tp` (or `hold_s` passed). Returns what it saw."""
    sender = producer._sender
    real = sender.start_produce
    seen = {"refused": 0, "released_after_next_answer": None}
    held: list[concurrent.futures.Future] = []
    lock = threading.Lock()

    def names(request: pb.ProduceRequest) -> set[tuple[str, int]]:
        return {(t.name, p.partition) for t in request.topics for p in t.partitions}

    def release(after_next: bool) -> None:
        with lock:
            if not held or held[0].done():
                return
            seen["released_after_next_answer"] = after_next
            future = held[0]
        future.set_result(refusal)

    def start_produce(stub, request, timeout_s) -> object:
        nonlocal refusal
        with lock:
            first = tp in names(request) and seen["refused"] == 0
            if first:
                seen["refused"] = 1
                refusal = pb.ProduceResponse()
                for t in request.topics:
                    tr = refusal.topics.add(name=t.name)
                    for part in t.partitions:
                        code = errors_pb2.ErrorCode.Value(error)
                        tr.partitions.add(partition=part.partition, error_code=code, base_offset=-1)
                future: concurrent.futures.Future = concurrent.futures.Future()
                held.append(future)
                threading.Timer(hold_s, release, args=(False,)).start()
                return future
        answer = real(stub, request, timeout_s)
        if tp in names(request) and held:
            answer.add_done_callback(lambda _f: release(True))
        return answer

    refusal = pb.ProduceResponse()
    sender.start_produce = start_produce  # type: ignore[method-assign]
    return seen


@pytest.mark.parametrize("error", ["NOT_LEADER_OR_FOLLOWER", "UNKNOWN_TOPIC_OR_PARTITION"])
def test_no_record_reported_sent_is_missing_after_a_refused_first_batch(
    raw, make_producer, error
):
    """tests/kafka/test_implicit_ack.py's check for seglog's own Producer: every record
    whose future succeeded is in the log exactly once."""
    topic = topic_name("implicit-ack")
    raw.create_topic(topic)
    p = make_producer(linger_ms=0, retry_backoff_ms=50)
    seen = hold_first_refusal(p, (topic, 0), error)
    futures = []
    for i in range(60):
        futures.append((b"v%03d" % i, p.send(topic, value=b"v%03d" % i, partition=0)))
        time.sleep(0.002)
    p.flush(timeout=WAIT_S)
    assert seen["refused"] == 1
    delivered = [v for v, f in futures if f.exception is None]
    in_log = [r.value for r in raw.records(topic, 0)]
    assert [v for v in delivered if in_log.count(v) != 1] == []
    assert len(delivered) == 60, [f.exception for _, f in futures if f.exception is not None]


# --- a node restart ---------------------------------------------------------------------


def test_producer_survives_a_node_restart(node: NodeProcess):
    raw = Raw(node.bootstrap)
    raw.create_topic("restart", partitions=2)
    p = Producer(node.bootstrap, linger_ms=2, retry_backoff_ms=50)
    futures = []
    stop = threading.Event()
    errors: list[BaseException] = []

    def keep_sending() -> None:
        i = 0
        try:
            while not stop.is_set() and i < 3000:
                futures.append(p.send("restart", value=b"%05d" % i, key=b"k%d" % (i % 5)))
                i += 1
                time.sleep(0.002)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    sender = threading.Thread(target=keep_sending)
    try:
        sender.start()
        deadline = time.monotonic() + WAIT_S
        while len(futures) < 200 and time.monotonic() < deadline:
            time.sleep(0.01)
        node.stop()  # SIGTERM: a clean shutdown while records keep coming
        time.sleep(0.5)
        node.start()
        time.sleep(0.5)
        stop.set()
        sender.join(WAIT_S)
        p.flush(timeout=WAIT_S * 2)
        assert not errors
        results = get_all(futures, timeout=0)
        sent = len(futures)
        values = sorted(r.value for partition in (0, 1) for r in raw.records("restart", partition))
        assert values == [b"%05d" % i for i in range(sent)]  # every record, exactly once
        for partition in (0, 1):
            offsets = sorted(md.offset for md in results if md.partition == partition)
            assert offsets == list(range(len(offsets)))
        assert p.metrics()["records_failed"] == 0
    finally:
        stop.set()
        p.close(timeout=10)
        raw.close()
