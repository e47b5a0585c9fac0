"""node/allocator.py: with the node's malloc thresholds, a megabyte buffer freed and
allocated again reuses the same memory instead of faulting in fresh pages each time."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from seglog.node import allocator

# A child process allocates and frees ~1 MiB bytes objects (what a fetch's segment read
# does) and prints the minor page faults it took doing so.
_CHURN = """
import resource, sys
from seglog.node import allocator
if sys.argv[1] == "tuned":
    assert allocator.tune_malloc().applied
rounds = 400
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for i in range(rounds):
    block = bytes(1 << 20) + bytes([i % 256])  # a fresh, written 1 MiB + 1 B object
    del block
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(mode: str) -> int:
    out = subprocess.run(
        [sys.executable, "-c", _CHURN, mode],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={k: v for k, v in os.environ.items() if k not in allocator.USER_SETTINGS},
    )
    return int(out.stdout.strip())


@pytest.mark.skipif(allocator._glibc() is None, reason="needs glibc")
def test_tuned_process_reuses_freed_megabyte_buffers() -> None:
    untuned, tuned = _faults("plain"), _faults("tuned")
    # 400 rounds of 2 MiB written: ~256 faults per MiB when every buffer is new memory.
    assert untuned > 400 * 200, f"expected fresh pages per round without tuning: {untuned}"
    assert tuned < untuned / 20, f"tuned {tuned} faults vs untuned {untuned}"


def test_environment_settings_win() -> None:
    for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"):
        result = allocator.tune_malloc({name: "1"})
        assert not result.applied
        assert name in result.reason
