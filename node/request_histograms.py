"""The request-time histograms (Kafka's RequestMetrics: total, queue, local, remote and
response-send time per API and listener), observed without a lock.

A request is observed five times; through prometheus-client's Histogram that is a
`labels()` child, a lock and two counter increments per observation — fifteen locked
observations per acks=all produce on the leader's loop. Here each observing thread (the
node's event loop, the gRPC threads) counts into a shard of its own, plain lists that
no other thread writes, and a scrape adds the shards up; prometheus-client still
renders them (a Collector yielding HistogramMetricFamily), under the same names,
labels and buckets as before."""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Iterator, Sequence

from prometheus_client.core import HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

# The histograms, in the order of a row's cells: (name, help).
TOTAL, QUEUE, LOCAL, REMOTE, SEND = range(5)

# A row: per histogram, its bucket counts (the last one +Inf) and then its sum.
Row = list[list[float]]


class RequestHistograms(Collector):
    def __init__(self, histograms: Sequence[tuple[str, str]], buckets: Sequence[float]) -> None:
        self._histograms = tuple(histograms)
        self._bounds = tuple(float(b) for b in buckets)
        self._les = [floatToGoString(b) for b in self._bounds] + ["+Inf"]
        self._local = threading.local()
        self._shards: list[dict[tuple[str, str], Row]] = []  # one per observing thread
        self._shards_lock = threading.Lock()  # taken once per thread, to add its shard

    def row(self, api: str, listener: str) -> Row:
        """This thread's cells for an API on a listener (to observe into)."""
        shard: dict[tuple[str, str], Row] | None = getattr(self._local, "shard", None)
        if shard is None:
            shard = self._local.shard = {}
            with self._shards_lock:
                self._shards.append(shard)
        key = (api, listener)
        row = shard.get(key)
        if row is None:
            width = len(self._bounds) + 2  # the buckets, +Inf, the sum
            row = shard[key] = [[0.0] * width for _ in self._histograms]
        return row

    def observe(self, cells: list[float], value: float) -> None:
        cells[bisect_left(self._bounds, value)] += 1
        cells[-1] += value

    def collect(self) -> Iterator[Metric]:
        with self._shards_lock:
            shards = list(self._shards)
        totals: dict[tuple[str, str], Row] = {}
        # Bounded by the threads that ever observed and the (API, listener) pairs.
        for shard in shards:
            for key, row in list(shard.items()):
                into = totals.get(key)
                if into is None:
                    totals[key] = [list(cells) for cells in row]
                    continue
                for mine, theirs in zip(into, row, strict=True):
                    for i, v in enumerate(theirs):
                        mine[i] += v
        for which, (name, doc) in enumerate(self._histograms):
            family = HistogramMetricFamily(name, doc, labels=["request", "listener"])
            for (api, listener), row in sorted(totals.items()):
                cells = row[which]
                running, buckets = 0.0, []
                for le, count in zip(self._les, cells[:-1], strict=True):
                    running += count
                    buckets.append((le, running))
                if running:
                    family.add_metric([api, listener], buckets, cells[-1])
            yield family

    def describe(self) -> Iterator[Metric]:
        for name, doc in self._histograms:
            yield HistogramMetricFamily(name, doc, labels=["request", "listener"])
