"""An opt-in build of seglog with the leader's hot path compiled by mypyc, for measuring
it (docs/perf/data-path.md, "The hot path compiled with mypyc (measured)").

    python bench/build_compiled.py [--target /tmp/seglog-compiled] [--modules a,b] [--jobs 1]

1. installs a non-editable copy of seglog into TARGET (`pip install --no-deps --target`,
   from a copy of the source tree, so that nothing is built inside the repository);
2. compiles the modules of HOT_PATH (or --modules) there with mypyc, gcc through
   setuptools' build_ext, and leaves each compiled module's .so beside its .py (Python
   imports an extension module before a source file of the same name).

Run anything with `PYTHONPATH=TARGET PYTHONSAFEPATH=1` to import the compiled modules
(TARGET comes before the editable install on sys.path; PYTHONSAFEPATH keeps `python -m`
from putting the working directory first, where the repository's own seglog/ would win).
Check with `python -c "import seglog.node.kafka.hot_codec as m; print(m.__file__)"` (.so).
The default install (`pip install -e .`) builds nothing:
this script is the only place mypyc runs. The last line is JSON: what compiled, the
build's seconds, the .so files.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The leader's hot path on the event loop (a one-record acks=all Produce and its two
# follower fetches), as far as mypyc accepts it; what stays interpreted and why is in
# INTERPRETED and in docs/perf/data-path.md.
HOT_PATH = (
    # the Kafka listener on the loop: frames, requests, answers
    "seglog.node.kafka.hot_codec",
    "seglog.node.kafka.codec",
    "seglog.node.kafka.connection",
    "seglog.node.kafka.loop_connection",
    "seglog.node.kafka.loop_server",
    "seglog.node.kafka.deferred",
    "seglog.node.kafka.handlers",
    "seglog.node.kafka.replica_fetch",
    "seglog.node.kafka.fetch_requests",
    "seglog.node.security.kafka_gate",
    "seglog.node.event_loop",
    "seglog.node.idle_meter",
    # the node's produce and fetch: sessions, parked fetches and produces, metrics
    "seglog.node.session_fetch",
    "seglog.node.fetch_session",
    "seglog.node.fetch_wakeups",
    "seglog.node.partition_reads",
    "seglog.node.partition_requests",
    "seglog.node.hosted_partition",
    "seglog.node.produce_purgatory",
    "seglog.node.request_histograms",
    "seglog.node.metrics",
    # replication: the partition's rules (its mixins are traits, replication/mypyc_marks.py)
    "seglog.replication.partition_replica",
    "seglog.replication.isr_changes",
    "seglog.replication.leader_reads",
    "seglog.replication.follower_fetcher",
    "seglog.replication.isr_deadlines",
    "seglog.node.replica_manager",
    "seglog.node.replica_timers",
    # storage: the log's append and read, producer state, record batch validation
    "seglog.storage.log",
    "seglog.storage.log_flushing",
    "seglog.storage.log_txns",
    "seglog.storage.local_log",
    "seglog.storage.segment",
    "seglog.storage.offset_index",
    "seglog.storage.time_index",
    "seglog.storage.mapped_index",
    "seglog.storage.leader_epoch_cache",
    "seglog.storage.producer_state",
    "seglog.storage.record_batch",
    "seglog.storage.log_validator",
    "seglog.storage.file_slice",
    "seglog.storage.varint",
    "seglog.storage.crc",
)

# Hot modules left interpreted, and why (printed in the output, written into the docs).
INTERPRETED: dict[str, str] = {
    "seglog.replication.replica_messages": "ReplicaInvariantError(AssertionError): mypyc "
    "does not extend most builtin exceptions; and the ReplicaLog protocol's `= ...` "
    "defaults, which mypyc evaluates",
    "seglog.replication.fetch_state": "IllegalFetchTransition(AssertionError), as above",
    "seglog.storage.producer_state_entry": "ProducerStateEntry.copy makes its clone with "
    "object.__new__ (skipping __init__), which a native class refuses",
    "seglog.node.replica_fetcher": "a follower's fetch rounds: mypy finds type errors in it "
    "(node/ is not in tests/typecheck.py), which mypyc refuses",
    "seglog.node.kafka.replica_client": "the follower's Kafka-protocol fetcher: as above",
}

MYPY_CONFIG = """\
[mypy]
python_version = 3.11
# Only the compiled modules must type-check; the modules they import are read for
# their types (as pyproject's overrides read node/).
follow_imports = silent
ignore_missing_imports = True
"""

SETUP = """\
import sys
from setuptools import setup
from mypyc.build import mypycify

paths = sys.argv[1].split(",")
del sys.argv[1]
setup(
    name="seglog-mypyc",
    # multi_file (a C file per module, compiled in parallel) fails for a single module.
    ext_modules=mypycify(
        ["--config-file", {config!r}, *paths], opt_level="3", multi_file=len(paths) > 1
    ),
)
"""


def module_path(module: str) -> str:
    """seglog.node.kafka.hot_codec -> seglog/node/kafka/hot_codec.py (in the target)."""
    return module.replace(".", "/") + ".py"


def install_copy(target: Path, work: Path) -> None:
    """seglog installed (not editable) into `target` from a copy of the source tree."""
    source = work / "src"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis"
        ),
    )
    if target.exists():
        shutil.rmtree(target)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), "."],
        cwd=source,
        check=True,
    )


def compile_modules(target: Path, work: Path, modules: Sequence[str], jobs: int) -> None:
    config = work / "mypy.ini"
    config.write_text(MYPY_CONFIG)
    setup = work / "mypyc_setup.py"
    setup.write_text(SETUP.format(config=str(config)))
    paths = ",".join(module_path(m) for m in modules)
    result = subprocess.run(
        [
            sys.executable,
            str(setup),
            paths,
            "build_ext",
            "--inplace",
            "--build-temp",
            str(work / "build-temp"),
            "--parallel",
            str(jobs),
        ],
        cwd=target,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    if result.returncode != 0:
        # mypy's errors (what mypyc refused) or the compiler's last words.
        lines = result.stdout.splitlines()
        errors = [line for line in lines if ": error:" in line] or lines[-30:]
        raise SystemExit("mypyc build failed:\n" + "\n".join(errors))
    # mypyc writes its generated C under build/ in the working directory.
    shutil.rmtree(target / "build", ignore_errors=True)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", type=Path, default=Path("/tmp/seglog-compiled"))
    parser.add_argument(
        "--modules", default=",".join(HOT_PATH), help="comma list of modules (HOT_PATH)"
    )
    parser.add_argument("--jobs", type=int, default=1, help="parallel C compiles (1)")
    args = parser.parse_args(argv)
    args.modules = [m.strip() for m in args.modules.split(",") if m.strip()]
    bad = [m for m in args.modules if not m.startswith("seglog.")]
    if bad or not args.modules or args.jobs < 1:
        parser.error(f"--modules: seglog.* modules, at least one (got {bad}); --jobs >= 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    target = args.target.resolve()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="seglog-mypyc-") as tmp:
        work = Path(tmp)
        install_copy(target, work)
        installed = time.monotonic()
        compile_modules(target, work, args.modules, args.jobs)
    done = time.monotonic()
    libraries = sorted(str(p.relative_to(target)) for p in target.rglob("*.so"))
    out = {
        "build": "mypyc",
        "target": str(target),
        "compiled": args.modules,
        # Why the hot modules HOT_PATH leaves out stay interpreted (for the default list).
        "interpreted": INTERPRETED if list(args.modules) == list(HOT_PATH) else None,
        "install_s": round(installed - started, 1),
        "compile_s": round(done - installed, 1),
        "libraries": libraries,
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "usage": f"PYTHONPATH={target} PYTHONSAFEPATH=1 python ...",
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
