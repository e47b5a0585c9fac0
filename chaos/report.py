"""A chaos run's report: counts, unavailability windows, a PNG timeline of
throughput with the faults marked, and the seed — written into the run directory
as report.json (everything), report.md (for people) and timeline.png."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from .checker import INVARIANTS, CheckResult, PartitionReport
from .columns import INVOKE, OK, POLL, ColumnHistory

# sent, acked, gaps and last ack per step and partition, the partitions sent to
_StepCounts = tuple[list[int], list[int], list[dict[int, float]], list[dict[int, float]], set[int]]

# The events a report reads: dicts, or a ColumnHistory (an hour's soak: its
# high-volume events as columns, computed on with numpy, the same results).
Events = Sequence[Mapping[str, Any]] | ColumnHistory

# A stretch this long without a single acknowledgement counts as unavailability.
DEFAULT_GAP_S = 1.0


def _rare(events: Events) -> Sequence[Mapping[str, Any]]:
    """The events other than invoke, ok and poll (all of them for a list)."""
    return events.rare if isinstance(events, ColumnHistory) else events


def _max_t(events: Events, default: float) -> float:
    if isinstance(events, ColumnHistory):
        return events.max_t(default)
    return max((e.get("t", 0.0) for e in events), default=default)


def _ok_t(events: ColumnHistory) -> tuple[np.ndarray, np.ndarray]:
    """(t, partition) of every acknowledgement, in history order."""
    m = events.kind == OK
    return events.t[m], events.partition[m]


def load_window(events: Events) -> tuple[float, float]:
    """(first send, when producing stopped): the span availability is judged on."""
    if isinstance(events, ColumnHistory):
        sends = events.t[events.kind == INVOKE]
        start = float(sends.min()) if len(sends) else 0.0
    else:
        invokes = [e["t"] for e in events if e.get("type") == "invoke"]
        start = min(invokes) if invokes else 0.0
    stops = [
        e["t"] for e in _rare(events) if e.get("type") == "phase" and e.get("name") == "quiesce"
    ]
    end = min(stops) if stops else _max_t(events, start)
    return start, end


def unavailability_windows(
    events: Events,
    gap_s: float = DEFAULT_GAP_S,
    partition: int | None = None,
) -> list[dict[str, Any]]:
    """Gaps of at least gap_s between successive acknowledgements (and from the first
    send / to the end of producing), with the faults that overlap each; of one
    partition's acknowledgements when `partition` is given."""
    start, end = load_window(events)
    if isinstance(events, ColumnHistory):
        t, p = _ok_t(events)
        m = (t >= start) & (t <= end)
        if partition is not None:
            m &= p == partition
        acks: Any = np.sort(t[m])
    else:
        acks = sorted(
            e["t"]
            for e in events
            if e.get("type") == "ok"
            and start <= e["t"] <= end
            and (partition is None or e.get("partition") == partition)
        )
    return _windows(acks, start, end, fault_spans(events), gap_s)


def _windows(
    acks: Sequence[float] | np.ndarray,
    start: float,
    end: float,
    spans: list[dict[str, Any]],
    gap_s: float,
) -> list[dict[str, Any]]:
    points = np.concatenate([[start], np.asarray(acks, dtype=np.float64), [end]])
    windows = []
    # Only the gaps need Python: a soak has tens of millions of acks.
    for i in np.flatnonzero(points[1:] - points[:-1] >= gap_s).tolist():
        a, b = float(points[i]), float(points[i + 1])
        if b - a >= gap_s:
            overlapping = sorted(
                {f"{s['name']}@{s['node']}" for s in spans if s["start"] < b and s["end"] > a}
            )
            windows.append(
                {
                    "start_s": round(a - start, 3),
                    "end_s": round(b - start, 3),
                    "seconds": round(b - a, 3),
                    "faults": overlapping,
                }
            )
    return windows


def partition_outages(
    events: Events, gap_s: float = DEFAULT_GAP_S
) -> dict[int, list[dict[str, Any]]]:
    """Per partition that was written to, its unavailability windows: a fault on one
    leader stops only that leader's partitions, which the whole-topic view hides.
    One pass over the history (a run at load holds millions of events)."""
    start, end = load_window(events)
    spans = fault_spans(events)
    if isinstance(events, ColumnHistory):
        sent = events.partition[(events.kind == INVOKE) & (events.partition >= 0)]
        t, p = _ok_t(events)
        m = (t >= start) & (t <= end)
        t, p = t[m], p[m]
        order = np.lexsort((t, p))
        t, p = t[order], p[order]
        out = {}
        for q in sorted(set(np.unique(sent).tolist()) | set(np.unique(p).tolist())):
            a, b = np.searchsorted(p, [q, q + 1])
            out[q] = _windows(t[a:b], start, end, spans, gap_s)
        return out
    acks: dict[int, list[float]] = {}
    for e in events:
        kind = e.get("type")
        if kind == "invoke":
            acks.setdefault(e["partition"], [])
        elif kind == "ok" and start <= e["t"] <= end and e.get("partition") is not None:
            acks.setdefault(e["partition"], []).append(e["t"])
    return {p: _windows(sorted(acks[p]), start, end, spans, gap_s) for p in sorted(acks)}


def plan_steps(events: Events) -> list[dict[str, Any]]:
    """A soak's steps: each scenario's faults, then its heal and settle, until the
    next one starts. Per step the sends started, the acknowledgements and the
    longest stretch any partition went without an ack (one pass over the history)."""
    marks = [
        (e["t"], e["name"], e.get("scenario"))
        for e in _rare(events)
        if e.get("type") == "phase" and e.get("name") in ("faults", "heal", "quiesce")
    ]
    starts = [(t, scenario) for t, name, scenario in marks if name == "faults"]
    if not starts:
        return []
    last_t = _max_t(events, 0.0)
    stop = next((t for t, name, _ in marks if name == "quiesce"), last_t)
    ends = [t for t, _ in starts[1:]] + [stop]
    heals = [t for t, name, _ in marks if name == "heal"]
    steps: list[dict[str, Any]] = []
    for (t0, scenario), t1 in zip(starts, ends, strict=True):
        heal = next((t for t in heals if t0 <= t <= t1), t1)
        steps.append({"scenario": scenario, "start": t0, "heal": heal, "end": t1})
    counts = (
        _step_counts(events, steps)
        if isinstance(events, ColumnHistory)
        else _step_counts_of_events(events, steps)
    )
    return _finish_steps(steps, counts)


def _step_counts(h: ColumnHistory, steps: list[dict[str, Any]]) -> _StepCounts:
    """_step_counts_of_events with numpy: an event's step is the one its history
    position reaches by the running max of the times (the loop's pointer only
    advances), as long as the event is not before that step's start."""
    rows = np.flatnonzero((h.kind == INVOKE) | (h.kind == OK))
    t = np.nan_to_num(h.t[rows], nan=0.0)
    kind = h.kind[rows]
    part = h.partition[rows]
    del rows
    ends = np.maximum.accumulate(np.array([s["end"] for s in steps]))
    begins = np.array([s["start"] for s in steps])
    i = np.searchsorted(ends, np.maximum.accumulate(t), side="right")
    inside = i < len(steps)
    inside[inside] = t[inside] >= begins[i[inside]]
    n = len(steps)
    sent = np.bincount(i[inside & (kind == INVOKE)], minlength=n).tolist()[:n]
    acked = np.bincount(i[inside & (kind == OK)], minlength=n).tolist()[:n]
    partitions = set(np.unique(part[(kind == INVOKE) & (part >= 0)]).tolist())
    sel = np.flatnonzero(inside & (kind == OK))
    st, sp, tt = i[sel].astype(np.int64), part[sel].astype(np.int64), t[sel]
    order = np.argsort((st << 32) | sp, kind="stable")
    st, sp, tt = st[order], sp[order], tt[order]
    first = np.r_[True, (st[1:] != st[:-1]) | (sp[1:] != sp[:-1])] if len(st) else np.zeros(0, bool)
    since = np.where(first, begins[st] if len(st) else tt, np.r_[tt[:1], tt[:-1]])
    gap = tt - since
    gaps: list[dict[int, float]] = [{} for _ in steps]
    last_ack: list[dict[int, float]] = [{} for _ in steps]
    heads = np.flatnonzero(first)
    if len(heads):
        worst = np.maximum.reduceat(gap, heads)
        lasts = np.r_[heads[1:], len(st)] - 1
        for k, h0 in enumerate(heads.tolist()):
            j, p = int(st[h0]), int(sp[h0])
            gaps[j][p] = max(0.0, float(worst[k]))
            last_ack[j][p] = float(tt[lasts[k]])
    return sent, acked, gaps, last_ack, partitions


def _step_counts_of_events(
    events: Sequence[Mapping[str, Any]], steps: list[dict[str, Any]]
) -> _StepCounts:
    """Per step: sends, acks, per partition the longest gap between acks and the
    last ack (one pass; the pointer to the step only advances)."""
    sent = [0] * len(steps)
    acked = [0] * len(steps)
    gaps: list[dict[int, float]] = [{} for _ in steps]
    last_ack: list[dict[int, float]] = [{} for _ in steps]
    partitions: set[int] = set()
    i = 0
    for e in events:
        kind = e.get("type")
        if kind not in ("invoke", "ok"):
            continue
        t = e.get("t", 0.0)
        p = e.get("partition")
        if kind == "invoke" and p is not None:
            partitions.add(p)
        while i < len(steps) and t >= steps[i]["end"]:
            i += 1
        if i == len(steps) or t < steps[i]["start"]:
            continue
        if kind == "invoke":
            sent[i] += 1
            continue
        acked[i] += 1
        if p is not None:
            since = last_ack[i].get(p, steps[i]["start"])
            gaps[i][p] = max(gaps[i].get(p, 0.0), t - since)
            last_ack[i][p] = t
    return sent, acked, gaps, last_ack, partitions


def _finish_steps(steps: list[dict[str, Any]], counts: _StepCounts) -> list[dict[str, Any]]:
    sent, acked, gaps, last_ack, partitions = counts
    for j, step in enumerate(steps):
        for p in partitions:  # to the step's end: a partition silent until then counts
            since = last_ack[j].get(p, step["start"])
            gaps[j][p] = max(gaps[j].get(p, 0.0), step["end"] - since)
        step.update(
            sent=sent[j],
            acknowledged=acked[j],
            fault_s=round(step["heal"] - step["start"], 1),
            settle_s=round(step["end"] - step["heal"], 1),
            acks_per_s=round(acked[j] / max(step["end"] - step["start"], 1e-9)),
            worst_partition_gap_s=round(max(gaps[j].values(), default=0.0), 1),
        )
        for k in ("start", "heal", "end"):
            step[k] = round(step[k], 3)
    return steps


_SPAN_KEYS = frozenset({"type", "name", "phase", "node", "t"})


def fault_spans(events: Events) -> list[dict[str, Any]]:
    """Each fault's start..end (an unfinished one ends at the last event), with what its
    start and end events say (`detail`, `end_detail`: e.g. what the link rules did)."""
    last_t = _max_t(events, 0.0)
    open_: dict[tuple[str, Any], dict[str, Any]] = {}
    spans = []
    for e in _rare(events):
        if e.get("type") != "fault":
            continue
        key = (e["name"], e.get("node"))
        if e.get("phase") == "start":
            detail = {k: v for k, v in e.items() if k not in _SPAN_KEYS}
            open_[key] = {
                "name": e["name"],
                "node": e.get("node"),
                "start": e["t"],
                "end": None,
                "detail": detail,
            }
        elif e.get("phase") == "end" and key in open_:
            span = open_.pop(key)
            span["end"] = e["t"]
            end_detail = {k: v for k, v in e.items() if k not in _SPAN_KEYS}
            if end_detail:
                span["end_detail"] = end_detail
            spans.append(span)
    for span in open_.values():
        span["end"] = last_t
        spans.append(span)
    return sorted(spans, key=lambda s: s["start"])


def throughput(events: Events, t0: float, bucket_s: float = 1.0) -> dict[str, list[float]]:
    """Per bucket: sends started, acknowledged, failed and records read (per second)."""
    if isinstance(events, ColumnHistory):
        ts = [float(e.get("t", t0)) for e in events.rare]
        if events.rows:
            ts.append(float(np.nan_to_num(events.t, nan=t0).max()))
        last = max(ts, default=t0)
    else:
        last = max((e.get("t", t0) for e in events), default=t0)
    # Wider buckets for a very long history: the plot needs no more points.
    bucket_s = max(bucket_s, (last - t0) / 20_000)
    n = int((last - t0) / bucket_s) + 1
    series = {k: [0.0] * n for k in ("invoke", "ok", "fail", "poll")}
    if isinstance(events, ColumnHistory):
        for code, name in ((INVOKE, "invoke"), (OK, "ok"), (POLL, "poll")):
            t = events.t[events.kind == code]
            t = t[t >= t0]  # a missing time (NaN) is not counted, as in the loop
            counts = np.bincount(((t - t0) / bucket_s).astype(np.int64), minlength=n)
            series[name] = (counts * (1 / bucket_s)).tolist()
    for e in _rare(events):
        kind = e.get("type")
        if kind in series and e.get("t", 0) >= t0:
            series[kind][int((e["t"] - t0) / bucket_s)] += 1 / bucket_s
    series["t"] = [i * bucket_s for i in range(n)]
    return series


def label_rows(xs: Sequence[float], min_gap: float, rows: int) -> list[int]:
    """A row for each label at x (in the order given) so that labels sharing a row are
    at least min_gap apart: the lowest row free at x, else the one free soonest."""
    assert rows >= 1 and min_gap >= 0
    last = [float("-inf")] * rows
    out = []
    for x in xs:
        free = [r for r in range(rows) if x - last[r] >= min_gap]
        row = free[0] if free else min(range(rows), key=lambda r: last[r])
        last[row] = x
        out.append(row)
    return out


def plot_timeline(
    path: Path,
    events: Events,
    windows: Sequence[Mapping[str, Any]],
    title: str,
) -> None:
    import matplotlib

    matplotlib.use("Agg")  # no display on a server
    import matplotlib.pyplot as plt

    t0, _end = load_window(events)
    series = throughput(events, t0)
    fig, ax = plt.subplots(figsize=(13, 5.5))
    ax.plot(series["t"], series["ok"], label="acknowledged/s", color="tab:green", lw=1.4)
    ax.plot(series["t"], series["invoke"], label="sent/s", color="tab:blue", lw=0.8, alpha=0.7)
    ax.plot(series["t"], series["fail"], label="failed/s", color="tab:red", lw=0.8)
    ax2 = ax.twinx()
    ax2.plot(series["t"], series["poll"], label="read/s", color="tab:gray", lw=0.7, alpha=0.6)
    ax2.set_ylabel("records read / s")
    colors = [
        "tab:orange",
        "tab:purple",
        "tab:brown",
        "tab:pink",
        "tab:olive",
        "tab:cyan",
        "gold",
        "navy",
    ]
    names = sorted({s["name"] for s in fault_spans(events)})
    color_of = {n: colors[i % len(colors)] for i, n in enumerate(names)}
    top = max(max(series["ok"], default=1), max(series["invoke"], default=1), 1) * 1.15
    # Labels close in time go to different heights instead of printing over each other.
    span_x = max(series["t"][-1] if series["t"] else 1.0, 1.0)
    spans = sorted(fault_spans(events), key=lambda sp: sp["start"])
    phases = [e for e in _rare(events) if e.get("type") == "phase" and e.get("t", 0) >= t0]
    labels: list[tuple[float, str, Mapping[str, Any]]] = [
        (sp["start"] - t0, "fault", sp) for sp in spans
    ]
    labels += [(e["t"] - t0, "phase", e) for e in phases]
    labels.sort(key=lambda item: item[0])
    heights = (0.97, 0.78, 0.59, 0.40)
    rows = label_rows([x for x, _, _ in labels], min_gap=span_x * 0.025, rows=len(heights))
    for (x, kind, item), row in zip(labels, rows, strict=True):
        if kind == "fault":
            b = item["end"] - t0
            ax.axvspan(x, max(b, x + 0.2), color=color_of[item["name"]], alpha=0.22, lw=0)
            text, color = f"{item['name']}\nnode {item['node']}", color_of[item["name"]]
        else:
            ax.axvline(x, color="black", lw=0.5, ls=":")
            text, color = str(item.get("name", "")), "black"
        ax.text(x, top * heights[row], text, fontsize=6, va="top", rotation=90, color=color)
    for w in windows:
        ax.hlines(-top * 0.03, w["start_s"], w["end_s"], color="red", lw=4)
    ax.set_ylim(-top * 0.06, top)
    ax.set_xlabel("seconds since the first send (red bars: no acknowledgement for ≥1 s)")
    ax.set_ylabel("records / s")
    ax.set_title(title, fontsize=10)
    handles = ax.get_legend_handles_labels()
    handles2 = ax2.get_legend_handles_labels()
    ax.legend(handles[0] + handles2[0], handles[1] + handles2[1], loc="upper right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _origins(result: CheckResult) -> str:
    """'(epoch_bump:11)' after the duplicated count: whose doing the copies were
    (chaos/duplicate_origins.py); nothing when there are none."""
    if not result.duplicated_by:
        return ""
    return "(" + ",".join(f"{k}:{n}" for k, n in result.duplicated_by.items()) + ")"


def summary_line(
    meta: Mapping[str, Any],
    result: CheckResult,
    windows: Sequence[Mapping[str, Any]],
    report_path: Path,
    outages: Mapping[int, Sequence[Mapping[str, Any]]] | None = None,
) -> str:
    unavailable = sum(w["seconds"] for w in windows)
    worst = max((sum(w["seconds"] for w in ws) for ws in (outages or {}).values()), default=0.0)
    verdict = "OK" if result.ok else "FAIL(" + ",".join(result.failed_invariants()) + ")"
    return (
        f"{verdict} {meta['scenario']}/{meta['target']} seed={meta['seed']} "
        f"client={meta.get('client', 'seglog')} "
        f"replica.fetch.protocol={meta.get('replica_fetch_protocol', 'kafka')} "
        f"sent={result.sent} acknowledged={result.acknowledged} "
        f"acknowledged_without_offset={result.acknowledged_without_offset} lost={result.lost} "
        f"duplicated={result.duplicated}{_origins(result)} divergent={result.divergent} "
        f"conflicts={result.conflicts} phantom={result.phantom} skipped={result.skipped} "
        f"backwards={result.backwards} nonmonotonic_send={result.nonmonotonic_send} "
        f"indeterminate={result.indeterminate} commits={result.commits} "
        f"commit_backwards={result.commit_backwards} lost_commits={result.lost_commits} "
        f"duplicated_commits={result.duplicated_commits} "
        f"implicit_acks={result.implicit_acks} "
        f"implicit_ack_missing={result.implicit_ack_missing} "
        f"unavailable={unavailable:.1f}s/{len(windows)} windows "
        f"worst_partition_unavailable={worst:.1f}s report={report_path}"
    )


def partition_headline(per_partition: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """What a client of one partition saw: the worst partition's unavailable seconds,
    the sum over partitions and how many had any (the topic-wide windows hide a stall
    that other partitions' acks cover)."""
    totals = {p: float(v["total_s"]) for p, v in per_partition.items()}
    worst = max(totals, key=lambda p: (totals[p], -int(p)), default=None)
    return {
        "worst_partition": None if worst is None else int(worst),
        "worst_partition_s": 0.0 if worst is None else totals[worst],
        "partition_seconds": round(sum(totals.values()), 3),
        "partitions_unavailable": sum(1 for t in totals.values() if t > 0),
        "partitions_written": len(totals),
    }


def unavailability_headline(u: Mapping[str, Any]) -> str:
    worst = (
        f"worst partition {u['worst_partition']}: {u['worst_partition_s']:g} s"
        if u["worst_partition_s"] > 0
        else "no partition went 1 s without an ack"
    )
    return (
        f"## Unavailability — {worst}; {u['partition_seconds']:g} partition-seconds on "
        f"{u['partitions_unavailable']} of {u['partitions_written']} partitions; whole topic "
        f"{u['total_s']:g} s in {len(u['windows'])} windows of ≥{u['gap_threshold_s']:g} s "
        f"without any ack"
    )


def write_report(
    run_dir: Path,
    meta: Mapping[str, Any],
    result: CheckResult,
    events: Events,
    replicas: Sequence[PartitionReport],
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """report.json, report.md and timeline.png in run_dir; the path of report.md."""
    run_dir.mkdir(parents=True, exist_ok=True)
    windows = unavailability_windows(events)
    start, end = load_window(events)
    spans = fault_spans(events)
    title = (
        f"seglog chaos: {meta['scenario']} on {meta['target']}, seed {meta['seed']} — "
        f"sent {result.sent}, acknowledged {result.acknowledged}, lost {result.lost}, "
        f"duplicated {result.duplicated}, divergent {result.divergent}"
    )
    png = run_dir / "timeline.png"
    plot_error = None
    try:
        plot_timeline(png, events, windows, title)
    except ImportError:
        plot_error = "matplotlib is not installed: pip install 'seglog[chaos]' to get timeline.png"
    except Exception as e:  # noqa: BLE001 - the numbers matter more than the picture
        plot_error = repr(e)
    per_partition = {
        str(p): {"total_s": round(sum(w["seconds"] for w in ws), 3), "windows": ws}
        for p, ws in partition_outages(events).items()
    }
    data = {
        "meta": dict(meta),
        "ok": result.ok,
        "counts": {
            k: getattr(result, k)
            for k in (
                "sent",
                "acknowledged",
                "acknowledged_without_offset",
                "failed_definite",
                "indeterminate",
                "indeterminate_read",
                "read_records",
                "distinct_values_read",
                *INVARIANTS,
                "lagging",
                "unreconciled",
            )
        },
        "failed_invariants": result.failed_invariants(),
        "final_read_complete": result.final_read_complete,
        "load_seconds": round(end - start, 3),
        "unavailability": {
            "gap_threshold_s": DEFAULT_GAP_S,
            "total_s": round(sum(w["seconds"] for w in windows), 3),
            "windows": windows,
            "per_partition": per_partition,
            **partition_headline(per_partition),
        },
        "faults": [
            {**s, "start_s": round(s["start"] - start, 3), "end_s": round(s["end"] - start, 3)}
            for s in spans
        ],
        "steps": plan_steps(events) if len(meta.get("plan") or ()) > 1 else [],
        "examples": asdict(result.examples),
        "replicas": [asdict(r) for r in replicas],
        "notes": result.notes,
        "timeline": png.name if plot_error is None else None,
        "plot_error": plot_error,
        **(dict(extra) if extra else {}),
    }
    (run_dir / "report.json").write_text(json.dumps(data, indent=2, default=str))
    md = run_dir / "report.md"
    md.write_text(_markdown(data, result))
    return md


ORIGIN_MEANINGS = {
    "same_epoch": "same producer id and epoch: the broker failed to deduplicate a retry",
    "older_epoch": "a later copy under a lower epoch: the broker accepted a fenced producer",
    "epoch_bump": (
        "same producer id, a higher producer epoch for each later copy: the client "
        "renumbered records it had written under a new epoch (no broker can "
        "deduplicate across epochs)"
    ),
    "new_producer_id": "copies from different producer ids: the client sent them again anew",
    "unknown": "a copy's batch is not in the leader's files",
}


def _origin_lines(origins: Mapping[str, Any]) -> list[str]:
    lines = ["", "Where the copies came from (the leader's batch headers):", ""]
    for origin, n in origins["counts"].items():
        if n:
            lines.append(f"- {origin}: {n} ({ORIGIN_MEANINGS[origin]})")
            for ex in origins["examples"].get(origin, [])[:3]:
                lines.append(f"  - `{json.dumps(ex)[:600]}`")
    return lines


def _markdown(data: Mapping[str, Any], result: CheckResult) -> str:
    meta = data["meta"]
    c = data["counts"]
    verdict = "OK" if data["ok"] else "FAILED: " + ", ".join(data["failed_invariants"])
    lines = [
        f"# seglog chaos run: {meta['scenario']} on {meta['target']}",
        "",
        f"- verdict: **{verdict}**",
        f"- seed: {meta['seed']}; duration: {meta['duration']} s of faults; "
        f"load: {data['load_seconds']} s",
        f"- topic: {meta['topic']} ({meta['partitions']} partitions, RF=3, "
        f"min.insync.replicas=2, configs {meta.get('topic_configs')})",
        f"- replay: `{meta.get('command', '')}`",
        "",
        "| sent | acknowledged | lost | duplicated | divergent | conflicts | phantom | "
        "skipped | backwards | indeterminate (read) | definite failures |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        f"| {c['sent']} | {c['acknowledged']} | {c['lost']} | {c['duplicated']} | "
        f"{c['divergent']} | {c['conflicts']} | {c['phantom']} | {c['skipped']} | "
        f"{c['backwards']} | {c['indeterminate']} ({c['indeterminate_read']}) | "
        f"{c['failed_definite']} |",
        "",
        f"Final read complete: {data['final_read_complete']}. Replicas short of the HW "
        f"after healing: {c['lagging']} ({c['unreconciled']} of them with a tail that "
        f"differs from the leader's, not yet truncated).",
        "",
        f"Acknowledged without an offset: {c['acknowledged_without_offset']} (librdkafka "
        "reports records that a later batch's success acknowledged as delivered at no "
        "offset; each must still be read, or it counts as lost).",
        "",
        unavailability_headline(data["unavailability"]),
        "",
    ]
    for w in data["unavailability"]["windows"]:
        lines.append(
            f"- {w['start_s']:.1f}–{w['end_s']:.1f} s ({w['seconds']:.1f} s): "
            f"{', '.join(w['faults']) or 'no fault active'}"
        )
    lines += ["", "Per partition (stretches of ≥1 s without an ack on that partition):", ""]
    for p, per in sorted(data["unavailability"]["per_partition"].items(), key=lambda x: int(x[0])):
        spans = ", ".join(
            f"{w['start_s']:.1f}–{w['end_s']:.1f} s ({'+'.join(w['faults']) or 'no fault'})"
            for w in per["windows"]
        )
        lines.append(f"- partition {p}: {per['total_s']} s" + (f": {spans}" if spans else ""))
    if data.get("steps"):
        lines += [
            "",
            "## Steps (each scenario's faults, then its heal and settle)",
            "",
            "| # | scenario | faults (s) | heal+settle (s) | sent | acknowledged | acks/s "
            "| worst partition without acks (s) |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for n, st in enumerate(data["steps"], 1):
            lines.append(
                f"| {n} | {st['scenario']} | {st['fault_s']} | {st['settle_s']} | "
                f"{st['sent']} | {st['acknowledged']} | {st['acks_per_s']} | "
                f"{st['worst_partition_gap_s']} |"
            )
        lines.append(
            "\nLost, duplicated and divergent records are judged on the whole soak "
            "(the table above): one final read and one comparison of the replicas."
        )
    lines += ["", "## Faults", ""]
    for f in data["faults"]:
        done = ", ".join(f"{k} {v}" for k, v in f.get("end_detail", {}).items())
        lines.append(
            f"- {f['start_s']:.1f}–{f['end_s']:.1f} s: {f['name']} on node {f['node']}"
            + (f" ({done})" if done else "")
        )
    lines += ["", "## Replicas below the HW", ""]
    for r in data["replicas"]:
        state = "identical" if r["identical"] else f"DIFFERENT: {r['first_difference']}"
        if r["lagging"]:
            state += f"; lagging {r['lagging']}"
        if r["unreconciled"]:
            state += f"; unreconciled tails {r['unreconciled']}"
        sizes = ", ".join(
            f"node {x['node']}: {x['hw_byte_position']} B sha256 {x['sha256'][:12]}"
            + (f" problems {x['problems']}" if x["problems"] else "")
            for x in r["replicas"]
        )
        lines.append(
            f"- partition {r['partition']} (leader {r['leader']}, HW {r['high_watermark']}): "
            f"{state}; {sizes}"
        )
    if not result.ok:
        lines += ["", "## Violations (examples)", ""]
        for name in result.failed_invariants():
            lines.append(f"### {name}")
            for ex in data["examples"][name][:10]:
                lines.append(f"- `{json.dumps(ex, default=str)[:600]}`")
            if name == "duplicated" and data.get("duplicate_origins"):
                lines += _origin_lines(data["duplicate_origins"])
    if data.get("evidence"):
        lines += ["", "## Node log lines", ""]
        for node, node_lines in data["evidence"].items():
            lines.append(f"### node {node}")
            lines += ["```", *node_lines, "```"]
    if data["notes"]:
        lines += ["", "## Notes", "", *[f"- {n}" for n in data["notes"]]]
    if data.get("timeline"):
        lines += ["", f"![timeline]({data['timeline']})"]
    return "\n".join(lines) + "\n"
