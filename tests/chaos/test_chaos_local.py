"""A bounded chaos pass against local node processes (`seglog local up`): the
kill-leader and chase-leader scenarios, each for a short stretch, through the
same command line an operator runs. Fails on any violated invariant, and also when
the evidence is incomplete (the final read or a replica never caught up after
healing), printing the summary and the report's path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from chaos_cli import run_chaos

RUN_TIMEOUT_S = 540


@pytest.mark.long  # the default suite's chaos run is leader-cut-off (test_chaos_network.py)
@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_kill_leader_loses_nothing(tmp_path: Path) -> None:
    data = run_chaos(
        "local", "kill-leader", 11, 20, tmp_path / "kl", settle_timeout=45, timeout_s=RUN_TIMEOUT_S
    )
    assert [f for f in data["faults"] if f["name"] == "kill-leader"], "no fault was injected"


@pytest.mark.long
@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_chase_leader_loses_nothing(tmp_path: Path) -> None:
    data = run_chaos(
        "local", "chase-leader", 12, 30, tmp_path / "cl", settle_timeout=45, timeout_s=RUN_TIMEOUT_S
    )
    assert len([f for f in data["faults"] if f["name"] == "chase-leader"]) >= 2, data["faults"]


@pytest.mark.long
@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_many_partitions_overload_recovers_and_loses_nothing(tmp_path: Path) -> None:
    out = tmp_path / "mp"
    run_chaos("local", "many-partitions", 13, 40, out, settle_timeout=60, timeout_s=RUN_TIMEOUT_S)
    events = [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]
    ends = [
        e
        for e in events
        if e.get("type") == "fault" and e.get("name") == "many-partitions" and e["phase"] == "end"
    ]
    assert ends, "the scenario ran to its end"
    assert ends[0]["recovered"] is True, ends
    assert ends[0]["flooded"] > 0, "the flood sent records"


@pytest.mark.long
@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_kill_leader_on_a_compacted_topic_loses_nothing(tmp_path: Path) -> None:
    """Keyed records on a compacted topic: every replica cleans its own log while
    leaders are killed; no last value of a key is lost, and the replicas agree record
    by record below the HW."""
    out = tmp_path / "klc"
    data = run_chaos(
        "local",
        "kill-leader",
        13,
        20,
        out,
        settle_timeout=45,
        timeout_s=RUN_TIMEOUT_S,
        extra=("--compact-keys", "40"),
    )
    assert [f for f in data["faults"] if f["name"] == "kill-leader"], "no fault was injected"
    assert data["meta"]["topic_configs"]["cleanup.policy"] == "compact"
    cleaned = sum(
        log.read_text(errors="replace").count('"event":"log_cleaned"')
        for log in out.glob("cluster/node-*/node.log")
    )
    assert cleaned > 0, "no replica was ever cleaned"
    assert all(rep["identical"] for rep in data["replicas"]), data["replicas"]
