"""The node process: wires config, log manager, controller, replica manager and the
gRPC server (SegLog plus the standard health service) together, and shuts
down cleanly on SIGTERM/SIGINT."""

from __future__ import annotations

import os
import random
import resource
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent import futures
from functools import partial
from types import FrameType
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from prometheus_client import start_http_server

from seglog.controller.cluster_control import (
    DYNAMIC_BROKER_CONFIGS,
    ControlError,
    effective_broker_properties,
)
from seglog.controller.metadata_image import MetadataImage
from seglog.controller.metadata_records import MetadataRecord
from seglog.controller.reassignment import OngoingReassignment
from seglog.node import allocator, gc_pauses
from seglog.node.alter_partition_manager import IsrChangeResult
from seglog.node.client_quota_manager import ClientQuotas, QuotaWindows
from seglog.node.config import NodeConfig, int_setting
from seglog.node.controller.controller_requests import IsrChange
from seglog.node.controller.local_controller import LocalController
from seglog.node.controller.remote_controller import RemoteController
from seglog.node.event_log import EventLogger, configure
from seglog.node.event_loop import NodeLoop
from seglog.node.follower_wire import new_fetcher
from seglog.node.groups.grpc_servicer import MAX_WAITING_CALLS, GroupCoordinatorServicer
from seglog.node.groups.offsets_records import OFFSETS_TOPIC
from seglog.node.groups.offsets_topic import GroupCoordinatorRuntime
from seglog.node.grpc_wrap import SERVER_OPTIONS
from seglog.node.kafka.listener import KafkaListener, start_kafka_listeners
from seglog.node.log_dir_moves import LogDirMoves
from seglog.node.log_manager import LogManager
from seglog.node.metrics import GrpcMetricsInterceptor, NodeMetrics, NodeStateCollector
from seglog.node.replica_manager import ReplicaManager
from seglog.node.replica_timers import serving_stall_s
from seglog.node.security import grpc_tls
from seglog.node.security.grpc_gate import AuthorizingInterceptor
from seglog.node.security.grpc_sasl import GrpcSasl, SaslTokenInterceptor
from seglog.node.security.kafka_gate import DEFAULT_FAILED_AUTHENTICATION_DELAY_MS
from seglog.node.security.node_authorizer import NodeAuthorizer
from seglog.node.security.security_admin import SecurityAdmin
from seglog.node.security.security_servicer import SecurityServicer
from seglog.node.servicer import SegLogServicer
from seglog.node.transactions.grpc_servicer import TransactionsServicer
from seglog.node.transactions.marker_wire import (
    new_marker_sender,
    new_verification_sender,
    txn_markers_listener,
)
from seglog.node.transactions.transaction_coordinator import TransactionCoordinator
from seglog.node.transactions.txn_records import TRANSACTION_STATE_TOPIC
from seglog.node.transactions.txn_runtime import TransactionCoordinatorRuntime
from seglog.proto import (
    client_pb2_grpc,
    cluster_pb2_grpc,
    groups_pb2_grpc,
    security_pb2_grpc,
    transactions_pb2_grpc,
)
from seglog.proto import cluster_pb2 as cpb
from seglog.replication.throttle import LONG_MAX
from seglog.storage import disk_and_clock
from seglog.storage.errors import InvalidConfigError
from seglog.storage.log_config import LogConfig

_log = EventLogger("node")


# Kafka's configs of the offsets topic (offsets.topic.segment.bytes: 100 MiB).
OFFSETS_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "compression.type": "producer",
    "segment.bytes": "104857600",
}
# Kafka's transaction.state.log.segment.bytes; min.insync.replicas is added per node.
TXN_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "compression.type": "uncompressed",
    "segment.bytes": "104857600",
}
SERVICE_NAME = "seglog.v1.SegLog"


class Node:
    def __init__(self, config: NodeConfig, log_level: str = "INFO") -> None:
        self.config = config
        self.node_id = config.node_id
        self.cluster_id = config.cluster_id
        self.fetch_max_bytes = config.fetch_max_bytes
        self.num_partitions = config.num_partitions
        self.default_replication_factor = config.default_replication_factor
        self.auto_create_topics_enable = config.auto_create_topics_enable
        # The wall clock and a generator seeded per node are the logs' inputs (the
        # simulator passes its own).
        self.log_manager = LogManager(
            config.log_dirs,
            config.log_config,
            config.log_settings,
            clock=disk_and_clock.wall_ms,
            rng=random.Random(f"{config.cluster_id}/{config.node_id}"),
        )
        # An unrecoverable I/O error in the (last online) log dir halts the node with
        # exit code 1, Kafka's LogDirFailureHandler: its leaderships move elsewhere.
        self.log_manager.on_all_dirs_offline = self._halt
        self.remote: RemoteController | None = None
        if config.controller_quorum_voters:
            if config.node_id not in config.controller_quorum_voters:
                raise InvalidConfigError(
                    f"node.id {config.node_id} is not among controller.quorum.voters "
                    f"{sorted(config.controller_quorum_voters)}; broker-only nodes are not "
                    f"supported yet"
                )
            # The Raft quorum and this broker's heartbeats run in a process of their
            # own, so a saturated data plane cannot starve them (controller_process).
            self.remote = RemoteController(config, log_level, on_fatal=self._fatal)
            self.controller: LocalController | RemoteController = self.remote
        else:
            self.controller = LocalController(
                config.log_dirs[0], config.log_config, random.Random()
            )
        # The node's event loop: the Kafka listeners' (event-loop model) and the Kafka
        # protocol followers' (replica.fetch.protocol=kafka).
        self.loop: NodeLoop | None = None
        if (config.kafka_listeners and config.kafka_listener_model == "event-loop") or (
            config.replica_fetch_protocol == "kafka"
        ):
            self.loop = NodeLoop("seglog-loop")
        self.replica_manager = ReplicaManager(
            config.node_id,
            self.log_manager,
            self.controller.topic_config,
            replica_lag_time_max_ms=config.replica_lag_time_max_ms,
            replica_fetch_max_bytes=config.replica_fetch_max_bytes,
            replica_fetch_backoff_ms=config.replica_fetch_backoff_ms,
            address_of=self._broker_address,
            alter_partitions=self._alter_partitions,
            is_replica_eligible=self._eligible,
            new_fetcher=new_fetcher(config, self.loop),
            leader_replication_throttled_rate=config.leader_replication_throttled_rate,
            follower_replication_throttled_rate=config.follower_replication_throttled_rate,
            quota_window_num=config.replication_quota_window_num,
            quota_window_size_ms=config.replication_quota_window_size_seconds * 1000,
        )
        self.log_manager.on_dir_offline = self.replica_manager.on_log_dir_offline
        self.log_manager.on_log_start_moved = self.replica_manager.wakeups.note_log_start
        self.replica_manager.own_stall_s = partial(serving_stall_s, self.loop)
        # AlterReplicaLogDirs: replicas moved between log.dirs entries.
        self.log_dir_moves = LogDirMoves(self.log_manager, self.replica_manager.hosted)
        if self.remote is not None:
            self.replica_manager.watchdog = self.remote.watchdog
            self.replica_manager.leadership_doubt = self.remote.leadership_doubt
        self.metrics = NodeMetrics()
        self.replica_manager.metrics = self.metrics
        self.replica_manager.produce_errors.count = self.metrics.produce_error
        self.log_manager.flush_observer = self.metrics.log_flushed
        self._metrics_http: tuple[Any, threading.Thread] | None = None
        self.metrics_port = -1
        self.groups = GroupCoordinatorRuntime(
            config.node_id, self.replica_manager, config.group_config
        )
        self.transactions = TransactionCoordinatorRuntime(
            config.node_id,
            self.replica_manager,
            TransactionCoordinator(config.txn_config, self.next_producer_id),
            new_marker_sender(
                config,
                self.replica_manager,
                self._leader_of,
                self._kafka_address,
                self.groups.on_txn_marker,
            ),
            config.transaction_abort_timed_out_transaction_cleanup_interval_ms,
        )
        # KIP-890: transactional batches verified with their coordinator before they
        # open a transaction here (None: transaction.partition.verification.enable=false).
        self.txn_verification = new_verification_sender(
            config,
            self._txn_coordinator_of,
            self.transactions.verify_partitions,
            self._kafka_address,
        )
        if self.txn_verification is not None:
            self.txn_verification.observer = self.metrics.txn_verified
        self.broker_epoch = -1
        self._dynamic_configs: tuple[dict[str, str], dict[str, str]] = ({}, {})
        # Client quotas, enforced by the Kafka listeners (quota.window.* as Kafka's).
        self.client_quotas = ClientQuotas(
            QuotaWindows(
                int_setting(config.raw, "quota.window.num", 11, at_least=1),
                int_setting(config.raw, "quota.window.size.seconds", 1, at_least=1),
            )
        )
        self._quotas_seen: dict[Any, dict[str, float]] = {}
        self._pid_lock = threading.Lock()
        self._pid_next = 0
        self._pid_end = 0
        self._server: grpc.Server | None = None
        self._health = health.HealthServicer()
        self._stopped = threading.Event()
        self._done = threading.Event()
        self.exit_code = 0
        self.halted = False
        self.port = -1
        self.kafka: list[KafkaListener] = []  # Kafka-protocol listeners (e.g. PLAINTEXT)
        # Once what a scrape reads is there (the registry collects once on registering).
        self.metrics.registry.register(NodeStateCollector(self))
        # ACLs (authorizer.class.name; None: off) and the SCRAM/ACL admin requests.
        self.authorizer = NodeAuthorizer.from_properties(config.raw, self.metadata_image)
        self.security = SecurityAdmin(
            self.metadata_image, self.controller.commit_security, self.authorizer
        )
        # SASL for gRPC callers (None without delegation.token.secret.key).
        self.grpc_sasl = GrpcSasl.from_properties(
            config.raw,
            self.security.scram_credential,
            int_setting(
                config.raw,
                "connection.failed.authentication.delay.ms",
                DEFAULT_FAILED_AUTHENTICATION_DELAY_MS,
                at_least=0,
            )
            / 1000,
        )

    # --- lifecycle -----------------------------------------------------------------

    def start(self) -> None:
        if self.loop is not None:
            self.loop.start()
        self.log_manager.load()
        self.controller.load(clean=self.log_manager.had_clean_shutdown)
        # A fixed pool (a long-polling fetch or a parked acks=-1 produce holds a worker,
        # hence four per num.io.threads), and at most queued.max.requests calls in the
        # node: beyond that a call is refused with RESOURCE_EXHAUSTED, which clients
        # retry, instead of queueing without bound.
        self._server = grpc.server(
            futures.ThreadPoolExecutor(
                # Group calls wait here too (at most MAX_WAITING_CALLS of them): the
                # pool keeps as many again for fetches and produces.
                max_workers=max(2 * MAX_WAITING_CALLS, self.config.num_io_threads * 8),
                thread_name_prefix="grpc",
            ),
            maximum_concurrent_rpcs=self.config.queued_max_requests,
            # Requests are counted and timed, then authorized (when an authorizer is on).
            interceptors=[
                GrpcMetricsInterceptor(self.metrics),
                *([SaslTokenInterceptor(self.grpc_sasl)] if self.grpc_sasl else []),
                *([AuthorizingInterceptor(self.authorizer)] if self.authorizer else []),
            ],
            options=SERVER_OPTIONS,
        )
        client_pb2_grpc.add_SegLogServicer_to_server(SegLogServicer(self), self._server)
        group_servicer = GroupCoordinatorServicer(self)
        groups_pb2_grpc.add_GroupCoordinatorServicer_to_server(group_servicer, self._server)
        transactions_pb2_grpc.add_TransactionsServicer_to_server(
            TransactionsServicer(self, group_servicer.slots), self._server
        )
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)
        security_pb2_grpc.add_SecurityServicer_to_server(
            SecurityServicer(self.security, self.grpc_sasl), self._server
        )
        if self.remote is not None:
            cluster_pb2_grpc.add_ControllerServicer_to_server(
                QuorumDescriber(self.remote), self._server
            )
        for listener in self.config.grpc_listeners:
            port = grpc_tls.add_port(
                self._server,
                f"{listener.host}:{listener.port}",
                self.config.raw,
                self.config.security_protocol_map,
                listener.name,
            )
            if port == 0:
                raise OSError(f"cannot listen on {listener.host}:{listener.port} ({listener.name})")
            if listener.address == self.config.listener:
                self.port = port
        self.controller.add_listener(self._on_metadata)
        self.controller.add_listener(self.replica_manager.on_metadata)
        # After the replica manager: the groups load from replicas it has set up.
        self.controller.add_listener(self.groups.on_metadata)
        self.controller.add_listener(self.transactions.on_metadata)
        self.replica_manager.start()
        self.log_dir_moves.start()
        self.groups.start()
        self.transactions.start()
        if self.remote is not None:
            # Clients are served only from metadata that caught up with the quorum
            # (Kafka enables its data-plane listeners after the same wait).
            self.remote.start()
            self.remote.wait_for_metadata()
        self._server.start()
        self.kafka = start_kafka_listeners(self, self.config, self.metrics, self.loop)
        if self.config.metrics_port >= 0:
            server, thread = start_http_server(
                self.config.metrics_port, self.config.metrics_host, self.metrics.registry
            )
            self._metrics_http = (server, thread)
            self.metrics_port = int(server.server_port)
        if self.remote is None:
            host, port = self.config.advertised_listener
            self.broker_epoch = self.controller.register_broker(
                self.node_id,
                host,
                port if port else self.port,
                tuple(
                    (lst.name, lst.host, lst.port)
                    for lst in self.config.advertised_listeners.values()
                ),
            )
            self.replica_manager.set_broker_epoch(self.broker_epoch)
        self.log_manager.start()
        # Every component has read its settings by now: what nobody read is unknown.
        for key in self.config.raw.unused():
            _log.warning(
                "unknown_config",
                message=f"The configuration '{key}' was supplied but isn't a known config.",
                key=key,
            )
        self._health.set("", health_pb2.HealthCheckResponse.SERVING)
        self._health.set(SERVICE_NAME, health_pb2.HealthCheckResponse.SERVING)
        _log.info(
            "node_started",
            node_id=self.node_id,
            listeners={n: f"{lst.host}:{lst.port}" for n, lst in self.config.listeners.items()},
            voters=sorted(self.config.controller_quorum_voters),
            log_dirs=[str(d) for d in self.config.log_dirs],
            metrics_port=self.metrics_port,
        )

    def _on_metadata(self, image: MetadataImage, _records: list[MetadataRecord]) -> None:
        """Dynamic broker configs take effect; this broker's epoch is the one its
        registration (made by the controller process) put in the metadata."""
        dynamic = (
            dict(image.broker_configs.get("", {})),
            dict(image.broker_configs.get(str(self.node_id), {})),
        )
        if dynamic != self._dynamic_configs:
            self._dynamic_configs = dynamic
            self._apply_broker_configs(image)
        if image.client_quotas != self._quotas_seen:
            self._quotas_seen = {k: dict(v) for k, v in image.client_quotas.items()}
            self.client_quotas.update(self._quotas_seen)
        if self.remote is None:
            return
        me = image.brokers.get(self.node_id)
        if me is not None and me.broker_epoch != self.broker_epoch:
            self.broker_epoch = me.broker_epoch
            self.replica_manager.set_broker_epoch(me.broker_epoch)

    def _apply_broker_configs(self, image: MetadataImage) -> None:
        """Without a restart (Kafka's DynamicBrokerConfig): the replication throttles,
        log.cleaner.threads and the log.retention.* defaults (the replica manager,
        the next listener, re-applies every hosted log's config on a broker config
        record)."""
        props = effective_broker_properties(image, self.node_id, self.config.raw)
        self.replica_manager.set_throttle_rates(
            int(props.get("leader.replication.throttled.rate", LONG_MAX)),
            int(props.get("follower.replication.throttled.rate", LONG_MAX)),
        )
        try:
            self.controller.broker_defaults = LogConfig.from_broker(props)
        except InvalidConfigError as e:  # validated by the controller: not expected
            _log.error("broker_config_not_applied", error=str(e))
        threads = props.get("log.cleaner.threads")
        if threads is not None:
            self.log_manager.cleaner.resize(int(threads))
        _log.info(
            "broker_configs_applied",
            dynamic={k: v for k, v in props.items() if k in DYNAMIC_BROKER_CONFIGS},
        )

    def alter_broker_configs(
        self, broker: str, changes: dict[str, str | None], validate_only: bool
    ) -> None:
        self.controller.alter_broker_configs(broker, changes, validate_only)

    def commit_records(self, records: Sequence[MetadataRecord]) -> list[tuple[str, str]]:
        return self.security.commit_records(records)

    def describe_metadata_quorum(self) -> cpb.DescribeQuorumResponse:
        """The metadata quorum as its leader sees it (each voter's log end and last
        fetch), for Kafka's DescribeQuorum; ControlError without a known leader."""
        if self.remote is None:
            raise ControlError(
                "NOT_LEADER_OR_FOLLOWER", "this node runs without controller.quorum.voters"
            )
        try:
            own = self.remote.describe_quorum(timeout_s=2)
            if own.leader_id < 0:
                raise ControlError("NOT_LEADER_OR_FOLLOWER", "no metadata quorum leader is known")
            if own.leader_id == own.node_id:
                return own
            stub = self.remote.client.controller_stub(own.leader_id)
            return stub.DescribeQuorum(cpb.DescribeQuorumRequest(), timeout=2)
        except grpc.RpcError as e:
            raise ControlError(
                "NOT_LEADER_OR_FOLLOWER", f"the quorum's leader did not answer: {e.code()}"
            ) from None

    def broker_config_layers(
        self, broker: str
    ) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
        """A broker's config layers: its dynamic configs, the cluster's dynamic
        default, and (for this node only) its server.properties."""
        image = self.controller.image
        own = dict(image.broker_configs.get(broker, {})) if broker else {}
        default = dict(image.broker_configs.get("", {}))
        static = (
            {k: str(v) for k, v in self.config.raw.items()} if broker == str(self.node_id) else {}
        )
        return own, default, static

    def describe_broker_config(self, broker: str) -> list[tuple[str, str, int]]:
        """(name, value, source) as DescribeConfigs answers a BROKER resource: the
        dynamic configs (1: this broker's, 2: the cluster default) and, for this node,
        its static properties (4)."""
        image = self.controller.image
        own = dict(image.broker_configs.get(broker, {})) if broker else {}
        default = dict(image.broker_configs.get("", {}))
        out: dict[str, tuple[str, int]] = {}
        if broker == str(self.node_id):
            out.update({k: (str(v), 4) for k, v in self.config.raw.items()})
        out.update({k: (v, 2) for k, v in default.items()})
        out.update({k: (v, 1) for k, v in own.items()})
        return [(k, v, src) for k, (v, src) in sorted(out.items())]

    def _halt(self, why: str) -> None:
        """Kafka's Exit.halt(1) on a log dir failure: nothing may wait for the failed
        disk, so once the shutdown ran (leaderships move, the offline directory is
        abandoned, not checkpointed) the process ends without waiting for request
        threads still parked on it."""
        self.halted = True
        self._fatal(why)

    def _fatal(self, why: str) -> None:
        _log.error("node_fatal", reason=why)
        self.exit_code = 1
        threading.Thread(target=self.shutdown, name="shutdown").start()

    def shutdown(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        self._health.enter_graceful_shutdown()
        # Each step runs even when an earlier one failed, and the process always ends:
        # a failed step (a log directory gone, a snapshot that cannot be written) is
        # logged and makes the exit code 1, it never leaves a process that hangs.
        steps: list[tuple[str, Callable[[], object]]] = [
            # A remote controller makes the controlled shutdown (leaderships move
            # away) before its process exits.
            ("controller", self.controller.shutdown),
            ("kafka", lambda: [kafka.shutdown() for kafka in self.kafka]),
            ("event_loop", lambda: self.loop.stop() if self.loop is not None else None),
            ("metrics", lambda: self._metrics_http[0].shutdown() if self._metrics_http else None),
            ("groups", self.groups.shutdown),
            ("transactions", self.transactions.shutdown),
            (
                "txn_verification",
                lambda: self.txn_verification.shutdown() if self.txn_verification else None,
            ),
            ("server", lambda: self._server.stop(grace=2).wait(5) if self._server else None),
            ("log_dir_moves", self.log_dir_moves.shutdown),
            ("replica_manager", self.replica_manager.shutdown),
            ("logs", lambda: self.log_manager.shutdown(self.broker_epoch)),
        ]
        for name, step in steps:
            try:
                step()
            except Exception:  # noqa: BLE001 - reported, and the shutdown goes on
                _log.error("shutdown_step_failed", exc=True, step=name)
                self.exit_code = 1
        _log.info("node_stopped", node_id=self.node_id, exit_code=self.exit_code)
        self._done.set()

    def wait(self) -> None:
        # Never one endless wait: a SIGTERM the kernel hands to another thread (it
        # skips a main thread not yet running again after SIGCONT) only trips Python's
        # flag, and the main thread runs the handler when it next runs bytecode.
        while not self._done.wait(SIGNAL_CHECK_S):
            pass

    # --- what the replica manager needs ------------------------------------------------

    def _broker_address(self, node: int) -> tuple[str, int] | None:
        """Where this node reaches another for replication: its endpoint on the
        inter-broker listener (inter.broker.listener.name), else what it advertises
        to clients; `seglog.inter.broker.address.overrides` first (node/config.py)."""
        b = self.controller.image.brokers.get(node)
        if b is None:
            return None
        override = self.config.inter_broker_address_overrides.get(node)
        if override is not None:
            return override
        return b.endpoint(self.config.inter_broker_listener_name) or (b.host, b.port)

    def _leader_of(self, tp: tuple[str, int]) -> int:
        topic = self.controller.image.topics.get(tp[0])
        state = topic.partitions.get(tp[1]) if topic is not None else None
        return state.leader if state is not None else -1

    def _txn_coordinator_of(self, transactional_id: str) -> int:
        """The node leading the id's `__transaction_state` partition, or -1."""
        return self._leader_of(
            (TRANSACTION_STATE_TOPIC, self.transactions.coordinator.partition_for(transactional_id))
        )

    def _kafka_address(self, node: int) -> tuple[str, int] | None:
        """Where this node reaches another's Kafka listener (WriteTxnMarkers)."""
        b = self.controller.image.brokers.get(node)
        if b is None:
            return None
        return b.endpoint(txn_markers_listener(self.config))

    def _eligible(self, replica: int, broker_epoch: int) -> bool:
        """KIP-903: an ISR candidate is registered, unfenced and fetching with the
        broker epoch the metadata holds."""
        b = self.controller.image.brokers.get(replica)
        return (
            b is not None and not b.fenced and (broker_epoch < 0 or broker_epoch == b.broker_epoch)
        )

    def _alter_partitions(self, changes: Sequence[IsrChange]) -> list[IsrChangeResult]:
        """One AlterPartition request with this broker's pending ISR changes."""
        if self.remote is not None:
            return self.remote.alter_partitions(self.node_id, self.broker_epoch, changes)
        answers = self.controller.alter_partitions(self.node_id, self.broker_epoch, changes)
        out = []
        for change, (error, message) in zip(changes, answers, strict=True):
            state = self.controller.image.partition(change.topic, change.partition)
            if state is None:
                out.append(IsrChangeResult("UNKNOWN_TOPIC_OR_PARTITION", message))
            else:
                out.append(
                    IsrChangeResult(
                        error, message, state.leader_epoch, state.partition_epoch, state.isr
                    )
                )
        return out

    # --- what the servicer needs ----------------------------------------------------

    def metadata_image(self) -> MetadataImage:
        return self.controller.image

    def stalled(self) -> str | None:
        """What stalled in this broker (its pulse's last judgement), None while serving."""
        return self.remote.pulse.stalled if self.remote is not None else None

    def controller_id(self) -> int:
        if self.remote is None:
            return self.node_id
        leader = self.remote.leader_id
        return -1 if leader is None else leader

    def create_topic(
        self,
        name: str,
        partitions: int,
        rf: int,
        configs: dict[str, str],
        validate_only: bool,
        assignments: Sequence[tuple[int, Sequence[int]]] = (),
    ) -> str:
        return self.controller.create_topic(
            name, partitions, rf, configs, validate_only, assignments
        )

    def find_group_coordinator(self, group_id: str) -> tuple[str, int]:
        """(error, node id) of the group's coordinator: the leader of its
        `__consumer_offsets` partition. The topic is created on first use, as Kafka
        does (offsets.topic.replication.factor, at most the live brokers)."""
        return self._find_coordinator(
            OFFSETS_TOPIC,
            self.config.group_config.offsets_topic_num_partitions,
            self.config.offsets_topic_replication_factor,
            dict(OFFSETS_TOPIC_CONFIGS),
            self.groups.coordinator.partition_for(group_id),
        )

    def find_transaction_coordinator(self, transactional_id: str) -> tuple[str, int]:
        """(error, node id) of the transactional id's coordinator: the leader of its
        `__transaction_state` partition, the topic created on first use
        (transaction.state.log.*; docs/transactions.md)."""
        rf = self.config.transaction_state_log_replication_factor
        configs = {
            **TXN_TOPIC_CONFIGS,
            "min.insync.replicas": str(min(self.config.transaction_state_log_min_isr, rf)),
        }
        return self._find_coordinator(
            TRANSACTION_STATE_TOPIC,
            self.config.txn_config.transaction_state_log_num_partitions,
            rf,
            configs,
            self.transactions.coordinator.partition_for(transactional_id),
        )

    def _find_coordinator(
        self, name: str, partitions: int, rf: int, configs: dict[str, str], partition: int
    ) -> tuple[str, int]:
        image = self.controller.image
        topic = image.topics.get(name)
        if topic is None:
            live = sum(1 for b in image.brokers.values() if not b.fenced)
            rf = max(1, min(rf, live))
            if "min.insync.replicas" in configs:
                configs["min.insync.replicas"] = str(min(int(configs["min.insync.replicas"]), rf))
            try:
                self.controller.create_topic(name, partitions, rf, configs, False)
            except ControlError as e:
                if e.error_name != "TOPIC_ALREADY_EXISTS":
                    _log.info("internal_topic_not_created", topic=name, error=e.error_name)
                    return "COORDINATOR_NOT_AVAILABLE", -1
            return "COORDINATOR_NOT_AVAILABLE", -1  # leaders are being elected
        state = topic.partitions.get(partition)
        if state is None or state.leader < 0:
            return "COORDINATOR_NOT_AVAILABLE", -1
        broker = image.brokers.get(state.leader)
        if broker is None or broker.fenced:
            return "COORDINATOR_NOT_AVAILABLE", -1
        return "NONE", state.leader

    def create_partitions(
        self,
        name: str,
        total_count: int,
        validate_only: bool,
        assignments: Sequence[Sequence[int]] | None = None,
    ) -> None:
        self.controller.create_partitions(name, total_count, validate_only, assignments)

    def delete_topic(self, name: str) -> None:
        self.controller.delete_topic(name)

    def elect_leaders(
        self, election: str, partitions: Sequence[tuple[str, int]] | None
    ) -> dict[tuple[str, int], str]:
        return self.controller.elect_leaders(election, partitions)

    def alter_partition_reassignments(
        self, requests: Sequence[tuple[str, int, tuple[int, ...] | None]]
    ) -> dict[tuple[str, int], tuple[str, str]]:
        return self.controller.alter_partition_reassignments(requests)

    def list_partition_reassignments(
        self, partitions: Sequence[tuple[str, int]] | None
    ) -> list[OngoingReassignment]:
        return self.controller.list_partition_reassignments(partitions)

    def alter_configs(
        self, topic: str, changes: dict[str, str | None], validate_only: bool
    ) -> None:
        self.controller.alter_configs(topic, changes, validate_only)
        if not validate_only:
            # Re-apply so hosted logs pick up the new config.
            self.replica_manager.on_metadata(self.controller.image, [])

    def describe_topic_config(self, topic: str) -> list[tuple[str, str, int]]:
        if topic not in self.controller.image.topics:
            raise ControlError("UNKNOWN_TOPIC_OR_PARTITION", f"topic {topic!r} does not exist")
        config = self.controller.topic_config(topic)
        return [(e.name, e.value, int(e.source)) for e in config.describe()]

    def next_producer_id(self) -> int:
        with self._pid_lock:
            if self._pid_next >= self._pid_end:
                self._pid_next, self._pid_end = self._allocate_producer_ids()
            pid = self._pid_next
            self._pid_next += 1
            return pid

    def _allocate_producer_ids(self) -> tuple[int, int]:
        return self.controller.allocate_producer_ids(self.node_id, self.broker_epoch)


class QuorumDescriber(cluster_pb2_grpc.ControllerServicer):
    """DescribeQuorum on a broker's gRPC listener (`seglog cluster --describe` asks
    brokers), answered by the node's controller process. Every other controller call
    goes to the CONTROLLER listener."""

    def __init__(self, remote: RemoteController) -> None:
        self.remote = remote

    def DescribeQuorum(  # noqa: N802
        self, request: cpb.DescribeQuorumRequest, context: grpc.ServicerContext
    ) -> cpb.DescribeQuorumResponse:
        try:
            return self.remote.describe_quorum(timeout_s=2)
        except grpc.RpcError as e:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"the controller did not answer: {e.code()}")
            raise


# How late the main thread may run a signal's handler (Node.wait).
SIGNAL_CHECK_S = 0.25

# A node's threads hand work to each other (gRPC poller, request workers, fetchers):
# each hand-off waits for the GIL, up to the switch interval (5 ms by default) while
# another thread computes. A shorter interval keeps an acks=-1 produce's chain of
# hand-offs from adding tens of milliseconds under load.
NODE_SWITCH_INTERVAL_S = 0.001


def raise_open_files_limit() -> None:
    """A partition holds a .log file open per segment: at thousands of partitions the
    usual soft limit of 1024 descriptors is too few (Kafka's docs ask for 100,000)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and (hard == resource.RLIM_INFINITY or soft < hard):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def run_node(config: NodeConfig, log_level: str = "INFO") -> int:
    configure(log_level, config.node_id)
    disk_and_clock.set_node_id(config.node_id)
    sys.setswitchinterval(NODE_SWITCH_INTERVAL_S)
    raise_open_files_limit()
    # Process-wide, so here and not in Node (tests run several nodes in one process).
    tuning = allocator.tune_malloc()
    _log.info("malloc", tuned=tuning.applied, detail=tuning.reason)
    node = Node(config, log_level)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        _log.info("signal", signal=signal.Signals(signum).name)
        threading.Thread(target=node.shutdown, name="shutdown").start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    node.start()
    # Process-wide, so here and not in Node (tests run several nodes in one process).
    gc_pauses.observe(node.metrics)
    node.wait()
    # Stopped: a further SIGTERM or SIGINT (a second Ctrl-C, a supervisor's repeat)
    # must not end the interpreter's exit with that signal instead of the exit code.
    # Ignored, not handled: the interpreter resets its own handlers as it finalizes.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if node.halted:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(node.exit_code)
    return node.exit_code
