"""KIP-890 part 1 on three real nodes (docs/transactions.md, "Verification of
transactional appends"): a partition leader asks the transactional id's coordinator
(AddPartitionsToTxn v4 VerifyOnly) before a transactional batch opens a transaction
in the partition. A hand-made transactional Produce (kafka-python's protocol classes on
a socket, and seglog's gRPC Produce) for a partition never added to the transaction is
refused, nothing is appended and the LSO is not held (find-hanging finds nothing); with
transaction.partition.verification.enable=false the same batch is taken and hangs.
confluent-kafka's and seglog's transactional producers still commit and abort across
partitions led by other nodes than the coordinator."""

from __future__ import annotations

import time

import confluent_kafka as ck
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import (
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
)
from test_seglog_client_txns import create, end_offsets, read_all

from seglog.cli.main import main as seglog
from seglog.client import Producer
from seglog.harness.kafka_cluster import KafkaConnection, produce_request
from seglog.harness.metrics_scrape import metrics_port, scrape
from seglog.proto import client_pb2 as pb
from seglog.storage.record_batch import NewRecord, build_batch

TIMEOUT_S = 30.0
RETRIABLE = {14, 15, 16, 51}  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR,
# CONCURRENT_TRANSACTIONS
INVALID_TXN_STATE = 48
INVALID_PRODUCER_ID_MAPPING = 49
TRANSACTION_ABORTABLE = 120
NOT_ADDED = "Partition was not added to the transaction"  # Kafka's INVALID_TXN_STATE message


def coordinator_of(cluster, tid: str) -> int:
    """The transactional id's coordinator node (FindCoordinator key type 1)."""

    def ask() -> int | None:
        with KafkaConnection(next(iter(cluster.kafka_ports.values()))) as conn:
            _, r = conn.request(FindCoordinatorRequest[3](key=tid, key_type=1))
        return int(r.node_id) if r.error_code == 0 else None

    return cluster.wait(f"the coordinator of {tid}", ask)


def txn_call(cluster, tid: str, request) -> object:
    """A request to the id's coordinator, again while it answers a retriable error."""
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        port = cluster.kafka_ports[coordinator_of(cluster, tid)]
        with KafkaConnection(port) as conn:
            _, r = conn.request(request)
        code = getattr(r, "error_code", 0)
        if code not in RETRIABLE or time.monotonic() > deadline:
            return r
        time.sleep(0.2)


def init_producer(cluster, tid: str, version: int = 4) -> tuple[int, int]:
    r = txn_call(
        cluster,
        tid,
        InitProducerIdRequest[version](
            transactional_id=tid, transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1
        ),
    )
    assert r.error_code == 0, r
    return int(r.producer_id), int(r.producer_epoch)


def add_partition(cluster, tid: str, pid: int, epoch: int, topic: str, partition: int) -> int:
    R = AddPartitionsToTxnRequest
    r = txn_call(
        cluster,
        tid,
        R[3](
            v3_and_below_transactional_id=tid,
            v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch,
            v3_and_below_topics=[R.AddPartitionsToTxnTopic(name=topic, partitions=[partition])],
        ),
    )
    return int(r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code)


def txn_batch(pid: int, epoch: int, value: bytes) -> bytes:
    return build_batch(
        [NewRecord(value)],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=0,
        is_transactional=True,
    )


def kafka_produce(
    cluster, tid: str, topic: str, partition: int, data: bytes, version: int = 9
) -> tuple[int, str | None]:
    """A transactional Produce (v9 unless told) to the partition's leader: (error code,
    message)."""
    leader = cluster.wait("a leader", lambda: cluster.leader_of(topic, partition))
    request = produce_request(topic, partition, data, version=version, transactional_id=tid)
    with KafkaConnection(cluster.kafka_ports[leader], timeout_s=TIMEOUT_S + 10) as conn:
        _, r = conn.request(request)
    p = r.responses[0].partition_responses[0]
    return int(p.error_code), p.error_message


def transactional_ids_by_coordinator(cluster, prefix: str, node: int) -> tuple[str, str]:
    """Two transactional ids of `prefix`: one whose coordinator is another node than
    `node` (its leaders ask with AddPartitionsToTxn over the wire) and one whose is
    `node` (asked directly)."""
    found: dict[bool, str] = {}
    for i in range(200):  # each id lands on one of three nodes: found long before
        tid = f"{prefix}-{i}"
        found.setdefault(coordinator_of(cluster, tid) == node, tid)
        if len(found) == 2:
            return found[False], found[True]
    raise AssertionError(f"no transactional id of {prefix} on both sides of node {node}")


def log_end(cluster, topic: str, partitions: int) -> dict[int, int]:
    return end_offsets(cluster, topic, partitions, "read_uncommitted")


def find_hanging(cluster, capsys, topic: str) -> list[list[str]]:
    code = seglog(
        ["transactions", "--bootstrap-server", cluster.bootstrap, "find-hanging",
         "--topic", topic, "--max-transaction-timeout", "0"]
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    return [line.split("\t")[:3] for line in out.splitlines()[1:]]


def test_a_transactional_batch_for_a_partition_never_added_is_refused(txn_cluster, capsys):
    topic = "verify-refused"
    create(txn_cluster, topic, 2)
    tid = "verify-refused-app"
    pid, epoch = init_producer(txn_cluster, tid)

    # Partition 0 was never added to the transaction: the leader asks the coordinator
    # (elsewhere or itself), which has no such partition in it.
    code, message = kafka_produce(txn_cluster, tid, topic, 0, txn_batch(pid, epoch, b"stray"))
    assert code == INVALID_TXN_STATE, message
    assert message == "Partition was not added to the transaction"
    # An id the coordinator never handed out for this producer: its mapping is refused.
    code, _ = kafka_produce(txn_cluster, "verify-no-such-id", topic, 0, txn_batch(pid, epoch, b"x"))
    assert code == INVALID_PRODUCER_ID_MAPPING
    # seglog's own Produce (gRPC) with the transactional id is verified the same way.
    leader = txn_cluster.leader_of(topic, 1)
    r = txn_cluster.stub(leader).Produce(
        pb.ProduceRequest(
            acks=-1, timeout_ms=10_000, transactional_id=tid,
            topics=[pb.TopicProduceData(name=topic, partitions=[
                pb.PartitionProduceData(partition=1, records=txn_batch(pid, epoch, b"stray"))
            ])],
        )
    )  # fmt: skip
    assert r.topics[0].partitions[0].error_code == INVALID_TXN_STATE, r

    # Counted as Kafka's VerificationFailureRate by the leaders that asked.
    failures = sum(
        scrape(metrics_port(txn_cluster.nodes[n])).get(
            ("kafka_server_addpartitionstotxnmanager_verificationfailurerate_total", ()), 0.0
        )
        for n in {txn_cluster.leader_of(topic, 0), leader}
    )
    assert failures >= 3

    # Nothing was appended, nothing holds the LSO, no transaction hangs.
    assert log_end(txn_cluster, topic, 2) == {0: 0, 1: 0}
    assert end_offsets(txn_cluster, topic, 2, "read_committed") == {0: 0, 1: 0}
    assert find_hanging(txn_cluster, capsys, topic) == []

    # Once added, the same batch opens the transaction; its commit releases the LSO.
    assert add_partition(txn_cluster, tid, pid, epoch, topic, 0) == 0
    code, message = kafka_produce(txn_cluster, tid, topic, 0, txn_batch(pid, epoch, b"added"))
    assert code == 0, message
    assert end_offsets(txn_cluster, topic, 2, "read_committed")[0] == 0  # open: held
    r = txn_call(
        txn_cluster,
        tid,
        EndTxnRequest[3](
            transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=True
        ),
    )
    assert r.error_code == 0
    txn_cluster.wait(
        "the LSO past the commit",
        lambda: end_offsets(txn_cluster, topic, 2, "read_committed")[0] == 2 or None,
    )
    assert read_all(txn_cluster, topic, 2, "read_committed") == [b"added"]


def test_produce_v11_hears_transaction_abortable_where_v10_hears_invalid_txn_state(txn_cluster):
    """KIP-890: Produce v11's client knows TRANSACTION_ABORTABLE, so a transactional
    batch for a partition never added to the transaction is answered by that name, with
    no message of its own (Kafka's ReplicaManager sets none); v10 and below hear
    INVALID_TXN_STATE, "Partition was not added to the transaction". The same whether
    the coordinator is another node (the leader's AddPartitionsToTxn VerifyOnly over
    the wire) or the leader itself. Nothing is appended either way."""
    topic = "verify-abortable"
    create(txn_cluster, topic, 1)
    leader = txn_cluster.wait("a leader", lambda: txn_cluster.leader_of(topic, 0))
    for tid in transactional_ids_by_coordinator(txn_cluster, "verify-abortable", leader):
        pid, epoch = init_producer(txn_cluster, tid)
        stray = txn_batch(pid, epoch, b"stray")
        for version, expected in (
            (9, (INVALID_TXN_STATE, NOT_ADDED)),
            (10, (INVALID_TXN_STATE, NOT_ADDED)),
            (11, (TRANSACTION_ABORTABLE, None)),
        ):
            got = kafka_produce(txn_cluster, tid, topic, 0, stray, version=version)
            assert got == expected, (tid, version)
    assert log_end(txn_cluster, topic, 1) == {0: 0}
    assert end_offsets(txn_cluster, topic, 1, "read_committed") == {0: 0}


def test_a_verified_batch_lets_its_connection_read_on_once_appended(txn_cluster):
    """The Produce that opens a transaction on a partition waits for its verification
    before its append, and its connection's next request waits for that append (a
    later batch of the producer cannot pass it), not for the answer: a ListOffsets
    pipelined behind the acks=all Produce is read right after the append and answers
    the high watermark from before the followers took the batch (0). Reading it only
    after the Produce's answer, as Kafka's processor would, gives 1."""
    topic = "verify-reads-on"
    create(txn_cluster, topic, 1)
    tid = "verify-reads-on-app"
    pid, epoch = init_producer(txn_cluster, tid)
    assert add_partition(txn_cluster, tid, pid, epoch, topic, 0) == 0
    leader = txn_cluster.wait("a leader", lambda: txn_cluster.leader_of(topic, 0))
    L = ListOffsetsRequest
    latest = L[6](
        replica_id=-1,
        isolation_level=0,
        topics=[
            L.ListOffsetsTopic(
                name=topic,
                partitions=[L.ListOffsetsTopic.ListOffsetsPartition(
                    partition_index=0, current_leader_epoch=-1, timestamp=-1
                )],
            )
        ],
    )  # fmt: skip
    produce = produce_request(topic, 0, txn_batch(pid, epoch, b"first"), transactional_id=tid)
    with KafkaConnection(txn_cluster.kafka_ports[leader], timeout_s=TIMEOUT_S) as conn:
        produce_cid, offsets_cid = conn.send_together(produce, latest)
        _, produced = conn.answer(produce, produce_cid)
        _, offsets = conn.answer(latest, offsets_cid)
    p = produced.responses[0].partition_responses[0]
    assert (p.error_code, p.base_offset) == (0, 0), p
    o = offsets.topics[0].partitions[0]
    assert (o.error_code, o.offset) == (0, 0), o


def test_the_coordinator_answers_verify_only_from_its_state(txn_cluster):
    """AddPartitionsToTxn v4/v5 with VerifyOnly, as a leader sends it: per partition,
    whether it is in the transaction; nothing is added (v5 says TRANSACTION_ABORTABLE
    where v4 says INVALID_TXN_STATE)."""
    topic = "verify-only"
    create(txn_cluster, topic, 2)
    tid = "verify-only-app"
    pid, epoch = init_producer(txn_cluster, tid)
    assert add_partition(txn_cluster, tid, pid, epoch, topic, 0) == 0
    R = AddPartitionsToTxnRequest

    def verify(version: int, producer_epoch: int) -> dict[int, int]:
        r = txn_call(
            txn_cluster,
            tid,
            R[version](
                transactions=[
                    R.AddPartitionsToTxnTransaction(
                        transactional_id=tid,
                        producer_id=pid,
                        producer_epoch=producer_epoch,
                        verify_only=True,
                        topics=[R.AddPartitionsToTxnTopic(name=topic, partitions=[0, 1])],
                    )
                ]
            ),
        )
        assert r.error_code == 0
        (result,) = r.results_by_transaction
        return {p.partition_index: p.partition_error_code
                for t in result.topic_results for p in t.results_by_partition}  # fmt: skip

    assert verify(4, epoch) == {0: 0, 1: INVALID_TXN_STATE}
    assert verify(5, epoch) == {0: 0, 1: 120}  # TRANSACTION_ABORTABLE
    assert verify(4, epoch + 1) == {0: 90, 1: 90}  # PRODUCER_FENCED
    assert verify(4, epoch) == {0: 0, 1: INVALID_TXN_STATE}  # still not added


def test_with_verification_off_the_batch_is_taken_and_hangs(unverified_txn_cluster, capsys):
    """The same Produce as above where transaction.partition.verification.enable=false:
    taken without asking, it opens a transaction no coordinator knows."""
    cluster = unverified_txn_cluster
    topic = "verify-off"
    create(cluster, topic, 1)
    tid = "verify-off-app"
    pid, epoch = init_producer(cluster, tid)
    code, message = kafka_produce(cluster, tid, topic, 0, txn_batch(pid, epoch, b"stray"))
    assert code == 0, message
    assert log_end(cluster, topic, 1) == {0: 1}
    assert end_offsets(cluster, topic, 1, "read_committed") == {0: 0}  # held
    assert find_hanging(cluster, capsys, topic) == [[topic, "0", str(pid)]]


def test_transactional_producers_commit_across_leaders(txn_cluster):
    """confluent-kafka's transactional producer and seglog's, their partitions led by
    the three nodes, the coordinator one of them: committed records are read, aborted
    ones are not."""
    topic = "verify-clients"
    create(txn_cluster, topic, 3)
    leaders = {txn_cluster.leader_of(topic, p) for p in range(3)}
    assert len(leaders) >= 2, leaders  # some partition is led away from the coordinator

    p = ck.Producer(
        {"bootstrap.servers": txn_cluster.kafka_bootstrap, "transactional.id": "verify-ck"}
    )
    p.init_transactions(TIMEOUT_S)
    for round_, commit in ((0, True), (1, False), (2, True)):
        p.begin_transaction()
        for partition in range(3):
            for i in range(2):
                p.produce(topic, f"ck-{round_}-{partition}-{i}".encode(), partition=partition)
        if commit:
            p.commit_transaction(TIMEOUT_S)
        else:
            p.abort_transaction(TIMEOUT_S)
    p.flush(TIMEOUT_S)

    with Producer(txn_cluster.bootstrap, transactional_id="verify-seglog") as sp:
        sp.init_transactions()
        for round_, commit in ((0, True), (1, False)):
            sp.begin_transaction()
            for partition in range(3):
                sp.send(topic, f"sg-{round_}-{partition}".encode(), partition=partition)
            if commit:
                sp.commit_transaction()
            else:
                sp.abort_transaction()

    expected = {f"ck-{r}-{p}-{i}".encode() for r in (0, 2) for p in range(3) for i in range(2)}
    expected |= {f"sg-0-{p}".encode() for p in range(3)}
    c = ck.Consumer(
        {
            "bootstrap.servers": txn_cluster.kafka_bootstrap,
            "group.id": "verify-reader",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    c.assign([ck.TopicPartition(topic, partition, 0) for partition in range(3)])
    got: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    while len(got) < len(expected) and time.monotonic() < deadline:
        msg = c.poll(0.5)
        if msg is not None and not msg.error():
            got.append(msg.value())
    more = c.poll(1.0)  # nothing aborted arrives late
    if more is not None and not more.error():
        got.append(more.value())
    c.close()
    assert sorted(got) == sorted(expected)
