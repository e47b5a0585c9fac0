"""librdkafka's epoch bumps, read from its eos debug log (chaos/implicit_acks.py), tie
each `epoch_bump` duplicate to the bump that renumbered it and to the broker answer that
set the bump off (chaos/duplicate_origins.py). The lines are librdkafka 2.16's, from the
broker-frozen run of docs/chaos-reports/2026-12-02-gray-failures/."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from seglog.chaos.checker import CheckResult
from seglog.chaos.duplicate_origins import (
    CopyHeader,
    attach_duplicate_origins,
    epoch_bump_causes,
)
from seglog.chaos.implicit_acks import ImplicitAckRecorder
from seglog.chaos.report import summary_line, write_report
from seglog.storage.record_batch import NewRecord, build_batch

TOPIC = "chaos-broker-frozen-31"
EOS_LINES = [
    "ERRSEQ [chaos-p0#producer-1] [thrd:127.0.0.1:29878/1]: 127.0.0.1:29878/1: "
    f"ProduceRequest for {TOPIC} [0] with 1 message(s) failed due to skipped sequence "
    "numbers (PID{Id:0,Epoch:0}, base seq 54 > next seq 53) caused by previous failed "
    "request (NOT_LEADER_FOR_PARTITION, actions Refresh,MsgNotPersisted, base seq 53..53, "
    "base msgid 54, 0ms ago): recovering and retrying",
    "DRAIN [chaos-p0#producer-1] [thrd:127.0.0.1:29878/1]: Beginning partition drain in "
    "state Assigned for PID{Id:0,Epoch:0} epoch bump for 4 partition(s) with in-flight "
    "requests: skipped sequence numbers",
    "IDEMPSTATE [chaos-p0#producer-1] [thrd:127.0.0.1:29878/1]: Idempotent producer state "
    "change Assigned -> DrainBump",
    f"NEWPID [chaos-p0#producer-1] [thrd:127.0.0.1:29880/3]: {TOPIC} [3] changed "
    "PID{Id:0,Epoch:0} -> PID{Id:0,Epoch:1} with base MsgId 4",
    f"NEWPID [chaos-p0#producer-1] [thrd:127.0.0.1:29878/1]: {TOPIC} [5] changed "
    "PID{Invalid} -> PID{Id:0,Epoch:0} with base MsgId 1",
]


def recorded(lines: list[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(history events, eos events) of a recorder fed `lines`; p0 sent v0..v9 to
    partition 3."""
    history: list[dict[str, Any]] = []
    eos: list[dict[str, Any]] = []
    rec = ImplicitAckRecorder("p0", history.append, None, eos.append)
    for i in range(10):
        rec.sent(3, f"v{i}")
    log = rec.logger()
    for line in lines:
        log.log(logging.DEBUG, line)
    return history, eos


def test_the_eos_log_gives_the_bump_its_cause_and_what_it_renumbered() -> None:
    history, eos = recorded(EOS_LINES)
    assert history == []
    bump, renumbered = eos
    assert bump["type"] == "epoch_bump" and bump["process"] == "p0"
    assert (bump["producer_id"], bump["from_epoch"]) == (0, 0)
    assert bump["reason"] == "skipped sequence numbers"
    assert bump["cause"] == {
        "error": "OUT_OF_ORDER_SEQUENCE_NUMBER",
        "broker": 1,
        "partition": 0,
        "base_seq": 54,
        "next_seq": 53,
        "previous_error": "NOT_LEADER_FOR_PARTITION",
        "previous_actions": "Refresh,MsgNotPersisted",
        "previous_seqs": [53, 53],
    }
    # The first PID (from none) is no renumbering.
    assert renumbered["type"] == "renumbered"
    assert (renumbered["partition"], renumbered["from_epoch"], renumbered["to_epoch"]) == (3, 0, 1)
    assert (renumbered["msgid"], renumbered["value"]) == (4, "v3")


def test_without_bumps_the_recorder_records_only_implicit_acks() -> None:
    history: list[dict[str, Any]] = []
    rec = ImplicitAckRecorder("p0", history.append)
    log = rec.logger()
    for line in EOS_LINES:
        log.log(logging.DEBUG, line)
    assert history == []


def batch(base: int, n: int, epoch: int, seq: int) -> bytes:
    return build_batch(
        [NewRecord(f"v{i}".encode()) for i in range(seq, seq + n)],
        base_offset=base,
        partition_leader_epoch=2,
        producer_id=0,
        producer_epoch=epoch,
        base_sequence=seq,
        now_ms=1,
    )


# Partition 3: v3 written under epoch 0 (sequence 3), then again under epoch 1 as its
# sequence 0 after the bump; v4 under epoch 1 only.
SEGMENTS = {3: [("00000000000000000000.log", batch(0, 4, 0, 0) + batch(4, 2, 1, 0))]}


def test_a_duplicate_is_tied_to_the_bump_that_renumbered_it() -> None:
    _, eos = recorded(EOS_LINES)
    first = CopyHeader(3, 3, 0, 0, 3, 2)
    later = CopyHeader(3, 4, 0, 1, 0, 2)
    [cause] = epoch_bump_causes([[first, later]], eos)
    assert cause["process"] == "p0" and cause["epochs"] == [0, 1]
    assert cause["duplicates"] == 1
    assert cause["examples"][0]["msgid"] == 4
    assert cause["examples"][0]["sequence_0_value"] == "v3"
    assert "OUT_OF_ORDER_SEQUENCE_NUMBER from node 1 for partition 0" in cause["explained"]
    assert "after NOT_LEADER_FOR_PARTITION for sequences 53..53" in cause["explained"]
    assert epoch_bump_causes([[first, later]], []) == [{"unexplained": 1}]


def test_the_report_counts_the_duplicate_and_says_what_set_the_bump_off(tmp_path: Path) -> None:
    _, eos = recorded(EOS_LINES)
    result = CheckResult(sent=6, acknowledged=6, duplicated=1)
    result.duplicate_positions = [[(3, 3), (3, 4)]]
    extra: dict[str, Any] = {}
    attach_duplicate_origins(result, {1: SEGMENTS}, {3: 1}, extra, [{"type": "ok"}, *eos])
    assert result.duplicated_by == {"epoch_bump": 1}
    assert not result.ok
    meta = {"scenario": "s", "target": "local", "seed": 1, "duration": 1, "topic": TOPIC}
    md = write_report(tmp_path, {**meta, "partitions": 6}, result, [], [], extra).read_text()
    assert "1 epoch_bump duplicate(s) renumbered by p0's epoch bump 0->1" in md
    assert "OUT_OF_ORDER_SEQUENCE_NUMBER from node 1" in md
    line = summary_line(meta, result, [], tmp_path / "report.md")
    assert " duplicated=1(epoch_bump:1) " in line
