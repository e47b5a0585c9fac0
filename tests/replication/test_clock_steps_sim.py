"""Wall-clock steps in the replication simulator (--clock-step-ms): the replicas'
timers run on the monotonic clock, so nodes whose wall clocks step back and forth by
ten minutes still converge; with the timers on the stepped wall clock (the node's
former bug, --timers-on-wall-clock) a step back stalls a follower's fetch (its request
looks sent in the future and never times out) and the cluster never converges."""

from __future__ import annotations

import pytest

from seglog.sim.replication_sim import SimulationFailure, main, simulate

STEP_MS = 600_000


def test_timers_on_the_stepped_wall_clock_stall_replication() -> None:
    with pytest.raises(SimulationFailure, match="no convergence") as failure:
        simulate(1, storage="memory", clock_step_ms=STEP_MS, timers_on_wall_clock=True)
    # The replay command carries the options that reproduce it.
    assert "--clock-step-ms 600000 --timers-on-wall-clock" in str(failure.value)


@pytest.mark.parametrize("seed", range(1, 9))
def test_monotonic_timers_converge_through_wall_clock_steps(seed: int) -> None:
    sim = simulate(seed, storage="memory", clock_step_ms=STEP_MS)
    assert sim.finished and sim.stats["clock_steps"] > 0


def test_wall_clock_steps_on_disk_logs() -> None:
    # The logs take their times (rolls, append times) from the stepped wall clock.
    sim = simulate(1, storage="disk", clock_step_ms=STEP_MS)
    assert sim.finished and sim.stats["clock_steps"] > 0


def test_cli_refuses_a_negative_step_and_wall_timers_without_steps(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["--seed", "1", "--clock-step-ms", "-5"])
    assert "--clock-step-ms must be >= 0, got -5" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--seed", "1", "--timers-on-wall-clock"])
    assert "--timers-on-wall-clock needs --clock-step-ms" in capsys.readouterr().err
