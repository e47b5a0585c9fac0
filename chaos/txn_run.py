"""`python -m seglog.chaos txn --target local|compose --scenario NAME --seed N --duration S
[--out DIR]`: the transactional workload (chaos/txn_workload.py) under one of the nemesis
scenarios (chaos/scenarios.py): bring a 3-node cluster up, create the topic (RF=3,
min.insync.replicas=2), start the workload, inject the scenario's faults for `duration`
seconds, heal, let the partitions converge, wait for a transaction begun after healing to
commit (8 s at least, longer while a worker is inside a hung librdkafka call), stop the
workers, read everything back read_committed, check the history (chaos/txn_checker.py)
and write report.md and report.json into the run directory.

Prints one summary line; exits 0 when no anomaly was found, 1 when one was, 3 when the
evidence is incomplete (the final read did not reach every partition's end, or no
transaction committed after healing, or the scenario injected no fault in the time
given), 2 on a harness error.

`python -m seglog.chaos txn --table local --duration S` runs every scenario the target
has, one after another, and prints the Markdown table of their results.
"""

from __future__ import annotations

import json
import random
import time
import traceback
from pathlib import Path
from typing import Any

from .cluster_view import ClusterView
from .compose_target import ComposeTarget
from .local_target import LocalTarget
from .scenarios import SCENARIOS, FaultContext
from .stuck_threads import dump_stacks
from .targets import Target
from .txn_checker import check
from .txn_workload import HUNG_CALL_S, OPERATION_TIMEOUT_S, TxnConfig, TxnWorkload
from .workload import History

EXIT_OK, EXIT_VIOLATION, EXIT_ERROR, EXIT_INCOMPLETE = 0, 1, 2, 3
# After healing, transactions must commit again. A worker may still be inside a librdkafka
# call that hangs past its timeout (txn_workload.HUNG_CALL_S, librdkafka issues 5456/5511)
# and then needs a new producer's init_transactions: the first commit may take that long.
AFTER_HEAL_MIN_S = 8.0
AFTER_HEAL_MAX_S = HUNG_CALL_S + OPERATION_TIMEOUT_S + 15.0


def _log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)


def run_txn(
    target_name: str,
    scenario_name: str,
    seed: int,
    duration: float,
    out: Path,
    *,
    partitions: int = 6,
    workers: int = 3,
    rate: float = 5.0,
    settle_s: float = 90.0,
    build: bool = False,
    command: str = "",
) -> tuple[int, str, dict[str, Any]]:
    """One run: (exit code, summary line, report)."""
    scenario = SCENARIOS[scenario_name]
    out = out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    target: Target
    if target_name == "local":
        target = LocalTarget(out / "cluster", seed, links=scenario.links)
    else:
        target = ComposeTarget(None, build=build, delay_proxies=scenario.delays, seed=seed)
    topic = f"txn-{scenario_name}-{seed}"
    configs = {"min.insync.replicas": "2", **scenario.topic_configs}
    history = History(out / "history.jsonl")
    meta = {
        "scenario": scenario_name,
        "target": target_name,
        "seed": seed,
        "duration": duration,
        "topic": topic,
        "partitions": partitions,
        "workers": workers,
        "rate_per_worker": rate,
        "topic_configs": configs,
        "command": command,
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    history.append({"type": "meta", **meta})
    workload: TxnWorkload | None = None
    view: ClusterView | None = None
    extra: dict[str, Any] = {}
    final_complete = False
    faults: list[dict[str, Any]] = []
    try:
        _log(f"[txn] {scenario_name} on {target_name}, seed {seed}: cluster up ({out})")
        target.up()
        view = ClusterView(target, topic)
        view.create_topic(partitions, configs, 90)
        workload = TxnWorkload(
            TxnConfig(target.kafka_bootstrap, topic, partitions, workers, rate, seed), history
        )
        history.append({"type": "phase", "name": "warmup"})
        workload.start()
        time.sleep(min(8.0, max(4.0, duration / 4)))  # the group forms, transactions flow
        ctx = FaultContext(
            target=target,
            view=view,
            history=history,
            rng=random.Random(seed),
            partitions=partitions,
            deadline=time.monotonic() + duration,
            log=_log,
        )
        history.append({"type": "phase", "name": "faults", "scenario": scenario_name})
        scenario.run(ctx)
        faults = ctx.faults
        if ctx.remaining() > 0:
            time.sleep(ctx.remaining())
        history.append({"type": "phase", "name": "heal"})
        _log(f"[txn] heal: {target.heal() or 'nothing to heal'}")
        extra["converged_after_heal"] = view.wait_converged(partitions, settle_s)
        healed_at = time.time()
        extra["first_commit_after_heal_s"] = _first_commit_after(
            out / "history.jsonl", history, healed_at
        )
        history.append({"type": "phase", "name": "quiesce"})
        _log("[txn] stopping the workers")
        stuck = workload.stop_workers(settle_s)
        if stuck:
            why = f"workers {', '.join(stuck)} did not stop in {settle_s:.0f} s"
            extra["stuck_workers"] = dump_stacks(out / "stuck-workers.txt", why)
            _log(f"[txn] {why}; {extra['stuck_workers']}")
        # transactions that began after healing and committed
        extra["committed_after_heal"] = len(_commit_ends(out / "history.jsonl", history, healed_at))
        history.append({"type": "phase", "name": "final-read"})
        final_complete = workload.final_read(max(120.0, settle_s * 1.5))
        workload.stop()
    except Exception as e:  # noqa: BLE001 - reported with whatever history exists
        extra["harness_error"] = "".join(traceback.format_exception(e))
        _log(f"[txn] harness error: {e!r}")
    finally:
        if workload is not None:
            workload.stop()
            extra["workload_errors"] = workload.errors[:200]
        if view is not None:
            view.close()
        try:
            target.save_logs(out / "node-logs")
        except Exception as e:  # noqa: BLE001
            extra["save_logs_error"] = repr(e)
        for attempt in (1, 2):  # a loaded machine may need longer than down's own wait
            try:
                target.down()
                break
            except Exception as e:  # noqa: BLE001 - reported; the verdict stands
                extra.setdefault("down_errors", []).append(f"attempt {attempt}: {e!r}")
        history.close()
    events = [json.loads(line) for line in (out / "history.jsonl").read_text().splitlines()]
    result = check(events)
    with_ww = check(events, ww_deps=True)
    report = {
        "meta": meta,
        **result.summary(),
        "with_ww_deps": {k: len(with_ww.anomalies[k]) for k in ("G0", "G1c")},
        "with_ww_deps_examples": {
            k: with_ww.anomalies[k][:3] for k in ("G0", "G1c") if with_ww.anomalies[k]
        },
        "final_read_complete": final_complete,
        "faults": [f for f in faults if f.get("phase") in ("start", "info")],
        **extra,
    }
    (out / "report.json").write_text(json.dumps(report, indent=1, default=str) + "\n")
    (out / "report.md").write_text(render(report))
    if "harness_error" in extra:
        code = EXIT_ERROR
    elif not result.ok:
        code = EXIT_VIOLATION
    elif (
        not final_complete
        or not extra.get("committed_after_heal")
        or not any(f.get("phase") == "start" for f in faults)
    ):
        # A scenario needs enough seconds for its first fault (some 15 s or more).
        code = EXIT_INCOMPLETE
    else:
        code = EXIT_OK
    return code, summary_line(report, code), report


def _first_commit_after(path: Path, history: History, t: float) -> float | None:
    """Wait at least AFTER_HEAL_MIN_S and until a transaction that began after `t` has
    committed (at most AFTER_HEAL_MAX_S): seconds from `t` to that commit, or None."""
    first: float | None = None
    while True:
        now = time.time()
        if first is None:
            ends = _commit_ends(path, history, t)
            first = min(ends) - t if ends else None
        if now - t >= AFTER_HEAL_MAX_S or (first is not None and now - t >= AFTER_HEAL_MIN_S):
            return first
        time.sleep(0.5)


def _commit_ends(path: Path, history: History, t: float) -> list[float]:
    history.flush()
    ends = []
    for line in path.read_text().splitlines():
        e = json.loads(line)
        if e.get("type") == "txn" and e["outcome"] == "committed" and e["begin"] > t:
            ends.append(e["end"])
    return ends


def summary_line(report: dict[str, Any], code: int) -> str:
    verdict = {EXIT_OK: "OK", EXIT_VIOLATION: "ANOMALIES", EXIT_ERROR: "ERROR"}.get(
        code, "INCOMPLETE"
    )
    m, c = report["meta"], report["counts"]
    found = ",".join(f"{k}={n}" for k, n in report["anomalies"].items() if n) or "none"
    return (
        f"{verdict} txn {m['scenario']} on {m['target']} seed {m['seed']}: "
        f"{c['committed']} committed, {c['aborted']} aborted, {c['unknown']} unknown "
        f"({c['unknown_seen_committed']} seen committed), {c['reads']} reads; "
        f"anomalies: {found}; with ww deps G0={report['with_ww_deps']['G0']} "
        f"G1c={report['with_ww_deps']['G1c']}"
    )


def render(report: dict[str, Any]) -> str:
    m, c = report["meta"], report["counts"]
    lines = [
        f"# Transactional chaos: {m['scenario']} on {m['target']} (seed {m['seed']})",
        "",
        f"`{m['command']}`" if m["command"] else "",
        "",
        f"{m['workers']} confluent-kafka transactional consume-transform-produce workers "
        f"({m['rate_per_worker']:g} transactions/s each, 2-3 partitions per transaction) "
        f"on a {m['partitions']}-partition topic (RF=3, {m['topic_configs']}), a "
        f"read_committed observer, {m['duration']:g} s of faults, then a final "
        f"read_committed read (complete: {report['final_read_complete']}).",
        "",
        "| anomaly | found |",
        "|---|---|",
    ]
    lines += [f"| {k} | {n} |" for k, n in report["anomalies"].items()]
    lines += [
        "",
        "With ww dependencies (write order by offset; cycles Kafka allows, as information): "
        f"G0 {report['with_ww_deps']['G0']}, G1c {report['with_ww_deps']['G1c']}.",
        "",
        "| figure | value |",
        "|---|---|",
    ]
    lines += [f"| {k} | {v} |" for k, v in c.items()]
    lines += [
        f"| transactions begun and committed after healing | {report.get('committed_after_heal')} |"
    ]
    first = report.get("first_commit_after_heal_s")
    lines += [f"| seconds from healing to the first such commit | {first} |"]
    lines += ["", "Faults:", ""]
    lines += [
        f"- {f['name']} {f['phase']} node {f.get('node')} "
        f"{ {k: v for k, v in f.items() if k not in ('name', 'phase', 'node', 'type', 't')} }"
        for f in report["faults"][:40]
    ]
    for k, examples in report.get("examples", {}).items():
        lines += ["", f"Examples of {k}:", ""] + [f"- `{json.dumps(x)}`" for x in examples[:5]]
    if report.get("notes"):
        lines += ["", "Notes:", ""] + [f"- {n}" for n in report["notes"]]
    if report.get("stuck_workers"):
        lines += ["", f"Workers that did not stop, their stacks: {report['stuck_workers']}"]
    if report.get("harness_error"):
        lines += ["", "Harness error:", "", "```", report["harness_error"][-3000:], "```"]
    return "\n".join(lines) + "\n"


def table(
    target_name: str, seed: int, duration: float, out: Path, command: str, only: list[str]
) -> int:
    """Every scenario the target runs (or those of `only`, in that order), one after
    another; prints a Markdown table."""
    rows = []
    worst = EXIT_OK
    names = [n for n in (only or SCENARIOS) if target_name in SCENARIOS[n].targets and n != "calm"]
    for name in names:
        code, line, report = run_txn(target_name, name, seed, duration, out / name, command=command)
        print(line, flush=True)
        c = report.get("counts", {})
        found = ", ".join(f"{k} {n}" for k, n in report.get("anomalies", {}).items() if n)
        rows.append(
            f"| {name} | {line.split()[0]} | {c.get('committed', 0)} / {c.get('aborted', 0)} / "
            f"{c.get('unknown', 0)} | {c.get('reads', 0)} | {found or '0'} | "
            f"{report.get('with_ww_deps', {}).get('G0', '-')} |"
        )
        worst = max(worst, code)
    print(
        "| scenario | result | committed / aborted / unknown txns | reads | anomalies | "
        "G0 with ww deps (allowed) |"
    )
    print("|---|---|---|---|---|---|")
    print("\n".join(rows), flush=True)
    return worst
