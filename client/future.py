"""Futures for produced records, shaped like kafka-python's `Future` and
`FutureRecordMetadata`: `.get(timeout)`, `.is_done`, `.succeeded()`, `.failed()`,
`.exception`, `.value`, `add_callback(fn)`, `add_errback(fn)`.

Callbacks run in the thread that completes the future (the producer's sender
thread), in completion order, so callbacks of one partition run in offset order.
A callback that raises is logged and otherwise ignored; a slow one delays every
other completion, as in Kafka.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any, Generic, NamedTuple, TypeVar

from .cluster import TopicPartition
from .errors import KafkaTimeoutError

T = TypeVar("T")
_log = logging.getLogger(__name__)


class RecordMetadata(NamedTuple):
    """What a successful send resolves to. offset is -1 with acks=0; timestamp is
    the record's CreateTime, or the node's LogAppendTime when the topic uses it."""

    topic: str
    partition: int
    topic_partition: TopicPartition
    offset: int
    timestamp: int
    log_start_offset: int
    checksum: int | None
    serialized_key_size: int
    serialized_value_size: int
    serialized_header_size: int


class Future(Generic[T]):
    """A one-shot result, completed once by `success` or `failure`. Thread-safe.

    Waiters block on `latch`, which may be shared by many futures (all records of a
    batch) as long as it is set only after every one of them is complete.
    """

    __slots__ = ("is_done", "value", "exception", "_callbacks", "_errbacks", "_lock", "_latch")

    def __init__(self, latch: threading.Event | None = None) -> None:
        self.is_done = False
        self.value: T | None = None
        self.exception: BaseException | None = None
        self._callbacks: list[Callable[[T], Any]] = []
        self._errbacks: list[Callable[[BaseException], Any]] = []
        self._lock = threading.Lock()
        self._latch = latch if latch is not None else threading.Event()

    def succeeded(self) -> bool:
        return self.is_done and self.exception is None

    def failed(self) -> bool:
        return self.is_done and self.exception is not None

    def success(self, value: T, *, set_latch: bool = True) -> Future[T]:
        with self._lock:
            if self.is_done:
                raise RuntimeError("future is already complete")
            self.value = value
            self.is_done = True
            callbacks, self._callbacks, self._errbacks = self._callbacks, [], []
        if set_latch:
            self._latch.set()
        for fn in callbacks:
            _run(fn, value)
        return self

    def failure(self, exception: BaseException, *, set_latch: bool = True) -> Future[T]:
        if not isinstance(exception, BaseException):
            raise TypeError(f"a future fails with an exception, not {exception!r}")
        with self._lock:
            if self.is_done:
                raise RuntimeError("future is already complete")
            self.exception = exception
            self.is_done = True
            errbacks, self._callbacks, self._errbacks = self._errbacks, [], []
        if set_latch:
            self._latch.set()
        for fn in errbacks:
            _run(fn, exception)
        return self

    def add_callback(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future[T]:
        """`fn(*args, value, **kwargs)` on success (at once if already succeeded)."""
        if args or kwargs:
            fn = functools.partial(fn, *args, **kwargs)
        with self._lock:
            if not self.is_done:
                self._callbacks.append(fn)
                return self
        if self.exception is None:
            _run(fn, self.value)
        return self

    def add_errback(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future[T]:
        """`fn(*args, exception, **kwargs)` on failure (at once if already failed)."""
        if args or kwargs:
            fn = functools.partial(fn, *args, **kwargs)
        with self._lock:
            if not self.is_done:
                self._errbacks.append(fn)
                return self
        if self.exception is not None:
            _run(fn, self.exception)
        return self

    def add_both(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future[T]:
        self.add_callback(fn, *args, **kwargs)
        return self.add_errback(fn, *args, **kwargs)

    def get(self, timeout: float | None = None) -> T:
        """The value; raises the failure, or KafkaTimeoutError after `timeout` seconds."""
        if not self.is_done:
            self._latch.wait(timeout)
        if not self.is_done:
            raise KafkaTimeoutError(f"no result within {timeout}s")
        if self.exception is not None:
            raise self.exception
        return self.value  # type: ignore[return-value]


class FutureRecordMetadata(Future[RecordMetadata]):
    """The future `Producer.send` returns. Records of one batch share its latch."""

    __slots__ = ()


def failed_future(exception: BaseException) -> FutureRecordMetadata:
    """A send that failed before reaching a batch (e.g. a record too large)."""
    return FutureRecordMetadata().failure(exception)  # type: ignore[return-value]


def _run(fn: Callable[[Any], Any], arg: object) -> None:
    try:
        fn(arg)
    except Exception:  # noqa: BLE001 - a caller's callback must not kill the sender
        _log.exception("error in a producer future callback")
