"""The `seglog` Spark data source: a seglog topic read and written the way Spark's
Kafka source reads and writes a Kafka topic (same options, same schema, same
offsets JSON in the checkpoint).

    from seglog.pipeline import register
    register(spark)
    df = (spark.read.format("seglog")
          .option("bootstrap.servers", "127.0.0.1:9192")
          .option("subscribe", "events")
          .load())

Planning (partitions, offsets, rate limits, data-loss checks) runs on the driver;
each input partition is one [start, end) range that an executor reads straight
from the partition's leader (`range_reader.py`) and hands over as Arrow batches.

Streaming: the offsets are Spark's Kafka JSON. With PySpark >= 4.2 the reader
takes part in admission control (`latestOffset(start, limit)`,
`getDefaultReadLimit`) and in Trigger.AvailableNow (`prepareForTriggerAvailableNow`),
so maxOffsetsPerTrigger holds in every trigger, AvailableNow included. Older
PySpark calls `latestOffset()` with no arguments: the reader then caps from the
end of the batch it planned last (initialOffset for a new query); the first
trigger after a restart on such a version reads all that is available, and
AvailableNow is Spark's own wrapper (one batch, no cap).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import StructType

from .offsets import (
    OffsetRange,
    PartitionOffsets,
    missing_range_message,
    offsets_from_dict,
    offsets_to_dict,
    rate_limit,
    report_data_loss,
    split_ranges,
)
from .options import SinkOptions, SourceOptions
from .planner import ClusterView
from .schema import spark_schema

try:  # PySpark >= 4.2: admission control and Trigger.AvailableNow for Python sources
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - older PySpark

    class ReadLimit:  # type: ignore[no-redef]
        pass

    class ReadAllAvailable(ReadLimit):  # type: ignore[no-redef]
        pass

    class ReadMaxRows(ReadLimit):  # type: ignore[no-redef]
        def __init__(self, max_rows: int) -> None:
            self.max_rows = max_rows

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass


class SeglogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "seglog"

    def schema(self) -> StructType:
        return spark_schema(_include_headers(self.options))

    def reader(self, schema: StructType) -> DataSourceReader:
        _check_schema(schema, self.schema())
        return SeglogBatchReader(SourceOptions.parse(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        _check_schema(schema, self.schema())
        return SeglogStreamReader(SourceOptions.parse(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from .sink import SeglogWriter

        return SeglogWriter(SinkOptions.parse(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from .sink import SeglogStreamWriter

        return SeglogStreamWriter(SinkOptions.parse(self.options), schema)


def _include_headers(options: Any) -> bool:
    return str(options.get("includeHeaders", "false")).strip().lower() == "true"


def _check_schema(given: StructType, fixed: StructType) -> None:
    if given.fieldNames() != fixed.fieldNames():
        raise ValueError(
            "the seglog source has a fixed schema (Spark's Kafka schema) and cannot be "
            f"given another one: {given.simpleString()}"
        )


def _read(partition: InputPartition, options: SourceOptions) -> Iterator[pa.RecordBatch]:
    if isinstance(partition, OffsetRange):
        # Imported here, on the executor: the driver's planning process (one per query)
        # does not need the decoder, and would pay for its imports on every query.
        from .range_reader import read_range

        yield from read_range(partition, options)
    # else: Spark's placeholder partition for a query with nothing to read


class SeglogBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        o = self.options
        view = ClusterView(o)
        try:
            tps = view.partitions()
            start = view.resolve(o.starting, tps, "starting")
            end = view.resolve(o.ending, tps, "ending")
        finally:
            view.close()
        ranges = []
        for tp in tps:
            if start[tp] > end[tp]:
                raise ValueError(
                    f"the starting offset {start[tp]} is after the ending offset {end[tp]} "
                    f"for topic {tp.topic!r} partition {tp.partition}: startingOffsets "
                    f"({o.starting.describe()}) or endingOffsets ({o.ending.describe()}) "
                    f"is wrong, or the topic was recreated"
                )
            ranges.append(OffsetRange(tp.topic, tp.partition, start[tp], end[tp]))
        return split_ranges(ranges, o.min_partitions, o.max_records_per_partition)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition, self.options)


class SeglogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self.view = ClusterView(options)
        # Trigger.AvailableNow: the offsets at query start; nothing past them is read.
        self._target: PartitionOffsets | None = None
        # For PySpark < 4.2, whose latestOffset() gets no start: the last planned end.
        self._last_end: PartitionOffsets | None = None
        self._latest: PartitionOffsets | None = None
        # minOffsetsPerTrigger: when the last micro-batch was planned (monotonic s).
        self.clock = time.monotonic
        self._last_trigger = self.clock()

    def __getstate__(self) -> dict[str, Any]:
        # Spark pickles a fresh reader to the executors: only the options travel.
        return {"options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["options"])  # type: ignore[misc]

    def initialOffset(self) -> dict:
        tps = self.view.partitions()
        offsets = self.view.resolve(self.options.starting, tps, "starting")
        self._last_end = offsets
        return offsets_to_dict(offsets)

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.options.max_offsets_per_trigger
        return ReadMaxRows(n) if n is not None else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self.view.latest(self.view.partitions())

    def latestOffset(self, start: dict | None = None, limit: ReadLimit | None = None) -> dict:
        latest = self.view.latest(self.view.partitions())
        if self._target is not None:
            # Partitions created after the query started are not part of AvailableNow.
            latest = {
                tp: min(off, self._target[tp]) for tp, off in latest.items() if tp in self._target
            }
        self._latest = latest
        if start is not None:
            begin: PartitionOffsets | None = offsets_from_dict(start)
        else:
            begin = self._last_end
        max_rows = self._max_rows(limit)
        if begin is None:
            return offsets_to_dict(latest)
        new = [tp for tp in latest if tp not in begin]
        from_offsets = {**self.view.earliest(new), **begin} if new else begin
        if self._wait_for_more(from_offsets, latest):
            return offsets_to_dict(begin)  # the same offsets: Spark runs no micro-batch
        if max_rows is None:
            return offsets_to_dict(latest)
        return offsets_to_dict(rate_limit(max_rows, from_offsets, latest))

    def _wait_for_more(self, start: PartitionOffsets, latest: PartitionOffsets) -> bool:
        """minOffsetsPerTrigger: skip a trigger while fewer offsets than that are new,
        until maxTriggerDelay has passed since the last micro-batch (as Spark's Kafka
        source). Trigger.AvailableNow never waits."""
        o = self.options
        now = self.clock()
        if o.min_offsets_per_trigger is None or self._target is not None:
            self._last_trigger = now
            return False
        available = sum(max(0, end - start.get(tp, end)) for tp, end in latest.items())
        if (
            available < o.min_offsets_per_trigger
            and (now - self._last_trigger) * 1000 < o.max_trigger_delay_ms
        ):
            return True
        self._last_trigger = now
        return False

    def _max_rows(self, limit: ReadLimit | None) -> int | None:
        if limit is None:  # PySpark < 4.2 passes none: the option decides
            return self.options.max_offsets_per_trigger
        if isinstance(limit, ReadMaxRows):
            return int(limit.max_rows)
        return None

    def reportLatestOffset(self) -> dict | None:
        return offsets_to_dict(self._latest) if self._latest is not None else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        o = self.options
        begin = offsets_from_dict(start)
        until = offsets_from_dict(end)
        self._last_end = until
        gone = sorted(f"{tp.topic}-{tp.partition}" for tp in begin if tp not in until)
        if gone:
            report_data_loss(o.fail_on_data_loss, f"partitions {gone} are gone")
        new = [tp for tp in until if tp not in begin]
        new_start = self.view.earliest(new)
        for tp, off in new_start.items():
            if off != 0:
                report_data_loss(
                    o.fail_on_data_loss,
                    f"added partition {tp.topic}-{tp.partition} starts from offset {off} "
                    f"instead of 0; " + missing_range_message(tp, 0, off, off),
                )
        ranges = []
        for tp, e in until.items():
            s = begin.get(tp, new_start.get(tp, 0))
            if e < s:
                report_data_loss(
                    o.fail_on_data_loss,
                    f"the offset of topic {tp.topic!r} partition {tp.partition} went back "
                    f"from {s} to {e}: the topic was recreated or the partition truncated",
                )
                continue
            ranges.append(OffsetRange(tp.topic, tp.partition, s, e))
        return split_ranges(
            self._skip_retained(ranges), o.min_partitions, o.max_records_per_partition
        )

    def _skip_retained(self, ranges: list[OffsetRange]) -> list[OffsetRange]:
        """Check at planning what retention already removed: the error comes from the
        driver, naming the range; executors check again while they read."""
        nonempty = [r for r in ranges if r.size > 0]
        log_start = self.view.earliest(r.tp for r in nonempty)
        out = []
        for r in nonempty:
            first = log_start[r.tp]
            if first > r.start:
                report_data_loss(
                    self.options.fail_on_data_loss,
                    missing_range_message(r.tp, r.start, min(first, r.end), first),
                )
                r = OffsetRange(r.topic, r.partition, min(first, r.end), r.end)
            out.append(r)
        return out

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition, self.options)

    def commit(self, end: dict) -> None:
        """Nothing to do: positions live in Spark's checkpoint, not in the cluster."""

    def stop(self) -> None:
        self.view.close()
