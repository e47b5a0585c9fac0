"""What the benchmarks' command lines and outputs share: the options every bench means
the same by (--dir, --keep, --plot, --seed, --phases, --profile-node), the values of
unset options with and without --quick, comma lists of positive integers or of known
names, the temp directory a run works in, and writing a plot."""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_OPTIONS: dict[str, dict[str, Any]] = {
    "--dir": {"type": Path, "default": None, "help": "parent of the temp dir (/tmp)"},
    "--keep": {"action": "store_true", "help": "keep the data directory"},
    "--plot": {"type": Path, "default": None, "help": "write a PNG here"},
    "--seed": {"type": int, "default": 42},
}


def add_options(parser: argparse.ArgumentParser, *names: str) -> None:
    """The shared options among --dir, --keep, --plot and --seed, as every bench means them."""
    for name in names:
        parser.add_argument(name, **_OPTIONS[name])


def add_phases(parser: argparse.ArgumentParser, phases: Sequence[str]) -> None:
    parser.add_argument(
        "--phases", default=",".join(phases), help="comma list of " + ",".join(phases)
    )


def add_profile_node(parser: argparse.ArgumentParser, top: bool = True) -> None:
    parser.add_argument("--profile-node", action="store_true", help="cProfile the nodes")
    if top:
        parser.add_argument("--profile-top", type=int, default=30)


def quick_or_full(args: argparse.Namespace, **values: tuple[Any, Any]) -> None:
    """Options left unset (None) take their --quick value or their full-run one:
    `quick_or_full(args, seconds=(1.5, 8.0))`."""
    for name, (quick, full) in values.items():
        if getattr(args, name) is None:
            setattr(args, name, quick if args.quick else full)


def known_names(
    parser: argparse.ArgumentParser, option: str, text: str, known: Sequence[str]
) -> list[str]:
    """A comma list of some of `known`; the parser's error names the unknown ones."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        parser.error(f"{option}: unknown or none {unknown}; choose from {list(known)}")
    return names


def positive_ints(parser: argparse.ArgumentParser, option: str, text: str) -> list[int]:
    """A comma list of at least one positive integer; the parser's error says what was wrong."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        parser.error(f"{option} must be a comma list of integers, got {text!r}")
    if not values or any(v <= 0 for v in values):
        parser.error(f"{option} needs at least one value, each positive, got {text!r}")
    return values


def work_dir(parent: Path | None, prefix: str) -> Path:
    """A fresh temp directory for a run's data, under `parent` (made if missing) or /tmp."""
    if parent is not None:
        parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=prefix, dir=parent))


def save_plot(fig: Any, path: Path, dpi: int = 100) -> None:
    """Lay out, write and close a matplotlib figure (its folder made if missing)."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
