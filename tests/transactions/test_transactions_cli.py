"""`seglog transactions` (kafka-transactions.sh's verbs) on three real nodes: list,
describe and describe-producers of a transaction whose producer stopped without
ending it; find-hanging and abort of a hanging transaction (a producer that wrote a
transactional batch without adding the partition to a transaction, as clients before
KIP-890 could, and stopped: no coordinator will ever end it; the nodes run with
transaction.partition.verification.enable=false, which lets it in), which holds every
read_committed reader of the partition at its first offset until the abort; and the
errors for an unknown transactional id and a wrong start offset."""

from __future__ import annotations

from test_seglog_client_txns import create, end_offsets, read_all

from seglog.cli.main import main as seglog
from seglog.client import Producer
from seglog.proto import client_pb2 as pb
from seglog.storage.record_batch import NewRecord, build_batch

TOPIC = "stx-cli"


def run(cluster, capsys, *argv: str) -> tuple[int, list[list[str]], str]:
    code = seglog(["transactions", "--bootstrap-server", cluster.bootstrap, *argv])
    captured = capsys.readouterr()
    rows = [line.split("\t") for line in captured.out.splitlines()]
    return code, rows, captured.err


def write_hanging_batch(cluster, partition: int) -> int:
    """A transactional batch under a fresh producer id, never added to a transaction."""
    leader = cluster.leader_of(TOPIC, partition)
    stub = cluster.stub(leader)
    pid = stub.InitProducerId(pb.InitProducerIdRequest(producer_id=-1, producer_epoch=-1))
    data = build_batch(
        [NewRecord(b"hanging")],
        producer_id=pid.producer_id,
        producer_epoch=pid.producer_epoch,
        base_sequence=0,
        is_transactional=True,
    )
    r = stub.Produce(
        pb.ProduceRequest(
            acks=-1,
            timeout_ms=30_000,
            topics=[
                pb.TopicProduceData(
                    name=TOPIC,
                    partitions=[pb.PartitionProduceData(partition=partition, records=data)],
                )
            ],
        )  # fmt: skip
    )
    assert r.topics[0].partitions[0].error_code == 0, r
    return int(pid.producer_id)


def test_transactions_cli_lists_describes_finds_hanging_and_aborts(unverified_txn_cluster, capsys):
    txn_cluster = unverified_txn_cluster
    create(txn_cluster, TOPIC, 2)
    # A producer that stops without ending its transaction (on partition 0).
    stopped = Producer(
        txn_cluster.bootstrap, transactional_id="stx-cli-stopped", transaction_timeout_ms=900_000
    )
    stopped.init_transactions()
    stopped.begin_transaction()
    stopped.send(TOPIC, b"left-open", partition=0).get(timeout=30)
    stopped.close()

    code, rows, _ = run(txn_cluster, capsys, "list")
    assert code == 0 and rows[0] == ["TransactionalId", "Coordinator", "ProducerId",
                                     "TransactionState"]  # fmt: skip
    listed = {r[0]: r for r in rows[1:]}
    assert listed["stx-cli-stopped"][3] == "Ongoing"
    stopped_pid = int(listed["stx-cli-stopped"][2])

    code, rows, _ = run(txn_cluster, capsys, "describe", "--transactional-id", "stx-cli-stopped")
    assert code == 0 and rows[0][:5] == ["CoordinatorId", "TransactionalId", "ProducerId",
                                         "ProducerEpoch", "TransactionState"]  # fmt: skip
    assert rows[1][1:5] == ["stx-cli-stopped", str(stopped_pid), "0", "Ongoing"]
    assert rows[1][8] == f"{TOPIC}-0"

    code, rows, _ = run(
        txn_cluster, capsys, "describe-producers", "--topic", TOPIC, "--partition", "0"
    )
    assert code == 0 and rows[0][-1] == "CurrentTransactionStartOffset"
    (producer,) = [r for r in rows[1:] if r[0] == str(stopped_pid)]
    assert producer[5] == "0"  # its transaction starts at offset 0
    stopped_epoch, stopped_coordinator_epoch = producer[1], producer[2]

    # The hanging one, on partition 1; committed records after it wait behind it.
    hanging_pid = write_hanging_batch(txn_cluster, 1)
    with Producer(txn_cluster.bootstrap, transactional_id="stx-cli-after") as after:
        after.init_transactions()
        after.begin_transaction()
        after.send(TOPIC, b"committed-after", partition=1)
        after.commit_transaction()
    assert end_offsets(txn_cluster, TOPIC, 2, "read_committed")[1] == 0  # the LSO is stuck

    leader = txn_cluster.leader_of(TOPIC, 1)
    code, rows, _ = run(
        txn_cluster, capsys, "find-hanging", "--broker-id", str(leader),
        "--max-transaction-timeout", "0",
    )  # fmt: skip
    assert code == 0 and rows[0][:4] == ["Topic", "Partition", "ProducerId", "ProducerEpoch"]
    assert [TOPIC, "1", str(hanging_pid)] in [r[:3] for r in rows[1:]]
    code, rows, _ = run(
        txn_cluster, capsys, "find-hanging", "--topic", TOPIC, "--max-transaction-timeout", "0"
    )
    found = [r[:3] for r in rows[1:]]
    # The stopped producer's transaction is open at its coordinator: not hanging.
    assert found == [[TOPIC, "1", str(hanging_pid)]], found

    code, _, err = run(
        txn_cluster, capsys, "abort", "--topic", TOPIC, "--partition", "1", "--start-offset", "999"
    )
    assert code == 1 and "no open transaction starts at offset 999" in err
    code, rows, _ = run(
        txn_cluster, capsys, "abort", "--topic", TOPIC, "--partition", "1", "--start-offset", "0"
    )
    assert code == 0 and str(hanging_pid) in rows[0][0]
    # The LSO moved past the aborted batch: the committed record is readable, it is not.
    got = read_all(txn_cluster, TOPIC, 2, "read_committed")
    assert got == [b"committed-after"], got

    code, rows, _ = run(
        txn_cluster, capsys, "abort", "--topic", TOPIC, "--partition", "0",
        "--producer-id", str(stopped_pid), "--producer-epoch", stopped_epoch,
        "--coordinator-epoch", stopped_coordinator_epoch,
    )  # fmt: skip
    assert code == 0
    assert end_offsets(txn_cluster, TOPIC, 2, "read_committed")[0] == 2  # record + marker
    assert read_all(txn_cluster, TOPIC, 2, "read_committed") == [b"committed-after"]

    code, _, err = run(txn_cluster, capsys, "describe", "--transactional-id", "stx-no-such-id")
    assert code == 1
    assert "TRANSACTIONAL_ID_NOT_FOUND" in err and "stx-no-such-id" in err
    code, _, err = run(txn_cluster, capsys, "find-hanging")
    assert code == 1 and "--broker-id or --topic" in err
