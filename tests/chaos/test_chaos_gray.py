"""The gray failures of issue 39 as chaos scenarios on local node processes, each for
a short stretch with one client kind (the two alternate), through the command line an
operator runs: broker-frozen (the broker process only), controller-frozen (the
controller process only), slow-node (SIGSTOP/SIGCONT duty cycles), blocked-disk (the
fault file's write_block) and frozen-clock-jump. Each must lose, duplicate and diverge
nothing, and show the fault it was about."""

from __future__ import annotations

from pathlib import Path

import pytest
from chaos_cli import run_chaos

RUN_TIMEOUT_S = 420

CASES = [
    ("broker-frozen", 21, "seglog"),
    ("controller-frozen", 22, "librdkafka"),
    ("slow-node", 23, "seglog"),
    ("blocked-disk", 24, "librdkafka"),
    ("frozen-clock-jump", 25, "seglog"),
]


@pytest.mark.long
@pytest.mark.timeout(RUN_TIMEOUT_S + 60)
@pytest.mark.parametrize(("scenario", "seed", "client"), CASES)
def test_gray_failure_loses_nothing(tmp_path: Path, scenario: str, seed: int, client: str) -> None:
    if client == "librdkafka":
        pytest.importorskip("confluent_kafka")
    data = run_chaos(
        "local",
        scenario,
        seed,
        30,
        tmp_path / scenario,
        settle_timeout=45,
        timeout_s=RUN_TIMEOUT_S,
        extra=("--client", client),
    )
    assert data["counts"]["divergent"] == 0, data["counts"]
    assert [f for f in data["faults"] if f["name"] == scenario], "no fault was injected"
