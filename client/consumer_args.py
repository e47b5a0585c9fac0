"""The consumer's argument checks: what kafka-python accepts, refused early (before
any request) with a message that names the argument."""

from __future__ import annotations

import math
from collections.abc import Mapping

from .cluster import TopicPartition
from .fetcher import EARLIEST, LATEST, NONE
from .group_coordinator import OffsetAndMetadata

RESET_POLICIES = {
    "earliest": EARLIEST,
    "smallest": EARLIEST,
    "latest": LATEST,
    "largest": LATEST,
    "none": NONE,
}
# offsets_for_times wants epoch milliseconds. 10^11 ms is March 1973 while
# 10^11 s is the year 5138: a smaller positive value is almost surely seconds.
# 10^14 ms is the year 5138 too: a larger value is micro- or nanoseconds.
MIN_PLAUSIBLE_TIMESTAMP_MS = 10**11
MAX_PLAUSIBLE_TIMESTAMP_MS = 10**14


# Kafka's isolation.level values, as the Fetch and ListOffsets requests carry them.
ISOLATION_LEVELS = {"read_uncommitted": 0, "read_committed": 1}


def as_tp(obj: object) -> TopicPartition:
    """Ours, or anything with .topic and .partition (kafka-python's namedtuple)."""
    if isinstance(obj, TopicPartition):
        return obj
    topic = getattr(obj, "topic", None)
    partition = getattr(obj, "partition", None)
    if isinstance(topic, str) and isinstance(partition, int) and not isinstance(partition, bool):
        return TopicPartition(topic, partition)
    raise TypeError(f"expected a TopicPartition, got {obj!r}")


def positive_int(name: str, value: object, minimum: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def to_seconds(timeout_ms: float | None, default_ms: float) -> float:
    ms = default_ms if timeout_ms is None else timeout_ms
    if not isinstance(ms, int | float) or isinstance(ms, bool) or math.isnan(ms) or ms < 0:
        raise ValueError(f"timeout_ms must be a non-negative number, got {timeout_ms!r}")
    return ms / 1000


def check_timestamp_ms(tp: TopicPartition, ts: object) -> int:
    """A target time for offsets_for_times: epoch milliseconds, refused when it is
    negative or clearly in another unit."""
    if isinstance(ts, bool) or not isinstance(ts, int | float) or not math.isfinite(ts):
        raise ValueError(f"target time for {tp.topic}-{tp.partition} must be a number, got {ts!r}")
    if ts < 0:
        raise ValueError(
            f"target time for {tp.topic}-{tp.partition} is {ts}: it cannot be negative"
        )
    if 0 < ts < MIN_PLAUSIBLE_TIMESTAMP_MS:
        raise ValueError(
            f"target time for {tp.topic}-{tp.partition} is {ts}, which looks like seconds "
            f"since the epoch; offsets_for_times wants milliseconds (e.g. "
            f"int(time.time() * 1000)). Values below {MIN_PLAUSIBLE_TIMESTAMP_MS} (March "
            f"1973 in ms) are refused"
        )
    if ts >= MAX_PLAUSIBLE_TIMESTAMP_MS:
        raise ValueError(
            f"target time for {tp.topic}-{tp.partition} is {ts}, which looks like micro- or "
            f"nanoseconds since the epoch; offsets_for_times wants milliseconds"
        )
    return int(ts)


def offsets_arg(
    offsets: Mapping[TopicPartition, object],
) -> dict[TopicPartition, OffsetAndMetadata]:
    """commit()'s offsets: per partition an int or anything with .offset (kafka-python's
    OffsetAndMetadata too)."""
    out = {}
    for p, value in offsets.items():
        tp = as_tp(p)
        if isinstance(value, int) and not isinstance(value, bool):
            om = OffsetAndMetadata(value)
        elif isinstance(getattr(value, "offset", None), int):
            metadata = getattr(value, "metadata", "") or ""
            epoch = getattr(value, "leader_epoch", -1)
            om = OffsetAndMetadata(value.offset, str(metadata), -1 if epoch is None else epoch)  # type: ignore[attr-defined]
        else:
            raise TypeError(
                f"offset for {tp.topic}-{tp.partition} must be an int or an "
                f"OffsetAndMetadata, got {value!r}"
            )
        if om.offset < 0:
            raise ValueError(f"offset for {tp.topic}-{tp.partition} must be >= 0, got {om.offset}")
        out[tp] = om
    return out
