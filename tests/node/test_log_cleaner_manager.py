"""The log cleaner's threads in the node's LogManager: they clean compacted logs (and
only those), record `cleaner-offset-checkpoint`, roll a quiet compacted log, and a
partition deleted mid-pass stops its pass."""

from __future__ import annotations

import time
from pathlib import Path

from seglog.cli.log_dirs import describe
from seglog.cli.main import main as cli_main
from seglog.node.log_manager import LogManager
from seglog.storage.checkpoint_file import CLEANER_OFFSET_CHECKPOINT, OffsetCheckpointFile
from seglog.storage.log_config import BrokerLogSettings, LogConfig
from seglog.storage.offset_map import OffsetMap
from seglog.storage.record_batch import NewRecord, build_batch, decode_records, iter_batches

COMPACT = LogConfig.defaults().with_overrides(
    {"cleanup.policy": "compact", "segment.bytes": 2000, "file.delete.delay.ms": 0}
)


def fill(manager: LogManager, tp: tuple[str, int], config: LogConfig, n: int = 300) -> None:
    plog = manager.get_or_create(tp, config)
    with plog.lock:
        for i in range(n):
            batch = build_batch([NewRecord(b"value-%d" % i, key=b"key-%d" % (i % 10))])
            plog.log.append_as_leader(batch, 0)
        plog.log.update_high_watermark(plog.log.log_end_offset)


def keys_and_offsets(manager: LogManager, tp: tuple[str, int]) -> list[tuple[int, bytes]]:
    plog = manager.get(tp)
    assert plog is not None
    out = []
    with plog.lock:
        for seg in plog.log.segments:
            data = Path(seg.log_path).read_bytes()
            for pos, h in iter_batches(data):
                out += [(r.offset, r.key) for r in decode_records(data, pos, h)]
    return out


def settings(**kw: object) -> BrokerLogSettings:
    return BrokerLogSettings.from_broker({k.replace("_", "."): v for k, v in kw.items()})


def test_one_round_cleans_the_compacted_log_and_checkpoints_it(tmp_path: Path) -> None:
    m = LogManager((tmp_path,), LogConfig.defaults(), settings())
    m.load()
    fill(m, ("c", 0), COMPACT)
    fill(m, ("d", 0), LogConfig.defaults().with_overrides({"segment.bytes": 2000}))
    before_d = keys_and_offsets(m, ("d", 0))
    assert m.cleaner.clean_once(OffsetMap(1 << 16))
    assert not m.cleaner.clean_once(OffsetMap(1 << 16))  # nothing due any more
    plog = m.get(("c", 0))
    assert plog is not None
    active = plog.log.active_segment.base_offset
    cleaned = [o for o, _k in keys_and_offsets(m, ("c", 0)) if o < active]
    assert len(cleaned) == 10  # the last value of each of the ten keys
    assert keys_and_offsets(m, ("d", 0)) == before_d  # a delete-policy log is left alone
    assert OffsetCheckpointFile(tmp_path / CLEANER_OFFSET_CHECKPOINT).read() == {("c", 0): active}
    assert m.cleaner.last_pass[("c", 0)].checkpoint == active
    # seglog log-dirs --describe reports the cleaner's progress from the files
    described = {
        p["partition"]: p for p in describe([tmp_path])["brokers"][0]["logDirs"][0]["partitions"]
    }
    assert described["c-0"]["cleaner"]["firstDirtyOffset"] == active
    assert described["c-0"]["cleaner"]["dirtyBytes"] == plog.log.active_segment.size
    assert described["c-0"]["logEndOffset"] == plog.log.log_end_offset
    assert "cleaner" not in described["d-0"]
    assert cli_main(["log-dirs", "--describe", "--log-dirs", str(tmp_path)]) == 0
    m.shutdown()


def test_the_cleaner_thread_cleans_in_the_background(tmp_path: Path) -> None:
    m = LogManager((tmp_path,), LogConfig.defaults(), settings(log_cleaner_backoff_ms=50))
    m.load()
    m.start()
    try:
        fill(m, ("c", 0), COMPACT)
        deadline = time.monotonic() + 20
        while ("c", 0) not in m.cleaner.last_pass and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ("c", 0) in m.cleaner.last_pass
    finally:
        m.shutdown()
    assert not list((tmp_path / "c-0").glob("*.cleaned"))


def test_disabled_cleaner_starts_no_thread(tmp_path: Path) -> None:
    m = LogManager((tmp_path,), LogConfig.defaults(), settings(log_cleaner_enable="false"))
    m.load()
    m.start()
    assert m.cleaner.threads == 0 and not m.cleaner._workers
    m.shutdown()


def test_a_quiet_compacted_log_is_rolled_so_it_can_be_cleaned(tmp_path: Path) -> None:
    m = LogManager((tmp_path,), LogConfig.defaults(), settings())
    m.load()
    config = COMPACT.with_overrides({"segment.ms": 1000, "segment.bytes": 1_000_000})
    fill(m, ("q", 0), config, n=50)
    plog = m.get(("q", 0))
    assert plog is not None and len(plog.log.segments) == 1
    now = int(time.time() * 1000)
    assert m.cleaner.roll_idle_logs(now) == 0  # records are fresh
    assert m.cleaner.roll_idle_logs(now + 60_000) == 1
    assert m.cleaner.clean_once(OffsetMap(1 << 16), now + 60_000)
    assert len(keys_and_offsets(m, ("q", 0))) == 10
    m.shutdown()


def test_deleting_a_partition_aborts_its_pass(tmp_path: Path) -> None:
    # 20 KB/s: the pass over ~60 KB would take seconds
    m = LogManager(
        (tmp_path,),
        LogConfig.defaults(),
        settings(log_cleaner_backoff_ms=20, log_cleaner_io_max_bytes_per_second=20_000),
    )
    m.load()
    fill(m, ("c", 0), COMPACT, n=2000)
    m.start()
    try:
        deadline = time.monotonic() + 10
        while not m.cleaner._in_progress and time.monotonic() < deadline:
            time.sleep(0.01)
        assert m.cleaner._in_progress
        started = time.monotonic()
        m.delete(("c", 0))
        assert time.monotonic() - started < 5
        assert not (tmp_path / "c-0").exists()
        assert ("c", 0) not in m.cleaner.last_pass
    finally:
        m.shutdown()


def test_a_truncated_log_is_cleaned_again_from_its_start(tmp_path: Path) -> None:
    m = LogManager((tmp_path,), LogConfig.defaults(), settings())
    m.load()
    fill(m, ("c", 0), COMPACT)
    assert m.cleaner.clean_once(OffsetMap(1 << 16))
    cp = OffsetCheckpointFile(tmp_path / CLEANER_OFFSET_CHECKPOINT)
    assert cp.read()[("c", 0)] > 0
    plog = m.get(("c", 0))
    assert plog is not None
    with plog.lock:  # a follower's truncation, then new data
        plog.log.truncate_to(plog.log.log_end_offset - 5)
    fill(m, ("c", 0), COMPACT, n=100)
    m.cleaner._views(int(time.time() * 1000))
    assert ("c", 0) not in cp.read()  # the checkpoint no longer vouches for anything
    assert m.cleaner.clean_once(OffsetMap(1 << 16))
    assert m.cleaner.last_pass[("c", 0)].first_dirty == plog.log.log_start_offset
    m.shutdown()
