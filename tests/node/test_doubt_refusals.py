"""A leader that refused a producer's batch while in doubt of its leadership (its
controller process silent for a session: node/controller/remote_controller.py) and
turns out to lead still must not answer the producer's next batch, already in flight,
OUT_OF_ORDER_SEQUENCE_NUMBER: the gap is its own refusal. It refuses that batch too, so
the producer sends both again, in order. librdkafka answers OUT_OF_ORDER_SEQUENCE_NUMBER
on a later in-flight request by bumping its epoch and renumbering every partition's
unacknowledged records, written ones included (the broker-frozen seed 32 run of
docs/chaos-reports/2026-12-02-gray-failures/: a broker stalled 0.6 s under load at
start, doubted, refused sequence 3, was never fenced, and answered sequence 4 with
OUT_OF_ORDER_SEQUENCE_NUMBER)."""

from __future__ import annotations

from pathlib import Path

from replica_manager_fixtures import leading

from seglog.node.doubt_refusals import GAP_BOUND_S, DoubtRefusals
from seglog.storage.record_batch import NewRecord, build_batch

TP = ("t", 0)
DOUBT = "the controller process of node 1 has not been heard from for 0.7 s"


def batch(seq: int, pid: int = 7, epoch: int = 0) -> bytes:
    return build_batch(
        [NewRecord(b"v%d" % seq)], producer_id=pid, producer_epoch=epoch, base_sequence=seq
    )


def test_the_batch_behind_a_refused_one_is_refused_too_then_both_are_taken(
    tmp_path: Path,
) -> None:
    with leading(tmp_path, [(1,)]) as rm:
        doubt: list[str | None] = [None]
        rm.leadership_doubt = lambda: doubt[0]
        assert rm.produce(TP, batch(0), -1).error_name == "NONE"
        doubt[0] = DOUBT
        refused = rm.produce(TP, batch(1), -1)
        assert refused.error_name == "NOT_LEADER_OR_FOLLOWER"
        doubt[0] = None  # heard again, caught up, and still the leader
        behind = rm.produce(TP, batch(2), -1)
        # Before: OUT_OF_ORDER_SEQUENCE_NUMBER (expected sequence 1).
        assert behind.error_name == "NOT_LEADER_OR_FOLLOWER", behind
        assert "sequence 1" in behind.error_message
        # Another producer is not held up.
        assert rm.produce(TP, batch(0, pid=8), -1).error_name == "NONE"
        # The producer's retry, in order: both taken.
        assert rm.produce(TP, batch(1), -1).error_name == "NONE"
        assert rm.produce(TP, batch(2), -1).error_name == "NONE"
        assert rm.produce(TP, batch(3), -1).error_name == "NONE"


def test_what_is_remembered_and_for_how_long() -> None:
    r = DoubtRefusals()
    assert r.behind(TP, 0, batch(5), now=0.0) is None  # nothing refused: nothing parsed
    r.refused(TP, 0, batch(5), now=0.0)
    r.refused(TP, 0, batch(6), now=0.1)  # the gap starts at the earliest
    assert r.behind(TP, 0, batch(7), now=1.0) is not None
    assert r.behind(TP, 0, batch(7, pid=9), now=1.0) is None  # another producer
    assert r.behind(TP, 0, batch(7, epoch=1), now=1.0) is None  # a new producer epoch
    assert r.behind(TP, 0, batch(7), now=1.0) is None  # ... forgets the old one's gap
    r.refused(TP, 0, batch(5), now=2.0)
    assert r.behind(TP, 1, batch(7), now=2.5) is None  # led at another leader epoch
    r.refused(TP, 0, batch(5), now=3.0)
    assert r.behind(TP, 0, batch(5), now=3.5) is None  # the retry itself: forgets
    assert r.behind(TP, 0, batch(6), now=3.6) is None
    r.refused(TP, 0, batch(5), now=4.0)
    assert r.behind(TP, 0, batch(9), now=4.0 + GAP_BOUND_S + 0.1) is None  # too old
    r.refused(TP, 0, build_batch([NewRecord(b"x")]), now=5.0)  # not idempotent: nothing
    assert r.behind(TP, 0, batch(9), now=5.0) is None
