"""The dashboard page (compose/prometheus/consoles/seglog.html) rendered in headless
Chromium, and what it wrote into its DOM: each plot's points and series counts
(tests/node/test_dashboard.py, tests/compose/test_compose_monitoring.py)."""

from __future__ import annotations

import json
import re
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[1]
CONSOLES = ROOT / "compose" / "prometheus" / "consoles"
T = TypeVar("T")
PLOTS = ("urp", "offline", "requests", "latency", "bytes", "lag", "idle")


def render(url: str) -> str:
    """The page's DOM once its script ran (Chromium's virtual time waits for its
    fetches)."""
    done = subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--virtual-time-budget=15000",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def figures(dom: str) -> dict[str, tuple[int, int]]:
    """(points, series) of each plot, as the page wrote them."""
    out = {}
    for m in re.finditer(r"<figure ([^>]*)>", dom):
        attrs = dict(re.findall(r'([\w-]+)="([^"]*)"', m.group(1)))
        out[attrs["id"].removeprefix("plot-")] = (
            int(attrs["data-points"]),
            int(attrs["data-series"]),
        )
    return out


def prometheus_query(port: int, query: str) -> list[dict[str, Any]]:
    """An instant query's result."""
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    with urllib.request.urlopen(url, timeout=5) as r:
        answer = json.loads(r.read())
    assert answer["status"] == "success", answer
    return list(answer["data"]["result"])


def wait_for(what: str, probe: Callable[[], T], timeout_s: float = 30.0) -> T:
    """probe() until it returns something true (an OSError counts as not yet)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            got = probe()
        except OSError:
            got = None
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError(f"not within {timeout_s}s: {what}")
