"""Reading a node's Prometheus endpoint in tests and tools: where it listens (from the
node's `node_started` event) and every sample it serves."""

from __future__ import annotations

import json
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from .node_process import NodeProcess

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def metrics_port(node: NodeProcess) -> int:
    for line in reversed(node.log_path.read_text().splitlines()):
        if '"event":"node_started"' in line:
            return int(json.loads(line)["metrics_port"])
    raise AssertionError("the node logged no node_started")


def scrape(port: int) -> Samples:
    """Every sample of the endpoint, by (name, sorted labels)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)
