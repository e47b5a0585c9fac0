"""seglog's own Producer and Consumer with transactions, over gRPC on three real nodes
(docs/transactions.md): commits and aborts as a read_committed and a read_uncommitted
Consumer see them, the LSO holding read_committed reads behind an open transaction,
a zombie Producer fenced by a newer one with its transactional id, and
consume-transform-produce with send_offsets_to_transaction (an aborted round
commits neither its output nor its offsets), and committed offsets held back while a
transaction holds them (require_stable)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from seglog.client import Admin, Consumer, Producer, TopicPartition
from seglog.client.admin import NewTopic
from seglog.client.errors import KafkaError, error_class

ProducerFencedError = error_class("PRODUCER_FENCED")
QUIET_MS = 3000  # a consumer stops after this long without a record


def create(cluster, topic: str, partitions: int) -> None:
    with Admin(cluster.bootstrap) as admin:
        admin.create_topics([NewTopic(topic, partitions, 3)])
    cluster.wait("the topic", lambda: cluster.known_everywhere(topic, partitions))


def read_all(cluster, topic: str, partitions: int, isolation_level: str) -> list[bytes]:
    c = Consumer(
        bootstrap_servers=cluster.bootstrap,
        isolation_level=isolation_level,
        auto_offset_reset="earliest",
        consumer_timeout_ms=QUIET_MS,
    )
    c.assign([TopicPartition(topic, p) for p in range(partitions)])
    values = [r.value for r in c]
    c.close()
    return values


def end_offsets(cluster, topic: str, partitions: int, isolation_level: str) -> dict:
    c = Consumer(bootstrap_servers=cluster.bootstrap, isolation_level=isolation_level)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        return {tp.partition: o for tp, o in c.end_offsets(tps).items()}
    finally:
        c.close()


def test_commits_and_aborts_as_read_committed_and_read_uncommitted_see_them(txn_cluster):
    create(txn_cluster, "stx-orders", 2)
    p = Producer(txn_cluster.bootstrap, transactional_id="stx-orders")
    p.init_transactions()
    committed = []
    for round_ in range(4):
        p.begin_transaction()
        values = [b"r%d-%d" % (round_, i) for i in range(20)]
        for i, v in enumerate(values):
            p.send("stx-orders", v, key=b"k%d" % i)  # keyed: both partitions
        if round_ % 2 == 0:
            p.commit_transaction()
            committed += values
        else:
            p.flush()  # written first, so the abort has records to hide
            p.abort_transaction()
    # An open transaction: read_committed stops at its first offset (the LSO).
    p.begin_transaction()
    for i in range(10):
        p.send("stx-orders", b"open-%d" % i, key=b"k%d" % i)
    p.flush()
    lso = end_offsets(txn_cluster, "stx-orders", 2, "read_committed")
    hw = end_offsets(txn_cluster, "stx-orders", 2, "read_uncommitted")
    assert all(lso[i] < hw[i] for i in range(2)), (lso, hw)
    assert sorted(read_all(txn_cluster, "stx-orders", 2, "read_committed")) == sorted(committed)
    p.commit_transaction()
    committed += [b"open-%d" % i for i in range(10)]
    p.close()

    got = read_all(txn_cluster, "stx-orders", 2, "read_committed")
    assert sorted(got) == sorted(committed)
    everything = read_all(txn_cluster, "stx-orders", 2, "read_uncommitted")
    assert len(everything) == 90  # 4 rounds of 20 and the last 10, aborted ones included
    assert b"r1-0" in everything and b"r1-0" not in got


def test_a_newer_producer_fences_the_zombie(txn_cluster):
    create(txn_cluster, "stx-zombies", 1)
    zombie = Producer(txn_cluster.bootstrap, transactional_id="stx-zombie")
    zombie.init_transactions()
    zombie.begin_transaction()
    zombie.send("stx-zombies", b"zombie-1").get(timeout=30)
    # The newer instance: its init aborts the zombie's open transaction, bumping the epoch.
    fresh = Producer(txn_cluster.bootstrap, transactional_id="stx-zombie")
    fresh.init_transactions()
    with pytest.raises(ProducerFencedError, match="stx-zombie"):
        zombie.send("stx-zombies", b"zombie-2").get(timeout=30)
        zombie.commit_transaction()
    with pytest.raises(ProducerFencedError):  # fatal: every later call says so
        zombie.begin_transaction()
    fresh.begin_transaction()
    fresh.send("stx-zombies", b"fresh-1")
    fresh.commit_transaction()
    zombie.close()
    fresh.close()
    assert read_all(txn_cluster, "stx-zombies", 1, "read_committed") == [b"fresh-1"]


def test_consume_transform_produce_commits_output_and_offsets_together(txn_cluster):
    create(txn_cluster, "stx-in", 1)
    create(txn_cluster, "stx-out", 1)
    with Producer(txn_cluster.bootstrap) as plain:
        for i in range(30):
            plain.send("stx-in", b"%d" % i)
    tp = TopicPartition("stx-in", 0)

    def consumer() -> Consumer:
        return Consumer(
            "stx-in",
            bootstrap_servers=txn_cluster.bootstrap,
            group_id="stx-ctp",
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            max_poll_records=10,
        )

    def one_round(c: Consumer, p: Producer, commit: bool) -> list[bytes]:
        records: list = []
        while not records:
            records = [r for rs in c.poll(timeout_ms=1000).values() for r in rs]
        p.begin_transaction()
        for r in records:
            p.send("stx-out", b"x" + r.value)
        p.send_offsets_to_transaction({tp: records[-1].offset + 1}, c.group_metadata())
        if commit:
            p.commit_transaction()
        else:
            p.abort_transaction()
        return [r.value for r in records]

    p = Producer(txn_cluster.bootstrap, transactional_id="stx-ctp")
    p.init_transactions()
    c = consumer()
    first = one_round(c, p, commit=True)
    aborted = one_round(c, p, commit=False)
    assert first == [b"%d" % i for i in range(10)] and aborted[0] == b"10"
    assert c.committed(tp) == 10  # the aborted round's offsets did not count
    c.close(autocommit=False)
    c = consumer()  # a restart resumes from the committed offset, 10
    done = list(first)
    while len(done) < 30:
        done += one_round(c, p, commit=True)
    c.close(autocommit=False)
    p.close()
    out = read_all(txn_cluster, "stx-out", 1, "read_committed")
    assert out == [b"x%d" % i for i in range(30)]  # each input once, the aborted round never
    with Admin(txn_cluster.bootstrap) as admin:
        assert admin.list_consumer_group_offsets("stx-ctp")[tp].offset == 30


def test_transactional_calls_refuse_bad_use(txn_cluster):
    with pytest.raises(KafkaError, match="idempotence"):
        Producer(txn_cluster.bootstrap, transactional_id="stx-bad", enable_idempotence=False)
    with pytest.raises(ValueError, match="isolation_level"):
        Consumer(bootstrap_servers=txn_cluster.bootstrap, isolation_level="read_comitted")
    p = Producer(txn_cluster.bootstrap, transactional_id="stx-bad")
    try:
        with pytest.raises(KafkaError, match="begin_transaction"):
            p.send("stx-orders", b"outside")  # before init/begin
        p.init_transactions()
        with pytest.raises(KafkaError, match="IN_TRANSACTION"):
            p.commit_transaction()
    finally:
        p.close()
    with (
        Producer(txn_cluster.bootstrap) as plain,
        pytest.raises(KafkaError, match="transactional_id"),
    ):
        plain.begin_transaction()


def test_offsets_pending_in_a_transaction_are_fetched_once_it_commits(txn_cluster):
    create(txn_cluster, "stx-stable", 1)
    tp = TopicPartition("stx-stable", 0)
    p = Producer(txn_cluster.bootstrap, transactional_id="stx-stable")
    p.init_transactions()
    p.begin_transaction()
    p.send_offsets_to_transaction({tp: 5}, "stx-stable")  # a group id alone
    c = Consumer(
        bootstrap_servers=txn_cluster.bootstrap,
        group_id="stx-stable",
        isolation_level="read_committed",
        enable_auto_commit=False,
    )
    admin = Admin(txn_cluster.bootstrap)
    with ThreadPoolExecutor(2) as pool:
        # OffsetFetch's require_stable: UNSTABLE_OFFSET_COMMIT while the transaction
        # holds the offset, so the consumer asks again instead of reading none.
        committed = pool.submit(c.committed, tp)
        # The Admin's too, when asked (ListConsumerGroupOffsetsOptions.requireStable).
        listed = pool.submit(
            admin.list_consumer_group_offsets, "stx-stable", [tp], require_stable=True
        )
        time.sleep(3)
        assert not committed.done() and not listed.done()
        assert admin.list_consumer_group_offsets("stx-stable", [tp]) == {}
        p.commit_transaction()
        assert committed.result(timeout=60) == 5
        assert listed.result(timeout=60)[tp].offset == 5
    admin.close()
    c.close(autocommit=False)
    p.close()


def test_a_prepared_transaction_is_ended_by_another_client(txn_cluster):
    """prepare_transaction leaves the transaction open; end_transaction commits it from
    elsewhere (the Spark sink's driver), by transactional id, producer id and epoch."""
    from seglog.client.cluster import ClusterMetadata
    from seglog.client.errors import IllegalStateError
    from seglog.client.transaction_manager import end_transaction

    create(txn_cluster, "stx-prepared", 1)
    p = Producer(txn_cluster.bootstrap, transactional_id="stx-prepared")
    p.init_transactions()
    p.begin_transaction()
    with pytest.raises(IllegalStateError, match="no records or offsets"):
        p.prepare_transaction()
    p.send("stx-prepared", b"prepared")
    prepared = p.prepare_transaction()
    assert prepared.transactional_id == "stx-prepared" and prepared.producer_id >= 0
    with pytest.raises(IllegalStateError, match="PREPARED"):
        p.send("stx-prepared", b"after")
    p.close()
    assert end_offsets(txn_cluster, "stx-prepared", 1, "read_committed") == {0: 0}

    metadata = ClusterMetadata(txn_cluster.bootstrap)
    try:
        end_transaction(metadata, prepared, True, 30)
        end_transaction(metadata, prepared, True, 30)  # a retry: answered as the first
        with pytest.raises(KafkaError, match="INVALID_TXN_STATE"):
            end_transaction(metadata, prepared, False, 30)
        stale = prepared._replace(epoch=prepared.epoch - 1)
        with pytest.raises(ProducerFencedError):
            end_transaction(metadata, stale, True, 30)
    finally:
        metadata.close()
    assert read_all(txn_cluster, "stx-prepared", 1, "read_committed") == [b"prepared"]


def test_a_single_node_serves_transactions(node):
    """A node that is its own controller (no quorum) commits a block of producer ids,
    and calls its metadata listeners, inside InitProducerId: the coordinator must not
    wait there for its own lock (it did, and every transactional call hung)."""
    p = Producer(node.bootstrap, transactional_id="single", max_block_ms=20000)
    p.init_transactions()
    p.begin_transaction()
    p.send("single-node", b"committed")
    p.commit_transaction()
    p.close()
    c = Consumer(
        bootstrap_servers=node.bootstrap,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        consumer_timeout_ms=QUIET_MS,
    )
    c.assign([TopicPartition("single-node", 0)])
    assert [r.value for r in c] == [b"committed"]
    c.close()
