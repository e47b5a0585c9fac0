"""The few series the console reads from a node's /metrics (Prometheus text), parsed
without building every family: a node with thousands of partitions exports tens of
thousands of lines, and the console wants five names of them."""

from __future__ import annotations

import re
import urllib.request
from dataclasses import dataclass, field

PARTITION_SIZE = "kafka_log_log_size"
LOG_END_OFFSET = "kafka_log_log_logendoffset"
BYTES_IN = "kafka_server_brokertopicmetrics_bytesin_total"
BYTES_OUT = "kafka_server_brokertopicmetrics_bytesout_total"
MESSAGES_IN = "kafka_server_brokertopicmetrics_messagesin_total"
GROUP_LAG = "kafka_consumergroup_lag"
_WANTED = (PARTITION_SIZE, LOG_END_OFFSET, BYTES_IN, BYTES_OUT, MESSAGES_IN, GROUP_LAG)
_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass(slots=True)
class NodeMetrics:
    """One scrape of one node. Per partition this node hosts: its size in bytes and
    log end offset; per topic: the counters of what it appended and served as leader."""

    partition_size: dict[tuple[str, int], int] = field(default_factory=dict)
    log_end_offset: dict[tuple[str, int], int] = field(default_factory=dict)
    bytes_in: dict[str, float] = field(default_factory=dict)
    bytes_out: dict[str, float] = field(default_factory=dict)
    messages_in: dict[str, float] = field(default_factory=dict)
    # (group, topic, partition) -> lag, for the groups this node coordinates.
    group_lag: dict[tuple[str, str, int], int] = field(default_factory=dict)


def parse(text: str) -> NodeMetrics:
    out = NodeMetrics()
    for line in text.splitlines():
        if not line.startswith(_WANTED):
            continue
        m = _LINE.match(line)
        if m is None:
            continue
        name, labels_text, value_text = m.groups()
        labels = dict(_LABEL.findall(labels_text or ""))
        try:
            value = float(value_text)
        except ValueError:
            continue  # not a sample line of ours (a family whose name starts alike)
        topic = labels.get("topic")
        if topic is None:
            continue
        if name == GROUP_LAG:
            group, partition = labels.get("group"), labels.get("partition")
            if group is not None and partition is not None and partition.isdigit():
                out.group_lag[(group, topic, int(partition))] = int(value)
        elif name in (PARTITION_SIZE, LOG_END_OFFSET):
            partition = labels.get("partition")
            if partition is None or not partition.isdigit():
                continue
            target = out.partition_size if name == PARTITION_SIZE else out.log_end_offset
            target[(topic, int(partition))] = int(value)
        elif name == BYTES_IN:
            out.bytes_in[topic] = value
        elif name == BYTES_OUT:
            out.bytes_out[topic] = value
        elif name == MESSAGES_IN:
            out.messages_in[topic] = value
    return out


def scrape(url: str, timeout_s: float) -> NodeMetrics:
    """GET the node's /metrics; OSError when it does not answer."""
    with urllib.request.urlopen(url, timeout=timeout_s) as r:
        return parse(r.read().decode("utf-8", "replace"))
