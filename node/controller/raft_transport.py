"""Raft messages over gRPC: conversion between the core's dataclasses and
cluster.proto, and one sender thread per peer with a bounded queue (Raft
tolerates loss, so a full queue drops the oldest message instead of blocking)."""

from __future__ import annotations

import collections
import dataclasses
import threading
from collections.abc import Iterator
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
RECONNECT_S = 0.1  # after a stream ended: a restarted peer hears from us within it
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
    """Delivers messages to one peer in order, dropping the oldest when behind.

    They go on one long-lived RaftStream call: an idle quorum's heartbeats and their
    answers are most of a controller's idle CPU, and a stream message costs about half
    a call's (docs/perf/scale.md). A stream that fails (the peer gone, restarting) is
    opened again after RECONNECT_S; what was queued meanwhile waits, bounded, and what
    the failed stream had taken is lost, which Raft tolerates. A peer that does not
    serve RaftStream gets one Raft call per message."""

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
        self._closed = threading.Event()
        self._stream = 0  # which stream may take messages: a failed one's reader stops
        self.streams_opened = 0
        self._thread = threading.Thread(target=self._run, name=f"raft-send-{peer_id}", daemon=True)
        self._thread.start()

    def send(self, message: Message) -> None:
        with self._cond:
            self._queue.append(to_proto(message))
            self._cond.notify_all()

    def _next(self, stream: int | None) -> cpb.RaftMessage | None:
        """The next message for `stream` (None: the per-call sender), or None once
        stopped or that stream was given up."""
        with self._cond:
            while not self._queue and not self._closed.is_set() and stream in (None, self._stream):
                self._cond.wait(1.0)
            if self._closed.is_set() or stream not in (None, self._stream):
                return None
            return self._queue.popleft()

    def _messages(self, stream: int) -> Iterator[cpb.RaftMessage]:
        # Read by grpcio's request-consuming thread for this call.
        while (message := self._next(stream)) is not None:
            yield message

    def _run(self) -> None:
        while not self._closed.is_set():
            with self._cond:
                stream = self._stream
            self.streams_opened += 1
            unimplemented = False
            try:
                self._stub.RaftStream(self._messages(stream))
            except grpc.RpcError as e:
                unimplemented = e.code() == grpc.StatusCode.UNIMPLEMENTED
            with self._cond:
                # The ended stream's reader (grpcio's thread, which may outlive the
                # call) takes no more: left waiting, it would take and lose messages
                # meant for the next stream or for the calls.
                self._stream += 1
                self._cond.notify_all()
            if unimplemented:
                _log.info("raft_stream_not_served", peer=self.peer_id)
                self._run_calls()
                return
            self._closed.wait(RECONNECT_S)

    def _run_calls(self) -> None:
        while (message := self._next(None)) is not None:
            try:
                self._stub.Raft(message, timeout=RPC_TIMEOUT_S)
            except grpc.RpcError:
                pass  # the peer is down or slow: Raft retries by itself

    def close(self) -> None:
        self._closed.set()
        with self._cond:
            self._cond.notify_all()
        self._channel.close()
