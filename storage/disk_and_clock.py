"""The node's access to its disk and its clocks, with fault hooks (no mocks).

Every segment write and fsync goes through `disk_write` and `disk_fsync`, and the node's
clocks are defined here once: `wall_ms` (the logs' clock), `monotonic_s` / `monotonic_ms`
(the replicas' timers), and `plain_wall_ms` for the callers that deliberately stay off the
faults (the log's default clock, the group coordinator, session tokens). By default the
hooks are os.write, os.fsync and the plain clocks; a fault file replaces them, for tests
and chaos runs (docs/disk-and-clock-faults.md).

When the environment variable `SEGLOG_FAULT_INJECTION_FILE` names a file, a node
reads it (and reads it again whenever its modification time or size changes, at most
every `RECHECK_S`) and applies what it says to its own segment writes, fsyncs and
clocks. The file is a JSON object; every key is optional:

    fsync_failure      true: every fsync fails with EIO (Kafka takes the log dir offline)
    write_failure      true: every segment write fails with EIO
    write_delay_ms     sleep this long before each segment write and fsync (a slow disk)
    fsync_delay_ms     sleep this long before each fsync only (a disk slow to persist,
                       its page-cache writes fast: what a loaded disk usually is)
    write_block        true: every segment write and fsync blocks until the file no longer
                       says so (a disk that stops answering: no error, no progress)
    disk_free_bytes    segment writes fail with ENOSPC once this many more bytes were
                       written (counted from when the value was read; the write that
                       crosses it is partial, as on a real disk)
    clock_offset_ms    added to the wall clock (an NTP step: forward or back)
    monotonic_offset_ms  added to the monotonic clock (a suspended VM jumping forward)
    clock_skew         the node's clocks run (1 + skew) times as fast, from when read
    node_ids           only the nodes listed apply the file (default: every node)

Without the variable nothing is read and the hooks call os.write, os.fsync and the
plain clocks. A file that does not parse is reported on stderr, naming the file and what
was wrong, and the previous settings stay (a half-written edit must not clear a fault
mid-run); write the file by rename to avoid that.
"""

from __future__ import annotations

import errno
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .io_watch import watched

ENV = "SEGLOG_FAULT_INJECTION_FILE"
RECHECK_S = 0.05
_KEYS = {
    "fsync_failure": bool,
    "write_failure": bool,
    "write_delay_ms": int,
    "fsync_delay_ms": int,
    "write_block": bool,
    "disk_free_bytes": int,
    "clock_offset_ms": int,
    "monotonic_offset_ms": int,
    "clock_skew": float,
    "node_ids": list,
}


class FaultFileError(ValueError):
    """A fault-injection file that is not what the module docstring describes."""


@dataclass(frozen=True)
class Faults:
    fsync_failure: bool = False
    write_failure: bool = False
    write_delay_ms: int = 0
    fsync_delay_ms: int = 0
    write_block: bool = False
    disk_free_bytes: int | None = None
    clock_offset_ms: int = 0
    monotonic_offset_ms: int = 0
    clock_skew: float = 0.0


def parse_faults(text: str, node_id: int | None, where: str = "fault file") -> Faults:
    """The faults `text` sets for node `node_id`; FaultFileError names what is wrong."""
    try:
        raw = json.loads(text) if text.strip() else {}
    except json.JSONDecodeError as e:
        raise FaultFileError(f"{where}: not JSON: {e}") from e
    if not isinstance(raw, dict):
        raise FaultFileError(f"{where}: expected a JSON object, got {type(raw).__name__}")
    for key, value in raw.items():
        kind = _KEYS.get(key)
        if kind is None:
            raise FaultFileError(f"{where}: unknown key {key!r} (known: {sorted(_KEYS)})")
        ok = (
            isinstance(value, (int, float)) and not isinstance(value, bool)
            if kind is float
            else isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
        )
        if not ok and not (key == "disk_free_bytes" and value is None):
            raise FaultFileError(f"{where}: {key} must be {kind.__name__}, got {value!r}")
    nodes = raw.get("node_ids")
    if nodes is not None and not all(isinstance(n, int) for n in nodes):
        raise FaultFileError(f"{where}: node_ids must be a list of integers, got {nodes!r}")
    if nodes is not None and node_id not in nodes:
        return Faults()
    for key in ("write_delay_ms", "fsync_delay_ms", "disk_free_bytes"):
        if raw.get(key) is not None and raw[key] < 0:
            raise FaultFileError(f"{where}: {key} must be >= 0, got {raw[key]}")
    if raw.get("clock_skew", 0.0) <= -1.0:
        raise FaultFileError(f"{where}: clock_skew must be > -1, got {raw['clock_skew']}")
    return Faults(
        fsync_failure=raw.get("fsync_failure", False),
        write_failure=raw.get("write_failure", False),
        write_delay_ms=raw.get("write_delay_ms", 0),
        fsync_delay_ms=raw.get("fsync_delay_ms", 0),
        write_block=raw.get("write_block", False),
        disk_free_bytes=raw.get("disk_free_bytes"),
        clock_offset_ms=raw.get("clock_offset_ms", 0),
        monotonic_offset_ms=raw.get("monotonic_offset_ms", 0),
        clock_skew=float(raw.get("clock_skew", 0.0)),
    )


class FaultInjector:
    """The faults of one file, re-read when it changes. Thread-safe."""

    def __init__(self, path: str, node_id: int | None = None) -> None:
        self.path = path
        self.node_id = node_id
        self._lock = threading.Lock()
        self._stamp: tuple[int, int] | None = None
        self._next_check = 0.0
        self.faults = Faults()
        self._written = 0  # bytes written since disk_free_bytes was read
        self._skew_from_mono = time.monotonic()
        self._skew_from_wall = time.time()
        self._skew = 0.0
        self._skew_base_real = self._skew_from_mono
        self.refresh(force=True)

    def set_node(self, node_id: int) -> None:
        self.node_id = node_id
        self.refresh(force=True)

    def refresh(self, force: bool = False) -> Faults:
        now = time.monotonic()
        if not force and now < self._next_check:
            return self.faults
        with self._lock:
            self._next_check = now + RECHECK_S
            try:
                st = os.stat(self.path)
                stamp: tuple[int, int] | None = (st.st_mtime_ns, st.st_size)
            except FileNotFoundError:
                stamp = None
            if stamp == self._stamp and not force:
                return self.faults
            self._stamp = stamp
            try:
                text = "" if stamp is None else open(self.path).read()  # noqa: SIM115
                faults = parse_faults(text, self.node_id, self.path)
            except (OSError, FaultFileError) as e:
                print(f"seglog fault injection: keeping the previous faults: {e}", file=sys.stderr)
                return self.faults
            if faults.disk_free_bytes != self.faults.disk_free_bytes:
                self._written = 0
            if faults.clock_skew != self._skew:
                # The skewed clocks continue from where they stand: no jump on change.
                self._skew_from_wall = self._wall_s(now)
                self._skew_from_mono = self._mono_s(now) - self.faults.monotonic_offset_ms / 1000
                self._skew_base_real = now
                self._skew = faults.clock_skew
            self.faults = faults
            return faults

    def _wall_s(self, mono_now: float) -> float:
        if not self._skew:
            return time.time()
        return self._skew_from_wall + (mono_now - self._skew_base_real) * (1 + self._skew)

    def _mono_s(self, mono_now: float) -> float:
        # Always from the last change of skew: clearing a skew must not take the
        # monotonic clock back to the real one (the wall clock does step back to it,
        # as an NTP correction would).
        skewed = self._skew_from_mono + (mono_now - self._skew_base_real) * (1 + self._skew)
        return skewed + self.faults.monotonic_offset_ms / 1000

    # --- hooks ------------------------------------------------------------------------

    def _blocked(self) -> Faults:
        """The faults now, after waiting out a `write_block` (bounded by the file: the
        operation goes on once it no longer says so)."""
        f = self.refresh()
        while f.write_block:
            time.sleep(RECHECK_S)
            f = self.refresh()
        return f

    def write(self, fd: int, data: bytes | bytearray | memoryview) -> int:
        f = self._blocked()
        if f.write_delay_ms:
            time.sleep(f.write_delay_ms / 1000)
        if f.write_failure:
            raise OSError(errno.EIO, "injected write failure")
        if f.disk_free_bytes is not None:
            with self._lock:
                room = f.disk_free_bytes - self._written
                if room <= 0:
                    raise OSError(errno.ENOSPC, "injected: no space left on device")
                n = os.write(fd, memoryview(data)[:room])
                self._written += n
                return n
        return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        f = self._blocked()
        if f.write_delay_ms or f.fsync_delay_ms:
            time.sleep((f.write_delay_ms + f.fsync_delay_ms) / 1000)
        if f.fsync_failure:
            raise OSError(errno.EIO, "injected fsync failure")
        os.fsync(fd)

    def wall_ms(self) -> int:
        f = self.refresh()
        return int(self._wall_s(time.monotonic()) * 1000) + f.clock_offset_ms

    def monotonic_s(self) -> float:
        self.refresh()
        return self._mono_s(time.monotonic())


def plain_wall_ms() -> int:
    """The wall clock in ms without faults (Kafka's Time.SYSTEM.milliseconds())."""
    return int(time.time() * 1000)


# The clocks read without faults, for what must not follow an injected clock step: the
# seconds of a thread's own deadlines and back-offs, durations measured for metrics and
# logs, times other processes compare (tests/test_architecture.py keeps every read of
# time in storage/, controller/, replication/ and node/ to this module).
plain_wall_s: Callable[[], float] = time.time
plain_monotonic_s: Callable[[], float] = time.monotonic
plain_perf_s: Callable[[], float] = time.perf_counter
plain_monotonic_ns: Callable[[], int] = time.monotonic_ns
plain_perf_ns: Callable[[], int] = time.perf_counter_ns
plain_wall_ns: Callable[[], int] = time.time_ns


# Looked up at call time, so a test that replaces os.write or os.fsync sees its calls.
def _plain_write(fd: int, data: Any) -> int:
    return os.write(fd, data)


def _plain_fsync(fd: int) -> None:
    os.fsync(fd)


_path = os.environ.get(ENV)
INJECTOR: FaultInjector | None = FaultInjector(_path) if _path else None

# The hooks the storage layer and the node call: plain functions when no file is named.
# Marked in flight (io_watch): a node notices a disk operation that does not return.
disk_write: Callable[[int, Any], int] = watched(INJECTOR.write if INJECTOR else _plain_write)
disk_fsync: Callable[[int], None] = watched(INJECTOR.fsync if INJECTOR else _plain_fsync)
wall_ms: Callable[[], int] = INJECTOR.wall_ms if INJECTOR else plain_wall_ms
monotonic_s: Callable[[], float] = INJECTOR.monotonic_s if INJECTOR else time.monotonic


def install(path: str | None, node_id: int | None = None) -> None:
    """Apply the file at `path` from now on (None: stop injecting), as if the process
    had started with SEGLOG_FAULT_INJECTION_FILE set: for in-process tests."""
    global INJECTOR, disk_write, disk_fsync, wall_ms, monotonic_s
    INJECTOR = FaultInjector(path, node_id) if path else None
    disk_write = watched(INJECTOR.write if INJECTOR else _plain_write)
    disk_fsync = watched(INJECTOR.fsync if INJECTOR else _plain_fsync)
    wall_ms = INJECTOR.wall_ms if INJECTOR else plain_wall_ms
    monotonic_s = INJECTOR.monotonic_s if INJECTOR else time.monotonic


def monotonic_ms() -> int:
    """The monotonic clock in ms, faults applied (read at call time: `install` rebinds it)."""
    return int(monotonic_s() * 1000)


def set_node_id(node_id: int) -> None:
    """Which node this process is (the file's node_ids); a no-op without a file."""
    if INJECTOR is not None:
        INJECTOR.set_node(node_id)
