"""chaos/duplicate_origins.py: the origin of each duplicated record, read from the
batch headers of hand-made segments (the same bytes a node writes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from seglog.chaos.checker import CheckResult
from seglog.chaos.duplicate_origins import (
    CopyHeader,
    attach_duplicate_origins,
    classify,
    copy_headers,
    duplicate_origins,
)
from seglog.chaos.report import summary_line, write_report
from seglog.storage.record_batch import NewRecord, build_batch


def batch(base: int, n: int, pid: int, epoch: int, seq: int, leader_epoch: int = 4) -> bytes:
    return build_batch(
        [NewRecord(f"v{base + i}".encode()) for i in range(n)],
        base_offset=base,
        partition_leader_epoch=leader_epoch,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        now_ms=1,
    )


# Partition 3 as in the fsync-failure run (docs/chaos-reports/2026-11-29-controller-
# shutdown-fence/): three records under epoch 0, a gap, the same three under epoch 1.
SEGMENTS = {
    3: [
        (
            "00000000000000000000.log",
            batch(0, 3, pid=1, epoch=0, seq=8593)
            + batch(3, 2, pid=7, epoch=0, seq=0)
            + batch(5, 3, pid=1, epoch=1, seq=0, leader_epoch=5)
            + batch(8, 1, pid=1, epoch=1, seq=3, leader_epoch=5)
            + batch(9, 1, pid=1, epoch=1, seq=3, leader_epoch=5)
            + batch(10, 1, pid=2, epoch=0, seq=0, leader_epoch=5),
        )
    ]
}


def test_headers_give_each_records_own_sequence() -> None:
    h = copy_headers(SEGMENTS, {(3, 1), (3, 6), (3, 10)})
    assert h[(3, 1)] == CopyHeader(3, 1, 1, 0, 8594, 4)
    assert h[(3, 6)] == CopyHeader(3, 6, 1, 1, 1, 5)
    assert h[(3, 10)] == CopyHeader(3, 10, 2, 0, 0, 5)


def test_each_origin() -> None:
    result = duplicate_origins(
        [
            [(3, 0), (3, 5)],  # epoch 0 then epoch 1: the client's epoch bump
            [(3, 1), (3, 6)],
            [(3, 8), (3, 9)],  # the same epoch and sequence twice: the broker's failure
            [(3, 3), (3, 10)],  # producer 7, then producer 2
            [(3, 2), (3, 99)],  # 99 is beyond the log
        ],
        {1: SEGMENTS},
        {3: 1},
    )
    assert result.counts == {
        "same_epoch": 1,
        "older_epoch": 0,
        "epoch_bump": 2,
        "new_producer_id": 1,
        "unknown": 1,
    }
    assert result.examples["unknown"] == [[CopyHeader(3, 2, 1, 0, 8595, 4), (3, 99)]]


def test_epochs_that_do_not_rise_are_the_brokers() -> None:
    a = CopyHeader(0, 1, 5, 2, 10, 3)
    b = CopyHeader(0, 9, 5, 1, 0, 4)
    assert classify([a, b]) == "older_epoch"
    assert classify([a, a]) == "same_epoch"
    assert classify([b, a]) == "epoch_bump"
    assert classify([a]) == "unknown"
    assert classify([a, None]) == "unknown"


def test_no_leader_known_for_the_partition_is_unknown() -> None:
    result = duplicate_origins([[(3, 0), (3, 5)]], {1: SEGMENTS}, {})
    assert result.counts["unknown"] == 1


def test_the_report_form_is_plain_json() -> None:
    result = duplicate_origins([[(3, 0), (3, 5)], [(3, 2), (3, 99)]], {1: SEGMENTS}, {3: 1})
    d = result.to_dict()
    assert d["counts"]["epoch_bump"] == 1
    assert d["examples"]["unknown"] == [
        [
            {
                "partition": 3,
                "offset": 2,
                "producer_id": 1,
                "producer_epoch": 0,
                "sequence": 8595,
                "leader_epoch": 4,
            },
            [3, 99],
        ]
    ]
    assert json.loads(json.dumps(d)) == d


def test_a_runs_report_names_the_origins(tmp_path: Path) -> None:
    """What chaos/__main__.py does after the check, through to report.md and the
    summary line."""
    result = CheckResult(sent=2, acknowledged=2, duplicated=1)
    result.duplicate_positions = [[(3, 0), (3, 5)]]
    extra: dict[str, Any] = {}
    attach_duplicate_origins(result, {1: SEGMENTS}, {3: 1}, extra)
    assert result.duplicated_by == {"epoch_bump": 1}
    meta = {
        "scenario": "s",
        "target": "local",
        "seed": 1,
        "duration": 1,
        "topic": "t",
        "partitions": 4,
    }
    md = write_report(tmp_path, meta, result, [], [], extra).read_text()
    assert "- epoch_bump: 1 (same producer id" in md
    assert '"producer_epoch": 1' in md
    line = summary_line(meta, result, [], tmp_path / "report.md")
    assert " duplicated=1(epoch_bump:1) " in line
    saved = json.loads((tmp_path / "report.json").read_text())
    assert saved["duplicate_origins"]["counts"]["epoch_bump"] == 1


def test_unreadable_segments_make_the_copies_unknown() -> None:
    result = CheckResult(duplicated=1)
    result.duplicate_positions = [[(3, 0), (3, 5)]]
    broken = {1: {3: [("x.log", b"\x00" * 12 + b"\xff" * 60)]}}
    extra: dict[str, Any] = {}
    attach_duplicate_origins(result, broken, {3: 1}, extra)
    assert result.duplicated == 1
    assert result.duplicated_by == {"unknown": 1}
    assert extra["duplicate_origins"]["examples"]["unknown"] == [[[3, 0], [3, 5]]]
