"""A disk slow to persist does not stall a node's event loop (issue 40): with every
fsync of one node taking FSYNC_DELAY_MS (storage/disk_and_clock.py's `fsync_delay_ms`:
writes stay fast, as a loaded disk's page cache takes them), one partition rolling
segments as fast as a producer fills them keeps that node fsyncing (the rolled
segment, the producer snapshot), while one-record produces to another partition it
leads go on answering, and the loop's lag stays far below one fsync."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest
from kafka.admin import KafkaAdminClient, NewTopic

from seglog.harness.kafka_cluster import KafkaCluster
from seglog.harness.metrics_scrape import metrics_port, scrape, value
from seglog.storage.disk_and_clock import ENV

FSYNC_DELAY_MS = 1000
ROLLING, OTHER = "rolling", "other"
SEGMENT_BYTES = 16384  # a roll every ~14 records of 1 KiB
LAG_METRIC = "seglog_node_event_loop_lag_seconds"
FLUSHES = "kafka_log_logflushstats_logflushrateandtimems"


def write_faults(path: Path, faults: dict[str, object]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(faults))
    os.replace(tmp, path)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """One cluster for the module; each test sets the fault and clears it after."""
    tmp_path = tmp_path_factory.mktemp("slow-fsync")
    faults = tmp_path / "faults.json"
    write_faults(faults, {})
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(ENV, str(faults))  # the nodes inherit it
        c = KafkaCluster(tmp_path / "cluster", {"metrics.port": "0", "metrics.host": "127.0.0.1"})
        c.faults_path = faults  # type: ignore[attr-defined]
        c.start_all()
    try:
        yield c
    finally:
        c.stop_all()


@pytest.fixture
def healthy_after(cluster: KafkaCluster) -> Iterator[None]:
    yield
    write_faults(cluster.faults_path, {})  # type: ignore[attr-defined]
    time.sleep(0.3)


def create_led_by(cluster: KafkaCluster, leader: int, topics: dict[str, dict[str, str]]) -> None:
    """One-partition topics (name -> topic configs) whose preferred leader is `leader`,
    known to every node and led by it."""
    followers = [n for n in cluster.nodes if n != leader]
    admin = KafkaAdminClient(bootstrap_servers=cluster.kafka_bootstrap)
    try:
        admin.create_topics(
            [
                NewTopic(name, replica_assignments={0: [leader, *followers]}, topic_configs=cfg)
                for name, cfg in topics.items()
            ]
        )
    finally:
        admin.close()
    for topic in topics:
        cluster.wait("topics everywhere", lambda t=topic: cluster.known_everywhere(t, 1))
        assert cluster.leader_of(topic) == leader


def epoch_entries(node_dirs: list[Path], topic: str) -> list[str]:
    """The entry lines of a partition's leader-epoch-checkpoint on one node ([] if none)."""
    for d in node_dirs:
        path = d / f"{topic}-0" / "leader-epoch-checkpoint"
        if path.is_file():
            return path.read_text().splitlines()[2:]
    return []


def test_slow_fsyncs_on_a_node_do_not_stall_its_other_partitions(
    cluster: KafkaCluster, healthy_after: None
) -> None:
    leader = 2
    create_led_by(cluster, leader, {ROLLING: {"segment.bytes": str(SEGMENT_BYTES)}, OTHER: {}})

    port = metrics_port(cluster.nodes[leader])
    flushes_before = value(scrape(port), FLUSHES + "_count")
    write_faults(cluster.faults_path, {"fsync_delay_ms": FSYNC_DELAY_MS, "node_ids": [leader]})  # type: ignore[attr-defined]
    time.sleep(0.3)  # re-read within 50 ms

    stop = threading.Event()
    rolled: list[int] = []
    refused: list[str] = []

    def delivered(err: object, _msg: object) -> None:
        if err is not None:
            refused.append(str(err))

    def fill_segments() -> None:
        # Batches well below segment.bytes (a larger one is RECORD_LIST_TOO_LARGE).
        p = ck.Producer(
            {"bootstrap.servers": cluster.kafka_bootstrap, "acks": "1", "batch.size": 4096}
        )
        value_ = os.urandom(1024)
        n = 0
        while not stop.is_set() and n < 50:  # ~3 rolls: a flush job of that many fsyncs
            p.produce(ROLLING, value=value_, on_delivery=delivered)
            p.poll(0)
            n += 1
            if n % 50 == 0:
                p.flush(10)
        p.flush(10)
        rolled.append(n)

    filler = threading.Thread(target=fill_segments, daemon=True)
    filler.start()
    producer = ck.Producer({"bootstrap.servers": cluster.kafka_bootstrap, "acks": "1"})
    latencies = []
    worst_lag = 0.0
    deadline = time.monotonic() + 8 * FSYNC_DELAY_MS / 1000
    try:
        while time.monotonic() < deadline:
            t0 = time.monotonic()
            producer.produce(OTHER, value=b"x")
            assert producer.flush(10) == 0, "a produce to the other partition was not answered"
            latencies.append(time.monotonic() - t0)
            if len(latencies) % 20 == 0:
                worst_lag = max(worst_lag, value(scrape(port), LAG_METRIC))
            time.sleep(0.01)
    finally:
        stop.set()
        filler.join(30)
    worst_lag = max(worst_lag, value(scrape(port), LAG_METRIC))
    # A flush job fsyncs a rolled segment's files one after another: wait for the first.
    cluster.wait(
        "a slow flush to finish",
        lambda: value(scrape(port), FLUSHES + "_count") > flushes_before or None,
        timeout_s=120,
    )
    samples = scrape(port)
    flushes = value(samples, FLUSHES + "_count") - flushes_before
    # The fault really slowed the node's fsyncs: the rolling partition's flushes took it.
    assert rolled == [50] and not refused, (rolled, refused[:3])
    assert flushes >= 1, "no log flush ran while segments rolled"
    assert value(samples, FLUSHES + "_sum") >= FSYNC_DELAY_MS * flushes * 0.9
    # ... and never held the loop: no produce waited for one, the lag stayed low.
    assert len(latencies) > 50, len(latencies)
    slowest = max(latencies)
    assert slowest < FSYNC_DELAY_MS / 1000 / 2, (
        f"a produce to {OTHER} took {slowest:.2f}s while fsyncs took {FSYNC_DELAY_MS} ms"
    )
    assert worst_lag < FSYNC_DELAY_MS / 1000 / 2, f"event loop lag {worst_lag:.2f}s"


DURABLE = "durable"


def test_flush_messages_answers_wait_for_their_fsync_off_the_loop(
    cluster: KafkaCluster, healthy_after: None
) -> None:
    """flush.messages=1: each append is fsynced before it is answered, as Kafka's inline
    flush does, but in the node's flush pool (node/message_flusher.py): the answers to
    that partition take an fsync each while the other partition's go on at once."""
    leader = 2
    create_led_by(cluster, leader, {DURABLE: {"flush.messages": "1"}, OTHER + "-2": {}})
    # The new leader's epoch entries are written within a tick (storage/
    # leader_epoch_cache.py); not yet written, the first flush job would write them.
    for topic in (DURABLE, OTHER + "-2"):
        cluster.wait(
            f"{topic}'s leader epoch checkpoint",
            lambda t=topic: epoch_entries(cluster.nodes[leader].log_dirs, t) or None,
        )
    port = metrics_port(cluster.nodes[leader])
    write_faults(cluster.faults_path, {"fsync_delay_ms": FSYNC_DELAY_MS, "node_ids": [leader]})  # type: ignore[attr-defined]
    time.sleep(0.3)

    durable_latencies: list[float] = []
    stop = threading.Event()

    def produce_durably() -> None:
        p = ck.Producer({"bootstrap.servers": cluster.kafka_bootstrap, "acks": "1"})
        while not stop.is_set() and len(durable_latencies) < 4:
            t0 = time.monotonic()
            p.produce(DURABLE, value=b"kept")
            if p.flush(10) == 0:
                durable_latencies.append(time.monotonic() - t0)

    durable = threading.Thread(target=produce_durably, daemon=True)
    durable.start()
    producer = ck.Producer({"bootstrap.servers": cluster.kafka_bootstrap, "acks": "1"})
    latencies = []
    deadline = time.monotonic() + 4 * FSYNC_DELAY_MS / 1000
    try:
        while time.monotonic() < deadline:
            t0 = time.monotonic()
            producer.produce(OTHER + "-2", value=b"x")
            assert producer.flush(10) == 0, "a produce to the other partition was not answered"
            latencies.append(time.monotonic() - t0)
            time.sleep(0.01)
    finally:
        stop.set()
        durable.join(30)
    worst_lag = value(scrape(port), LAG_METRIC)
    # Each durable answer waited for its fsync (the leader's slowed one) ...
    assert len(durable_latencies) >= 2, durable_latencies
    assert min(durable_latencies) >= FSYNC_DELAY_MS / 1000 * 0.9, durable_latencies
    # ... which never held the loop: the other partition answered meanwhile.
    assert len(latencies) > 30, len(latencies)
    assert max(latencies) < FSYNC_DELAY_MS / 1000 / 2, max(latencies)
    assert worst_lag < FSYNC_DELAY_MS / 1000 / 2, f"event loop lag {worst_lag:.2f}s"


FRESH = [f"fresh-{i}" for i in range(2)]


def test_a_followers_first_records_of_an_epoch_write_its_checkpoint_off_the_loop(
    cluster: KafkaCluster, healthy_after: None
) -> None:
    """A follower's first append in a leader epoch adds an entry to its
    leader-epoch-checkpoint, which Kafka writes with fsync there and then. On the event
    loop that fsync would stall every partition the node serves; the node writes it
    from its log manager within a tick (storage/leader_epoch_cache.py). With the
    follower's fsyncs slowed, produces to a partition it leads go on answering while it
    takes the first records of two new partitions, and their checkpoints do get written."""
    slow = 3
    create_led_by(cluster, 1, {t: {} for t in FRESH})  # node 3 follows them
    mine = OTHER + "-3"
    create_led_by(cluster, slow, {mine: {}})
    write_faults(cluster.faults_path, {"fsync_delay_ms": FSYNC_DELAY_MS, "node_ids": [slow]})  # type: ignore[attr-defined]
    time.sleep(0.3)

    first = ck.Producer({"bootstrap.servers": cluster.kafka_bootstrap, "acks": "1"})
    for topic in FRESH:
        first.produce(topic, value=b"first of its epoch")
    assert first.flush(10) == 0, "the new partitions' leader did not answer"
    producer = ck.Producer({"bootstrap.servers": cluster.kafka_bootstrap, "acks": "1"})
    latencies = []
    deadline = time.monotonic() + 4 * FSYNC_DELAY_MS / 1000
    while time.monotonic() < deadline:
        t0 = time.monotonic()
        producer.produce(mine, value=b"x")
        assert producer.flush(10) == 0, f"a produce to {mine} was not answered"
        latencies.append(time.monotonic() - t0)
        time.sleep(0.01)
    worst_lag = value(scrape(metrics_port(cluster.nodes[slow])), LAG_METRIC)

    # The follower did take the records and make each new epoch durable (two slowed
    # fsyncs per file: the file, its directory).
    dirs = cluster.nodes[slow].log_dirs
    for topic in FRESH:
        entries = cluster.wait(
            f"{topic}'s checkpoint on node {slow}",
            lambda t=topic: epoch_entries(dirs, t) or None,
            timeout_s=60,
        )
        assert len(entries) == 1 and entries[0].split()[1] == "0", (topic, entries)
    # ... without the loop waiting for any of it.
    assert len(latencies) > 30, len(latencies)
    assert max(latencies) < FSYNC_DELAY_MS / 1000 / 2, max(latencies)
    assert worst_lag < FSYNC_DELAY_MS / 1000 / 2, f"event loop lag {worst_lag:.2f}s"
