"""Child process for test_log_cleaner_crash.py: cleans a compacted partition until killed.

    python crash_cleaner.py PARTITION_DIR HIGH_WATERMARK [--pause-ms P]

It opens the partition (recovering it after an earlier crash), then runs cleaning
passes until the log is clean, printing ``STEP <name>`` at every step of the file work
(flushed, then pausing P ms, so that a SIGKILL sent on reading the line lands at that
step) and ``DONE`` at the end. It never closes anything: it dies by SIGKILL.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from cleaner_fixtures import T0, compact_config

from seglog.storage.log import Log
from seglog.storage.log_cleaner import clean_log
from seglog.storage.offset_map import OffsetMap


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("directory", type=Path)
    ap.add_argument("high_watermark", type=int)
    ap.add_argument("--pause-ms", type=float, default=50.0)
    args = ap.parse_args()
    log = Log.open(
        args.directory,
        compact_config(segment_bytes=600),
        high_watermark=args.high_watermark,
        time_ms=T0,
    )

    def step(name: str) -> None:
        print(f"STEP {name}", flush=True)
        time.sleep(args.pause_ms / 1000)

    checkpoint = None
    m = OffsetMap(1 << 16)
    for _ in range(100):
        r = clean_log(
            log, offset_map=m, now_ms=T0, checkpoint=checkpoint, force=True, step_hook=step
        )
        if r is None or r.map_end >= r.first_uncleanable:
            break
        checkpoint = r.map_end
    print("DONE", flush=True)
    sys.stdout.flush()
    time.sleep(60)  # killed by the parent


if __name__ == "__main__":
    main()
