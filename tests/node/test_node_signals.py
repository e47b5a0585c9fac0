"""A node stopped by SIGTERM exits with its own code even when more signals follow
(a second Ctrl-C, a supervisor or a harness repeating its SIGTERM): they arrived while
the interpreter finalized, after Python had put the default handlers back, and ended
the process with -SIGTERM instead of 0. And a SIGTERM that the kernel hands to a thread
other than the main one (as it does when the main thread has not run since a SIGCONT)
stops the node too."""

from __future__ import annotations

import ctypes
import os
import platform
import signal
import time
from pathlib import Path

from seglog.harness.node_process import NodeProcess


def test_sigterm_repeated_after_the_node_stopped_still_exits_with_0(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path).start()
    proc = node.proc
    assert proc is not None
    try:
        proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        while '"event":"node_stopped"' not in node.log_path.read_text(errors="replace"):
            assert time.monotonic() < deadline and proc.poll() is None, node.tail()
            time.sleep(0.001)
        # Again and again until it is gone: some land in the interpreter's exit.
        while proc.poll() is None and time.monotonic() < deadline:
            try:
                proc.send_signal(signal.SIGTERM)
            except ProcessLookupError:
                break
            time.sleep(0.001)
        assert proc.wait(10) == 0, node.tail()
    finally:
        node.stop(signal.SIGKILL)


def test_sigterm_delivered_to_another_thread_stops_the_node(tmp_path: Path) -> None:
    node = NodeProcess(tmp_path).start()
    proc = node.proc
    assert proc is not None
    try:
        others = [int(t) for t in os.listdir(f"/proc/{proc.pid}/task") if int(t) != proc.pid]
        assert others, "the node runs no thread besides its main one"
        # tgkill: to that thread alone, as the kernel's own choice would be.
        libc = ctypes.CDLL(None, use_errno=True)
        sys_tgkill = {"x86_64": 234, "aarch64": 131}[platform.machine()]
        assert libc.syscall(sys_tgkill, proc.pid, others[-1], signal.SIGTERM) == 0
        assert proc.wait(15) == 0, node.tail()
        assert '"event":"node_stopped"' in node.log_path.read_text(errors="replace")
    finally:
        node.stop(signal.SIGKILL)
