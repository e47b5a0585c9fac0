"""Raft messages through cluster.proto: every kind comes back as it went out, and an
empty message is refused. A voter's sender to one peer: one stream for all its
messages, in order, opened again when the peer restarts; a peer that only serves the
one-call-per-message Raft gets that; a stopping peer ends the streams into it at once."""

from __future__ import annotations

import contextlib
import queue
import random
import time
from pathlib import Path

import grpc
import pytest

from seglog.controller import raft
from seglog.harness.ports import free_port
from seglog.node.controller.controller_servicer import ControllerServicer
from seglog.node.controller.quorum_controller import QuorumController
from seglog.node.controller.raft_transport import PeerSender, from_proto, to_proto
from seglog.proto import cluster_pb2 as cpb
from seglog.proto import cluster_pb2_grpc
from seglog.storage.log_config import LogConfig

MESSAGES: list[raft.Message] = [
    raft.VoteRequest(1, 2, 5, 10, 4, True),
    raft.VoteResponse(2, 1, 5, False, True),
    raft.AppendRequest(1, 3, 7, 9, 6, (raft.Entry(10, 7, b"x"), raft.Entry(11, 7, b"")), 8),
    raft.AppendRequest(1, 3, 7, 9, 6, (), 8),
    raft.AppendResponse(3, 1, 7, True, 11, 0, 2, 3),
    raft.InstallSnapshotRequest(1, 2, 9, 100, 8, b"snap"),
    raft.InstallSnapshotResponse(2, 1, 9, 100),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_a_message_comes_back_as_it_went_out(message: raft.Message) -> None:
    wire = to_proto(message).SerializeToString()
    assert from_proto(cpb.RaftMessage.FromString(wire)) == message


def test_the_body_names_the_kind() -> None:
    p = to_proto(raft.AppendResponse(3, 1, 7, False, reject_index=4, hint_index=2, hint_term=1))
    assert p.WhichOneof("body") == "append_response"
    body = p.append_response
    assert (p.src, p.dst, body.success, body.reject_index, body.hint_term) == (3, 1, False, 4, 1)


def test_an_empty_message_is_refused() -> None:
    with pytest.raises(ValueError, match="empty Raft message from node 4"):
        from_proto(cpb.RaftMessage(src=4, dst=1))


# --- PeerSender on a real gRPC server: the peer's ControllerServicer and its inbox ------


class Peer:
    """A voter's listener: the real ControllerServicer in front of a QuorumController
    that is not started, so what arrives stays in its inbox for the test to read."""

    def __init__(self, port: int, calls_only: bool = False) -> None:
        from concurrent import futures

        self.controller = QuorumController(
            2, {2: ("127.0.0.1", port)}, Path("/nonexistent"), LogConfig(), random.Random(0)
        )
        self.servicer = ControllerServicer(self.controller, "cluster")
        self.server = grpc.server(futures.ThreadPoolExecutor(4))
        if calls_only:  # a release before RaftStream: the Raft call alone
            raft_call = grpc.unary_unary_rpc_method_handler(
                self.servicer.Raft, cpb.RaftMessage.FromString, cpb.RaftAck.SerializeToString
            )
            self.server.add_generic_rpc_handlers(
                (grpc.method_handlers_generic_handler("seglog.v1.Controller", {"Raft": raft_call}),)
            )
        else:
            cluster_pb2_grpc.add_ControllerServicer_to_server(self.servicer, self.server)
        assert self.server.add_insecure_port(f"127.0.0.1:{port}") == port
        self.server.start()

    def received(self, n: int) -> list[raft.Message]:
        return [self.controller._inbound.get(timeout=10)[1] for _ in range(n)]

    def stop(self) -> float:
        """Seconds the listener's graceful stop (5 s of grace) took after end_watches."""
        started = time.monotonic()
        self.servicer.end_watches()
        self.server.stop(grace=5).wait(10)
        return time.monotonic() - started


def heartbeat(i: int) -> raft.AppendRequest:
    return raft.AppendRequest(1, 2, 3, i, 3, (), i)


def test_messages_go_in_order_on_one_stream_and_again_after_the_peer_restarts() -> None:
    port = free_port()
    peer = Peer(port)
    sender = PeerSender(2, ("127.0.0.1", port))
    try:
        sent = [heartbeat(i) for i in range(50)]
        for m in sent:
            sender.send(m)
        assert peer.received(50) == sent
        assert sender.streams_opened == 1  # one stream, not a call per message
        # The peer stops: its open stream must not hold the stop for the grace.
        assert peer.stop() < 2.0
        peer = Peer(port)
        first = deliver_until_one_arrives(sender, peer)  # some are lost meanwhile
        assert isinstance(first, raft.AppendRequest) and first.prev_index >= 100, first
        assert sender.streams_opened >= 2
    finally:
        sender.close()
        peer.stop()


def test_a_peer_without_the_stream_gets_a_call_per_message() -> None:
    port = free_port()
    peer = Peer(port, calls_only=True)
    sender = PeerSender(2, ("127.0.0.1", port))
    try:
        # What the refused stream had taken is lost, as a failed call's message was.
        deliver_until_one_arrives(sender, peer)
        sent = [heartbeat(i) for i in range(200, 205)]
        for m in sent:
            sender.send(m)
        assert peer.received(5) == sent
        assert sender.streams_opened == 1  # refused once, not tried again and again
    finally:
        sender.close()
        peer.stop()


def deliver_until_one_arrives(sender: PeerSender, peer: Peer) -> raft.Message:
    deadline = time.monotonic() + 10
    i = 100
    while time.monotonic() < deadline:
        sender.send(heartbeat(i))
        i += 1
        with contextlib.suppress(queue.Empty):
            return peer.controller._inbound.get(timeout=0.1)[1]
    raise AssertionError("nothing arrived in 10 s")
