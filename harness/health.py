"""Is a node serving: one gRPC health check of its listener (what every start waits
for: a NodeProcess, `seglog local up`, the chaos targets)."""

from __future__ import annotations

import time

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc


def open_channel(address: str, security: dict[str, str]) -> grpc.Channel:
    """A channel to a node's gRPC listener, with TLS when `security` (the clients'
    options, kafka-python's names) says so."""
    from seglog.client.security import ClientSecurity

    credentials = ClientSecurity.from_options(security).channel_credentials()
    if credentials is None:
        return grpc.insecure_channel(address)
    return grpc.secure_channel(address, credentials)


def serving(channel: grpc.Channel, timeout_s: float) -> bool:
    """The node's health service on `channel` says SERVING (no answer: False)."""
    try:
        r = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=""), timeout=timeout_s
        )
    except grpc.RpcError:
        return False
    return bool(r.status == health_pb2.HealthCheckResponse.SERVING)


def wait_serving(address: str, timeout_s: float, security: dict[str, str] | None = None) -> bool:
    """Until the node's gRPC health service says SERVING."""
    deadline = time.monotonic() + timeout_s
    with open_channel(address, security or {}) as channel:
        while time.monotonic() < deadline:
            if serving(channel, 2):
                return True
            time.sleep(0.3)
    return False
