"""The broker's pulse to its controller process (the thin shell around
`liveness.StallWatchdog`): a thread that, every pulse interval, asks the watchdog
whether a watched loop stalled and writes `alive` or `stalled <why>` to the controller
process, which relays heartbeats only while the pulses say the broker serves.

A frozen process sends nothing (every thread stops), so the controller process stops
heartbeating and the broker is fenced a session later. A broker that is running but
cannot serve (a disk write or fsync that does not return, its replica timers stuck
behind the partition lock such a write holds) says so: the
controller process fences it at once, so its leaderships move instead of timing out
every produce. It logs each change and keeps the state for the metrics.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from seglog.storage import io_watch
from seglog.storage.disk_and_clock import plain_monotonic_s

from .event_log import EventLogger
from .liveness import StallWatchdog, pulse_line

_log = EventLogger("broker_pulse")
DISK_OPERATION = "a disk write or fsync"  # its name in the watchdog


class BrokerPulse:
    def __init__(
        self,
        watchdog: StallWatchdog,
        send: Callable[[bytes], None],
        interval_s: float,
    ) -> None:
        self.watchdog = watchdog
        self._send = send
        self.interval_s = interval_s
        self.stalled: str | None = None  # what stalled at the last pulse; None: serving
        self.stalls = 0  # times the broker found it could not serve
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="broker-pulse", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def pulse_once(self) -> None:
        now = plain_monotonic_s()
        self.watchdog.in_flight(DISK_OPERATION, io_watch.oldest_started())
        stalled = self.watchdog.stalled(now)
        if stalled != self.stalled:
            if stalled is not None and self.stalled is None:
                self.stalls += 1
                _log.error("broker_stalled", reason=stalled)
            elif stalled is None:
                _log.info("broker_serving_again", was=self.stalled)
            self.stalled = stalled
        self._send(pulse_line(stalled))

    def _run(self) -> None:
        while not self._stopped.wait(self.interval_s):
            try:
                self.pulse_once()
            except Exception:  # noqa: BLE001 - a pulse that failed must not end the pulses
                _log.error("broker_pulse_failed", exc=True)
