"""A node stopped by SIGTERM exits with its own code even when more signals follow
(a second Ctrl-C, a supervisor or a harness repeating its SIGTERM): they arrived while
the interpreter finalized, after Python had put the default handlers back, and ended
the process with -SIGTERM instead of 0."""

from __future__ import annotations

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
