"""KIP-890 part 1 for TxnOffsetCommit on three real nodes (docs/transactions.md,
"Verification of transactional appends"): before the group coordinator appends a
TxnOffsetCommit's offsets to the group's `__consumer_offsets` partition as a batch of the
producer's transaction, it asks the transaction coordinator whether that partition is
in the transaction (AddOffsetsToTxn puts it there). A hand-made TxnOffsetCommit
(kafka-python's protocol classes on a socket, and seglog's gRPC one) for a group never
added is refused INVALID_TXN_STATE and nothing is written: the group's offsets stay as
they were after the transaction commits, and no transaction hangs in
`__consumer_offsets`. After AddOffsetsToTxn the same commit works and its offset is the
group's once the transaction commits. Without verification the stray commit was
written: a transaction the coordinator never ends, holding the partition's LSO."""

from __future__ import annotations

import grpc
from kafka.protocol.consumer import OffsetFetchRequest
from kafka.protocol.metadata import FindCoordinatorRequest
from kafka.protocol.producer import AddOffsetsToTxnRequest, EndTxnRequest, TxnOffsetCommitRequest
from test_seglog_client_txns import create, end_offsets
from test_txn_verification import (
    INVALID_TXN_STATE,
    RETRIABLE,
    TIMEOUT_S,
    TRANSACTION_ABORTABLE,
    add_partition,
    find_hanging,
    init_producer,
    kafka_produce,
    transactional_ids_by_coordinator,
    txn_batch,
    txn_call,
)

from seglog.harness.kafka_cluster import KafkaConnection
from seglog.harness.metrics_scrape import metrics_port, scrape
from seglog.proto import transactions_pb2 as tpb
from seglog.proto import transactions_pb2_grpc

OFFSETS_TOPIC = "__consumer_offsets"
UNSTABLE_OFFSET_COMMIT = 88
FAILURES = ("kafka_server_addpartitionstotxnmanager_verificationfailurerate_total", ())


def group_coordinator(cluster, group: str) -> int:
    """The group's coordinator node (FindCoordinator key type 0)."""

    def ask() -> int | None:
        with KafkaConnection(next(iter(cluster.kafka_ports.values()))) as conn:
            _, r = conn.request(FindCoordinatorRequest[3](key=group, key_type=0))
        return int(r.node_id) if r.error_code == 0 else None

    return cluster.wait(f"the coordinator of {group}", ask)


def txn_offset_commit(
    cluster, tid: str, group: str, pid: int, epoch: int, topic: str, offset: int, version: int = 3
) -> int:
    """A TxnOffsetCommit (v3 unless told) of `offset` for `topic`-0 at the group's
    coordinator (again while it answers a retriable error): the partition's error code."""
    R = TxnOffsetCommitRequest
    request = R[version](
        transactional_id=tid,
        group_id=group,
        producer_id=pid,
        producer_epoch=epoch,
        generation_id=-1,
        member_id="",
        group_instance_id=None,
        topics=[
            R.TxnOffsetCommitRequestTopic(
                name=topic,
                partitions=[
                    R.TxnOffsetCommitRequestTopic.TxnOffsetCommitRequestPartition(
                        partition_index=0,
                        committed_offset=offset,
                        committed_leader_epoch=-1,
                        committed_metadata="",
                    )
                ],
            )
        ],
    )

    def ask() -> int | None:
        port = cluster.kafka_ports[group_coordinator(cluster, group)]
        with KafkaConnection(port, timeout_s=TIMEOUT_S + 10) as conn:
            _, r = conn.request(request)
        code = int(r.topics[0].partitions[0].error_code)
        return None if code in RETRIABLE else code

    return cluster.wait("a TxnOffsetCommit answer", ask)


def fetched(cluster, group: str, topic: str, require_stable: bool = False) -> tuple[int, int]:
    """OffsetFetch v7 of `topic`-0: (error code, committed offset)."""
    R = OffsetFetchRequest
    request = R[7](
        group_id=group,
        topics=[R.OffsetFetchRequestTopic(name=topic, partition_indexes=[0])],
        require_stable=require_stable,
    )
    with KafkaConnection(cluster.kafka_ports[group_coordinator(cluster, group)]) as conn:
        _, r = conn.request(request)
    p = r.topics[0].partitions[0]
    return int(p.error_code), int(p.committed_offset)


def add_offsets(cluster, tid: str, pid: int, epoch: int, group: str, version: int = 3) -> None:
    """AddOffsetsToTxn for `group`, answered without error."""
    request = AddOffsetsToTxnRequest[version](
        transactional_id=tid, producer_id=pid, producer_epoch=epoch, group_id=group
    )
    r = txn_call(cluster, tid, request)
    assert r.error_code == 0, r


def end_txn(cluster, tid: str, pid: int, epoch: int, version: int = 3) -> None:
    r = txn_call(
        cluster,
        tid,
        EndTxnRequest[version](
            transactional_id=tid, producer_id=pid, producer_epoch=epoch, committed=True
        ),
    )
    assert r.error_code == 0, r


def failures(cluster, node: int) -> float:
    return scrape(metrics_port(cluster.nodes[node])).get(FAILURES, 0.0)


def test_a_txn_offset_commit_for_a_group_never_added_is_refused(txn_cluster, capsys):
    cluster = txn_cluster
    topic, group, tid = "offsets-verify", "offsets-verify-group", "offsets-verify-app"
    create(cluster, topic, 1)
    pid, epoch = init_producer(cluster, tid)
    coordinator = group_coordinator(cluster, group)
    failed_before = failures(cluster, coordinator)

    # The group's offsets partition was never added (no AddOffsetsToTxn): the group
    # coordinator asks the transaction coordinator, which has no such partition.
    assert txn_offset_commit(cluster, tid, group, pid, epoch, topic, 7) == INVALID_TXN_STATE
    # seglog's gRPC TxnOffsetCommit is verified the same way.
    with grpc.insecure_channel(f"127.0.0.1:{cluster.ports[coordinator]}") as channel:
        r = transactions_pb2_grpc.TransactionsStub(channel).TxnOffsetCommit(
            tpb.TxnOffsetCommitRequest(
                transactional_id=tid, group_id=group, producer_id=pid, producer_epoch=epoch,
                generation_id=-1, topics=[tpb.TxnOffsetCommitTopic(
                    name=topic, partitions=[tpb.TxnOffsetCommitPartition(
                        partition_index=0, committed_offset=8, committed_leader_epoch=-1,
                    )],
                )],
            ),
            timeout=TIMEOUT_S,
        )  # fmt: skip
    assert [e.error_code for e in r.results] == [INVALID_TXN_STATE], r
    # Counted as Kafka's VerificationFailureRate by the group coordinator's node.
    assert failures(cluster, coordinator) >= failed_before + 2
    # Nothing was written: no offset pending, no transaction open in __consumer_offsets.
    assert fetched(cluster, group, topic, require_stable=True) == (0, -1)
    assert find_hanging(cluster, capsys, OFFSETS_TOPIC) == []

    # The transaction goes on (a record of it) and commits: the group's offsets are as
    # they were.
    assert add_partition(cluster, tid, pid, epoch, topic, 0) == 0
    code, message = kafka_produce(cluster, tid, topic, 0, txn_batch(pid, epoch, b"one"))
    assert code == 0, message
    end_txn(cluster, tid, pid, epoch)
    cluster.wait("the commit", lambda: end_offsets(cluster, topic, 1, "read_committed")[0] == 2)
    assert fetched(cluster, group, topic, require_stable=True) == (0, -1)

    # The next transaction adds the group first: the same commit works, is pending
    # until the transaction commits, and is the group's offset after.
    add_offsets(cluster, tid, pid, epoch, group)
    assert txn_offset_commit(cluster, tid, group, pid, epoch, topic, 42) == 0
    assert fetched(cluster, group, topic, require_stable=True)[0] == UNSTABLE_OFFSET_COMMIT
    assert fetched(cluster, group, topic) == (0, -1)
    # Its transaction is open in the partition now: a second commit needs no verification.
    assert txn_offset_commit(cluster, tid, group, pid, epoch, topic, 43) == 0
    end_txn(cluster, tid, pid, epoch)

    def stable() -> tuple[int, int] | None:
        got = fetched(cluster, group, topic, require_stable=True)
        return got if got[0] == 0 else None

    committed = cluster.wait("the committed offset", stable)
    assert committed == (0, 43)
    assert find_hanging(cluster, capsys, OFFSETS_TOPIC) == []


def test_txn_offset_commit_v4_hears_transaction_abortable_where_v3_hears_invalid_txn_state(
    txn_cluster,
):
    """KIP-890: TxnOffsetCommit v4's client knows TRANSACTION_ABORTABLE, so a commit for
    a group never added to the transaction is answered by that name; v3 hears
    INVALID_TXN_STATE (Kafka's AddPartitionsToTxnManager maps it for DEFAULT_ERROR
    versions). The same whether the transaction coordinator is another node than the
    group's (asked with AddPartitionsToTxn over the wire) or the same. Nothing is
    written; after AddOffsetsToTxn v4 the v4 commit works and EndTxn v4 commits it."""
    cluster = txn_cluster
    topic, group = "offsets-abortable", "offsets-abortable-group"
    create(cluster, topic, 1)
    coordinator = group_coordinator(cluster, group)
    tids = transactional_ids_by_coordinator(cluster, "offsets-abortable", coordinator)
    for offset, tid in enumerate(tids, start=10):
        pid, epoch = init_producer(cluster, tid, version=5)
        before = fetched(cluster, group, topic, require_stable=True)
        for version, expected in ((3, INVALID_TXN_STATE), (4, TRANSACTION_ABORTABLE)):
            got = txn_offset_commit(cluster, tid, group, pid, epoch, topic, 5, version=version)
            assert got == expected, (tid, version)
        assert fetched(cluster, group, topic, require_stable=True) == before
        add_offsets(cluster, tid, pid, epoch, group, version=4)
        assert txn_offset_commit(cluster, tid, group, pid, epoch, topic, offset, version=4) == 0
        end_txn(cluster, tid, pid, epoch, version=4)

        def committed(offset: int = offset) -> bool | None:
            return fetched(cluster, group, topic, require_stable=True) == (0, offset) or None

        cluster.wait("the committed offset", committed)
