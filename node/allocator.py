"""glibc's malloc kept from handing large buffers back to the kernel after each request.

A node moves records in buffers of about a megabyte: a fetch's segment read, its
protobuf answer, gRPC's copy of it; a produce's request the same way in. glibc serves
blocks above its mmap threshold (128 KiB at start, raised as such blocks are freed)
with a fresh mmap and unmaps them on free, and trims the top of its heaps once more
than the trim threshold lies free there. Either way the next request's buffer comes
back from the kernel as new pages, each one zeroed and faulted in: measured on a node
serving 1 MiB fetches (bench/node.py consume_raw, `perf record`), page faults, page
clearing and unmapping took about a fifth of the process's CPU, and the phase ran at
half the rate it reaches with the thresholds below (docs/perf/node-throughput.md).

With a fixed mmap threshold of 32 MiB (glibc's maximum on 64-bit) and a trim
threshold of 32 MiB, freed buffers stay in malloc's heaps and the next request reuses
them. What a node keeps this way is bounded: at most the trim threshold of free memory
at the top of each malloc arena (glibc makes at most 8 per core).

Setting MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_ or GLIBC_TUNABLES in the
node's environment leaves glibc to those settings instead."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Mapping
from dataclasses import dataclass

# mallopt's parameter numbers, from glibc's malloc.h.
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3

MMAP_THRESHOLD_BYTES = 32 * 1024 * 1024
TRIM_THRESHOLD_BYTES = 32 * 1024 * 1024

USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")


@dataclass(frozen=True)
class AllocatorTuning:
    applied: bool
    reason: str


def tune_malloc(environ: Mapping[str, str] | None = None) -> AllocatorTuning:
    """Set glibc's mmap and trim thresholds for this process, unless the environment
    already chose them or the C library is not glibc. Returns what was done and why."""
    env = os.environ if environ is None else environ
    chosen = [name for name in USER_SETTINGS if name in env]
    if chosen:
        return AllocatorTuning(False, f"left to the environment's {', '.join(chosen)}")
    libc = _glibc()
    if libc is None:
        return AllocatorTuning(False, "the C library is not glibc")
    mallopt = libc.mallopt
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    for param, value in (
        (M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES),
        (M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES),
    ):
        if mallopt(param, value) != 1:
            return AllocatorTuning(False, f"mallopt({param}, {value}) was refused")
    return AllocatorTuning(
        True,
        f"mmap threshold {MMAP_THRESHOLD_BYTES} B, trim threshold {TRIM_THRESHOLD_BYTES} B",
    )


def _glibc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    if not hasattr(libc, "gnu_get_libc_version") or not hasattr(libc, "mallopt"):
        return None
    return libc
