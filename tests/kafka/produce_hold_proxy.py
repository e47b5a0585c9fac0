"""A Kafka-frame-aware TCP proxy in front of a real node's Kafka listener, for the
implicit-ack tests (docs/replication-rules.md, "Produce errors").

Every frame is forwarded unchanged, except the first Produce request that names one of
the `targets` partitions: the proxy answers that one itself with `error` for each of its
partitions, without forwarding it (the node never sees it, as when a node refuses a batch
before any append), and holds that answer back until the node has answered the next
Produce for the same partition (or `max_hold_s` passed, for a client that does not send
another one before it hears back). Answers still leave in request order, as Kafka's
protocol requires: answers that arrive while one is held wait behind it.

This is the race a client meets right after a topic is created or a leader moves: batch
n refused before any append, batch n+1, already on the wire, appended.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass, field

from seglog.node.kafka.codec import encode_response, parse_request, response_class
from seglog.node.kafka.errors import error_code

_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhi")
PRODUCE = 0


@dataclass
class _Slot:
    correlation_id: int
    answer: bytes | None = None
    held_for: tuple[str, int] | None = None  # a refusal held until this partition's next answer
    held_since: float = 0.0
    releases: list[_Slot] = field(default_factory=list)  # refusals this answer lets go


@dataclass
class Refusal:
    partition: tuple[str, int]
    correlation_id: int
    # True: let go only after the node had answered the partition's next Produce.
    released_after_next_answer: bool = False


class ProduceHoldProxy:
    def __init__(
        self,
        upstream_port: int,
        targets: set[tuple[str, int]],
        error: str,
        max_hold_s: float = 2.0,
    ) -> None:
        self.upstream = ("127.0.0.1", upstream_port)
        self.targets = set(targets)
        self.error = error
        self.max_hold_s = max_hold_s
        self.refusals: list[Refusal] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port = int(self._listener.getsockname()[1])
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []
        self._spawn(self._accept_loop)

    def _spawn(self, target: object, *args: object) -> None:
        t = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        t.start()
        self._threads.append(t)

    def close(self) -> None:
        self._stop.set()
        for s in [self._listener, *self._sockets]:
            try:
                s.close()
            except OSError:
                pass
        for t in self._threads:
            t.join(5)

    def __enter__(self) -> ProduceHoldProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = socket.create_connection(self.upstream, timeout=10)
            upstream.settimeout(None)
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sockets += [client, upstream]
            _Connection(self, client, upstream).start()


def _read_frame(sock: socket.socket) -> bytes | None:
    head = _read_exact(sock, 4)
    if head is None:
        return None
    (size,) = _SIZE.unpack(head)
    return _read_exact(sock, size)


def _read_exact(sock: socket.socket, n: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < n:
        try:
            chunk = sock.recv(n - len(chunks))
        except OSError:
            return None
        if not chunk:
            return None
        chunks += chunk
    return bytes(chunks)


class _Connection:
    """One client connection: its answers leave in request order through `slots`."""

    def __init__(self, proxy: ProduceHoldProxy, client: socket.socket, upstream: socket.socket):
        self.proxy = proxy
        self.client = client
        self.upstream = upstream
        self.slots: deque[_Slot] = deque()
        self.by_correlation: dict[int, _Slot] = {}
        self.held: dict[tuple[str, int], _Slot] = {}
        self.cond = threading.Condition()

    def start(self) -> None:
        self.proxy._spawn(self._from_client)
        self.proxy._spawn(self._from_upstream)
        self.proxy._spawn(self._release_late)

    def _from_client(self) -> None:
        while True:
            frame = _read_frame(self.client)
            if frame is None:
                self.upstream.close()
                return
            api_key, _version, correlation_id = _HEADER.unpack_from(frame)
            if api_key != PRODUCE:
                self._forward(frame, correlation_id, expects_answer=True)
                continue
            request = parse_request(frame)
            body = request.body
            partitions = [(t.name, p.index) for t in body.topic_data for p in t.partition_data]
            with self.cond:
                refuse = [tp for tp in partitions if tp in self.proxy.targets]
                if refuse and body.acks != 0:
                    self.proxy.targets.difference_update(refuse)
                    slot = _Slot(
                        correlation_id, self._refusal(request), refuse[0], time.monotonic()
                    )
                    self.slots.append(slot)
                    self.held[refuse[0]] = slot
                    with self.proxy._lock:
                        self.proxy.refusals.append(Refusal(refuse[0], correlation_id))
                    continue
            self._forward(frame, correlation_id, body.acks != 0, partitions)

    def _forward(
        self,
        frame: bytes,
        correlation_id: int,
        expects_answer: bool,
        partitions: list[tuple[str, int]] | None = None,
    ) -> _Slot | None:
        """Send the request on; its answer lets go the refusals held for `partitions`.
        Those are tied to the answer before the request leaves: a node that answers
        before this thread runs again (the machine busy) found none to let go, and the
        refusal waited out max_hold_s (once in a full run, and in half the runs with
        both cores loaded)."""
        slot = None
        if expects_answer:
            slot = _Slot(correlation_id)
            with self.cond:
                for tp in partitions or ():
                    held = self.held.pop(tp, None)
                    if held is not None:
                        slot.releases.append(held)
                self.slots.append(slot)
                self.by_correlation[correlation_id] = slot
        try:
            self.upstream.sendall(_SIZE.pack(len(frame)) + frame)
        except OSError:
            self.client.close()
        return slot

    def _refusal(self, request: object) -> bytes:
        cls = response_class(request)  # type: ignore[arg-type]
        body = request.body  # type: ignore[attr-defined]
        code = error_code(self.proxy.error)
        topics = [
            cls.TopicProduceResponse(
                name=t.name,
                partition_responses=[
                    cls.TopicProduceResponse.PartitionProduceResponse(
                        index=p.index,
                        error_code=code,
                        base_offset=-1,
                        log_append_time_ms=-1,
                        log_start_offset=-1,
                        record_errors=[],
                        error_message=self.proxy.error,
                    )
                    for p in t.partition_data
                ],
            )
            for t in body.topic_data
        ]
        [frame] = encode_response(request, cls(responses=topics, throttle_time_ms=0))  # type: ignore[arg-type]
        return bytes(frame)

    def _from_upstream(self) -> None:
        while True:
            frame = _read_frame(self.upstream)
            if frame is None:
                self.client.close()
                return
            (correlation_id,) = _SIZE.unpack_from(frame)
            with self.cond:
                slot = self.by_correlation.pop(correlation_id, None)
                if slot is None:
                    continue  # not ours to answer (never happens with an honest node)
                slot.answer = _SIZE.pack(len(frame)) + frame
                for held in slot.releases:
                    if held.held_for is not None:
                        self._let_go(held, after_next_answer=True)
                self._flush()

    def _release_late(self) -> None:
        while not self.proxy._stop.is_set():
            time.sleep(0.05)
            with self.cond:
                now = time.monotonic()
                for tp, slot in list(self.held.items()):
                    if now - slot.held_since >= self.proxy.max_hold_s:
                        del self.held[tp]
                        self._let_go(slot, after_next_answer=False)
                for slot in self.slots:
                    if slot.held_for is not None and now - slot.held_since >= self.proxy.max_hold_s:
                        self._let_go(slot, after_next_answer=False)
                self._flush()
            if self.client.fileno() < 0:
                return

    def _let_go(self, slot: _Slot, after_next_answer: bool) -> None:
        with self.proxy._lock:
            for r in self.proxy.refusals:
                if r.correlation_id == slot.correlation_id and r.partition == slot.held_for:
                    r.released_after_next_answer = after_next_answer
        slot.held_for = None

    def _flush(self) -> None:
        while self.slots and self.slots[0].answer is not None and self.slots[0].held_for is None:
            slot = self.slots.popleft()
            try:
                self.client.sendall(slot.answer or b"")
            except OSError:
                return
