"""Storage benchmark: Log append throughput against raw os.write, random offset lookups on a
>= 1 GiB log, and full crash recovery of that log.

Phases, each run once, in this order (only the marked parts are timed):

1. build: producer batches (1 KiB records, at most --batch-bytes each, as a producer with
   batch.size = 16384 would close them) are encoded with record_batch.build_batch, chunk
   by chunk, outside every timed region. Generation is deterministic, so the raw-write and
   the append phases get the same bytes.
2. raw write [timed]: os.write of each batch, one call per batch, to an O_APPEND file
   beside the partition directory. Then fsync (untimed) and unlink.
3. append [timed]: Log.append_as_leader, one call per batch (one produce request per
   batch), default LogConfig unless --segment-mb says otherwise. A roll inside the
   timed region is counted in `append_mb_s` (the roll fsyncs the finished segment inline)
   and reported separately (`append_roll_s`, `append_mb_s_excl_roll`).
4. close (untimed), pre-read of every `.log` so it sits in the page cache (untimed), then
   recovery [timed]: Log.open(..., had_clean_shutdown=False, recovery_point=0) = CRC of
   every batch and both indexes rebuilt. Caches cannot be dropped without root, so this
   measures CPU-side recovery from the page cache, not the disk.
5. lookups [timed] on the recovered log: Log.translate_offset and Log.read(max_bytes small)
   at uniformly random offsets in [log start, log end).

Figures are wall-clock (time.perf_counter) on whatever else the machine runs: noisy.
The last stdout line is one JSON object; everything before it is progress.

    python bench/storage.py [--dir D] [--size-mb 1024] [--lookups N] [--quick]
                            [--producer idempotent|plain] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import random
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from seglog.bench.options import add_options, quick_or_full, work_dir
from seglog.storage.log import Log
from seglog.storage.log_config import LogConfig
from seglog.storage.record_batch import NewRecord, build_batch

MIB = 1024 * 1024
TARGET_APPEND_RATIO = 0.5
TARGET_LOOKUPS_PER_S = 100_000
TARGET_RECOVERY_MB_S = 500.0
PRODUCER_ID = 4242
PRODUCER_EPOCH = 0
LEADER_EPOCH = 0
PARTITION_DIR = "bench-0"


def say(msg: str) -> None:
    print(msg, flush=True)


# --- batches ------------------------------------------------------------------------


class BatchSource:
    """Deterministic producer batches: `records_per_batch` records of `record_bytes` each,
    values sliced from a seeded random pool; idempotent batches carry increasing sequences."""

    def __init__(
        self, record_bytes: int, batch_bytes: int, idempotent: bool, seed: int, now_ms: int
    ) -> None:
        self.record_bytes = record_bytes
        self.idempotent = idempotent
        self.now_ms = now_ms
        self._pool = random.Random(seed).randbytes(4 * MIB + record_bytes)
        self._pool_slots = (len(self._pool) - record_bytes) // 64
        # Kafka's producer closes a batch when the next record would not fit batch.size;
        # the first record always goes in.
        n = 1
        while len(self._build(0, n + 1)) <= batch_bytes:
            n += 1
        self.records_per_batch = n
        self.batch_size = len(self._build(0, n))

    def _build(self, index: int, n: int) -> bytes:
        records = []
        for j in range(n):
            start = ((index * 7919 + j * 104729) % self._pool_slots) * 64
            records.append(NewRecord(self._pool[start : start + self.record_bytes]))
        if not self.idempotent:
            return build_batch(records, now_ms=self.now_ms)
        return build_batch(
            records,
            producer_id=PRODUCER_ID,
            producer_epoch=PRODUCER_EPOCH,
            base_sequence=(index * n) % (2**31),
            now_ms=self.now_ms,
        )

    def chunks(self, total_batches: int, chunk_batches: int) -> Iterator[list[bytes]]:
        for first in range(0, total_batches, chunk_batches):
            last = min(first + chunk_batches, total_batches)
            yield [self._build(i, self.records_per_batch) for i in range(first, last)]


# --- profiling ----------------------------------------------------------------------


class Phase:
    """Optionally profile one phase; prints the top functions by tottime afterwards."""

    def __init__(self, name: str, enabled: bool, top: int) -> None:
        self.name = name
        self.profile = cProfile.Profile() if enabled else None
        self.top = top

    def __enter__(self) -> Phase:
        if self.profile is not None:
            self.profile.enable()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.profile is not None:
            self.profile.disable()

    def report(self) -> None:
        if self.profile is None:
            return
        out = io.StringIO()
        stats = pstats.Stats(self.profile, stream=out)
        stats.sort_stats("tottime").print_stats(self.top)
        say(f"--- profile: {self.name} (top {self.top} by tottime) ---")
        lines = out.getvalue().splitlines()
        # Drop pstats' preamble up to the column header.
        for i, line in enumerate(lines):
            if "ncalls" in line:
                lines = lines[i:]
                break
        for line in lines:
            if line.strip():
                say(line.rstrip())


# --- phases -------------------------------------------------------------------------


def raw_write(path: Path, source: BatchSource, n_batches: int, chunk_batches: int) -> float:
    """Seconds spent in os.write for every batch (fsync and unlink untimed)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    elapsed = 0.0
    try:
        for chunk in source.chunks(n_batches, chunk_batches):
            write = os.write
            start = time.perf_counter()
            for batch in chunk:
                if write(fd, batch) != len(batch):
                    raise OSError("short write")
            elapsed += time.perf_counter() - start
        os.fsync(fd)
    finally:
        os.close(fd)
    path.unlink()
    return elapsed


def append_all(
    log: Log, source: BatchSource, n_batches: int, chunk_batches: int, phase: Phase
) -> tuple[float, float, int]:
    """(seconds in append_as_leader, seconds of those in calls that rolled, rolls)."""
    elapsed = 0.0
    roll_s = 0.0
    rolls = 0
    clock = time.perf_counter
    for chunk in source.chunks(n_batches, chunk_batches):
        with phase:
            active = log.active_segment
            for batch in chunk:
                start = clock()
                log.append_as_leader(batch, LEADER_EPOCH)
                took = clock() - start
                elapsed += took
                if log.active_segment is not active:
                    active = log.active_segment
                    roll_s += took
                    rolls += 1
        say(f"  appended up to offset {log.log_end_offset:,} ({elapsed:.2f} s so far)")
    return elapsed, roll_s, rolls


def warm_up(root: Path, config: LogConfig, source: BatchSource) -> None:
    """A throwaway log, so first-call costs (imports, allocations) stay out of the timing."""
    directory = root / "warmup-0"
    log = Log.open(directory, config)
    for chunk in source.chunks(64, 64):
        for batch in chunk:
            log.append_as_leader(batch, LEADER_EPOCH)
    log.close()
    shutil.rmtree(directory)


def preread(directory: Path) -> int:
    """Read every segment once so recovery is served from the page cache."""
    total = 0
    for path in sorted(directory.glob("*.log")):
        with open(path, "rb", buffering=0) as f:
            while chunk := f.read(8 * MIB):
                total += len(chunk)
    return total


def rate(fn, targets: list[int]) -> float:
    start = time.perf_counter()
    for t in targets:
        fn(t)
    return len(targets) / (time.perf_counter() - start)


# --- main ---------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_options(parser, "--dir")
    parser.add_argument("--size-mb", type=int, default=None, help="log size in MiB (1024)")
    parser.add_argument("--lookups", type=int, default=None, help="lookups per kind (200000)")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--segment-mb", type=int, default=None, help="segment.bytes in MiB")
    parser.add_argument("--record-bytes", type=int, default=1024)
    parser.add_argument("--batch-bytes", type=int, default=16384)
    parser.add_argument("--read-max-bytes", type=int, default=1024)
    parser.add_argument(
        "--producer",
        choices=("idempotent", "plain"),
        default="idempotent",
        help="idempotent (Kafka's producer default) or plain (no producer id)",
    )
    parser.add_argument("--chunk-mb", type=int, default=128, help="batches pre-built per chunk")
    add_options(parser, "--seed")
    parser.add_argument("--profile", action="store_true", help="cProfile each timed phase")
    parser.add_argument("--profile-top", type=int, default=15)
    add_options(parser, "--keep")
    args = parser.parse_args(argv)
    quick_or_full(args, size_mb=(32, 1024), lookups=(5_000, 200_000))
    if args.segment_mb is None and args.quick:
        args.segment_mb = 8  # several segments, so lookups cross segment boundaries
    if args.quick:
        args.chunk_mb = min(args.chunk_mb, 8)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    config = LogConfig.defaults()
    if args.segment_mb is not None:
        config = config.with_overrides({"segment.bytes": args.segment_mb * MIB})
    idempotent = args.producer == "idempotent"
    now_ms = int(time.time() * 1000)
    source = BatchSource(args.record_bytes, args.batch_bytes, idempotent, args.seed, now_ms)
    target_bytes = args.size_mb * MIB
    n_batches = -(-target_bytes // source.batch_size)
    chunk_batches = max(1, args.chunk_mb * MIB // source.batch_size)
    total_bytes = n_batches * source.batch_size

    root = work_dir(args.dir, "seglog-bench-")
    free = shutil.disk_usage(root).free
    say(
        f"seglog storage bench in {root}: {n_batches:,} batches x {source.batch_size:,} B "
        f"({source.records_per_batch} x {args.record_bytes} B records, {args.producer}) = "
        f"{total_bytes / MIB:,.0f} MiB; segment.bytes {config.segment_bytes / MIB:,.0f} MiB; "
        f"{free / 2**30:,.1f} GiB free"
    )
    if free < 2.2 * total_bytes:
        say("WARNING: less than ~2x the log size free on this disk")
    profiles: list[Phase] = []
    try:
        directory = root / PARTITION_DIR

        say("warm-up (untimed) ...")
        warm_up(root, config, source)

        say("raw write ...")
        raw_s = raw_write(root / "raw.bin", source, n_batches, chunk_batches)
        raw_mb_s = total_bytes / MIB / raw_s
        say(f"  raw os.write: {raw_mb_s:,.0f} MiB/s ({raw_s:.2f} s)")

        say("append_as_leader ...")
        log = Log.open(directory, config)
        append_phase = Phase("append_as_leader", args.profile, args.profile_top)
        profiles.append(append_phase)
        append_s, roll_s, rolls = append_all(log, source, n_batches, chunk_batches, append_phase)
        append_mb_s = total_bytes / MIB / append_s
        excl = append_s - roll_s
        append_excl_mb_s = total_bytes / MIB / excl if excl > 0 else append_mb_s
        log_end = log.log_end_offset
        log_bytes = log.size_in_bytes
        segments = len(log.segments)
        assert log_bytes == total_bytes, (log_bytes, total_bytes)
        assert log_end == n_batches * source.records_per_batch, log_end
        say(
            f"  append: {append_mb_s:,.0f} MiB/s ({append_s:.2f} s, of which {roll_s:.2f} s in "
            f"{rolls} rolling call(s); {append_excl_mb_s:,.0f} MiB/s without them); "
            f"ratio to raw {append_mb_s / raw_mb_s:.2f}"
        )
        log.close()

        cached = preread(directory)
        say(f"recovery (full, from the page cache: {cached / MIB:,.0f} MiB pre-read) ...")
        recovery_phase = Phase("recovery (Log.open)", args.profile, args.profile_top)
        profiles.append(recovery_phase)
        with recovery_phase:
            start = time.perf_counter()
            log = Log.open(directory, config, recovery_point=0, had_clean_shutdown=False)
            recovery_s = time.perf_counter() - start
        assert log.log_end_offset == log_end, (log.log_end_offset, log_end)
        assert log.size_in_bytes == log_bytes
        recovery_mb_s = log_bytes / MIB / recovery_s
        say(f"  recovery: {recovery_mb_s:,.0f} MiB/s ({recovery_s:.2f} s)")

        say(f"lookups ({args.lookups:,} of each kind) ...")
        rng = random.Random(args.seed)
        lo = log.log_start_offset
        targets = [rng.randrange(lo, log_end) for _ in range(args.lookups)]
        # Spot check (and warm-up, untimed): the batch found holds the offset.
        for t in targets[:1000]:
            found = log.translate_offset(t)
            assert found is not None and found[2].base_offset <= t <= found[2].last_offset, t
            fetched = log.read(t, args.read_max_bytes)
            assert fetched.records and fetched.next_offset > t, t
        translate_phase = Phase("Log.translate_offset", args.profile, args.profile_top)
        profiles.append(translate_phase)
        with translate_phase:
            translate_per_s = rate(log.translate_offset, targets)
        max_bytes = args.read_max_bytes
        read_phase = Phase("Log.read", args.profile, args.profile_top)
        profiles.append(read_phase)
        with read_phase:
            read_per_s = rate(lambda t: log.read(t, max_bytes), targets)
        say(f"  translate_offset: {translate_per_s:,.0f}/s; read: {read_per_s:,.0f}/s")
        log.close()
    finally:
        if args.keep:
            say(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)

    for phase in profiles:
        phase.report()

    append_ratio = append_mb_s / raw_mb_s
    lookups_per_s = translate_per_s

    def target(value: float, goal: float) -> dict[str, object]:
        return {"value": round(value, 3), "target": goal, "met": value >= goal}

    result = {
        "benchmark": "storage",
        "append_mb_s": round(append_mb_s, 1),
        "append_mb_s_excl_roll": round(append_excl_mb_s, 1),
        "append_roll_s": round(roll_s, 3),
        "append_rolls": rolls,
        "append_s": round(append_s, 3),
        "raw_write_mb_s": round(raw_mb_s, 1),
        "append_ratio": round(append_ratio, 3),
        "lookups_per_s": round(lookups_per_s),
        "translate_per_s": round(translate_per_s),
        "read_per_s": round(read_per_s),
        "recovery_mb_s": round(recovery_mb_s, 1),
        "recovery_s": round(recovery_s, 3),
        "targets": {
            "append_ratio": target(append_ratio, TARGET_APPEND_RATIO),
            "lookups_per_s": target(lookups_per_s, TARGET_LOOKUPS_PER_S),
            "translate_per_s": target(translate_per_s, TARGET_LOOKUPS_PER_S),
            "read_per_s": target(read_per_s, TARGET_LOOKUPS_PER_S),
            "recovery_mb_s": target(recovery_mb_s, TARGET_RECOVERY_MB_S),
        },
        "producer": args.producer,
        "idempotent": idempotent,
        "log_bytes": log_bytes,
        "log_end_offset": log_end,
        "segments": segments,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "params": {
            "size_mb": args.size_mb,
            "quick": args.quick,
            "segment_bytes": config.segment_bytes,
            "index_interval_bytes": config.index_interval_bytes,
            "record_bytes": args.record_bytes,
            "batch_bytes_limit": args.batch_bytes,
            "batch_bytes": source.batch_size,
            "records_per_batch": source.records_per_batch,
            "batches": n_batches,
            "batches_per_append": 1,
            "compression": "none",
            "lookups": args.lookups,
            "read_max_bytes": args.read_max_bytes,
            "seed": args.seed,
            "profiled": args.profile,
        },
        "units": "MiB/s (2^20 bytes per second); lookups per second",
        "notes": [
            "recovery reads from the page cache: the .log files were just written and pre-read",
            "append_mb_s includes the rolling append's inline fsync of the finished segment; "
            "append_mb_s_excl_roll leaves those calls out",
            "raw_write_mb_s: one os.write per batch to an O_APPEND file, no fsync timed",
            "lookups_per_s is translate_per_s; read_per_s is Log.read(offset, read_max_bytes), "
            "which returns the whole batch holding the offset",
            "wall-clock on a shared machine: figures are noisy"
            + (" and cProfile overhead inflates every timed phase" if args.profile else ""),
        ],
    }
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
