"""A crash at every step of a clean: the log reopens with no record lost, none
duplicated, no key back at an older value, and no cleaner file left behind; cleaning
it then gives what an uninterrupted clean gives.

The crash is an exception raised from the cleaner's step hook (a BaseException the
cleaner does not catch, so nothing is tidied up), after which the Log object is
abandoned, as a killed process would leave it, and the directory opened afresh
without a clean shutdown; and, the same steps again, a real child process
(crash_cleaner.py) SIGKILLed while it pauses at the step."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cleaner_fixtures import T0, clean_fully, compact_config, keyed_batch, records_on_disk, seal

from seglog.storage.log import Log
from seglog.storage.log_cleaner import clean_log
from seglog.storage.offset_map import OffsetMap

STEPS = [
    "cleaned_partial",
    "cleaned_written",
    "swap_renamed",
    "old_deleting",
    "old_deleted",
    "swapped",
]


class Crash(BaseException):
    pass


def build(directory: Path, precleaned: bool) -> Log:
    """A compacted log of small segments; `precleaned`: cleaned once and written to
    again, so the next clean merges several cleaned segments into one group."""
    log = Log.open(directory, compact_config(segment_bytes=600), time_ms=T0)
    for n in range(2 if precleaned else 1):
        for i in range(120):
            key = b"k%d" % (i * 7 % 13)
            value = None if i % 17 == 5 else b"v%03d-%d" % (i, n)
            log.append_as_leader(
                keyed_batch([(key, value), (b"x%d" % (i % 3), b"%d" % i)]), 0, time_ms=T0
            )
        seal(log)
        if precleaned and n == 0:
            clean_fully(log, T0, OffsetMap(1 << 16))
    return log


def rows(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for r in records_on_disk(log)]


@pytest.mark.parametrize(
    ("occurrence", "precleaned"), [(1, False), (3, False), (1, True), (2, True)]
)
@pytest.mark.parametrize("step", STEPS)
def test_a_crash_at_any_step_loses_and_duplicates_nothing(
    tmp_path: Path, step: str, occurrence: int, precleaned: bool
) -> None:
    reference = build(tmp_path / "ref-0", precleaned)
    original = rows(reference)
    _cp, results = clean_fully(reference, T0, OffsetMap(1 << 16))
    cleaned = rows(reference)
    reference.close()
    if precleaned:  # groups of several segments are what this case is about
        assert results[0].segments_cleaned > results[0].groups

    directory = tmp_path / "t-0"
    log = build(directory, precleaned)
    seen = {"n": 0}

    def hook(name: str) -> None:
        if name == step:
            seen["n"] += 1
            if seen["n"] == occurrence:
                raise Crash(name)

    with pytest.raises(Crash):
        clean_log(log, offset_map=OffsetMap(1 << 16), now_ms=T0, force=True, step_hook=hook)
    leo = log.log_end_offset
    del log  # abandoned, as a SIGKILL leaves it

    reopened = Log.open(
        directory, compact_config(segment_bytes=600), high_watermark=leo, time_ms=T0
    )
    assert not [
        p.name for p in directory.iterdir() if p.suffix in (".cleaned", ".swap", ".deleted")
    ]
    got = rows(reopened)
    offsets = [r[0] for r in got]
    assert offsets == sorted(set(offsets)), "an offset appears twice or out of order"
    assert set(got) <= set(original), "a record that was never written"
    assert set(cleaned) <= set(got), "a record the clean keeps was lost"
    last = {k: (o, v) for o, k, v in original}
    assert {k: (o, v) for o, k, v in got} == last, "a key went back to an older value"
    assert reopened.log_end_offset == leo
    # Reads through the rebuilt indexes agree with the files.
    for o, _k, _v in got:
        assert reopened.read(o, 1).records
    clean_fully(reopened, T0, OffsetMap(1 << 16))
    assert rows(reopened) == cleaned
    reopened.close()


# --- a real process, SIGKILLed -------------------------------------------------------------

CHILD = Path(__file__).with_name("crash_cleaner.py")


@pytest.mark.parametrize(
    ("step", "occurrence"),
    [
        ("cleaned_partial", 2),
        ("cleaned_written", 1),
        ("swap_renamed", 1),
        ("old_deleting", 2),
        ("old_deleted", 3),
        ("swapped", 2),
    ],
)
def test_a_sigkilled_cleaner_loses_and_duplicates_nothing(
    tmp_path: Path, step: str, occurrence: int
) -> None:
    reference = build(tmp_path / "ref-0", True)
    original = rows(reference)
    clean_fully(reference, T0, OffsetMap(1 << 16))
    cleaned = rows(reference)
    reference.close()

    directory = tmp_path / "t-0"
    log = build(directory, True)
    leo = log.log_end_offset
    log.close()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(CHILD.parent), *sys.path]))
    child = subprocess.Popen(
        [sys.executable, str(CHILD), str(directory), str(leo)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    seen = 0
    try:
        assert child.stdout is not None
        for raw in child.stdout:
            line = raw.decode().strip()
            if line == f"STEP {step}":
                seen += 1
                if seen == occurrence:
                    break
            if line == "DONE":
                break
    finally:
        child.kill()
        _out, err = child.communicate(timeout=30)
    assert seen == occurrence, f"the child never reached {step} #{occurrence}: {err[-2000:]!r}"

    reopened = Log.open(
        directory, compact_config(segment_bytes=600), high_watermark=leo, time_ms=T0
    )
    leftovers = [p.name for p in directory.iterdir() if p.suffix in (".cleaned", ".swap")]
    assert not leftovers
    got = rows(reopened)
    offsets = [r[0] for r in got]
    assert offsets == sorted(set(offsets)), "an offset appears twice or out of order"
    assert set(got) <= set(original) and set(cleaned) <= set(got)
    assert {k: (o, v) for o, k, v in got} == {k: (o, v) for o, k, v in original}
    clean_fully(reopened, T0, OffsetMap(1 << 16))
    assert rows(reopened) == cleaned
    reopened.close()
