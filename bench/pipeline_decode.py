"""Micro benchmark: what one Spark task's Python spends per fetch answer, single
process, no Spark and no node.

One fetch answer is built as bench/pipeline.py's topic holds it: about 8 MiB
(`max.partition.fetch.bytes` here) of uncompressed batches of about 256 KiB
(the Producer's batch.size in that benchmark), records of --record-bytes values
with keys b"k%d" % (i % 1000) and timestamps a few ms apart. `--varied` gives
every value a random length in [0, 2 * record-bytes] instead, the case where no
two neighbouring records need have the same length.

Timed per round, as `range_reader` does it: frame the answer (iter_batches), CRC
each batch (check_batch), decode (arrow_decode.decode_batches) and build the
Spark schema's RecordBatch (schema.record_batch). The median of --rounds rounds is
the figure; the 1-minute load average is printed with it (the machine is shared),
and the decode's CPU time (process_time), which other processes distort less than
the wall clock.
`--against FILE` also times another version of pipeline/arrow_decode.py (e.g.
`git show main:pipeline/arrow_decode.py > /tmp/old.py`), alternating with this one
in the same process, so that both see the same load: `against` in the JSON holds
both decodes' median CPU times and their ratio.
The last stdout line is one JSON object.

    python bench/pipeline_decode.py [--record-bytes 100] [--fetch-bytes 8388608]
                                    [--rounds 15] [--varied] [--headers]
                                    [--against FILE]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import statistics
import sys
import time
from typing import Any

from seglog.pipeline.arrow_decode import decode_batches
from seglog.pipeline.schema import record_batch
from seglog.storage.record_batch import NewRecord, build_batch, check_batch, iter_batches

BATCH_BYTES = 256 * 1024
TS0 = 1_700_000_000_000


def build_fetch(fetch_bytes: int, record_bytes: int, varied: bool, headers: bool) -> bytes:
    rng = random.Random(7)
    payload = os.urandom(2 * record_bytes + 1)
    hdrs = [("trace", b"abc")] if headers else []
    out = bytearray()
    i = 0
    while len(out) < fetch_bytes:
        recs = []
        size = 0
        while size < BATCH_BYTES:
            n = rng.randint(0, 2 * record_bytes) if varied else record_bytes
            recs.append(NewRecord(payload[:n], b"k%d" % (i % 1000), TS0 + i // 50, hdrs))
            size += n + 12
            i += 1
        out += build_batch(recs, base_offset=i - len(recs))
    return bytes(out)


def one_round(data: bytes, include_headers: bool) -> dict[str, float]:
    t0 = time.perf_counter()
    framed = list(iter_batches(data, validate=False))
    for p, _h in framed:
        check_batch(data, p)
    t1 = time.perf_counter()
    c1 = time.process_time()
    cols = decode_batches(data, framed, 0, None, include_headers)
    c2 = time.process_time()
    t2 = time.perf_counter()
    record_batch("t", 0, cols)
    t3 = time.perf_counter()
    return {
        "frame_crc_ms": (t1 - t0) * 1e3,
        "decode_ms": (t2 - t1) * 1e3,
        "arrow_ms": (t3 - t2) * 1e3,
        "decode_cpu_ms": (c2 - c1) * 1e3,
    }


def load_decoder(path: str) -> Any:
    """Another arrow_decode.py, as a module of seglog.pipeline (its relative imports)."""
    spec = importlib.util.spec_from_file_location("seglog.pipeline._bench_other_decode", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"--against {path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def against(data: bytes, other: Any, rounds: int, include_headers: bool) -> dict[str, float]:
    """Median CPU time of this decode and of `other`'s, alternating round by round."""
    framed = list(iter_batches(data))
    mine, theirs = [], []
    for _ in range(rounds):
        for fn, out in ((decode_batches, mine), (other.decode_batches, theirs)):
            c = time.process_time()
            fn(data, framed, 0, None, include_headers)
            out.append((time.process_time() - c) * 1e3)
    m, t = statistics.median(mine), statistics.median(theirs)
    return {
        "decode_cpu_ms": round(m, 2),
        "other_decode_cpu_ms": round(t, 2),
        "speedup": round(t / m, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--fetch-bytes", type=int, default=8 * 1024 * 1024)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--varied", action="store_true", help="random value lengths")
    parser.add_argument("--headers", action="store_true", help="one header per record, decoded")
    parser.add_argument("--against", default=None, help="another arrow_decode.py to compare")
    args = parser.parse_args(argv)

    data = build_fetch(args.fetch_bytes, args.record_bytes, args.varied, args.headers)
    framed = list(iter_batches(data))
    records = sum(h.records_count for _, h in framed)
    one_round(data, args.headers)  # imports, first-touch of the buffers
    rounds = [one_round(data, args.headers) for _ in range(args.rounds)]
    med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    best = {k: min(r[k] for r in rounds) for k in rounds[0]}
    total = med["frame_crc_ms"] + med["decode_ms"] + med["arrow_ms"]
    load = os.getloadavg()[0]
    print(
        f"{records} records in {len(framed)} batches ({len(data)} bytes): decode "
        f"{med['decode_ms']:.1f} ms, frame+CRC {med['frame_crc_ms']:.1f} ms, Arrow batch "
        f"{med['arrow_ms']:.1f} ms; {records / total:.0f}k rows/s per core "
        f"(median of {args.rounds}; decode's CPU time {med['decode_cpu_ms']:.1f} ms, best "
        f"{best['decode_ms']:.1f} ms; load {load:.2f})"
    )
    result = {
        "records": records,
        "batches": len(framed),
        "fetch_bytes": len(data),
        "varied": args.varied,
        "headers": args.headers,
        "median_ms": {k: round(v, 2) for k, v in med.items()},
        "min_ms": {k: round(v, 2) for k, v in best.items()},
        "decode_rows_per_s": round(records / med["decode_ms"] * 1e3),
        "decode_rows_per_s_best": round(records / best["decode_ms"] * 1e3),
        "task_rows_per_s": round(records / total * 1e3),
        "rounds": args.rounds,
        "load_1m": round(load, 2),
    }
    if args.against:
        other = load_decoder(args.against)
        other.decode_batches(data, framed, 0, None, args.headers)
        result["against"] = against(data, other, max(args.rounds, 20), args.headers)
        print(f"against {args.against}: {result['against']}")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
