"""bench/thread_cpu.py: a process's busiest thread, by CPU between two readings, under
its Python name (py-spy dump), and the process's total in cores."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time

import pytest

from seglog.bench.thread_cpu import busiest, cores, read_threads, thread_names

SPINNER = """
import threading, time
def spin():
    end = time.monotonic() + 30
    while time.monotonic() < end:
        pass
threading.Thread(target=spin, name="spinner", daemon=True).start()
threading.Thread(target=time.sleep, args=(30,), name="sleeper", daemon=True).start()
print("ready", flush=True)
time.sleep(30)
"""


@pytest.mark.skipif(shutil.which("py-spy") is None, reason="py-spy is not installed")
def test_the_spinning_thread_is_the_busiest_by_name() -> None:
    proc = subprocess.Popen([sys.executable, "-c", SPINNER], stdout=subprocess.PIPE)
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"ready\n"
        before, t0 = read_threads(proc.pid), time.monotonic()
        time.sleep(1.0)
        after, seconds = read_threads(proc.pid), time.monotonic() - t0
        names = thread_names(proc.pid)
        assert {"spinner", "sleeper"} <= set(names.values()), names
        top = busiest(before, after, seconds, names)
        assert top[0]["thread"] == "spinner" and float(top[0]["cores"]) > 0.3, top  # type: ignore[arg-type]
        sleeper = next(r for r in top if r["thread"] == "sleeper")
        assert sleeper["cores"] == 0.0, top
        assert cores(before, after, seconds) >= float(top[0]["cores"]) - 0.01  # type: ignore[arg-type]
    finally:
        proc.kill()
        proc.wait()
