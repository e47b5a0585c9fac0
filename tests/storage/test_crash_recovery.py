"""Crash recovery: recovery keeps every complete batch before the damage and nothing after it.

1. A child process (crash_writer.py) appends to a LogDirectory and acknowledges each append
   on stdout; it is SIGKILLed at varying points (by the parent after N acks, right after a
   roll, or halfway through writing a batch). Reopening the directory without the
   clean-shutdown marker must keep every acknowledged batch byte for byte.
2. A `.log` cut at any byte inside a batch loses exactly that batch and what follows.
3. A flipped bit inside a batch loses exactly that batch and what follows.
4. Index files left zero-filled (preallocated) by a crash, or corrupted behind a clean
   shutdown marker, are rebuilt and every lookup stays correct.
5. Leftover `.cleaned`, `.swap`, `.deleted` and orphan index files are dealt with on open.
6. A clean shutdown is reopened without recovery; its checkpoints have Kafka's text format.

Every batch on disk is compared with the exact bytes the leader must have written, which
crash_writer.expected_batch regenerates from the batch's base offset.
"""

from __future__ import annotations

import itertools
import os
import random
import selectors
import shutil
import signal
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import crash_writer as writer  # beside this file (its child process's script)
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seglog.storage.clean_shutdown import CLEAN_SHUTDOWN_FILE
from seglog.storage.log import Log
from seglog.storage.log_config import LogConfig
from seglog.storage.log_dir import LogDirectory
from seglog.storage.record_batch import (
    BatchHeader,
    NewRecord,
    build_batch,
    check_batch,
    decode_records,
    iter_batches,
)
from seglog.storage.segment import LogSegment

WRITER = Path(__file__).with_name("crash_writer.py")

CONFIG = writer.CONFIG
T0 = writer.T0
TOPIC = writer.TOPIC
PARTITION = writer.PARTITION
TP = (TOPIC, PARTITION)
PART_DIR = f"{TOPIC}-{PARTITION}"
WAIT_S = 30.0  # safety bound on any wait for the child; never an assertion

# ------------------------------------------------------------------------------------
# Helpers
# ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ack:
    first: int
    last: int
    crc: int


@dataclass(frozen=True)
class WriterRun:
    ready_at: int  # log end offset the writer resumed from
    acks: list[Ack]
    returncode: int


def run_writer(log_dir: Path, *args: str, kill_after_acks: int | None = None) -> WriterRun:
    """Run crash_writer.py on `log_dir`; SIGKILL it once it has acknowledged
    `kill_after_acks` appends. Returns every acknowledgement it printed before dying."""
    stderr_path = log_dir.parent / f"writer-{time.monotonic_ns()}.stderr"
    with open(stderr_path, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, str(WRITER), str(log_dir), *args],
            stdout=subprocess.PIPE,
            stderr=err,
        )
    assert proc.stdout is not None
    lines: list[str] = []
    try:
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + WAIT_S
        pending = b""
        acked = 0
        killed = False
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    proc.kill()
                    pytest.fail(f"crash writer did not finish within {WAIT_S} s")
                if not sel.select(timeout=remaining):
                    continue
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break  # EOF: the writer is gone
                *complete, pending = (pending + chunk).split(b"\n")
                for raw in complete:
                    line = raw.decode()
                    lines.append(line)
                    acked += line.startswith("ACK ")
                if kill_after_acks is not None and not killed and acked >= kill_after_acks:
                    proc.send_signal(signal.SIGKILL)  # lands wherever the writer is
                    killed = True
        returncode = proc.wait(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=WAIT_S)
        proc.stdout.close()
    if returncode not in (-signal.SIGKILL, 3):
        pytest.fail(f"crash writer failed (rc {returncode}):\n{stderr_path.read_text()}")
    assert lines and lines[0].startswith("READY "), lines[:3]
    acks = []
    for line in lines[1:]:
        tag, first, last, crc = line.split()
        assert tag == "ACK", line
        acks.append(Ack(int(first), int(last), int(crc, 16)))
    return WriterRun(int(lines[0].split()[1]), acks, returncode)


@dataclass(frozen=True)
class DiskBatch:
    segment: int  # base offset of the segment file holding it
    position: int
    header: BatchHeader
    data: bytes


def disk_batches(part_dir: Path) -> list[DiskBatch]:
    """Every batch of every `.log` file, read with plain file reads. Fails unless each
    file is a whole number of batches that all pass their CRC."""
    found = []
    for path in sorted(part_dir.glob("*.log")):
        base = int(path.name.split(".")[0])
        data = path.read_bytes()
        pos = 0
        while pos < len(data):
            try:
                header = check_batch(data, pos)
            except Exception as e:  # noqa: BLE001 - any failure is the finding
                pytest.fail(f"{path.name}: no valid batch at position {pos} of {len(data)}: {e}")
            found.append(DiskBatch(base, pos, header, data[pos : pos + header.size]))
            pos += header.size
    return found


def next_offset_of(batches: list[bytes], empty: int = 0) -> int:
    return BatchHeader.parse(batches[-1]).next_offset if batches else empty


def read_all(log: Log) -> bytes:
    """Everything from the log start offset to the LEO through Log.read."""
    out = bytearray()
    offset = log.log_start_offset
    for _ in range(100_000):
        if offset >= log.log_end_offset:
            break
        got = log.read(offset, 1 << 20)
        assert got.records, f"read at {offset} returned nothing below LEO {log.log_end_offset}"
        assert got.next_offset > offset
        out += got.records
        offset = got.next_offset
    return bytes(out)


def assert_log_holds(log: Log, part_dir: Path, expected: list[bytes]) -> None:
    """The files, the LEO and Log.read all hold exactly `expected`, in order."""
    on_disk = disk_batches(part_dir)
    got = [b.data for b in on_disk]
    if got != expected:
        first_diff = next(
            (i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b),
            min(len(got), len(expected)),
        )
        pytest.fail(
            f"disk holds {len(got)} batches, expected {len(expected)}; "
            f"first difference at batch #{first_diff}"
        )
    assert log.log_end_offset == next_offset_of(expected, log.segments[0].base_offset)
    files = sorted(int(p.name.split(".")[0]) for p in part_dir.glob("*.log"))
    assert [s.base_offset for s in log.segments] == files
    for b in on_disk:  # a segment starts at its own base offset (its first batch)
        if b.position == 0:
            assert b.header.base_offset == b.segment
    assert read_all(log) == b"".join(expected)


def assert_lookups(log: Log, expected: list[bytes]) -> None:
    """translate_offset / read / offset_for_timestamp at every offset of `expected`."""
    for data in expected:
        h = BatchHeader.parse(data)
        for offset in range(h.base_offset, h.next_offset):
            found = log.translate_offset(offset)
            assert found is not None, offset
            seg, pos, header = found
            assert (header.base_offset, header.size) == (h.base_offset, h.size), offset
            assert seg.pread(pos, header.size) == data
            got = log.read(offset, 1)  # at least one whole batch: exactly this one
            assert (got.records, got.next_offset) == (data, h.next_offset), offset
        for record in decode_records(data):
            # timestamps grow with offsets (T0 + offset), so the first record at or
            # after a record's timestamp is that record
            found_ts = log.offset_for_timestamp(record.timestamp)
            assert found_ts is not None and found_ts.offset == record.offset, record
    assert log.translate_offset(log.log_end_offset) is None
    assert log.offset_for_timestamp(T0 + log.log_end_offset) is None


def assert_indexes_well_formed(log: Log) -> None:
    """Each offset index entry names a batch boundary and a last offset at or after it;
    each time index entry is the max timestamp up to its offset."""
    for seg in log.segments:
        data = seg.pread(0, seg.size)
        batches = list(iter_batches(data))
        starts = {pos: h for pos, h in batches}
        previous = -1
        for i in range(seg.offset_index.entries):
            offset, position = seg.offset_index.entry(i)
            assert offset > previous, (seg, i)
            previous = offset
            assert position in starts, (seg, i, position)
            assert starts[position].base_offset <= offset
            assert offset in {h.last_offset for p, h in batches if p >= position}
        previous_ts = -1
        for i in range(seg.time_index.entries):
            ts, offset = seg.time_index.entry(i)
            assert ts > previous_ts, (seg, i)
            previous_ts = ts
            upto = [h.max_timestamp for _p, h in batches if h.last_offset <= offset]
            assert upto and max(upto) == ts, (seg, i, ts, offset)


def expected_batches_until(end_offset: int) -> list[bytes]:
    out = []
    offset = 0
    while offset < end_offset:
        data = writer.expected_batch(offset)
        out.append(data)
        offset = BatchHeader.parse(data).next_offset
    assert offset == end_offset, "end_offset is not a batch boundary of the generator"
    return out


def check_recovered_writer_log(
    log_dir: Path, acks: list[Ack], *, exact_leo: int | None = None
) -> None:
    """Reopen a crashed writer's log dir (no marker) and check everything recovery promises,
    then that the log accepts the producer's next batch and a retry of its last one."""
    assert not (log_dir / CLEAN_SHUTDOWN_FILE).exists()
    ld = LogDirectory(log_dir)
    log = ld.load(CONFIG, time_ms=T0)[TP]
    assert not ld.had_clean_shutdown
    part_dir = log_dir / PART_DIR

    # Every batch on disk is whole, valid and exactly what the leader wrote for its offset;
    # batches follow each other without a gap, so nothing after a torn one survives.
    on_disk = disk_batches(part_dir)
    offset = 0
    for b in on_disk:
        assert b.header.base_offset == offset, (b.segment, b.position)
        assert b.data == writer.expected_batch(offset), (b.segment, b.position)
        offset = b.header.next_offset
    leo = log.log_end_offset
    assert leo == offset
    if exact_leo is not None:
        assert leo == exact_leo

    # Every acknowledged append is there, identical.
    by_base = {b.header.base_offset: b for b in on_disk}
    for ack in acks:
        b = by_base.get(ack.first)
        assert b is not None, f"acknowledged batch at offset {ack.first} was lost"
        assert (b.header.last_offset, b.header.crc) == (ack.last, ack.crc), ack
    if acks:
        assert leo >= acks[-1].last + 1

    expected = expected_batches_until(leo)
    assert_log_holds(log, part_dir, expected)
    assert_indexes_well_formed(log)
    assert log.recovery_point <= leo

    # Leader epochs and producer state were rebuilt from what survived.
    epochs: dict[int, int] = {}
    for data in expected:
        h = BatchHeader.parse(data)
        epochs.setdefault(h.partition_leader_epoch, h.base_offset)
    assert [tuple(e) for e in log.epoch_cache.entries()] == sorted(epochs.items())
    if leo:
        entry = log.producer_state.last_entry(writer.PRODUCER_ID)
        assert entry is not None and entry.last_seq == leo - 1
        # a retry of the last batch is answered with its original offsets ...
        last = BatchHeader.parse(expected[-1])
        retry = log.append_as_leader(
            writer.client_batch(last.base_offset),
            writer.leader_epoch_for(last.base_offset),
            time_ms=T0,
        )
        assert retry.duplicate and (retry.first_offset, retry.last_offset) == (
            last.base_offset,
            last.last_offset,
        )
        assert log.log_end_offset == leo
    # ... and the producer's next batch continues the log.
    info = log.append_as_leader(writer.client_batch(leo), writer.leader_epoch_for(leo), time_ms=T0)
    assert info.first_offset == leo and not info.duplicate
    expected.append(writer.expected_batch(leo))
    ld.close()

    # A clean reopen after that sees the same data without any recovery.
    ld = LogDirectory(log_dir)
    log = ld.load(CONFIG, time_ms=T0)[TP]
    assert ld.had_clean_shutdown
    assert_log_holds(log, part_dir, expected)
    ld.close()


class RecoverCalls:
    """Counts LogSegment.recover calls (by segment base offset)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.bases: list[int] = []
        original = LogSegment.recover

        def counting(segment: LogSegment, *args: object, **kwargs: object) -> int:
            self.bases.append(segment.base_offset)
            return original(segment, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(LogSegment, "recover", counting)


def tiny_batch(base_offset: int, *, leader: bool) -> bytes:
    """A one-record batch (~100 bytes) continuing the writer's producer sequence."""
    kwargs = {"base_offset": base_offset, "partition_leader_epoch": 0} if leader else {}
    return build_batch(
        [NewRecord(b"tail value", b"tail", T0 + base_offset)],
        producer_id=writer.PRODUCER_ID,
        producer_epoch=writer.PRODUCER_EPOCH,
        base_sequence=base_offset,
        now_ms=T0,
        **kwargs,
    )


def build_closed_log(log_dir: Path, n_batches: int, *, tiny_tail: bool = False) -> list[bytes]:
    """A cleanly closed LogDirectory holding the writer's first `n_batches` batches (plus
    a tiny final one); returns the exact bytes of every batch, in order."""
    ld = LogDirectory(log_dir)
    ld.load(CONFIG, time_ms=T0)
    log = ld.create_log(TOPIC, PARTITION, CONFIG, time_ms=T0)
    expected = []
    for _ in range(n_batches):
        base = log.log_end_offset
        log.append_as_leader(writer.client_batch(base), writer.leader_epoch_for(base), time_ms=T0)
        expected.append(writer.expected_batch(base))
    if tiny_tail:
        base = log.log_end_offset
        assert writer.leader_epoch_for(base) == 0
        log.append_as_leader(tiny_batch(base, leader=False), 0, time_ms=T0)
        expected.append(tiny_batch(base, leader=True))
    ld.close()
    assert [b.data for b in disk_batches(log_dir / PART_DIR)] == expected
    return expected


def assert_producer_continues(log: Log, kept: list[bytes]) -> None:
    """Producer state matches the kept batches: a retry of the last one is a duplicate
    and the producer's next batch (sequence == offset) lands at the LEO. A state loaded
    from a snapshot beyond the LEO would reject or swallow it."""
    leo = log.log_end_offset
    if kept:
        last = BatchHeader.parse(kept[-1])
        retry = log.append_as_leader(
            writer.client_batch(last.base_offset), writer.leader_epoch_for(last.base_offset)
        )
        assert retry.duplicate and retry.first_offset == last.base_offset
    info = log.append_as_leader(writer.client_batch(leo), writer.leader_epoch_for(leo))
    assert info.first_offset == leo and not info.duplicate


def reopen_unclean(part_dir: Path, recovery_point: int) -> Log:
    return Log.open(part_dir, CONFIG, recovery_point=recovery_point, time_ms=T0)


def segment_layout(expected: list[bytes], part_dir: Path) -> list[DiskBatch]:
    on_disk = disk_batches(part_dir)
    assert [b.data for b in on_disk] == expected
    return on_disk


_copies = itertools.count()


def fresh_copy(pristine: Path, root: Path) -> Path:
    """A copy of a pristine partition directory, under a new name each time."""
    dest = root / f"copy{next(_copies)}" / PART_DIR
    shutil.copytree(pristine, dest)
    return dest


# ------------------------------------------------------------------------------------
# 1. A real writer process killed mid-append
# ------------------------------------------------------------------------------------


@pytest.mark.parametrize("kill_after_acks", [1, 97, 260, 455])
def test_sigkill_keeps_every_acknowledged_batch(tmp_path: Path, kill_after_acks: int) -> None:
    log_dir = tmp_path / "logs"
    run = run_writer(log_dir, kill_after_acks=kill_after_acks)
    assert run.returncode == -signal.SIGKILL
    assert run.ready_at == 0 and len(run.acks) >= kill_after_acks
    assert len(list((log_dir / PART_DIR).glob("*.log"))) >= 2 or kill_after_acks < 20
    check_recovered_writer_log(log_dir, run.acks)


def test_two_crashes_in_a_row(tmp_path: Path) -> None:
    """The second writer recovers the first one's crash, appends, and crashes too."""
    log_dir = tmp_path / "logs"
    first = run_writer(log_dir, kill_after_acks=150)
    second = run_writer(log_dir, kill_after_acks=170)
    assert first.returncode == second.returncode == -signal.SIGKILL
    assert second.ready_at >= first.acks[-1].last + 1
    assert second.acks[0].first == second.ready_at
    check_recovered_writer_log(log_dir, first.acks + second.acks)


@pytest.mark.parametrize(
    "tear_bytes",
    [pytest.param(5, id="inside-the-length"), 40, 61, pytest.param(-1, id="all-but-one-byte")],
)
def test_writer_killed_halfway_through_a_batch(tmp_path: Path, tear_bytes: int) -> None:
    """The 120th append writes part of its batch, then the process dies: that batch goes,
    everything acknowledged before it stays."""
    log_dir = tmp_path / "logs"
    run = run_writer(log_dir, "--tear-at", "120", "--tear-bytes", str(tear_bytes))
    assert run.returncode == -signal.SIGKILL and len(run.acks) == 120
    torn_base = run.acks[-1].last + 1
    # the torn bytes really are on disk, after every acknowledged batch
    torn_size = len(writer.client_batch(torn_base))
    kept = tear_bytes if tear_bytes >= 0 else torn_size + tear_bytes
    on_disk = sum(p.stat().st_size for p in (log_dir / PART_DIR).glob("*.log"))
    assert on_disk == sum(map(len, expected_batches_until(torn_base))) + kept
    with pytest.raises(pytest.fail.Exception, match="no valid batch"):
        disk_batches(log_dir / PART_DIR)
    check_recovered_writer_log(log_dir, run.acks, exact_leo=torn_base)


@pytest.mark.parametrize("tear_bytes", [30, -1])
def test_writer_killed_writing_the_first_batch_of_a_new_segment(
    tmp_path: Path, tear_bytes: int
) -> None:
    log_dir = tmp_path / "logs"
    run = run_writer(log_dir, "--tear-after-roll", "3", "--tear-bytes", str(tear_bytes))
    assert run.returncode == -signal.SIGKILL
    torn_base = run.acks[-1].last + 1
    newest = max((log_dir / PART_DIR).glob("*.log"))
    assert int(newest.name.split(".")[0]) == torn_base
    expected_size = tear_bytes if tear_bytes > 0 else len(writer.client_batch(torn_base)) - 1
    assert newest.stat().st_size == expected_size
    check_recovered_writer_log(log_dir, run.acks, exact_leo=torn_base)


def test_writer_killed_right_after_a_roll(tmp_path: Path) -> None:
    """Dead between creating a new segment and writing to it: an empty active segment
    (with preallocated indexes) at the LEO, which recovery must accept as it is."""
    log_dir = tmp_path / "logs"
    run = run_writer(log_dir, "--kill-after-roll", "4")
    assert run.returncode == -signal.SIGKILL
    leo = run.acks[-1].last + 1
    newest = max((log_dir / PART_DIR).glob("*.log"))
    assert int(newest.name.split(".")[0]) == leo and newest.stat().st_size == 0
    check_recovered_writer_log(log_dir, run.acks, exact_leo=leo)


# ------------------------------------------------------------------------------------
# 2. Truncated `.log`
# ------------------------------------------------------------------------------------


class Pristine(tuple[Path, list[bytes]]):
    """(partition dir, its batches), with a repr short enough for hypothesis reports."""

    def __repr__(self) -> str:
        return f"Pristine({self[0]}, {len(self[1])} batches)"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[bytes]]:
    """A closed partition of 30 batches over several segments, ending in a ~100-byte batch."""
    log_dir = tmp_path_factory.mktemp("pristine")
    expected = build_closed_log(log_dir, 30, tiny_tail=True)
    part_dir = log_dir / PART_DIR
    assert len(list(part_dir.glob("*.log"))) >= 4
    return Pristine((part_dir, expected))


def test_log_cut_at_every_byte_of_the_last_batch(
    pristine: tuple[Path, list[bytes]], tmp_path: Path
) -> None:
    part, expected = pristine
    layout = segment_layout(expected, part)
    last = layout[-1]
    last_file = f"{last.segment:020d}.log"
    assert len(last.data) < 200
    for cut in range(last.position, last.position + len(last.data)):
        part_dir = fresh_copy(part, tmp_path)
        os.truncate(part_dir / last_file, cut)
        # recover the last segment only, or (sometimes) everything from offset 0
        recovery_point = 0 if cut % 16 == 0 else last.segment
        log = reopen_unclean(part_dir, recovery_point)
        try:
            assert (part_dir / last_file).stat().st_size == last.position, cut
            assert log.log_end_offset == last.header.base_offset, cut
            assert_log_holds(log, part_dir, expected[:-1])
            assert log.read(last.header.base_offset, 1 << 20).records == b""
            # the next append lands where the cut batch was
            info = log.append_as_leader(tiny_batch(last.header.base_offset, leader=False), 0)
            assert info.first_offset == last.header.base_offset
        finally:
            log.close()
        shutil.rmtree(part_dir.parent)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_log_cut_inside_an_earlier_segment(
    pristine: tuple[Path, list[bytes]], tmp_path: Path, data: st.DataObject
) -> None:
    """A cut through a batch of a segment at or after the recovery point: that batch and
    every later segment are gone, every earlier batch is kept."""
    part, expected = pristine
    layout = segment_layout(expected, part)
    bases = sorted({b.segment for b in layout})
    index = data.draw(st.integers(0, len(layout) - 1), label="torn batch")
    torn = layout[index]
    cut = data.draw(st.integers(1, len(torn.data) - 1), label="bytes kept of it")
    seg_pos = bases.index(torn.segment)
    next_base = bases[seg_pos + 1] if seg_pos + 1 < len(bases) else torn.header.next_offset
    # any recovery point that makes this segment one to recover
    recovery_point = data.draw(st.integers(0, next_base - 1), label="recovery point")

    part_dir = fresh_copy(part, tmp_path)
    os.truncate(part_dir / f"{torn.segment:020d}.log", torn.position + cut)
    log = reopen_unclean(part_dir, recovery_point)
    try:
        assert log.log_end_offset == torn.header.base_offset
        assert_log_holds(log, part_dir, expected[:index])
        assert sorted(p.name for p in part_dir.glob("*.log")) == [
            f"{b:020d}.log" for b in bases[: seg_pos + 1]
        ]
        for later in bases[seg_pos + 1 :]:
            assert not list(part_dir.glob(f"{later:020d}.*index"))
        assert log.recovery_point <= log.log_end_offset
        assert_producer_continues(log, expected[:index])
    finally:
        log.close()
    shutil.rmtree(part_dir.parent)


# ------------------------------------------------------------------------------------
# 3. Bit flips
# ------------------------------------------------------------------------------------

# bytes of a batch whose corruption recovery must notice: batchLength, magic, the CRC,
# and everything the CRC covers
_HEADER_BYTES = st.sampled_from([8, 9, 10, 11, 16, 17, 18, 19, 20])


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_bit_flip_in_a_batch(
    pristine: tuple[Path, list[bytes]], tmp_path: Path, data: st.DataObject
) -> None:
    part, expected = pristine
    layout = segment_layout(expected, part)
    bases = sorted({b.segment for b in layout})
    index = data.draw(st.integers(0, len(layout) - 1), label="damaged batch")
    damaged = layout[index]
    byte = data.draw(st.one_of(_HEADER_BYTES, st.integers(21, len(damaged.data) - 1)), label="byte")
    bit = data.draw(st.integers(0, 7), label="bit")
    seg_pos = bases.index(damaged.segment)
    recovery_point = data.draw(
        st.sampled_from([0, *bases[: seg_pos + 1], damaged.header.base_offset]),
        label="recovery point",
    )

    part_dir = fresh_copy(part, tmp_path)
    path = part_dir / f"{damaged.segment:020d}.log"
    raw = bytearray(path.read_bytes())
    raw[damaged.position + byte] ^= 1 << bit
    path.write_bytes(raw)
    log = reopen_unclean(part_dir, recovery_point)
    try:
        assert log.log_end_offset == damaged.header.base_offset
        assert_log_holds(log, part_dir, expected[:index])
        assert not [p for p in part_dir.glob("*.log") if int(p.name[:20]) > damaged.segment]
        assert_producer_continues(log, expected[:index])
    finally:
        log.close()
    shutil.rmtree(part_dir.parent)


# ------------------------------------------------------------------------------------
# 4. Index files
# ------------------------------------------------------------------------------------


def test_preallocated_indexes_left_by_a_crash_are_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log_dir = tmp_path / "logs"
    run = run_writer(log_dir, "--max-batches", "140")  # exits without closing anything
    assert run.returncode == 3 and len(run.acks) == 140
    part_dir = log_dir / PART_DIR
    active = max(int(p.name[:20]) for p in part_dir.glob("*.log"))
    index = part_dir / f"{active:020d}.index"
    time_index = part_dir / f"{active:020d}.timeindex"
    # the crash state: full preallocated size, zeros after the written entries
    assert index.stat().st_size == CONFIG.segment_index_bytes
    assert time_index.stat().st_size == CONFIG.segment_index_bytes // 12 * 12
    assert index.read_bytes()[-64:] == bytes(64)
    assert time_index.read_bytes()[-60:] == bytes(60)

    calls = RecoverCalls(monkeypatch)
    ld = LogDirectory(log_dir)
    log = ld.load(CONFIG, time_ms=T0)[TP]
    assert not ld.had_clean_shutdown
    # the writer checkpointed the recovery point at its last roll: only the active
    # segment is recovered
    assert calls.bases == [active]
    expected = expected_batches_until(run.acks[-1].last + 1)
    assert_log_holds(log, part_dir, expected)
    entries = [
        log.active_segment.offset_index.entry(i)
        for i in range(log.active_segment.offset_index.entries)
    ]
    assert len(entries) >= 2
    assert_indexes_well_formed(log)
    assert_lookups(log, expected)
    ld.close()
    # closing trims the rebuilt index to exactly its entries
    raw = index.read_bytes()
    assert len(raw) == 8 * len(entries)
    assert [
        (active + int.from_bytes(raw[i : i + 4], "big"), int.from_bytes(raw[i + 4 : i + 8], "big"))
        for i in range(0, len(raw), 8)
    ] == entries


def _zero_fill(raw: bytes, entry_size: int) -> bytes:
    return bytes(len(raw))


def _zero_tail(raw: bytes, entry_size: int) -> bytes:
    """What an unclean stop leaves: the entries, then zeros up to the preallocated size."""
    return raw + bytes(CONFIG.segment_index_bytes // entry_size * entry_size - len(raw))


def _garbage(seed: int) -> Callable[[bytes, int], bytes]:
    def corrupt(raw: bytes, entry_size: int) -> bytes:
        return random.Random(seed).randbytes(len(raw))

    return corrupt


@pytest.mark.parametrize("which", ["first", "middle", "last"])
@pytest.mark.parametrize(
    "suffix, corrupt",
    [
        pytest.param(".index", _zero_fill, id="index-zero-filled"),
        pytest.param(".index", _zero_tail, id="index-zero-tail"),
        pytest.param(".index", _garbage(1), id="index-garbage-1"),
        pytest.param(".index", _garbage(2), id="index-garbage-2"),
        pytest.param(".index", _garbage(3), id="index-garbage-3"),
        pytest.param(".timeindex", _zero_fill, id="timeindex-zero-filled"),
        pytest.param(".timeindex", _zero_tail, id="timeindex-zero-tail"),
    ],
)
def test_corrupt_index_behind_a_clean_shutdown_marker_is_rebuilt(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    which: str,
    suffix: str,
    corrupt: Callable[[bytes, int], bytes],
) -> None:
    log_dir = tmp_path / "logs"
    expected = build_closed_log(log_dir, 65)  # the active segment holds 3 index entries
    part_dir = log_dir / PART_DIR
    assert (log_dir / CLEAN_SHUTDOWN_FILE).exists()
    bases = sorted(int(p.name[:20]) for p in part_dir.glob("*.log"))
    victim = {"first": bases[0], "middle": bases[len(bases) // 2], "last": bases[-1]}[which]
    path = part_dir / f"{victim:020d}{suffix}"
    raw = path.read_bytes()
    entry = 8 if suffix == ".index" else 12
    assert len(raw) >= 2 * entry, "the segment needs two entries for corruption to show"
    damaged = corrupt(raw, entry)
    assert damaged != raw
    path.write_bytes(damaged)

    calls = RecoverCalls(monkeypatch)
    ld = LogDirectory(log_dir)
    log = ld.load(CONFIG, time_ms=T0)[TP]
    assert ld.had_clean_shutdown
    assert calls.bases == [victim]  # found by the sanity check, and only that segment
    assert_log_holds(log, part_dir, expected)
    assert_indexes_well_formed(log)
    assert_lookups(log, expected)
    ld.close()


def test_missing_index_behind_a_clean_shutdown_marker_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log_dir = tmp_path / "logs"
    expected = build_closed_log(log_dir, 65)
    part_dir = log_dir / PART_DIR
    bases = sorted(int(p.name[:20]) for p in part_dir.glob("*.log"))
    victim = bases[len(bases) // 2]
    (part_dir / f"{victim:020d}.index").unlink()

    calls = RecoverCalls(monkeypatch)
    ld = LogDirectory(log_dir)
    log = ld.load(CONFIG, time_ms=T0)[TP]
    assert ld.had_clean_shutdown
    assert calls.bases == [victim]
    assert (part_dir / f"{victim:020d}.index").exists()
    assert_log_holds(log, part_dir, expected)
    assert_indexes_well_formed(log)
    assert_lookups(log, expected)
    ld.close()


def _middle_segment_index(log_dir: Path, suffix: str) -> tuple[int, Path, bytes]:
    part_dir = log_dir / PART_DIR
    bases = sorted(int(p.name[:20]) for p in part_dir.glob("*.log"))
    victim = bases[len(bases) // 2]
    path = part_dir / f"{victim:020d}{suffix}"
    return victim, path, path.read_bytes()


def test_offset_index_entry_pointing_inside_a_batch_is_rebuilt_on_first_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log_dir = tmp_path / "logs"
    expected = build_closed_log(log_dir, 65)
    victim, path, raw = _middle_segment_index(log_dir, ".index")
    assert len(raw) >= 3 * 8
    damaged = bytearray(raw)
    relative, position = struct.unpack_from(">ii", raw, 0)
    struct.pack_into(">ii", damaged, 0, relative, position + 3)  # 3 bytes into a batch
    path.write_bytes(damaged)

    calls = RecoverCalls(monkeypatch)
    ld = LogDirectory(log_dir)
    log = ld.load(CONFIG, time_ms=T0)[TP]
    try:
        # Only a read can see that an entry points into a batch: the segment's
        # indexes are rebuilt from its .log on the first lookup that lands there.
        assert calls.bases == []
        assert_lookups(log, expected)
        assert calls.bases == [victim]
    finally:
        ld.close()


def test_time_index_with_a_bad_first_entry_behind_a_marker_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log_dir = tmp_path / "logs"
    expected = build_closed_log(log_dir, 65)
    victim, path, raw = _middle_segment_index(log_dir, ".timeindex")
    assert len(raw) >= 3 * 12
    damaged = bytearray(raw)
    _ts, last_relative = struct.unpack_from(">qi", raw, len(raw) - 12)
    struct.pack_into(">qi", damaged, 0, T0, last_relative)  # still strictly increasing
    path.write_bytes(damaged)

    calls = RecoverCalls(monkeypatch)
    ld = LogDirectory(log_dir)
    log = ld.load(CONFIG, time_ms=T0)[TP]
    try:
        assert calls.bases == [victim]
        assert_lookups(log, expected)
    finally:
        ld.close()


def test_segments_rolled_on_a_full_index_are_recovered(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=100_000, index_interval_bytes=500, segment_index_bytes=64)
    part_dir = tmp_path / PART_DIR
    log = Log.open(part_dir, config, time_ms=T0)
    expected = []
    for _ in range(40):  # appends of 3 batches of ~320 bytes each
        base = log.log_end_offset
        records = [NewRecord(b"x" * 250, None, T0 + base + i) for i in range(3)]
        log.append_as_leader(b"".join(build_batch([r], now_ms=T0) for r in records), 0, time_ms=T0)
        expected += [
            build_batch([r], base_offset=base + i, partition_leader_epoch=0, now_ms=T0)
            for i, r in enumerate(records)
        ]
    assert len(log.segments) >= 3  # rolled on the full (64-byte) indexes, not on size
    assert all(s.size < 10_000 for s in log.segments)
    log.close()

    log = Log.open(part_dir, config, recovery_point=0, time_ms=T0)
    try:
        assert_log_holds(log, part_dir, expected)
    finally:
        log.close()


# ------------------------------------------------------------------------------------
# 5. Leftovers of interrupted file operations
# ------------------------------------------------------------------------------------


@pytest.mark.parametrize("clean", [True, False], ids=["clean", "unclean"])
def test_deleted_cleaned_and_orphan_files_are_removed(tmp_path: Path, clean: bool) -> None:
    log_dir = tmp_path / "logs"
    expected = build_closed_log(log_dir, 40)
    part_dir = log_dir / PART_DIR
    layout = segment_layout(expected, part_dir)
    bases = sorted({b.segment for b in layout})
    assert len(bases) >= 4
    # retention had renamed the first segment for deletion when the broker stopped
    for path in part_dir.glob(f"{bases[0]:020d}.*"):
        if not path.name.endswith(".snapshot"):
            path.rename(path.with_name(path.name + ".deleted"))
    # an unfinished cleaner output, and indexes whose log is gone
    (part_dir / f"{bases[2]:020d}.log.cleaned").write_bytes(expected[0][:50])
    (part_dir / f"{bases[2]:020d}.index.cleaned").write_bytes(bytes(16))
    (part_dir / f"{bases[1] + 1:020d}.index").write_bytes(bytes(16))
    (part_dir / f"{bases[1] + 1:020d}.timeindex").write_bytes(bytes(24))
    (part_dir / "00000000000099999999.index").write_bytes(bytes(8))
    if not clean:
        (log_dir / CLEAN_SHUTDOWN_FILE).unlink()

    ld = LogDirectory(log_dir)
    log = ld.load(CONFIG, time_ms=T0)[TP]
    assert ld.had_clean_shutdown is clean
    leftovers = [
        p.name
        for p in part_dir.iterdir()
        if p.name.endswith((".deleted", ".cleaned", ".swap"))
        or (p.suffix in (".index", ".timeindex") and not p.with_suffix(".log").exists())
    ]
    assert leftovers == []
    kept = [b.data for b in layout if b.segment != bases[0]]
    assert log.log_start_offset == bases[1]
    assert_log_holds(log, part_dir, kept)
    assert_lookups(log, kept)
    ld.close()


def test_finished_swap_replaces_the_segments_it_covers(tmp_path: Path) -> None:
    """A cleaner output renamed to `.swap` (its last step before the rename to `.log`) is
    completed on open: the segments it covers give way to it, later ones stay."""
    log_dir = tmp_path / "logs"
    expected = build_closed_log(log_dir, 40)
    part_dir = log_dir / PART_DIR
    layout = segment_layout(expected, part_dir)
    bases = sorted({b.segment for b in layout})
    covered = [b for b in layout if b.segment in bases[:2]]
    # "compacted": keep every other batch, and the last one of the range
    survivors = [b.data for i, b in enumerate(covered) if i % 2 == 0 or b is covered[-1]]
    (part_dir / f"{bases[0]:020d}.log.swap").write_bytes(b"".join(survivors))
    (part_dir / f"{bases[0]:020d}.index.swap").write_bytes(bytes(64))  # stale: rebuilt
    (log_dir / CLEAN_SHUTDOWN_FILE).unlink()

    ld = LogDirectory(log_dir)
    log = ld.load(CONFIG, time_ms=T0)[TP]
    result = survivors + [b.data for b in layout if b.segment not in bases[:2]]
    assert_log_holds(log, part_dir, result)
    assert [s.base_offset for s in log.segments] == [bases[0], *bases[2:]]
    assert not list(part_dir.glob("*.swap"))
    # offsets compacted away read as the next surviving batch
    for b in covered:
        got = log.read(b.header.base_offset, 1)
        assert got.records in survivors
        assert BatchHeader.parse(got.records).last_offset >= b.header.base_offset
    ld.close()


def test_swap_of_an_unfinished_split_is_discarded(tmp_path: Path) -> None:
    """A `.swap` at or above a `.cleaned` file's offset belongs to an interrupted split:
    both go and the original segments stay."""
    log_dir = tmp_path / "logs"
    expected = build_closed_log(log_dir, 40)
    part_dir = log_dir / PART_DIR
    layout = segment_layout(expected, part_dir)
    bases = sorted({b.segment for b in layout})
    (part_dir / f"{bases[1]:020d}.log.cleaned").write_bytes(b"")
    first_of_2 = next(b for b in layout if b.segment == bases[2])
    (part_dir / f"{bases[2]:020d}.log.swap").write_bytes(first_of_2.data)

    ld = LogDirectory(log_dir)
    log = ld.load(CONFIG, time_ms=T0)[TP]
    assert not list(part_dir.glob("*.swap")) and not list(part_dir.glob("*.cleaned"))
    assert_log_holds(log, part_dir, expected)
    ld.close()


# ------------------------------------------------------------------------------------
# 6. Clean shutdown
# ------------------------------------------------------------------------------------


def _checkpoint_lines(path: Path) -> tuple[list[str], set[str]]:
    text = path.read_bytes().decode("utf-8")
    assert text.endswith("\n") and "\r" not in text
    lines = text.split("\n")[:-1]
    assert lines[0] == "0"
    assert int(lines[1]) == len(lines) - 2
    return lines, set(lines[2:])


def test_clean_shutdown_skips_recovery_and_writes_kafka_checkpoints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log_dir = tmp_path / "logs"
    ld = LogDirectory(log_dir)
    ld.load(CONFIG, time_ms=T0)
    a = ld.create_log(TOPIC, PARTITION, CONFIG, time_ms=T0)
    b = ld.create_log("my-topic", 3, CONFIG, time_ms=T0)
    expected_a = []
    for _ in range(50):
        base = a.log_end_offset
        a.append_as_leader(writer.client_batch(base), writer.leader_epoch_for(base), time_ms=T0)
        expected_a.append(writer.expected_batch(base))
    b.append_as_leader(build_batch([NewRecord(b"x", None, T0)] * 3, now_ms=T0), 7, time_ms=T0)
    assert len(a.segments) >= 4
    a.update_high_watermark(a.log_end_offset - 5)
    b.update_high_watermark(3)
    assert b.maybe_increment_log_start_offset(2)
    leo_a, hw_a = a.log_end_offset, a.high_watermark
    ld.close(broker_epoch=17)

    assert (log_dir / CLEAN_SHUTDOWN_FILE).read_bytes() == b'{"version":0,"brokerEpoch":17}'
    lines, entries = _checkpoint_lines(log_dir / "recovery-point-offset-checkpoint")
    assert lines[1] == "2" and entries == {f"{TOPIC} {PARTITION} {leo_a}", "my-topic 3 3"}
    lines, entries = _checkpoint_lines(log_dir / "replication-offset-checkpoint")
    assert entries == {f"{TOPIC} {PARTITION} {hw_a}", "my-topic 3 3"}
    lines, entries = _checkpoint_lines(log_dir / "log-start-offset-checkpoint")
    assert lines == ["0", "1", "my-topic 3 2"]  # only starts beyond the first segment's base
    epochs = (log_dir / PART_DIR / "leader-epoch-checkpoint").read_text()
    expected_epochs = sorted(
        {
            BatchHeader.parse(d).partition_leader_epoch: BatchHeader.parse(d).base_offset
            for d in reversed(expected_a)
        }.items()
    )
    assert epochs == f"0\n{len(expected_epochs)}\n" + "".join(
        f"{e} {o}\n" for e, o in expected_epochs
    )
    # the head entry follows the log start offset (Kafka's truncateFromStart)
    assert (log_dir / "my-topic-3" / "leader-epoch-checkpoint").read_text() == "0\n1\n7 2\n"

    calls = RecoverCalls(monkeypatch)
    ld = LogDirectory(log_dir)
    logs = ld.load(CONFIG, time_ms=T0)
    assert ld.had_clean_shutdown
    assert not (log_dir / CLEAN_SHUTDOWN_FILE).exists()  # consumed on load
    assert calls.bases == []
    a, b = logs[TP], logs[("my-topic", 3)]
    assert (a.log_end_offset, a.recovery_point, a.high_watermark) == (leo_a, leo_a, hw_a)
    assert (b.log_end_offset, b.log_start_offset, b.high_watermark) == (3, 2, 3)
    assert_log_holds(a, log_dir / PART_DIR, expected_a)
    assert_lookups(a, expected_a)
    ld.close()

    # Without the marker the same files are recovered, from the checkpointed recovery
    # point (the LEO, in the last segment) on: the counter does see recovery.
    (log_dir / CLEAN_SHUTDOWN_FILE).unlink()
    ld = LogDirectory(log_dir)
    logs = ld.load(CONFIG, time_ms=T0)
    assert not ld.had_clean_shutdown
    assert sorted(calls.bases) == sorted(
        [logs[TP].segments[-1].base_offset, logs[("my-topic", 3)].segments[-1].base_offset]
    )
    assert_log_holds(logs[TP], log_dir / PART_DIR, expected_a)
    ld.close()
