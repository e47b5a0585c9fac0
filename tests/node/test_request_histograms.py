"""The lock-free request histograms render exactly what prometheus-client's own
Histogram renders for the same observations, made from several threads."""

from __future__ import annotations

import random
import threading

import pytest
from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.exposition import generate_latest

from seglog.node.metrics import REQUEST_MS_BUCKETS
from seglog.node.request_histograms import LOCAL, TOTAL, RequestHistograms

NAMES = [
    ("t_totaltimems", "total"),
    ("t_requestqueuetimems", "queue"),
    ("t_localtimems", "local"),
    ("t_remotetimems", "remote"),
    ("t_responsesendtimems", "send"),
]


def _samples(text: bytes) -> dict[str, float]:
    """The samples, without the `_created` series only the library's own has."""
    out = {}
    for line in text.decode().splitlines():
        if line and not line.startswith("#") and "_created" not in line:
            series, _, value = line.rpartition(" ")
            out[series] = float(value)
    return out


def test_sharded_histograms_render_as_prometheus_client_histograms() -> None:
    ours = RequestHistograms(NAMES, REQUEST_MS_BUCKETS)
    mine = CollectorRegistry()
    mine.register(ours)
    theirs = CollectorRegistry()
    reference = [
        Histogram(name, doc, ["request", "listener"], buckets=REQUEST_MS_BUCKETS, registry=theirs)
        for name, doc in NAMES
    ]
    rng = random.Random(7)
    # Bucket bounds themselves, values between them and beyond the last.
    values = [*REQUEST_MS_BUCKETS, 0.0, 31000.0] + [rng.uniform(0, 40000) for _ in range(400)]
    lock = threading.Lock()

    def observe(thread: int) -> None:
        for i, value in enumerate(values):
            api = ("Produce", "Fetch")[(i + thread) % 2]
            listener = ("PLAINTEXT", "GRPC")[thread % 2]
            which = TOTAL if i % 3 else LOCAL
            ours.observe(ours.row(api, listener)[which], value)
            with lock:
                reference[which].labels(api, listener).observe(value)

    threads = [threading.Thread(target=observe, args=(t,)) for t in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got, want = _samples(generate_latest(mine)), _samples(generate_latest(theirs))
    assert sorted(got) == sorted(want)
    for series, value in want.items():  # sums: the threads' shards add in another order
        assert got[series] == pytest.approx(value, rel=1e-12), series
    assert any('le="+Inf"' in series for series in got)
    assert not any("t_remotetimems" in line for line in got), "never observed: not rendered"
