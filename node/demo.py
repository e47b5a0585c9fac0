"""`seglog demo`: write a partition log the way a leader would, reopen it, and dump
its files — a look at Kafka's on-disk format without a cluster."""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import TextIO

from seglog.storage.compression import CompressionType
from seglog.storage.disk_and_clock import plain_perf_s, plain_wall_s
from seglog.storage.dump_log import DumpOptions, dump_files
from seglog.storage.log_config import LogConfig
from seglog.storage.log_dir import LogDirectory
from seglog.storage.partition_metadata import new_topic_id
from seglog.storage.record_batch import NewRecord, build_batch

TOPIC = "demo"
RECORDS_PER_BATCH = 50
PRODUCER_ID = 1000


def run_demo(data_dir: Path, records: int, out: TextIO) -> int:
    if records <= 0:
        raise ValueError(f"--records must be positive, got {records}")
    if data_dir.exists():
        shutil.rmtree(data_dir)
    config = LogConfig.defaults().with_overrides(
        {"segment.bytes": str(256 * 1024), "index.interval.bytes": "4096"}
    )
    rng = random.Random(7)
    codecs = list(CompressionType)
    started = plain_perf_s()
    log_dir = LogDirectory(data_dir)
    log = log_dir.create_log(TOPIC, 0, config, topic_id=new_topic_id())
    base_ts = int(plain_wall_s() * 1000)
    batches = (records + RECORDS_PER_BATCH - 1) // RECORDS_PER_BATCH
    last_batch = b""
    for b in range(batches):
        n = min(RECORDS_PER_BATCH, records - b * RECORDS_PER_BATCH)
        batch = build_batch(
            [
                NewRecord(
                    value=f"page-{rng.randrange(100)} by user-{rng.randrange(10_000)}".encode(),
                    key=f"user-{rng.randrange(10_000)}".encode(),
                    timestamp=base_ts + b * 10 + i,
                    headers=[("source", b"demo")],
                )
                for i in range(n)
            ],
            compression=codecs[b % len(codecs)],
            producer_id=PRODUCER_ID,
            producer_epoch=0,
            base_sequence=b * RECORDS_PER_BATCH,
        )
        # The leader epoch rises once, as after a leader change, so the
        # leader-epoch-checkpoint has two entries.
        log.append_as_leader(batch, leader_epoch=0 if b < batches // 2 else 1)
        last_batch = batch
    retry = log.append_as_leader(last_batch, leader_epoch=1)
    log.update_high_watermark(log.log_end_offset)
    leo = log.log_end_offset
    log_dir.close()
    elapsed = plain_perf_s() - started
    print(
        f"wrote {records} records in {batches} batches to {data_dir}/{TOPIC}-0 "
        f"in {elapsed:.2f}s; log end offset {leo}",
        file=out,
    )
    print(
        f"a producer retry of the last batch was answered with its original offsets "
        f"{retry.first_offset}..{retry.last_offset} (duplicate={retry.duplicate})",
        file=out,
    )

    reopened = LogDirectory(data_dir)
    logs = reopened.load(config)
    log = logs[(TOPIC, 0)]
    print(
        f"reopened after a clean shutdown: {len(log.segments)} segments, "
        f"log end offset {log.log_end_offset}, epochs {log.epoch_cache.entries()}",
        file=out,
    )
    reopened.close()

    partition = data_dir / f"{TOPIC}-0"
    first = sorted(partition.glob("*.log"))[0]
    stem = first.name[: -len(".log")]
    files = [
        first,
        partition / f"{stem}.index",
        partition / f"{stem}.timeindex",
        *sorted(partition.glob("*.snapshot"))[-1:],
        partition / "leader-epoch-checkpoint",
        partition / "partition.metadata",
        data_dir / "recovery-point-offset-checkpoint",
    ]
    print("", file=out)
    return dump_files(files, DumpOptions(max_bytes=8 * 1024), out)
