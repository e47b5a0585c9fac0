"""The documentation site (mkdocs.yml, docs/): it builds with `mkdocs build --strict`
(a broken link fails), every page of docs/ and docs/perf/ is in its nav, and every
`seglog ...` command its code blocks show parses with today's command line (synopses
read as written: `...` is the connection, `[--x]` an optional flag, both checked)."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from seglog.cli.main import build_parser

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _pages() -> list[str]:
    return sorted(str(p.relative_to(DOCS)) for p in [*DOCS.glob("*.md"), *DOCS.glob("perf/*.md")])


def _nav_pages(nav: object) -> set[str]:
    if isinstance(nav, str):
        return {nav}
    if isinstance(nav, list):
        return set().union(*(_nav_pages(item) for item in nav))
    if isinstance(nav, dict):
        return set().union(*(_nav_pages(v) for v in nav.values()))
    return set()


def test_the_site_builds_strict(tmp_path: Path) -> None:
    if importlib.util.find_spec("mkdocs") is None:
        pytest.fail("mkdocs is not installed: pip install -e '.[docs]' (tests/run.sh does)")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "site" / "index.html").exists()
    assert (tmp_path / "site" / "architecture" / "index.html").exists()


def test_every_page_is_in_the_nav() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    nav = _nav_pages(yaml.safe_load(config)["nav"])
    missing = [p for p in _pages() if p not in nav]
    assert not missing, f"pages of docs/ missing from mkdocs.yml's nav: {missing}"
    assert all((DOCS / p).exists() for p in nav), sorted(p for p in nav if not (DOCS / p).exists())


def _seglog_commands(text: str) -> list[str]:
    """`seglog ...` lines of a page's indented code blocks, continuations joined."""
    out, pending = [], ""
    for line in text.splitlines():
        if not line.startswith("    "):
            pending = ""
            continue
        line = pending + line[4:]
        if line.rstrip().endswith("\\"):
            pending = line.rstrip()[:-1] + " "
            continue
        pending = ""
        if line.strip().startswith("seglog "):
            out.append(line.strip())
    return out


def test_the_commands_in_the_docs_parse() -> None:
    checked = 0
    for page in _pages():
        for command in _seglog_commands((DOCS / page).read_text()):
            line = command.split(" | ")[0].split(" # ")[0].split("   #")[0]
            line = (
                line.replace(" ... ", " --bootstrap-server H:P ").replace("[", "").replace("]", "")
            )
            argv = shlex.split(line)[1:]
            err = io.StringIO()
            try:
                with contextlib.redirect_stderr(err):
                    _args, extra = build_parser().parse_known_args(argv)
            except SystemExit:
                pytest.fail(f"docs/{page}: `{command}`: {err.getvalue().strip()}")
            assert not extra, f"docs/{page}: `{command}`: unrecognized {extra}"
            checked += 1
    assert checked >= 10  # the pages do show commands
