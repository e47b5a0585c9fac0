"""The chaos checker on hand-made histories: each broken invariant is caught, and a
clean history passes. Also the replica byte comparison on hand-made segments."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from seglog.chaos import checker
from seglog.chaos.checker import (
    CheckResult,
    apply_replica_check,
    compare_compacted_replicas,
    compare_replicas,
)
from seglog.chaos.column_checker import check_columns
from seglog.chaos.columns import ColumnHistory, read_columns
from seglog.chaos.report import (
    label_rows,
    partition_headline,
    partition_outages,
    plan_steps,
    unavailability_headline,
    unavailability_windows,
    write_report,
)
from seglog.chaos.scenarios import SCENARIOS
from seglog.chaos.workload import History, classify_error, read_history
from seglog.client.errors import KafkaTimeoutError, error_class
from seglog.storage.record_batch import NewRecord, build_batch


def check_history(events: list[dict[str, Any]], **kw: Any) -> CheckResult:
    """Both checkers: the columnar one must give the dict-based reference's result
    (counts, examples, their order); the columnar result is what the tests judge."""
    expected = checker.check_history(events, **kw)
    got = check_columns(ColumnHistory.from_events(events), **kw)
    assert json.dumps(got.to_dict(), default=str) == json.dumps(expected.to_dict(), default=str)
    return got


T0 = 1_700_000_000.0


class H:
    """A tiny history builder: sends acknowledged or failed, polls, seeks."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.t = T0

    def _add(self, **e: Any) -> None:
        self.t += 0.01
        self.events.append({"t": self.t, **e})

    def ack(self, value: str, partition: int, offset: int, process: str = "p0") -> H:
        self._add(type="invoke", process=process, value=value, partition=partition)
        self._add(type="ok", process=process, value=value, partition=partition, offset=offset)
        return self

    def ack_unplaced(self, value: str, partition: int, process: str = "p0") -> H:
        """Acknowledged without an offset (librdkafka's implicit acknowledgement)."""
        self._add(type="invoke", process=process, value=value, partition=partition)
        self._add(type="ok", process=process, value=value, partition=partition, offset=None)
        return self

    def fail(self, value: str, partition: int, definite: bool, process: str = "p0") -> H:
        self._add(type="invoke", process=process, value=value, partition=partition)
        self._add(
            type="fail",
            process=process,
            value=value,
            partition=partition,
            error="X",
            definite=definite,
        )
        return self

    def seek(self, partition: int, offset: int, consumer: str = "c0") -> H:
        self._add(type="seek", process=consumer, partition=partition, offset=offset)
        return self

    def poll(self, partition: int, offset: int, value: str, consumer: str = "c0") -> H:
        self._add(type="poll", process=consumer, partition=partition, offset=offset, value=value)
        return self


def clean() -> H:
    h = H().ack("a", 0, 0).ack("b", 0, 1).ack("c", 1, 0)
    h.seek(0, 0).seek(1, 0).poll(0, 0, "a").poll(0, 1, "b").poll(1, 0, "c")
    # A second consumer and a recorded seek back (allowed re-read).
    h.seek(0, 0, "c1").poll(0, 0, "a", "c1").seek(0, 0, "c1").poll(0, 0, "a", "c1")
    return h


def test_clean_history_passes() -> None:
    r = check_history(clean().events)
    assert r.ok, r.to_dict()
    assert (r.sent, r.acknowledged, r.lost, r.duplicated) == (3, 3, 0, 0)
    assert r.failed_invariants() == []


def test_indeterminate_send_read_back_is_fine() -> None:
    h = clean().fail("d", 1, definite=False).poll(1, 1, "d")
    r = check_history(h.events)
    assert r.ok, r.to_dict()
    assert (r.indeterminate, r.indeterminate_read) == (1, 1)


def test_lost_write_is_caught() -> None:
    h = clean().ack("lost-one", 1, 1)  # acknowledged, never read
    r = check_history(h.events)
    assert not r.ok and r.lost == 1
    assert r.examples.lost[0]["value"] == "lost-one"
    assert r.failed_invariants() == ["lost"]


def test_ack_without_offset_read_back_is_acknowledged() -> None:
    h = clean().ack_unplaced("u", 1).poll(1, 1, "u")
    r = check_history(h.events)
    assert r.ok, r.to_dict()
    assert (r.acknowledged, r.acknowledged_without_offset, r.indeterminate) == (4, 1, 0)


def test_ack_without_offset_never_read_is_lost() -> None:
    h = clean().ack_unplaced("u2", 1).ack_unplaced("u1", 0).poll(0, 2, "u1")
    r = check_history(h.events)
    assert r.failed_invariants() == ["lost"] and r.lost == 1
    assert r.examples.lost == [{"value": "u2", "partition": 1, "offset": None, "held_instead": []}]


def test_ack_without_offset_through_the_history_file(tmp_path: Path) -> None:
    """The workload writes `"offset": null`; the streamed reader takes it as such."""
    h = clean().ack_unplaced("u", 1).poll(1, 1, "u").ack_unplaced("gone", 0)
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(e, separators=(",", ":")) + "\n" for e in h.events))
    r = check_columns(read_columns(path))
    assert (r.acknowledged_without_offset, r.lost) == (2, 1)
    assert r.examples.lost[0]["value"] == "gone"


def test_duplicate_is_caught() -> None:
    # The same value at two offsets (a retry appended twice despite idempotence).
    h = clean().ack("e", 1, 1).poll(1, 1, "e").poll(1, 2, "e")
    r = check_history(h.events)
    assert not r.ok and r.duplicated == 1
    assert r.examples.duplicated[0] == {"value": "e", "positions": [(1, 1), (1, 2)]}


def test_one_offset_two_values_is_caught() -> None:
    # Consumer c1 reads a different value at 0/1 than c0 did (a truncated and
    # rewritten offset); the acknowledged "b" is then also not where it was acked.
    h = clean().fail("x", 0, definite=False)
    h.seek(0, 0, "c2").poll(0, 0, "a", "c2").poll(0, 1, "x", "c2")
    r = check_history(h.events)
    assert not r.ok and r.conflicts == 1
    assert r.examples.conflicts[0]["partition"] == 0 and r.examples.conflicts[0]["offset"] == 1
    assert set(r.examples.conflicts[0]["values"]) == {"b", "x"}


def test_acknowledged_offset_holding_another_value_is_caught() -> None:
    # The ack said offset 2, a reader finds another value there and "f" nowhere.
    h = clean().ack("f", 0, 2).fail("g", 0, definite=False).poll(0, 2, "g")
    r = check_history(h.events)
    assert r.conflicts == 1 and r.lost == 1
    assert r.examples.lost[0]["held_instead"] == ["g"]


def test_skipped_offset_is_caught() -> None:
    h = H().ack("a", 0, 0).ack("b", 0, 1).ack("c", 0, 2)
    h.seek(0, 0).poll(0, 0, "a").poll(0, 2, "c")  # 1 never handed out
    h.seek(0, 1, "c1").poll(0, 1, "b", "c1")
    r = check_history(h.events)
    assert not r.ok and r.skipped == 1 and r.lost == 0
    assert r.examples.skipped[0] == {
        "consumer": "c0",
        "partition": 0,
        "expected": 1,
        "got": 2,
        "missing": 1,
        "t": r.examples.skipped[0]["t"],
    }


def test_first_read_after_seek_must_be_the_seek_offset() -> None:
    h = H().ack("a", 0, 0).ack("b", 0, 1).seek(0, 0).poll(0, 1, "b").seek(0, 0).poll(0, 0, "a")
    r = check_history(h.events)
    assert r.skipped == 1 and r.backwards == 0


def test_backwards_read_is_caught() -> None:
    h = H().ack("a", 0, 0).ack("b", 0, 1)
    h.seek(0, 0).poll(0, 0, "a").poll(0, 1, "b").poll(0, 0, "a")  # no seek before it
    r = check_history(h.events)
    assert not r.ok and r.backwards == 1 and r.skipped == 0
    assert r.examples.backwards[0]["expected"] == 2 and r.examples.backwards[0]["got"] == 0


def test_definitely_failed_value_read_back_is_caught() -> None:
    h = clean().fail("never", 1, definite=True).poll(1, 1, "never")
    r = check_history(h.events)
    assert not r.ok and r.phantom == 1
    assert r.examples.phantom[0]["value"] == "never"


def test_value_nobody_sent_is_caught() -> None:
    h = clean().poll(1, 1, "garbage")
    r = check_history(h.events)
    assert r.phantom == 1 and r.examples.phantom[0]["error"] == "never sent"


def test_error_classification_is_conservative() -> None:
    timeout = KafkaTimeoutError("1 record(s) for t-0 not delivered within delivery_timeout_ms")
    assert classify_error(timeout)[1] is False
    assert classify_error(ConnectionError("reset"))[1] is False
    never_sent = KafkaTimeoutError(
        "records expired after delivery_timeout_ms (1000 ms) without being sent"
    )
    assert classify_error(never_sent)[1] is True
    assert classify_error(error_class("MESSAGE_TOO_LARGE")("too big"))[1] is True
    # A retriable error reported at the end may hide an earlier unanswered attempt.
    assert classify_error(error_class("NOT_ENOUGH_REPLICAS")("isr"))[1] is False
    assert classify_error(error_class("OUT_OF_ORDER_SEQUENCE_NUMBER")("seq"))[1] is False


# --- replicas ---------------------------------------------------------------------------


def _batch(base: int, values: list[bytes], epoch: int = 0) -> bytes:
    records = [NewRecord(v, None, 1_700_000_000_000) for v in values]
    return build_batch(records, base_offset=base, partition_leader_epoch=epoch)


def _segments(*batches: bytes) -> list[tuple[str, bytes]]:
    # Two segment files: the split point must not matter.
    half = len(batches) // 2
    return [
        ("00000000000000000000.log", b"".join(batches[:half])),
        (f"{half:020d}.log", b"".join(batches[half:])),
    ]


def test_identical_replicas_pass_and_bytes_above_the_hw_do_not_matter() -> None:
    b = [_batch(i, [f"v{i}".encode()]) for i in range(4)]
    leader = {0: _segments(*b)}
    follower = {0: _segments(*b[:3], _batch(3, [b"other"]))}  # differs only at offset 3
    reports = compare_replicas({1: leader, 2: follower, 3: leader}, {0: (1, 3)})
    assert reports[0].identical and not reports[0].lagging
    assert {r.hw_byte_position for r in reports[0].replicas} == {sum(len(x) for x in b[:3])}


def test_divergent_replica_is_caught_with_its_first_offset() -> None:
    b = [_batch(i, [f"v{i}".encode()]) for i in range(4)]
    bad = bytearray(b[2])
    bad[-1] ^= 0x01  # a flipped bit inside the records
    reports = compare_replicas(
        {1: {0: _segments(*b)}, 2: {0: _segments(b[0], b[1], bytes(bad), b[3])}},
        {0: (1, 4)},
    )
    assert not reports[0].identical
    assert reports[0].first_difference is not None
    assert reports[0].first_difference["node"] == 2 and reports[0].first_difference["offset"] == 2
    result = CheckResult()
    apply_replica_check(result, reports)
    assert result.divergent == 1 and not result.ok


def test_replica_missing_a_batch_is_divergent_and_a_short_one_lagging() -> None:
    b = [_batch(i, [f"v{i}".encode()]) for i in range(4)]
    gap = compare_replicas(
        {1: {0: _segments(*b)}, 2: {0: _segments(b[0], b[2], b[3])}}, {0: (1, 4)}
    )
    assert not gap[0].identical
    short = compare_replicas({1: {0: _segments(*b)}, 2: {0: _segments(b[0], b[1])}}, {0: (1, 4)})
    assert short[0].identical and short[0].lagging == [2]
    # Short and with an old-epoch tail: reported as unreconciled, not divergent.
    stale = _batch(2, [b"stale"], epoch=1)
    tail = compare_replicas(
        {1: {0: _segments(*b)}, 2: {0: _segments(b[0], b[1], stale)}}, {0: (1, 4)}
    )
    assert tail[0].identical and tail[0].lagging == [2] and 2 in tail[0].unreconciled


# --- history file and report ----------------------------------------------------------


def test_history_round_trip_and_report(tmp_path: Path) -> None:
    history = History(tmp_path / "history.jsonl", max_buffered=3)
    for e in clean().events:
        history.append(dict(e))
    history.append({"type": "fault", "name": "kill-leader", "phase": "start", "node": 2, "t": T0})
    history.append({"type": "fault", "name": "kill-leader", "phase": "end", "node": 2, "t": T0 + 1})
    history.close()
    with open(tmp_path / "history.jsonl", "a") as f:
        f.write('{"type": "poll", "torn')  # a crash mid-line is skipped
    events = read_history(tmp_path / "history.jsonl")
    assert len(events) == len(clean().events) + 2
    result = check_history(events)
    assert result.ok
    meta = {
        "scenario": "kill-leader",
        "target": "local",
        "seed": 7,
        "duration": 1,
        "topic": "t",
        "partitions": 2,
    }
    md = write_report(tmp_path / "run", meta, result, events, [])
    data = json.loads((tmp_path / "run" / "report.json").read_text())
    assert data["ok"] and data["meta"]["seed"] == 7 and data["counts"]["sent"] == 3
    assert (tmp_path / "run" / "timeline.png").stat().st_size > 1000
    assert "kill-leader" in md.read_text()
    assert "## Unavailability — no partition went 1 s without an ack" in md.read_text()


def test_unavailability_windows_are_gaps_between_acks() -> None:
    events = [
        {"type": "invoke", "t": 0.0, "value": "a"},
        {"type": "ok", "t": 0.1, "value": "a"},
        {"type": "fault", "t": 0.5, "name": "kill-leader", "phase": "start", "node": 1},
        {"type": "ok", "t": 3.1, "value": "b"},
        {"type": "fault", "t": 4.0, "name": "kill-leader", "phase": "end", "node": 1},
        {"type": "ok", "t": 3.5, "value": "c"},
        {"type": "phase", "t": 3.9, "name": "quiesce"},
    ]
    windows = unavailability_windows(events)
    assert windows == [{"start_s": 0.1, "end_s": 3.1, "seconds": 3.0, "faults": ["kill-leader@1"]}]


def test_plan_steps_count_each_soak_scenario_from_its_faults_to_the_next() -> None:
    events: list[dict[str, object]] = [
        {"type": "phase", "t": 0.0, "name": "warmup"},
        {"type": "invoke", "t": 0.5, "value": "w", "partition": 0},
        {"type": "phase", "t": 1.0, "name": "faults", "scenario": "bridge"},
        {"type": "invoke", "t": 1.5, "value": "a", "partition": 0},
        {"type": "invoke", "t": 1.6, "value": "b", "partition": 1},
        {"type": "ok", "t": 2.0, "value": "a", "partition": 0},
        {"type": "phase", "t": 5.0, "name": "heal", "scenario": "bridge"},
        {"type": "ok", "t": 6.0, "value": "b", "partition": 1},
        {"type": "phase", "t": 7.0, "name": "faults", "scenario": "one-way"},
        {"type": "invoke", "t": 7.5, "value": "c", "partition": 0},
        {"type": "ok", "t": 8.0, "value": "c", "partition": 0},
        {"type": "phase", "t": 10.0, "name": "heal"},
        {"type": "phase", "t": 12.0, "name": "quiesce"},
        {"type": "ok", "t": 12.5, "value": "late", "partition": 0},  # after producing: no step
    ]
    first, second = plan_steps(events)
    assert (first["scenario"], first["fault_s"], first["settle_s"]) == ("bridge", 4.0, 2.0)
    assert (first["sent"], first["acknowledged"]) == (2, 2)
    # Partition 1 waited from the step's start (1.0) to its ack at 6.0.
    assert first["worst_partition_gap_s"] == 5.0
    assert (second["scenario"], second["fault_s"], second["settle_s"]) == ("one-way", 3.0, 2.0)
    assert (second["sent"], second["acknowledged"]) == (1, 1)
    # Partition 1 had no ack at all in the second step: silent from 7.0 to 12.0.
    assert second["worst_partition_gap_s"] == 5.0
    assert plan_steps([{"type": "invoke", "t": 0.0, "value": "x"}]) == []


def test_partition_outages_show_a_stall_the_whole_topic_hides() -> None:
    events: list[dict[str, object]] = [{"type": "invoke", "t": 0.0, "value": "x", "partition": 0}]
    events += [{"type": "invoke", "t": 0.0, "value": "y", "partition": 1}]
    # Partition 0 acks every 0.2 s throughout; partition 1 stalls from 1.0 to 3.0 s.
    events += [
        {"type": "ok", "t": round(0.2 * i, 1), "value": f"a{i}", "partition": 0}
        for i in range(1, 21)
    ]
    events += [{"type": "ok", "t": t, "value": f"b{t}", "partition": 1} for t in (0.5, 1.0, 3.0)]
    events += [
        {"type": "fault", "t": 1.1, "name": "pause-leader", "phase": "start", "node": 2},
        {"type": "fault", "t": 2.5, "name": "pause-leader", "phase": "end", "node": 2},
        {"type": "phase", "t": 4.0, "name": "quiesce"},
    ]
    assert unavailability_windows(events) == []
    outages = partition_outages(events)
    assert outages[0] == []
    assert outages[1] == [
        {"start_s": 1.0, "end_s": 3.0, "seconds": 2.0, "faults": ["pause-leader@2"]},
        {"start_s": 3.0, "end_s": 4.0, "seconds": 1.0, "faults": []},
    ]


# --- compacted topics: records, not bytes -----------------------------------------------


def _keyed(base: int, pairs: list[tuple[bytes, bytes | None]], epoch: int = 0) -> bytes:
    records = [NewRecord(v, key=k, timestamp=1_700_000_000_000) for k, v in pairs]
    return build_batch(records, base_offset=base, partition_leader_epoch=epoch)


def test_compacted_replicas_cleaned_differently_agree() -> None:
    full = [
        _keyed(0, [(b"a", b"1")]),
        _keyed(1, [(b"b", b"2")]),
        _keyed(2, [(b"a", b"3")]),
        _keyed(3, [(b"b", None)]),
        _keyed(4, [(b"c", b"4")]),
    ]
    cleaned = [full[2], full[4]]  # a and c kept, b deleted (its tombstone gone too)
    reports = compare_compacted_replicas(
        {1: {0: _segments(*full)}, 2: {0: _segments(*cleaned)}, 3: {0: _segments(*full)}},
        {0: (1, 5)},
    )
    assert reports[0].identical and not reports[0].lagging
    assert len({r.sha256 for r in reports[0].replicas}) == 1  # same live values


def test_compacted_replica_with_another_value_or_a_lost_key_diverges() -> None:
    full = [_keyed(0, [(b"a", b"1")]), _keyed(1, [(b"b", b"2")]), _keyed(2, [(b"c", b"3")])]
    other = [full[0], _keyed(1, [(b"b", b"X")]), full[2]]
    r1 = compare_compacted_replicas(
        {1: {0: _segments(*full)}, 2: {0: _segments(*other)}}, {0: (1, 3)}
    )
    assert not r1[0].identical and r1[0].first_difference["offset"] == 1
    lost = [full[0], _keyed(1, [(b"zz", b"2")]), full[2]]  # b's only value missing
    r2 = compare_compacted_replicas(
        {1: {0: _segments(*full)}, 2: {0: _segments(full[0], full[2])}}, {0: (1, 3)}
    )
    assert not r2[0].identical
    r3 = compare_compacted_replicas(
        {1: {0: _segments(*full)}, 2: {0: _segments(*lost)}}, {0: (1, 3)}
    )
    assert not r3[0].identical
    short = compare_compacted_replicas(
        {1: {0: _segments(*full)}, 2: {0: _segments(full[0])}}, {0: (1, 3)}
    )
    assert short[0].identical and short[0].lagging == [2]


def _keyed_ack(h: H, value: str, key: str, partition: int, offset: int) -> H:
    h._add(type="invoke", process="p0", value=value, partition=partition, key=key)
    h._add(type="ok", process="p0", value=value, partition=partition, offset=offset)
    return h


def test_compacted_history_allows_superseded_values_to_vanish() -> None:
    h = H()
    h._add(type="meta", topic_configs={"cleanup.policy": "compact"})
    for value, key, offset in [("a", "k1", 0), ("b", "k2", 1), ("c", "k1", 2), ("d", "k3", 3)]:
        _keyed_ack(h, value, key, 0, offset)
    # The cleaner removed "a" (k1 again at offset 2): the consumer jumps from 0 to 1.
    h.seek(0, 0).poll(0, 1, "b").poll(0, 2, "c").poll(0, 3, "d")
    r = check_history(h.events)
    assert r.ok, r.to_dict()
    assert check_history(h.events, compacted=False).lost == 1  # without compaction: lost


def test_compacted_history_still_catches_a_lost_last_value_and_a_real_skip() -> None:
    h = H()
    h._add(type="meta", topic_configs={"cleanup.policy": "compact"})
    for value, key, offset in [("a", "k1", 0), ("b", "k2", 1), ("c", "k1", 2), ("d", "k3", 3)]:
        _keyed_ack(h, value, key, 0, offset)
    h.seek(0, 0).poll(0, 2, "c").poll(0, 3, "d")  # "b" is the last value of k2
    r = check_history(h.events)
    assert r.lost == 1 and r.skipped == 1
    assert r.examples.lost[0]["value"] == "b"


def test_labels_close_in_time_get_different_rows() -> None:
    assert label_rows([0.0, 0.1, 0.2, 5.0, 5.05], min_gap=1.0, rows=3) == [0, 1, 2, 0, 1]
    # More labels than rows: the row free soonest is reused.
    assert label_rows([0.0, 0.1, 0.2], min_gap=1.0, rows=2) == [0, 1, 0]


def test_the_headline_counts_partition_unavailability_the_topic_windows_hide() -> None:
    """A run whose topic always had some ack headlined "Unavailability (0 s)" above a
    partition that had none for 3 s: the headline now leads with the worst partition."""
    per_partition = {
        "0": {"total_s": 0.0, "windows": []},
        "1": {"total_s": 3.0, "windows": [{"start_s": 1.0, "end_s": 4.0, "seconds": 3.0}]},
        "2": {"total_s": 1.5, "windows": [{"start_s": 2.0, "end_s": 3.5, "seconds": 1.5}]},
    }
    summary = partition_headline(per_partition)
    assert summary == {
        "worst_partition": 1,
        "worst_partition_s": 3.0,
        "partition_seconds": 4.5,
        "partitions_unavailable": 2,
        "partitions_written": 3,
    }
    line = unavailability_headline(
        {"total_s": 0.0, "windows": [], "gap_threshold_s": 1.0, **summary}
    )
    assert line.startswith("## Unavailability — worst partition 1: 3 s; 4.5 partition-seconds")
    assert "2 of 3 partitions" in line and "whole topic 0 s in 0 windows" in line


def test_the_scenario_list_names_every_scenario() -> None:
    """`python -m seglog.chaos list` failed on an option only `run` has."""
    out = subprocess.run(
        [sys.executable, "-m", "seglog.chaos", "list"], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    names = [line.split(":", 1)[0] for line in out.stdout.splitlines()]
    assert names == list(SCENARIOS)
    assert all(line.split(":", 1)[1].strip() for line in out.stdout.splitlines())
