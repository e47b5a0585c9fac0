"""What the console shows, computed without I/O from what the refresher gathered:
the cluster snapshot every viewer shares, its summary counts, rates between two
scrapes, and the topic list's server-side filter and pages."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from seglog.client.admin import TopicDescription

from .scrape import NodeMetrics

TOPICS_PER_PAGE = 50
# Points kept for each chart (one per refresh), and at most this many topics' and
# groups' histories (the busiest topics, the groups seen last), so memory is bounded
# however big the cluster.
HISTORY_POINTS = 120
MAX_HISTORIES = 500


@dataclass(frozen=True, slots=True)
class NodeView:
    node_id: int
    grpc_address: str
    kafka_listeners: str  # the node's `advertised.listeners` (or `listeners`), "" unknown
    rack: str  # `broker.rack`, "" when not set
    fenced: bool
    controller: bool  # the active controller (the Raft quorum's leader)
    quorum_role: str  # leader / follower / candidate, "unreachable" when it did not answer
    metrics_up: bool
    leader_of: int  # partitions it leads (metadata)
    replicas: int  # partitions it hosts a replica of (metadata)
    disk_bytes: int | None  # its partitions' sizes from its /metrics; None when unknown
    bytes_in_per_s: float | None
    bytes_out_per_s: float | None


@dataclass(frozen=True, slots=True)
class VoterView:
    node_id: int
    log_end: int
    lag: int
    last_caught_up_ms: int
    leader: bool


@dataclass(frozen=True, slots=True)
class QuorumView:
    leader_id: int
    term: int
    commit_index: int
    voters: tuple[VoterView, ...]


@dataclass(frozen=True, slots=True)
class TopicRow:
    name: str
    partitions: int
    replication_factor: int
    under_replicated: int
    offline: int
    size_bytes: int | None
    messages_in_per_s: float | None
    internal: bool


@dataclass(frozen=True, slots=True)
class Summary:
    topics: int
    partitions: int
    under_replicated: int
    offline: int
    online_nodes: int
    nodes: int


@dataclass(frozen=True)
class Snapshot:
    """One refresh: every viewer reads the same one until the next."""

    version: int
    taken_at: float  # wall clock, seconds
    cluster_id: str
    controller_id: int
    nodes: tuple[NodeView, ...]
    quorum: QuorumView | None
    topics: tuple[TopicDescription, ...]
    # From the partition leaders' /metrics: (topic, partition) -> bytes, log end offset.
    partition_size: Mapping[tuple[str, int], int] = field(default_factory=dict)
    log_end_offset: Mapping[tuple[str, int], int] = field(default_factory=dict)
    topic_rates: Mapping[str, TopicRates] = field(default_factory=dict)
    # (time, bytes in/s, bytes out/s) of the whole cluster, oldest first.
    history: tuple[tuple[float, float, float], ...] = ()
    errors: tuple[str, ...] = ()  # what this refresh could not get, shown on every page
    # Per topic (time, messages in/s); per group (time, total lag) from the nodes'
    # kafka_consumergroup_lag.
    topic_history: Mapping[str, tuple[tuple[float, float], ...]] = field(default_factory=dict)
    group_history: Mapping[str, tuple[tuple[float, float], ...]] = field(default_factory=dict)

    def topic(self, name: str) -> TopicDescription | None:
        return next((t for t in self.topics if t.name == name), None)


@dataclass(frozen=True, slots=True)
class TopicRates:
    bytes_in_per_s: float
    bytes_out_per_s: float
    messages_in_per_s: float


def summarize(snapshot: Snapshot) -> Summary:
    partitions = [p for t in snapshot.topics for p in t.partitions]
    return Summary(
        topics=len(snapshot.topics),
        partitions=len(partitions),
        under_replicated=sum(1 for p in partitions if len(p.isr) < len(p.replicas)),
        offline=sum(1 for p in partitions if p.leader < 0),
        online_nodes=sum(1 for n in snapshot.nodes if not n.fenced),
        nodes=len(snapshot.nodes),
    )


def leadership(topics: Sequence[TopicDescription]) -> tuple[dict[int, int], dict[int, int]]:
    """Per node: partitions it leads, partitions it holds a replica of."""
    leads: dict[int, int] = {}
    hosts: dict[int, int] = {}
    for t in topics:
        for p in t.partitions:
            if p.leader >= 0:
                leads[p.leader] = leads.get(p.leader, 0) + 1
            for r in p.replicas:
                hosts[r] = hosts.get(r, 0) + 1
    return leads, hosts


def leaders_view(
    topics: Sequence[TopicDescription], scraped: Mapping[int, NodeMetrics]
) -> tuple[dict[tuple[str, int], int], dict[tuple[str, int], int]]:
    """Each partition's size and log end offset as its leader exports them (a
    follower's may lag); from any replica that exported them when the leader did not."""
    size: dict[tuple[str, int], int] = {}
    leo: dict[tuple[str, int], int] = {}
    for t in topics:
        for p in t.partitions:
            key = (t.name, p.partition)
            order = [p.leader, *(r for r in p.replicas if r != p.leader)]
            for node in order:
                m = scraped.get(node)
                if m is not None and key in m.log_end_offset:
                    leo[key] = m.log_end_offset[key]
                    if key in m.partition_size:
                        size[key] = m.partition_size[key]
                    break
    return size, leo


def rate(before: float | None, after: float | None, seconds: float) -> float | None:
    """Per second between two counter readings; a counter that went down (the node
    restarted) starts again from zero."""
    if before is None or after is None or seconds <= 0:
        return None
    return (after - (before if after >= before else 0.0)) / seconds


def topic_rates(
    before: Mapping[int, NodeMetrics], after: Mapping[int, NodeMetrics], seconds: float
) -> dict[str, TopicRates]:
    """Per topic, summed over the nodes scraped both times (each counts what it led)."""
    out: dict[str, list[float]] = {}
    for node, now in after.items():
        then = before.get(node)
        if then is None:
            continue
        for i, (a, b) in enumerate(
            (
                (then.bytes_in, now.bytes_in),
                (then.bytes_out, now.bytes_out),
                (then.messages_in, now.messages_in),
            )
        ):
            for topic, value in b.items():
                r = rate(a.get(topic), value, seconds)
                if r is not None:
                    out.setdefault(topic, [0.0, 0.0, 0.0])[i] += r
    return {t: TopicRates(*v) for t, v in out.items()}


def group_lags(scraped: Mapping[int, NodeMetrics]) -> dict[str, int]:
    """Each group's total lag from the coordinators' series (a partition reported by
    more than one node is counted once, at its largest lag)."""
    per_partition: dict[tuple[str, str, int], int] = {}
    for m in scraped.values():
        for key, lag in m.group_lag.items():
            per_partition[key] = max(lag, per_partition.get(key, lag))
    out: dict[str, int] = {}
    for (group, _topic, _partition), lag in per_partition.items():
        out[group] = out.get(group, 0) + lag
    return out


class Histories:
    """Bounded time series per name: HISTORY_POINTS points each, MAX_HISTORIES names
    (the one updated longest ago is dropped first)."""

    def __init__(self, points: int = HISTORY_POINTS, names: int = MAX_HISTORIES) -> None:
        self.points = points
        self.names = names
        self._series: dict[str, deque[tuple[float, float]]] = {}

    def add(self, now: float, values: Mapping[str, float]) -> None:
        for name, value in values.items():
            series = self._series.pop(name, None) or deque(maxlen=self.points)
            series.append((now, value))
            self._series[name] = series  # most recently updated last
        while len(self._series) > self.names:
            del self._series[next(iter(self._series))]

    def __contains__(self, name: object) -> bool:
        return name in self._series

    def frozen(self) -> dict[str, tuple[tuple[float, float], ...]]:
        return {name: tuple(s) for name, s in self._series.items()}


def topic_rows(snapshot: Snapshot) -> list[TopicRow]:
    rows = []
    for t in snapshot.topics:
        sizes = [snapshot.partition_size.get((t.name, p.partition)) for p in t.partitions]
        rates = snapshot.topic_rates.get(t.name)
        rows.append(
            TopicRow(
                name=t.name,
                partitions=len(t.partitions),
                replication_factor=t.replication_factor,
                under_replicated=sum(1 for p in t.partitions if len(p.isr) < len(p.replicas)),
                offline=sum(1 for p in t.partitions if p.leader < 0),
                size_bytes=None if any(s is None for s in sizes) else sum(s or 0 for s in sizes),
                messages_in_per_s=rates.messages_in_per_s if rates is not None else None,
                internal=t.is_internal,
            )
        )
    return rows


@dataclass(frozen=True, slots=True)
class Page:
    rows: tuple[TopicRow, ...]
    page: int  # 1-based
    pages: int
    matched: int
    total: int


def filter_topics(
    rows: Sequence[TopicRow],
    query: str,
    page: int,
    internal: bool,
    per_page: int = TOPICS_PER_PAGE,
) -> Page:
    """Topics whose name contains `query` (case-insensitive), internal ones only
    when asked, the `page`th slice of them (clamped into range)."""
    needle = query.strip().lower()
    matched = [
        r for r in rows if (internal or not r.internal) and (not needle or needle in r.name.lower())
    ]
    pages = max(1, math.ceil(len(matched) / per_page))
    page = min(max(page, 1), pages)
    start = (page - 1) * per_page
    return Page(tuple(matched[start : start + per_page]), page, pages, len(matched), len(rows))
