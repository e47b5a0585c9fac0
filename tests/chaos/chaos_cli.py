"""Runs `python -m seglog.chaos run ...` the way an operator does and turns its report
into test failures: a harness error, a violated invariant (with examples), and
incomplete evidence (the final read or a replica never caught up after healing)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any


def run_chaos(
    target: str,
    scenario: str,
    seed: int,
    duration: int,
    out: Path,
    *,
    settle_timeout: int,
    timeout_s: float,
    extra: tuple[str, ...] = (),
) -> dict[str, Any]:
    """One run; returns its report.json after checking that every invariant held.
    `scenario` "soak" runs the soak command (every scenario of the target in turn)."""
    command = "soak" if scenario == "soak" else "run"
    argv = [sys.executable, "-m", "seglog.chaos", command, "--target", target]
    if command == "run":
        argv += ["--scenario", scenario]
    argv += ["--seed", str(seed), "--duration", str(duration)]
    argv += ["--settle-timeout", str(settle_timeout), "--out", str(out), *extra]
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"{' '.join(argv)} did not finish in {timeout_s}s") from e
    summary = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else "(no summary)"
    print(summary)
    report = out / "report.json"
    assert report.exists(), f"no report; stderr:\n{r.stderr[-3000:]}"
    data: dict[str, Any] = json.loads(report.read_text())
    assert r.returncode != 2, f"harness error: {data.get('harness_error')}\n{summary}"
    failed = data["failed_invariants"]
    examples = json.dumps({k: data["examples"][k][:3] for k in failed})[:3000]
    assert r.returncode != 1, f"invariants violated: {failed}\n{summary}\nexamples: {examples}"
    assert r.returncode == 0, (
        f"incomplete (liveness): {data['notes']}\n{summary}\nsee {out / 'report.md'}"
    )
    counts = data["counts"]
    assert counts["acknowledged"] > 0, f"nothing was acknowledged: {summary}"
    assert counts["lost"] == 0 and counts["duplicated"] == 0, summary
    assert data["final_read_complete"] is True, summary
    assert (out / "timeline.png").exists(), "the report has no timeline"
    return data
