"""Raft messages over gRPC: conversion between the core's dataclasses and
cluster.proto, and one sender thread per peer with a bounded queue (Raft
tolerates loss, so a full queue drops the oldest message instead of blocking)."""

from __future__ import annotations

import collections
import dataclasses
import threading
from typing import Any

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


# Each message: its field in RaftMessage's `body` and its proto, whose fields are the
# dataclass's after src and dst, by the same names (the entries as RaftEntry).
_BODIES: dict[type[Message], tuple[str, Any]] = {
    VoteRequest: ("vote_request", cpb.RaftVoteRequest),
    VoteResponse: ("vote_response", cpb.RaftVoteResponse),
    AppendRequest: ("append_request", cpb.RaftAppendRequest),
    AppendResponse: ("append_response", cpb.RaftAppendResponse),
    InstallSnapshotRequest: ("snapshot_request", cpb.RaftSnapshotRequest),
    InstallSnapshotResponse: ("snapshot_response", cpb.RaftSnapshotResponse),
}
_KINDS = {body: kind for kind, (body, _proto) in _BODIES.items()}
_FIELDS = {kind: [f.name for f in dataclasses.fields(kind)][2:] for kind in _BODIES}


def to_proto(m: Message) -> cpb.RaftMessage:
    body, proto = _BODIES[type(m)]
    values = {name: getattr(m, name) for name in _FIELDS[type(m)]}
    if isinstance(m, AppendRequest):
        values["entries"] = [
            cpb.RaftEntry(index=e.index, term=e.term, data=e.data) for e in m.entries
        ]
    out = cpb.RaftMessage(src=m.src, dst=m.dst)
    getattr(out, body).CopyFrom(proto(**values))
    return out


def from_proto(p: cpb.RaftMessage) -> Message:
    body = p.WhichOneof("body")
    if body is None:
        raise ValueError(f"empty Raft message from node {p.src}")
    kind = _KINDS[body]
    b = getattr(p, body)
    values = {name: getattr(b, name) for name in _FIELDS[kind]}
    if kind is AppendRequest:
        values["entries"] = tuple(Entry(e.index, e.term, e.data) for e in b.entries)
    return kind(p.src, p.dst, **values)


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
