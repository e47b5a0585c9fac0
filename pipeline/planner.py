"""The driver's questions to the cluster: which partitions a query reads, where each
starts and ends now, and what the starting/ending options resolve to.

Runs where Spark plans (the driver's Python planner worker); executors never
use it. Partitions follow Kafka's rules for subscriptions: a subscribed topic
that does not exist yet has no partitions (a stream picks it up once created),
pattern subscriptions skip internal `__` topics, an assigned partition must exist.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from seglog.client.admin import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, Admin
from seglog.client.cluster import TopicPartition

from .offsets import (
    EARLIEST,
    LATEST,
    PartitionOffsets,
    missing_range_message,
    report_data_loss,
)
from .options import OffsetSpec, SourceOptions


class ClusterView:
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._admin: Admin | None = None

    @property
    def admin(self) -> Admin:
        if self._admin is None:
            self._admin = Admin(bootstrap_servers=self.options.bootstrap_servers)
        return self._admin

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None

    # --- partitions -------------------------------------------------------------------

    def partitions(self) -> list[TopicPartition]:
        """The query's partitions as the cluster has them now, sorted."""
        o = self.options
        if o.assign is not None:
            topics = sorted({tp.topic for tp in o.assign})
            existing = self._partitions_of(topics)
            missing = [tp for tp in o.assign if tp not in existing]
            if missing:
                names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in missing)
                raise ValueError(f"assigned partitions do not exist: {names}")
            return sorted(set(o.assign), key=_order)
        all_topics = self.admin.list_topics()
        if o.subscribe is not None:
            topics = [t for t in o.subscribe if t in all_topics]
        else:
            assert o.subscribe_pattern is not None
            pattern = re.compile(o.subscribe_pattern)
            topics = [t for t in all_topics if not t.startswith("__") and pattern.fullmatch(t)]
        return sorted(self._partitions_of(topics), key=_order)

    def _partitions_of(self, topics: list[str]) -> set[TopicPartition]:
        if not topics:
            return set()
        return {
            TopicPartition(d.name, p.partition)
            for d in self.admin.describe_topics(topics)
            for p in d.partitions
        }

    # --- offsets ----------------------------------------------------------------------

    def earliest(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        return self._list({tp: EARLIEST_TIMESTAMP for tp in tps})

    def latest(self, tps: Iterable[TopicPartition]) -> PartitionOffsets:
        return self._list({tp: LATEST_TIMESTAMP for tp in tps})

    def _list(self, specs: dict[TopicPartition, int]) -> PartitionOffsets:
        if not specs:
            return {}
        return {tp: r.offset for tp, r in self.admin.list_offsets(specs).items()}

    def resolve(self, spec: OffsetSpec, tps: list[TopicPartition], which: str) -> PartitionOffsets:
        """Concrete offsets of `tps` for a starting (`which`="starting") or ending spec.

        Explicit offsets outside [earliest, latest] are data loss for a start (Spark
        reports "consumer reset" there) and are clamped when failOnDataLoss=false."""
        if spec.kind == "earliest":
            return self.earliest(tps)
        if spec.kind == "latest":
            return self.latest(tps)
        if spec.kind == "timestamp":
            return self._by_timestamp({tp: spec.timestamp or 0 for tp in tps}, which)
        option = f"{which}Offsets" if spec.kind == "offsets" else f"{which}OffsetsByTimestamp"
        if set(spec.offsets) != set(tps):
            raise ValueError(
                f"{option} must name every partition of the query and nothing else; it names "
                f"{_names(spec.offsets)} but the query reads {_names(tps)}. Use -1 for latest "
                f"and -2 for earliest"
            )
        if spec.kind == "timestamps":
            return self._by_timestamp(spec.offsets, which)
        earliest = self.earliest(tps)
        latest = self.latest(tps)
        out: PartitionOffsets = {}
        for tp in tps:
            wanted = spec.offsets[tp]
            if wanted == EARLIEST:
                out[tp] = earliest[tp]
            elif wanted == LATEST:
                out[tp] = latest[tp]
            elif which == "starting" and not earliest[tp] <= wanted <= latest[tp]:
                report_data_loss(
                    self.options.fail_on_data_loss,
                    f"startingOffsets asks for offset {wanted} of topic {tp.topic!r} "
                    f"partition {tp.partition}, outside the offsets it holds "
                    f"[{earliest[tp]}, {latest[tp]})"
                    + (
                        "; " + missing_range_message(tp, wanted, earliest[tp], earliest[tp])
                        if wanted < earliest[tp]
                        else ""
                    ),
                )
                out[tp] = min(max(wanted, earliest[tp]), latest[tp])
            else:
                out[tp] = wanted
        return out

    def _by_timestamp(self, timestamps: PartitionOffsets, which: str) -> PartitionOffsets:
        """The first offset with a timestamp >= the target; where none is that late,
        the end of the partition (Spark: an error for starting unless the strategy is
        'latest')."""
        if not timestamps:
            return {}
        found = {tp: r.offset for tp, r in self.admin.list_offsets(timestamps).items()}
        none = [tp for tp, off in found.items() if off < 0]
        if none and which == "starting" and self.options.by_timestamp_strategy == "error":
            raise ValueError(
                f"no record at or after the starting timestamp in {_names(none)}; set "
                f"startingOffsetsByTimestampStrategy=latest to start those at the end"
            )
        if none:
            found.update(self.latest(none))
        return found


def _order(tp: TopicPartition) -> tuple[str, int]:
    return tp.topic, tp.partition


def _names(tps: Iterable[TopicPartition]) -> str:
    return "[" + ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(tps, key=_order)) + "]"
