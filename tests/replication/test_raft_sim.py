"""The seeded simulator over many seeds, and proof that its checks can fail.

1000 seeds: 600 with 3 voters and 400 with 5 (100 of each with an observer), 450
of them under the harsh fault profile. Chunks of 50 seeds, so a failure names its
seed (and the command that replays it) without 1000 test ids."""

from __future__ import annotations

import pytest

from seglog.controller import raft
from seglog.sim.raft_sim import (
    PROFILES,
    FaultProfile,
    SimResult,
    SimulationFailure,
    main,
    simulate,
)

STEPS = 200
CHUNK = 50

# (voters, observers, profile, first seed, chunks)
PLAN = [
    (3, 0, "default", 0, 6),
    (3, 0, "harsh", 10_000, 4),
    (3, 1, "default", 20_000, 2),
    (5, 0, "default", 30_000, 3),
    (5, 0, "harsh", 40_000, 3),
    (5, 1, "harsh", 50_000, 2),
]
CHUNKS = [
    (voters, observers, profile, first + k * CHUNK)
    for voters, observers, profile, first, n in PLAN
    for k in range(n)
]
assert sum(n for *_, n in PLAN) * CHUNK == 1000


def _run_chunk(voters: int, observers: int, profile: str, first: int) -> list[SimResult]:
    results, failures = [], []
    for seed in range(first, first + CHUNK):
        try:
            results.append(simulate(seed, voters, observers, STEPS, PROFILES[profile]))
        except SimulationFailure as e:
            failures.append(str(e))
    assert not failures, f"{len(failures)} of {CHUNK} seeds failed; the first:\n{failures[0]}"
    return results


@pytest.mark.parametrize(
    "voters,observers,profile,first",
    CHUNKS,
    ids=[f"{v}v{o}o-{p}-{s}" for v, o, p, s in CHUNKS],
)
def test_seeds(voters: int, observers: int, profile: str, first: int):
    results = _run_chunk(voters, observers, profile, first)
    # The runs must actually exercise what the checks are about.
    assert sum(r.crashes for r in results) > 0
    assert sum(r.partitions for r in results) > 0
    assert sum(r.snapshots_installed for r in results) > 0
    assert max(r.terms_with_leader for r in results) > 1
    assert min(r.commit_index for r in results) > 0


def test_a_seed_replays_exactly():
    assert simulate(7, 5, 1, STEPS) == simulate(7, 5, 1, STEPS)
    assert simulate(7, 5, 1, STEPS) != simulate(8, 5, 1, STEPS)


def test_one_voter_and_a_calm_network():
    r = simulate(1, 1, 1, STEPS)
    assert r.final_leader == 1
    assert simulate(2, 3, 0, STEPS, PROFILES["calm"]).terms_with_leader == 1


def test_cli_prints_the_result_and_the_trace(capsys):
    assert main(["--seed", "3", "--voters", "3", "--steps", "60", "--verbose"]) == 0
    out = capsys.readouterr().out
    assert "is leader of term" in out and "AppendReq" in out
    assert out.strip().splitlines()[-1].startswith("seed=3, steps=")


def _first_failure(seeds: range, **kw) -> SimulationFailure:
    for seed in seeds:
        try:
            simulate(seed, **kw)
        except SimulationFailure as e:
            return e
    pytest.fail(f"the simulator caught the broken variant on none of seeds {seeds}")


def test_the_checker_catches_votes_granted_to_stale_logs(monkeypatch, capsys):
    """Without the up-to-date check a node missing committed entries can win an
    election and overwrite them: the simulator must notice within a few seeds."""
    monkeypatch.setattr(raft.RaftNode, "_log_up_to_date", lambda self, term, index: True)
    e = _first_failure(range(100), voters=3, steps=STEPS, faults=PROFILES["harsh"])
    assert f"seed {e.seed}:" in str(e)
    assert f"--seed {e.seed} --voters 3" in str(e) and "trace tail:" in str(e)
    assert e.trace_tail
    # The same seed fails the same way again, and the CLI replays it.
    with pytest.raises(SimulationFailure) as again:
        simulate(e.seed, 3, 0, STEPS, PROFILES["harsh"])
    assert str(again.value) == str(e)
    args = ["--seed", str(e.seed), "--steps", str(STEPS), "--profile", "harsh"]
    assert main(args) == 1
    assert f"seed {e.seed}: {e.reason}" in capsys.readouterr().err


def test_the_checker_catches_a_vote_forgotten_across_a_crash(monkeypatch):
    """A node that does not persist its vote may vote twice in one term."""
    real_init = raft.RaftNode.__init__

    def amnesiac_init(self, *args, persisted=None, **kw) -> None:
        if persisted is not None:
            persisted = raft.PersistentState(
                persisted.term, None, persisted.snapshot, persisted.entries
            )
        real_init(self, *args, persisted=persisted, **kw)

    monkeypatch.setattr(raft.RaftNode, "__init__", amnesiac_init)
    # Many short crashes, mostly inside a Ready: a node often restarts in the term it voted in.
    crashy = FaultProfile(drop=0.1, crash=0.05, crash_mid_ready=0.8, down_steps=(1, 5), max_down=1)
    e = _first_failure(range(300), voters=3, steps=STEPS, faults=crashy)
    assert "voted for" in e.reason or "two leaders" in e.reason
