"""Random operation sequences on a Log against a small in-memory model
(docs/architecture.md (storage)).

Small segment.bytes / index.interval.bytes / segment.index.bytes make rolls and index
entries frequent; every step is followed by the structural invariants of
`check_log_invariants` and a full read compared with the model.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)
from log_fixtures import T0, check_log_invariants, headers_of, read_everything, records_of

from seglog.storage.errors import OffsetOutOfRangeError
from seglog.storage.log import Log
from seglog.storage.log_config import LogConfig
from seglog.storage.record_batch import NewRecord, build_batch

PID = 4242
MINUTE_MS = 60_000

CONFIG = LogConfig.defaults().with_overrides(
    {
        "segment.bytes": 700,
        "index.interval.bytes": 100,
        "segment.index.bytes": 48,  # 6 offset entries, 4 time entries (3 usable)
        "segment.ms": 10 * MINUTE_MS,
        "retention.ms": -1,
        "retention.bytes": 1500,
        "file.delete.delay.ms": MINUTE_MS,
    }
)


@dataclass
class ModelBatch:
    base: int
    last: int
    epoch: int
    idempotent: bool
    first_seq: int
    last_seq: int
    records: list[tuple[int, bytes, int]]  # (offset, value, timestamp)


class EpochModel:
    """The leader-epoch cache rules of 6.1/6.2, written from the doc."""

    def __init__(self) -> None:
        self.entries: list[tuple[int, int]] = []

    def assign(self, epoch: int, start: int) -> None:
        if self.entries and self.entries[-1][0] == epoch and self.entries[-1][1] <= start:
            return
        while self.entries and (self.entries[-1][0] >= epoch or self.entries[-1][1] >= start):
            self.entries.pop()
        self.entries.append((epoch, start))

    def truncate_from_end(self, end: int) -> None:
        self.entries = [e for e in self.entries if e[1] < end]

    def truncate_from_start(self, start: int) -> None:
        covered = [e for e in self.entries if e[1] <= start]
        if covered:
            self.entries = [(covered[-1][0], start)] + [e for e in self.entries if e[1] > start]


def expected_retention(
    segments: list[tuple[int, int]], leo: int, hw: int, start: int, retention_bytes: int
) -> tuple[list[int], int]:
    """The doc's retention pass (4.3), start-offset breach then size, applied to the
    (base, size) list: returns (surviving bases, new log start offset)."""
    segs = list(segments)

    def delete_prefix(predicate) -> None:
        nonlocal segs, start
        victims = 0
        for i, (base, size) in enumerate(segs):
            nxt = segs[i + 1][0] if i + 1 < len(segs) else None
            upper = nxt if nxt is not None else leo
            if hw < upper or (nxt is None and size == 0):
                break
            if not predicate(base, size, nxt):
                break
            victims += 1
        if not victims:
            return
        if victims == len(segs):
            segs.append((leo, 0))  # rolled first, so an active segment remains
        segs = segs[victims:]
        start = max(start, segs[0][0])

    delete_prefix(lambda base, size, nxt: nxt is not None and nxt <= start)
    excess = sum(size for _, size in segs) - retention_bytes
    if retention_bytes >= 0 and excess >= 0:
        budget = [excess]

        def fits(base: int, size: int, nxt: int | None) -> bool:
            if budget[0] - size >= 0:
                budget[0] -= size
                return True
            return False

        delete_prefix(fits)
    return [b for b, _ in segs], start


class LogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="seglog-props-"))
        self.generation = 0
        self.now = T0
        self.epoch = 0
        self.counter = 0
        self.log = Log.open(self._dir(), CONFIG, time_ms=self.now)
        self.history: list[ModelBatch] = []  # every batch since the last full truncation
        self.epochs = EpochModel()
        self.leo = 0
        self.start = 0
        self.producer_uncertain = False
        self.hw = 0

    # ---- helpers -------------------------------------------------------------------------

    def _dir(self) -> Path:
        return self.root / f"gen{self.generation}" / "topic-0"

    def _live_batches(self) -> list[ModelBatch]:
        return [b for b in self.history if b.last >= self.start and b.base < self.leo]

    def _expected_records(self) -> list[tuple[int, bytes, int]]:
        return [r for b in self._live_batches() for r in b.records if r[0] >= self.start]

    def _boundaries(self) -> list[int]:
        return sorted({b.base for b in self._live_batches() if b.base >= self.start} | {self.leo})

    def _next_seq(self) -> int:
        if self.producer_uncertain:
            # A truncation rebuilt the producer state from a snapshot and the batches
            # from the log start on, and the producer's last batch is below the log
            # start: whether a snapshot at the log start still holds it depends on
            # where snapshots were taken. The producer continues as the log says; a
            # producer it has no state for starts again at sequence 0, as a client
            # does after UNKNOWN_PRODUCER_ID (storage/producer_state.py).
            entry = self.log.producer_state.last_entry(PID)
            return entry.last_seq + 1 if entry is not None and not entry.is_empty else 0
        mine = [b for b in self.history if b.idempotent and b.last < self.leo]
        return mine[-1].last_seq + 1 if mine else 0

    def _append(self, sizes: list[int], deltas: list[int], idempotent: bool) -> None:
        records = []
        for size, delta in zip(sizes, deltas, strict=True):
            self.counter += 1
            value = f"{self.counter}:".encode() + b"x" * size
            records.append((value, self.now + delta))
        first_seq = self._next_seq() if idempotent else -1
        batch = build_batch(
            [NewRecord(v, timestamp=ts) for v, ts in records],
            producer_id=PID if idempotent else -1,
            producer_epoch=0 if idempotent else -1,
            base_sequence=first_seq,
        )
        leo_before = self.log.log_end_offset
        info = self.log.append_as_leader(batch, self.epoch, time_ms=self.now)
        assert not info.duplicate
        assert info.first_offset == leo_before == self.leo, "offsets only grow on append"
        assert info.last_offset == leo_before + len(records) - 1
        assert self.log.log_end_offset == info.last_offset + 1
        self.history.append(
            ModelBatch(
                base=info.first_offset,
                last=info.last_offset,
                epoch=self.epoch,
                idempotent=idempotent,
                first_seq=first_seq,
                last_seq=first_seq + len(records) - 1 if idempotent else -1,
                records=[(info.first_offset + i, v, ts) for i, (v, ts) in enumerate(records)],
            )
        )
        self.leo = info.last_offset + 1
        self.epochs.assign(self.epoch, info.first_offset)
        if idempotent:
            self.producer_uncertain = False

    # ---- rules ---------------------------------------------------------------------------

    @rule(
        batches=st.lists(
            st.tuples(
                st.lists(st.integers(0, 60), min_size=1, max_size=6),
                st.integers(-3000, 3000),
                st.booleans(),
            ),
            min_size=1,
            max_size=8,
        ),
        data=st.data(),
    )
    def append(self, batches: list[tuple[list[int], int, bool]], data: st.DataObject) -> None:
        segments_before = len(self.log.segments)
        for sizes, delta, idempotent in batches:
            spread = data.draw(st.lists(st.integers(-500, 500), min_size=len(sizes)))
            deltas = [delta + d for d in spread[: len(sizes)]] + [delta] * len(sizes)
            self._append(sizes, deltas[: len(sizes)], idempotent)
        event(f"rolled {min(len(self.log.segments) - segments_before, 3)} segments in an append")

    @precondition(
        lambda self: (
            any(b.idempotent and b.last < self.leo for b in self.history)
            and [b for b in self.history if b.idempotent and b.last < self.leo][-1].base
            >= self.start
        )
    )
    @rule()
    def retry_last_idempotent_batch(self) -> None:
        last = [b for b in self.history if b.idempotent and b.last < self.leo][-1]
        retry = build_batch(
            [NewRecord(v, timestamp=ts) for _o, v, ts in last.records],
            producer_id=PID,
            producer_epoch=0,
            base_sequence=last.first_seq,
        )
        info = self.log.append_as_leader(retry, self.epoch, time_ms=self.now)
        event("retried an idempotent batch")
        assert info.duplicate
        assert (info.first_offset, info.last_offset) == (last.base, last.last)
        assert self.log.log_end_offset == self.leo

    @rule()
    def bump_leader_epoch(self) -> None:
        self.epoch += 1

    @rule(minutes=st.integers(0, 6))
    def advance_clock(self, minutes: int) -> None:
        self.now += minutes * MINUTE_MS

    @rule(data=st.data())
    def raise_high_watermark(self, data: st.DataObject) -> None:
        choices = [b for b in self._boundaries() if b >= self.hw]
        target = data.draw(st.sampled_from(choices))
        assert self.log.update_high_watermark(target) == target
        self.hw = target

    @rule(data=st.data(), max_bytes=st.integers(1, 900), to_hw=st.booleans())
    def read(self, data: st.DataObject, max_bytes: int, to_hw: bool) -> None:
        offset = data.draw(st.integers(self.start, self.leo))
        bound = self.hw if to_hw else self.leo
        info = self.log.read(offset, max_bytes, upper_bound=bound if to_hw else None)
        if offset >= bound:
            assert info.records == b"" and info.next_offset == offset
            return
        hs = [h for _, h in headers_of(info.records)]
        assert hs, "at least one batch"
        assert hs[0].base_offset <= offset <= hs[0].last_offset
        assert len(info.records) <= max(max_bytes, hs[0].size)
        assert hs[-1].next_offset == info.next_offset <= bound
        got = [(r.offset, r.value, r.timestamp) for r in records_of(info.records)]
        assert [r for r in got if r[0] >= offset] == [
            r for r in self._expected_records() if offset <= r[0] < info.next_offset
        ]
        if self.start > 0:
            with pytest.raises(OffsetOutOfRangeError):
                self.log.read(self.start - 1, max_bytes)
        with pytest.raises(OffsetOutOfRangeError):
            self.log.read(self.leo + 1, max_bytes)

    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        target = data.draw(st.sampled_from(self._boundaries()))
        changed = self.log.truncate_to(target, time_ms=self.now)
        event(f"truncation removed data: {changed}")
        assert changed == (target < self.leo)
        self.history = [b for b in self.history if b.base < target]
        mine = [b for b in self.history if b.idempotent]
        if changed and mine and mine[-1].base < self.start:
            self.producer_uncertain = True
        self.epochs.truncate_from_end(min(target, self.leo))
        self.leo = target
        self.hw = min(self.hw, target)

    @precondition(lambda self: self.log.segments[0].base_offset > 0)
    @rule(data=st.data())
    def truncate_below_first_segment(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(0, self.log.segments[0].base_offset - 1))
        assert self.log.truncate_to(target, time_ms=self.now)
        self.history = []
        self.epochs = EpochModel()
        self.producer_uncertain = False  # a full truncation forgets every producer
        self.leo = self.start = self.hw = target
        assert [s.base_offset for s in self.log.segments] == [target]

    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(self.start, self.hw))
        assert self.log.maybe_increment_log_start_offset(target) == (target > self.start)
        if target > self.start:
            self.epochs.truncate_from_start(target)
        self.start = target

    @rule()
    def retention_pass(self) -> None:
        segments = [(s.base_offset, s.size) for s in self.log.segments]
        bases, start = expected_retention(
            segments, self.leo, self.hw, self.start, CONFIG.retention_bytes
        )
        deleted = self.log.delete_old_segments(time_ms=self.now)
        event(f"retention deleted {min(deleted, 2)} segments")
        assert [s.base_offset for s in self.log.segments] == bases
        assert self.log.log_start_offset == start
        if start > self.start:
            self.epochs.truncate_from_start(start)
        self.start = start
        self.log.remove_deleted_files(time_ms=self.now + CONFIG.file_delete_delay_ms)
        assert not list(self._dir().glob("*.deleted"))

    @rule()
    def roll(self) -> None:
        bases = [s.base_offset for s in self.log.segments]
        active_was_empty = self.log.active_segment.size == 0
        seg = self.log.roll(time_ms=self.now)
        assert seg.base_offset == self.leo and seg.size == 0
        expected = bases if active_was_empty else bases + [self.leo]
        assert [s.base_offset for s in self.log.segments] == expected

    @rule()
    def close_and_reopen(self) -> None:
        rp = self.log.recovery_point
        self.log.close()
        assert rp <= self.log.recovery_point == self.leo
        self.log = Log.open(
            self._dir(),
            CONFIG,
            recovery_point=self.leo,
            log_start_offset=self.start,
            high_watermark=self.hw,
            had_clean_shutdown=True,
            time_ms=self.now,
        )
        self.epochs.truncate_from_end(self.leo)  # 3.7 step 4 / 6.1: re-applied at load
        self.epochs.truncate_from_start(self.start)
        self._producer_reloaded()

    def _producer_reloaded(self) -> None:
        """A reopen rebuilds the producer state from a snapshot and the log from its start:
        as after a truncation, a producer whose last batch begins below the log start may
        be gone (a close found hypothesis's case: delete_records past it, then a reopen)."""
        mine = [b for b in self.history if b.idempotent and b.last < self.leo]
        if mine and mine[-1].base < self.start:
            self.producer_uncertain = True

    @rule(from_zero=st.booleans())
    def crash_and_reopen(self, from_zero: bool) -> None:
        """Copy the files as they are (no close: preallocated index tails and all)."""
        old_dir, rp = self._dir(), self.log.recovery_point
        bases = [s.base_offset for s in self.log.segments]
        recover_from = 0 if from_zero else max(b for b in bases if b <= rp or b == bases[0])
        self.generation += 1
        shutil.copytree(old_dir, self._dir())
        self.log = Log.open(
            self._dir(),
            CONFIG,
            recovery_point=0 if from_zero else rp,
            log_start_offset=self.start,
            high_watermark=self.hw,
            had_clean_shutdown=False,
            time_ms=self.now,
        )
        assert self.log.recovery_point == (0 if from_zero else rp)
        # 6.2: recovery assigns the epoch of each scanned batch above the latest cached one
        for b in self.history:
            if b.base >= max(recover_from, bases[0]) and b.base < self.leo:
                latest = self.epochs.entries[-1][0] if self.epochs.entries else None
                if latest is None or b.epoch > latest:
                    self.epochs.assign(b.epoch, b.base)
        self.epochs.truncate_from_end(self.leo)
        self.epochs.truncate_from_start(self.start)
        self._producer_reloaded()

    # ---- invariants ----------------------------------------------------------------------

    @invariant()
    def log_matches_model(self) -> None:
        log = self.log
        check_log_invariants(log, single_batch_chunks=True)
        assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (
            self.start,
            self.hw,
            self.leo,
        )
        assert log.log_start_offset <= log.high_watermark <= log.log_end_offset
        bases = [s.base_offset for s in log.segments]
        assert bases == sorted(set(bases))
        assert all(s.size <= CONFIG.segment_bytes for s in log.segments)
        got = [
            (r.offset, r.value, r.timestamp)
            for r in records_of(read_everything(log))
            if r.offset >= log.log_start_offset
        ]
        assert got == self._expected_records()

    @invariant()
    def epoch_cache_matches_model(self) -> None:
        assert [tuple(e) for e in self.log.epoch_cache.entries()] == self.epochs.entries
        # every batch at or above the log start carries the epoch the cache gives its offset
        for b in self._live_batches():
            if self.epochs.entries and max(b.base, self.start) >= self.epochs.entries[0][1]:
                assert self.log.epoch_cache.epoch_for_offset(max(b.base, self.start)) == b.epoch

    def teardown(self) -> None:
        try:
            self.log.close()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


LogMachine.TestCase.settings = settings(
    max_examples=60,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestLogProperties = LogMachine.TestCase
