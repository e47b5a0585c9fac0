"""Offsets as Spark's Kafka source spells them, and the offset ranges Spark tasks read.

The JSON is Spark's: `{"t1": {"0": 42, "1": -2}}` — topic → partition (as a
string) → offset, with -2 for earliest and -1 for latest in the starting and
ending options. The same JSON (concrete offsets only) is the streaming offset
stored in the query's checkpoint, so a checkpoint reads the same as Kafka's.

A range is [start, end) of one topic-partition; `split_ranges` and `rate_limit`
follow Spark's `KafkaOffsetRangeCalculator` and `KafkaMicroBatchStream.rateLimit`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pyspark.sql.datasource import InputPartition

from seglog.client.cluster import TopicPartition

EARLIEST = -2
LATEST = -1

PartitionOffsets = dict[TopicPartition, int]


class DataLossError(RuntimeError):
    """Offsets a query needs are gone (retention, a deleted topic or partition)."""


DATA_LOSS_HINT = (
    "Some data may have been lost because it is not available in seglog any more: either "
    "retention deleted it or the topic was deleted before all of it was processed. If you "
    "don't want the query to fail in such cases, set the source option failOnDataLoss to "
    "false."
)


def report_data_loss(fail: bool, message: str) -> None:
    """Raise DataLossError when failOnDataLoss, else let the caller skip ahead."""
    if fail:
        raise DataLossError(f"{message}. {DATA_LOSS_HINT}")


def missing_range_message(tp: TopicPartition, start: int, end: int, log_start: int) -> str:
    return (
        f"topic {tp.topic!r} partition {tp.partition}: offsets [{start}, {end}) are no longer "
        f"available (the log now starts at offset {log_start})"
    )


# --- JSON ---------------------------------------------------------------------------------


def parse_offsets_json(text: str, option: str) -> PartitionOffsets:
    """`{"t": {"0": 5}}` → {TopicPartition("t", 0): 5}; a clear error otherwise."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(
            f"{option} must be 'earliest', 'latest' or JSON like "
            f'{{"topic": {{"0": 23, "1": -2}}}}, got {text!r}: {e}'
        ) from None
    return offsets_from_dict(data, option)


def offsets_from_dict(data: object, option: str = "offsets") -> PartitionOffsets:
    if not isinstance(data, dict):
        raise ValueError(f"{option} must be a JSON object of topics, got {data!r}")
    out: PartitionOffsets = {}
    for topic, parts in data.items():
        if not isinstance(parts, dict):
            raise ValueError(
                f"{option}: topic {topic!r} must map partition ids to offsets, got {parts!r}"
            )
        for partition, offset in parts.items():
            try:
                p = int(partition)
            except (TypeError, ValueError):
                raise ValueError(
                    f"{option}: partition {partition!r} of topic {topic!r} is not an integer"
                ) from None
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST:
                raise ValueError(
                    f"{option}: offset of {topic}-{p} must be an integer >= -2, got {offset!r}"
                )
            out[TopicPartition(topic, p)] = offset
    return out


def offsets_to_dict(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """Spark's layout, sorted by topic then partition so equal offsets are equal JSON."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets, key=lambda t: (t.topic, t.partition)):
        out.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return out


def offsets_json(offsets: Mapping[TopicPartition, int]) -> str:
    return json.dumps(offsets_to_dict(offsets), separators=(",", ":"))


# --- ranges ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetRange(InputPartition):
    """[start, end) of one topic-partition: one Spark task reads exactly these offsets."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        return self.end - self.start


def split_ranges(
    ranges: Iterable[OffsetRange],
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[OffsetRange]:
    """Empty ranges dropped; with minPartitions, large ranges split so there are
    about that many (Spark's proportional split); with maxRecordsPerPartition,
    no range holds more records than that."""
    out = [r for r in ranges if r.size > 0]
    if min_partitions is not None and len(out) < min_partitions:
        total = sum(r.size for r in out)
        ideal = total / min_partitions
        out = [
            piece
            for r in out
            for piece in _split(r, max(1, round(r.size / ideal)) if ideal > 0 else 1)
        ]
    if max_records_per_partition is not None:
        out = [
            piece for r in out for piece in _split(r, math.ceil(r.size / max_records_per_partition))
        ]
    return out


def _split(r: OffsetRange, parts: int) -> list[OffsetRange]:
    if parts <= 1:
        return [r]
    bounds = [r.start + r.size * i // parts for i in range(parts + 1)]
    return [
        OffsetRange(r.topic, r.partition, lo, hi)
        for lo, hi in zip(bounds, bounds[1:], strict=False)
        if hi > lo
    ]


def rate_limit(
    limit: int, start: Mapping[TopicPartition, int], end: Mapping[TopicPartition, int]
) -> PartitionOffsets:
    """maxOffsetsPerTrigger: `limit` offsets shared in proportion to each partition's
    backlog. As in Spark a share below one rounds up, so that no partition starves
    (a trigger may then pass the limit by at most the number of partitions)."""
    sizes = {tp: e - start[tp] for tp, e in end.items() if tp in start and e - start[tp] > 0}
    total = sum(sizes.values())
    if total < 1:
        return dict(end)
    out: PartitionOffsets = {}
    for tp, e in end.items():
        size = sizes.get(tp)
        if size is None:
            out[tp] = e
            continue
        share = limit * (size / total)
        out[tp] = min(e, start[tp] + int(math.ceil(share) if share < 1 else math.floor(share)))
    return out
