"""A fetch's read of the partitions it names, one pass (Kafka's readFromLocalLog):
a follower's fetch goes through its partition's replica (which updates the
follower's state and may move the HW), a consumer's reads up to the HW. Waiting
for data between passes is the replica manager's (its fetch purgatory)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from seglog.replication import partition_replica as pr
from seglog.storage.errors import StorageError

from .hosted_partition import HostedPartition, PartitionError, TopicPartition
from .partition_requests import FetchResult, FetchSpec, ReplicaMetrics
from .replication_throttles import ReplicationThrottles


def mark(hp: HostedPartition) -> tuple[int, ...]:
    """What a waiting fetch's answer for the partition depends on: while it stays
    the same, a re-read would return the same empty answer."""
    log = hp.plog.log
    return (
        log.log_end_offset,
        log.high_watermark,
        log.log_start_offset,
        hp.replica.leader_epoch,
    )


class PartitionReads:
    def __init__(
        self,
        hosted_or_error: Callable[[TopicPartition], HostedPartition],
        schedule_isr: Callable[[HostedPartition], None],
        carry_out: Callable[[HostedPartition, Sequence[pr.Action]], None],
        throttles: ReplicationThrottles,
        metrics: Callable[[], ReplicaMetrics | None],
        clock: Callable[[], int],
    ) -> None:
        self._hosted_or_error = hosted_or_error
        self._schedule_isr = schedule_isr  # after a follower's fetch moved its ISR timer
        self._carry_out = carry_out  # what the replicas decided (HW moves wake fetches)
        self.throttles = throttles
        self._metrics = metrics
        self._clock = clock  # the replicas' timer clock, in ms

    def read(
        self,
        specs: Sequence[FetchSpec],
        replica_id: int,
        replica_epoch: int,
        max_bytes: int,
        previous: list[FetchResult] | None = None,
        marks: list[tuple[int, ...] | None] | None = None,
        zero_copy: bool = False,
        read_before: Sequence[bool] | None = None,
    ) -> list[FetchResult]:
        """One pass over a fetch's partitions. On a waiting fetch's later passes
        (`previous`) a partition whose state is unchanged since its last empty answer
        keeps that answer: it is not re-read and its follower is not updated again
        (Kafka updates a follower's state once per fetch, on arrival). A partition
        this fetch has `read_before` is read without updating its follower (Kafka's
        readFromPurgatory)."""
        results = []
        budget = max_bytes
        first_with_data = True
        for i, spec in enumerate(specs):
            tp = (spec.topic, spec.partition)
            result = FetchResult(spec.topic, spec.partition)
            try:
                hp = self._hosted_or_error(tp)
                limit = max(min(spec.max_bytes, budget), 0)
                if not first_with_data and limit == 0:
                    results.append(result)
                    continue
                if (
                    previous is not None
                    and marks is not None
                    and marks[i] is not None
                    and marks[i] == mark(hp)
                ):
                    results.append(previous[i])
                    continue
                with hp.plog.lock:
                    if marks is not None:
                        marks[i] = mark(hp)
                    result.leader = (hp.replica.leader_id, hp.replica.leader_epoch)
                    if replica_id >= 0:
                        again = read_before is not None and read_before[i]
                        response, actions = hp.replica.handle_fetch(
                            pr.FetchRequest(
                                replica_id,
                                spec.fetch_offset,
                                spec.current_leader_epoch,
                                spec.last_fetched_epoch,
                                spec.log_start_offset,
                                limit if not first_with_data else max(limit, 1),
                                replica_epoch,
                                from_purgatory=again,
                            ),
                            self._clock(),
                        )
                        if not again:
                            self._schedule_isr(hp)
                        result.error_name = response.error
                        result.high_watermark = response.high_watermark
                        result.log_start_offset = response.log_start_offset
                        result.records = response.records
                        if result.records and not self.throttles.leader_sends(
                            hp, replica_id, len(result.records)
                        ):
                            result.records = b""
                            if marks is not None:
                                # Not seen: a waiting fetch or the fetch session
                                # reads it again, quota permitting.
                                marks[i] = None
                        if response.diverging_epoch is not None:
                            d = response.diverging_epoch
                            result.diverging_epoch = (d.epoch, d.end_offset)
                    else:
                        consumer = hp.replica.read_for_consumer(
                            spec.fetch_offset,
                            limit,
                            spec.current_leader_epoch,
                            zero_copy,
                            spec.read_committed,
                        )
                        actions = []
                        result.error_name = consumer.error
                        result.high_watermark = consumer.high_watermark
                        result.log_start_offset = consumer.log_start_offset
                        result.records = consumer.records
                        result.last_stable_offset = consumer.last_stable_offset
                        result.aborted_transactions = consumer.aborted
                        metrics = self._metrics()
                        if metrics is not None and consumer.records:
                            metrics.sent(spec.topic, len(consumer.records))
                self._carry_out(hp, actions)
            except (PartitionError, StorageError) as e:
                result.error_name, result.error_message = e.error_name, str(e)
            if result.error_name != "NONE" and not result.error_message:
                result.error_message = f"{result.error_name} for {tp[0]}-{tp[1]}"
            if result.records:
                first_with_data = False
                budget -= len(result.records)
            results.append(result)
        return results
