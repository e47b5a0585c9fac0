"""The keep rules, batch by batch, without files."""

from __future__ import annotations

from seglog.storage.cleaner_filter import (
    AbortedTxns,
    Action,
    BatchFilter,
    LastRecord,
    RecordView,
    mappable,
)
from seglog.storage.record_batch import BatchHeader, ControlType
from seglog.storage.txn_index import AbortedTxn

NOW = 1_000_000
RETENTION = 500


def header(
    base: int, count: int, *, pid: int = -1, epoch: int = -1, attrs: int = 0, base_ts: int = 0
) -> BatchHeader:
    return BatchHeader(
        base,
        49 + 10 * count,
        0,
        2,
        0,
        attrs,
        count - 1 if count else 0,
        base_ts,
        NOW - 10,
        pid,
        epoch,
        0 if pid >= 0 else -1,
        count,
    )


def flt(
    map_end: int = 100,
    last: dict[int, LastRecord] | None = None,
    aborted: AbortedTxns | None = None,
) -> BatchFilter:
    return BatchFilter(
        map_end=map_end,
        now_ms=NOW,
        delete_retention_ms=RETENTION,
        last_records=last or {},
        aborted=aborted or AbortedTxns(),
    )


def rec(offset: int, mapped: int = -1, *, tombstone: bool = False, key: bool = True) -> RecordView:
    return RecordView(offset, key, tombstone, mapped)


def test_superseded_records_go_and_the_latest_stay() -> None:
    v = flt().decide(header(10, 3), [rec(10, 12), rec(11, 11), rec(12, 12)])
    assert v.action is Action.REWRITE and v.kept == (1, 2)
    assert flt().decide(header(10, 2), [rec(10, 10), rec(11)]).action is Action.COPY
    assert flt().decide(header(10, 1), [rec(10, 50)]).action is Action.DROP


def test_records_past_the_map_are_kept_whatever_the_map_says() -> None:
    v = flt(map_end=11).decide(header(10, 2), [rec(10, 30), rec(11, 30, tombstone=True)])
    assert v.kept == (1,) and v.delete_horizon_ms is None


def test_records_without_a_key_go() -> None:
    assert flt().decide(header(10, 2), [rec(10, key=False), rec(11)]).kept == (1,)


def test_a_kept_tombstone_gets_a_horizon_and_goes_once_it_passed() -> None:
    v = flt().decide(header(10, 1), [rec(10, tombstone=True)])
    assert (v.action, v.delete_horizon_ms, v.horizon_ms) == (
        Action.REWRITE,
        NOW + RETENTION,
        NOW + RETENTION,
    )
    waiting = header(10, 1, attrs=0x40, base_ts=NOW + 1)
    assert flt().decide(waiting, [rec(10, tombstone=True)]).action is Action.COPY
    passed = header(10, 1, attrs=0x40, base_ts=NOW)
    assert flt().decide(passed, [rec(10, tombstone=True)]).action is Action.DROP


def test_an_emptied_batch_stays_if_it_holds_an_active_producers_last_sequence() -> None:
    last = {7: LastRecord(11, 0)}
    v = flt(last=last).decide(header(10, 2, pid=7, epoch=0), [rec(10, 50), rec(11, 50)])
    assert v.action is Action.EMPTY
    older = flt(last=last).decide(header(5, 1, pid=7, epoch=0), [rec(5, 50)])
    assert older.action is Action.DROP
    forced = flt().decide(header(5, 1), [rec(5, 50)], retain_empty=True)
    assert forced.action is Action.EMPTY
    already_empty = flt(last={7: LastRecord(10, 0)}).decide(header(10, 0, pid=7, epoch=0), [])
    assert already_empty.action is Action.COPY


def test_markers_wait_for_their_data_then_for_their_horizon() -> None:
    txn = 0x10
    marker = 0x10 | 0x20
    f = flt()
    assert f.decide(header(1, 1, pid=3, epoch=0, attrs=txn), [rec(1)]).action is Action.COPY
    kept = f.decide(
        header(2, 1, pid=3, epoch=0, attrs=marker), [rec(2)], control_type=ControlType.COMMIT
    )
    assert kept.action is Action.COPY and kept.horizon_ms is None  # data still there
    f.decide(header(3, 1, pid=3, epoch=0, attrs=txn), [rec(3, 50)])  # superseded
    v = f.decide(
        header(4, 1, pid=3, epoch=0, attrs=marker), [rec(4)], control_type=ControlType.COMMIT
    )
    assert v.action is Action.REWRITE and v.delete_horizon_ms == NOW + RETENTION
    gone = f.decide(
        header(6, 1, pid=3, epoch=0, attrs=marker | 0x40, base_ts=NOW),
        [rec(6)],
        control_type=ControlType.ABORT,
    )
    assert gone.action is Action.DROP


def test_aborted_transactions_come_from_txnindex_entries_and_are_dropped() -> None:
    # Producer 5 aborted [0, 3] and [7, 9]; producer 6 committed what it wrote at 1.
    a = AbortedTxns.of([AbortedTxn(5, 7, 9, 10), AbortedTxn(5, 0, 3, 4)])
    assert a.is_aborted(5, 0) and a.is_aborted(5, 2) and not a.is_aborted(6, 1)
    assert not a.is_aborted(5, 4) and a.is_aborted(5, 8)
    assert a.find(5, 8) == AbortedTxn(5, 7, 9, 10)
    assert not mappable(header(2, 1, pid=5, epoch=0, attrs=0x10), a)
    assert mappable(header(1, 1, pid=6, epoch=0, attrs=0x10), a)
    assert not mappable(header(4, 1, pid=6, epoch=0, attrs=0x30), a)
    v = flt(aborted=a).decide(header(2, 1, pid=5, epoch=0, attrs=0x10), [rec(2)])
    assert v.action is Action.DROP


def test_an_abort_marker_stays_with_its_index_entry_while_its_data_goes() -> None:
    """Kafka's CleanedTransactionMetadata: the pass that drops an aborted transaction's
    data keeps its ABORT marker as it is and hands on its `.txnindex` entry; a pass
    that finds no data of it treats the marker like any finished one (a horizon, then
    gone) and hands on no entry."""
    txn, marker = 0x10, 0x30
    entry = AbortedTxn(5, 0, 2, 3)
    f = flt(aborted=AbortedTxns.of([entry]))
    assert f.decide(header(0, 2, pid=5, epoch=0, attrs=txn), [rec(0), rec(1)]).action is (
        Action.DROP
    )
    kept = f.decide(
        header(2, 1, pid=5, epoch=0, attrs=marker), [rec(2)], control_type=ControlType.ABORT
    )
    assert kept == (Action.COPY, (0,), None, None, entry)
    later = flt(aborted=AbortedTxns.of([entry]))
    v = later.decide(
        header(2, 1, pid=5, epoch=0, attrs=marker), [rec(2)], control_type=ControlType.ABORT
    )
    assert v.action is Action.REWRITE and v.delete_horizon_ms == NOW + RETENTION
    assert v.aborted_txn is None
    # A COMMIT marker never carries an entry.
    c = flt(aborted=AbortedTxns.of([entry]))
    c.decide(header(0, 1, pid=5, epoch=0, attrs=txn), [rec(0)])
    done = c.decide(
        header(1, 1, pid=6, epoch=0, attrs=marker), [rec(1)], control_type=ControlType.COMMIT
    )
    assert done.aborted_txn is None
