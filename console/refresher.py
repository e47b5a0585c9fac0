"""The one metadata refresh all viewers share: a thread asks the cluster every
`interval_s` (Metadata twice, DescribeQuorum once per node, each node's /metrics)
and publishes an immutable Snapshot; pages and live updates only read the latest.
So the console's load on the nodes does not grow with its viewers."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Mapping

import grpc

from seglog.client.admin import Admin, ClusterDescription
from seglog.client.cluster import CHANNEL_OPTIONS
from seglog.client.errors import KafkaError
from seglog.client.quorum import NoControllerService, describe_quorum_on
from seglog.client.security import ClientSecurity

from . import view
from .scrape import NodeMetrics, scrape

log = logging.getLogger(__name__)

QUORUM_TIMEOUT_S = 1.0
SCRAPE_TIMEOUT_S = 2.0


class NodeStatics:
    """What a node's static configs say (asked once per node): its metrics URL and
    Kafka listeners."""

    def __init__(self, metrics_url: str, kafka_listeners: str, rack: str) -> None:
        self.metrics_url = metrics_url
        self.kafka_listeners = kafka_listeners
        self.rack = rack


class Refresher:
    def __init__(self, admin: Admin, security: Mapping[str, str | None], interval_s: float) -> None:
        if interval_s <= 0:
            raise ValueError(f"the refresh interval must be positive, got {interval_s}")
        self.admin = admin
        self.security = ClientSecurity.from_options(security)
        self.interval_s = interval_s
        self._statics: dict[int, NodeStatics] = {}
        # One channel per node address for DescribeQuorum, kept across refreshes.
        self._channels: dict[str, grpc.Channel] = {}
        self._scraped: dict[int, NodeMetrics] = {}
        self._scraped_at = 0.0
        self._history: deque[tuple[float, float, float]] = deque(maxlen=view.HISTORY_POINTS)
        self._topic_history = view.Histories()
        self._group_history = view.Histories()
        self._snapshot: view.Snapshot | None = None
        self._stop = threading.Event()
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="console-refresh", daemon=True)
        self.last_duration_s = 0.0

    @property
    def snapshot(self) -> view.Snapshot | None:
        return self._snapshot

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()

    def wait_first(self, timeout_s: float) -> view.Snapshot | None:
        with self._changed:
            self._changed.wait_for(lambda: self._snapshot is not None, timeout_s)
        return self._snapshot

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                snapshot = self.refresh_once()
            except Exception:  # the refresher must outlive any one failure
                log.exception("console refresh failed")
            else:
                with self._changed:
                    self._snapshot = snapshot
                    self._changed.notify_all()
            self.last_duration_s = time.monotonic() - started
            # Never busier than half the time, however slow a refresh of a big cluster is.
            self._stop.wait(max(self.interval_s - self.last_duration_s, self.last_duration_s))

    def refresh_once(self) -> view.Snapshot:
        errors: list[str] = []
        previous = self._snapshot
        try:
            cluster = self.admin.describe_cluster()
            topics = tuple(self.admin.describe_topics(None))
        except KafkaError as e:
            if previous is None:
                cluster = ClusterDescription("", -1, ())
                topics = ()
            else:
                cluster = ClusterDescription(
                    previous.cluster_id,
                    previous.controller_id,
                    (),
                )
                topics = previous.topics
            errors.append(f"metadata: {e}")
        for b in cluster.brokers:
            if b.node_id not in self._statics:
                try:
                    self._statics[b.node_id] = self._node_statics(b.node_id)
                except KafkaError as e:
                    errors.append(f"configs of node {b.node_id}: {e}")
        roles, quorum = self._quorum(cluster, errors)
        now = time.monotonic()
        scraped: dict[int, NodeMetrics] = {}
        for b in cluster.brokers:
            statics = self._statics.get(b.node_id)
            if statics is None or not statics.metrics_url:
                continue
            try:
                scraped[b.node_id] = scrape(statics.metrics_url, SCRAPE_TIMEOUT_S)
            except OSError as e:
                errors.append(f"metrics of node {b.node_id} ({statics.metrics_url}): {e}")
        seconds = now - self._scraped_at
        rates = view.topic_rates(self._scraped, scraped, seconds) if self._scraped else {}
        node_rates = {
            node: view.topic_rates({node: self._scraped[node]}, {node: m}, seconds)
            for node, m in scraped.items()
            if node in self._scraped
        }
        self._scraped, self._scraped_at = scraped, now
        wall = time.time()
        if rates or node_rates:
            self._history.append(
                (
                    wall,
                    sum(r.bytes_in_per_s for r in rates.values()),
                    sum(r.bytes_out_per_s for r in rates.values()),
                )
            )
            # Topics with traffic (or a history already): an idle topic adds no points.
            self._topic_history.add(
                wall,
                {
                    t: r.messages_in_per_s
                    for t, r in rates.items()
                    if r.messages_in_per_s > 0 or t in self._topic_history
                },
            )
        if scraped:
            self._group_history.add(wall, view.group_lags(scraped))
        leads, hosts = view.leadership(topics)
        size, leo = view.leaders_view(topics, scraped)
        nodes = []
        for b in sorted(cluster.brokers, key=lambda b: b.node_id):
            statics = self._statics.get(b.node_id)
            m = scraped.get(b.node_id)
            per_node = node_rates.get(b.node_id)
            nodes.append(
                view.NodeView(
                    node_id=b.node_id,
                    grpc_address=f"{b.host}:{b.port}",
                    kafka_listeners=statics.kafka_listeners if statics else "",
                    rack=statics.rack if statics else "",
                    fenced=b.fenced,
                    controller=b.node_id == cluster.controller_id,
                    quorum_role=roles.get(b.node_id, "unreachable"),
                    metrics_up=m is not None,
                    leader_of=leads.get(b.node_id, 0),
                    replicas=hosts.get(b.node_id, 0),
                    disk_bytes=sum(m.partition_size.values()) if m is not None else None,
                    bytes_in_per_s=(
                        sum(r.bytes_in_per_s for r in per_node.values())
                        if per_node is not None
                        else None
                    ),
                    bytes_out_per_s=(
                        sum(r.bytes_out_per_s for r in per_node.values())
                        if per_node is not None
                        else None
                    ),
                )
            )
        return view.Snapshot(
            version=(previous.version + 1) if previous is not None else 1,
            taken_at=time.time(),
            cluster_id=cluster.cluster_id,
            controller_id=cluster.controller_id,
            nodes=tuple(nodes),
            quorum=quorum,
            topics=topics,
            partition_size=size,
            log_end_offset=leo,
            topic_rates=rates,
            history=tuple(self._history),
            topic_history=self._topic_history.frozen(),
            group_history=self._group_history.frozen(),
            errors=tuple(errors),
        )

    def _node_statics(self, node_id: int) -> NodeStatics:
        configs = self.admin.describe_broker_configs(str(node_id))

        def value(name: str) -> str:
            entry = configs.get(name)
            return entry.value if entry is not None else ""

        host, port = value("metrics.host") or "127.0.0.1", value("metrics.port")
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        url = f"http://{host}:{port}/metrics" if port and port != "0" else ""
        listeners = value("advertised.listeners") or value("listeners")
        return NodeStatics(url, listeners, value("broker.rack"))

    def _quorum(
        self, cluster: ClusterDescription, errors: list[str]
    ) -> tuple[dict[int, str], view.QuorumView | None]:
        """Each node's Raft role, and the quorum as its leader sees it."""
        roles: dict[int, str] = {}
        answers = {}
        addresses = {f"{b.host}:{b.port}" for b in cluster.brokers}
        for gone in [a for a in self._channels if a not in addresses]:
            self._channels.pop(gone).close()  # bounded by the nodes there are
        for b in cluster.brokers:
            address = f"{b.host}:{b.port}"
            channel = self._channels.get(address)
            if channel is None:
                channel = self._channels[address] = self.security.channel(address, CHANNEL_OPTIONS)
            try:
                answers[b.node_id] = describe_quorum_on(channel, address, QUORUM_TIMEOUT_S)
                roles[b.node_id] = answers[b.node_id].role
            except NoControllerService:
                roles[b.node_id] = "n/a"
            except grpc.RpcError:
                roles[b.node_id] = "unreachable"
        leader = next((r for r in answers.values() if r.leader_id == r.node_id), None)
        if leader is None:
            if answers:
                errors.append("quorum: no node says it is the Raft leader")
            return roles, None
        end = next((v.log_end_index for v in leader.voters if v.node_id == leader.node_id), 0)
        voters = tuple(
            view.VoterView(
                node_id=v.node_id,
                log_end=v.log_end_index,
                lag=end - v.log_end_index,
                last_caught_up_ms=v.last_caught_up_timestamp_ms,
                leader=v.node_id == leader.node_id,
            )
            for v in sorted(leader.voters, key=lambda v: v.node_id)
        )
        return roles, view.QuorumView(leader.leader_id, leader.term, leader.commit_index, voters)
