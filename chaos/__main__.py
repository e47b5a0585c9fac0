"""`python -m seglog.chaos run --target compose|local --scenario NAME --seed N
--duration SECONDS [--out DIR]`: bring a 3-node cluster up, run the workload,
inject the scenario's faults for `duration` seconds, heal, let every replica catch
up, read everything back, check the history and the replicas' bytes, write the
report, take the cluster down. Prints one summary line; exits 0 when every
invariant holds, 1 when one fails, 3 when the evidence is incomplete (the final
read or the replicas never caught up after healing), 2 on a harness error.

With `--compact-keys N` the topic is compacted and records carry N keys: the checker
then allows values a later record of the same key superseded to vanish, and compares
replicas by (offset, key, value) instead of bytes.

`python -m seglog.chaos soak --target compose|local --duration 3600` runs every scenario
the target has, in a seeded shuffled sequence (`--each` seconds of faults apiece), on one
cluster under one workload, healing between them, and checks the whole history at the
end (one report).

`python -m seglog.chaos calibrate --target local|compose` runs the workload unpaced without
faults (scenario `calm`) and prints its maximum acknowledged rate and the `--rate` per
producer that is 25% of it, the load chaos runs are made at.

`python -m seglog.chaos check HISTORY` re-checks a history file (no replicas).
`python -m seglog.chaos groups --seed N --duration S` runs consumer groups while their
coordinator is SIGKILLed (chaos/group_workload.py).
`python -m seglog.chaos txn --target local|compose --scenario NAME` runs the transactional
workload under a scenario (chaos/txn_run.py); `--table` runs it under every scenario.
`python -m seglog.chaos list` names the scenarios.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import subprocess
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .checker import (
    CheckResult,
    apply_replica_check,
    compare_compacted_replicas,
    compare_replicas,
)
from .cluster_view import ClusterView
from .column_checker import check_columns
from .columns import OK, read_columns
from .compose_target import ComposeTarget, netem_available
from .duplicate_origins import attach_duplicate_origins
from .kafka_workload import KafkaWorkload
from .local_target import LocalTarget
from .report import partition_outages, summary_line, unavailability_windows, write_report
from .scenarios import SCENARIOS, FaultContext, Scenario
from .targets import Target
from .workload import History, Workload, WorkloadConfig

EXIT_OK, EXIT_VIOLATION, EXIT_ERROR, EXIT_INCOMPLETE = 0, 1, 2, 3
COMPACT_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "segment.bytes": "65536",
    "segment.ms": "5000",
    "min.cleanable.dirty.ratio": "0.1",
    "delete.retention.ms": "5000",
}
# Node log lines worth quoting as evidence when an invariant fails.
_EVIDENCE = re.compile(
    r"truncat|diverg|recover|corrupt|error|warn|fenced|leader|isr|epoch|crash|exception",
    re.IGNORECASE,
)


def _log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {msg}", file=sys.stderr, flush=True)


def run(
    target_name: str,
    scenario_name: str,
    seed: int,
    duration: float,
    out: Path | None = None,
    *,
    partitions: int = 6,
    producers: int = 3,
    consumers: int = 2,
    rate: float = 60.0,
    keep: bool = False,
    build: bool = False,
    settle_s: float = 120.0,
    project: str | None = None,
    command: str = "",
    compact_keys: int = 0,
    client: str = "seglog",
    secure: bool = False,
    plan: list[tuple[str, float]] | None = None,
    group_consumers: int = 2,
    fetch_protocol: str = "kafka",
    delivery_timeout_ms: int = WorkloadConfig.delivery_timeout_ms,
) -> tuple[int, str, Path]:
    """One chaos run; (exit code, summary line, report path). `plan` (the soak) runs
    several scenarios in turn on the same cluster and workload, healing and settling
    between them; without it the run is `scenario_name` for `duration` seconds."""
    plan = plan or [(scenario_name, duration)]
    scenarios = [SCENARIOS[name] for name, _ in plan]
    stamp = time.strftime("%Y%m%d-%H%M%S")
    run_dir = out or Path("chaos-runs") / f"{stamp}-{scenario_name}-{target_name}-s{seed}"
    run_dir = run_dir.resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    target: Target
    if target_name == "local":
        target = LocalTarget(
            run_dir / "cluster",
            seed,
            links=any(s.links for s in scenarios),
            fetch_protocol=fetch_protocol,
        )
    else:
        target = ComposeTarget(
            project,
            build=build,
            secure=secure,
            fetch_protocol=fetch_protocol,
            delay_proxies=any(s.delays for s in scenarios),
            seed=seed,
        )
    topic = f"chaos-{scenario_name}-{seed}"
    configs = run_topic_configs(scenarios, rate, compact_keys)
    history = History(run_dir / "history.jsonl")
    meta: dict[str, Any] = {
        "scenario": scenario_name,
        "target": target_name,
        "seed": seed,
        "duration": sum(seconds for _, seconds in plan),
        "plan": plan,
        "topic": topic,
        "partitions": partitions,
        "producers": producers,
        "consumers": consumers,
        "group_consumers": group_consumers,
        "rate_per_producer": rate,
        "topic_configs": configs,
        "compact_keys": compact_keys,
        "command": command,
        "client": client,
        "secure": secure,
        "replica_fetch_protocol": fetch_protocol,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "bootstrap": target.bootstrap,
    }
    if isinstance(target, ComposeTarget):
        meta["project"] = target.project
        meta["image"] = _image_id()
    history.append({"type": "meta", **meta})
    workload: Workload | KafkaWorkload | None = None
    view: ClusterView | None = None
    extra: dict[str, Any] = {}
    replicas: list[Any] = []
    files: dict[int, Any] = {}
    hws: dict[int, tuple[int, int]] = {}
    final_complete = False
    caught_up = False
    try:
        _log(f"[chaos] {scenario_name} on {target_name}, seed {seed}: cluster up ({run_dir})")
        target.up()
        view = ClusterView(target, topic)
        view.create_topic(partitions, configs, 90)
        # --client librdkafka: confluent-kafka on the Kafka listeners, same history.
        workload_class = Workload if client == "seglog" else KafkaWorkload
        workload = workload_class(
            WorkloadConfig(
                bootstrap=target.bootstrap if client == "seglog" else target.kafka_bootstrap,
                topic=topic,
                partitions=partitions,
                producers=producers,
                consumers=consumers,
                rate=rate,
                seed=seed,
                security=target.security if client == "seglog" else {},
                keys=compact_keys,
                group_consumers=group_consumers,
                delivery_timeout_ms=delivery_timeout_ms,
            ),
            history,
        )
        history.append({"type": "phase", "name": "warmup"})
        workload.start()
        time.sleep(min(5.0, max(2.0, duration / 6)))

        ctx = FaultContext(
            target=target,
            view=view,
            history=history,
            rng=__import__("random").Random(seed),
            partitions=partitions,
            deadline=time.monotonic(),
            log=_log,
        )
        for i, ((name, seconds), scenario) in enumerate(zip(plan, scenarios, strict=True)):
            history.append({"type": "phase", "name": "faults", "scenario": name})
            ctx.deadline = time.monotonic() + seconds
            scenario.run(ctx)
            if ctx.remaining() > 0:
                time.sleep(ctx.remaining())
            if i < len(plan) - 1:  # the next scenario starts from a healed cluster
                history.append({"type": "phase", "name": "heal", "scenario": name})
                _log(f"[chaos] heal after {name}: {target.heal() or 'nothing to heal'}")
                if not view.wait_converged(partitions, settle_s):
                    # The next step would run on a broken cluster and say nothing of its
                    # own scenario (a soak once went on for ten minutes with two nodes
                    # dead): stop the plan here; the run ends INCOMPLETE.
                    _log(
                        f"[chaos] not fully replicated {settle_s:.0f} s after step {i + 1} "
                        f"({name}): the remaining {len(plan) - i - 1} step(s) are skipped"
                    )
                    extra["unconverged_after_step"] = {"step": i + 1, "scenario": name}
                    break

        history.append({"type": "phase", "name": "heal"})
        healed = target.heal()
        _log(f"[chaos] heal: {healed or 'nothing to heal'}")
        converged = view.wait_converged(partitions, settle_s)
        extra["converged_after_heal"] = converged
        if not converged:
            _log(f"[chaos] WARNING: partitions not fully replicated {settle_s:.0f} s after healing")
        time.sleep(3)  # some load after healing: availability must come back

        history.append({"type": "phase", "name": "quiesce"})
        _log("[chaos] stopping producers")
        workload.stop_producers(max(30.0, settle_s * 0.75))
        offsets = view.wait_replicas_caught_up(partitions, max(20.0, settle_s * 0.75))
        caught_up = len(offsets) == partitions and all(
            all(leo == o.high_watermark for leo in o.leos.values()) and len(o.leos) == 3
            for o in offsets.values()
        )
        extra["replica_offsets"] = {
            p: {"leader": o.leader, "hw": o.high_watermark, "leos": o.leos}
            for p, o in sorted(offsets.items())
        }
        end_offsets = {p: o.high_watermark for p, o in offsets.items()}
        history.append({"type": "phase", "name": "drain", "end_offsets": end_offsets})
        drained = workload.drain(end_offsets, max(20.0, settle_s * 0.75))
        extra["consumers_drained"] = drained
        history.append({"type": "phase", "name": "final-read"})
        final_complete = len(end_offsets) == partitions and workload.final_read(
            end_offsets, max(60.0, settle_s * 1.5)
        )
        workload.stop()

        files = {node: target.replica_files(node, topic) for node in target.node_ids}
        hws = {p: (o.leader, o.high_watermark) for p, o in offsets.items()}
        if compact_keys > 0:
            _log("[chaos] comparing replica records (offset, key, value) below the HW")
            replicas = compare_compacted_replicas(files, hws)
        else:
            _log("[chaos] comparing replica bytes below the HW")
            replicas = compare_replicas(files, hws)
        history.append({"type": "phase", "name": "done"})
    except Exception as e:  # noqa: BLE001 - reported with whatever history exists
        extra["harness_error"] = "".join(traceback.format_exception(e))
        _log(f"[chaos] harness error: {e!r}")
    finally:
        if workload is not None:
            workload.stop()
            extra["workload_errors"] = workload.errors
        history.close()
        # Columns, not dicts: an hour's soak holds 30+ million events (docs/network-faults.md).
        events = read_columns(run_dir / "history.jsonl")
        result = check_columns(events)
        apply_replica_check(result, replicas)
        attach_duplicate_origins(
            result, files, {p: lead for p, (lead, _) in hws.items()}, extra, events.rare
        )
        result.final_read_complete = final_complete
        if not final_complete:
            result.notes.append("the final read did not reach every partition's HW")
        if not caught_up:
            result.notes.append("not every replica reached the HW after healing")
        unconverged = extra.get("unconverged_after_step")
        if unconverged:
            result.notes.append(
                f"the cluster was not fully replicated after step {unconverged['step']} "
                f"({unconverged['scenario']}); the steps after it did not run"
            )
        if not result.ok:
            extra["evidence"] = _evidence(target)
        try:
            target.save_logs(run_dir / "node-logs")
        except Exception as e:  # noqa: BLE001
            result.notes.append(f"could not save node logs: {e!r}")
        if view is not None:
            view.close()
        if keep:
            if isinstance(target, ComposeTarget):
                target.remove_delay_proxies()  # they live in this process's children
            _log(f"[chaos] cluster kept running: {target.bootstrap}")
        else:
            target.down()
    report = write_report(run_dir, meta, result, events, replicas, extra)
    windows = unavailability_windows(events)
    line = summary_line(meta, result, windows, report, partition_outages(events))
    if "harness_error" in extra:
        code = EXIT_ERROR
        # The run stopped early: counts of a history without a final read mean little.
        last = extra["harness_error"].strip().splitlines()[-1][:300]
        line = f"ERROR harness ({last}); the partial history: {line}"
    elif not result.ok:
        code = EXIT_VIOLATION
    elif not (final_complete and caught_up) or "unconverged_after_step" in extra:
        code = EXIT_INCOMPLETE
        line = "INCOMPLETE " + line
    else:
        code = EXIT_OK
    return code, line, report


def acknowledged_rate(history: Path) -> float:
    """Records acknowledged per second during the fault phase(s) of a run's history."""
    h = read_columns(history)
    starts = [e["t"] for e in h.rare if e.get("type") == "phase" and e["name"] == "faults"]
    ends = [e["t"] for e in h.rare if e.get("type") == "phase" and e["name"] == "heal"]
    if not starts or not ends:
        return 0.0
    t0, t1 = starts[0], ends[-1]
    t = h.t[h.kind == OK]
    acks = int(((t >= t0) & (t <= t1)).sum())  # a missing time (NaN) is outside
    return acks / max(t1 - t0, 1e-9)


# The rate per producer the scenarios' segment sizes were chosen for (run's default).
SEGMENT_SIZES_RATE = 60.0


def run_topic_configs(
    scenarios: Sequence[Scenario], rate: float, compact_keys: int = 0
) -> dict[str, str]:
    """The chaos topic's configs: the smallest segments any scenario asks for, grown in
    proportion to the rate asked beyond SEGMENT_SIZES_RATE, so that a segment holds as
    many records (rolls come as often per record) at any load. Fixed-size segments
    at 15x the load rolled 15x as often, and over an hour's soak a node held ~10,000
    of them: more files open than its descriptor limit."""
    configs = {"min.insync.replicas": "2"}
    for s in scenarios:  # the smallest segments any of them asks for
        for key, value in s.topic_configs.items():
            configs[key] = str(min(int(value), int(configs.get(key, value))))
    scale = max(1.0, rate / SEGMENT_SIZES_RATE)
    if "segment.bytes" in configs and scale > 1:
        configs["segment.bytes"] = str(int(int(configs["segment.bytes"]) * scale) // 1024 * 1024)
    if compact_keys > 0:
        # A compacted topic: keyed records, small segments rolled often, cleaned eagerly.
        configs.update(COMPACT_TOPIC_CONFIGS)
    return configs


def runnable(scenario_name: str, target_name: str, netem: bool) -> str | None:
    """Why the scenario cannot run on the target here, or None."""
    s = SCENARIOS[scenario_name]
    if target_name not in s.targets:
        return f"{scenario_name} runs on {' and '.join(s.targets)} only, not {target_name}"
    if target_name == "compose" and s.netem and not netem:
        return (
            f"{scenario_name} reorders packets with tc netem on compose, and this kernel has "
            "no sch_netem (CONFIG_NET_SCH_NETEM); run it with --target local"
        )
    return None


def soak_plan(
    target_name: str,
    seed: int,
    duration: float,
    each_s: float,
    netem: bool = True,
    only: Sequence[str] = (),
) -> list[tuple[str, float]]:
    """A seeded sequence of every scenario the target runs (or of `only`), `each_s`
    seconds of faults each, in shuffled rounds until `duration` is filled (at least one
    of each when it is long enough). Settling between them is not counted."""
    import random

    unknown = sorted(set(only) - set(SCENARIOS))
    if unknown:
        names = ", ".join(unknown)
        raise ValueError(f"unknown scenario(s) {names}: see `python -m seglog.chaos list`")
    for name in only:
        why_not = runnable(name, target_name, netem)
        if why_not is not None:
            raise ValueError(why_not)
    names = sorted(
        n for n in (only or SCENARIOS) if n != "calm" and runnable(n, target_name, netem) is None
    )
    rng = random.Random(seed)
    plan: list[tuple[str, float]] = []
    total = 0.0
    while total + each_s <= duration and len(plan) < 10_000:
        round_ = names[:]
        rng.shuffle(round_)
        for name in round_:
            if total + each_s > duration:
                break
            plan.append((name, each_s))
            total += each_s
    return plan or [(rng.choice(names), duration)]


def _evidence(target: Target, per_node: int = 60) -> dict[int, list[str]]:
    out = {}
    for node in target.node_ids:
        try:
            lines = target.node_log_tail(node, 5000)
        except Exception:  # noqa: BLE001 - evidence is best effort
            continue
        out[node] = [ln[:400] for ln in lines if _EVIDENCE.search(ln)][-per_node:]
    return out


def _image_id() -> str:
    r = subprocess.run(
        ["docker", "image", "inspect", "-f", "{{.Id}}", "seglog:latest"],
        capture_output=True,
        text=True,
    )
    return r.stdout.strip()


def _check(path: Path) -> int:
    events = read_columns(path)
    result: CheckResult = check_columns(events)
    windows = unavailability_windows(events)
    print(
        f"{'OK' if result.ok else 'FAIL ' + ','.join(result.failed_invariants())} "
        f"sent={result.sent} acknowledged={result.acknowledged} "
        f"acknowledged_without_offset={result.acknowledged_without_offset} lost={result.lost} "
        f"duplicated={result.duplicated} conflicts={result.conflicts} "
        f"phantom={result.phantom} skipped={result.skipped} backwards={result.backwards} "
        f"nonmonotonic_send={result.nonmonotonic_send} commits={result.commits} "
        f"commit_backwards={result.commit_backwards} lost_commits={result.lost_commits} "
        f"duplicated_commits={result.duplicated_commits} "
        f"implicit_acks={result.implicit_acks} "
        f"implicit_ack_missing={result.implicit_ack_missing} "
        f"unavailable={sum(w['seconds'] for w in windows):.1f}s"
    )
    return EXIT_OK if result.ok else EXIT_VIOLATION


def _add_target_and_client(p: argparse.ArgumentParser) -> None:
    """Where a workload runs and with which clients (run, soak, calibrate)."""
    p.add_argument("--target", choices=["compose", "local"], required=True)
    p.add_argument(
        "--client",
        choices=["seglog", "librdkafka"],
        default="seglog",
        help="the workload's clients: seglog's own (gRPC) or confluent-kafka (Kafka protocol)",
    )
    p.add_argument(
        "--replica-fetch-protocol",
        choices=["kafka", "grpc"],
        default="kafka",
        help="how the nodes' followers fetch (replica.fetch.protocol): Kafka's inter-broker "
        "protocol or gRPC",
    )
    p.add_argument(
        "--delivery-timeout-ms",
        type=int,
        default=WorkloadConfig.delivery_timeout_ms,
        help="the producers' delivery.timeout.ms (librdkafka's message.timeout.ms); 0, "
        "librdkafka only: records never expire, so librdkafka never bumps its producer "
        "epoch for an expired record (docs/chaos.md)",
    )


def delivery_timeout_error(client: str, delivery_timeout_ms: int) -> str | None:
    """Why --delivery-timeout-ms cannot be used with `client`, or None."""
    if delivery_timeout_ms < 0:
        return f"--delivery-timeout-ms must be 0 or more, not {delivery_timeout_ms}"
    if delivery_timeout_ms == 0 and client != "librdkafka":
        return (
            "--delivery-timeout-ms 0 (never expire) is librdkafka's message.timeout.ms=0; "
            "seglog's Producer needs a bound (give --client librdkafka, or a timeout > 0)"
        )
    return None


def _txn(args: argparse.Namespace, argv: list[str] | None) -> int:
    from .txn_run import run_txn, table

    if args.table == (args.scenario is not None):
        print("chaos txn: give --scenario NAME or --table", file=sys.stderr)
        return 2
    command = "python -m seglog.chaos " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])
    )
    name = "table" if args.table else args.scenario
    out = args.out or Path("chaos-runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-txn-{name}"
    if args.table:
        only = [n.strip() for n in (args.scenarios or "").split(",") if n.strip()]
        unknown = sorted(set(only) - set(SCENARIOS))
        if unknown:
            print(f"chaos txn: unknown scenario(s) {', '.join(unknown)}", file=sys.stderr)
            return 2
        return table(args.target, args.seed, args.duration, out, command, only)
    why_not = runnable(args.scenario, args.target, args.target != "compose" or netem_available())
    if why_not is not None:
        print(f"chaos txn: {why_not}", file=sys.stderr)
        return 2
    code, line, _report = run_txn(
        args.target, args.scenario, args.seed, args.duration, out, rate=args.rate, command=command
    )
    print(line, flush=True)
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m seglog.chaos", description=__doc__.split("\n\n")[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="one chaos run")
    _add_target_and_client(r)
    r.add_argument("--scenario", choices=sorted(SCENARIOS), required=True)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--duration", type=float, default=60.0, help="seconds of faults")
    r.add_argument("--out", type=Path, help="run directory (default chaos-runs/<stamp>-...)")
    r.add_argument("--partitions", type=int, default=6)
    r.add_argument("--producers", type=int, default=3)
    r.add_argument("--consumers", type=int, default=2)
    r.add_argument(
        "--group-consumers",
        type=int,
        default=2,
        help="members of one consumer group that commit what they read (either client)",
    )
    r.add_argument("--rate", type=float, default=60.0, help="sends per second per producer")
    r.add_argument(
        "--compact-keys",
        type=int,
        default=0,
        help="a compacted topic: records keyed over this many keys (0: plain topic)",
    )
    r.add_argument("--keep", action="store_true", help="leave the cluster running")
    r.add_argument("--build", action="store_true", help="compose: run build-image.sh first")
    r.add_argument("--project", help="compose: the project name (default: a unique one)")
    r.add_argument(
        "--secure",
        action="store_true",
        help="compose: the secure profile (TLS, mTLS between nodes, ACLs; --client seglog)",
    )
    r.add_argument(
        "--settle-timeout",
        type=float,
        default=120.0,
        help="seconds to wait, after healing, for full ISRs (other waits scale with it)",
    )
    c = sub.add_parser("check", help="re-check a history file")
    c.add_argument("history", type=Path)
    k = sub.add_parser("soak", help="every scenario in a seeded sequence on one cluster")
    _add_target_and_client(k)
    k.add_argument("--seed", type=int, default=0)
    k.add_argument("--duration", type=float, default=3600.0, help="seconds of faults in all")
    k.add_argument("--each", type=float, default=90.0, help="seconds of faults per scenario")
    k.add_argument(
        "--scenarios",
        help="comma-separated scenario names to cycle through (default: every one the target runs)",
    )
    k.add_argument("--out", type=Path, help="run directory (default chaos-runs/<stamp>-soak-...)")
    k.add_argument("--rate", type=float, default=60.0, help="sends per second per producer")
    k.add_argument("--settle-timeout", type=float, default=120.0)
    c2 = sub.add_parser(
        "calibrate", help="the maximum acknowledged rate of the workload, without faults"
    )
    _add_target_and_client(c2)
    c2.add_argument("--duration", type=float, default=60.0)
    c2.add_argument("--producers", type=int, default=3)
    c2.add_argument("--out", type=Path, help="run directory (default chaos-runs/<stamp>-calibrate)")
    sub.add_parser("list", help="the scenario names")
    g = sub.add_parser(
        "groups", help="consumer groups while the group coordinator is SIGKILLed (local)"
    )
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--duration", type=float, default=60.0, help="seconds of faults")
    g.add_argument("--out", type=Path, help="run directory (default chaos-runs/<stamp>-groups)")
    g.add_argument("--rate", type=float, default=100.0, help="sends per second per producer")
    x = sub.add_parser("txn", help="the transactional workload under a scenario (txn_run.py)")
    x.add_argument("--target", choices=["compose", "local"], required=True)
    x.add_argument("--scenario", choices=sorted(SCENARIOS))
    x.add_argument("--table", action="store_true", help="every scenario the target runs")
    x.add_argument("--scenarios", help="with --table: these (comma-separated) only")
    x.add_argument("--seed", type=int, default=0)
    x.add_argument("--duration", type=float, default=30.0, help="seconds of faults")
    x.add_argument("--rate", type=float, default=5.0, help="transactions per second per worker")
    x.add_argument("--out", type=Path, help="run directory (default chaos-runs/<stamp>-txn-...)")
    args = parser.parse_args(argv)
    if args.command == "txn":
        return _txn(args, argv)
    if args.command == "groups":
        from .group_workload import run_groups

        out = args.out or Path("chaos-runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-groups"
        code, summary = run_groups(args.seed, args.duration, out, rate=args.rate)
        print(f"groups seed {args.seed}: {summary['result']} ({out})", flush=True)
        return code
    out_dir = getattr(args, "out", None)
    if args.command in ("run", "soak", "calibrate") and out_dir is not None:
        history_file = Path(out_dir) / "history.jsonl"
        if history_file.exists() and history_file.stat().st_size > 0:
            print(
                f"chaos {args.command}: {out_dir} already holds a run ({history_file.name}); "
                "a run appends to its history, so the check would mix two runs: "
                "choose a new --out",
                file=sys.stderr,
            )
            return 2
    if args.command in ("run", "soak", "calibrate"):
        why = delivery_timeout_error(args.client, args.delivery_timeout_ms)
        if why is not None:
            parser.error(why)
    if args.command == "run" and args.compact_keys and args.client != "seglog":
        parser.error("--compact-keys runs seglog's own clients; it does not combine with --client")
    if args.command == "list":
        for name, s in SCENARIOS.items():
            print(
                f"{name}: {(s.run.__doc__ or '').strip().splitlines()[0] if s.run.__doc__ else ''}"
            )
        return 0
    if args.command == "check":
        return _check(args.history)
    if args.command == "calibrate":
        out = args.out or Path("chaos-runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-calibrate"
        code, line, _report = run(
            args.target,
            "calm",
            0,
            args.duration,
            out,
            producers=args.producers,
            rate=0.0,  # unpaced: each producer as fast as its in-flight bound allows
            client=args.client,
            fetch_protocol=args.replica_fetch_protocol,
            delivery_timeout_ms=args.delivery_timeout_ms,
        )
        print(line, flush=True)
        maximum = acknowledged_rate(out.resolve() / "history.jsonl")
        share = 0.25 * maximum / args.producers
        print(
            f"maximum acknowledged rate: {maximum:.0f} records/s; 25% of it is "
            f"--rate {share:.0f} per producer ({args.producers} producers)",
            flush=True,
        )
        print(
            json.dumps(
                {
                    "target": args.target,
                    "client": args.client,
                    "max_rate": round(maximum),
                    "rate_for_25pct": round(share),
                    "producers": args.producers,
                }
            ),
            flush=True,
        )
        return code
    if args.command == "soak":
        netem = args.target != "compose" or netem_available()
        excluded = [n for n in SCENARIOS if runnable(n, args.target, netem) is not None]
        if excluded:  # none on compose now that delays need no sch_netem
            print(f"soak: not run on {args.target} here: {', '.join(excluded)}", file=sys.stderr)
        only = [n.strip() for n in (args.scenarios or "").split(",") if n.strip()]
        try:
            plan = soak_plan(args.target, args.seed, args.duration, args.each, netem, only)
        except ValueError as e:
            print(f"chaos soak: {e}", file=sys.stderr)
            return 2
        code, line, _report = run(
            args.target,
            "soak",
            args.seed,
            args.duration,
            args.out or Path("chaos-runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-soak-{args.target}",
            rate=args.rate,
            settle_s=args.settle_timeout,
            command="python -m seglog.chaos "
            + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])),
            client=args.client,
            fetch_protocol=args.replica_fetch_protocol,
            plan=plan,
            delivery_timeout_ms=args.delivery_timeout_ms,
        )
        print(line, flush=True)
        return code
    command = "python -m seglog.chaos " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])
    )
    if args.secure and (args.target != "compose" or args.client != "seglog"):
        print(
            "chaos run: --secure is the compose target's secure profile, driven by "
            "seglog's clients (--target compose --client seglog)",
            file=sys.stderr,
        )
        return 2
    why_not = runnable(args.scenario, args.target, args.target != "compose" or netem_available())
    if why_not is not None:
        print(f"chaos run: {why_not}", file=sys.stderr)
        return 2
    code, line, _report = run(
        args.target,
        args.scenario,
        args.seed,
        args.duration,
        args.out,
        partitions=args.partitions,
        producers=args.producers,
        consumers=args.consumers,
        group_consumers=args.group_consumers,
        rate=args.rate,
        keep=args.keep,
        build=args.build,
        settle_s=args.settle_timeout,
        project=args.project,
        command=command,
        compact_keys=args.compact_keys,
        client=args.client,
        secure=args.secure,
        fetch_protocol=args.replica_fetch_protocol,
        delivery_timeout_ms=args.delivery_timeout_ms,
    )
    print(line, flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
