"""LogDirectory: loading partitions and the per-directory checkpoint files
(docs/architecture.md (storage) step 2, 4.4)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from log_fixtures import T0, check_log_invariants, hash_dir, make_batch, offsets_read

from seglog.storage.log_config import LogConfig
from seglog.storage.log_dir import LogDirectory

CFG = LogConfig.defaults().with_overrides(
    {"segment.bytes": 400, "segment.index.bytes": 1024, "retention.bytes": 0}
)
UUID32 = "0123456789abcdef0123456789abcdef"


def fill(log_dir: LogDirectory, topic: str, partition: int, batches: int, n: int = 3) -> None:
    log = log_dir.create_log(topic, partition, CFG, time_ms=T0)
    for _ in range(batches):
        log.append_as_leader(make_batch(n), 0, time_ms=T0)


def populated(path: Path) -> LogDirectory:
    d = LogDirectory(path)
    fill(d, "orders", 0, 10)
    fill(d, "orders", 1, 4)
    fill(d, "my-topic-2", 12, 7)  # '-' inside the topic name
    d.logs[("orders", 0)].update_high_watermark(21)
    d.logs[("orders", 1)].update_high_watermark(12)
    return d


def test_close_writes_kafka_checkpoint_files_and_marker(tmp_path):
    d = populated(tmp_path)
    d.logs[("orders", 0)].maybe_increment_log_start_offset(5)
    d.close(broker_epoch=42)
    assert (tmp_path / "recovery-point-offset-checkpoint").read_text() == (
        "0\n3\nmy-topic-2 12 21\norders 0 30\norders 1 12\n"
    )
    assert (tmp_path / "replication-offset-checkpoint").read_text() == (
        "0\n3\nmy-topic-2 12 0\norders 0 21\norders 1 12\n"
    )
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n1\norders 0 5\n"
    marker = tmp_path / ".kafka_cleanshutdown"
    assert marker.read_bytes() == b'{"version":0,"brokerEpoch":42}'
    assert json.loads(marker.read_text()) == {"version": 0, "brokerEpoch": 42}


def test_load_restores_every_partition(tmp_path):
    d = populated(tmp_path)
    d.logs[("orders", 0)].maybe_increment_log_start_offset(5)
    expected = {tp: (log.log_end_offset, offsets_read(log)) for tp, log in d.logs.items()}
    d.close()

    again = LogDirectory(tmp_path)
    logs = again.load(CFG, time_ms=T0)
    assert again.had_clean_shutdown
    assert sorted(logs) == [("my-topic-2", 12), ("orders", 0), ("orders", 1)]
    assert logs[("orders", 0)].log_start_offset == 5
    assert logs[("orders", 0)].high_watermark == 21
    assert logs[("orders", 1)].high_watermark == 12
    assert logs[("my-topic-2", 12)].directory.name == "my-topic-2-12"
    for tp, log in logs.items():
        assert log.recovery_point == log.log_end_offset
        assert (log.log_end_offset, offsets_read(log)) == expected[tp]
        check_log_invariants(log, single_batch_chunks=True)


def test_clean_shutdown_marker_is_consumed_once(tmp_path):
    d = populated(tmp_path)
    d.close()
    marker = tmp_path / ".kafka_cleanshutdown"
    first = LogDirectory(tmp_path)
    first.load(CFG, time_ms=T0)
    assert first.had_clean_shutdown
    assert not marker.exists()
    assert first.logs[("orders", 0)].recovery_point == 30
    first.logs[("orders", 0)].append_as_leader(make_batch(2), 0, time_ms=T0)
    # a crash: no close, so no marker; the next load recovers
    second = LogDirectory(tmp_path)
    logs = second.load(CFG, time_ms=T0)
    assert not second.had_clean_shutdown
    assert not marker.exists()
    # the recovery point comes from the checkpoint, not from the LEO
    assert logs[("orders", 0)].log_end_offset == 32
    assert logs[("orders", 0)].recovery_point == 30
    second.close()
    assert marker.exists()
    third = LogDirectory(tmp_path)
    third.load(CFG, time_ms=T0)
    assert third.had_clean_shutdown


def test_crash_load_uses_checkpointed_recovery_points(tmp_path):
    d = populated(tmp_path)
    d.checkpoint()  # periodic checkpoint, then more data and a crash
    rps = {tp: log.recovery_point for tp, log in d.logs.items()}
    assert rps[("orders", 0)] == 27  # the last roll flushed below segment 27
    for log in d.logs.values():
        log.append_as_leader(make_batch(2), 0, time_ms=T0)
    leos = {tp: log.log_end_offset for tp, log in d.logs.items()}
    again = LogDirectory(tmp_path)
    logs = again.load(CFG, time_ms=T0)
    assert not again.had_clean_shutdown
    for tp, log in logs.items():
        assert log.log_end_offset == leos[tp]
        assert log.recovery_point == rps[tp] < leos[tp]
        check_log_invariants(log, single_batch_chunks=True)


def test_log_start_checkpoint_lists_only_starts_beyond_the_first_segment(tmp_path):
    d = LogDirectory(tmp_path)
    fill(d, "a", 0, 10)  # log start moved inside a segment
    fill(d, "b", 0, 10)  # segments deleted by retention: start == first base
    fill(d, "c", 0, 10)  # untouched
    a, b = d.logs[("a", 0)], d.logs[("b", 0)]
    a.update_high_watermark(30)
    a.maybe_increment_log_start_offset(7)
    b.update_high_watermark(15)
    assert b.delete_old_segments(time_ms=T0) > 0
    assert b.log_start_offset == b.segments[0].base_offset > 0
    d.checkpoint()
    assert (tmp_path / "log-start-offset-checkpoint").read_text() == "0\n1\na 0 7\n"
    d.close()
    logs = LogDirectory(tmp_path).load(CFG, time_ms=T0)
    assert logs[("a", 0)].log_start_offset == 7
    assert logs[("b", 0)].log_start_offset == b.segments[0].base_offset
    assert logs[("c", 0)].log_start_offset == 0


def test_special_and_foreign_directories_are_ignored(tmp_path):
    d = populated(tmp_path)
    d.close()
    ignored = [
        f"orders-3.{UUID32}-delete",
        f"orders-4.{UUID32}-future",
        f"my-topic-2-5.{UUID32}-stray",
        "lost+found",
        "not_a_partition",
        "orders-x",
        "orders-",
        "-7",
    ]
    for name in ignored:
        sub = tmp_path / name
        sub.mkdir()
        (sub / "00000000000000000000.log").write_bytes(make_batch(1, base_offset=0))
    (tmp_path / "stray-file-0").write_text("not a directory")
    snapshot = {name: hash_dir(tmp_path / name) for name in ignored}

    again = LogDirectory(tmp_path)
    logs = again.load(CFG, time_ms=T0)
    assert sorted(logs) == [("my-topic-2", 12), ("orders", 0), ("orders", 1)]
    for name in ignored:
        assert hash_dir(tmp_path / name) == snapshot[name], name
    assert (tmp_path / "stray-file-0").read_text() == "not a directory"


def test_fresh_directory_loads_nothing_and_checkpoints_empty_files(tmp_path):
    d = LogDirectory(tmp_path / "fresh")
    assert d.load(CFG, time_ms=T0) == {}
    assert not d.had_clean_shutdown
    d.close()
    for name in (
        "recovery-point-offset-checkpoint",
        "replication-offset-checkpoint",
        "log-start-offset-checkpoint",
    ):
        assert (tmp_path / "fresh" / name).read_text() == "0\n0\n"


def test_topic_configs_apply_per_topic(tmp_path):
    d = populated(tmp_path)
    d.close()
    other = LogConfig.defaults().with_overrides({"segment.bytes": 5000})
    logs = LogDirectory(tmp_path).load(CFG, {"orders": other}, time_ms=T0)
    assert logs[("orders", 0)].config.segment_bytes == 5000
    assert logs[("orders", 1)].config.segment_bytes == 5000
    assert logs[("my-topic-2", 12)].config.segment_bytes == 400


def test_create_log_is_idempotent_and_delete_log_removes_the_directory(tmp_path):
    d = LogDirectory(tmp_path)
    log = d.create_log("t", 0, CFG, topic_id="q4RDr2lTR8y1Wy6eYUpl6g", time_ms=T0)
    assert d.create_log("t", 0, CFG, time_ms=T0) is log
    assert (tmp_path / "t-0" / "partition.metadata").read_bytes() == (
        b"version: 0\ntopic_id: q4RDr2lTR8y1Wy6eYUpl6g"
    )
    log.append_as_leader(make_batch(2), 0, time_ms=T0)
    d.delete_log("t", 0)
    assert not (tmp_path / "t-0").exists()
    assert d.logs == {}


def test_unchanged_checkpoints_are_not_written_again(tmp_path, monkeypatch):
    """The log manager checkpoints every few seconds: an idle directory's files are
    written (and fsynced) only when their offsets changed; a failed write is retried."""
    import seglog.storage.checkpoint_file as checkpoint_file

    d = populated(tmp_path)
    written: list[str] = []
    real = checkpoint_file.write_atomically

    def counting(path: Path, data: bytes) -> None:
        written.append(path.name)
        real(path, data)

    monkeypatch.setattr(checkpoint_file, "write_atomically", counting)
    d.checkpoint()
    assert sorted(written) == sorted(
        [
            "recovery-point-offset-checkpoint",
            "replication-offset-checkpoint",
            "log-start-offset-checkpoint",
        ]
    )
    written.clear()
    d.checkpoint()
    assert written == []
    d.logs[("orders", 0)].update_high_watermark(22)
    d.checkpoint()
    assert written == ["replication-offset-checkpoint"]
    assert "orders 0 22" in (tmp_path / "replication-offset-checkpoint").read_text()

    def failing(path: Path, data: bytes) -> None:
        raise OSError("disk gone")

    d.logs[("orders", 0)].update_high_watermark(23)
    monkeypatch.setattr(checkpoint_file, "write_atomically", failing)
    with pytest.raises(OSError, match="disk gone"):
        d.checkpoint()
    monkeypatch.setattr(checkpoint_file, "write_atomically", counting)
    written.clear()
    d.checkpoint()
    assert written == ["replication-offset-checkpoint"]
    assert "orders 0 23" in (tmp_path / "replication-offset-checkpoint").read_text()
