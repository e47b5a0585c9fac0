"""What a Fetch request asks for, read the same way for a consumer's and a
follower's: each partition as a FetchSpec, and the topics named by an id this node
does not know (v13+, KIP-516) answered UNKNOWN_TOPIC_ID."""

from __future__ import annotations

from typing import Any

from ..partition_requests import FetchResult, FetchSpec

DEFAULT_PARTITION_MAX_BYTES = 1 << 20


def fetch_spec(
    name: str, p: Any, version: int, replica: bool, read_committed: bool = False
) -> FetchSpec:
    """A partition of a Fetch: a follower's carries its last fetched epoch (KIP-320's
    divergence check); a consumer's current leader epoch counts from v9, and its
    isolation level (v4+) is `read_committed`."""
    return FetchSpec(
        name,
        p.partition,
        p.fetch_offset,
        p.current_leader_epoch if replica or version >= 9 else -1,
        p.partition_max_bytes if p.partition_max_bytes > 0 else DEFAULT_PARTITION_MAX_BYTES,
        p.last_fetched_epoch if replica else -1,
        p.log_start_offset,
        read_committed,
    )


def split_unknown(
    topics: list[tuple[str, Any]], ids: dict[str, Any] | None
) -> tuple[list[tuple[str, Any]], list[FetchResult]]:
    """The topics this node knows, and an UNKNOWN_TOPIC_ID answer for each partition of
    the others (a deleted or recreated topic, or metadata behind the client's)."""
    if ids is None:
        return topics, []
    unknown = [
        FetchResult(name, p.partition, "UNKNOWN_TOPIC_ID")
        for name, t in topics
        if name not in ids
        for p in t.partitions
    ]
    return [(name, t) for name, t in topics if name in ids], unknown
