"""Kafka's AlterPartitionManager: a broker's ISR changes go to the controller in one
request at a time, whatever the number of partitions.

Replicas decide ISR changes (`PartitionReplica` emits `SendAlterPartition`); this
class only carries them. Pending changes are kept one per partition (a newer change
of a partition replaces an older one not yet sent), one thread sends them all in
one request, and the answers are handed back per partition. A failed request (no
controller, a failover) puts its changes back unless newer ones came meanwhile, and
the next try waits a backoff that doubles up to a bound. Nothing here grows with
the load: one thread, at most one pending change per hosted partition.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from seglog.replication import partition_replica as pr

from .controller_requests import IsrChange
from .event_log import EventLogger

TopicPartition = tuple[str, int]
_log = EventLogger("alter_partition")

MAX_ITEMS_PER_REQUEST = 2_000
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
        self._pending: dict[TopicPartition, pr.SendAlterPartition] = {}
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
            self._pending[tp] = request
            self._cond.notify()

    def pending(self) -> int:
        with self._cond:
            return len(self._pending)

    def _take(self) -> list[tuple[TopicPartition, pr.SendAlterPartition]] | None:
        with self._cond:
            while not self._pending and not self._stopped:
                self._cond.wait()
            if self._stopped:
                return None
            batch = []
            for tp in list(self._pending)[:MAX_ITEMS_PER_REQUEST]:
                batch.append((tp, self._pending.pop(tp)))
            return batch

    def _put_back(self, batch: list[tuple[TopicPartition, pr.SendAlterPartition]]) -> None:
        with self._cond:
            for tp, request in batch:
                self._pending.setdefault(tp, request)  # a newer change wins

    def _run(self) -> None:
        backoff = BACKOFF_MIN_S
        while True:
            batch = self._take()
            if batch is None:
                return
            changes = [
                IsrChange(tp[0], tp[1], r.leader_epoch, r.partition_epoch, r.new_isr)
                for tp, r in batch
            ]
            try:
                results = self._send(changes)
                self.requests_sent += 1
            except Exception as e:  # noqa: BLE001 - any failure: retry after a backoff
                _log.warning("alter_partition_failed", items=len(batch), error=str(e)[:200])
                self._put_back(batch)
                with self._cond:
                    if not self._stopped:
                        self._cond.wait(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX_S)
                continue
            backoff = BACKOFF_MIN_S
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
