"""A node's calls to the active controller: find it among the voters, retry on
NOT_CONTROLLER or a dead node, and give up after a deadline."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from typing import TypeVar

import grpc

from seglog.controller.cluster_control import ControlError
from seglog.node.controller.raft_transport import CHANNEL_OPTIONS
from seglog.node.security.grpc_tls import open_channel
from seglog.proto import client_pb2_grpc, cluster_pb2_grpc, errors_pb2
from seglog.storage.disk_and_clock import plain_monotonic_s

T = TypeVar("T")
RPC_TIMEOUT_S = 5.0


class ControllerClient:
    def __init__(
        self,
        voters: Mapping[int, tuple[str, int]],
        leader_hint: Callable[[], int | None],
        credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        self.voters = dict(voters)
        self.credentials = credentials  # None: plaintext
        self.leader_hint = leader_hint
        self._channels: dict[int, grpc.Channel] = {}
        # A stub is ~50 µs to make (a callable per method): one per voter, not per call
        # (a heartbeat every broker.heartbeat.interval.ms asks for one).
        self._stubs: dict[int, cluster_pb2_grpc.ControllerStub] = {}

    def _channel(self, node: int) -> grpc.Channel:
        channel = self._channels.get(node)
        if channel is None:
            host, port = self.voters[node]
            channel = self._channels[node] = open_channel(
                f"{host}:{port}", CHANNEL_OPTIONS, self.credentials
            )
        return channel

    def channel(self, node: int) -> grpc.Channel:
        return self._channel(node)

    def controller_stub(self, node: int) -> cluster_pb2_grpc.ControllerStub:
        stub = self._stubs.get(node)
        if stub is None:
            stub = self._stubs[node] = cluster_pb2_grpc.ControllerStub(self._channel(node))
        return stub

    def seglog_stub(self, node: int) -> client_pb2_grpc.SegLogStub:
        return client_pb2_grpc.SegLogStub(self._channel(node))

    def call(
        self,
        fn: Callable[[int], T],
        error_of: Callable[[T], tuple[int, str]],
        deadline_s: float = 15.0,
        without_quorum_give_up: bool = False,
    ) -> T:
        """Call `fn(node)` on the active controller, trying the known leader first and
        then the other voters, until an answer that is not NOT_CONTROLLER.
        `without_quorum_give_up`: stop as soon as one round finds too few voters
        listening to make a quorum (their processes gone: UNAVAILABLE), as a broker's
        controlled shutdown does when the whole cluster stops: no controller can come
        back before the deadline, and the broker is fenced anyway."""
        deadline = plain_monotonic_s() + deadline_s
        last = "no voter answered"
        backoff = 0.05
        while plain_monotonic_s() < deadline:
            hint = self.leader_hint()
            order = [hint] if hint in self.voters else []
            others = [v for v in self.voters if v not in order]
            random.shuffle(others)
            gone = 0
            for node in order + others:
                try:
                    response = fn(node)
                except grpc.RpcError as e:
                    last = f"node {node}: {e.code()}"
                    if e.code() == grpc.StatusCode.UNAVAILABLE:
                        gone += 1
                    continue
                code, message = error_of(response)
                if code == errors_pb2.ErrorCode.Value("NOT_CONTROLLER"):
                    last = f"node {node}: {message}"
                    continue
                return response
            if without_quorum_give_up and len(self.voters) - gone <= len(self.voters) // 2:
                raise ControlError("NOT_CONTROLLER", f"no quorum of voters listening: {last}")
            time.sleep(backoff)
            backoff = min(backoff * 2, 0.5)
        raise ControlError("NOT_CONTROLLER", f"no active controller reachable: {last}")

    def close(self) -> None:
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()
        self._stubs.clear()
