"""The chaos workload with librdkafka (`--client librdkafka`): confluent-kafka
idempotent producers, assigned consumers and two members of one consumer group that
commit what they read, all on the Kafka listeners of a local cluster whose partition
leaders are killed. Every invariant must hold, and the group must have committed:
the checker's commit invariants judge real commits, not an empty list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from chaos_cli import run_chaos

RUN_TIMEOUT_S = 480


@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
def test_librdkafka_workload_with_a_committing_group_loses_nothing(tmp_path: Path) -> None:
    out = tmp_path / "rdk"
    data = run_chaos(
        "local",
        "kill-leader",
        5,
        14,  # seconds of faults: the kill comes at once, its restart a third later
        out,
        settle_timeout=60,
        timeout_s=RUN_TIMEOUT_S,
        extra=("--client", "librdkafka"),
    )
    assert data["meta"]["client"] == "librdkafka"
    assert [f for f in data["faults"] if f["name"] == "kill-leader"], "no fault was injected"
    events = [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]
    commits = [e for e in events if e["type"] == "commit"]
    members = {e["process"] for e in commits}
    assert members == {"g0", "g1"}, f"commits by {members}"
    assigned = [e for e in events if e["type"] == "seek" and e.get("reason") == "assigned"]
    assert {e["partition"] for e in assigned} == set(range(6)), assigned
    group_polls = [e for e in events if e["type"] == "poll" and "group" in e]
    assert len(group_polls) >= data["counts"]["acknowledged"] // 2, "the group read little"
