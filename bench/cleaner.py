"""Log cleaner benchmark: MB/s of dirty log cleaned, peak memory, throttle accuracy.

Phases:

1. build (untimed): a compacted partition of --size-mb of dirty log: producer batches
   of 16 records of ~1 KiB (batch.size 16384), keys drawn uniformly from
   --distinct-pct % of the record count (10 % by default), appended with
   Log.append_as_leader; a roll and one more record make all of it cleanable.
2. clean [timed, in a child process]: the log is opened and cleaned (as many passes as
   the offset map needs) with the default dedupe buffer (128 MiB, one thread) and no
   throttle. `cleaned_mb_s` = dirty bytes / wall-clock seconds of the passes. The child
   reports its peak RSS (getrusage) and its RSS before cleaning; the difference is what
   cleaning itself needed, to compare with the dedupe buffer.
3. throttle [timed, in a child]: a fresh --throttle-log-mb log cleaned with
   log.cleaner.io.max.bytes.per.second = --throttle-mb-s (at most 30 % of the I/O rate
   phase 2 reached, since a throttle only slows down); the rate achieved (bytes read +
   written, which is what the throttle counts, over wall-clock time) against the one
   configured.

Wall-clock figures on a shared machine: the JSON carries the load average.
The last stdout line is one JSON object.

    python bench/cleaner.py [--dir D] [--size-mb 256 | --full] [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from seglog.bench.options import add_options, work_dir
from seglog.storage.log import Log
from seglog.storage.log_cleaner import CleanerConfig, CleanResult, clean_log
from seglog.storage.log_config import LogConfig
from seglog.storage.offset_map import OffsetMap
from seglog.storage.record_batch import NewRecord, build_batch
from seglog.storage.throttler import Throttler

MIB = 1024 * 1024
RECORDS_PER_BATCH = 16
VALUE_BYTES = 1000
TARGET_MB_S = 100.0
TARGET_THROTTLE_ERROR = 0.10
T0 = 1_700_000_000_000


def config(segment_mb: int) -> LogConfig:
    return LogConfig.defaults().with_overrides(
        {
            "cleanup.policy": "compact",
            "segment.bytes": segment_mb * MIB,
            "file.delete.delay.ms": 0,
        }
    )


def build(directory: Path, size_mb: int, distinct_pct: float, segment_mb: int) -> dict:
    log = Log.open(directory, config(segment_mb), time_ms=T0)
    rng = random.Random(13)
    target = size_mb * MIB
    per_batch = RECORDS_PER_BATCH * (VALUE_BYTES + 40)
    records = max(RECORDS_PER_BATCH, target // per_batch * RECORDS_PER_BATCH)
    distinct = max(1, int(records * distinct_pct / 100))
    values = [rng.randbytes(VALUE_BYTES) for _ in range(64)]
    n = 0
    started = time.perf_counter()
    while log.size_in_bytes < target:
        batch = build_batch(
            [
                NewRecord(
                    values[(n + i) % 64], key=b"key-%012d" % rng.randrange(distinct), timestamp=T0
                )
                for i in range(RECORDS_PER_BATCH)
            ],
            now_ms=T0,
        )
        log.append_as_leader(batch, 0, time_ms=T0)
        n += RECORDS_PER_BATCH
        if n % (RECORDS_PER_BATCH * 8192) == 0:
            print(f"  built {log.size_in_bytes / MIB:.0f} MiB", flush=True)
    dirty = log.size_in_bytes
    log.roll(time_ms=T0)
    log.append_as_leader(
        build_batch([NewRecord(b"end", key=b"end", timestamp=T0)], now_ms=T0), 0, time_ms=T0
    )
    log.update_high_watermark(log.log_end_offset)
    hw = log.high_watermark
    log.close()
    return {
        "dirty_bytes": dirty,
        "records": n,
        "distinct_keys": distinct,
        "high_watermark": hw,
        "build_s": round(time.perf_counter() - started, 2),
    }


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MIB


def clean_child(directory: Path, hw: int, segment_mb: int, dedupe: int, rate: float) -> dict:
    """Runs in a child process: open, clean until done, report."""
    log = Log.open(
        directory, config(segment_mb), high_watermark=hw, had_clean_shutdown=True, time_ms=T0
    )
    before_mb = rss_mb()
    cc = CleanerConfig(dedupe_buffer_size=dedupe)
    throttler = Throttler(rate)
    throttle = throttler.maybe_throttle if not throttler.unlimited else None
    offset_map = OffsetMap(cc.dedupe_buffer_size, cc.io_buffer_load_factor)
    results: list[CleanResult] = []
    checkpoint = None
    started = time.perf_counter()
    for _ in range(1000):
        r = clean_log(
            log,
            offset_map=offset_map,
            now_ms=T0,
            checkpoint=checkpoint,
            config=cc,
            force=True,
            throttle=throttle,
        )
        if r is None:
            break
        results.append(r)
        checkpoint = r.map_end
        if r.map_end >= r.first_uncleanable:
            break
    elapsed = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    size_after = log.size_in_bytes
    log.close()
    return {
        "seconds": elapsed,
        "passes": len(results),
        "bytes_read": sum(r.bytes_read for r in results),
        "bytes_written": sum(r.bytes_written for r in results),
        "records_read": sum(r.records_read for r in results),
        "records_kept": sum(r.records_kept for r in results),
        "map_keys": max((r.map_keys for r in results), default=0),
        "size_after": size_after,
        "rss_before_mb": round(before_mb, 1),
        "peak_rss_mb": round(peak_mb, 1),
        "throttle_slept_ms": round(throttler.slept_ms, 1),
    }


def run_child(directory: Path, hw: int, segment_mb: int, dedupe: int, rate: float) -> dict:
    proc = subprocess.run(
        [
            sys.executable,
            __file__,
            "--child",
            str(directory),
            str(hw),
            str(segment_mb),
            str(dedupe),
            repr(rate),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"clean child failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    result: dict = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    add_options(ap, "--dir")
    ap.add_argument("--size-mb", type=int, default=256)
    ap.add_argument("--full", action="store_true", help="1 GiB of dirty log (the issue's size)")
    ap.add_argument("--quick", action="store_true", help="a few MiB: a smoke run")
    ap.add_argument("--distinct-pct", type=float, default=10.0)
    ap.add_argument("--segment-mb", type=int, default=1024)
    ap.add_argument("--dedupe-mb", type=int, default=128)
    ap.add_argument("--throttle-mb-s", type=float, default=16.0)
    ap.add_argument("--throttle-log-mb", type=int, default=48)
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        d, hw, seg, dedupe, rate = args.child
        print(json.dumps(clean_child(Path(d), int(hw), int(seg), int(dedupe), float(rate))))
        return
    size_mb = 1024 if args.full else (8 if args.quick else args.size_mb)
    throttle_mb = 4 if args.quick else args.throttle_log_mb
    throttle_rate = (2.0 if args.quick else args.throttle_mb_s) * MIB
    dedupe = args.dedupe_mb * MIB
    root = work_dir(args.dir, "seglog-cleaner-bench-")
    try:
        print(f"building {size_mb} MiB of dirty log in {root}", flush=True)
        main_info = build(root / "bench-0", size_mb, args.distinct_pct, args.segment_mb)
        print(f"cleaning {main_info['dirty_bytes'] / MIB:.0f} MiB", flush=True)
        cleaned = run_child(
            root / "bench-0", main_info["high_watermark"], args.segment_mb, dedupe, 1.8e308
        )
        # The throttle can only slow cleaning down: test it at a rate well below what
        # this machine just achieved unthrottled (its I/O: bytes read + written).
        unthrottled_io = (cleaned["bytes_read"] + cleaned["bytes_written"]) / cleaned["seconds"]
        throttle_rate = min(throttle_rate, 0.3 * unthrottled_io)
        print(f"building the {throttle_mb} MiB throttle log", flush=True)
        thr_info = build(root / "throttle-0", throttle_mb, args.distinct_pct, args.segment_mb)
        print(f"cleaning it at {throttle_rate / MIB:.1f} MiB/s", flush=True)
        throttled = run_child(
            root / "throttle-0",
            thr_info["high_watermark"],
            args.segment_mb,
            dedupe,
            throttle_rate,
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    mb_s = main_info["dirty_bytes"] / MIB / cleaned["seconds"]
    achieved = (throttled["bytes_read"] + throttled["bytes_written"]) / throttled["seconds"]
    accuracy = achieved / throttle_rate
    over_baseline = cleaned["peak_rss_mb"] - cleaned["rss_before_mb"]
    result = {
        "cleaned_mb_s": round(mb_s, 1),
        "dirty_mb": round(main_info["dirty_bytes"] / MIB, 1),
        "clean_s": round(cleaned["seconds"], 2),
        "passes": cleaned["passes"],
        "records_read": cleaned["records_read"],
        "records_kept": cleaned["records_kept"],
        "distinct_keys": main_info["distinct_keys"],
        "cleaned_log_mb": round(cleaned["size_after"] / MIB, 1),
        "peak_rss_mb": cleaned["peak_rss_mb"],
        "rss_before_clean_mb": cleaned["rss_before_mb"],
        "peak_rss_over_baseline_mb": round(over_baseline, 1),
        "dedupe_buffer_mb": args.dedupe_mb,
        "unthrottled_io_mb_s": round(unthrottled_io / MIB, 1),
        "throttle_configured_mb_s": round(throttle_rate / MIB, 2),
        "throttle_achieved_mb_s": round(achieved / MIB, 2),
        "throttle_accuracy": round(accuracy, 3),
        "loadavg": [round(x, 2) for x in os.getloadavg()],
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "params": {
            "size_mb": size_mb,
            "distinct_pct": args.distinct_pct,
            "records_per_batch": RECORDS_PER_BATCH,
            "value_bytes": VALUE_BYTES,
            "segment_mb": args.segment_mb,
            "throttle_log_mb": throttle_mb,
        },
        "targets": {
            "cleaned_mb_s": {"target": TARGET_MB_S, "met": mb_s >= TARGET_MB_S},
            "memory_bounded_by_dedupe_buffer": {
                "target": args.dedupe_mb,
                "met": over_baseline <= args.dedupe_mb * 1.1,
            },
            "throttle_within_10pct": {
                "target": TARGET_THROTTLE_ERROR,
                "met": abs(accuracy - 1) <= TARGET_THROTTLE_ERROR,
            },
        },
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
