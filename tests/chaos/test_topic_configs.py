"""The chaos topic's segment size follows the load, so that rolls come as often per
record at any rate (fixed 16 KiB segments at 2,700 records/s had a node hold more
files than its descriptor limit within 45 minutes of a soak)."""

from __future__ import annotations

from seglog.chaos.__main__ import SEGMENT_SIZES_RATE, run_topic_configs
from seglog.chaos.scenarios import SCENARIOS


def test_the_smallest_segments_asked_at_the_rate_they_were_chosen_for() -> None:
    scenarios = [SCENARIOS["kill-leader"], SCENARIOS["storm"], SCENARIOS["kill-during-roll"]]
    configs = run_topic_configs(scenarios, SEGMENT_SIZES_RATE)
    assert configs == {"min.insync.replicas": "2", "segment.bytes": "16384"}


def test_segments_grow_with_the_rate_asked() -> None:
    scenarios = [SCENARIOS["kill-during-roll"]]
    assert run_topic_configs(scenarios, 900)["segment.bytes"] == str(16384 * 15)
    assert run_topic_configs(scenarios, 650)["segment.bytes"] == str(173 * 1024)
    # Unpaced (calibration) and slower runs keep the scenario's own size.
    assert run_topic_configs(scenarios, 0)["segment.bytes"] == "16384"
    assert run_topic_configs(scenarios, 30)["segment.bytes"] == "16384"


def test_scenarios_without_segment_sizes_and_compacted_topics() -> None:
    assert run_topic_configs([SCENARIOS["kill-leader"]], 900) == {"min.insync.replicas": "2"}
    compacted = run_topic_configs([SCENARIOS["kill-leader"]], 900, compact_keys=10)
    assert compacted["cleanup.policy"] == "compact"
    assert compacted["segment.bytes"] == "65536"
