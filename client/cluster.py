"""The client's view of the cluster: gRPC channels per node and a metadata cache
(who leads each partition, at which leader epoch), refreshed from any node."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import grpc

from seglog.proto import client_pb2 as pb
from seglog.proto import client_pb2_grpc, groups_pb2_grpc, transactions_pb2_grpc

from . import bootstrap_probe
from .errors import (
    BootstrapUnreachable,
    KafkaError,
    KafkaTimeoutError,
    NoBrokersAvailable,
    NodeNotReadyError,
    error_class,
    for_code,
)
from .security import ClientSecurity

T = TypeVar("T")
_log = logging.getLogger(__name__)

# 64 MiB: a fetch may return up to fetch.max.bytes (50 MiB) plus framing.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# A failed login is the user's to fix: raised at once, never retried on other nodes.
AUTHENTICATION_ERRORS = tuple(
    error_class(name)
    for name in ("SASL_AUTHENTICATION_FAILED", "UNSUPPORTED_SASL_MECHANISM", "ILLEGAL_SASL_STATE")
)
# Raised to the application at once, never retried: a refused login, and bootstrap
# servers none of which is a seglog node (before any node ever answered).
FATAL_ERRORS = (*AUTHENTICATION_ERRORS, BootstrapUnreachable)
# How long one bootstrap address's probe may take, and how often a client that has
# never reached its cluster probes again.
PROBE_TIMEOUT_S = 1.0
PROBE_INTERVAL_S = 1.0
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    # A leader that froze or was cut off answers no HTTP/2 ping: its calls fail within
    # about two seconds, and the client looks for the new leader instead of waiting
    # out request.timeout.ms. Nodes accept pings this often (node/server.py).
    ("grpc.keepalive_time_ms", 1_000),
    ("grpc.keepalive_timeout_ms", 1_000),
    ("grpc.http2.ping_timeout_ms", 1_000),  # what gRPC core enforces on an unanswered ping
    ("grpc.http2.max_pings_without_data", 0),
    # Reconnect quickly after a node restarts or a leader moves (gRPC's default
    # backoff starts at 1 s and grows to 2 min).
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1_000),
]


@dataclass(frozen=True, slots=True)
class TopicPartition:
    """kafka-python's TopicPartition shape."""

    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int  # -1: none
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def parse_bootstrap(servers: str | Sequence[str]) -> list[tuple[str, int]]:
    """`"h1:9092,h2:9093"` or `["h1:9092", ...]` → [(host, port)]; a clear error otherwise."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"bootstrap server {item!r} is not host:port")
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("bootstrap_servers is empty")
    return out


def call(fn: Callable[..., T], request: object, timeout_s: float) -> T:
    """One RPC; transport failures become retriable client errors."""
    try:
        return fn(request, timeout=timeout_s)
    except grpc.RpcError as e:
        code = e.code() if hasattr(e, "code") else None
        detail = e.details() if hasattr(e, "details") else str(e)
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            raise KafkaTimeoutError(f"no answer within {timeout_s:.1f}s: {detail}") from e
        if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
            raise NodeNotReadyError(str(detail)) from e
        if code == grpc.StatusCode.UNAUTHENTICATED:  # the session token was refused
            raise error_class("SASL_AUTHENTICATION_FAILED")(str(detail)) from e
        if code == grpc.StatusCode.RESOURCE_EXHAUSTED:
            # The node holds queued.max.requests calls already: back off and retry.
            raise NodeNotReadyError(f"node overloaded: {detail}") from e
        raise KafkaError(f"{code}: {detail}") from e


class Connections:
    """One channel per node address, shared by every thread of a client."""

    def __init__(self, security: ClientSecurity | None = None) -> None:
        self.security = security or ClientSecurity()  # PLAINTEXT by default
        self._lock = threading.Lock()
        self._channels: dict[tuple[str, int], grpc.Channel] = {}
        self._stubs: dict[tuple[str, int], client_pb2_grpc.SegLogStub] = {}
        self._group_stubs: dict[tuple[str, int], groups_pb2_grpc.GroupCoordinatorStub] = {}
        self._txn_stubs: dict[tuple[str, int], transactions_pb2_grpc.TransactionsStub] = {}

    def _channel(self, address: tuple[str, int]) -> grpc.Channel:
        channel = self._channels.get(address)
        if channel is None:
            channel = self.security.channel(f"{address[0]}:{address[1]}", CHANNEL_OPTIONS)
            self._channels[address] = channel
        return channel

    def stub(self, address: tuple[str, int]) -> client_pb2_grpc.SegLogStub:
        with self._lock:
            stub = self._stubs.get(address)
            if stub is None:
                stub = self._stubs[address] = client_pb2_grpc.SegLogStub(self._channel(address))
            return stub

    def group_stub(self, address: tuple[str, int]) -> groups_pb2_grpc.GroupCoordinatorStub:
        """The GroupCoordinator service, on the same channel as the node's SegLog."""
        with self._lock:
            stub = self._group_stubs.get(address)
            if stub is None:
                stub = groups_pb2_grpc.GroupCoordinatorStub(self._channel(address))
                self._group_stubs[address] = stub
            return stub

    def txn_stub(self, address: tuple[str, int]) -> transactions_pb2_grpc.TransactionsStub:
        """The Transactions service, on the same channel as the node's SegLog."""
        with self._lock:
            stub = self._txn_stubs.get(address)
            if stub is None:
                stub = transactions_pb2_grpc.TransactionsStub(self._channel(address))
                self._txn_stubs[address] = stub
            return stub

    def close(self) -> None:
        with self._lock:
            for channel in self._channels.values():
                channel.close()
            self._channels.clear()
            self._stubs.clear()
            self._group_stubs.clear()
            self._txn_stubs.clear()


class ClusterMetadata:
    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        connections: Connections | None = None,
        request_timeout_ms: int = 30_000,
        metadata_max_age_ms: int = 300_000,
    ) -> None:
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.connections = connections or Connections()
        self.request_timeout_s = request_timeout_ms / 1000
        self.max_age_s = metadata_max_age_ms / 1000
        self._lock = threading.Lock()
        self.brokers: dict[int, tuple[str, int]] = {}
        self.fenced: frozenset[int] = frozenset()  # listed, but the controller fenced them
        self.controller_id = -1
        self.cluster_id = ""
        self._partitions: dict[str, dict[int, PartitionInfo]] = {}
        self._topic_errors: dict[str, KafkaError] = {}
        self._updated_at = 0.0
        self._need_update = True
        self._answered = False  # some node answered once: outages are retried from then on
        self._probed_at = -PROBE_INTERVAL_S

    # --- refresh ----------------------------------------------------------------

    def request_update(self) -> None:
        self._need_update = True

    def stale(self) -> bool:
        return self._need_update or time.monotonic() - self._updated_at > self.max_age_s

    def refresh(
        self, topics: Iterable[str] | None = None, allow_auto_topic_creation: bool = False
    ) -> pb.MetadataResponse:
        """Ask any reachable node (known brokers first, then the bootstrap list)."""
        names = sorted(set(topics)) if topics is not None else None
        request = pb.MetadataRequest(
            topics=names or [],
            all_topics=names is None,
            allow_auto_topic_creation=allow_auto_topic_creation,
        )
        serving, fenced = self._by_fencing()
        random.shuffle(serving)
        random.shuffle(fenced)
        # Fenced brokers last: one that is frozen holds each call for its whole timeout.
        candidates = serving + fenced
        candidates += [a for a in self.bootstrap if a not in candidates]
        errors = []
        for address in candidates:
            try:
                response = call(
                    self.connections.stub(address).Metadata, request, self.request_timeout_s
                )
            except KafkaError as e:
                if isinstance(e, AUTHENTICATION_ERRORS):
                    raise  # another node would refuse the same credentials
                errors.append(f"{address[0]}:{address[1]}: {e}")
                _log.info("metadata request to %s:%d failed: %s", address[0], address[1], e)
                continue
            self._answered = True
            self._apply(response, names)
            return response
        self._raise_if_no_node_at_bootstrap()
        raise NoBrokersAvailable("; ".join(errors) or "no bootstrap servers")

    def _raise_if_no_node_at_bootstrap(self) -> None:
        """Before any node answered: BootstrapUnreachable when no bootstrap address can
        be a seglog node (probed at most once per PROBE_INTERVAL_S)."""
        now = time.monotonic()
        if self._answered or now - self._probed_at < PROBE_INTERVAL_S:
            return
        self._probed_at = now
        found = bootstrap_probe.diagnose(
            self.bootstrap, PROBE_TIMEOUT_S, plaintext=not self.connections.security.uses_tls
        )
        if found is not None:
            raise BootstrapUnreachable(*found)

    def _apply(self, response: pb.MetadataResponse, names: list[str] | None) -> None:
        with self._lock:
            self.brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
            self.fenced = frozenset(b.node_id for b in response.brokers if b.fenced)
            self.controller_id = response.controller_id
            self.cluster_id = response.cluster_id
            if names is None:
                self._partitions.clear()
                self._topic_errors.clear()
            for t in response.topics:
                if t.error_code:
                    self._partitions.pop(t.name, None)
                    self._topic_errors[t.name] = for_code(t.error_code, t.error_message or t.name)
                    continue
                self._topic_errors.pop(t.name, None)
                self._partitions[t.name] = {
                    p.partition: PartitionInfo(
                        t.name,
                        p.partition,
                        p.leader_id,
                        p.leader_epoch,
                        tuple(p.replica_nodes),
                        tuple(p.isr_nodes),
                    )
                    for p in t.partitions
                }
            self._updated_at = time.monotonic()
            self._need_update = False

    # --- lookups -----------------------------------------------------------------

    def topics(self) -> set[str]:
        with self._lock:
            return set(self._partitions)

    def topic_error(self, topic: str) -> KafkaError | None:
        with self._lock:
            return self._topic_errors.get(topic)

    def partitions_for(self, topic: str) -> dict[int, PartitionInfo] | None:
        with self._lock:
            parts = self._partitions.get(topic)
            return dict(parts) if parts is not None else None

    def partition(self, tp: TopicPartition) -> PartitionInfo | None:
        with self._lock:
            return self._partitions.get(tp.topic, {}).get(tp.partition)

    def leader_for(self, tp: TopicPartition) -> int:
        info = self.partition(tp)
        return info.leader if info is not None else -1

    def address(self, node_id: int) -> tuple[str, int] | None:
        with self._lock:
            return self.brokers.get(node_id)

    def broker_addresses(self) -> list[tuple[str, int]]:
        """Every known node's address, sorted."""
        with self._lock:
            return sorted(self.brokers.values())

    def stub_for(self, node_id: int) -> client_pb2_grpc.SegLogStub:
        address = self.address(node_id)
        if address is None:
            self.request_update()
            raise NodeNotReadyError(f"node {node_id} is not in the cluster metadata")
        return self.connections.stub(address)

    def serving_address(self, node_id: int) -> tuple[str, int] | None:
        """The node's address unless it is fenced: a fenced broker may be frozen or
        gone, and a call to it waits out its whole timeout."""
        with self._lock:
            return None if node_id in self.fenced else self.brokers.get(node_id)

    def _by_fencing(self) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
        """The known brokers' addresses: (unfenced, fenced)."""
        with self._lock:
            items, fenced = list(self.brokers.items()), self.fenced
        return [a for i, a in items if i not in fenced], [a for i, a in items if i in fenced]

    def any_stub(self) -> client_pb2_grpc.SegLogStub:
        """Any node's stub, an unfenced one while there is one."""
        serving, fenced = self._by_fencing()
        known = serving or fenced
        return self.connections.stub(random.choice(known) if known else self.bootstrap[0])

    def close(self) -> None:
        self.connections.close()
