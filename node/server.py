"""The node process: wires config, log manager, controller, replica manager and the
gRPC server (SegLog plus the standard health service) together, and shuts
down cleanly on SIGTERM/SIGINT."""

from __future__ import annotations

import random
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent import futures
from types import FrameType

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from seglog.proto import client_pb2 as pb
from seglog.proto import client_pb2_grpc, cluster_pb2_grpc, errors_pb2
from seglog.proto import cluster_pb2 as cpb
from seglog.replication import partition_replica as pr
from seglog.replication.cluster_control import ControlError
from seglog.replication.metadata_image import MetadataImage
from seglog.storage.errors import InvalidConfigError

from .config import NodeConfig
from .controller_client import ControllerClient
from .controller_servicer import ControllerServicer
from .event_log import EventLogger, configure
from .forwarding import FORWARDED, FORWARDED_HEADER
from .kafka.listener import KafkaListener
from .local_controller import LocalController
from .log_manager import LogManager
from .quorum_controller import QuorumController
from .replica_manager import ReplicaManager
from .servicer import SegLogServicer, code

_log = EventLogger("node")
FORWARD_WAIT_S = 10.0


MAX_MESSAGE_BYTES = 64 * 1024 * 1024
SERVICE_NAME = "seglog.v1.SegLog"


class Node:
    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.node_id = config.node_id
        self.cluster_id = config.cluster_id
        self.fetch_max_bytes = config.fetch_max_bytes
        self.num_partitions = config.num_partitions
        self.default_replication_factor = config.default_replication_factor
        self.auto_create_topics_enable = config.auto_create_topics_enable
        self.log_manager = LogManager(config.log_dirs, config.log_config, config.log_settings)
        self.quorum: QuorumController | None = None
        self.controller_client: ControllerClient | None = None
        if config.controller_quorum_voters:
            if config.node_id not in config.controller_quorum_voters:
                raise InvalidConfigError(
                    f"node.id {config.node_id} is not among controller.quorum.voters "
                    f"{sorted(config.controller_quorum_voters)}; broker-only nodes are not "
                    f"supported yet"
                )
            self.quorum = QuorumController(
                config.node_id,
                config.controller_quorum_voters,
                config.log_dirs[0],
                config.log_config,
                random.Random(),
                session_timeout_ms=config.broker_session_timeout_ms,
                auto_leader_rebalance=config.auto_leader_rebalance_enable,
                rebalance_interval_ms=config.leader_imbalance_check_interval_seconds * 1000,
                election_timeout_ms=config.controller_quorum_election_timeout_ms,
            )
            self.controller_client = ControllerClient(
                config.controller_quorum_voters,
                lambda: self.quorum.leader_id if self.quorum else None,
            )
            self.controller: LocalController | QuorumController = self.quorum
        else:
            self.controller = LocalController(
                config.log_dirs[0], config.log_config, random.Random()
            )
        self.replica_manager = ReplicaManager(
            config.node_id,
            self.log_manager,
            self.controller.topic_config,
            replica_lag_time_max_ms=config.replica_lag_time_max_ms,
            replica_fetch_max_bytes=config.replica_fetch_max_bytes,
            replica_fetch_backoff_ms=config.replica_fetch_backoff_ms,
            address_of=self._broker_address,
            alter_partition=self._alter_partition,
            is_replica_eligible=self._eligible,
        )
        self.broker_epoch = -1
        self._pid_lock = threading.Lock()
        self._pid_next = 0
        self._pid_end = 0
        self._server: grpc.Server | None = None
        self._health = health.HealthServicer()
        self._stopped = threading.Event()
        self._done = threading.Event()
        self._lifecycle: threading.Thread | None = None
        self.port = -1
        self.kafka: KafkaListener | None = None  # the PLAINTEXT (Kafka protocol) listener

    # --- lifecycle -----------------------------------------------------------------

    def start(self) -> None:
        self.log_manager.load()
        self.controller.load(clean=self.log_manager.had_clean_shutdown)
        host, port = self.config.advertised_listener
        self._server = grpc.server(
            futures.ThreadPoolExecutor(
                max_workers=max(32, self.config.num_io_threads * 4),
                thread_name_prefix="grpc",
            ),
            options=[
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.so_reuseport", 0),
                # Clients and followers ping every second during long polls to notice
                # a frozen peer: never answer that with GOAWAY (too_many_pings).
                ("grpc.http2.min_recv_ping_interval_without_data_ms", 500),
                ("grpc.http2.max_ping_strikes", 0),
                ("grpc.keepalive_permit_without_calls", 1),
            ],
        )
        client_pb2_grpc.add_SegLogServicer_to_server(SegLogServicer(self), self._server)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)
        if self.quorum is not None:
            cluster_pb2_grpc.add_ControllerServicer_to_server(
                ControllerServicer(self.quorum, self.cluster_id), self._server
            )
        bind_host, bind_port = self.config.listener
        self.port = self._server.add_insecure_port(f"{bind_host}:{bind_port}")
        if self.port == 0:
            raise OSError(f"cannot listen on {bind_host}:{bind_port}")
        if port == 0:
            port = self.port
        self.controller.add_listener(self.replica_manager.on_metadata)
        self.replica_manager.start()
        self._server.start()
        self.kafka = KafkaListener.maybe_create(self, self.config.raw)
        listeners = "" if self.kafka is None else self.kafka.advertised_listeners((host, port))
        if self.kafka is not None:
            self.kafka.start()
        if self.quorum is not None:
            self.quorum.start()
            self._lifecycle = threading.Thread(
                target=self._broker_lifecycle,
                args=(host, port, listeners),
                name="broker-lifecycle",
                daemon=True,
            )
            self._lifecycle.start()
        else:
            self.broker_epoch = self.controller.register_broker(self.node_id, host, port, listeners)
            self.replica_manager.set_broker_epoch(self.broker_epoch)
        self.log_manager.start()
        self._health.set("", health_pb2.HealthCheckResponse.SERVING)
        self._health.set(SERVICE_NAME, health_pb2.HealthCheckResponse.SERVING)
        _log.info(
            "node_started",
            node_id=self.node_id,
            listener=f"{bind_host}:{self.port}",
            voters=sorted(self.config.controller_quorum_voters),
            log_dirs=[str(d) for d in self.config.log_dirs],
        )

    def _broker_lifecycle(self, host: str, port: int, listeners: str) -> None:
        """KRaft's broker side: register with the active controller, then heartbeat;
        re-register when the controller no longer knows this incarnation."""
        client = self.controller_client
        assert client is not None and self.quorum is not None
        interval = self.config.broker_heartbeat_interval_ms / 1000
        rpc_timeout = max(0.2, min(2.0, self.config.broker_session_timeout_ms / 3000))
        while not self._stopped.is_set():
            if self.broker_epoch < 0:
                try:
                    r = client.call(
                        lambda n: client.controller_stub(n).RegisterBroker(
                            cpb.RegisterBrokerRequest(
                                broker_id=self.node_id,
                                host=host,
                                port=port,
                                cluster_id=self.cluster_id,
                                listeners=listeners,
                            ),
                            timeout=5,
                        ),
                        lambda r: (r.error_code, r.error_message),
                    )
                except ControlError:
                    continue
                if r.error_code == 0:
                    self.broker_epoch = r.broker_epoch
                    self.replica_manager.set_broker_epoch(r.broker_epoch)
                    _log.info("registered", broker_epoch=r.broker_epoch)
                continue
            try:
                r = client.call(
                    lambda n: client.controller_stub(n).BrokerHeartbeat(
                        cpb.BrokerHeartbeatRequest(
                            broker_id=self.node_id,
                            broker_epoch=self.broker_epoch,
                            metadata_offset=self.quorum.metadata_offset if self.quorum else 0,
                        ),
                        # A frozen voter must not hold a heartbeat past the session:
                        # give up on it quickly and try the next one.
                        timeout=rpc_timeout,
                    ),
                    lambda r: (r.error_code, r.error_message),
                    deadline_s=max(2.0, interval * 3),
                )
                if r.error_code in (code("STALE_BROKER_EPOCH"), code("BROKER_NOT_AVAILABLE")):
                    self.broker_epoch = -1
                    continue
            except ControlError:
                pass
            self._stopped.wait(interval)

    def _controlled_shutdown(self) -> None:
        client = self.controller_client
        if client is None or self.broker_epoch < 0:
            return
        try:
            client.call(
                lambda n: client.controller_stub(n).BrokerHeartbeat(
                    cpb.BrokerHeartbeatRequest(
                        broker_id=self.node_id, broker_epoch=self.broker_epoch, want_shutdown=True
                    ),
                    timeout=3,
                ),
                lambda r: (r.error_code, r.error_message),
                deadline_s=3,
            )
        except ControlError:
            pass  # the controller will fence this broker when its session expires

    def shutdown(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        self._health.enter_graceful_shutdown()
        self._controlled_shutdown()
        if self.kafka is not None:
            self.kafka.shutdown()
        if self._server is not None:
            self._server.stop(grace=2).wait(5)
        self.replica_manager.shutdown()
        self.controller.shutdown()
        if self.controller_client is not None:
            self.controller_client.close()
        self.log_manager.shutdown(self.broker_epoch)
        _log.info("node_stopped", node_id=self.node_id)
        self._done.set()

    def wait(self) -> None:
        self._done.wait()

    # --- what the replica manager needs ------------------------------------------------

    def _broker_address(self, node: int) -> tuple[str, int] | None:
        """Where this node reaches another for replication: its voter address when it
        is a voter (the cluster-internal name, e.g. in docker-compose), else what it
        advertises to clients."""
        voter = self.config.controller_quorum_voters.get(node)
        if voter is not None:
            return voter
        b = self.controller.image.brokers.get(node)
        return (b.host, b.port) if b is not None else None

    def _eligible(self, replica: int, broker_epoch: int) -> bool:
        """KIP-903: an ISR candidate is registered, unfenced and fetching with the
        broker epoch the metadata holds."""
        b = self.controller.image.brokers.get(replica)
        return (
            b is not None and not b.fenced and (broker_epoch < 0 or broker_epoch == b.broker_epoch)
        )

    def _alter_partition(
        self, topic: str, partition: int, req: pr.SendAlterPartition
    ) -> pr.AlterPartitionResponse:
        if self.quorum is None or self.quorum.is_active():
            try:
                self.controller.alter_partition(
                    self.node_id,
                    topic,
                    partition,
                    req.leader_epoch,
                    req.partition_epoch,
                    req.new_isr,
                )
                error = "NONE"
            except ControlError as e:
                error = e.error_name
            state = self.controller.image.partition(topic, partition)
            if state is None:
                return pr.AlterPartitionResponse("UNKNOWN_TOPIC_OR_PARTITION", req.request_id)
            return pr.AlterPartitionResponse(
                error, req.request_id, state.leader_epoch, state.partition_epoch, state.isr
            )
        client = self.controller_client
        assert client is not None
        r = client.call(
            lambda n: client.controller_stub(n).AlterPartition(
                cpb.AlterPartitionRequest(
                    broker_id=self.node_id,
                    broker_epoch=self.broker_epoch,
                    topic=topic,
                    partition=partition,
                    leader_epoch=req.leader_epoch,
                    partition_epoch=req.partition_epoch,
                    new_isr=req.new_isr,
                ),
                timeout=10,
            ),
            lambda r: (r.error_code, r.error_message),
        )
        return pr.AlterPartitionResponse(
            errors_pb2.ErrorCode.Name(r.error_code),
            req.request_id,
            r.leader_epoch,
            r.partition_epoch,
            tuple(r.isr),
        )

    # --- what the servicer needs ----------------------------------------------------

    def metadata_image(self) -> MetadataImage:
        return self.controller.image

    def controller_id(self) -> int:
        if self.quorum is None:
            return self.node_id
        return -1 if self.quorum.leader_id is None else self.quorum.leader_id

    def _forward(self, method: str, request: object) -> object | None:
        """An admin request on a node that is not the active controller goes to the
        leader this node knows, marked as forwarded: a forwarded request is never
        forwarded again, so requests cannot circle between nodes and hold the threads
        Raft's votes need. During an election it waits (bounded) for the new leader;
        NOT_CONTROLLER after that, which clients retry. None: this node became the
        active controller meanwhile, so the caller does the work itself."""
        client = self.controller_client
        if client is None or FORWARDED.active:
            raise ControlError("NOT_CONTROLLER", f"node {self.node_id} is not the controller")
        deadline = time.monotonic() + FORWARD_WAIT_S
        last = "no leader known"
        while time.monotonic() < deadline:
            leader = self.quorum.leader_id if self.quorum is not None else None
            if self.quorum is not None and self.quorum.is_active():
                return None
            if leader is None or leader == self.node_id:
                time.sleep(0.02)  # electing, or elected here but not yet ready
                continue
            try:
                response = getattr(client.seglog_stub(leader), method)(
                    request,
                    timeout=max(0.5, deadline - time.monotonic()),
                    metadata=[(FORWARDED_HEADER, "1")],
                )
            except grpc.RpcError as e:
                last = f"controller {leader} did not answer: {e.code()}"
                time.sleep(0.05)  # it is probably dead: wait for the next election
                continue
            error, message = _first_error(response)
            if error != errors_pb2.ErrorCode.Value("NOT_CONTROLLER"):
                return response
            last = message
            time.sleep(0.05)
        raise ControlError("NOT_CONTROLLER", last)

    def create_topic(
        self, name: str, partitions: int, rf: int, configs: dict[str, str], validate_only: bool
    ) -> str:
        if self.quorum is None or self.quorum.is_active():
            return self.controller.create_topic(name, partitions, rf, configs, validate_only)
        request = pb.CreateTopicsRequest(
            topics=[
                pb.CreatableTopic(
                    name=name, num_partitions=partitions, replication_factor=rf, configs=configs
                )
            ],
            validate_only=validate_only,
        )
        response = self._forward("CreateTopics", request)
        if response is None:
            return self.controller.create_topic(name, partitions, rf, configs, validate_only)
        result = response.topics[0]  # type: ignore[attr-defined]
        _raise_for(result.error_code, result.error_message)
        self._await_metadata(lambda image: name in image.topics or validate_only)
        return str(result.topic_id)

    def delete_topic(self, name: str) -> None:
        if self.quorum is None or self.quorum.is_active():
            self.controller.delete_topic(name)
            return
        response = self._forward("DeleteTopics", pb.DeleteTopicsRequest(names=[name]))
        if response is None:
            self.controller.delete_topic(name)
            return
        result = response.topics[0]  # type: ignore[attr-defined]
        _raise_for(result.error_code, result.error_message)
        self._await_metadata(lambda image: name not in image.topics)

    def alter_configs(
        self, topic: str, changes: dict[str, str | None], validate_only: bool
    ) -> None:
        if self.quorum is None or self.quorum.is_active():
            self.controller.alter_configs(topic, changes, validate_only)
        else:
            request = pb.AlterConfigsRequest(
                resources=[
                    pb.AlterConfigsResource(
                        type=pb.TOPIC,
                        name=topic,
                        configs=[
                            pb.AlterableConfig(
                                name=k, op=pb.DELETE if v is None else pb.SET, value=v or ""
                            )
                            for k, v in changes.items()
                        ],
                    )
                ],
                validate_only=validate_only,
            )
            response = self._forward("AlterConfigs", request)
            if response is None:
                self.controller.alter_configs(topic, changes, validate_only)
            else:
                result = response.results[0]  # type: ignore[attr-defined]
                _raise_for(result.error_code, result.error_message)
        if not validate_only:
            # Re-apply so hosted logs pick up the new config.
            self.replica_manager.on_metadata(self.controller.image, [])

    def _await_metadata(
        self, ready: Callable[[MetadataImage], bool], timeout_s: float = 10
    ) -> None:
        """Answer after this node applied the change too, so the client's next
        metadata request here sees it."""
        deadline = time.monotonic() + timeout_s
        while not ready(self.controller.image) and time.monotonic() < deadline:
            time.sleep(0.02)

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
        if self.quorum is None or self.quorum.is_active():
            return self.controller.allocate_producer_ids(self.node_id, self.broker_epoch)
        client = self.controller_client
        assert client is not None
        r = client.call(
            lambda n: client.controller_stub(n).AllocateProducerIds(
                cpb.AllocateProducerIdsRequest(
                    broker_id=self.node_id, broker_epoch=self.broker_epoch
                ),
                timeout=10,
            ),
            lambda r: (r.error_code, r.error_message),
        )
        _raise_for(r.error_code, r.error_message)
        return r.first_producer_id, r.end_producer_id


def _first_error(response: object) -> tuple[int, str]:
    for field in ("topics", "results"):
        items = getattr(response, field, None)
        if items:
            return items[0].error_code, items[0].error_message
    return 0, ""


def _raise_for(error_code: int, message: str) -> None:
    if error_code:
        raise ControlError(errors_pb2.ErrorCode.Name(error_code), message)


# A node's threads hand work to each other (gRPC poller, request workers, fetchers):
# each hand-off waits for the GIL, up to the switch interval (5 ms by default) while
# another thread computes. A shorter interval keeps an acks=-1 produce's chain of
# hand-offs from adding tens of milliseconds under load.
NODE_SWITCH_INTERVAL_S = 0.001


def run_node(config: NodeConfig, log_level: str = "INFO") -> int:
    configure(log_level, config.node_id)
    sys.setswitchinterval(NODE_SWITCH_INTERVAL_S)
    node = Node(config)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        _log.info("signal", signal=signal.Signals(signum).name)
        threading.Thread(target=node.shutdown, name="shutdown").start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    node.start()
    node.wait()
    return 0
