"""Where an idle node's CPU goes, thread by thread: CPU seconds and context switches per
thread from /proc between two readings, named by `py-spy dump` (Python's thread names are
not the kernel's). What bench/scale.py reports as `idle_threads`."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")
THREAD_LINE = re.compile(r'^Thread (\d+) \([^)]*\): "(.*)"')

# tid -> (CPU seconds, voluntary + involuntary context switches)
Reading = dict[int, tuple[float, int]]


def read_threads(pid: int) -> Reading:
    """Each live thread's CPU seconds and context switches so far (a thread that ended
    between listing and reading is left out)."""
    out: Reading = {}
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            switches = sum(
                int(line.split()[1])
                for line in (task / "status").read_text().splitlines()
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"))
            )
        except (OSError, IndexError, ValueError):
            continue
        out[int(task.name)] = ((int(fields[11]) + int(fields[12])) / TICKS, switches)
    return out


def thread_names(pid: int) -> dict[int, str]:
    """tid -> the Python thread's name, from `py-spy dump`; empty when py-spy is missing
    or may not attach (then threads are named by tid)."""
    try:
        r = subprocess.run(
            ["py-spy", "dump", "--pid", str(pid), "--nonblocking"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    names = {}
    for line in r.stdout.splitlines():
        m = THREAD_LINE.match(line)
        if m:
            names[int(m.group(1))] = m.group(2)
    return names


def cores(before: Reading, after: Reading, seconds: float) -> float:
    """The process's CPU between the readings, in cores (threads alive at the second)."""
    cpu = sum(c - before.get(tid, (0.0, 0))[0] for tid, (c, _) in after.items())
    return round(cpu / seconds, 3)


def busiest(
    before: Reading, after: Reading, seconds: float, names: dict[int, str], top: int = 8
) -> list[dict[str, object]]:
    """The `top` threads by CPU between the readings: name, cores, switches per second."""
    rows = []
    for tid, (cpu, switches) in after.items():
        cpu0, switches0 = before.get(tid, (0.0, 0))
        rows.append(
            {
                "thread": names.get(tid, f"tid {tid}"),
                "cores": round((cpu - cpu0) / seconds, 4),
                "switches_per_s": round((switches - switches0) / seconds, 1),
            }
        )
    rows.sort(key=lambda r: (r["cores"], r["switches_per_s"]), reverse=True)
    return rows[:top]
