"""A transactional run's stuck librdkafka calls: the worker goes on past one
(chaos/txn_workload.py's `bounded`), and workers that do not stop leave their stacks
beside the report, down to the C frames where py-spy can take them
(chaos/stuck_threads.py)."""

from __future__ import annotations

import os
import select
import shutil
import threading
from pathlib import Path

import pytest

from seglog.chaos.stuck_threads import dump_stacks
from seglog.chaos.txn_workload import HungCall, bounded


def blocked_in_c_call(r: int, started: threading.Event) -> None:
    started.set()
    select.select([r], [], [])  # inside the interpreter's C code, the GIL released


def test_a_thread_blocked_in_c_code_shows_in_the_dump(tmp_path: Path) -> None:
    r, w = os.pipe()
    started = threading.Event()
    t = threading.Thread(target=blocked_in_c_call, args=(r, started), name="stuck-one")
    t.start()
    try:
        assert started.wait(10)
        note = dump_stacks(tmp_path / "stuck.txt", "stuck-one did not stop")
    finally:
        os.write(w, b"x")
        t.join(10)
        os.close(r)
        os.close(w)
    text = (tmp_path / "stuck.txt").read_text()
    assert text.startswith("# stuck-one did not stop")
    python_part = text.split("## py-spy dump --native")[0]
    assert "blocked_in_c_call" in python_part and "select.select" in python_part
    if shutil.which("py-spy") is None:
        assert note.startswith("py-spy is not installed")
    else:
        assert note.startswith("native stacks by py-spy"), note
        native = text.split("## py-spy dump --native")[1]
        assert "blocked_in_c_call" in native
        assert "select" in native  # the C frame below the Python one


def test_a_bounded_call_returns_raises_or_is_left_hung() -> None:
    """chaos/txn_workload.py's `bounded`: the worker goes on past a librdkafka call that
    never returns (send_offsets_to_transaction, librdkafka issues 5456/5511)."""
    assert bounded(lambda: 42, "answers", 5) == 42
    with pytest.raises(KeyError):
        bounded(lambda: {}["missing"], "raises", 5)
    release = threading.Event()
    try:
        with pytest.raises(HungCall, match="hangs did not return in 1 s"):
            bounded(lambda: release.wait(60), "hangs", 1)
    finally:
        release.set()
