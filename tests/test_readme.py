"""README.md's commands and snippets, extracted from the file and run against a real
local cluster, so that the README cannot drift from what works (the quick start in
the default suite, the rest with the long tests). Every block belongs
to a section that is run here, or to one whose commands need what the default suite
leaves out (docker, Spark, minutes of chaos), named with the tests that run those;
a block anywhere else fails this test until it is placed."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from readme_blocks import ROOT, Block, blocks, commands, section_blocks, with_ports

from seglog.harness.ports import consecutive_free_ports

QUICK_START = "Quick start (Python 3.11)"
# Run here, in this order (the quick start brings up and stops a cluster; the Python
# section starts another for itself and the sections after it).
RUN_HERE = [
    QUICK_START,
    "Python: Producer, Consumer, Admin",
    "seglog's command line",
    "Kafka clients",
    "Operating a running cluster",
    "Tools",
    "Stop and clean up",
]
# The quick start's set-up lines: tests/test_first_hour.py runs them in a fresh venv.
SET_UP = ("python3 -m venv", "python -m pip install")
# Sections whose commands need docker, Spark or minutes: the tests that run them.
ELSEWHERE = {
    "Running the tests": "tests/run.sh",
    "Benchmarks": "tests/bench",
    "Spark: read and write topics from PySpark": "tests/pipeline",
    "A 3-node cluster with docker-compose": "tests/compose/test_compose.py",
    "The secure profile": "tests/chaos/test_chaos_compose.py",
    "Prometheus and a dashboard": "tests/compose/test_compose_monitoring.py",
    "Chaos: break the cluster on purpose and check that nothing is lost": "tests/chaos",
    # A server that runs until stopped: the browser tests start it and drive its pages.
    "The web console": "tests/console/test_console_browser.py",
}
COMMAND_S = 120  # a bound per command


def test_every_block_is_placed() -> None:
    for b in blocks():
        assert b.section in RUN_HERE or b.section in ELSEWHERE, (
            f"README.md's block under {b.section!r} is neither run by tests/test_readme.py "
            f"nor placed in its ELSEWHERE: {b.text[:200]!r}"
        )
        assert b.lang in ("sh", "python"), f"{b.section!r}: a block marked {b.lang!r}"
    for section, where in ELSEWHERE.items():
        assert (ROOT / where).exists(), (section, where)
        assert any(b.section == section for b in blocks()), f"no block under {section!r} now"


def _env() -> dict[str, str]:
    # This interpreter's `seglog`, `python3` and `python` first, as an activated venv.
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def _run_block(block: Block, base: int, cwd: Path, skip: tuple[str, ...] = ()) -> list[str]:
    """Each command of a sh block, or a python block as a script; their stdout."""
    outputs = []
    if block.lang == "python":
        done = subprocess.run(
            [sys.executable, "-c", with_ports(block.text, base)],
            cwd=cwd,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=COMMAND_S,
        )
        assert done.returncode == 0, f"{block.section}: python block failed:\n{done.stderr}"
        return [done.stdout]
    for command in commands(block):
        if command.startswith(skip):
            continue
        done = subprocess.run(
            ["bash", "-c", with_ports(command, base)],
            cwd=cwd,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=COMMAND_S,
        )
        assert done.returncode == 0, (
            f"{block.section}: `{command}` exited {done.returncode}:\n{done.stdout[-2000:]}\n"
            f"{done.stderr[-2000:]}"
        )
        outputs.append(done.stdout)
    return outputs


def _stop_leftovers(cwd: Path) -> None:
    state = cwd / "data" / "local" / "cluster.json"
    if state.exists():
        subprocess.run(
            [sys.executable, "-m", "seglog.cli", "local", "down", "--data-dir", str(state.parent)],
            capture_output=True,
            timeout=90,
        )


def test_the_quick_start_runs(tmp_path: Path) -> None:
    """The quick start, verbatim but for its set-up lines (tests/test_first_hour.py runs
    those in a fresh venv): in the default suite, as the path every newcomer takes."""
    base = consecutive_free_ports(3, random.Random())
    try:
        (quick,) = section_blocks(QUICK_START, "sh")
        out = _run_block(quick, base, tmp_path, skip=SET_UP)
        run = [c for c in commands(quick) if not c.startswith(SET_UP)]
        consumed = next(o for o, c in zip(out, run, strict=True) if "seglog consume" in c)
        assert sorted(consumed.split(), key=int) == [str(i) for i in range(1, 1001)]
        assert not (tmp_path / "data" / "local").exists()  # stopped and cleaned up
    finally:
        _stop_leftovers(tmp_path)


@pytest.mark.long  # some fifty commands, each a fresh process: minutes on 2 cores
def test_the_rest_of_the_readme_runs(tmp_path: Path) -> None:
    """Every section after the quick start, in order; the Python section starts the
    cluster they run on, "Stop and clean up" stops it."""
    assert shutil.which("kcat"), "kcat is needed (tests/run.sh installs it)"
    base = consecutive_free_ports(3, random.Random())
    try:
        for section in RUN_HERE[1:]:
            for block in section_blocks(section):
                outputs = _run_block(block, base, tmp_path)
                if block.lang == "python" and "consumed" in block.text:
                    assert outputs[0].splitlines()[-1] == "consumed 100", outputs
        leftovers = [p.name for p in tmp_path.iterdir()]
        assert leftovers in ([], ["data"]), leftovers  # "Stop and clean up" removed the rest
    finally:
        _stop_leftovers(tmp_path)


@pytest.mark.parametrize("section", [QUICK_START])
def test_the_quick_start_is_short(section: str) -> None:
    """About twenty lines: venv, install, up, produce, consume, stop, clean up."""
    (quick,) = section_blocks(section, "sh")
    lines = commands(quick)
    assert len(lines) <= 20
    for step in (
        "python3 -m venv",
        "pip install",
        "local up",
        "produce",
        "consume",
        "local down",
        "rm -r",
    ):
        assert any(step in line for line in lines), step
