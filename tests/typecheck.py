"""mypy --strict on storage/, controller/, replication/ and sim/ (tests/run.sh runs it).

The repository maps `seglog.<pkg>` to top-level folders (pyproject's package-dir), which
mypy cannot follow through an editable install: this lays a `seglog/` tree of symlinks
in a temporary directory and checks the packages there, with pyproject's [tool.mypy]."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("storage", "controller", "replication", "sim", "node", "client", "proto")
CHECKED = ("seglog.storage", "seglog.controller", "seglog.replication", "seglog.sim")


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="seglog-mypy-") as tmp:
        tree = Path(tmp) / "seglog"
        tree.mkdir()
        (tree / "__init__.py").write_text("")
        for name in PACKAGES:
            (tree / name).symlink_to(ROOT / name)
        args = [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")]
        for package in CHECKED:
            args += ["-p", package]
        return subprocess.call(args, cwd=tmp)


if __name__ == "__main__":
    sys.exit(main())
