"""The controller of a combined node (`process.roles=broker,controller`) in a process
of its own.

In one CPython process the Raft thread and the broker's heartbeats share the GIL
with every produce and fetch, and at thousands of partitions a saturated data plane
made them miss their deadlines: elections followed one another and brokers were
fenced. Here they have a process to themselves: the Raft quorum
(`QuorumController`) and its gRPC service on the CONTROLLER listener, and the
broker's lifecycle (registration, heartbeats, controlled shutdown), which is what
the controller judges the broker's liveness by. The broker process
(`remote_controller.RemoteController`) starts this process, receives the committed
metadata over `WatchMetadata` and reports what it applied, which the heartbeats
carry.

The heartbeats are relayed only while the broker proves it is alive and serving: it
writes a pulse line to this process's stdin every few heartbeat intervals' fraction
(`liveness.PulseGate`), saying `alive` or what stalled. A broker that stops pulsing
(frozen, wedged) is fenced a session later, as Kafka fences a broker whose own
heartbeats stop; one that says it stalled is fenced at once (a controlled shutdown of
its leaderships), and either is unfenced when its pulses resume.

The process ends with its broker: the kernel sends it SIGKILL when the broker dies
(PR_SET_PDEATHSIG), and EOF on its stdin (the broker's pipe) stops it too. SIGTERM
stops it cleanly, after a controlled shutdown of its broker.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import random
import signal
import sys
import threading
from concurrent import futures
from types import FrameType
from typing import NoReturn

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from seglog.controller.cluster_control import ControlError
from seglog.controller.metadata_image import MetadataImage
from seglog.node.config import NodeConfig
from seglog.node.controller.controller_client import ControllerClient
from seglog.node.controller.controller_servicer import ControllerServicer
from seglog.node.controller.quorum_controller import QuorumController
from seglog.node.event_log import EventLogger, configure
from seglog.node.grpc_errors import code
from seglog.node.grpc_wrap import SERVER_OPTIONS
from seglog.node.liveness import (
    PulseGate,
    parse_pulse,
    pulse_interval_s,
    pulse_line,
    pulse_max_age_s,
)
from seglog.node.security import grpc_tls
from seglog.node.security.grpc_gate import AuthorizingInterceptor
from seglog.node.security.internode import controller_credentials
from seglog.node.security.node_authorizer import NodeAuthorizer
from seglog.node.security.security_servicer import SecurityControlServicer
from seglog.proto import cluster_pb2 as cpb
from seglog.proto import cluster_pb2_grpc, security_pb2_grpc
from seglog.storage.disk_and_clock import plain_monotonic_s

_log = EventLogger("controller_process")
SERVICE_NAME = "seglog.v1.Controller"
# Raft messages, heartbeats, broker calls and one metadata watch: a small fixed pool.
CONTROLLER_RPC_THREADS = 16
PR_SET_PDEATHSIG = 1
CONTROLLER_NICENESS = -5
# At shutdown, how long the requests waiting for a commit get before the listener
# stops (what the listener's graceful stop gave them before, uselessly: see
# QuorumController.close_proposals).
PROPOSALS_DRAIN_S = 1.0


def _die_with_parent() -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the stdin watch below still ends the process


class ControllerProcess:
    def __init__(self, config: NodeConfig, clean: bool, gate: PulseGate | None = None) -> None:
        self.config = config
        self.node_id = config.node_id
        self.gate = gate or PulseGate(pulse_max_age_s(config.broker_session_timeout_ms))
        self._self_fenced = False  # a want_shutdown heartbeat sent for a stalled broker
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
            channel_credentials=controller_credentials(config),
        )
        self.quorum.load(clean=clean)
        self.client = ControllerClient(
            config.controller_quorum_voters,
            lambda: self.quorum.leader_id,
            controller_credentials(config),
        )
        self.broker_applied = -1  # the last metadata offset the broker reported
        self.broker_epoch = -1
        self._stopped = threading.Event()
        self._server: grpc.Server | None = None
        self._health = health.HealthServicer()
        self._lifecycle: threading.Thread | None = None
        self._servicer: ControllerServicer | None = None

    def on_broker_applied(self, broker_id: int, offset: int) -> None:
        if broker_id == self.node_id:
            self.broker_applied = max(self.broker_applied, offset)

    def start(self) -> None:
        listener = self.config.controller_listener
        assert listener is not None, "config checks a voter has a controller listener"
        self._server = grpc.server(
            futures.ThreadPoolExecutor(
                max_workers=CONTROLLER_RPC_THREADS, thread_name_prefix="controller-rpc"
            ),
            interceptors=[AuthorizingInterceptor(authorizer, controller_listener=True)]
            if (authorizer := NodeAuthorizer.from_properties(self.config.raw, self._image))
            else None,
            options=SERVER_OPTIONS,
        )
        self._servicer = ControllerServicer(
            self.quorum, self.config.cluster_id, self.on_broker_applied
        )
        cluster_pb2_grpc.add_ControllerServicer_to_server(self._servicer, self._server)
        security_pb2_grpc.add_SecurityControlServicer_to_server(
            SecurityControlServicer(self.quorum), self._server
        )
        health_pb2_grpc.add_HealthServicer_to_server(self._health, self._server)
        address = f"{listener.host}:{listener.port}"
        protocols = self.config.security_protocol_map
        if grpc_tls.add_port(self._server, address, self.config.raw, protocols, listener.name) == 0:
            raise OSError(f"cannot listen on {listener.host}:{listener.port} ({listener.name})")
        self._server.start()
        self.quorum.start()
        self._lifecycle = threading.Thread(
            target=self._broker_lifecycle, name="broker-lifecycle", daemon=True
        )
        self._lifecycle.start()
        self._health.set("", health_pb2.HealthCheckResponse.SERVING)
        self._health.set(SERVICE_NAME, health_pb2.HealthCheckResponse.SERVING)
        _log.info("controller_started", listener=f"{listener.host}:{listener.port}")

    def _image(self) -> MetadataImage:
        return self.quorum.image

    def _registration(self) -> cpb.RegisterBrokerRequest:
        host, port = self.config.advertised_listener
        return cpb.RegisterBrokerRequest(
            broker_id=self.node_id,
            host=host,
            port=port,
            cluster_id=self.config.cluster_id,
            endpoints=[
                cpb.Endpoint(name=lst.name, host=lst.host, port=lst.port)
                for lst in self.config.advertised_listeners.values()
            ],
        )

    def _broker_serving(self) -> bool:
        """Whether the broker's pulses say it serves; logs each change, and fences a
        broker that says it stalled at once (it stops claiming its leaderships)."""
        now = plain_monotonic_s()
        changed = self.gate.changed(now)
        if changed is False:
            _log.warning("broker_not_serving", reason=self.gate.why_closed(now))
        elif changed is True:
            _log.info("broker_serving")
            self._self_fenced = False
        if self.gate.is_open(now):
            return True
        if self.gate.stalled_reason is not None and not self._self_fenced:
            self._self_fenced = True
            self._controlled_shutdown()
            _log.warning("broker_fenced_itself", reason=self.gate.stalled_reason)
        return False

    def _broker_lifecycle(self) -> None:
        """KRaft's broker side: once the broker follows the metadata, register it with
        the active controller, then heartbeat while the broker's pulses say it serves;
        re-register when the controller no longer knows this incarnation."""
        client = self.client
        interval = self.config.broker_heartbeat_interval_ms / 1000
        rpc_timeout = max(0.2, min(2.0, self.config.broker_session_timeout_ms / 3000))
        # A closed gate is looked at again soon: heartbeats resume as the pulses do.
        recheck = min(
            interval,
            pulse_interval_s(
                self.config.broker_session_timeout_ms, self.config.broker_heartbeat_interval_ms
            ),
        )
        while not self._stopped.is_set():
            if self.broker_applied < 0:
                self._stopped.wait(0.05)  # the broker has not started following yet
                continue
            if not self._broker_serving():
                self._stopped.wait(recheck)
                continue
            if self.broker_epoch < 0:
                try:
                    r = client.call(
                        lambda n: client.controller_stub(n).RegisterBroker(
                            self._registration(), timeout=5
                        ),
                        lambda r: (r.error_code, r.error_message),
                    )
                except ControlError:
                    continue
                if r.error_code == 0:
                    self.broker_epoch = r.broker_epoch
                    _log.info("registered", broker_epoch=r.broker_epoch)
                else:
                    self._stopped.wait(interval)
                continue
            if self.quorum.is_active():
                # The active controller is this process: no call through the network.
                try:
                    self.quorum.heartbeat(
                        self.node_id, self.broker_epoch, self.broker_applied, False
                    )
                except ControlError as e:
                    if e.error_name in ("STALE_BROKER_EPOCH", "BROKER_NOT_AVAILABLE"):
                        self.broker_epoch = -1
                        continue
                self._stopped.wait(interval)
                continue
            try:
                r = client.call(
                    lambda n: client.controller_stub(n).BrokerHeartbeat(
                        cpb.BrokerHeartbeatRequest(
                            broker_id=self.node_id,
                            broker_epoch=self.broker_epoch,
                            metadata_offset=self.broker_applied,
                        ),
                        # A frozen voter must not hold a heartbeat past the session.
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
        if self.broker_epoch < 0:
            return
        if self.quorum.is_active():
            try:
                self.quorum.heartbeat(self.node_id, self.broker_epoch, self.broker_applied, True)
                return
            except ControlError:
                pass  # no longer active: through the network
        client = self.client
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
                without_quorum_give_up=True,
            )
        except ControlError:
            pass  # the controller will fence this broker when its session expires

    def shutdown(self) -> None:
        if self._stopped.is_set():
            return
        self._stopped.set()
        # Stop judging brokers before the listener stops taking their heartbeats: the
        # quorum stays active until quorum.shutdown(), a second or more later, and
        # would otherwise fence a healthy broker on its way out.
        self.quorum.begin_shutdown()
        self._health.enter_graceful_shutdown()
        if self._lifecycle is not None:
            self._lifecycle.join(timeout=5)
        self._controlled_shutdown()
        self.quorum.close_proposals(drain_s=PROPOSALS_DRAIN_S)
        if self._servicer is not None:
            self._servicer.end_watches()
        if self._server is not None:
            self._server.stop(grace=1).wait(3)
        self.quorum.shutdown()
        self.client.close()
        _log.info("controller_stopped")


def _raise_priority() -> None:
    """Ahead of the data plane when the OS allows it (root, or CAP_SYS_NICE): elections
    and heartbeats are small and must meet their deadlines on a saturated machine,
    where the broker's produce and fetch work can wait a little."""
    try:
        os.setpriority(os.PRIO_PROCESS, 0, CONTROLLER_NICENESS)
    except OSError:
        pass  # unprivileged: the process of its own is what keeps it from starving


def main() -> NoReturn:
    """Entry point: the node's properties arrive as JSON on stdin (one line), so the
    child runs exactly the parent's configuration; stdin then stays open until the
    parent goes."""
    _die_with_parent()
    _raise_priority()
    setup = json.loads(sys.stdin.buffer.readline())
    config = NodeConfig.from_properties(setup["properties"])
    configure(setup.get("log_level", "INFO"), config.node_id)
    sys.setswitchinterval(0.001)
    done = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the broker decides when to stop

    gate = PulseGate(pulse_max_age_s(config.broker_session_timeout_ms))

    def watch_parent() -> None:
        # The broker's pulses, one line each, until EOF: the broker is gone.
        for line in sys.stdin.buffer:
            is_pulse, stalled = parse_pulse(line)
            if is_pulse:
                gate.pulse(plain_monotonic_s(), stalled)
            else:
                _log.warning("unknown_pulse_line", line=line[:100].decode("utf-8", "replace"))
        done.set()

    threading.Thread(target=watch_parent, name="parent-watch", daemon=True).start()
    process = ControllerProcess(config, bool(setup.get("clean", False)), gate)
    process.start()
    print("controller-ready", flush=True)
    interval = pulse_interval_s(
        config.broker_session_timeout_ms, config.broker_heartbeat_interval_ms
    )

    def pulse_broker() -> None:
        # The other way: the broker stops leading when this process (its heartbeats,
        # its metadata) goes silent for a session. Never blocks: a frozen broker's
        # full pipe drops pulses.
        fd = sys.stdout.fileno()
        os.set_blocking(fd, False)
        while not done.wait(interval):
            with contextlib.suppress(BlockingIOError, BrokenPipeError):
                os.write(fd, pulse_line(None))

    threading.Thread(target=pulse_broker, name="broker-pulse", daemon=True).start()
    parent = os.getppid()  # 1 itself when the broker is a container's first process
    while not done.wait(1):
        if os.getppid() != parent:
            break  # orphaned (no PDEATHSIG on this platform)
    process.shutdown()
    # Stopped in order (the controlled shutdown, the listener, the Raft log closed):
    # nothing is left to finish. The interpreter's own exit would join gRPC's handler
    # threads (one still in a call the listener's grace cut off) and then abort
    # (SIGABRT) on the stdin lock the parent-watch thread holds in its read.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
