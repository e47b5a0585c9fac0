"""DescribeQuorum: one node's view of the controllers' Raft quorum (its leader, term,
commit index and, asked of the leader, each voter's log end), for the tools and the
web console."""

from __future__ import annotations

import grpc

from seglog.proto import cluster_pb2 as cpb
from seglog.proto import cluster_pb2_grpc

from .security import ClientSecurity


class NoControllerService(Exception):
    """The node answered, but has no Controller service (single-node mode)."""


def describe_quorum(
    address: str, timeout_s: float, security: ClientSecurity | None = None
) -> cpb.DescribeQuorumResponse:
    """DescribeQuorum at `address` (over TLS, with SASL, as `security` says). Raises
    NoControllerService when the node has no Controller service, grpc.RpcError when
    it cannot be asked."""
    with (security or ClientSecurity()).channel(address, []) as channel:
        return describe_quorum_on(channel, address, timeout_s)


def describe_quorum_on(
    channel: grpc.Channel, address: str, timeout_s: float
) -> cpb.DescribeQuorumResponse:
    """DescribeQuorum over a channel the caller keeps (one asking every few seconds
    keeps its channel, and its SASL login, rather than opening one each time)."""
    stub = cluster_pb2_grpc.ControllerStub(channel)
    try:
        r: cpb.DescribeQuorumResponse = stub.DescribeQuorum(
            cpb.DescribeQuorumRequest(), timeout=timeout_s
        )
    except grpc.RpcError as e:
        if e.code() == grpc.StatusCode.UNIMPLEMENTED:  # type: ignore[attr-defined]
            raise NoControllerService(address) from None
        raise
    return r
