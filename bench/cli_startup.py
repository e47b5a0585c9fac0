"""How long `seglog --help`, `seglog --version` and a refused `seglog topics --list`
take, wall clock, each run N times in a fresh process (the median and the worst).
The goal: a newcomer's help and typos answered at once (--help built 0.5-1.2 s of
imports before the CLI imported lazily), and a wrong address refused in about a
second instead of after 30 s of retries. The last line is one JSON object.

    python bench/cli_startup.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

from seglog.harness.ports import free_ports

HELP_GOAL_S = 0.5
REFUSED_GOAL_S = 1.5


def _wall(argv: list[str], runs: int) -> dict[str, float]:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, capture_output=True, timeout=120)
        times.append(time.perf_counter() - started)
    return {"median_s": round(statistics.median(times), 3), "max_s": round(max(times), 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    seglog = [sys.executable, "-m", "seglog.cli"]
    (port,) = free_ports(1)
    result = {
        "help": _wall([*seglog, "--help"], args.runs),
        "version": _wall([*seglog, "--version"], args.runs),
        "refused_topics_list": _wall(
            [*seglog, "topics", "--bootstrap-server", f"127.0.0.1:{port}", "--list"], args.runs
        ),
        "python_startup": _wall([sys.executable, "-c", "pass"], args.runs),
    }
    for name, figures in result.items():
        print(f"{name}: median {figures['median_s']}s, worst {figures['max_s']}s")
    result["help_goal_met"] = result["help"]["median_s"] <= HELP_GOAL_S  # type: ignore[assignment]
    result["refused_goal_met"] = (  # type: ignore[assignment]
        result["refused_topics_list"]["median_s"] <= REFUSED_GOAL_S
    )
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
