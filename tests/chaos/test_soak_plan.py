"""The soak's plan: a seeded sequence of scenarios, every one the target runs or the
ones asked for, refused by name when one cannot run there."""

from __future__ import annotations

from pathlib import Path

import pytest

from seglog.chaos.__main__ import main, soak_plan
from seglog.chaos.scenarios import SCENARIOS


def test_five_minute_steps_for_every_compose_scenario_hold_each_once() -> None:
    expected = {n for n, s in SCENARIOS.items() if n != "calm" and "compose" in s.targets}
    expected -= {n for n in expected if SCENARIOS[n].netem}  # no sch_netem: refused
    seconds = 300 * len(expected)  # 18 scenarios: an hour and a half
    plan = soak_plan("compose", 5, seconds, 300, netem=False)
    names = [name for name, _ in plan]
    assert sorted(names) == sorted(expected)
    assert all(step == 300 for _, step in plan)
    assert plan == soak_plan("compose", 5, seconds, 300, netem=False)  # the seed replays it
    assert plan != soak_plan("compose", 6, seconds, 300, netem=False)


def test_a_chosen_subset_cycles_in_seeded_rounds() -> None:
    plan = soak_plan("local", 1, 1200, 200, only=["bridge", "one-way", "storm"])
    names = [name for name, _ in plan]
    assert len(names) == 6
    assert sorted(names[:3]) == sorted(names[3:]) == ["bridge", "one-way", "storm"]


@pytest.mark.parametrize(
    ("only", "message"),
    [(["bogus"], "unknown scenario(s) bogus"), (["lossy-links"], "compose only, not local")],
)
def test_a_scenario_that_cannot_run_is_refused_by_name(only: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        soak_plan("local", 1, 600, 300, only=only)


@pytest.mark.parametrize("command", [["run", "--scenario", "calm"], ["soak"], ["calibrate"]])
def test_an_out_directory_holding_a_run_is_refused(
    tmp_path: Path, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A run appends to history.jsonl: a second run into the same --out would be
    checked together with the first (a killed soak restarted into its directory did)."""
    history = tmp_path / "history.jsonl"
    history.write_text('{"type": "meta"}\n')
    code = main([*command[:1], "--target", "local", *command[1:], "--out", str(tmp_path)])
    assert code == 2
    assert "already holds a run" in capsys.readouterr().err
    assert history.read_text() == '{"type": "meta"}\n'
