"""Node processes by pid, from /proc: whether one is alive, and a child of it (a node's
controller process) found by its command line."""

from __future__ import annotations

import os
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """Alive and not a zombie (a killed node whose parent has not reaped it yet: the
    detached nodes' parent is whatever adopted them, which may never reap)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
            return True
        except OSError:
            return False


def child_pid(parent: int, marker: bytes) -> int | None:
    """A child process of `parent` whose command line holds `marker` (from /proc;
    bounded by the process table)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == parent and marker in Path(f"/proc/{entry.name}/cmdline").read_bytes():
                return int(entry.name)
        except (OSError, ValueError, IndexError):
            continue
    return None
