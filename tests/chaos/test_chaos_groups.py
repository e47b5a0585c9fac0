"""The consumer-group chaos scenario, short: a local cluster, a group of three
confluent-kafka consumers committing under load while the group's coordinator is
SIGKILLed and restarted; every acknowledged record is consumed, committed positions
never go back, the group ends Stable (chaos/group_workload.py)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("confluent_kafka")


@pytest.mark.long
@pytest.mark.timeout(400)
def test_group_consumers_survive_coordinator_kills(tmp_path):
    from seglog.chaos.group_workload import run_groups

    code, summary = run_groups(seed=3, duration=12.0, out=tmp_path / "run", rate=80.0)
    assert code == 0, json.dumps(summary, indent=1)[:4000]
    assert summary["kills"], summary
    assert summary["acknowledged_records"] > 500
    assert summary["lost_records"] == 0 and not summary["went_back"]
    assert (tmp_path / "run" / "report.md").read_text().startswith("# Chaos: consumer groups")
