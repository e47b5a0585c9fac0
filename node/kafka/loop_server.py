"""Kafka's network model on the node's event loop (`kafka.listener.model=event-loop`,
the default). Kafka's roles, and where each went:

- the acceptor: the loop's server socket (bound when the listener is made, so a
  taken port fails at once); `max.connections` is counted as connections arrive;
- the processors: the loop itself, one per node, with a Protocol per connection
  (node/kafka/loop_connection.py) reading frames and writing answers;
- the request handlers: the loop again, for the requests that never block — Produce
  (a page-cache append; an acks=all answer is a future the high watermark resolves),
  Fetch (a long poll parks keyed by partition, Kafka's fetch purgatory),
  ApiVersions, ListOffsets. The rest (admin, groups, SASL, Metadata that may create
  topics) may wait on the controller or a coordinator: they go to a bounded pool of
  `num.io.threads` threads, at most `queued.max.requests` of them queued (beyond that
  their connections stay muted: back-pressure), and come back to the loop;
- the purgatory: produces and fetches park on the loop without a thread; the other
  deferred answers (JoinGroup, SyncGroup, a failed SASL attempt's delay) wait on a
  bounded delayed pool.

Threads per request were dropped because each hand-off (processor → channel → handler
→ delayed thread → processor) cost more CPU than the request itself
(docs/perf/produce-latency.md); the threaded server stays as
`kafka.listener.model=threads` (node/kafka/socket_server.py), for comparison."""

from __future__ import annotations

import asyncio
import itertools
import socket
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from seglog.storage.disk_and_clock import plain_monotonic_s

from ..event_log import EventLogger
from ..event_loop import NodeLoop
from ..idle_meter import IdleMeter
from ..security.kafka_gate import CloseConnection, KafkaGate
from ..security.kafka_tls import ListenerTls
from ..security.tls_records import RecordReader
from .codec import KafkaRequest, Part
from .connection import Slot
from .deferred import Deferred, Handler, HandlerFailed
from .loop_connection import KafkaConnection
from .processor import HANDSHAKE_TIMEOUT_S, RECV_CHUNK, SentObserver
from .socket_settings import SocketSettings

_log = EventLogger("kafka")
# Requests answered on the loop: they never block (see the module's docstring).
ON_LOOP = frozenset({"Produce", "Fetch", "ApiVersions", "ListOffsets", "OffsetForLeaderEpoch"})
SWEEP_S = 1.0  # how often idle connections and stuck TLS handshakes are looked for

Outcome = tuple[list[Part] | None | Deferred, bool]  # (answer, close the connection)


class LoopSocketServer:
    """One Kafka listener on the node's event loop."""

    def __init__(
        self,
        host: str,
        port: int,
        handler: Handler,
        node_loop: NodeLoop,
        settings: SocketSettings | None = None,
        tls: ListenerTls | None = None,
        listener_name: str = "PLAINTEXT",
        gate: KafkaGate | None = None,
        on_sent: SentObserver | None = None,
    ) -> None:
        self.settings = settings or SocketSettings()
        self.handler = handler
        self.node_loop = node_loop
        self.loop = node_loop.loop
        self.tls = tls
        self.listener_name = listener_name
        self.gate = gate
        self.on_sent = on_sent
        self.stopped = threading.Event()
        self.records = RecordReader(RECV_CHUNK)  # decrypts TLS records (loop only)
        # Kafka's two idle metrics: the loop's share spent outside our callbacks, the
        # handler pool's share waiting for a request.
        self.network_idle = IdleMeter(1)
        self.network_idle.idle(0)
        self._depth = 0
        io = self.settings.num_io_threads
        self.handler_idle = IdleMeter(io)
        self._free_slots = list(range(io))
        self._slots_lock = threading.Lock()
        for i in self._free_slots:
            self.handler_idle.idle(i)
        self._pool = ThreadPoolExecutor(io, thread_name_prefix=f"kafka-io-{listener_name}")
        self._delayed = ThreadPoolExecutor(
            self.settings.delayed_threads, thread_name_prefix=f"kafka-delayed-{listener_name}"
        )
        self._in_pool = 0  # requests queued or running in the pool (loop only)
        self._backlog: deque[tuple[KafkaConnection, KafkaRequest, Slot]] = deque()
        self._connections: set[KafkaConnection] = set()
        self._ids = itertools.count(1)
        self._sock = socket.create_server((host, port), backlog=128, reuse_port=False)
        self._sock.setblocking(False)
        self.host = host
        self.port = int(self._sock.getsockname()[1])
        self._server: asyncio.AbstractServer | None = None
        self._sweeper: asyncio.TimerHandle | None = None

    # --- life ----------------------------------------------------------------------------

    def start(self) -> None:
        self.node_loop.run(self._start())
        _log.info("kafka_listener_started", host=self.host, port=self.port, model="event-loop")

    async def _start(self) -> None:
        self._server = await self.loop.create_server(
            lambda: KafkaConnection(self), sock=self._sock, backlog=128
        )
        self._sweeper = self.loop.call_later(SWEEP_S, self._sweep)

    def shutdown(self) -> None:
        self.stopped.set()
        try:
            self.node_loop.run(self._stop())
        except (RuntimeError, TimeoutError) as e:  # the loop already stopped
            _log.debug("kafka_listener_stop", error=str(e))
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._delayed.shutdown(wait=False, cancel_futures=True)

    async def _stop(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
        if self._server is not None:
            self._server.close()
        for conn in list(self._connections):
            conn.close("shutdown")
        self._backlog.clear()

    # --- connections -----------------------------------------------------------------------

    def next_id(self) -> int:
        return next(self._ids)

    def admit(self, conn: KafkaConnection) -> bool:
        if self.stopped.is_set() or len(self._connections) >= self.settings.max_connections:
            return False
        self._connections.add(conn)
        return True

    def closed(self, conn: KafkaConnection) -> None:
        self._connections.discard(conn)

    def enter(self) -> None:
        """A callback of ours starts on the loop (the network idle meter's busy time)."""
        self._depth += 1
        if self._depth == 1:
            self.network_idle.busy(0)

    def leave(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self.network_idle.idle(0)

    def _sweep(self) -> None:
        """Close connections idle past connections.max.idle.ms, and TLS clients that
        have not finished their handshake in HANDSHAKE_TIMEOUT_S."""
        now = plain_monotonic_s()
        limit = self.settings.connections_max_idle_ms / 1000
        for conn in list(self._connections):
            if conn.handshaking and now - conn.last_active > HANDSHAKE_TIMEOUT_S:
                conn.handshake_failed(f"no handshake within {HANDSHAKE_TIMEOUT_S:.0f}s")
                continue
            idle = conn.idle_for(now)
            if idle is not None and idle > limit:
                conn.close("idle")
        self._sweeper = self.loop.call_later(SWEEP_S, self._sweep)

    # --- requests ------------------------------------------------------------------------

    def dispatch(self, conn: KafkaConnection, request: KafkaRequest, slot: Slot) -> None:
        """On the loop: handle now, or queue for the handler pool (the connection is
        muted until the pool has started it)."""
        if request.spec.name in ON_LOOP:
            self._answered(conn, slot, self._handle(conn, request))
            return
        conn.unstarted = slot
        if self._in_pool >= self.settings.queued_max_requests:
            self._backlog.append((conn, request, slot))  # bounded by max.connections
            return
        self._submit(conn, request, slot)

    def _submit(self, conn: KafkaConnection, request: KafkaRequest, slot: Slot) -> None:
        self._in_pool += 1
        self._pool.submit(self._in_handler_thread, conn, request, slot)

    def _in_handler_thread(self, conn: KafkaConnection, request: KafkaRequest, slot: Slot) -> None:
        with self._slots_lock:
            index = self._free_slots.pop()
        self.handler_idle.busy(index)
        try:
            outcome = self._handle(conn, request)
        finally:
            self.handler_idle.idle(index)
            with self._slots_lock:
                self._free_slots.append(index)
        self.loop.call_soon_threadsafe(self._from_pool, conn, slot, outcome)

    def _from_pool(self, conn: KafkaConnection, slot: Slot, outcome: Outcome) -> None:
        self._in_pool -= 1
        # Bounded by the backlog: admits what the pool has room for.
        while self._backlog and self._in_pool < self.settings.queued_max_requests:
            waiting = self._backlog.popleft()
            if not waiting[0].closed:
                self._submit(*waiting)
        self.enter()
        try:
            conn.started(slot)
            self._answered(conn, slot, outcome)
        finally:
            self.leave()

    def _handle(self, conn: KafkaConnection, request: KafkaRequest) -> Outcome:
        """The security gate and the handler: (answer, False), or (None, True) to close."""
        try:
            if self.gate is None:
                return self.handler(request), False
            if conn.session is None:
                conn.session = self.gate.new_session(conn.host, conn.principal)
            return self.gate(conn.session, request, self.handler), False
        except CloseConnection as refused:  # its own name: mypyc types `e` once per function
            _log.debug("kafka_connection_refused", connection=conn.id, reason=str(refused))
        except Exception as e:  # noqa: BLE001 - a bug in a handler: this connection only
            _log.error(
                "kafka_handler_failed",
                api=request.spec.name,
                error=f"{type(e).__name__}: {e}",
            )
        return None, True

    def _answered(self, conn: KafkaConnection, slot: Slot, outcome: Outcome) -> None:
        answer, close = outcome
        if not isinstance(answer, Deferred):
            conn.respond(slot, answer, close)
            return
        if answer.begin is not None:
            if answer.in_order:
                conn.unstarted = slot  # muted until started() or _respond
                answer.on_started = lambda: self._started(conn, slot)
            try:
                answer.begin(lambda parts: self._deliver(conn, slot, parts))
            except Exception as e:  # noqa: BLE001 - a bug in a handler: this connection only
                _log.error("kafka_handler_failed", api=slot.api, error=f"{type(e).__name__}: {e}")
                conn.respond(slot, None, True)
            return
        self._delayed.submit(self._wait_in_delayed_thread, conn, slot, answer)

    def _wait_in_delayed_thread(self, conn: KafkaConnection, slot: Slot, answer: Deferred) -> None:
        try:
            parts, close = answer.wait(), False
        except Exception as e:  # noqa: BLE001 - a bug in a handler: this connection only
            _log.error("kafka_handler_failed", api="delayed", error=f"{type(e).__name__}: {e}")
            parts, close = None, True
        self.loop.call_soon_threadsafe(self._respond, conn, slot, parts, close)

    def _deliver(
        self, conn: KafkaConnection, slot: Slot, answer: list[Part] | None | HandlerFailed
    ) -> None:
        """A begun Deferred's answer, from whichever thread has it."""
        failed = isinstance(answer, HandlerFailed)
        parts = None if isinstance(answer, HandlerFailed) else answer
        if self.node_loop.on_loop():
            self._respond(conn, slot, parts, failed)
        else:
            self.loop.call_soon_threadsafe(self._respond, conn, slot, parts, failed)

    def _started(self, conn: KafkaConnection, slot: Slot) -> None:
        """On the loop: an in-order Deferred took effect; its connection reads on."""
        self.enter()
        try:
            conn.started(slot)
        finally:
            self.leave()

    def _respond(
        self, conn: KafkaConnection, slot: Slot, parts: list[Part] | None, close: bool
    ) -> None:
        self.enter()
        try:
            if conn.unstarted is slot:  # an in_order Deferred's: the next may come
                conn.unstarted = None
            conn.respond(slot, parts, close)
        finally:
            self.leave()
