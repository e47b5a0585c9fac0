"""The data path's designs side by side, alternately in one run:

- threads+grpc: `kafka.listener.model=threads` (Kafka's processor → request channel →
  handler → delayed thread), followers fetching over gRPC;
- loop+grpc: `kafka.listener.model=event-loop` (one uvloop loop per node,
  node/kafka/loop_server.py), followers fetching over gRPC;
- loop+kafka: the same loop, followers fetching over Kafka's inter-broker protocol
  from it (`replica.fetch.protocol=kafka`, node/kafka/replica_client.py);
- loop+kafka+mypyc (only with --compiled DIR, not among the default designs): loop+kafka
  with the node processes importing seglog from DIR, a build whose hot path is compiled
  by mypyc (bench/build_compiled.py; PYTHONPATH=DIR and PYTHONSAFEPATH=1 in the nodes'
  environment).

Per round and design, a fresh 3-node cluster (RF=3, min.insync.replicas=2, a PLAINTEXT
listener beside gRPC on each node, as `seglog local up` runs them) and confluent-kafka
(librdkafka) as the client, acks=all, idempotent, linger.ms=0, 1 KiB values:

1. sequential: --sequential single-record round trips (produce, flush) to a
   1-partition topic; p50/p99 of each, and the leader broker process's CPU
   (user+sys from /proc) per produce — the issue's "leader CPU per one-record acks=all
   Produce" — and each follower's;
2. paced: at each of --rates records/s for --seconds over a 6-partition topic;
   p50/p99 of produce()-to-delivery-report.

Rounds alternate the designs (each in turn, then again) so that the machine's load
falls on all alike; each figure is the median over the rounds. The last line is JSON;
`--plot out.png` draws each design's p50/p99 per rate and its CPU per produce.

    python bench/data_path.py [--rounds 2] [--rates 1000,5000|none] [--plot out.png]

Interpreted against compiled, alternately (--rates none: the sequential part only):

    python bench/build_compiled.py --target /tmp/seglog-compiled
    python bench/data_path.py --designs loop+kafka,loop+kafka+mypyc \
        --compiled /tmp/seglog-compiled --rounds 3 --sequential 3000 --rates none
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from seglog.bench import cluster as bench_cluster
from seglog.bench.kafka_protocol import TOPIC_KAFKA, Values, kafka_latency
from seglog.bench.measure import percentile, say
from seglog.bench.options import add_options, known_names, positive_ints, save_plot, work_dir

DESIGNS = {
    "threads+grpc": {"kafka.listener.model": "threads", "replica.fetch.protocol": "grpc"},
    "loop+grpc": {"kafka.listener.model": "event-loop", "replica.fetch.protocol": "grpc"},
    "loop+kafka": {"kafka.listener.model": "event-loop", "replica.fetch.protocol": "kafka"},
}
COMPILED = "loop+kafka+mypyc"  # loop+kafka's settings, seglog from --compiled DIR
ALL_DESIGNS = (*DESIGNS, COMPILED)
SEQ_TOPIC = "seq"


def process_cpu_s(pid: int) -> float:
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def compiled_libraries(pid: int, directory: Path) -> int:
    """How many extension modules from `directory` process `pid` has mapped."""
    prefix = str(directory.resolve()) + "/"
    maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
    return len({line.split()[-1] for line in maps if line.split()[-1].startswith(prefix)})


def start_cluster(
    root: Path, design: str, compiled: Path | None
) -> tuple[bench_cluster.Cluster, str]:
    settings = DESIGNS["loop+kafka"] if design == COMPILED else DESIGNS[design]
    # PYTHONSAFEPATH: `python -m` in the repository would put its seglog/ first on sys.path.
    env = (
        {"PYTHONPATH": str(compiled), "PYTHONSAFEPATH": "1"}
        if design == COMPILED and compiled
        else None
    )
    cluster, bootstrap = bench_cluster.start_local_up(root, settings, env=env)
    cluster.create_topics([SEQ_TOPIC], 1)
    cluster.create_topics([TOPIC_KAFKA], 6)
    return cluster, bootstrap


def sequential(ck: Any, cluster: bench_cluster.Cluster, bootstrap: str, n: int) -> dict[str, Any]:
    """n one-record round trips; latency percentiles and the leader's and each
    follower's CPU per produce."""
    parts = cluster.partitions(1, SEQ_TOPIC)
    assert parts is not None
    leader_id = parts[0].leader_id
    pids = {i: node.proc.pid for i, node in cluster.nodes.items() if node.proc is not None}
    assert len(pids) == len(bench_cluster.NODE_IDS)
    producer = ck.Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 0}
    )
    value = os.urandom(1024)
    for _ in range(20):  # warm-up: connections, producer id
        producer.produce(SEQ_TOPIC, value=value)
        producer.flush(30)
    latencies = []
    cpu0 = {i: process_cpu_s(pid) for i, pid in pids.items()}
    for _ in range(n):
        t0 = time.perf_counter()
        producer.produce(SEQ_TOPIC, value=value)
        if producer.flush(30) != 0:
            raise RuntimeError("sequential: a produce was not delivered in 30 s")
        latencies.append((time.perf_counter() - t0) * 1000)
    cpu = {i: process_cpu_s(pid) - cpu0[i] for i, pid in pids.items()}
    return {
        "p50_ms": round(percentile(latencies, 50), 2),
        "p99_ms": round(percentile(latencies, 99), 2),
        "leader_cpu_us_per_produce": round(cpu[leader_id] / n * 1e6),
        "followers_cpu_us_per_produce": [
            round(cpu[i] / n * 1e6) for i in sorted(pids) if i != leader_id
        ],
    }


def one_round(ck: Any, root: Path, model: str, args: argparse.Namespace) -> dict[str, Any]:
    load = os.getloadavg()[0]
    cluster, bootstrap = start_cluster(root, model, args.compiled)
    try:
        out: dict[str, Any] = {"load_1m": round(load, 2)}
        if args.compiled is not None:
            # The compiled build's extension modules each node process has loaded: none
            # for the interpreted designs; the build's count for the compiled one.
            mapped = {
                i: compiled_libraries(n.proc.pid, args.compiled)
                for i, n in cluster.nodes.items()
                if n.proc is not None
            }
            if (model == COMPILED) != all(mapped.values()):
                raise RuntimeError(f"{model}: compiled modules mapped per node {mapped}")
            out["compiled_libraries"] = max(mapped.values())
        out["sequential"] = sequential(ck, cluster, bootstrap, args.sequential)
        values = Values(1024, 42)
        first = 0
        for rate in args.rates:
            lat, first = kafka_latency(ck, bootstrap, values, first, rate, args.seconds)
            out[str(rate)] = {
                "p50_ms": round(percentile(lat, 50), 2),
                "p99_ms": round(percentile(lat, 99), 2),
                "count": len(lat),
            }
        return out
    finally:
        cluster.stop_all()


def median_of(rounds: list[dict[str, Any]], *path: str) -> float:
    values = []
    for r in rounds:
        v: Any = r
        for key in path:
            v = v[key]
        values.append(float(v))
    return round(statistics.median(values), 2)


def plot(
    summary: dict[str, Any],
    rates: Sequence[int],
    path: Path,
    runs: dict[str, list[dict[str, Any]]],
) -> None:
    designs = list(summary)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(16, 4))
    labels = ["sequential", *(f"{r}/s" for r in rates)]
    width = 0.2
    for k, model in enumerate(designs):
        s = summary[model]
        p50 = [s["sequential"]["p50_ms"], *(s[str(r)]["p50_ms"] for r in rates)]
        p99 = [s["sequential"]["p99_ms"], *(s[str(r)]["p99_ms"] for r in rates)]
        xs = [i + (k - (len(designs) - 1) / 2) * 2 * width for i in range(len(labels))]
        ax1.bar([x - width / 2 for x in xs], p50, width, label=f"{model} p50")
        ax1.bar([x + width / 2 for x in xs], p99, width, label=f"{model} p99", alpha=0.6)
    ax1.set_xticks(range(len(labels)), labels)
    ax1.set_yscale("log")
    ax1.set_ylabel("ms, produce to delivery (log)")
    ax1.set_title("confluent-kafka acks=all, RF=3, 1 KiB")
    ax1.legend(fontsize=7)
    xs = list(range(len(designs)))
    ax2.bar(
        [x - 0.2 for x in xs],
        [summary[m]["sequential"]["leader_cpu_us_per_produce"] for m in designs],
        0.4,
        label="leader",
        color="tab:blue",
    )
    ax2.bar(
        [x + 0.2 for x in xs],
        [summary[m]["sequential"]["follower_cpu_us_per_produce"] for m in designs],
        0.4,
        label="a follower (mean of two)",
        color="tab:green",
    )
    ax2.axhline(300, color="tab:red", linestyle="--", linewidth=1, label="300 µs (issue 40)")
    ax2.set_xticks(xs, designs)
    ax2.set_ylabel("CPU µs per one-record produce")
    ax2.set_title("node process CPU (median of rounds)")
    ax2.legend(fontsize=7)
    # Every round in the order it ran (designs alternate), with the load it started at:
    # what the medians hide on a shared machine.
    for k, model in enumerate(designs):
        rounds = runs[model]
        xs = [r * len(designs) + k + 1 for r in range(len(rounds))]
        ax3.plot(
            xs,
            [r["sequential"]["leader_cpu_us_per_produce"] for r in rounds],
            "o",
            label=f"{model} leader",
        )
        for x, r in zip(xs, rounds, strict=True):
            if "load_1m" in r:
                ax3.annotate(f"load {r['load_1m']:.1f}", (x, 0), fontsize=6, ha="center")
    ax3.axhline(300, color="tab:red", linestyle="--", linewidth=1)
    ax3.set_ylim(bottom=-40)
    ax3.set_xlabel("round, in the order run")
    ax3.set_ylabel("leader CPU µs per produce")
    ax3.set_title("each round")
    ax3.legend(fontsize=7)
    save_plot(fig, path, dpi=110)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="rounds of every design (2)")
    parser.add_argument(
        "--designs", default=",".join(DESIGNS), help=f"comma list of {', '.join(ALL_DESIGNS)}"
    )
    parser.add_argument(
        "--compiled",
        type=Path,
        default=None,
        help=f"a build from bench/build_compiled.py, for {COMPILED} (its PYTHONPATH)",
    )
    parser.add_argument(
        "--rates", default="1000,5000", help="records/s, comma list; none: no paced runs"
    )
    parser.add_argument("--seconds", type=float, default=4.0, help="per paced rate (4)")
    parser.add_argument("--sequential", type=int, default=300, help="round trips (300)")
    add_options(parser, "--plot", "--dir")
    args = parser.parse_args(argv)
    args.rates = [] if args.rates == "none" else positive_ints(parser, "--rates", args.rates)
    args.designs = known_names(parser, "--designs", args.designs, ALL_DESIGNS)
    if (COMPILED in args.designs) != (args.compiled is not None):
        parser.error(f"--compiled DIR goes with the design {COMPILED} (and it needs one)")
    if args.compiled is not None:
        args.compiled = args.compiled.resolve()
        if not any(args.compiled.glob("seglog/**/*.so")):
            parser.error(f"--compiled: no compiled modules under {args.compiled}/seglog")
    if args.rounds < 1 or args.sequential < 1 or args.seconds <= 0:
        parser.error("--rounds, --sequential and --seconds must be positive")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    import confluent_kafka as ck

    args = parse_args(argv)
    root = work_dir(args.dir, "seglog-data-path-")
    load_before = os.getloadavg()
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in args.designs}
    try:
        for r in range(args.rounds):
            for model in args.designs:
                say(f"round {r + 1}/{args.rounds}: {model} ...")
                result = one_round(ck, root / f"{r}-{model}", model, args)
                say(f"  {model}: {json.dumps(result)}")
                runs[model].append(result)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    summary: dict[str, Any] = {}
    for model in args.designs:
        rs = runs[model]
        for r in rs:  # each follower's CPU alike: their mean, for the median
            seq = r["sequential"]
            seq["follower_cpu_us_per_produce"] = statistics.mean(
                seq["followers_cpu_us_per_produce"]
            )
        summary[model] = {
            "sequential": {
                k: median_of(rs, "sequential", k)
                for k in (
                    "p50_ms",
                    "p99_ms",
                    "leader_cpu_us_per_produce",
                    "follower_cpu_us_per_produce",
                )
            },
            **{
                str(rate): {k: median_of(rs, str(rate), k) for k in ("p50_ms", "p99_ms")}
                for rate in args.rates
            },
        }
    if args.plot is not None:
        plot(summary, args.rates, args.plot, runs)
    out = {
        "benchmark": "data_path",
        "rounds": args.rounds,
        "cpus": os.cpu_count(),
        "load_before": [round(x, 2) for x in load_before],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "median": summary,
        "runs": runs,
        "compiled": None if args.compiled is None else str(args.compiled),
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
