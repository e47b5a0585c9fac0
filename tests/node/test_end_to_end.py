"""End to end against real node processes on loopback: the Producer and the Consumer
through a node and back, ListOffsets by time at segment boundaries, restarts after
SIGTERM and SIGKILL, `seglog dump-log` on the node's files, and bad input over the
wire.

Every wait is bounded; nothing asserts on timing. Record timestamps are recent and
every topic has retention.ms=-1, so the retention task never removes data here.
"""

from __future__ import annotations

import hashlib
import json
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from seglog.client.admin import Admin, NewTopic
from seglog.client.consumer import Consumer, ConsumerRecord, TopicPartition
from seglog.client.future import FutureRecordMetadata
from seglog.client.producer import Producer
from seglog.harness.node_process import NodeProcess
from seglog.proto import client_pb2 as pb
from seglog.proto import client_pb2_grpc, errors_pb2
from seglog.storage.record_batch import CRC_OFFSET, HEADER_SIZE, NewRecord, build_batch

E = errors_pb2.ErrorCode
# Recent (ten minutes ago, whole seconds): retention counts from record timestamps.
T0 = (int(time.time()) - 600) * 1000
NO_RETENTION = {"retention.ms": "-1", "retention.bytes": "-1"}


@dataclass(frozen=True, slots=True)
class Sent:
    """One record as produced: what the consumer must give back."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int

    @staticmethod
    def of(r: ConsumerRecord) -> Sent:
        return Sent(r.key, r.value, tuple(r.headers), r.timestamp)


def make_record(i: int, tag: str = "r") -> Sent:
    """Deterministic, varied records: null keys and values, empty and null header
    values, records without headers, timestamps slightly out of order."""
    key = None if i % 97 == 0 else f"{tag}-key-{i}".encode()
    value = None if i % 89 == 0 else f"{tag}-value-{i}-".encode() + bytes([i % 251]) * (i % 61)
    headers: tuple[tuple[str, bytes | None], ...]
    if i % 5 == 0:
        headers = ()
    elif i % 5 == 1:
        headers = (("seq", str(i).encode()), ("empty", b""), ("null", None))
    else:
        headers = (("seq", str(i).encode()), ("seq", b"dup-key"))
    timestamp = T0 + i - (i % 7) * 3
    return Sent(key, value, headers, timestamp)


def send(producer: Producer, topic: str, r: Sent, partition: int | None) -> FutureRecordMetadata:
    return producer.send(
        topic,
        value=r.value,
        key=r.key,
        headers=list(r.headers),
        partition=partition,
        timestamp_ms=r.timestamp,
    )


def create_topic(bootstrap: str, name: str, partitions: int, **configs: str) -> None:
    with Admin(bootstrap) as admin:
        admin.create_topics([NewTopic(name, partitions, 1, {**NO_RETENTION, **configs})])


def consume(
    bootstrap: str,
    topic: str,
    counts: dict[int, int],
    timeout_s: float = 60.0,
) -> dict[int, list[ConsumerRecord]]:
    """Everything from offset 0 of each partition until `counts` records arrived per
    partition (bounded by timeout_s), then one more short poll to catch extras."""
    got: dict[int, list[ConsumerRecord]] = {p: [] for p in counts}
    consumer = Consumer(
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        max_poll_records=10_000,
        fetch_max_wait_ms=100,
    )
    try:
        consumer.assign([TopicPartition(topic, p) for p in counts])
        deadline = time.monotonic() + timeout_s
        while any(len(got[p]) < n for p, n in counts.items()):
            if time.monotonic() > deadline:
                have = {p: len(v) for p, v in got.items()}
                raise AssertionError(f"timed out: have {have}, want {counts}")
            for tp, records in consumer.poll(500).items():
                got[tp.partition].extend(records)
        for tp, records in consumer.poll(300).items():
            got[tp.partition].extend(records)
    finally:
        consumer.close()
    return got


def assert_partition(p: int, expected: Sequence[Sent], got: Sequence[ConsumerRecord]) -> None:
    """Offsets 0..n-1 in order, and each record identical to what was produced."""
    assert len(got) == len(expected), (p, len(got), len(expected))
    for i, (want, r) in enumerate(zip(expected, got, strict=True)):
        if r.offset != i or Sent.of(r) != want:
            raise AssertionError(f"partition {p} offset {i}: want {want}, got {r}")


def stub_for(node: NodeProcess) -> tuple[grpc.Channel, client_pb2_grpc.SegLogStub]:
    channel = grpc.insecure_channel(
        node.bootstrap, options=[("grpc.max_send_message_length", 64 << 20)]
    )
    return channel, client_pb2_grpc.SegLogStub(channel)


def list_offset(stub: client_pb2_grpc.SegLogStub, topic: str, p: int, ts: int) -> int:
    return list_offset_answer(stub, topic, p, ts).offset


def list_offset_answer(
    stub: client_pb2_grpc.SegLogStub, topic: str, p: int, ts: int
) -> pb.ListOffsetsPartitionResponse:
    response = stub.ListOffsets(
        pb.ListOffsetsRequest(
            replica_id=-1,
            topics=[
                pb.ListOffsetsTopic(
                    name=topic,
                    partitions=[
                        pb.ListOffsetsPartition(partition=p, current_leader_epoch=-1, timestamp=ts)
                    ],
                )
            ],
        ),
        timeout=10,
    )
    answer = response.topics[0].partitions[0]
    assert answer.error_code == E.NONE, answer
    return answer


def partition_dir(node: NodeProcess, topic: str, p: int) -> Path:
    found = [d / f"{topic}-{p}" for d in node.log_dirs if (d / f"{topic}-{p}").is_dir()]
    assert len(found) == 1, (topic, p, found)
    return found[0]


def segment_bases(node: NodeProcess, topic: str, p: int) -> list[int]:
    return sorted(int(f.stem) for f in partition_dir(node, topic, p).glob("*.log"))


def last_logs_loaded(node: NodeProcess) -> dict[str, object]:
    """The node's most recent `logs_loaded` event (its structured log, one JSON a line)."""
    events = [
        json.loads(line)
        for line in node.log_path.read_text(errors="replace").splitlines()
        if '"logs_loaded"' in line
    ]
    assert events, node.tail()
    return events[-1]


def check_offsets_for_times(
    node: NodeProcess, topic: str, timestamps: dict[int, list[int]], label: str
) -> None:
    """Consumer.offsets_for_times at segment boundaries against the brute-force answer."""
    consumer = Consumer(bootstrap_servers=node.bootstrap)
    try:
        for p, series in timestamps.items():
            bases = segment_bases(node, topic, p)
            tp = TopicPartition(topic, p)
            for target in sorted(boundary_targets(bases, series)):
                found = consumer.offsets_for_times({tp: target})[tp]
                want = brute_force(series, target)
                got = None if found is None else (found.offset, found.timestamp)
                assert got == want, (label, p, target, bases)
    finally:
        consumer.close()
    channel, stub = stub_for(node)
    with channel:
        for p, series in timestamps.items():
            # MAX_TIMESTAMP (-3): the first record holding the largest timestamp.
            answer = list_offset_answer(stub, topic, p, -3)
            best = max(series)
            assert (answer.offset, answer.timestamp) == (series.index(best), best), (label, p)
            assert list_offset(stub, topic, p, -2) == 0
            assert list_offset(stub, topic, p, -1) == len(series)


# --- 1. 100k records through the Producer and back through the Consumer -----------------


@pytest.mark.timeout(170)
@pytest.mark.parametrize("acks", [1, 0])
def test_100k_records_round_trip(node: NodeProcess, acks: int) -> None:
    topic, partitions, n = f"e2e-acks{acks}", 8, 100_000
    create_topic(node.bootstrap, topic, partitions)
    expected: dict[int, list[Sent]] = {p: [] for p in range(partitions)}
    futures: list[tuple[int, FutureRecordMetadata]] = []
    with Producer(node.bootstrap, acks=acks, linger_ms=5) as producer:
        for i in range(n):
            r = make_record(i, f"a{acks}")
            # Null keys go to an explicit partition; keyed records use the partitioner.
            futures.append((i, send(producer, topic, r, i % partitions if r.key is None else None)))
        producer.flush(timeout=120)  # returns: everything has a result
        for i, f in futures:
            assert f.is_done and f.succeeded(), (i, f.exception)
            md = f.value
            assert md is not None
            expected[md.partition].append(make_record(i, f"a{acks}"))
            if acks == 0:
                assert md.offset == -1
            else:
                assert md.offset == len(expected[md.partition]) - 1, (i, md)
    assert all(expected.values()), {p: len(v) for p, v in expected.items()}
    got = consume(node.bootstrap, topic, {p: len(v) for p, v in expected.items()}, 120)
    for p in range(partitions):
        assert_partition(p, expected[p], got[p])
    channel, stub = stub_for(node)
    with channel:
        for p in range(partitions):
            assert list_offset(stub, topic, p, -1) == len(expected[p])


# --- 2. offsets_for_times at segment boundaries ------------------------------------------


def brute_force(timestamps: Sequence[int], target: int) -> tuple[int, int] | None:
    """Kafka's answer: the first offset whose timestamp is >= target."""
    for offset, ts in enumerate(timestamps):
        if ts >= target:
            return offset, ts
    return None


def boundary_targets(bases: list[int], timestamps: Sequence[int]) -> set[int]:
    """First/last/min/max timestamps (and their neighbours) of several segments."""
    n = len(timestamps)
    bounds = [*bases, n]
    picks = {0, 1, len(bases) // 2, len(bases) - 2, len(bases) - 1}
    targets = {0, max(timestamps), max(timestamps) + 1, min(timestamps) - 1}
    for k in sorted(i for i in picks if 0 <= i < len(bases)):
        lo, hi = bounds[k], bounds[k + 1]
        if lo >= hi:
            continue
        seg = timestamps[lo:hi]
        for ts in (seg[0], seg[-1], min(seg), max(seg)):
            targets.update((ts - 1, ts, ts + 1))
    return targets


@pytest.mark.timeout(120)
def test_offsets_for_times_at_segment_boundaries(tmp_path: Path) -> None:
    topic, n = "times", 1500
    node = NodeProcess(tmp_path / "cluster").start()
    try:
        create_topic(node.bootstrap, topic, 2, **{"segment.bytes": "2048"})
        # Partition 0: non-decreasing with ties (runs of 3); partition 1: out of order.
        timestamps = {
            0: [T0 + (i // 3) * 10 for i in range(n)],
            1: [T0 + i * 10 + ((i * 7919) % 13 - 6) * 15 for i in range(n)],
        }
        with Producer(node.bootstrap, acks=1, batch_size=400, linger_ms=0) as producer:
            futures = [
                producer.send(topic, value=b"x" * 20, key=b"%d" % i, partition=p, timestamp_ms=ts)
                for p, series in timestamps.items()
                for i, ts in enumerate(series)
            ]
            producer.flush(timeout=60)
        assert all(f.succeeded() for f in futures)

        for p in timestamps:
            assert len(segment_bases(node, topic, p)) >= 10  # many segments rolled
        check_offsets_for_times(node, topic, timestamps, "running")
        assert node.stop() == 0
        node.start()  # indexes were trimmed at close and reopened
        check_offsets_for_times(node, topic, timestamps, "after restart")
    finally:
        node.stop()


# --- 3. restarts: SIGTERM and SIGKILL ----------------------------------------------------


def produce_all(
    bootstrap: str, topic: str, records: Sequence[Sent], start: dict[int, int] | None = None
) -> dict[int, list[Sent]]:
    """acks=1, flushed: every record acknowledged at consecutive offsets from `start`
    (default 0) of its partition; the per-partition lists in offset order."""
    by_partition: dict[int, list[tuple[int, Sent]]] = {}
    with Producer(bootstrap, acks=1) as producer:
        futures = [(r, send(producer, topic, r, None if r.key else 0)) for r in records]
        producer.flush(timeout=60)
    for r, f in futures:
        assert f.succeeded(), f.exception
        md = f.value
        assert md is not None
        by_partition.setdefault(md.partition, []).append((md.offset, r))
    result = {}
    for p, pairs in by_partition.items():
        pairs.sort(key=lambda x: x[0])
        first = (start or {}).get(p, 0)
        assert [o for o, _ in pairs] == list(range(first, first + len(pairs))), p
        result[p] = [r for _, r in pairs]
    return result


@pytest.mark.timeout(120)
def test_restart_after_sigterm_keeps_everything(tmp_path: Path) -> None:
    topic, partitions = "restart-term", 4
    node = NodeProcess(tmp_path / "cluster").start()
    try:
        create_topic(node.bootstrap, topic, partitions, **{"segment.bytes": "65536"})
        expected = produce_all(node.bootstrap, topic, [make_record(i, "t") for i in range(20_000)])
        assert node.stop(signal.SIGTERM) == 0
        assert all((d / ".kafka_cleanshutdown").is_file() for d in node.log_dirs)
        node.start()
        assert last_logs_loaded(node)["clean_shutdown"] is True
        got = consume(node.bootstrap, topic, {p: len(v) for p, v in expected.items()})
        for p in expected:
            assert_partition(p, expected[p], got[p])
        # Appends continue at the old log end offsets.
        ends = {p: len(v) for p, v in expected.items()}
        more = produce_all(
            node.bootstrap, topic, [make_record(i, "t2") for i in range(2_000)], ends
        )
        for p, records in more.items():
            expected.setdefault(p, []).extend(records)
        got = consume(node.bootstrap, topic, {p: len(v) for p, v in expected.items()})
        for p in expected:
            assert_partition(p, expected[p], got[p])
    finally:
        node.stop()


@pytest.mark.timeout(150)
def test_restart_after_sigkill_keeps_acknowledged_records(tmp_path: Path) -> None:
    topic, partitions = "restart-kill", 4
    node = NodeProcess(tmp_path / "cluster").start()
    try:
        create_topic(node.bootstrap, topic, partitions, **{"segment.bytes": "65536"})
        first = produce_all(node.bootstrap, topic, [make_record(i, "k") for i in range(10_000)])

        # Then keep producing while the node is killed: what was acknowledged must survive.
        by_key: dict[bytes, Sent] = {}
        acked: dict[tuple[int, int], Sent] = {}
        acked_lock = threading.Lock()
        stop = threading.Event()
        producer = Producer(
            node.bootstrap, acks=1, request_timeout_ms=3000, delivery_timeout_ms=5000
        )

        def on_ack(r: Sent) -> Callable[[object], None]:
            def done(md: object) -> None:
                with acked_lock:
                    acked[(md.partition, md.offset)] = r  # type: ignore[attr-defined]

            return done

        def keep_sending() -> None:
            i = 0
            while not stop.is_set() and i < 500_000:
                r = make_record(i, "live")
                if r.key is None:  # keys identify records below
                    r = Sent(f"live-nullkey-{i}".encode(), r.value, r.headers, r.timestamp)
                by_key[r.key] = r  # type: ignore[index]
                send(producer, topic, r, None).add_callback(on_ack(r))
                i += 1
                while not stop.is_set() and i - len(acked) > 20_000:
                    time.sleep(0.005)  # bounded backlog: send() never blocks for memory

        sender = threading.Thread(target=keep_sending, daemon=True)
        sender.start()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with acked_lock:
                if len(acked) >= 5_000:
                    break
            time.sleep(0.01)
        assert node.kill() == -signal.SIGKILL
        stop.set()
        sender.join(30)
        assert not sender.is_alive()
        producer.close(timeout=3)  # the node is down: the rest fails
        with acked_lock:
            survivors = dict(acked)
        assert len(survivors) >= 5_000

        assert len(by_key) > len(survivors)  # killed mid-stream: some never acknowledged
        node.start()
        assert last_logs_loaded(node)["clean_shutdown"] is False  # recovery ran
        channel, stub = stub_for(node)
        with channel:
            ends = {p: list_offset(stub, topic, p, -1) for p in range(partitions)}
        got = consume(node.bootstrap, topic, ends)
        for p in range(partitions):
            records = got[p]
            assert [r.offset for r in records] == list(range(ends[p])), p
            head = first.get(p, [])
            assert_partition(p, head, records[: len(head)])
            keys = [r.key for r in records[len(head) :]]
            assert len(keys) == len(set(keys)), f"partition {p}: duplicates"
            for r in records[len(head) :]:
                # Unacknowledged records may or may not be there, but only as sent.
                assert r.key in by_key and Sent.of(r) == by_key[r.key], (p, r)
        for (p, offset), want in survivors.items():
            assert offset < ends[p], (p, offset, ends[p])
            assert Sent.of(got[p][offset]) == want, (p, offset)
        # The time indexes rebuilt by recovery answer as the data says.
        series = {p: [r.timestamp for r in got[p]] for p in range(partitions)}
        check_offsets_for_times(node, topic, series, "after SIGKILL")
    finally:
        node.stop()


# --- 4. seglog dump-log on the node's files ----------------------------------------------

RECORD_LINE = re.compile(
    r"^\| offset: (\d+) CreateTime: (\d+) keySize: (-?\d+) valueSize: (-?\d+) "
    r"sequence: -1 headerKeys: \[([^\]]*)\] key: (.*) payload: (.*)$"
)


def dump_log(files: Sequence[str], *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "seglog.cli", "dump-log", *options, "--files", *files],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.timeout(120)
def test_dump_log_reads_the_nodes_files(tmp_path: Path) -> None:
    topic, n = "dumped", 600
    node = NodeProcess(tmp_path / "cluster").start()
    try:
        create_topic(node.bootstrap, topic, 1, **{"segment.bytes": "4096"})
        records = [
            Sent(
                f"dk-{i}".encode(),
                f"dump-value-{i}".encode(),
                (("h1", b"a"), ("h2", None)) if i % 2 else (),
                T0 + i,
            )
            for i in range(n)
        ]
        with Producer(node.bootstrap, acks=1, batch_size=500, linger_ms=0) as producer:
            futures = [send(producer, topic, r, 0) for r in records]
            producer.flush(timeout=60)
        assert [f.value.offset for f in futures if f.value] == list(range(n))
    finally:
        assert node.stop() == 0
    pdir = partition_dir(node, topic, 0)
    files = sorted(pdir.iterdir())
    suffixes = {f.suffix for f in files}
    assert {".log", ".index", ".timeindex", ".snapshot"} <= suffixes, files
    assert (pdir / "leader-epoch-checkpoint").is_file()
    assert len([f for f in files if f.suffix == ".log"]) >= 3  # several segments
    wanted = [
        str(f)
        for f in files
        if f.suffix in (".log", ".index", ".timeindex", ".snapshot")
        or f.name == "leader-epoch-checkpoint"
    ]

    proc = dump_log(wanted, "--print-data-log")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    seen = {}
    for line in proc.stdout.splitlines():
        m = RECORD_LINE.match(line)
        if m:
            offset = int(m.group(1))
            assert offset not in seen, offset
            seen[offset] = (int(m.group(2)), m.group(5), m.group(6), m.group(7))
    assert sorted(seen) == list(range(n))
    for i, r in enumerate(records):
        header_keys = ",".join(k for k, _ in r.headers)
        assert r.key is not None and r.value is not None
        assert seen[i] == (r.timestamp, header_keys, r.key.decode(), r.value.decode()), i
    assert "leader-epoch-checkpoint" in proc.stdout
    assert "Mismatches" not in proc.stdout + proc.stderr

    proc = dump_log(wanted, "--verify-index-only")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    text = proc.stdout + proc.stderr
    for problem in ("Mismatches", "mismatch", "not found in the log", "Non-consecutive"):
        assert problem not in text, text[-2000:]


@pytest.mark.timeout(120)
def test_dump_log_verifies_indexes_of_multi_batch_appends(tmp_path: Path) -> None:
    topic = "multi-batch"
    node = NodeProcess(tmp_path / "cluster").start()
    try:
        create_topic(node.bootstrap, topic, 1)
        channel, stub = stub_for(node)
        with channel:
            offset = 0
            for request in range(6):
                # Four ~1.6 KiB batches in one request, as the Producer sends up to five:
                # every chunk after the first 4 KiB gets an index entry.
                batches = b"".join(
                    build_batch(
                        [
                            NewRecord(b"m" * 300, f"{request}-{b}-{i}".encode(), T0 + offset + i)
                            for i in range(5)
                        ]
                    )
                    for b in range(4)
                )
                answer = produce(stub, 0, batches, topic=topic).topics[0].partitions[0]
                assert (answer.error_code, answer.base_offset) == (E.NONE, offset), answer
                offset += 20
    finally:
        assert node.stop() == 0
    pdir = partition_dir(node, topic, 0)
    files = [str(f) for f in sorted(pdir.iterdir()) if f.suffix in (".log", ".index", ".timeindex")]
    # The log itself is fine and reads back whole.
    proc = dump_log(files, "--print-data-log")
    assert sum(1 for line in proc.stdout.splitlines() if line.startswith("| offset:")) == 120
    # The indexes are valid for lookups (entry offset is in the chunk at the position)...
    proc = dump_log(files, "--verify-index-only")
    assert proc.returncode == 0, proc.stdout[-1500:] + proc.stderr[-1500:]


# --- 5. bad input over the wire ----------------------------------------------------------

BAD_TOPIC = "bad-input"
BAD_PARTITIONS = 2
MAX_MESSAGE_BYTES = 4096


@pytest.fixture(scope="module")
def bad_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NodeProcess]:
    node = NodeProcess(tmp_path_factory.mktemp("bad") / "cluster").start()
    try:
        create_topic(
            node.bootstrap,
            BAD_TOPIC,
            BAD_PARTITIONS,
            **{"max.message.bytes": str(MAX_MESSAGE_BYTES)},
        )
        channel, stub = stub_for(node)
        with channel:
            for p in range(BAD_PARTITIONS):
                for b in range(3):
                    response = produce(stub, p, good_batch(b * 10), acks=1)
                    assert response.topics[0].partitions[0].error_code == E.NONE, response
        yield node
    finally:
        node.stop()


def good_batch(start: int = 0, count: int = 10, value_size: int = 20) -> bytes:
    return build_batch(
        [
            NewRecord(b"v" * value_size, f"k{start + i}".encode(), T0 + start + i)
            for i in range(count)
        ]
    )


def batch_of_size(size: int) -> bytes:
    """One single-record batch of exactly `size` bytes (the value length is searched)."""
    for value_size in range(size - HEADER_SIZE, -1, -1):
        batch = build_batch([NewRecord(b"v" * value_size, b"k", T0)])
        if len(batch) == size:
            return batch
    raise ValueError(f"no single-record batch is {size} bytes")


def produce(
    stub: client_pb2_grpc.SegLogStub,
    partition: int,
    records: bytes,
    acks: int = 1,
    topic: str = BAD_TOPIC,
) -> pb.ProduceResponse:
    return stub.Produce(
        pb.ProduceRequest(
            acks=acks,
            timeout_ms=5000,
            topics=[
                pb.TopicProduceData(
                    name=topic,
                    partitions=[pb.PartitionProduceData(partition=partition, records=records)],
                )
            ],
        ),
        timeout=10,
    )


def flip(data: bytes, at: int) -> bytes:
    buf = bytearray(data)
    buf[at] ^= 0xFF
    return bytes(buf)


def log_state(node: NodeProcess, stub: client_pb2_grpc.SegLogStub) -> dict[int, object]:
    """Per partition: log start and end offsets by ListOffsets, and the .log bytes."""
    state: dict[int, object] = {}
    for p in range(BAD_PARTITIONS):
        digest = hashlib.sha256()
        for f in sorted(partition_dir(node, BAD_TOPIC, p).glob("*.log")):
            digest.update(f.name.encode())
            digest.update(f.read_bytes())
        state[p] = (
            list_offset(stub, BAD_TOPIC, p, -2),
            list_offset(stub, BAD_TOPIC, p, -1),
            digest.hexdigest(),
        )
    return state


def serving(node: NodeProcess) -> bool:
    with grpc.insecure_channel(node.bootstrap) as channel:
        r = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=5
        )
        return r.status == health_pb2.HealthCheckResponse.SERVING


def _garbage() -> bytes:
    return bytes((i * 131 + 7) % 256 for i in range(300))


def _valid_then_corrupt() -> bytes:
    return good_batch(100) + flip(good_batch(200), CRC_OFFSET)


BAD_PRODUCE: dict[str, tuple[Callable[[], tuple[int, bytes, int, str]], int]] = {
    # name: (lambda -> (partition, records, acks, topic), expected error)
    "crc_flipped": (lambda: (0, flip(good_batch(), CRC_OFFSET), 1, BAD_TOPIC), E.CORRUPT_MESSAGE),
    "payload_byte_flipped": (
        lambda: (0, flip(good_batch(), HEADER_SIZE + 5), 1, BAD_TOPIC),
        E.CORRUPT_MESSAGE,
    ),
    "valid_batch_then_corrupt_batch": (
        lambda: (1, _valid_then_corrupt(), 1, BAD_TOPIC),
        E.CORRUPT_MESSAGE,
    ),
    "truncated_batch": (lambda: (0, good_batch()[:-7], 1, BAD_TOPIC), E.CORRUPT_MESSAGE),
    "garbage_bytes": (lambda: (0, _garbage(), 1, BAD_TOPIC), E.CORRUPT_MESSAGE),
    "short_garbage": (lambda: (1, b"\xff" * 9, 1, BAD_TOPIC), E.CORRUPT_MESSAGE),
    "crc_flipped_acks0": (
        lambda: (1, flip(good_batch(), CRC_OFFSET), 0, BAD_TOPIC),
        E.CORRUPT_MESSAGE,
    ),
    "unknown_topic": (lambda: (0, good_batch(), 1, "no-such-topic"), E.UNKNOWN_TOPIC_OR_PARTITION),
    "unknown_partition": (lambda: (7, good_batch(), 1, BAD_TOPIC), E.UNKNOWN_TOPIC_OR_PARTITION),
    "oversize_batch": (
        lambda: (0, good_batch(count=4, value_size=MAX_MESSAGE_BYTES), 1, BAD_TOPIC),
        E.MESSAGE_TOO_LARGE,
    ),
    "oversize_by_one_byte": (
        lambda: (1, batch_of_size(MAX_MESSAGE_BYTES + 1), 1, BAD_TOPIC),
        E.MESSAGE_TOO_LARGE,
    ),
    "acks_2": (lambda: (0, good_batch(), 2, BAD_TOPIC), E.INVALID_REQUIRED_ACKS),
    "base_offset_not_zero": (
        lambda: (0, build_batch([NewRecord(b"v", b"k", T0)], base_offset=5), 1, BAD_TOPIC),
        E.INVALID_RECORD,
    ),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", sorted(BAD_PRODUCE))
def test_bad_produce_is_refused_and_changes_nothing(bad_node: NodeProcess, case: str) -> None:
    make, expected_error = BAD_PRODUCE[case]
    partition, records, acks, topic = make()
    channel, stub = stub_for(bad_node)
    with channel:
        before = log_state(bad_node, stub)
        response = produce(stub, partition, records, acks=acks, topic=topic)
        answer = response.topics[0].partitions[0]
        assert (answer.partition, answer.error_code) == (partition, expected_error), answer
        assert answer.error_message
        assert serving(bad_node)
        assert log_state(bad_node, stub) == before
        assert not any((d / "no-such-topic-0").exists() for d in bad_node.log_dirs)
        # The partition still takes good data afterwards (and that is the only change).
        if topic == BAD_TOPIC and partition < BAD_PARTITIONS:
            ok = produce(stub, partition, good_batch(500), acks=1).topics[0].partitions[0]
            assert ok.error_code == E.NONE, ok
            assert ok.base_offset == before[partition][1]  # type: ignore[index]


@pytest.mark.timeout(60)
def test_one_bad_partition_does_not_fail_the_others_in_its_request(bad_node: NodeProcess) -> None:
    channel, stub = stub_for(bad_node)
    with channel:
        before = log_state(bad_node, stub)
        response = stub.Produce(
            pb.ProduceRequest(
                acks=1,
                timeout_ms=5000,
                topics=[
                    pb.TopicProduceData(
                        name=BAD_TOPIC,
                        partitions=[
                            pb.PartitionProduceData(
                                partition=0, records=flip(good_batch(), CRC_OFFSET)
                            ),
                            pb.PartitionProduceData(partition=1, records=good_batch(700)),
                        ],
                    ),
                    pb.TopicProduceData(
                        name="no-such-topic",
                        partitions=[pb.PartitionProduceData(partition=0, records=good_batch())],
                    ),
                ],
            ),
            timeout=10,
        )
        answers = {(t.name, p.partition): p for t in response.topics for p in t.partitions}
        assert answers[(BAD_TOPIC, 0)].error_code == E.CORRUPT_MESSAGE
        assert answers[(BAD_TOPIC, 1)].error_code == E.NONE
        assert answers[(BAD_TOPIC, 1)].base_offset == before[1][1]  # type: ignore[index]
        assert answers[("no-such-topic", 0)].error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        after = log_state(bad_node, stub)
        assert after[0] == before[0]
        assert after[1][1] == before[1][1] + 10  # type: ignore[index]


@pytest.mark.timeout(60)
def test_batch_of_exactly_max_message_bytes_is_accepted(bad_node: NodeProcess) -> None:
    channel, stub = stub_for(bad_node)
    with channel:
        before = list_offset(stub, BAD_TOPIC, 1, -1)
        answer = produce(stub, 1, batch_of_size(MAX_MESSAGE_BYTES)).topics[0].partitions[0]
        assert (answer.error_code, answer.base_offset) == (E.NONE, before), answer
        assert list_offset(stub, BAD_TOPIC, 1, -1) == before + 1


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("offset", "partition", "expected"),
    [
        (-1, 0, E.OFFSET_OUT_OF_RANGE),
        (-(2**40), 1, E.OFFSET_OUT_OF_RANGE),
        (10**12, 0, E.OFFSET_OUT_OF_RANGE),
        (0, 9, E.UNKNOWN_TOPIC_OR_PARTITION),
    ],
)
def test_bad_fetch_is_refused(
    bad_node: NodeProcess, offset: int, partition: int, expected: int
) -> None:
    channel, stub = stub_for(bad_node)
    with channel:
        before = log_state(bad_node, stub)
        response = stub.Fetch(
            pb.FetchRequest(
                replica_id=-1,
                max_wait_ms=0,
                min_bytes=1,
                max_bytes=1 << 20,
                topics=[
                    pb.FetchTopic(
                        name=BAD_TOPIC,
                        partitions=[
                            pb.FetchPartition(
                                partition=partition,
                                current_leader_epoch=-1,
                                fetch_offset=offset,
                                last_fetched_epoch=-1,
                                partition_max_bytes=1 << 20,
                            )
                        ],
                    )
                ],
            ),
            timeout=10,
        )
        answer = response.topics[0].partitions[0]
        assert (answer.partition, answer.error_code) == (partition, expected), answer
        assert answer.records == b""
        assert serving(bad_node)
        assert log_state(bad_node, stub) == before
