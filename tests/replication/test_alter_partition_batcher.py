"""AlterPartitionBatcher: one request in flight, a newer change of a partition wins,
failed changes go back unless superseded, late answers resolve retried changes."""

from __future__ import annotations

import pytest

from seglog.replication.alter_partition_batcher import AlterPartitionBatcher
from seglog.replication.partition_replica import SendAlterPartition


def change(request_id: int, isr: tuple[int, ...] = (1, 2)) -> SendAlterPartition:
    return SendAlterPartition(request_id, 1, 0, 0, isr, (-1,) * len(isr))


def test_one_request_in_flight_carries_everything_pending() -> None:
    b: AlterPartitionBatcher[int] = AlterPartitionBatcher()
    assert b.next_batch() is None
    for p in range(100):
        b.submit(p, change(p))
    first = b.next_batch()
    assert first is not None and [p for p, _r in first] == list(range(100))
    b.submit(7, change(1007))
    assert b.next_batch() is None, "one request at a time"
    assert [r.request_id for _p, r in b.answered()] == list(range(100))
    assert [(p, r.request_id) for p, r in b.next_batch() or []] == [(7, 1007)]


def test_newest_change_of_a_partition_wins() -> None:
    b: AlterPartitionBatcher[str] = AlterPartitionBatcher()
    b.submit("a", change(1, (1, 2, 3)))
    b.submit("a", change(2, (1, 2)))
    assert [(k, r.request_id) for k, r in b.next_batch() or []] == [("a", 2)]


def test_a_failed_request_goes_back_unless_superseded() -> None:
    b: AlterPartitionBatcher[int] = AlterPartitionBatcher()
    b.submit(0, change(1))
    b.submit(1, change(2))
    assert b.next_batch() is not None
    b.submit(1, change(3))  # newer than the one in flight
    b.failed()
    assert sorted((p, r.request_id) for p, r in b.next_batch() or []) == [(0, 1), (1, 3)]


def test_a_late_answer_resolves_a_retried_change() -> None:
    b: AlterPartitionBatcher[int] = AlterPartitionBatcher()
    b.submit(0, change(5))
    b.next_batch()
    b.failed()  # timed out: pending again
    b.resolved(0, 5)  # ...but its answer came after all
    assert b.pending == 0 and b.next_batch() is None
    b.submit(0, change(6))
    b.resolved(0, 5)  # an answer to an older change leaves the newer one
    assert b.pending == 1


def test_bounded_requests() -> None:
    b: AlterPartitionBatcher[int] = AlterPartitionBatcher(max_items=10)
    for p in range(25):
        b.submit(p, change(p))
    sizes = []
    while (batch := b.next_batch()) is not None:
        sizes.append(len(batch))
        b.answered()
    assert sizes == [10, 10, 5]
    with pytest.raises(AssertionError):
        b.answered()
