"""The node process: wires config, log manager, controller, replica manager and the
gRPC server (SegLog plus the standard health service) together, and shuts
down cleanly on SIGTERM/SIGINT."""

from __future__ import annotations

import random
import signal
import threading
from concurrent import futures
from types import FrameType

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from seglog.proto import client_pb2_grpc
from seglog.replication.metadata_image import MetadataImage

from .config import NodeConfig
from .event_log import EventLogger, configure
from .local_controller import LocalController
from .log_manager import LogManager
from .replica_manager import ReplicaManager
from .servicer import SegLogServicer

_log = EventLogger("node")
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
        self.controller = LocalController(config.log_dirs[0], config.log_config, random.Random())
        self.replica_manager = ReplicaManager(
            config.node_id, self.log_manager, self.controller.topic_config
        )
        self.broker_epoch = -1
        self._pid_lock = threading.Lock()
        self._pid_next = 0
        self._pid_end = 0
        self._server: grpc.Server | None = None
        self._health = health.HealthServicer()
        self._stopped = threading.Event()
        self._done = threading.Event()
        self.port = -1

    # --- lifecycle -----------------------------------------------------------------

    def start(self) -> None:
        self.log_manager.load()
        self.controller.load(clean=self.log_manager.had_clean_shutdown)
        host, port = self.config.advertised_listener
        self._server = grpc.server(
            futures.ThreadPoolExecutor(
                max_workers=max(8, self.config.num_io_threads * 2),
                thread_name_prefix="grpc",
            ),
            options=[
                ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
                ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                ("grpc.so_reuseport", 0),
            ],
        )
        client_pb2_grpc.add_SegLogServicer_to_server(SegLogServicer(self), self._server)
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)
        bind_host, bind_port = self.config.listener
        self.port = self._server.add_insecure_port(f"{bind_host}:{bind_port}")
        if self.port == 0:
            raise OSError(f"cannot listen on {bind_host}:{bind_port}")
        if port == 0:
            host, port = host, self.port
        self.broker_epoch = self.controller.register_broker(self.node_id, host, port)
        self.controller.add_listener(self.replica_manager.on_metadata)
        self.log_manager.start()
        self._server.start()
        self._health.set("", health_pb2.HealthCheckResponse.SERVING)
        self._health.set(SERVICE_NAME, health_pb2.HealthCheckResponse.SERVING)
        _log.info(
            "node_started",
            node_id=self.node_id,
            listener=f"{bind_host}:{self.port}",
            broker_epoch=self.broker_epoch,
            log_dirs=[str(d) for d in self.config.log_dirs],
        )

    def shutdown(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        self._health.enter_graceful_shutdown()
        if self._server is not None:
            self._server.stop(grace=2).wait(5)
        self.controller.shutdown()
        self.log_manager.shutdown(self.broker_epoch)
        _log.info("node_stopped", node_id=self.node_id)
        self._done.set()

    def wait(self) -> None:
        self._done.wait()

    # --- what the servicer needs ----------------------------------------------------

    def metadata_image(self) -> MetadataImage:
        return self.controller.image

    def controller_id(self) -> int:
        return self.node_id

    def create_topic(
        self, name: str, partitions: int, rf: int, configs: dict[str, str], validate_only: bool
    ) -> str:
        return self.controller.create_topic(name, partitions, rf, configs, validate_only)

    def delete_topic(self, name: str) -> None:
        self.controller.delete_topic(name)

    def alter_configs(
        self, topic: str, changes: dict[str, str | None], validate_only: bool
    ) -> None:
        self.controller.alter_configs(topic, changes, validate_only)
        if not validate_only:
            # Re-apply so hosted logs pick up the new config.
            self.replica_manager.on_metadata(self.controller.image, [])

    def describe_topic_config(self, topic: str) -> list[tuple[str, str, int]]:
        from seglog.replication.cluster_control import ControlError

        if topic not in self.controller.image.topics:
            raise ControlError("UNKNOWN_TOPIC_OR_PARTITION", f"topic {topic!r} does not exist")
        config = self.controller.topic_config(topic)
        return [(e.name, e.value, int(e.source)) for e in config.describe()]

    def next_producer_id(self) -> int:
        with self._pid_lock:
            if self._pid_next >= self._pid_end:
                self._pid_next, self._pid_end = self.controller.allocate_producer_ids(
                    self.node_id, self.broker_epoch
                )
            pid = self._pid_next
            self._pid_next += 1
            return pid


def run_node(config: NodeConfig, log_level: str = "INFO") -> int:
    configure(log_level, config.node_id)
    node = Node(config)

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        _log.info("signal", signal=signal.Signals(signum).name)
        threading.Thread(target=node.shutdown, name="shutdown").start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    node.start()
    node.wait()
    return 0
