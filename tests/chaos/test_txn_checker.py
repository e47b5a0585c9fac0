"""chaos/txn_checker.py on hand-made histories: a seeded model of a correct Kafka
(transactions applied one at a time to partition logs, markers taking an offset, aborted
records in the log but never read committed) produces clean histories, proven clean;
each anomaly kind is then planted in them (hypothesis picks the history and the victim)
and proven found."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chaos.txn_checker import check

Events = list[dict[str, Any]]


def model(seed: int, transactions: int = 30) -> Events:
    """A correct system's history: txn events, observer reads now and then, a final read."""
    rng = random.Random(seed)
    partitions, processes = rng.randint(2, 4), rng.randint(1, 3)
    log: dict[int, list[tuple[int, str]]] = {p: [] for p in range(partitions)}  # visible
    next_offset = dict.fromkeys(range(partitions), 0)
    position = {(w, p): 0 for w in range(processes) for p in range(partitions)}
    observed = dict.fromkeys(range(partitions), 0)
    events: Events = [{"type": "meta"}]
    t = 0.0
    outcomes = ["committed"] * 6 + ["aborted"] * 2 + ["unknown-committed", "unknown-aborted"]
    for i in range(transactions):
        w = rng.randrange(processes)
        t += 1.0
        begin = t
        reads = []
        for p in range(partitions):
            for offset, value in log[p][position[(w, p)] : position[(w, p)] + rng.randint(0, 3)]:
                reads.append([p, offset, value, t + 0.1])
                position[(w, p)] += 1
        # Always one aborted transaction early, so every history has aborted writes.
        outcome = "aborted" if i == 1 else rng.choice(outcomes)
        writes = []
        for p in rng.sample(range(partitions), rng.randint(1, min(3, partitions))):
            for _ in range(rng.randint(1, 2)):
                writes.append([p, f"t{i}.{len(writes)}", next_offset[p]])
                next_offset[p] += 1
        for p in {p for p, _v, _o in writes}:
            next_offset[p] += 1  # the COMMIT or ABORT marker
        visible = outcome in ("committed", "unknown-committed")
        if visible:
            for p, v, o in writes:
                log[p].append((o, v))
        if outcome.startswith("unknown"):
            for record in writes:
                record[2] = None if rng.random() < 0.5 else record[2]
        events.append(
            {
                "type": "txn",
                "process": f"w{w}",
                "id": f"t{i}",
                "outcome": outcome.split("-")[0],
                "begin": begin,
                "commit_at": None if outcome == "aborted" else t + 0.5,
                "end": t + 0.7,
                "reads": reads,
                "writes": writes,
            }
        )
        t += 1.0
        if rng.random() < 0.4:
            for p in range(partitions):
                for offset, value in log[p][observed[p] :]:
                    events.append(_read("observer", p, offset, value, t))
                observed[p] = len(log[p])
    t += 1.0
    for p in range(partitions):
        for offset, value in log[p]:
            events.append(_read("final", p, offset, value, t))
    events.append({"type": "final", "complete": True})
    return events


def _read(process: str, p: int, offset: int, value: str, t: float) -> dict[str, Any]:
    return {
        "type": "read",
        "process": process,
        "partition": p,
        "offset": offset,
        "value": value,
        "t": t,
    }


def txns(events: Events, outcome: str | None = None) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "txn" and outcome in (None, e["outcome"])]


def committed_writes(events: Events) -> list[tuple[dict[str, Any], list[Any]]]:
    return [(t, w) for t in txns(events, "committed") for w in t["writes"]]


seeds = st.integers(0, 2**32 - 1)
quick = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@quick
@given(seeds)
def test_histories_of_a_correct_system_are_clean(seed: int) -> None:
    h = model(seed)
    for ww in (False, True):
        r = check(h, ww_deps=ww)
        assert r.ok, (ww, r.summary())
    assert r.counts["committed"] > 0 and r.counts["aborted"] > 0


@quick
@given(seeds, st.randoms(use_true_random=False))
def test_a_committed_value_missing_from_the_final_read_is_lost(
    seed: int, rnd: random.Random
) -> None:
    h = model(seed)
    _t, (p, v, _o) = rnd.choice(committed_writes(h))
    h = [e for e in h if not (e["type"] == "read" and e["value"] == v)]
    r = check(h)
    assert any(a["value"] == v for a in r.anomalies["lost"]), r.summary()


def test_lost_is_not_judged_without_a_complete_final_read() -> None:
    h = model(1)
    _t, (_p, v, _o) = committed_writes(h)[0]
    h = [e for e in h if not (e["type"] == "read" and e["value"] == v)]
    h[-1]["complete"] = False
    r = check(h)
    assert not r.anomalies["lost"] and any("lost unchecked" in n for n in r.notes)


@quick
@given(seeds, st.randoms(use_true_random=False), st.sampled_from(["observer", "txn"]))
def test_reading_an_aborted_write_is_g1a(seed: int, rnd: random.Random, reader: str) -> None:
    h = model(seed)
    aborted = txns(h, "aborted")[0]
    p, v, o = rnd.choice(aborted["writes"])
    if reader == "observer":
        h.insert(-1, _read("observer", p, o, v, aborted["end"] + 1))
    else:
        later = [t for t in txns(h) if t["begin"] > aborted["end"]]
        rnd.choice(later)["reads"].append([p, o, v, aborted["end"] + 1])
    r = check(h)
    assert any(a["value"] == v for a in r.anomalies["G1a"]), r.summary()


@quick
@given(seeds, st.randoms(use_true_random=False))
def test_reading_before_the_commit_is_g1b(seed: int, rnd: random.Random) -> None:
    h = model(seed)
    reads = [e for e in h if e["type"] == "read"]
    victim = rnd.choice(reads)
    writer = next(t for t in txns(h) if any(w[1] == victim["value"] for w in t["writes"]))
    victim["t"] = writer["commit_at"] - 0.2  # the reader saw it before commit was asked
    r = check(h)
    assert any(a["value"] == victim["value"] for a in r.anomalies["G1b"]), r.summary()


def test_reading_part_of_a_transaction_in_a_partition_is_g1b() -> None:
    """The observer reads t0's first write to partition 0 and then t1's, passing over
    t0's second write there: it saw t0 in part."""
    h: Events = [
        {
            "type": "txn",
            "process": "w0",
            "id": "t0",
            "outcome": "committed",
            "begin": 1,
            "commit_at": 2,
            "reads": [],
            "writes": [[0, "a", 0], [0, "b", 1]],
        },
        {
            "type": "txn",
            "process": "w0",
            "id": "t1",
            "outcome": "committed",
            "begin": 4,
            "commit_at": 5,
            "reads": [],
            "writes": [[0, "c", 3]],
        },
        _read("observer", 0, 0, "a", 6),
        _read("observer", 0, 3, "c", 6),
    ]
    final = [_read("final", 0, o, v, 7) for v, o in (("a", 0), ("b", 1), ("c", 3))]
    r = check([*h, *final, {"type": "final", "complete": True}])
    assert [a["value"] for a in r.anomalies["G1b"]] == ["b"], r.summary()
    # After a reset the reader's position says nothing of what it passed before.
    h.insert(3, {"type": "reset", "process": "observer", "partition": 0})
    assert check([*h, *final, {"type": "final", "complete": True}]).ok


@quick
@given(seeds, st.randoms(use_true_random=False))
def test_one_value_at_two_offsets_is_a_duplicate(seed: int, rnd: random.Random) -> None:
    h = model(seed)
    t, (p, v, _o) = rnd.choice(committed_writes(h))
    h.insert(-1, _read("final", p, 10_000, v, t["end"] + 100))
    r = check(h)
    assert any(a["value"] == v for a in r.anomalies["duplicate"]), r.summary()


@quick
@given(seeds, st.randoms(use_true_random=False))
def test_one_offset_with_two_values_is_inconsistent(seed: int, rnd: random.Random) -> None:
    h = model(seed)
    a, (p, _v, o) = rnd.choice([(t, w) for t, w in committed_writes(h) if w[2] is not None])
    b, (_p, v2, _o) = rnd.choice([(t, w) for t, w in committed_writes(h) if w[1] != _v])
    h.insert(-1, _read("observer", p, o, v2, max(a["end"], b["end"]) + 100))
    r = check(h)
    assert any(x["partition"] == p and x["offset"] == o for x in r.anomalies["inconsistent"])


@quick
@given(seeds, st.randoms(use_true_random=False))
def test_reading_a_later_transaction_of_ones_own_process_is_g1c(
    seed: int, rnd: random.Random
) -> None:
    """T1 reads a value T2 wrote, while T2 came after T1 in T1's process: wr T2 -> T1 and
    process order T1 -> T2 make a cycle with a wr edge."""
    h = model(seed, transactions=40)
    pairs = [
        (a, b)
        for a in txns(h, "committed")
        for b in txns(h, "committed")
        if a["process"] == b["process"] and a["begin"] < b["begin"]
    ]
    if not pairs:
        pytest.skip("no process with two committed transactions")  # rare: 1-3 processes
    a, b = rnd.choice(pairs)
    p, v, o = rnd.choice(b["writes"])
    a["reads"].append([p, o, v, b["commit_at"] + 0.1])
    r = check(h)
    assert any(
        a["id"] in c["transactions"] and b["id"] in c["transactions"] for c in r.anomalies["G1c"]
    ), r.summary()
    assert not r.anomalies["G0"]


def test_a_cycle_of_reads_between_processes_is_g1c() -> None:
    """Circular information flow: each of two transactions read the other's write."""
    h: Events = [
        {
            "type": "txn",
            "process": "w0",
            "id": "x",
            "outcome": "committed",
            "begin": 1,
            "commit_at": 5,
            "reads": [[1, 0, "y0", 6]],
            "writes": [[0, "x0", 0]],
        },
        {
            "type": "txn",
            "process": "w1",
            "id": "y",
            "outcome": "committed",
            "begin": 1,
            "commit_at": 5,
            "reads": [[0, 0, "x0", 6]],
            "writes": [[1, "y0", 0]],
        },
        _read("final", 0, 0, "x0", 9),
        _read("final", 1, 0, "y0", 9),
        {"type": "final", "complete": True},
    ]
    r = check(h)
    assert r.found() == ["G1c"], r.summary()
    assert r.anomalies["G1c"][0]["size"] == 2 and len(r.anomalies["G1c"][0]["cycle"]) == 2


@quick
@given(seeds, st.integers(2, 5))
def test_writes_interleaved_in_opposite_orders_are_g0_with_ww_deps(seed: int, n: int) -> None:
    """n transactions of n processes each write partitions 0 and 1, in opposite orders
    there (Kafka allows it: no write isolation): a G0 cycle with ww dependencies, clean
    without."""
    h = model(seed)
    top = {0: 10_000, 1: 10_000}  # past every offset the model used
    t = 1000.0
    body = h[:-1]
    finals = []
    for k in range(n):
        writes = [[0, f"g{k}.0", top[0] + k], [1, f"g{k}.1", top[1] + n - 1 - k]]
        body.append(
            {
                "type": "txn",
                "process": f"g{k}",
                "id": f"g{k}",
                "outcome": "committed",
                "begin": t,
                "commit_at": t + 1,
                "reads": [],
                "writes": writes,
            }
        )
        finals += [_read("final", p, o, v, t + 5) for p, v, o in writes]
    h = [*body, *sorted(finals, key=lambda e: (e["partition"], e["offset"])), h[-1]]
    assert check(h).ok
    r = check(h, ww_deps=True)
    assert r.found() == ["G0"], r.summary()
    assert r.anomalies["G0"][0]["size"] == n


def test_an_unknown_outcome_seen_once_must_be_whole() -> None:
    """A transaction without a known outcome that someone read counts as committed: its
    other writes must all be in the final read."""
    h: Events = [
        {
            "type": "txn",
            "process": "w0",
            "id": "u",
            "outcome": "unknown",
            "begin": 1,
            "commit_at": 2,
            "reads": [],
            "writes": [[0, "u0", 0], [1, "u1", 0]],
        },
        _read("final", 0, 0, "u0", 9),
        {"type": "final", "complete": True},
    ]
    r = check(h)
    assert [a["value"] for a in r.anomalies["lost"]] == ["u1"], r.summary()
    # Neither read: it may have aborted; nothing is owed.
    assert check([h[0], h[2]]).ok
