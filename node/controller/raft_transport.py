"""Raft messages over gRPC: conversion between the core's dataclasses and
cluster.proto, and one sender thread per peer with a bounded queue (Raft
tolerates loss, so a full queue drops the oldest message instead of blocking)."""

from __future__ import annotations

import collections
import threading

import grpc

from seglog.controller.raft import (
    AppendRequest,
    AppendResponse,
    Entry,
    InstallSnapshotRequest,
    InstallSnapshotResponse,
    Message,
    VoteRequest,
    VoteResponse,
)
from seglog.node.event_log import EventLogger
from seglog.node.security.grpc_tls import open_channel
from seglog.proto import cluster_pb2 as cpb
from seglog.proto import cluster_pb2_grpc

_log = EventLogger("raft_transport")
QUEUE_LIMIT = 256
RPC_TIMEOUT_S = 2.0
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", 64 << 20),
    ("grpc.max_receive_message_length", 64 << 20),
    ("grpc.initial_reconnect_backoff_ms", 50),
    ("grpc.min_reconnect_backoff_ms", 50),
    ("grpc.max_reconnect_backoff_ms", 500),
]


def to_proto(m: Message) -> cpb.RaftMessage:
    out = cpb.RaftMessage(src=m.src, dst=m.dst)
    match m:
        case VoteRequest():
            out.vote_request.CopyFrom(
                cpb.RaftVoteRequest(
                    term=m.term, last_index=m.last_index, last_term=m.last_term, pre_vote=m.pre_vote
                )
            )
        case VoteResponse():
            out.vote_response.CopyFrom(
                cpb.RaftVoteResponse(term=m.term, granted=m.granted, pre_vote=m.pre_vote)
            )
        case AppendRequest():
            out.append_request.CopyFrom(
                cpb.RaftAppendRequest(
                    term=m.term,
                    prev_index=m.prev_index,
                    prev_term=m.prev_term,
                    entries=[
                        cpb.RaftEntry(index=e.index, term=e.term, data=e.data) for e in m.entries
                    ],
                    leader_commit=m.leader_commit,
                )
            )
        case AppendResponse():
            out.append_response.CopyFrom(
                cpb.RaftAppendResponse(
                    term=m.term,
                    success=m.success,
                    match_index=m.match_index,
                    reject_index=m.reject_index,
                    hint_index=m.hint_index,
                    hint_term=m.hint_term,
                )
            )
        case InstallSnapshotRequest():
            out.snapshot_request.CopyFrom(
                cpb.RaftSnapshotRequest(
                    term=m.term,
                    snapshot_index=m.snapshot_index,
                    snapshot_term=m.snapshot_term,
                    data=m.data,
                )
            )
        case InstallSnapshotResponse():
            out.snapshot_response.CopyFrom(
                cpb.RaftSnapshotResponse(term=m.term, match_index=m.match_index)
            )
    return out


def from_proto(p: cpb.RaftMessage) -> Message:
    kind = p.WhichOneof("body")
    if kind == "vote_request":
        b = p.vote_request
        return VoteRequest(p.src, p.dst, b.term, b.last_index, b.last_term, b.pre_vote)
    if kind == "vote_response":
        b = p.vote_response
        return VoteResponse(p.src, p.dst, b.term, b.granted, b.pre_vote)
    if kind == "append_request":
        b = p.append_request
        entries = tuple(Entry(e.index, e.term, e.data) for e in b.entries)
        return AppendRequest(
            p.src, p.dst, b.term, b.prev_index, b.prev_term, entries, b.leader_commit
        )
    if kind == "append_response":
        b = p.append_response
        return AppendResponse(
            p.src,
            p.dst,
            b.term,
            b.success,
            b.match_index,
            b.reject_index,
            b.hint_index,
            b.hint_term,
        )
    if kind == "snapshot_request":
        b = p.snapshot_request
        return InstallSnapshotRequest(
            p.src, p.dst, b.term, b.snapshot_index, b.snapshot_term, b.data
        )
    if kind == "snapshot_response":
        b = p.snapshot_response
        return InstallSnapshotResponse(p.src, p.dst, b.term, b.match_index)
    raise ValueError(f"empty Raft message from node {p.src}")


class PeerSender:
    """Delivers messages to one peer in order, dropping the oldest when behind."""

    def __init__(
        self,
        peer_id: int,
        address: tuple[str, int],
        credentials: grpc.ChannelCredentials | None = None,
    ) -> None:
        self.peer_id = peer_id
        self._channel = open_channel(f"{address[0]}:{address[1]}", CHANNEL_OPTIONS, credentials)
        self._stub = cluster_pb2_grpc.ControllerStub(self._channel)
        self._queue: collections.deque[cpb.RaftMessage] = collections.deque(maxlen=QUEUE_LIMIT)
        self._cond = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._run, name=f"raft-send-{peer_id}", daemon=True)
        self._thread.start()

    def send(self, message: Message) -> None:
        with self._cond:
            self._queue.append(to_proto(message))
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopped:
                    self._cond.wait(1.0)
                if self._stopped:
                    return
                message = self._queue.popleft()
            try:
                self._stub.Raft(message, timeout=RPC_TIMEOUT_S)
            except grpc.RpcError:
                pass  # the peer is down or slow: Raft retries by itself

    def close(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()
        self._channel.close()
