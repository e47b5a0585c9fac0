"""A node's Prometheus metrics (`metrics.port`, HTTP `/metrics`), named after Kafka's
JMX beans as the Prometheus JMX exporter renders them (`kafka_server_replicamanager_
underreplicatedpartitions` is `kafka.server:type=ReplicaManager,name=
UnderReplicatedPartitions`), so dashboards built for Kafka read them.

Two kinds: state a scrape reads from the node when it happens (partition counts,
ISR health, log sizes, purgatory sizes: nothing to keep up to date on the data path),
and events the node counts as they happen (requests and their time, bytes in and
out, ISR shrinks and expands). docs/metrics.md lists every name."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import grpc
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from seglog.replication.metadata_image import MetadataImage

from .replica_manager import ReplicaManager

# Request time buckets in milliseconds (Kafka reports request times in ms).
REQUEST_MS_BUCKETS = (0.5, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
# Labels are bounded: one per API (a fixed table) and one per topic hosted.
MAX_TOPIC_LABELS = 10_000


class MetricsNode(Protocol):
    node_id: int
    replica_manager: ReplicaManager

    def metadata_image(self) -> MetadataImage: ...
    def controller_id(self) -> int: ...


class NodeMetrics:
    """The metrics one node exports; the registry is the node's own (not the process
    global), so tests can run nodes side by side."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.request_time_ms = Histogram(
            "kafka_network_requestmetrics_totaltimems",
            "Time from a request's dispatch to its response being ready, per API and "
            "listener (an acks=all Produce includes its wait for the ISR)",
            ["request", "listener"],
            buckets=REQUEST_MS_BUCKETS,
            registry=self.registry,
        )
        self.requests = Counter(
            "kafka_network_requestmetrics_requests",
            "Requests handled, per API and listener",
            ["request", "listener"],
            registry=self.registry,
        )
        self.request_errors = Counter(
            "kafka_network_requestmetrics_errors",
            "Requests that failed in the handler (not Kafka error codes in an answer)",
            ["request", "listener"],
            registry=self.registry,
        )
        self.bytes_in = Counter(
            "kafka_server_brokertopicmetrics_bytesin",
            "Record batch bytes appended as leader, per topic",
            ["topic"],
            registry=self.registry,
        )
        self.messages_in = Counter(
            "kafka_server_brokertopicmetrics_messagesin",
            "Records appended as leader, per topic",
            ["topic"],
            registry=self.registry,
        )
        self.bytes_out = Counter(
            "kafka_server_brokertopicmetrics_bytesout",
            "Record batch bytes sent to consumers and followers, per topic",
            ["topic"],
            registry=self.registry,
        )
        self.isr_shrinks = Counter(
            "kafka_server_replicamanager_isrshrinks",
            "ISR shrinks this node made as leader (the controller accepted them)",
            registry=self.registry,
        )
        self.isr_expands = Counter(
            "kafka_server_replicamanager_isrexpands",
            "ISR expands this node made as leader (the controller accepted them)",
            registry=self.registry,
        )
        self._topics: set[str] = set()

    # --- events, counted as they happen -------------------------------------------------

    def observe_request(self, api: str, listener: str, seconds: float, failed: bool) -> None:
        self.requests.labels(api, listener).inc()
        self.request_time_ms.labels(api, listener).observe(seconds * 1000.0)
        if failed:
            self.request_errors.labels(api, listener).inc()

    def _topic(self, topic: str) -> str | None:
        if topic not in self._topics:
            if len(self._topics) >= MAX_TOPIC_LABELS:
                return None  # bounded: topics beyond the cap are not labelled
            self._topics.add(topic)
        return topic

    def appended(self, topic: str, batch_bytes: int, records: int) -> None:
        if self._topic(topic) is not None:
            self.bytes_in.labels(topic).inc(batch_bytes)
            self.messages_in.labels(topic).inc(records)

    def sent(self, topic: str, batch_bytes: int) -> None:
        if batch_bytes and self._topic(topic) is not None:
            self.bytes_out.labels(topic).inc(batch_bytes)

    def isr_changed(self, before: int, after: int) -> None:
        if after < before:
            self.isr_shrinks.inc()
        elif after > before:
            self.isr_expands.inc()


class NodeStateCollector(Collector):
    """Gauges read from the node at scrape time."""

    def __init__(self, node: MetricsNode) -> None:
        self.node = node

    def collect(self) -> Iterator[Metric]:
        rm = self.node.replica_manager
        hosted = rm.partitions()
        leaders = [hp for hp in hosted if hp.replica.is_leader]
        under_replicated = sum(
            1 for hp in leaders if len(hp.replica.isr) < len(hp.replica.replicas)
        )
        under_min_isr = sum(
            1 for hp in leaders if len(hp.replica.isr) < hp.replica.effective_min_isr
        )
        yield _gauge(
            "kafka_server_replicamanager_partitioncount", "Partitions on this node", len(hosted)
        )
        yield _gauge(
            "kafka_server_replicamanager_leadercount", "Partitions this node leads", len(leaders)
        )
        yield _gauge(
            "kafka_server_replicamanager_underreplicatedpartitions",
            "Partitions this node leads whose ISR is smaller than their replica set",
            under_replicated,
        )
        yield _gauge(
            "kafka_server_replicamanager_underminisrpartitioncount",
            "Partitions this node leads whose ISR is below min.insync.replicas",
            under_min_isr,
        )
        image = self.node.metadata_image()
        offline = sum(
            1 for t in image.topics.values() for p in t.partitions.values() if p.leader < 0
        )
        active = self.node.controller_id() == self.node.node_id
        yield _gauge(
            "kafka_controller_kafkacontroller_activecontrollercount",
            "1 on the node whose controller is the active one",
            1 if active else 0,
        )
        yield _gauge(
            "kafka_controller_kafkacontroller_offlinepartitionscount",
            "Partitions without a leader in the metadata this node has applied",
            offline,
        )
        reassigning = sum(
            1
            for t in image.topics.values()
            for p in t.partitions.values()
            if p.reassigning and p.leader == self.node.node_id
        )
        yield _gauge(
            "kafka_server_replicamanager_reassigningpartitions",
            "Partitions this node leads that are being reassigned (KIP-455)",
            reassigning,
        )
        leader_rate, follower_rate = rm.throttled_byte_rates()
        yield _gauge(
            "kafka_server_leaderreplication_byte_rate",
            "Bytes/s sent to throttled followers (leader.replication.throttled.rate's quota)",
            leader_rate,
        )
        yield _gauge(
            "kafka_server_followerreplication_byte_rate",
            "Bytes/s fetched for throttled replicas (follower.replication.throttled.rate's)",
            follower_rate,
        )
        yield _gauge(
            "kafka_server_delayedoperationpurgatory_purgatorysize",
            "acks=all produces waiting for their ISR",
            rm.waiting_produces(),
            labels={"delayedOperation": "Produce"},
        )
        yield _gauge(
            "kafka_log_logmanager_offlinelogdirectorycount",
            "Log directories taken offline by an I/O error (Kafka's OfflineLogDirectoryCount)",
            len(self.node.log_manager.offline_dirs()),
        )
        size = GaugeMetricFamily(
            "kafka_log_log_size", "Bytes of a partition's log", labels=["topic", "partition"]
        )
        segments = GaugeMetricFamily(
            "kafka_log_log_numlogsegments",
            "Segments of a partition's log",
            labels=["topic", "partition"],
        )
        end = GaugeMetricFamily(
            "kafka_log_log_logendoffset",
            "A partition's log end offset",
            labels=["topic", "partition"],
        )
        for hp in hosted:
            log = hp.plog.log
            labels = [hp.tp[0], str(hp.tp[1])]
            size.add_metric(labels, log.size_in_bytes)
            segments.add_metric(labels, len(log.segments))
            end.add_metric(labels, log.log_end_offset)
        yield size
        yield segments
        yield end


def _gauge(name: str, doc: str, value: float, labels: dict[str, str] | None = None) -> Metric:
    g = GaugeMetricFamily(name, doc, labels=list(labels) if labels else None)
    if labels:
        g.add_metric(list(labels.values()), value)
    else:
        g.add_metric([], value)
    return g


def timed_kafka_handler(
    handler: Callable[[Any], Any], metrics: NodeMetrics, listener: str, deferred: type
) -> Callable[[Any], Any]:
    """The Kafka listener's handler, timing each request (a deferred answer when it is
    ready)."""

    def handle(request: Any) -> Any:
        t0 = time.perf_counter()
        api = request.spec.name
        try:
            answer = handler(request)
        except Exception:
            metrics.observe_request(api, listener, time.perf_counter() - t0, True)
            raise
        if isinstance(answer, deferred):
            wait = answer.wait

            def waited() -> Any:
                failed = True
                try:
                    parts = wait()
                    failed = False
                    return parts
                finally:
                    metrics.observe_request(api, listener, time.perf_counter() - t0, failed)

            answer.wait = waited
            return answer
        metrics.observe_request(api, listener, time.perf_counter() - t0, False)
        return answer

    return handle


class GrpcMetricsInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]
    """Times every unary gRPC call on the node's GRPC listeners (streams are counted
    when they end)."""

    def __init__(self, metrics: NodeMetrics, listener: str = "GRPC") -> None:
        self.metrics = metrics
        self.listener = listener

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        api = handler_call_details.method.rsplit("/", 1)[-1]
        inner = handler.unary_unary
        metrics, listener = self.metrics, self.listener

        def timed(request: Any, context: grpc.ServicerContext) -> Any:
            t0 = time.perf_counter()
            failed = True
            try:
                response = inner(request, context)
                failed = False
                return response
            finally:
                metrics.observe_request(api, listener, time.perf_counter() - t0, failed)

        return grpc.unary_unary_rpc_method_handler(
            timed,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
