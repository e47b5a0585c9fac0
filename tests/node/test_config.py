"""NodeConfig: Kafka's names and defaults for the failure-detection settings, the
local cluster's faster profile, and bad values refused with the setting's name."""

from __future__ import annotations

from pathlib import Path

import pytest

from seglog.node.config import NodeConfig
from seglog.node.local_cluster import LOCAL_DEFAULTS, node_properties
from seglog.storage.errors import InvalidConfigError


def test_failure_detection_defaults_are_kafkas() -> None:
    c = NodeConfig.from_properties({"node.id": "1"})
    assert c.broker_session_timeout_ms == 9_000
    assert c.broker_heartbeat_interval_ms == 2_000
    assert c.controller_quorum_election_timeout_ms == 1_000
    assert c.replica_fetch_backoff_ms == 1_000
    assert c.replica_lag_time_max_ms == 30_000


def test_local_cluster_profile_detects_failures_within_a_second(tmp_path: Path) -> None:
    props = node_properties(1, 3, 9092, tmp_path)
    c = NodeConfig.from_properties(props)
    assert c.broker_session_timeout_ms == int(LOCAL_DEFAULTS["broker.session.timeout.ms"])
    assert c.broker_session_timeout_ms < 1_000
    # Several heartbeats fit in a session, so one late heartbeat does not fence a broker.
    assert c.broker_session_timeout_ms >= 4 * c.broker_heartbeat_interval_ms
    assert c.controller_quorum_election_timeout_ms < 1_000
    assert c.replica_fetch_backoff_ms == 100


def test_compose_profile_matches_the_local_one() -> None:
    text = (Path(__file__).resolve().parents[2] / "compose" / "node.properties").read_text()
    settings = dict(
        line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#")
    )
    for key in (
        "broker.session.timeout.ms",
        "broker.heartbeat.interval.ms",
        "controller.quorum.election.timeout.ms",
        "replica.fetch.backoff.ms",
    ):
        assert settings[key].strip() == LOCAL_DEFAULTS[key], key


@pytest.mark.parametrize(
    ("key", "value", "says"),
    [
        ("replica.fetch.backoff.ms", "soon", "Not a number"),
        ("replica.fetch.backoff.ms", "-1", "at least 0"),
        ("controller.quorum.election.timeout.ms", "0", "at least 1"),
        ("broker.session.timeout.ms", "1.5", "Not a number"),
    ],
)
def test_bad_values_name_the_setting(key: str, value: str, says: str) -> None:
    with pytest.raises(InvalidConfigError) as e:
        NodeConfig.from_properties({"node.id": "1", key: value})
    assert key in str(e.value) and says in str(e.value)
