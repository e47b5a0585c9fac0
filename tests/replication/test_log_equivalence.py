"""The simulator's fast log (`MemoryLog`) and production's `Log` are the same log: a
hypothesis state machine drives both with the same operations — leader appends (valid,
corrupt, producer retries, sequence gaps, fenced producer epochs, leader-epoch changes),
follower appends (in order and overlapping), truncations, HW and log-start-offset moves,
flushes and a power failure — and after every step they expose the same offsets, HW,
LEO, epoch cache, bytes and errors. With `DiskLog` (production's Log under the
simulator) the power failure is checked too: the recovered log is a batch-aligned prefix
holding at least every flushed batch."""

from __future__ import annotations

import random
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from seglog.sim.disk_log import SIM_LOG_CONFIG, DiskLog
from seglog.sim.memory_log import MemoryLog
from seglog.storage.errors import StorageError
from seglog.storage.log import Log
from seglog.storage.record_batch import NewRecord, build_batch

CONFIG = SIM_LOG_CONFIG


def outcome(call: object) -> tuple[str, object]:
    """A call's result or the name of the storage error it raised (its message names the
    log, which differs)."""
    try:
        return ("ok", call())  # type: ignore[operator]
    except StorageError as e:
        return ("error", type(e).__name__)
    except ValueError as e:
        return ("error", f"ValueError: {str(e).split(':')[0]}")


class SameLog(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="fidelity-equiv-"))
        self.now = 1_000
        self.rng = random.Random(0)
        self.disk = Log.open(self.dir / "t-0", CONFIG, clock=lambda: self.now, time_ms=self.now)
        self.memory = MemoryLog("t-0", CONFIG)
        self.sim_disk = DiskLog(self.dir / "s-0", lambda: self.now, self.rng, CONFIG)
        self.epoch = 0
        self.producer_epoch = 0
        self.next_seq = 0
        self.counter = 0

    def teardown(self) -> None:
        self.disk.abandon()
        self.sim_disk.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def both(self, op: str, *args: object, **kw: object) -> tuple[str, object]:
        a = outcome(lambda: getattr(self.disk, op)(*args, **kw))
        b = outcome(lambda: getattr(self.memory, op)(*args, **kw))
        c = outcome(lambda: getattr(self.sim_disk, op)(*args, **kw))
        assert a == b == c, f"{op}{args}: Log {a} / MemoryLog {b} / DiskLog {c}"
        return a

    def batch(self, n: int, *, pid: int = -1, seq: int = -1, producer_epoch: int = 0) -> bytes:
        self.counter += 1
        records = [NewRecord(b"v%d-%d" % (self.counter, i), b"k%d" % i) for i in range(n)]
        return build_batch(
            records,
            producer_id=pid,
            producer_epoch=producer_epoch if pid >= 0 else -1,
            base_sequence=seq,
            now_ms=self.now,
        )

    @rule(
        n=st.integers(1, 4),
        kind=st.sampled_from(["plain", "producer", "retry", "gap", "fenced", "corrupt"]),
        new_epoch=st.booleans(),
        advance=st.integers(0, 50),
    )
    def append_as_leader(self, n: int, kind: str, new_epoch: bool, advance: int) -> None:
        self.now += advance
        if new_epoch:
            self.epoch += 1
        if kind == "plain":
            data = self.batch(n)
        elif kind == "corrupt":
            data = bytearray(self.batch(n))
            data[-1] ^= 0xFF
            data = bytes(data)
        else:
            seq = {"producer": self.next_seq, "retry": max(0, self.next_seq - n)}.get(
                kind, self.next_seq + 7
            )
            epoch = self.producer_epoch - 1 if kind == "fenced" else self.producer_epoch
            data = self.batch(n, pid=42, seq=seq, producer_epoch=epoch)
        result = self.both("append_as_leader", data, self.epoch, time_ms=self.now)
        if result[0] == "ok" and kind == "producer":
            self.next_seq += n

    @rule(n=st.integers(1, 3), overlap=st.booleans(), epoch_step=st.integers(0, 1))
    def append_as_follower(self, n: int, overlap: bool, epoch_step: int) -> None:
        self.epoch += epoch_step
        leo = self.memory.log_end_offset
        base = max(0, leo - 1) if overlap and leo > 0 else leo
        data = build_batch(
            [NewRecord(b"f%d" % i, None) for i in range(n)],
            base_offset=base,
            partition_leader_epoch=self.epoch,
            now_ms=self.now,
        )
        self.both("append_as_follower", data, time_ms=self.now)
        self.next_seq = 0  # a follower's data is another producer history's
        self.producer_epoch += 1

    @rule(data=st.data())
    def truncate_to(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(0, self.memory.log_end_offset + 2))
        self.both("truncate_to", target, time_ms=self.now)
        self.producer_epoch += 1
        self.next_seq = 0

    @rule(data=st.data())
    def update_high_watermark(self, data: st.DataObject) -> None:
        self.both("update_high_watermark", data.draw(st.integers(-1, self.memory.log_end_offset)))

    @rule(data=st.data())
    def maybe_increment_log_start_offset(self, data: st.DataObject) -> None:
        hw = self.memory.high_watermark
        target = data.draw(st.integers(0, hw + 1))
        self.both("maybe_increment_log_start_offset", target)

    @rule(offset=st.integers(0, 40))
    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.both("truncate_fully_and_start_at", offset, time_ms=self.now)
        self.producer_epoch += 1
        self.next_seq = 0

    @rule()
    def flush(self) -> None:
        self.disk.flush()
        self.memory.flush()
        self.sim_disk.flush()

    @rule()
    def checkpoint_high_watermark(self) -> None:
        self.memory.checkpoint_high_watermark()
        self.sim_disk.checkpoint_high_watermark()

    @precondition(lambda self: self.memory.log_end_offset > 0)
    @rule()
    def power_failure(self) -> None:
        """The simulator's two logs after a crash: the memory log loses its whole
        unflushed tail, the disk log maybe less (write-back) — each keeps every flushed
        batch and is a batch-aligned prefix of what it held."""
        m = self.memory
        start = m.log_start_offset
        before = read_all(m, start, m.log_end_offset)[1]
        durable = read_all(m, start, m.recovery_point)[1]
        assert isinstance(before, bytes) and isinstance(durable, bytes)
        disk = self.sim_disk.crash()
        memory = m.crash()
        for log in (disk, memory):
            assert log.log_start_offset == min(start, log.log_end_offset)
            kept = read_all(log, start, log.log_end_offset)[1]
            assert isinstance(kept, bytes)
            assert before.startswith(kept) and kept.startswith(durable)
        assert read_all(memory, start, memory.log_end_offset)[1] == durable
        # Continue from the memory log's state in all three.
        self.disk.abandon()
        self.sim_disk.close()
        shutil.rmtree(self.dir / "t-0")
        shutil.rmtree(self.dir / "s-0")
        self.disk = Log.open(self.dir / "t-0", CONFIG, clock=lambda: self.now, time_ms=self.now)
        self.sim_disk = DiskLog(self.dir / "s-0", lambda: self.now, self.rng, CONFIG)
        self.memory = MemoryLog("t-0", CONFIG)
        kept = bytes(memory.prefix(memory.log_end_offset))
        headers = memory.batch_headers
        for log in (self.disk, self.sim_disk, self.memory):
            if headers:
                if headers[0].base_offset:
                    log.truncate_fully_and_start_at(headers[0].base_offset, time_ms=self.now)
                log.append_as_follower(kept, time_ms=self.now)
            elif memory.log_end_offset:
                log.truncate_fully_and_start_at(memory.log_end_offset, time_ms=self.now)
            log.update_high_watermark(memory.high_watermark)
            log.maybe_increment_log_start_offset(memory.log_start_offset)
        self.producer_epoch += 1
        self.next_seq = 0

    @invariant()
    def same_state(self) -> None:
        m, d, s = self.memory, self.disk, self.sim_disk
        assert d.log_end_offset == m.log_end_offset == s.log_end_offset
        assert d.log_start_offset == m.log_start_offset == s.log_start_offset
        assert d.high_watermark == m.high_watermark == s.high_watermark
        assert d.epoch_cache.entries() == m.epoch_cache.entries() == s.epoch_cache.entries()
        end = m.log_end_offset
        assert read_all(d, m.log_start_offset, end) == read_all(m, m.log_start_offset, end)
        assert read_all(s, m.log_start_offset, end) == read_all(m, m.log_start_offset, end)


def read_all(log: Log | MemoryLog | DiskLog, start: int, end: int) -> tuple[str, object]:
    """Every byte from `start` up to `end` as a fetcher reads it, or the read's error."""

    def run() -> bytes:
        out = bytearray()
        position = start
        for _ in range(1000):  # bounded: each read returns a batch or ends
            if position >= end:
                break
            chunk = log.read(position, 1 << 20, upper_bound=end)
            if chunk.next_offset <= position:
                break
            out += chunk.records
            position = chunk.next_offset
        return bytes(out)

    return outcome(run)


SameLog.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestSameLog = SameLog.TestCase
