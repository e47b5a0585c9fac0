"""The columnar checker and report (chaos/columns.py, chaos/column_checker.py) give
exactly what the dict-based reference gives (checker.check_history, report.py's
loops over dicts): counts, examples and their order, on random histories that hold
every anomaly, and on a history file read both ways."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog.chaos.checker import INVARIANTS, check_history
from seglog.chaos.column_checker import check_columns
from seglog.chaos.columns import ColumnHistory, read_columns
from seglog.chaos.report import (
    fault_spans,
    load_window,
    partition_outages,
    plan_steps,
    throughput,
    unavailability_windows,
    write_report,
)
from seglog.chaos.workload import read_history

# Values of the workload's form (packed into ints) and others (from a table),
# including "p0-01", which must not be taken for "p0-1".
VALUES = ["p0-0", "p0-1", "p0-2", "p1-0", "p1-1", "p2-7", "p0-01", "a", "b", "x-1"]
PRODUCERS = ["p0", "p1"]
CONSUMERS = ["c0", "c1", "g0", "g1"]


@st.composite
def histories(draw: st.DrawFn) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    if draw(st.booleans()):
        policy = draw(st.sampled_from(["delete", "compact", "compact,delete"]))
        events.append({"type": "meta", "topic_configs": {"cleanup.policy": policy}, "t": 0.0})
    t = 1000.0
    sent: list[dict[str, Any]] = []
    partition = st.integers(0, 2)
    offset = st.integers(0, 6)
    for _ in range(draw(st.integers(0, 60))):
        # Mostly forward in time, sometimes a little back (threads write out of order).
        t += draw(st.sampled_from([0.0, 0.01, 0.3, 1.5, -0.2]))
        kind = draw(
            st.sampled_from(
                ["invoke", "ok", "ok", "fail", "poll", "poll", "poll", "seek"]
                + ["commit", "committed", "phase", "fault", "implicit_ack"]
            )
        )
        e: dict[str, Any] = {"type": kind, "t": t}
        if kind in ("invoke", "ok", "fail"):
            e["process"] = draw(st.sampled_from(PRODUCERS))
            e["value"] = draw(st.sampled_from(VALUES))
            if kind != "invoke" or draw(st.integers(0, 9)):
                e["partition"] = draw(partition)
            if kind == "invoke" and draw(st.booleans()):
                e["key"] = draw(st.sampled_from(["k0", "k1"]))
            if kind == "ok":
                e["offset"] = draw(offset)
            if kind == "fail":
                e.update(error="X", definite=draw(st.booleans()))
            if kind == "invoke":
                sent.append(e)
            elif sent and draw(st.booleans()):  # the outcome of a send made before
                sent_e = draw(st.sampled_from(sent))
                e.update(process=sent_e["process"], value=sent_e["value"])
                e["partition"] = sent_e.get("partition", 0)
        elif kind == "poll":
            e.update(
                process=draw(st.sampled_from(CONSUMERS)),
                partition=draw(partition),
                offset=draw(offset),
                value=draw(st.sampled_from(VALUES)),
            )
            if e["process"].startswith("g"):
                e["group"] = "grp"
            if not draw(st.integers(0, 15)):
                del e["t"]
        elif kind == "seek":
            e.update(process=draw(st.sampled_from(CONSUMERS)), partition=draw(partition))
            e["offset"] = draw(st.one_of(st.none(), offset))
        elif kind in ("commit", "committed"):
            e.update(
                process=draw(st.sampled_from(CONSUMERS)),
                group="grp",
                partition=draw(partition),
                offset=draw(offset),
            )
            e["t0" if kind == "committed" else "t"] = t - draw(st.sampled_from([0.0, 0.5]))
        elif kind == "implicit_ack":
            values = draw(st.lists(st.sampled_from(VALUES), min_size=1, max_size=3))
            e.update(
                process=draw(st.sampled_from(PRODUCERS)),
                partition=draw(partition),
                msgids=[1, len(values)],
                values=values,
            )
        elif kind == "phase":
            e["name"] = draw(st.sampled_from(["faults", "heal", "quiesce"]))
            e["scenario"] = draw(st.sampled_from(["s1", "s2"]))
        else:
            e.update(
                name=draw(st.sampled_from(["kill", "pause"])),
                node=draw(st.integers(1, 2)),
                phase=draw(st.sampled_from(["start", "end"])),
            )
        events.append(e)
    return events


def same(a: Any, b: Any) -> None:
    assert json.dumps(a, default=str) == json.dumps(b, default=str)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.sampled_from([None, True, False]))
def test_columns_check_exactly_as_the_reference(
    events: list[dict[str, Any]], compacted: bool | None
) -> None:
    expected = check_history(events, compacted=compacted).to_dict()
    got = check_columns(ColumnHistory.from_events(events), compacted=compacted).to_dict()
    same(got, expected)


def test_every_anomaly_is_generated() -> None:
    """The strategy above reaches every invariant (else the property proves little)."""
    seen: set[str] = set()

    @settings(max_examples=400, deadline=None, database=None)
    @given(histories(), st.sampled_from([None, True, False]))
    def collect(events: list[dict[str, Any]], compacted: bool | None) -> None:
        seen.update(check_history(events, compacted=compacted).failed_invariants())

    collect()
    # Every invariant the history alone can break (divergence needs replica files).
    assert seen >= set(INVARIANTS) - {"divergent"}


@settings(max_examples=200, deadline=None)
@given(histories())
def test_report_over_columns_is_the_reference_report(events: list[dict[str, Any]]) -> None:
    # The reference report needs a time on every poll and a partition on every send
    # (the workload always writes them).
    events = [
        e
        for e in events
        if ("t" in e or e["type"] != "poll")
        and "partition" in e
        or e["type"] not in ("invoke", "poll")
    ]
    h = ColumnHistory.from_events(events)
    same(load_window(h), load_window(events))
    same(unavailability_windows(h), unavailability_windows(events))
    same(unavailability_windows(h, partition=1), unavailability_windows(events, partition=1))
    same(unavailability_windows(h, gap_s=0.25), unavailability_windows(events, gap_s=0.25))
    same(partition_outages(h, gap_s=0.25), partition_outages(events, gap_s=0.25))
    same(plan_steps(h), plan_steps(events))
    same(fault_spans(h), fault_spans(events))
    t0, _ = load_window(events)
    same(throughput(h, t0), throughput(events, t0))


def test_a_history_file_read_as_columns_reports_as_read_history(tmp_path: Path) -> None:
    events = [
        {"type": "meta", "scenario": "s", "target": "local", "seed": 1, "t": 1.0},
        {"type": "phase", "name": "faults", "scenario": "s", "t": 1.5},
    ]
    for i in range(300):
        p = i % 3
        events.append(
            {"type": "invoke", "t": 2 + i / 10, "process": "p0", "value": f"p0-{i}", "partition": p}
        )
        if i % 50 != 7:  # a few never acknowledged
            events.append(
                {
                    "type": "ok",
                    "t": 2.05 + i / 10 + (3 if 100 < i < 120 else 0),
                    "process": "p0",
                    "value": f"p0-{i}",
                    "partition": p,
                    "offset": i // 3,
                    "t0": 2 + i / 10,
                    "latency": 0.05,
                }
            )
        if i != 90:  # one read missing: lost, and the next read skips
            events.append(
                {
                    "type": "poll",
                    "t": 2.1 + i / 10,
                    "process": "c0",
                    "partition": p,
                    "offset": i // 3,
                    "value": f"p0-{i}",
                }
            )
    events.append({"type": "fault", "name": "kill", "phase": "start", "node": 1, "t": 9.0})
    events.append({"type": "phase", "name": "quiesce", "t": 40.0})
    path = tmp_path / "history.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in events) + '\n{"type":"ok","t')
    dicts = read_history(path)
    h = read_columns(path)
    assert len(h) == len(dicts) and h.rows == 300 + 294 + 299
    same(check_columns(h).to_dict(), check_history(dicts).to_dict())
    assert check_columns(h).lost == 1 and check_columns(h).skipped == 1
    meta = {"scenario": "s", "target": "local", "seed": 1, "duration": 1, "topic": "t"}
    meta |= {"partitions": 3, "plan": [["s", 1], ["t", 1]]}
    for name, evs in (("dicts", dicts), ("columns", h)):
        result = check_history(dicts)
        write_report(tmp_path / name, meta, result, evs, [])
    a = json.loads((tmp_path / "dicts" / "report.json").read_text())
    b = json.loads((tmp_path / "columns" / "report.json").read_text())
    same(b, a)
    assert (tmp_path / "columns" / "report.md").read_text() == (
        tmp_path / "dicts" / "report.md"
    ).read_text()


ODD_VALUES = ['q"uote', "back\\slash", "é", "p00-1", "p1-2"]


@settings(max_examples=100, deadline=None)
@given(histories(), st.lists(st.sampled_from(ODD_VALUES), max_size=3), st.booleans())
def test_read_columns_reads_what_read_history_reads(
    events: list[dict[str, Any]], odd: list[str], torn: bool
) -> None:
    """The regex for the workload's own lines and json.loads for the rest give the
    events read_history gives (but an ack's t0 and latency, which are not kept)."""
    for i, value in enumerate(odd):  # escapes and other values: the json.loads path
        events.append({"type": "ok", "t": 2000.0 + i, "process": "p0", "value": value})
        events[-1].update(partition=i, offset=i, t0=1999.0, latency=1.0)
        events.append({"t": 2000.5 + i, "type": "poll", "process": "c0", "value": value})
        events[-1].update(partition=i, offset=i)
    for e in events:
        if e["type"] == "ok":
            e.update(t0=e.get("t", 0.0) - 0.5, latency=0.5)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "history.jsonl"
        lines = [json.dumps(e, separators=(",", ":")) for e in events]
        path.write_text("\n".join(lines) + ("\n" + lines[-1][:-3] if torn and lines else ""))
        dicts = read_history(path)
        h = read_columns(path)
    dropped = ("t0", "latency")
    kept = [{k: v for k, v in e.items() if k not in dropped or e["type"] != "ok"} for e in dicts]
    assert list(h) == kept
    same(check_columns(h).to_dict(), check_history(dicts).to_dict())


def test_acknowledged_rate_counts_the_fault_phase_acks(tmp_path: Path) -> None:
    from seglog.chaos.__main__ import acknowledged_rate

    events: list[dict[str, Any]] = [{"type": "phase", "name": "faults", "t": 10.0}]
    for i in range(40):  # acks at 5.0 .. 24.5: those in [10, 20] count
        events.append({"type": "ok", "t": 5 + i / 2, "process": "p0", "value": f"p0-{i}"})
        events[-1].update(partition=0, offset=i)
    events.append({"type": "phase", "name": "heal", "t": 20.0})
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events))
    assert acknowledged_rate(path) == 21 / 10
