"""The seeded replication simulator: 2000 seeds pass, runs replay exactly, and the
checker catches known replication bugs (so a pass means something)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from seglog.replication import partition_replica as pr
from seglog.sim.replication_sim import (
    SAFE,
    WILD,
    SimulationFailure,
    main,
    simulate,
)

CHUNKS = 40
PER_CHUNK = 50  # 2000 seeds in all


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_seeds(chunk: int) -> None:
    failures = []
    for seed in range(chunk * PER_CHUNK, (chunk + 1) * PER_CHUNK):
        try:
            simulate(seed)
        except SimulationFailure as exc:
            failures.append(exc)
    if failures:
        seeds = [f.seed for f in failures]
        pytest.fail(f"failing seeds {seeds}; first:\n{failures[0]}")


MANY_CHUNKS = 3
MANY_PER_CHUNK = 20  # 60 seeds of 16-48 partitions at a slow controller


@pytest.mark.parametrize("chunk", range(MANY_CHUNKS))
def test_many_partitions_at_a_slow_controller(chunk: int) -> None:
    """ISR changes of dozens of partitions queue at a controller that serves one request
    at a time, 20-600 ms each, under the usual faults: the batched AlterPartition (one
    request in flight per node, deadlines, backoff) keeps the queue bounded and every
    run converges with nothing lost."""
    failures = []
    batched = 0
    for seed in range(chunk * MANY_PER_CHUNK, (chunk + 1) * MANY_PER_CHUNK):
        try:
            sim = simulate(seed, many_partitions=True)
            assert sim.params.partitions >= 16 and sim.params.controller_delay_ms[1] > 0
            batched += sim.stats["alter_batches"]
        except SimulationFailure as exc:
            failures.append(exc)
    if failures:
        seeds = [f.seed for f in failures]
        pytest.fail(f"failing seeds {seeds}; first:\n{failures[0]}")
    assert batched > 0, "ISR changes went through the batcher"


def test_power_failure_budget_counts_an_isr_shrink_in_flight() -> None:
    """Seed 2714 once failed with "committed data lost": the leader sent AlterPartition
    (shrink to itself) and lost power before the controller accepted it, leaving an ISR of
    one node with nothing on disk (Kafka loses that data too). The fault budget now
    counts the ISR a pending AlterPartition may install, so the run stays in it."""
    result = simulate(2714)
    assert result.stats["crashes"] >= 1


def test_disk_storage_sees_every_modelled_fault() -> None:
    """The default storage is production's Log over tmpfs files: across a few seeds the
    runs lose unflushed tails at power failures, recover torn last writes and halt
    nodes on a failed fsync, and still pass."""
    totals = {"crashes": 0, "torn_writes": 0, "fsync_failures": 0}
    for seed in range(300):
        stats = simulate(seed, storage="disk").stats
        for k in totals:
            totals[k] += stats[k]
        if all(totals.values()):
            break
    assert all(totals.values()), totals


def test_memory_storage_passes_too() -> None:
    """The fast mode (MemoryLog: the same validator, no files) on a few seeds."""
    for seed in range(0, 100):
        assert simulate(seed, storage="memory").storage == "memory"


def test_same_seed_replays_exactly() -> None:
    a, b = simulate(7), simulate(7)
    assert (a.steps, a.now, a.stats) == (b.steps, b.now, b.stats)
    assert list(a.trace_tail) == list(b.trace_tail)
    assert simulate(8).trace_tail != a.trace_tail


def test_cli_replays_a_seed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--seed", "3", "--mode", SAFE]) == 0
    assert "seed 3 (safe, disk): ok" in capsys.readouterr().out
    assert main(["--seed", "3", "--mode", SAFE, "--storage", "memory"]) == 0
    assert "seed 3 (safe, memory): ok" in capsys.readouterr().out


def first_failure(mode: str, limit: int) -> SimulationFailure:
    for seed in range(limit):
        try:
            simulate(seed, mode=mode)
        except SimulationFailure as exc:
            return exc
    pytest.fail(f"no seed below {limit} exposed the injected bug")


def test_checker_catches_kip101_truncation_to_high_watermark(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Pre-KIP-101 followers truncate to their own HW on becoming follower and fetch
    without epoch validation (6.7): after multiple failures the logs diverge."""
    restart = pr.PartitionReplica._restart_fetching
    next_request = pr.PartitionReplica.next_request

    def truncate_to_hw(self: pr.PartitionReplica) -> None:
        if self.leader_id >= 0:
            self.log.truncate_to(self.log.high_watermark)
        restart(self)

    def no_epoch(self: pr.PartitionReplica, now_ms: int) -> pr.Outbound | None:
        out = next_request(self, now_ms)
        if out is not None and isinstance(out.request, pr.FetchRequest):
            out = pr.Outbound(out.destination, replace(out.request, last_fetched_epoch=-1))
        return out

    monkeypatch.setattr(pr.PartitionReplica, "_restart_fetching", truncate_to_hw)
    monkeypatch.setattr(pr.PartitionReplica, "next_request", no_epoch)
    exc = first_failure(WILD, 300)
    assert f"seed {exc.seed} (wild)" in str(exc) and "trace tail" in str(exc)
    with pytest.raises(SimulationFailure) as again:
        simulate(exc.seed, mode=WILD)
    assert again.value.message == exc.message  # the failure replays exactly


def test_checker_catches_majority_high_watermark(monkeypatch: pytest.MonkeyPatch) -> None:
    """A leader that commits on a majority of LEOs instead of the whole ISR (7.4) gets
    acks=-1 writes acknowledged that an election from the ISR then loses."""

    def majority_hw(self: pr.PartitionReplica, now_ms: int, actions: list[pr.Action]) -> bool:
        if not self.is_leader:
            return False
        leos = sorted([self.log.log_end_offset, *(f.leo for f in self.followers.values())])
        candidate = leos[len(leos) // 2]
        if candidate <= self.log.high_watermark:
            return False
        self.log.update_high_watermark(candidate)
        self._leader_hw_floor = self.log.high_watermark
        self._complete_delayed(actions)
        return True

    monkeypatch.setattr(pr.PartitionReplica, "_maybe_increment_hw", majority_hw)
    exc = first_failure(SAFE, 400)
    assert any(
        s in exc.message
        for s in ("acknowledged", "committed data lost", "OUT_OF_ORDER_SEQUENCE_NUMBER")
    ), exc.message


@pytest.mark.parametrize("flush_messages", [1, 3])
def test_deferred_flush_messages_seeds(flush_messages: int) -> None:
    """flush.messages deferred to a flush pool, as a node on an event loop runs it
    (sim/sim_flushes.py): 150 seeds pass, their fsyncs are deferred and run, and with
    flush.messages=1 no answer leaves before its batch is fsynced on the leader."""
    failures, flushes = [], 0
    for seed in range(5000, 5150):
        try:
            flushes += simulate(seed, flush_messages=flush_messages).stats["deferred_flushes"]
        except SimulationFailure as exc:
            failures.append(exc)
    if failures:
        pytest.fail(f"failing seeds {[f.seed for f in failures]}; first:\n{failures[0]}")
    assert flushes > 150 * 5, flushes


def test_checker_catches_an_answer_before_its_deferred_fsync(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An acks=1 answer let out while its flush.messages fsync is still pending: the
    flush.messages=1 check fails the seed (and the failure replays with its option)."""
    done = pr.PartitionReplica.produce

    def answer_at_once(self: pr.PartitionReplica, *args: object, **kwargs: object) -> list:
        actions = done(self, *args, **kwargs)  # type: ignore[arg-type]
        held = [d for _, d in self._unflushed.values()]
        self._unflushed.clear()
        return actions + held

    monkeypatch.setattr(pr.PartitionReplica, "produce", answer_at_once)
    with pytest.raises(SimulationFailure) as failed:
        for seed in range(5000, 5150):
            simulate(seed, flush_messages=1)
    assert "fsynced, flush.messages=1" in failed.value.message
    assert "--flush-messages 1" in str(failed.value)
