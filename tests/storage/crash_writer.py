"""Child process for test_crash_recovery.py: appends batches to a partition until killed.

    python crash_writer.py LOG_DIR [--max-batches N] [--tear-at K --tear-bytes B]
                                   [--kill-after-roll R] [--tear-after-roll R --tear-bytes B]

It opens LOG_DIR as a LogDirectory (recovering it if a previous run crashed), resumes
at the log end offset, and appends one deterministic batch at a time
(`client_batch(base_offset)`). After each append returns it prints

    ACK <first offset> <last offset> <crc as 8 hex digits>

and flushes stdout, so every printed line is an acknowledged append. After each roll it
writes the log directory's checkpoints, so the next start recovers from the recovery
point rather than from offset 0. It never closes anything: it dies by SIGKILL, sent by
the parent, or by itself at a chosen point:

* ``--tear-at K --tear-bytes B``: the K-th append of this run writes only its first B
  bytes (B < 0: all but -B bytes) to the `.log`, then the process kills itself;
* ``--kill-after-roll R``: the process kills itself right after its R-th segment roll,
  before the batch that caused the roll is written;
* ``--tear-after-roll R --tear-bytes B``: the batch that causes the R-th roll, the first
  of the new segment, is torn as with ``--tear-at``.

The batch contents are a pure function of the base offset (see `batch_records`), so the
parent can regenerate every byte the leader should have written.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from seglog.storage.compression import CompressionType
from seglog.storage.log import Log
from seglog.storage.log_config import LogConfig
from seglog.storage.log_dir import LogDirectory
from seglog.storage.record_batch import NewRecord, build_batch
from seglog.storage.segment import LogSegment

T0 = 1_700_000_000_000
TOPIC = "crash"
PARTITION = 0
PRODUCER_ID = 4242
PRODUCER_EPOCH = 0
# Small segments so that a few hundred appends roll many of them; small indexes so
# that the preallocated (zero-filled) tail of the active one is easy to inspect.
CONFIG = LogConfig(segment_bytes=6000, index_interval_bytes=700, segment_index_bytes=4096)
_CODECS = (CompressionType.NONE,) * 4 + (CompressionType.GZIP, CompressionType.ZSTD)


def batch_records(base_offset: int) -> tuple[list[NewRecord], CompressionType]:
    """The records (and codec) of the batch whose first offset is `base_offset`."""
    rng = random.Random(base_offset)
    records = []
    for i in range(rng.randint(1, 6)):
        offset = base_offset + i
        key = None if rng.random() < 0.2 else f"key-{offset}".encode()
        value = None if rng.random() < 0.05 else rng.randbytes(rng.randint(0, 300))
        headers = [("offset", str(offset).encode())] if rng.random() < 0.5 else []
        records.append(NewRecord(value, key, T0 + offset, headers))
    return records, rng.choice(_CODECS)


def leader_epoch_for(base_offset: int) -> int:
    """The epoch the leader appends the batch at `base_offset` in: a new one every ~400."""
    return base_offset // 400


def client_batch(base_offset: int) -> bytes:
    """What the idempotent producer sends: baseOffset 0, no leader epoch."""
    records, codec = batch_records(base_offset)
    return build_batch(
        records,
        compression=codec,
        producer_id=PRODUCER_ID,
        producer_epoch=PRODUCER_EPOCH,
        base_sequence=base_offset,  # one producer from offset 0: sequence == offset
        now_ms=T0,
    )


def expected_batch(base_offset: int) -> bytes:
    """The exact bytes the leader writes for the batch at `base_offset`."""
    records, codec = batch_records(base_offset)
    return build_batch(
        records,
        base_offset=base_offset,
        partition_leader_epoch=leader_epoch_for(base_offset),
        compression=codec,
        producer_id=PRODUCER_ID,
        producer_epoch=PRODUCER_EPOCH,
        base_sequence=base_offset,
        now_ms=T0,
    )


def _die() -> None:
    sys.stdout.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _tear_next_write(tear_bytes: int) -> None:
    """Make the next `.log` write stop after `tear_bytes` bytes and kill the process."""

    def torn_write(self: LogSegment, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        keep = tear_bytes if tear_bytes >= 0 else len(view) + tear_bytes
        if keep > 0:
            os.write(self._fd, view[:keep])
        _die()

    LogSegment._write_all = torn_write  # type: ignore[method-assign]


def _after_roll(rolls: int, action: Callable[[], None]) -> None:
    """Run `action` right after the `rolls`-th segment roll of this process."""
    original = Log.roll
    count = [0]

    def roll_then_act(self: Log, *args: object, **kwargs: object) -> LogSegment:
        seg = original(self, *args, **kwargs)  # type: ignore[arg-type]
        count[0] += 1
        if count[0] == rolls:
            action()
        return seg

    Log.roll = roll_then_act  # type: ignore[method-assign]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("log_dir", type=Path)
    parser.add_argument("--max-batches", type=int, default=100_000)
    parser.add_argument("--tear-at", type=int, default=-1)
    parser.add_argument("--tear-bytes", type=int, default=0)
    parser.add_argument("--kill-after-roll", type=int, default=0)
    parser.add_argument("--tear-after-roll", type=int, default=0)
    args = parser.parse_args()

    if args.kill_after_roll:
        _after_roll(args.kill_after_roll, _die)
    if args.tear_after_roll:
        _after_roll(args.tear_after_roll, lambda: _tear_next_write(args.tear_bytes))
    log_dir = LogDirectory(args.log_dir)
    logs = log_dir.load(CONFIG, time_ms=T0)
    log = logs.get((TOPIC, PARTITION)) or log_dir.create_log(TOPIC, PARTITION, CONFIG, time_ms=T0)
    base = log.log_end_offset
    print(f"READY {base}", flush=True)
    for k in range(args.max_batches):
        if k == args.tear_at:
            _tear_next_write(args.tear_bytes)
        data = client_batch(base)
        segments = len(log.segments)
        info = log.append_as_leader(data, leader_epoch_for(base), time_ms=T0)
        if info.first_offset != base or info.duplicate:
            raise SystemExit(f"append at {base} returned {info}")
        if len(log.segments) != segments:
            log_dir.checkpoint()
        crc = int.from_bytes(data[17:21], "big")
        print(f"ACK {info.first_offset} {info.last_offset} {crc:08x}", flush=True)
        base = info.last_offset + 1
    # Ran out of batches before being killed: still leave like a crash, without closing.
    sys.stdout.flush()
    os._exit(3)


if __name__ == "__main__":
    main()
