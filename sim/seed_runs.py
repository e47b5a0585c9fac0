"""The command line the seeded coordinator simulators share (sim/group_sim.py,
sim/txn_sim.py): replay one seed or run a range of them, each failure printed, and a
count at the end."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence


class SimInvariantError(AssertionError):
    """An invariant broke: the message names the seed and the step."""


def seeds_main(
    prog: str, run_seed: Callable[[int, bool], object], argv: Sequence[str] | None
) -> int:
    """`run_seed(seed, verbose)` for `--seed` or each of `--seeds` from `--start`; exit
    status 1 if any raised SimInvariantError."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--seed", type=int, help="replay one seed")
    parser.add_argument("--seeds", type=int, default=1000, help="run seeds START..START+N-1")
    parser.add_argument("--start", type=int, default=0)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    seeds = [args.seed] if args.seed is not None else range(args.start, args.start + args.seeds)
    started = time.monotonic()
    failed = 0
    for seed in seeds:
        try:
            run_seed(seed, args.verbose)
        except SimInvariantError as e:
            failed += 1
            print(f"FAIL {e}", file=sys.stderr)
    n = len(seeds)
    print(f"{n - failed}/{n} seeds passed in {time.monotonic() - started:.1f}s")
    return 1 if failed else 0
