"""What the page-visits job (pipeline/examples) must have written, for the tests that
run it on a Spark cluster: the visits per page and one-minute window of the events,
for the windows the watermark closed, against what the `page_visit_counts` topic
holds."""

from __future__ import annotations

import calendar
import json
import time
from collections.abc import Iterable, Mapping
from typing import Any

from seglog.client.cluster import TopicPartition
from seglog.client.consumer import Consumer

WINDOW_MS = 60_000


def closed_window_counts(events: Iterable[Mapping[str, Any]]) -> dict[tuple[int, str], int]:
    """Visits per (window start ms, page) of the windows a one-minute watermark behind
    the last event closed."""
    events = list(events)
    expected: dict[tuple[int, str], int] = {}
    for e in events:
        window = e["ts"] // WINDOW_MS * WINDOW_MS
        expected[(window, e["page"])] = expected.get((window, e["page"]), 0) + 1
    watermark = max(e["ts"] for e in events) - WINDOW_MS
    return {k: n for k, n in expected.items() if k[0] + WINDOW_MS <= watermark}


def written_window_counts(
    bootstrap: str, timeout_s: float, partitions: int = 3
) -> dict[tuple[int, str], int]:
    """The counts the job wrote into `page_visit_counts` (the last one per window and
    page), read up to the end offsets or the timeout."""
    got: dict[tuple[int, str], int] = {}
    tps = [TopicPartition("page_visit_counts", p) for p in range(partitions)]
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign(tps)
        total = sum(consumer.end_offsets(tps).values())
        seen = 0
        deadline = time.monotonic() + timeout_s
        while seen < total and time.monotonic() < deadline:
            for recs in consumer.poll(timeout_ms=500).values():
                for r in recs:
                    seen += 1
                    v = json.loads(r.value)
                    start = calendar.timegm(time.strptime(v["window_start"], "%Y-%m-%dT%H:%M:%SZ"))
                    got[(start * 1000, v["page"])] = v["count"]
    return got
