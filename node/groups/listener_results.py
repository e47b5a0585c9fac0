"""The coordinator's answers as both listeners read them: the Kafka listener
(node/kafka/groups.py) and the gRPC servicer (grpc_servicer.py) wait for the same
results and turn them into their own responses with the same reading: how long to
wait, the result of the expected type even when the request was refused before it
reached a group, each committed partition's error, the offsets and errors per topic."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from concurrent.futures import Future
from dataclasses import replace
from typing import Any, TypeVar

from .group_config import GroupConfig
from .group_errors import COORDINATOR_NOT_AVAILABLE, NONE
from .group_messages import (
    CommitPartition,
    CommitResult,
    ErrorResult,
    FetchedOffset,
    JoinRequest,
    OffsetFetchResult,
    Result,
    TopicPartition,
)

ANSWER_TIMEOUT_S = 30.0
SYNC_TIMEOUT_S = ANSWER_TIMEOUT_S * 10  # a SyncGroup waits for the leader's assignment
JOIN_MARGIN_S = 10.0

R = TypeVar("R")


def join_timeout_s(config: GroupConfig, join: JoinRequest) -> float:
    """A JoinGroup waits for the rebalance: its rebalance timeout and the initial
    delay, with a margin."""
    wait_ms = join.rebalance_timeout_ms + config.group_initial_rebalance_delay_ms
    return wait_ms / 1000 + JOIN_MARGIN_S


def wait_answer(future: Future[Result], timeout_s: float = ANSWER_TIMEOUT_S) -> Result:
    """The answer, or COORDINATOR_NOT_AVAILABLE (retriable) if none came in time."""
    try:
        return future.result(timeout=timeout_s)
    except TimeoutError:
        return ErrorResult(COORDINATOR_NOT_AVAILABLE)


def error_of(result: Result) -> str:
    return getattr(result, "error", NONE)


def expected(result: Result, kind: type[R], refused: Callable[[str], R]) -> R:
    """`result` if it is a `kind`; else the request was refused before it reached a
    group (not the coordinator, loading, denied, no answer in time) and the answer
    is `refused` of that error."""
    return result if isinstance(result, kind) else refused(error_of(result))


def commit_partitions(topics: Iterable[Any], leader_epochs: bool = True) -> list[CommitPartition]:
    """An OffsetCommit request's partitions, from its topics (Kafka's field names in
    both listeners' requests); without `leader_epochs` (OffsetCommit before v6), -1."""
    return [
        CommitPartition(
            t.name,
            p.partition_index,
            p.committed_offset,
            p.committed_leader_epoch if leader_epochs else -1,
            p.committed_metadata or "",
        )
        for t in topics
        for p in t.partitions
    ]


def commit_errors(
    result: Result, partitions: Iterable[CommitPartition]
) -> dict[TopicPartition, str]:
    """Each committed partition's error: its own, or the refusal of the whole commit."""
    if isinstance(result, CommitResult):
        return {(t, p): e for t, p, e in result.errors}
    return {(p.topic, p.partition): error_of(result) for p in partitions}


def offsets_by_topic(result: OffsetFetchResult) -> list[tuple[str, list[FetchedOffset]]]:
    """The fetched offsets per topic, topics and partitions in the result's order."""
    out: dict[str, list[FetchedOffset]] = {}
    for f in result.offsets:
        out.setdefault(f.topic, []).append(f)
    return list(out.items())


def errors_by_topic(
    errors: Iterable[tuple[str, int, str]],
) -> list[tuple[str, list[tuple[int, str]]]]:
    """(topic, partition, error) rows per topic: (topic, [(partition, error)])."""
    out: dict[str, list[tuple[int, str]]] = {}
    for t, p, e in errors:
        out.setdefault(t, []).append((p, e))
    return list(out.items())


def stable_only(result: OffsetFetchResult, pending: set[TopicPartition]) -> OffsetFetchResult:
    """OffsetFetch with require_stable (a read_committed consumer's): a partition whose
    offset is pending in an open transaction (`pending`) answers UNSTABLE_OFFSET_COMMIT,
    and the client asks again once the transaction ended."""
    if result.error != NONE or not pending:
        return result
    offsets = tuple(
        replace(f, error="UNSTABLE_OFFSET_COMMIT") if (f.topic, f.partition) in pending else f
        for f in result.offsets
    )
    return replace(result, offsets=offsets)
