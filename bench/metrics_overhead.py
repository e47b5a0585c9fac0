"""Metric collection overhead: a node's produce throughput while its `/metrics` is scraped
every second, as a ratio to its throughput while nobody scrapes it (goal: >= 0.95).

One node process on loopback (metrics.port on), one topic of --partitions partitions.
The load is bench/node.py's produce_raw: pre-serialized gRPC ProduceRequests of
--request-bytes (1 KiB records in ~16 KiB batches over every partition, acks=1) kept
--in-flight at a time. The run alternates phases of --seconds, unscraped and scraped,
for --rounds rounds, the order swapped every round (A B, B A, ...) so that a drift of
the machine (the page cache filling, other load) weighs on both sides alike. A scraped
phase GETs /metrics every --scrape-interval seconds from a process of its own, started
once before the first phase (as a Prometheus server runs: its parsing must not take
the load generator's GIL, nor its start-up fall in a timed phase), and checks each
answer parses. Last, the node's own CPU time per scrape is measured over 100
back-to-back scrapes with no produce running: at one scrape a second, that divided
by 1000 ms is the share of a core collection costs, the floor of the overhead.

The ratio is the sum of the scraped phases' MiB/s over the unscraped phases' (a mean
over the rounds); each round's own ratio is printed too, with the machine's load
average, and their median (less swayed by one disturbed phase) goes in the JSON.
The last stdout line is one JSON object; everything before it is progress.

    python bench/metrics_overhead.py [--seconds S] [--rounds N] [--quick] [--dir D]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from seglog.bench.measure import Batches, say
from seglog.bench.options import add_options, work_dir
from seglog.client.admin import Admin, NewTopic
from seglog.harness.node_process import NodeProcess

ROOT = Path(__file__).resolve().parents[1]
TARGET_RATIO = 0.95


class ScrapeLoop:
    """GETs /metrics every `interval` seconds until stopped; counts scrapes, their
    time and the samples each returned (checking each answer parses)."""

    def __init__(self, url: str, interval: float) -> None:
        self.url = url
        self.interval = interval
        self.stop_event = threading.Event()
        self.scrapes = 0
        self.seconds = 0.0
        self.samples = 0
        self.error: str | None = None

    def run(self) -> None:
        next_at = time.monotonic()
        # Bounded by stop_event: one scrape per interval.
        while not self.stop_event.is_set():
            t0 = time.perf_counter()
            try:
                with urllib.request.urlopen(self.url, timeout=10) as r:
                    text = r.read().decode()
                self.samples = sum(len(f.samples) for f in text_string_to_metric_families(text))
            except (OSError, ValueError) as e:
                self.error = f"{type(e).__name__}: {e}"
                return
            self.seconds += time.perf_counter() - t0
            self.scrapes += 1
            next_at += self.interval
            self.stop_event.wait(max(0.0, next_at - time.monotonic()))


class Scraper:
    """ScrapeLoops in one long-lived process of its own, as a Prometheus server is: its
    parsing must not take the load generator's GIL, and its start-up must not fall in
    a timed phase. `begin()` starts scraping, `end()` stops it and reads what it did
    (one JSON line); `close()` ends the process."""

    def __init__(self, url: str, interval: float) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, __file__, "--scrape-child", url, str(interval)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        ready = self._line()  # imports done, before the first phase
        if ready.strip() != "ready":
            raise RuntimeError(f"the scraper process did not start: {ready!r}")
        self.scrapes = 0
        self.seconds = 0.0
        self.samples = 0
        self.error: str | None = None

    def _line(self) -> str:
        assert self.proc.stdout is not None
        return self.proc.stdout.readline()

    def _send(self, command: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def begin(self) -> None:
        self._send("begin")

    def end(self) -> None:
        self._send("end")
        line = self._line()
        try:
            result = json.loads(line)
        except ValueError:
            self.error = f"the scraper process answered {line!r}"
            return
        self.scrapes, self.seconds = result["scrapes"], result["seconds"]
        self.samples, self.error = result["samples"], result["error"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def scrape_child(url: str, interval: float) -> int:
    """The scraper process: `begin` / `end` lines on stdin, a JSON line per `end`."""
    print("ready", flush=True)
    loop: ScrapeLoop | None = None
    thread: threading.Thread | None = None
    # Bounded by stdin: one command per line until the parent closes it.
    for command in sys.stdin:
        if command.strip() == "begin" and loop is None:
            loop = ScrapeLoop(url, interval)
            thread = threading.Thread(target=loop.run, daemon=True)
            thread.start()
        elif command.strip() == "end" and loop is not None and thread is not None:
            loop.stop_event.set()
            thread.join(timeout=15)
            result = {
                "scrapes": loop.scrapes,
                "seconds": loop.seconds,
                "samples": loop.samples,
                "error": loop.error,
            }
            print(json.dumps(result), flush=True)
            loop = thread = None
    return 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def scrape_cost(url: str, pid: int, scrapes: int) -> float:
    """The node's CPU milliseconds per scrape, over back-to-back scrapes of a node
    nothing else loads (a figure the machine's load moves far less than throughput)."""
    before = cpu_seconds(pid)
    for _ in range(scrapes):
        with urllib.request.urlopen(url, timeout=10) as r:
            r.read()
    return 1000 * (cpu_seconds(pid) - before) / scrapes


def metrics_port(log_path: Path) -> int:
    for line in reversed(log_path.read_text().splitlines()):
        if '"event":"node_started"' in line:
            return int(json.loads(line)["metrics_port"])
    raise RuntimeError(f"the node logged no node_started in {log_path}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--scrape-child"]:
        return scrape_child(argv[1], float(argv[2]))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="per phase")
    ap.add_argument("--rounds", type=int, default=4, help="pairs of phases")
    ap.add_argument("--scrape-interval", type=float, default=1.0)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--request-bytes", type=int, default=128 * 1024)
    ap.add_argument("--in-flight", type=int, default=4)
    ap.add_argument("--quick", action="store_true", help="2 rounds of 2 s phases")
    add_options(ap, "--dir")
    args = ap.parse_args(argv)
    if args.quick:
        args.seconds, args.rounds = 2.0, 2
    for name in ("seconds", "rounds", "scrape_interval", "partitions", "in_flight"):
        if getattr(args, name) <= 0:
            ap.error(f"--{name.replace('_', '-')} must be positive, got {getattr(args, name)}")

    from seglog.bench import node as node_bench

    batches = Batches(1024, 16384, seed=7)
    requests = node_bench.produce_requests(batches, args.partitions, args.request_bytes, distinct=8)
    root = work_dir(args.dir, "seglog-metrics-bench-")
    node = NodeProcess(
        root,
        overrides={
            "metrics.port": "0",
            "metrics.host": "127.0.0.1",
            "log.initial.task.delay.ms": "30000",
        },
    )
    say(
        f"seglog metrics overhead bench: {args.rounds} rounds of 2 x {args.seconds:g} s, "
        f"scrape every {args.scrape_interval:g} s, {args.partitions} partitions, "
        f"{len(requests[0][0]) / 1024:.0f} KiB requests, {args.in_flight} in flight, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}"
    )
    rounds: list[dict[str, float]] = []
    cost_ms = 0.0
    scraper: Scraper | None = None
    scrapes = 0
    scrape_s = 0.0
    samples = 0
    try:
        node.start(timeout_s=60)
        url = f"http://127.0.0.1:{metrics_port(node.log_path)}/metrics"
        with Admin(node.bootstrap) as admin:
            admin.create_topics([NewTopic(node_bench.TOPIC_RAW, args.partitions, 1)])
        say("warm-up (untimed) ...")
        node_bench.measure_produce_raw(node.bootstrap, requests, args.in_flight, 1.0)
        scraper = Scraper(url, args.scrape_interval)

        def phase(scraped: bool) -> float:
            if scraped:
                scraper.begin()
            try:
                label = "scraped" if scraped else "unscraped"
                mb_s = float(
                    node_bench.measure_produce_raw(
                        node.bootstrap, requests, args.in_flight, args.seconds
                    )
                )
            finally:
                if scraped:
                    scraper.end()
            if scraped:
                nonlocal scrapes, scrape_s, samples
                if scraper.error is not None:
                    raise RuntimeError(f"scraping {url} failed: {scraper.error}")
                if scraper.scrapes == 0:
                    raise RuntimeError(f"no scrape of {url} finished in {args.seconds} s")
                scrapes += scraper.scrapes
                scrape_s += scraper.seconds
                samples = scraper.samples
                label += f" ({scraper.scrapes} scrapes)"
            say(f"    {label}: {mb_s:,.1f} MiB/s")
            return mb_s

        for r in range(args.rounds):
            say(f"  round {r + 1} (load average {os.getloadavg()[0]:.2f}):")
            order = (False, True) if r % 2 == 0 else (True, False)
            figures = {scraped: phase(scraped) for scraped in order}
            rounds.append(
                {
                    "unscraped_mb_s": round(figures[False], 2),
                    "scraped_mb_s": round(figures[True], 2),
                    "ratio": round(figures[True] / figures[False], 3) if figures[False] else 0,
                    "load_average": round(os.getloadavg()[0], 2),
                }
            )
            say(f"    ratio {rounds[-1]['ratio']:.3f}")
        cost_ms = scrape_cost(url, node.proc.pid, 100)
        say(
            f"node CPU per scrape (100 back to back, no load): {cost_ms:.1f} ms, "
            f"{cost_ms / 10 / args.scrape_interval:.2f}% of a core at one scrape "
            f"every {args.scrape_interval:g} s"
        )
    finally:
        if scraper is not None:
            scraper.close()
        code = node.stop()
        if code != 0:
            say(f"WARNING: node exited with {code}")
        shutil.rmtree(root, ignore_errors=True)

    unscraped = sum(r["unscraped_mb_s"] for r in rounds) / len(rounds)
    scraped = sum(r["scraped_mb_s"] for r in rounds) / len(rounds)
    ratio = round(scraped / unscraped, 3) if unscraped else 0.0
    median = round(statistics.median(r["ratio"] for r in rounds), 3)
    say(
        f"unscraped {unscraped:,.1f} MiB/s, scraped {scraped:,.1f} MiB/s: ratio {ratio:.3f} "
        f"(target >= {TARGET_RATIO}), median of the rounds' {median:.3f}; "
        f"{scrapes} scrapes of {samples} samples, "
        f"{1000 * scrape_s / max(scrapes, 1):.1f} ms each"
    )
    result = {
        "benchmark": "metrics_overhead",
        "ratio": ratio,
        "median_round_ratio": median,
        "unscraped_mb_s": round(unscraped, 2),
        "scraped_mb_s": round(scraped, 2),
        "rounds": rounds,
        "scrapes": scrapes,
        "scrape_ms_mean": round(1000 * scrape_s / max(scrapes, 1), 2),
        "node_cpu_ms_per_scrape": round(cost_ms, 2),
        "samples_per_scrape": samples,
        "seconds_per_phase": args.seconds,
        "scrape_interval_s": args.scrape_interval,
        "cpu_count": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "targets": {
            "ratio": {"value": ratio, "target": TARGET_RATIO, "met": ratio >= TARGET_RATIO}
        },
    }
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
