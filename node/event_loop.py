"""The node's event loop: one uvloop loop on one thread, serving every Kafka listener
of the node (node/kafka/loop_server.py). A request is read, handled and answered on
it; what may block goes to a bounded pool and comes back with call_soon_threadsafe.

It also measures its own lag: a probe scheduled every LAG_PROBE_S notes how late it
ran (a callback that held the loop shows as lag), and `lag_s()` is the worst of the
last LAG_WINDOW_S."""

from __future__ import annotations

import asyncio
import threading
import traceback
from collections import deque
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import uvloop

from seglog.storage.disk_and_clock import plain_monotonic_s

from .event_log import EventLogger

_log = EventLogger("event_loop")

T = TypeVar("T")
LAG_PROBE_S = 0.25
LAG_WINDOW_S = 30.0
START_TIMEOUT_S = 10.0


class NodeLoop:
    """A uvloop event loop running on its own thread until stop()."""

    def __init__(self, name: str = "seglog-loop") -> None:
        self.loop = uvloop.new_event_loop()
        self._name = name
        self._runner = threading.Thread(target=self._run, name=name, daemon=True)
        self._running = threading.Event()
        self._lags: deque[tuple[float, float]] = deque(maxlen=int(LAG_WINDOW_S / LAG_PROBE_S))
        self._expected = 0.0
        self.thread_id: int | None = None

    def start(self) -> NodeLoop:
        self._runner.start()
        if not self._running.wait(START_TIMEOUT_S):
            raise RuntimeError(f"the event loop {self._name} did not start")
        return self

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.set_exception_handler(self._failed)
        self.thread_id = threading.get_ident()
        self.loop.call_soon(self._running.set)
        self._expected = plain_monotonic_s() + LAG_PROBE_S
        self.loop.call_later(LAG_PROBE_S, self._probe)
        try:
            self.loop.run_forever()
        finally:
            self.loop.close()

    @staticmethod
    def _failed(_loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """A callback raised (a bug): logged as an event, the loop goes on."""
        exc = context.get("exception")
        _log.error(
            "event_loop_callback_failed",
            message=str(context.get("message", "")),
            error=f"{type(exc).__name__}: {exc}" if exc is not None else "",
            trace="".join(traceback.format_exception(exc)) if exc is not None else "",
        )

    def _probe(self) -> None:
        now = plain_monotonic_s()
        self._lags.append((now, max(0.0, now - self._expected)))
        self._expected = now + LAG_PROBE_S
        self.loop.call_later(LAG_PROBE_S, self._probe)

    def lag_s(self) -> float:
        """The longest the loop was late for a timer over the last LAG_WINDOW_S."""
        horizon = plain_monotonic_s() - LAG_WINDOW_S
        return max((lag for at, lag in list(self._lags) if at >= horizon), default=0.0)

    def late_s(self, now: float) -> float:
        """How late the next probe is at `now` (from any thread): a loop held by one
        callback (a write to a disk that stopped answering) is late by that long."""
        return max(0.0, now - self._expected) if self.thread_id is not None else 0.0

    def on_loop(self) -> bool:
        return threading.get_ident() == self.thread_id

    def call(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run fn(*args) on the loop soon (from any thread)."""
        if self.on_loop():
            self.loop.call_soon(fn, *args)
        else:
            self.loop.call_soon_threadsafe(fn, *args)

    def run(self, coro: Coroutine[Any, Any, T], timeout_s: float = 10.0) -> T:
        """Run a coroutine on the loop from another thread and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def stop(self) -> None:
        if not self._runner.is_alive():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._runner.join(5)
