"""The transaction coordinator simulator (sim/txn_sim.py) over many seeds: it drives
the production TransactionCoordinator through failovers, refused writes, failed marker
writes, zombie producers and timeouts, and checks its invariants. Two broken
coordinators prove the checks can fail. More seeds outside the suite:
`python -m seglog.sim.txn_sim --seeds 20000`."""

from __future__ import annotations

from typing import Any

import pytest

from seglog.node.transactions import transaction_coordinator as tc
from seglog.sim.txn_sim import SimInvariantError, TxnSim, run_seed

SEEDS = 300


def failures(seeds: range) -> list[str]:
    out = []
    for seed in seeds:
        try:
            run_seed(seed)
        except SimInvariantError as e:
            out.append(str(e))
    return out


def test_the_coordinator_keeps_its_invariants_over_many_seeds():
    found = failures(range(SEEDS))
    assert not found, found[:5]


def test_a_seed_replays_exactly():
    a, b = TxnSim(11), TxnSim(11)
    a.run()
    b.run()
    assert (a.now, a.log, a.leader_epoch) == (b.now, b.log, b.leader_epoch)
    assert len(a.log) > 10


def test_a_coordinator_that_does_not_fence_is_caught(monkeypatch: pytest.MonkeyPatch):
    check = tc.TransactionCoordinator._check_producer

    def lax(self: Any, shard: Any, meta: Any, producer_id: int, epoch: int) -> str:
        if meta is not None and meta.producer_id == producer_id:
            epoch = meta.producer_epoch  # any epoch of the id passes
        return check(self, shard, meta, producer_id, epoch)

    monkeypatch.setattr(tc.TransactionCoordinator, "_check_producer", lax)
    assert any("answered NONE after a newer init" in f for f in failures(range(50)))


def test_a_coordinator_that_answers_endtxn_before_writing_is_caught(
    monkeypatch: pytest.MonkeyPatch,
):
    prepare = tc.TransactionCoordinator._prepare_end

    def eager(
        self: Any, shard: Any, meta: Any, commit: bool, now_ms: int, request_id: int | None,
        producer_epoch: int | None = None,
    ) -> None:  # fmt: skip
        if request_id is not None:
            shard.respond(request_id, "NONE", meta)  # before PrepareCommit is written
        return prepare(self, shard, meta, commit, now_ms, None, producer_epoch)

    monkeypatch.setattr(tc.TransactionCoordinator, "_prepare_end", eager)
    assert any("EndTxn answered" in f for f in failures(range(SEEDS)))
