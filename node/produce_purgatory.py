"""Kafka's produce purgatory: acks=-1 produces parked until their partition's
replica completes them (its ISR has the batch, or it failed or timed out). Each
waits on a future that the replica's `ProduceCompleted` answers."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import NamedTuple

from seglog.replication import partition_replica as pr
from seglog.storage.disk_and_clock import plain_monotonic_s

from .hosted_partition import TopicPartition
from .partition_requests import ProduceResult

Pending = tuple[int, "Future[pr.ProduceCompleted]"]  # request id, its answer


class StartedProduce(NamedTuple):
    """Appended batches whose answers are awaited (ReplicaManager.await_produced)."""

    started: list[tuple[TopicPartition, Pending | ProduceResult]]
    deadline: float  # plain_monotonic_s()


class ProducePurgatory:
    def __init__(self) -> None:
        self._request_ids = itertools.count(1)
        self._waiting: dict[int, Future[pr.ProduceCompleted]] = {}

    def park(self) -> Pending:
        """A new produce's request id and the future its answer completes."""
        request_id = next(self._request_ids)
        future: Future[pr.ProduceCompleted] = Future()
        self._waiting[request_id] = future
        return request_id, future

    def drop(self, request_id: int) -> None:
        self._waiting.pop(request_id, None)

    def complete(self, done: pr.ProduceCompleted) -> None:
        future = self._waiting.pop(done.request_id, None)
        if future is not None and not future.done():
            future.set_result(done)

    def __len__(self) -> int:
        return len(self._waiting)

    @staticmethod
    def when_answered(produce: StartedProduce, callback: Callable[[], None]) -> None:
        """Call `callback` once, from the thread that answers the last of the produce's
        partitions (at once if all are answered): after it, await_produced does not
        block. The request's timeout is the caller's to time."""
        futures = [p[1] for _, p in produce.started if not isinstance(p, ProduceResult)]
        left = len(futures)
        if left == 0:
            callback()
            return
        lock = threading.Lock()

        def one_done(_: object) -> None:
            nonlocal left
            with lock:
                left -= 1
                last = left == 0
            if last:
                callback()

        for f in futures:
            f.add_done_callback(one_done)

    def await_produced(self, produce: StartedProduce, node_id: int) -> list[ProduceResult]:
        """Each partition's answer (acks=-1: once the HW passed the batch), bounded by
        the request's timeout."""
        started, deadline = produce
        results = []
        for tp, pending in started:
            if isinstance(pending, ProduceResult):
                results.append(pending)
                continue
            request_id, future = pending
            try:
                done = future.result(timeout=max(0.0, deadline - plain_monotonic_s()))
            except FutureTimeout:
                self.drop(request_id)
                results.append(
                    ProduceResult(error_name="REQUEST_TIMED_OUT", error_message="no answer in time")
                )
                continue
            if done.error != "NONE":
                results.append(
                    ProduceResult(
                        log_start_offset=done.log_start_offset,
                        error_name=done.error,
                        error_message=f"{done.error} for {tp[0]}-{tp[1]} on node {node_id}"
                        + (f": {done.error_message}" if done.error_message else ""),
                        record_errors=done.record_errors,
                    )
                )
            else:
                results.append(
                    ProduceResult(done.base_offset, done.log_append_time, done.log_start_offset)
                )
        return results
