"""Where the workload's stuck threads wait: a native stack dump of this process.

A transactional worker that does not stop has always been inside librdkafka (the GIL
released), where Python's own tracebacks end at the call. `py-spy dump --native` shows
the C frames below it; the run keeps that beside its report, so the next hang says
where librdkafka waits. Without py-spy (or without the right to trace) the report says
why there is no dump instead."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import traceback
from pathlib import Path

DUMP_TIMEOUT_S = 60.0


def dump_stacks(path: Path, why: str) -> str:
    """Write this process's Python stacks and, if py-spy is there, its native ones to
    `path`; returns a line for the report saying what was written."""
    frames = sys._current_frames()
    lines = [f"# {why}", "", "## Python stacks (sys._current_frames)", ""]
    for ident, frame in frames.items():
        lines.append(f"--- thread {ident}")
        lines.extend(s.rstrip() for s in traceback.format_stack(frame))
    spy = shutil.which("py-spy")
    if spy is None:
        note = "py-spy is not installed: Python stacks only"
    else:
        try:
            done = subprocess.run(
                [spy, "dump", "--native", "--pid", str(os.getpid())],
                capture_output=True,
                text=True,
                timeout=DUMP_TIMEOUT_S,
                check=False,
            )
            lines += ["", "## py-spy dump --native", "", done.stdout, done.stderr]
            note = (
                "native stacks by py-spy"
                if done.returncode == 0
                else f"py-spy exited {done.returncode}: {done.stderr.strip()[:200]}"
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            note = f"py-spy failed: {e!r}"
    path.write_text("\n".join(lines) + "\n")
    return f"{note}: {path}"
