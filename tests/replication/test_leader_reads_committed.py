"""READ_COMMITTED reads of a partition leader (replication/leader_reads.py): records
below the last stable offset only, with the aborted transactions they overlap, and
ListOffsets' LATEST at the LSO; followers replicate the markers like any batch and
build the same `.txnindex` entries (docs/transactions.md)."""

from __future__ import annotations

from test_partition_replica import T0, batch, exchange, three

from seglog.replication.partition_replica import (
    NONE,
    ListOffsetsRequest,
    PartitionReplica,
)
from seglog.storage.producer_state import ControlMarker
from seglog.storage.record_batch import NewRecord, build_batch, iter_batches
from seglog.storage.txn_index import AbortedTxn

LATEST = -1


def txn(pid: int, seq: int, n: int = 2) -> bytes:
    records = [NewRecord(b"t%d" % i, None, T0) for i in range(n)]
    return build_batch(
        records, producer_id=pid, producer_epoch=0, base_sequence=seq, is_transactional=True
    )


def replicate(nodes: dict[int, PartitionReplica], now: int) -> None:
    """Rounds of follower fetches: the data, then the HW that it moved."""
    for step in range(3):
        for f in (2, 3):
            exchange(nodes[f], nodes, now + step)


def offsets(records: object) -> list[int]:
    return [h.base_offset for _, h in iter_batches(records)]  # type: ignore[arg-type]


def test_read_committed_stops_at_the_lso_and_lists_the_aborted() -> None:
    nodes, _ = three()
    leader = nodes[1]
    leader.produce(1, batch(2, "plain"), 1, 30_000, 0)  # 0-1
    leader.produce(2, txn(7, 0), 1, 30_000, 0)  # 2-3, producer 7's open transaction
    leader.produce(3, txn(8, 0), 1, 30_000, 0)  # 4-5, producer 8's
    replicate(nodes, 1)
    assert leader.log.high_watermark == 6
    committed = leader.read_for_consumer(0, 1 << 20, read_committed=True)
    assert committed.error == NONE and committed.last_stable_offset == 2
    assert offsets(committed.records) == [0]
    assert committed.aborted == []
    uncommitted = leader.read_for_consumer(0, 1 << 20)
    assert offsets(uncommitted.records) == [0, 2, 4] and uncommitted.aborted is None
    lso = leader.handle_list_offsets(ListOffsetsRequest(LATEST, read_committed=True))
    assert lso.offset == 2
    assert leader.handle_list_offsets(ListOffsetsRequest(LATEST)).offset == 6

    leader.log.log.append_marker(7, 0, ControlMarker("ABORT", 3), 0)  # 6
    # Not replicated yet: producer 7's transaction still bounds the LSO.
    assert leader.read_for_consumer(0, 1 << 20, read_committed=True).last_stable_offset == 2
    leader.log.log.append_marker(8, 0, ControlMarker("COMMIT", 3), 0)  # 7
    replicate(nodes, 20)
    assert leader.log.high_watermark == 8
    r = leader.read_for_consumer(0, 1 << 20, read_committed=True)
    assert r.last_stable_offset == 8
    assert offsets(r.records) == [0, 2, 4, 6, 7]
    # Producer 8's transaction was open when 7's aborted: the entry's LSO is its start.
    assert r.aborted == [AbortedTxn(7, 2, 6, 4)]
    assert leader.read_for_consumer(7, 1 << 20, read_committed=True).aborted == []
    # The followers hold the same markers, the same producer state and index entries.
    for f in (2, 3):
        follower_log = nodes[f].log.log
        assert follower_log.collect_aborted_transactions(0, 8) == [AbortedTxn(7, 2, 6, 4)]
        assert follower_log.producer_state.ongoing_txns == {}
        assert follower_log.last_stable_offset == 8
