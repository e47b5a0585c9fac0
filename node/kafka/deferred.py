"""What a Kafka handler answers (the socket server's contract with the APIs and the
security gate): the parts of its response frame, None for no response (a Produce
with acks=0), or a Deferred for a request it has started but not finished (an
acks=all Produce, a long-polling Fetch, a JoinGroup).

A Deferred has two forms. `wait()` blocks until the answer is there: a thread of the
listener's bounded delayed pool runs it. `begin(done)`, when the handler offers it,
does not block: called on the listener's event loop, it arranges for `done(parts)` to
be called exactly once, from any thread, when the answer is there (a produce's
futures resolved by the high watermark, a fetch's partitions woken, or its deadline,
timed on the running loop). The event-loop server uses `begin` where there is one, so
an acks=all produce or a long poll holds no thread while it waits."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Generic, TypeVar

from ..event_log import EventLogger
from .codec import KafkaRequest, Part

_log = EventLogger("kafka")

Answer = list[Part] | None


class HandlerFailed:
    """What a begun Deferred delivers when computing its answer raised (a bug): the
    server closes the connection instead of leaving the request unanswered."""


FAILED = HandlerFailed()
Done = Callable[[Answer | HandlerFailed], None]


class Deferred:
    """A handler's answer for a request it has started but not finished."""

    __slots__ = ("begin", "in_order", "on_started", "wait")

    def __init__(
        self,
        wait: Callable[[], Answer],
        begin: Callable[[Done], None] | None = None,
        in_order: bool = False,
    ) -> None:
        self.wait = wait
        self.begin = begin
        # The connection's next request waits until this one has taken effect (a
        # begun one calls started()) or is answered: a Produce whose append waits for
        # its transaction's verification, so a later batch of the same producer cannot
        # pass it; once appended, the next may come while it waits for its replicas.
        self.in_order = in_order
        self.on_started: Callable[[], None] | None = None  # set by the server

    def started(self) -> None:
        """An in-order request has taken effect: the connection may read the next."""
        if self.on_started is not None:
            self.on_started()


T = TypeVar("T")


class OnLoop(Generic[T]):
    """A `begin`'s bookkeeping on the running loop: `done(answer(x))` exactly once,
    at the first `finish(x)` (on the loop), `finish_threadsafe()` (any thread; x is
    None) or the deadline (x None)."""

    __slots__ = ("_answer", "_done", "_loop_thread", "_timer", "finished", "loop")

    def __init__(self, done: Done, answer: Callable[[T | None], Answer], delay_s: float) -> None:
        self.loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._done = done
        self._answer = answer
        self.finished = False
        self._timer = self.loop.call_later(max(delay_s, 0.0), self.finish)

    def finish(self, x: T | None = None) -> None:
        if self.finished:
            return
        self.finished = True
        self._timer.cancel()
        try:
            answer = self._answer(x)
        except Exception as e:  # noqa: BLE001 - a bug in a handler: this connection only
            _log.error("kafka_handler_failed", api="deferred", error=f"{type(e).__name__}: {e}")
            self._done(FAILED)
            return
        self._done(answer)

    def finish_threadsafe(self) -> None:
        self.soon(self.finish)

    def soon(self, fn: Callable[[], None]) -> None:
        """Run fn on the loop soon, from any thread: from the loop's own thread (an
        append waking a parked fetch) without call_soon_threadsafe's wake-up write."""
        if threading.get_ident() == self._loop_thread:
            self.loop.call_soon(fn)
        elif not self.loop.is_closed():  # closed: the node stopped, its connections too
            with contextlib.suppress(RuntimeError):  # ... closing between the two calls
                self.loop.call_soon_threadsafe(fn)


def from_future(
    future: Future[T], answer: Callable[[T | None], Answer], timeout_s: float
) -> Deferred:
    """The Deferred of an answer computed from `future`'s result (None: not there
    within `timeout_s`): `wait` blocks a delayed thread on it, `begin` holds none."""

    def wait() -> Answer:
        try:
            return answer(future.result(timeout=timeout_s))
        except TimeoutError:
            return answer(None)

    def begin(done: Done) -> None:
        on_loop: OnLoop[T] = OnLoop(done, answer, timeout_s)
        future.add_done_callback(lambda f: on_loop.soon(lambda: on_loop.finish(f.result())))

    return Deferred(wait, begin)


# A handler: request → the parts of its response frame, None for no response (a
# Produce with acks=0), or a Deferred for one that continues after it started.
Handler = Callable[[KafkaRequest], "list[Part] | None | Deferred"]
