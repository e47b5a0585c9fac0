"""A node's Prometheus metrics (`metrics.port`, HTTP `/metrics`), named after Kafka's
JMX beans as the Prometheus JMX exporter renders them (`kafka_server_replicamanager_
underreplicatedpartitions` is `kafka.server:type=ReplicaManager,name=
UnderReplicatedPartitions`), so dashboards built for Kafka read them.

Two kinds: state a scrape reads from the node when it happens (partition counts,
ISR health, log sizes, purgatory sizes: nothing to keep up to date on the data path),
and events the node counts as they happen (requests and their time, bytes in and
out, ISR shrinks and expands, log flushes). docs/metrics.md lists every name."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

import grpc
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from seglog.controller.metadata_image import MetadataImage
from seglog.storage.disk_and_clock import plain_monotonic_s, plain_perf_s

from . import request_timing
from .grpc_wrap import WrappingInterceptor, wrap_handler
from .replica_manager import ReplicaManager
from .request_histograms import LOCAL, QUEUE, REMOTE, SEND, TOTAL, RequestHistograms, Row

if TYPE_CHECKING:
    from .groups.offsets_topic import GroupCoordinatorRuntime
    from .log_manager import LogManager

# Request time buckets in milliseconds (Kafka reports request times in ms).
REQUEST_MS_BUCKETS = (0.5, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000)
# Log flush buckets in milliseconds (an fsync: sub-millisecond on tmpfs, seconds on a
# loaded disk).
FLUSH_MS_BUCKETS = (0.1, 0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)
# Garbage-collector pass buckets in seconds (a young pass: tens of microseconds; a full
# pass over a large heap: tens of milliseconds).
GC_S_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1)
# Labels are bounded: one per API (a fixed table) and one per topic hosted.
MAX_TOPIC_LABELS = 10_000
# Consumer-group lag series a scrape returns at most (group × partition).
MAX_GROUP_LAG_SERIES = 10_000
# Kafka's BrokerState values (org.apache.kafka.metadata.BrokerState).
BROKER_STATE_RUNNING = 3
BROKER_STATE_PENDING_CONTROLLED_SHUTDOWN = 6


class MetricsNode(Protocol):
    node_id: int
    replica_manager: ReplicaManager
    log_manager: LogManager
    groups: GroupCoordinatorRuntime
    kafka: list[Any]  # KafkaListener: its server's idle meters

    def metadata_image(self) -> MetadataImage: ...
    def controller_id(self) -> int: ...
    def stalled(self) -> str | None: ...


class NodeMetrics:
    """The metrics one node exports; the registry is the node's own (not the process
    global), so tests can run nodes side by side."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._thread_children = threading.local()  # per thread: (API, listener) -> bound
        self.request_times = RequestHistograms(
            [
                (
                    "kafka_network_requestmetrics_totaltimems",
                    "Time from a request's dispatch to its response being ready, per API and "
                    "listener (an acks=all Produce includes its wait for the ISR)",
                ),
                (
                    "kafka_network_requestmetrics_requestqueuetimems",
                    "Time a request waited in the request channel for a handler thread "
                    "(Kafka listeners), per API and listener",
                ),
                (
                    "kafka_network_requestmetrics_localtimems",
                    "Time a handler worked on a request (appends, reads, answers), per API "
                    "and listener",
                ),
                (
                    "kafka_network_requestmetrics_remotetimems",
                    "Time a request waited in purgatory: an acks=all Produce for its ISR, a "
                    "Fetch long-polling for data (0 for the others), per API and listener",
                ),
                (
                    "kafka_network_requestmetrics_responsesendtimems",
                    "Time from a response being queued on its connection to its last byte "
                    "written (Kafka listeners), per API and listener",
                ),
            ],
            REQUEST_MS_BUCKETS,
        )
        self.registry.register(self.request_times)
        self.log_flush_ms = Histogram(
            "kafka_log_logflushstats_logflushrateandtimems",
            "Time the fsyncs of a log flush took (count: flushes)",
            buckets=FLUSH_MS_BUCKETS,
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
        self.request_error_codes = Counter(
            "kafka_network_requestmetrics_errorspersec",
            "Error codes in answers, per API and error (Produce: one per refused partition)",
            ["request", "error"],
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
        # KIP-890: a leader's verifications of transactional appends (Kafka's
        # AddPartitionsToTxnManager beans).
        self.verification_time_ms = Histogram(
            "kafka_server_addpartitionstotxnmanager_verificationtimems",
            "Time from a Produce's verification being asked to its answer (count: answers)",
            buckets=FLUSH_MS_BUCKETS,
            registry=self.registry,
        )
        self.verification_failures = Counter(
            "kafka_server_addpartitionstotxnmanager_verificationfailurerate",
            "Partitions whose verification in their transaction failed",
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
        self.gc_collection_seconds = Histogram(
            "python_gc_collection_seconds",
            "Time each pass of CPython's cyclic garbage collector held the process (and "
            "so every thread of the node), per generation (node/gc_pauses.py)",
            ["generation"],
            buckets=GC_S_BUCKETS,
            registry=self.registry,
        )
        self._topics: set[str] = set()

    # --- events, counted as they happen -------------------------------------------------

    def observe_request(
        self,
        api: str,
        listener: str,
        seconds: float,
        failed: bool,
        *,
        queue_s: float | None = None,
        local_s: float | None = None,
        remote_s: float | None = None,
    ) -> None:
        """One request done: its total time, and its parts where the listener knows
        them (queue: Kafka listeners only)."""
        row, requests, errors = self._request_child(api, listener)
        observe = self.request_times.observe
        requests.inc()
        observe(row[TOTAL], seconds * 1000.0)
        if queue_s is not None:
            observe(row[QUEUE], queue_s * 1000.0)
        if local_s is not None:
            observe(row[LOCAL], local_s * 1000.0)
        if remote_s is not None:
            observe(row[REMOTE], remote_s * 1000.0)
        if failed:
            errors.inc()

    def _request_child(self, api: str, listener: str) -> tuple[Row, Any, Any]:
        """An API's request metrics on a listener, bound at their first use on this
        thread: a `labels()` lookup per observation costs as much as the observation."""
        key = (api, listener)
        local = self._thread_children
        children = getattr(local, "children", None)
        if children is None:
            children = local.children = {}
        bound = children.get(key)
        if bound is None:
            bound = children[key] = (
                self.request_times.row(api, listener),
                self.requests.labels(api, listener),
                self.request_errors.labels(api, listener),
            )
        return bound

    def response_sent(self, api: str, listener: str, seconds: float) -> None:
        row = self._request_child(api, listener)[0]
        self.request_times.observe(row[SEND], seconds * 1000.0)

    def sent_observer(self, listener: str) -> Callable[[str, float], None]:
        """A Kafka listener's response send times, for its socket server."""

        def sent(api: str, seconds: float) -> None:
            self.response_sent(api, listener, seconds)

        return sent

    def produce_error(self, error: str) -> None:
        self.request_error_codes.labels("Produce", error).inc()

    def gc_pause(self, generation: int, seconds: float) -> None:
        self.gc_collection_seconds.labels(str(generation)).observe(seconds)

    def txn_verified(self, ms: float, failed_partitions: int) -> None:
        self.verification_time_ms.observe(ms)
        if failed_partitions:
            self.verification_failures.inc(failed_partitions)

    def log_flushed(self, seconds: float) -> None:
        self.log_flush_ms.observe(seconds * 1000.0)

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
        purgatory = GaugeMetricFamily(
            "kafka_server_delayedoperationpurgatory_purgatorysize",
            "Requests waiting in purgatory: acks=all produces for their ISR, fetches "
            "long-polling for fetch.min.bytes",
            labels=["delayedOperation"],
        )
        purgatory.add_metric(["Produce"], rm.waiting_produces())
        purgatory.add_metric(["Fetch"], rm.waiting_fetches())
        yield purgatory
        yield _gauge(
            "kafka_log_logmanager_offlinelogdirectorycount",
            "Log directories taken offline by an I/O error (Kafka's OfflineLogDirectoryCount)",
            len(self.node.log_manager.offline_dirs()),
        )
        stalled = self.node.stalled() is not None
        yield _gauge(
            "kafka_server_kafkaserver_brokerstate",
            "Kafka's BrokerState: 3 RUNNING; 6 PENDING_CONTROLLED_SHUTDOWN while a loop of "
            "this broker is stalled and it gave up its leaderships",
            BROKER_STATE_PENDING_CONTROLLED_SHUTDOWN if stalled else BROKER_STATE_RUNNING,
        )
        yield _gauge(
            "seglog_broker_stalled",
            "1 while a watched loop of this broker has stalled past its bound (it cannot "
            "serve, and its controller process fenced it)",
            1 if stalled else 0,
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
        yield from self._cleaner()
        yield self._group_lag()
        yield from self._idle_ratios()
        yield from self._client_quotas()

    def _cleaner(self) -> Iterator[Metric]:
        lag = self.node.log_manager.cleaner.lag()
        yield _gauge(
            "kafka_log_logcleanermanager_max_dirty_percent",
            "Dirty bytes share (percent) of the dirtiest compacted log",
            lag.max_dirty_percent,
        )
        yield _gauge(
            "kafka_log_logcleaner_max_compaction_delay_secs",
            "Seconds the most overdue compacted log is past its max.compaction.lag.ms",
            lag.max_compaction_delay_s,
        )
        yield _gauge(
            "kafka_log_logcleanermanager_time_since_last_run_ms",
            "Milliseconds since a cleaner thread last looked for a log to clean",
            lag.time_since_last_run_ms,
        )

    def _group_lag(self) -> Metric:
        """Per group and partition this node coordinates: the partition's high watermark
        minus the committed offset (kafka-consumer-groups' LAG), for partitions hosted
        here; at most MAX_GROUP_LAG_SERIES series."""
        family = GaugeMetricFamily(
            "kafka_consumergroup_lag",
            "High watermark minus the group's committed offset, per partition (groups "
            "this node coordinates, partitions it hosts)",
            labels=["group", "topic", "partition"],
        )
        rm = self.node.replica_manager
        for group, (topic, partition), offset in self.node.groups.committed_offsets(
            MAX_GROUP_LAG_SERIES
        ):
            hp = rm.hosted((topic, partition))
            if hp is None:
                continue
            lag = max(0, hp.plog.log.high_watermark - offset)
            family.add_metric([group, topic, str(partition)], lag)
        return family

    def _client_quotas(self) -> Iterator[Metric]:
        quotas = getattr(self.node, "client_quotas", None)
        if quotas is not None:
            yield from _quota_families(quotas, int(plain_monotonic_s() * 1000))

    def _idle_ratios(self) -> Iterator[Metric]:
        loop = getattr(self.node, "loop", None)
        if loop is not None:
            yield _gauge(
                "seglog_node_event_loop_lag_seconds",
                "The longest the node's event loop was late for a timer over the last 30 s "
                "(a callback that held it: a request's work, a disk write)",
                loop.lag_s(),
            )
        servers = [k.server for k in self.node.kafka]
        if not servers:
            return  # no Kafka listener: no network threads nor handler pool to measure
        yield _gauge(
            "kafka_network_socketserver_networkprocessoravgidlepercent",
            "Share (0..1) of time the Kafka listeners' network threads waited for "
            "socket events, over the last 30 s",
            _pool_ratio([(s.network_idle.ratio(), s.network_idle.threads) for s in servers]),
        )
        yield _gauge(
            "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent",
            "Share (0..1) of time the Kafka listeners' request handler threads waited "
            "for a request, over the last 30 s",
            _pool_ratio([(s.handler_idle.ratio(), s.handler_idle.threads) for s in servers]),
        )


def _quota_families(quotas: Any, now_ms: int) -> Iterator[Metric]:
    """Kafka's per (user, client-id) quota metrics as the JMX exporter names them:
    `kafka.server:type=Produce,user=U,client-id=C` byte-rate and throttle-time, the
    same for Fetch, Request's request-time and ControllerMutation's mutation-rate, and
    their throttle-time."""
    for manager, rate_name in (
        (quotas.produce, "byte_rate"),
        (quotas.fetch, "byte_rate"),
        (quotas.request, "request_time"),
        (quotas.controller_mutation, "mutation_rate"),
    ):
        kind = manager.quota_type.lower()
        rate = GaugeMetricFamily(
            f"kafka_server_{kind}_{rate_name}",
            f"{manager.quota_type} quota sensor's rate per user/client-id",
            labels=["user", "client_id"],
        )
        throttle = GaugeMetricFamily(
            f"kafka_server_{kind}_throttle_time",
            "Tracking average throttle-time per user/client-id (ms)",
            labels=["user", "client_id"],
        )
        for user, client_id, measured, throttle_ms in manager.snapshot(now_ms):
            rate.add_metric([user, client_id], measured)
            throttle.add_metric([user, client_id], throttle_ms)
        yield rate
        yield throttle


def _pool_ratio(ratios: list[tuple[float, int]]) -> float:
    """Listeners' ratios, weighted by their thread counts."""
    threads = sum(n for _, n in ratios)
    return sum(r * n for r, n in ratios) / threads if threads else 1.0


def _gauge(name: str, doc: str, value: float, labels: dict[str, str] | None = None) -> Metric:
    g = GaugeMetricFamily(name, doc, labels=list(labels) if labels else None)
    if labels:
        g.add_metric(list(labels.values()), value)
    else:
        g.add_metric([], value)
    return g


def timed_kafka_handler(
    handler: Callable[[Any], Any],
    metrics: NodeMetrics,
    listener: str,
    deferred: type[Any],
    failed_answer: type[Any] | None = None,
) -> Callable[[Any], Any]:
    """The Kafka listener's handler, timing each request when its answer is ready:
    queue time (from its frame being read to a handler taking it), local time (the
    handler's) and remote time (a deferred answer's wait); the total is their sum. A
    begun answer that is a `failed_answer` (the handler raised) counts as failed."""

    def handle(request: Any) -> Any:
        t0 = plain_perf_s()
        queue_s = t0 - request.received_s if request.received_s else 0.0
        api = request.spec.name
        try:
            answer = handler(request)
        except Exception:
            local_s = plain_perf_s() - t0
            metrics.observe_request(
                api, listener, queue_s + local_s, True, queue_s=queue_s, local_s=local_s
            )
            raise
        local_s = plain_perf_s() - t0
        if isinstance(answer, deferred):
            t1 = plain_perf_s()  # remote time: from the handler's return to the answer

            def observe(failed: bool) -> None:
                remote_s = plain_perf_s() - t1
                metrics.observe_request(
                    api,
                    listener,
                    queue_s + local_s + remote_s,
                    failed,
                    queue_s=queue_s,
                    local_s=local_s,
                    remote_s=remote_s,
                )

            wait, begin = answer.wait, answer.begin

            def waited() -> Any:
                failed = True
                try:
                    parts = wait()
                    failed = False
                    return parts
                finally:
                    observe(failed)

            answer.wait = waited
            if begin is not None:

                def begun(done: Callable[[Any], None]) -> None:
                    def timed(parts: Any) -> None:
                        observe(failed_answer is not None and isinstance(parts, failed_answer))
                        done(parts)

                    begin(timed)

                answer.begin = begun
            return answer
        metrics.observe_request(
            api, listener, queue_s + local_s, False, queue_s=queue_s, local_s=local_s, remote_s=0.0
        )
        return answer

    return handle


class GrpcMetricsInterceptor(WrappingInterceptor):
    """Times every unary gRPC call on the node's GRPC listeners (streams are not
    counted): total, local and remote time (its waits, see request_timing); gRPC's own
    queue and response writes are out of its sight."""

    def __init__(self, metrics: NodeMetrics, listener: str = "GRPC") -> None:
        self.metrics = metrics
        self.listener = listener

    def intercept(
        self, handler: grpc.RpcMethodHandler, method: str, details: grpc.HandlerCallDetails
    ) -> grpc.RpcMethodHandler:
        if handler.unary_unary is None:
            return handler
        api = method.rsplit("/", 1)[-1]
        metrics, listener = self.metrics, self.listener

        @contextmanager
        def timed(_request: Any, _context: grpc.ServicerContext) -> Iterator[None]:
            t0 = plain_perf_s()
            failed = True
            request_timing.begin()
            try:
                yield
                failed = False
            finally:
                total = plain_perf_s() - t0
                remote = min(request_timing.end(), total)
                metrics.observe_request(
                    api, listener, total, failed, local_s=total - remote, remote_s=remote
                )

        return wrap_handler(handler, timed)
