"""Kafka's DeleteRecords on the partitions this node leads, and the low watermark
its answer waits for."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Sequence

from seglog.storage.disk_and_clock import plain_monotonic_s
from seglog.storage.errors import StorageError

from .event_log import EventLogger
from .hosted_partition import HostedPartition, PartitionError, TopicPartition
from .partition_requests import OffsetResult

_log = EventLogger("replica_manager")
DELETE_RECORDS_POLL_S = 0.02


def delete_records(
    wanted: Sequence[tuple[TopicPartition, int]],
    timeout_ms: int,
    alive: Callable[[int], bool],
    *,
    node_id: int,
    hosted_or_error: Callable[[TopicPartition], HostedPartition],
    wake: Callable[[Iterable[TopicPartition]], None],
    stopped: threading.Event,
) -> list[OffsetResult]:
    """Each log start offset moves to its requested offset (-1: the high watermark;
    beyond it, or below -1, OFFSET_OUT_OF_RANGE), the followers adopt it from their
    next fetch answer (woken now), and each answer waits until the low watermark — the
    least start offset of the leader and its live followers, as they report it —
    reaches the request (REQUEST_TIMED_OUT after `timeout_ms`). The result's offset is
    that low watermark. Retention then removes the segments wholly below the start
    offset, and the log manager's checkpoint records it."""
    results: list[OffsetResult] = []
    targets: list[tuple[int, HostedPartition, int]] = []
    for i, (tp, offset) in enumerate(wanted):
        try:
            hp = hosted_or_error(tp)
            with hp.plog.lock:
                if not hp.replica.is_leader:
                    raise PartitionError(
                        "NOT_LEADER_OR_FOLLOWER",
                        f"{tp[0]}-{tp[1]}: node {node_id} is not its leader",
                    )
                log = hp.plog.log
                if not log.config.delete:
                    raise PartitionError(
                        "POLICY_VIOLATION",
                        f"records of {tp[0]}-{tp[1]} cannot be deleted: its "
                        f"cleanup.policy does not include delete",
                    )
                target = log.high_watermark if offset == -1 else offset
                if target < 0 or target > log.high_watermark:
                    raise PartitionError(
                        "OFFSET_OUT_OF_RANGE",
                        f"{tp[0]}-{tp[1]}: cannot delete records before offset {offset}: "
                        f"the high watermark is {log.high_watermark}",
                    )
                log.maybe_increment_log_start_offset(target)
            results.append(OffsetResult(offset=-1))
            targets.append((i, hp, target))
        except (PartitionError, StorageError) as e:
            results.append(OffsetResult(error_name=e.error_name, error_message=str(e)))
    if targets:
        _log.info(
            "records_deleted",
            partitions=[f"{hp.tp[0]}-{hp.tp[1]}:{t}" for _i, hp, t in targets],
        )
        wake(hp.tp for _i, hp, _t in targets)  # the followers learn it
    deadline = plain_monotonic_s() + max(timeout_ms, 0) / 1000
    while targets:
        waiting = []
        for i, hp, target in targets:
            low = low_watermark(hp, alive)
            if low >= target:
                results[i] = OffsetResult(offset=low)
            else:
                waiting.append((i, hp, target))
        targets = waiting
        if not targets:
            break
        if plain_monotonic_s() >= deadline or stopped.is_set():
            for i, hp, target in targets:
                results[i] = OffsetResult(
                    error_name="REQUEST_TIMED_OUT",
                    error_message=f"{hp.tp[0]}-{hp.tp[1]}: the replicas' low watermark "
                    f"{low_watermark(hp, alive)} did not reach {target} in "
                    f"{timeout_ms} ms",
                )
            break
        # The followers' start offsets come with their fetches: look again shortly
        # (a bounded wait, on a delayed thread of the Kafka listener).
        time.sleep(DELETE_RECORDS_POLL_S)
    return results


def low_watermark(hp: HostedPartition, alive: Callable[[int], bool]) -> int:
    """Kafka's lowWatermarkIfLeader: the least log start offset of the leader and its
    followers on live brokers."""
    with hp.plog.lock:
        low = hp.plog.log.log_start_offset
        for r, fs in hp.replica.followers.items():
            if alive(r):
                low = min(low, fs.log_start_offset)
    return low
