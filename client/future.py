"""Futures for produced records, shaped like kafka-python's `Future` and
`FutureRecordMetadata`: `.get(timeout)`, `.is_done`, `.succeeded()`, `.failed()`,
`.exception`, `.value`, `add_callback(fn)`, `add_errback(fn)`.

`Producer.send` returns a light handle (`FutureRecordMetadata`: the record's index
in its batch and its sizes); the lock, latch, result and callbacks live once per
batch (`BatchOutcome`), and a record's RecordMetadata is derived from the batch's
base offset when asked for.

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
from dataclasses import dataclass
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
        return self._complete(value, None, set_latch)

    def failure(self, exception: BaseException, *, set_latch: bool = True) -> Future[T]:
        if not isinstance(exception, BaseException):
            raise TypeError(f"a future fails with an exception, not {exception!r}")
        return self._complete(None, exception, set_latch)

    def _complete(
        self, value: T | None, exception: BaseException | None, set_latch: bool
    ) -> Future[T]:
        """Record the outcome (`exception` None: success), then run its callbacks."""
        with self._lock:
            if self.is_done:
                raise RuntimeError("future is already complete")
            if exception is None:
                self.value = value
                to_run: list[Callable[[Any], Any]] = self._callbacks
            else:
                self.exception = exception
                to_run = self._errbacks
            self.is_done = True
            self._callbacks, self._errbacks = [], []
        if set_latch:
            self._latch.set()
        outcome = value if exception is None else exception
        for fn in to_run:
            _run(fn, outcome)
        return self

    def add_callback(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future[T]:
        """`fn(*args, value, **kwargs)` on success (at once if already succeeded)."""
        return self._add(functools.partial(fn, *args, **kwargs) if args or kwargs else fn, True)

    def add_errback(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future[T]:
        """`fn(*args, exception, **kwargs)` on failure (at once if already failed)."""
        return self._add(functools.partial(fn, *args, **kwargs) if args or kwargs else fn, False)

    def _add(self, fn: Callable[[Any], Any], on_success: bool) -> Future[T]:
        """Keep `fn` for the outcome it waits for, or run it now if that came already."""
        with self._lock:
            if not self.is_done:
                (self._callbacks if on_success else self._errbacks).append(fn)
                return self
        if on_success and self.exception is None:
            _run(fn, self.value)
        elif not on_success and self.exception is not None:
            _run(fn, self.exception)
        return self

    def add_both(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Future[T]:
        self.add_callback(fn, *args, **kwargs)
        return self.add_errback(fn, *args, **kwargs)

    def get(self, timeout: float | None = None) -> T:
        """The value; raises the failure, or KafkaTimeoutError after `timeout` seconds."""
        _await(lambda: self.is_done, self._latch, timeout)
        if self.exception is not None:
            raise self.exception
        return self.value  # type: ignore[return-value]


class BatchOutcome:
    """The one result shared by every record of a producer batch: a lock, a latch and
    the callbacks the callers asked for, per batch rather than per record.

    Completed once, by `resolve` (offsets base_offset + index) or `fail`; callbacks run
    in the completing thread in record order, after `done` is set and before the latch
    is set (so a waiter sees every callback of the batch already run).
    """

    __slots__ = (
        "topic_partition",
        "done",
        "base_offset",
        "log_append_time",
        "log_start_offset",
        "error",
        "_latch",
        "_released",
        "_lock",
        "_callbacks",
    )

    def __init__(self, topic_partition: TopicPartition | None) -> None:
        self.topic_partition = topic_partition
        self.done = False
        self.base_offset = -1
        self.log_append_time = -1
        self.log_start_offset = -1
        self.error: BaseException | None = None
        # Made on the first wait only: most batches are never waited on one by one.
        self._latch: threading.Event | None = None
        self._released = False  # done and every callback run: waiters may go
        self._lock = threading.Lock()
        # (record index, on success?, fn), created on the first add_callback/add_errback.
        self._callbacks: list[tuple[int, bool, Callable[[Any], Any]]] | None = None

    def resolve(self, base_offset: int, log_append_time: int, log_start_offset: int) -> None:
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.log_start_offset = log_start_offset
        self._finish()

    def fail(self, exception: BaseException) -> None:
        if not isinstance(exception, BaseException):
            raise TypeError(f"a future fails with an exception, not {exception!r}")
        self.error = exception
        self._finish()

    def _finish(self) -> None:
        with self._lock:
            if self.done:
                raise RuntimeError("future is already complete")
            self.done = True
            callbacks, self._callbacks = self._callbacks, None
        if callbacks:
            ok = self.error is None
            # Offset order: stable sort keeps each record's registration order.
            callbacks.sort(key=_index_of)
            for _index, on_success, fn in callbacks:
                if on_success == ok:
                    _run(fn, None if ok else self.error)
        with self._lock:
            self._released = True
            latch = self._latch
        if latch is not None:
            latch.set()

    @property
    def latch(self) -> threading.Event:
        """Set once the outcome is complete and its callbacks have run."""
        with self._lock:
            if self._latch is None:
                self._latch = threading.Event()
                if self._released:
                    self._latch.set()
            return self._latch

    def add(self, index: int, on_success: bool, fn: Callable[[Any], Any]) -> bool:
        """Register `fn` for record `index`; False when already done (run it now)."""
        with self._lock:
            if self.done:
                return False
            if self._callbacks is None:
                self._callbacks = []
            self._callbacks.append((index, on_success, fn))
            return True


def _index_of(item: tuple[int, bool, Callable[[Any], Any]]) -> int:
    return item[0]


@dataclass(slots=True, eq=False, repr=False)
class FutureRecordMetadata:
    """What `Producer.send` returns: a light handle on one record of a batch (its index
    and sizes), resolved from the batch's shared outcome. Shaped like kafka-python's
    FutureRecordMetadata: `.get(timeout)`, `.is_done`, `.succeeded()`, `.failed()`,
    `.value`, `.exception`, `add_callback(fn)`, `add_errback(fn)`, `add_both(fn)`."""

    _outcome: BatchOutcome
    _index: int
    _timestamp: int
    _key_size: int
    _value_size: int
    _header_size: int

    @property
    def is_done(self) -> bool:
        return self._outcome.done

    @property
    def exception(self) -> BaseException | None:
        o = self._outcome
        return o.error if o.done else None

    @property
    def value(self) -> RecordMetadata | None:
        o = self._outcome
        if not o.done or o.error is not None:
            return None
        return self._metadata()

    def succeeded(self) -> bool:
        o = self._outcome
        return o.done and o.error is None

    def failed(self) -> bool:
        o = self._outcome
        return o.done and o.error is not None

    def _metadata(self) -> RecordMetadata:
        o = self._outcome
        tp = o.topic_partition
        assert tp is not None
        return RecordMetadata(
            tp.topic,
            tp.partition,
            tp,
            o.base_offset + self._index if o.base_offset >= 0 else -1,
            o.log_append_time if o.log_append_time >= 0 else self._timestamp,
            o.log_start_offset,
            None,
            self._key_size,
            self._value_size,
            self._header_size,
        )

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """The value; raises the failure, or KafkaTimeoutError after `timeout` seconds."""
        o = self._outcome
        _await(lambda: o.done, o.latch, timeout)
        if o.error is not None:
            raise o.error
        return self._metadata()

    def add_callback(
        self, fn: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> FutureRecordMetadata:
        """`fn(*args, value, **kwargs)` on success (at once if already succeeded)."""
        if args or kwargs:
            fn = functools.partial(fn, *args, **kwargs)
        if not self._outcome.add(self._index, True, _Bound(self, fn)):
            if self._outcome.error is None:
                _run(fn, self._metadata())
        return self

    def add_errback(
        self, fn: Callable[..., Any], *args: Any, **kwargs: Any
    ) -> FutureRecordMetadata:
        """`fn(*args, exception, **kwargs)` on failure (at once if already failed)."""
        if args or kwargs:
            fn = functools.partial(fn, *args, **kwargs)
        if not self._outcome.add(self._index, False, fn):
            if self._outcome.error is not None:
                _run(fn, self._outcome.error)
        return self

    def add_both(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> FutureRecordMetadata:
        self.add_callback(fn, *args, **kwargs)
        return self.add_errback(fn, *args, **kwargs)


class _Bound:
    """A success callback with its record: called with the record's metadata."""

    __slots__ = ("handle", "fn")

    def __init__(self, handle: FutureRecordMetadata, fn: Callable[[Any], Any]) -> None:
        self.handle = handle
        self.fn = fn

    def __call__(self, _value: object) -> Any:
        return self.fn(self.handle._metadata())


def failed_future(exception: BaseException) -> FutureRecordMetadata:
    """A send that failed before reaching a batch (e.g. a record too large)."""
    outcome = BatchOutcome(None)
    outcome.fail(exception)
    return FutureRecordMetadata(outcome, 0, -1, -1, -1, -1)


def _await(done: Callable[[], bool], latch: threading.Event, timeout: float | None) -> None:
    """Wait on the latch unless already done; KafkaTimeoutError if still not done."""
    if not done():
        latch.wait(timeout)
    if not done():
        raise KafkaTimeoutError(f"no result within {timeout}s")


def _run(fn: Callable[[Any], Any], arg: object) -> None:
    try:
        fn(arg)
    except Exception:  # noqa: BLE001 - a caller's callback must not kill the sender
        _log.exception("error in a producer future callback")
