"""The shell around `AlterPartitionBatcher` (replication/alter_partition_batcher.py):
one thread sends a broker's pending ISR changes to the active controller, one request
at a time, and hands the answers back per partition. A failed request is retried
after a backoff that doubles up to a bound. Nothing here grows with the load: one
thread, at most one pending change per hosted partition.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from seglog.node.controller.controller_requests import IsrChange
from seglog.node.event_log import EventLogger
from seglog.replication import partition_replica as pr
from seglog.replication.alter_partition_batcher import AlterPartitionBatcher

TopicPartition = tuple[str, int]
_log = EventLogger("alter_partition")

BACKOFF_MIN_S = 0.05
BACKOFF_MAX_S = 1.0


@dataclass(frozen=True, slots=True)
class IsrChangeResult:
    """The controller's answer to one change: on NONE the partition as now registered."""

    error: str
    message: str = ""
    leader_epoch: int = -1
    partition_epoch: int = -1
    isr: tuple[int, ...] = ()


# Sends one request's changes to the active controller; one result per change, in
# order. Raises when the request as a whole failed (no controller answered).
BatchSender = Callable[[Sequence[IsrChange]], list[IsrChangeResult]]
# Hands a partition's answer back to its replica.
Deliver = Callable[[TopicPartition, pr.AlterPartitionResponse], None]


class AlterPartitionManager:
    def __init__(self, send: BatchSender, deliver: Deliver, name: str = "alter-partition") -> None:
        self._send = send
        self._deliver = deliver
        self._batcher: AlterPartitionBatcher[TopicPartition] = AlterPartitionBatcher()
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.requests_sent = 0  # for tests and metrics

    def start(self) -> None:
        self._thread.start()

    def shutdown(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def submit(self, tp: TopicPartition, request: pr.SendAlterPartition) -> None:
        """Queue a partition's ISR change; it replaces one of the same partition that
        was not sent yet."""
        with self._cond:
            self._batcher.submit(tp, request)
            self._cond.notify()

    def pending(self) -> int:
        with self._cond:
            return self._batcher.pending

    def _take(self) -> list[tuple[TopicPartition, pr.SendAlterPartition]] | None:
        with self._cond:
            while not self._stopped:
                batch = self._batcher.next_batch()
                if batch is not None:
                    return batch
                self._cond.wait()
            return None

    def _run(self) -> None:
        backoff = BACKOFF_MIN_S
        while True:
            batch = self._take()
            if batch is None:
                return
            changes = [
                IsrChange(
                    tp[0], tp[1], r.leader_epoch, r.partition_epoch, r.new_isr, r.broker_epochs
                )
                for tp, r in batch
            ]
            try:
                results = self._send(changes)
                self.requests_sent += 1
            except Exception as e:  # noqa: BLE001 - any failure: retry after a backoff
                _log.warning("alter_partition_failed", items=len(batch), error=str(e)[:200])
                with self._cond:
                    self._batcher.failed()
                    if not self._stopped:
                        self._cond.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)
                continue
            backoff = BACKOFF_MIN_S
            with self._cond:
                self._batcher.answered()
            assert len(results) == len(batch), "one result per change"
            for (tp, request), result in zip(batch, results, strict=True):
                self._deliver(
                    tp,
                    pr.AlterPartitionResponse(
                        result.error,
                        request.request_id,
                        result.leader_epoch,
                        result.partition_epoch,
                        result.isr,
                    ),
                )
            time.sleep(0)  # let the replicas' threads run between requests
