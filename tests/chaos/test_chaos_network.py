"""Network faults on real nodes (docs/network-faults.md): on the local target through
its per-link proxies, on compose with iptables and delay proxies in the nodes' namespaces,
and the soak that runs every scenario in turn on one cluster. Each run goes through
the operator's command line and fails on any violated invariant or incomplete
evidence (tests/chaos/chaos_cli.py)."""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path

import pytest
from chaos_cli import run_chaos

from seglog.chaos.compose_target import BUILD_SCRIPT, compose_down, docker_unavailable

RUN_TIMEOUT_S = 540


def _starts(data: dict, name: str) -> list[dict]:
    """The report's spans of fault `name`, each with its start's detail."""
    return [f["detail"] for f in data["faults"] if f["name"] == name]


@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_leader_cut_off_from_its_peers_loses_nothing(tmp_path: Path) -> None:
    """The leader keeps its clients but hears nothing from the other nodes: the rest
    elect a new leader, nothing the old one took alone is acknowledged (min ISR 2),
    and its log is truncated to the new leader's when the cut heals."""
    out = tmp_path / "lco"
    data = run_chaos(
        "local", "leader-cut-off", 31, 20, out, settle_timeout=45, timeout_s=RUN_TIMEOUT_S
    )
    cuts = _starts(data, "leader-cut-off")
    assert cuts, "no cut was made"
    leader = cuts[0]["leader"]
    assert all(f"{leader}->" in line or f"->{leader}" in line for line in cuts[0]["links"])
    fenced = sum(
        log.read_text(errors="replace").count("fenced")
        for log in out.glob("cluster/node-*/node.log")
    )
    assert fenced > 0, "no node logged being fenced: the cut did not cut"


@pytest.mark.long
@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
@pytest.mark.parametrize("scenario", ["bridge", "one-way", "leader-cut-from-followers"])
def test_partial_partitions_on_local_lose_nothing(tmp_path: Path, scenario: str) -> None:
    data = run_chaos(
        "local", scenario, 32, 30, tmp_path / scenario, settle_timeout=45, timeout_s=RUN_TIMEOUT_S
    )
    assert _starts(data, scenario), "no fault was injected"


@pytest.mark.long
@pytest.mark.timeout(900)
def test_soak_runs_every_scenario_in_turn_on_one_cluster(tmp_path: Path) -> None:
    out = tmp_path / "soak"
    data = run_chaos(
        "local", "soak", 33, 120, out, settle_timeout=60, timeout_s=840, extra=("--each", "30")
    )
    names = [name for name, _ in data["meta"]["plan"]]
    assert len(names) == 4 and len(set(names)) == 4, names
    events = [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]
    ran = [e["scenario"] for e in events if e.get("type") == "phase" and e["name"] == "faults"]
    assert ran == names, "the history shows each planned scenario's fault phase in turn"
    assert data["faults"], "no fault was injected"


_SKIP = docker_unavailable()


@pytest.mark.long
@pytest.mark.skipif(_SKIP is not None, reason=f"compose network test: {_SKIP}")
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("scenario", ["bridge", "lossy-links", "slow-links"])
def test_network_faults_on_compose_lose_nothing(tmp_path: Path, scenario: str) -> None:
    build = subprocess.run(
        ["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, timeout=1200
    )
    assert build.returncode == 0, f"build-image.sh failed:\n{build.stderr[-3000:]}"
    project = f"seglog-net-test-{uuid.uuid4().hex[:8]}"
    try:
        data = run_chaos(
            "compose", scenario, 34, 40, tmp_path / scenario, settle_timeout=60,
            timeout_s=RUN_TIMEOUT_S, extra=("--project", project),
        )  # fmt: skip
    finally:
        compose_down(project)
    starts = _starts(data, scenario)
    assert starts, "no fault was injected"
    # What the first fault put on the links: the bridge drops or delays, lossy-links
    # loses and duplicates packets ("1->2 replication: loss 1%, duplicate 1%"),
    # slow-links delays (through the delay proxies: no sch_netem needed).
    words = {
        "bridge": ("drop", "delay"),
        "lossy-links": ("loss", "duplicate"),
        "slow-links": ("delay",),
    }[scenario]
    assert any(w in line for line in starts[0]["links"] for w in words), starts[0]["links"]
    if scenario == "slow-links":
        (first, *_) = [f for f in data["faults"] if f["name"] == scenario]
        assert first["end_detail"]["delayed_bytes"] > 0, first  # the proxies held bytes
