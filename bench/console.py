"""The web console under a big cluster: a 3-node `seglog local up` holding --partitions
partitions (5,000 by default, in --topics topics, RF=3), and `seglog console` on it.

* server_ms — per page (the overview, the first page of the topic list, a filtered
  topic list, one topic's page), the median and p95 of --requests GETs, timed from the
  request to the last byte (loopback, one client);
* load_ms — per page, headless Chromium's navigation timing (start to the load event)
  over --loads loads, median: what a viewer waits for;
* refresh_s — how long the console's one shared refresh of the whole cluster takes
  (Metadata, DescribeQuorum per node, each node's /metrics);
* console_cores — the console process's CPU over --idle-seconds with the overview open
  in the browser (its refresher and the live stream), in cores.

Writes a plot (--plot, default docs/perf/console.png) and prints one JSON object as its
last line. With 2 cores the nodes, the console, the browser and this client share the
machine; quote the load average with the figures.

    python bench/console.py [--partitions 5000] [--topics 50] [--requests 20] [--loads 5]
                            [--idle-seconds 10] [--plot PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from seglog.bench.options import save_plot
from seglog.client.admin import Admin, NewTopic
from seglog.harness.browser import browser
from seglog.harness.ports import consecutive_free_ports, free_ports

ROOT = Path(__file__).resolve().parent.parent

TICKS = os.sysconf("SC_CLK_TCK")


def say(*args: object) -> None:
    print(*args, file=sys.stderr, flush=True)


def seglog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "seglog.cli", *args], capture_output=True, text=True, timeout=180
    )


def get(url: str) -> tuple[float, bytes]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as r:
        body = r.read()
        assert r.status == 200, (url, r.status)
    return (time.perf_counter() - started) * 1000, body


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def wait_snapshot(url: str, partitions: int, timeout_s: float) -> dict[str, object]:
    deadline = time.monotonic() + timeout_s
    last: dict[str, object] = {}
    while time.monotonic() < deadline:
        try:
            last = json.loads(get(url + "/api/snapshot")[1])
            summary = last["summary"]
            assert isinstance(summary, dict)
            if summary["partitions"] >= partitions and not summary["offline"]:
                return last
        except OSError:
            pass
        time.sleep(1)
    raise RuntimeError(f"the console did not see {partitions} partitions: {last}")


def plot(pages: dict[str, dict[str, float]], path: Path, partitions: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(pages)
    x = range(len(names))
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.bar(
        [i - 0.2 for i in x],
        [pages[n]["server_ms_p50"] for n in names],
        0.4,
        label="server (median)",
    )
    ax.bar(
        [i + 0.2 for i in x],
        [pages[n]["load_ms_p50"] for n in names],
        0.4,
        label="page load in Chromium (median)",
    )
    ax.set_xticks(list(x), names)
    ax.set_ylabel("ms")
    ax.set_title(f"seglog console, {partitions:,} partitions on 3 nodes")
    ax.legend()
    save_plot(fig, path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--partitions", type=int, default=5000)
    ap.add_argument("--topics", type=int, default=50)
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--loads", type=int, default=5)
    ap.add_argument("--idle-seconds", type=float, default=10.0)
    ap.add_argument("--plot", type=Path, default=ROOT / "docs" / "perf" / "console.png")
    args = ap.parse_args()
    if args.partitions < args.topics or args.topics < 1:
        ap.error("--partitions must be at least --topics, and --topics at least 1")

    with tempfile.TemporaryDirectory(prefix="seglog-bench-console-") as tmp:
        data_dir = Path(tmp) / "local"
        base = consecutive_free_ports(3, random.Random())
        up = seglog(
            "local",
            "up",
            "--detach",
            "--no-console",
            "--data-dir",
            str(data_dir),
            "--base-port",
            str(base),
        )
        if up.returncode != 0:
            raise RuntimeError(up.stderr)
        console = None
        try:
            bootstrap = up.stdout.splitlines()[0].split(": ", 1)[1]
            per_topic = args.partitions // args.topics
            names = [f"bench-{i:04d}" for i in range(args.topics)]
            started = time.monotonic()
            with Admin(bootstrap, request_timeout_ms=120_000) as admin:
                for i, name in enumerate(names):
                    extra = args.partitions - per_topic * args.topics if i == 0 else 0
                    admin.create_topics([NewTopic(name, per_topic + extra, 3)])
            say(f"created {args.partitions} partitions in {time.monotonic() - started:.1f}s")
            (port,) = free_ports(1)
            log = open(data_dir / "console.log", "wb")  # noqa: SIM115 - the child's
            console = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "seglog.cli",
                    "console",
                    "--bootstrap-server",
                    bootstrap,
                    "--port",
                    str(port),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            log.close()
            url = f"http://127.0.0.1:{port}"
            snapshot = wait_snapshot(url, args.partitions, 300)
            say(f"console sees {snapshot['summary']}")
            pages = {
                "overview": "/",
                "topics": "/topics",
                "topics?q=": "/topics?q=bench-00",
                "topic": f"/topics/{names[-1]}",
            }
            results: dict[str, dict[str, float]] = {}
            for label, path in pages.items():
                times = sorted(get(url + path)[0] for _ in range(args.requests))
                results[label] = {
                    "server_ms_p50": round(statistics.median(times), 1),
                    "server_ms_p95": round(times[max(0, round(0.95 * len(times)) - 1)], 1),
                }
            driver = browser()
            try:
                for label, path in pages.items():
                    loads = []
                    for _ in range(args.loads):
                        driver.get(url + path)
                        loads.append(
                            driver.execute_script(
                                "const n = performance.getEntriesByType('navigation')[0];"
                                "return n.loadEventEnd - n.startTime;"
                            )
                        )
                    results[label]["load_ms_p50"] = round(statistics.median(loads), 1)
                driver.get(url + "/")
                before = cpu_s(console.pid)
                time.sleep(args.idle_seconds)
                cores = (cpu_s(console.pid) - before) / args.idle_seconds
            finally:
                driver.quit()
            refresh_s = json.loads(get(url + "/api/snapshot")[1])["refresh_s"]
        finally:
            if console is not None:
                console.terminate()
                console.wait(30)
            seglog("local", "down", "--data-dir", str(data_dir))
    for label, r in results.items():
        say(
            f"{label:<10} server p50 {r['server_ms_p50']:>7.1f} ms"
            f"  p95 {r['server_ms_p95']:>7.1f} ms  page load p50 {r['load_ms_p50']:>7.1f} ms"
        )
    say(
        f"shared refresh of the cluster: {refresh_s:.2f}s; console CPU with one live viewer: "
        f"{cores:.3f} cores; load average {os.getloadavg()[0]:.2f}"
    )
    plot(results, args.plot, args.partitions)
    say(f"plot: {args.plot}")
    print(
        json.dumps(
            {
                "partitions": args.partitions,
                "topics": args.topics,
                "pages": results,
                "refresh_s": round(refresh_s, 3),
                "console_cores": round(cores, 3),
                "load_average_1m": round(os.getloadavg()[0], 2),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
