"""Kafka's network model (its SocketServer), with threads:

- an acceptor thread takes connections and hands each to one of
  `num.network.threads` processors, round robin;
- a processor owns its connections' sockets (non-blocking, one selector): it reads
  4-byte-length frames, refuses any over `socket.request.max.bytes` by closing the
  connection, decodes the request header and body, and puts the request into the
  request channel; it writes the responses back, FileSlices with sendfile;
- the request channel is a queue of at most `queued.max.requests` requests (a full
  channel blocks the processor, which stops reading: back-pressure to the clients);
- `num.io.threads` handler threads take requests from the channel and answer them.

A connection is muted from a request's arrival until its handler has *started* it
(for most requests: answered it; for a Produce: appended its batches), so a
connection's requests are applied in order. A request that then waits (a Produce
for acks=all, a Fetch for fetch.min.bytes) is handed to a bounded pool of delayed
threads (Kafka parks it in its purgatory), which frees the handler and lets the
connection's next request in, up to MAX_IN_FLIGHT per connection. Responses go back in
request order: each request has a slot in its connection's queue, and a slot is
written only when every slot before it has been.

A listener mapped to SSL runs TLS over memory buffers (an `ssl.SSLObject` between
two `ssl.MemoryBIO`s), the socket staying a plain non-blocking one: the handshake
advances on the selector's events (a client that does not finish it within
HANDSHAKE_TIMEOUT_S is closed); a readable socket is read in one large `recv` of
ciphertext (TLS_RECV_CHUNK) and every whole TLS record in it is decrypted into the
connection's buffer at once; responses are encrypted into a ciphertext buffer that is
sent as the socket takes it, a FileSlice read in chunks (sendfile being plaintext only).
An `ssl.SSLSocket` would instead make two `recv` system calls per TLS record (header,
then body), and clients such as librdkafka send a record per buffer segment (about
one per 1 KiB record value and one per its few-byte header): see docs/perf/tls.md.

This module holds the acceptor, the handler threads and the delayed threads; the
processor is processor.py, its connections connection.py, the request channel
request_channel.py, and what a handler answers (a Deferred) deferred.py.
"""

from __future__ import annotations

import queue
import socket
import threading
import time

from ..event_log import EventLogger
from ..idle_meter import IdleMeter
from ..security.kafka_gate import CloseConnection, KafkaGate
from ..security.kafka_tls import ListenerTls
from .connection import Connection, Slot
from .deferred import Deferred, Handler
from .processor import Processor, SentObserver
from .request_channel import RequestChannel
from .socket_settings import SocketSettings

_log = EventLogger("kafka")


class SocketServer:
    """The acceptor, processors and handlers of one Kafka listener."""

    def __init__(
        self,
        host: str,
        port: int,
        handler: Handler,
        settings: SocketSettings | None = None,
        tls: ListenerTls | None = None,
        listener_name: str = "PLAINTEXT",
        gate: KafkaGate | None = None,
        on_sent: SentObserver | None = None,
    ) -> None:
        self.settings = settings or SocketSettings()
        self.on_sent = on_sent  # response send times (the node's metrics)
        # Idle shares of the network threads (waiting in select) and of the handlers
        # (waiting for a request), Kafka's two idle-percent metrics.
        self.network_idle = IdleMeter(self.settings.num_network_threads)
        self.handler_idle = IdleMeter(self.settings.num_io_threads)
        self.handler = handler
        self.gate = gate  # authentication, principals and the ACL admin APIs
        self.tls = tls  # None: plaintext
        self.listener_name = listener_name
        self.stopped = threading.Event()
        self.channel = RequestChannel(self.settings.queued_max_requests)
        self._sock = socket.create_server((host, port), backlog=128, reuse_port=False)
        self._sock.settimeout(0.3)
        self.host = host
        self.port = int(self._sock.getsockname()[1])
        self._count_lock = threading.Lock()
        self._connections = 0
        self.processors = [
            Processor(i, self.channel, self.settings, self)
            for i in range(self.settings.num_network_threads)
        ]
        self._handlers = [
            threading.Thread(target=self._handle_loop, args=(i,), name=f"kafka-io-{i}", daemon=True)
            for i in range(self.settings.num_io_threads)
        ]
        self.delayed: queue.Queue[tuple[Connection, Slot, Deferred] | None] = queue.Queue(
            self.settings.queued_max_requests
        )
        self._delayed_threads = [
            threading.Thread(target=self._delayed_loop, name=f"kafka-delayed-{i}", daemon=True)
            for i in range(self.settings.delayed_threads)
        ]
        self._acceptor = threading.Thread(
            target=self._accept_loop, name="kafka-acceptor", daemon=True
        )

    def start(self) -> None:
        for t in (*self.processors, *self._handlers, *self._delayed_threads, self._acceptor):
            t.start()
        _log.info("kafka_listener_started", host=self.host, port=self.port)

    def shutdown(self) -> None:
        self.stopped.set()
        self.channel.close(len(self._handlers))
        self._acceptor.join(2)
        for p in self.processors:
            p._wake()
            p.join(2)
        for t in self._handlers:
            t.join(1)
        for _ in self._delayed_threads:
            try:
                self.delayed.put_nowait(None)
            except queue.Full:
                break
        for t in self._delayed_threads:
            t.join(1)

    def connection_closed(self) -> None:
        with self._count_lock:
            self._connections -= 1

    def _accept_loop(self) -> None:
        rr = 0
        try:
            while not self.stopped.is_set():
                try:
                    sock, _addr = self._sock.accept()
                except TimeoutError:
                    continue
                except OSError:
                    if self.stopped.is_set():
                        break
                    time.sleep(0.05)  # e.g. too many open files: do not spin
                    continue
                with self._count_lock:
                    full = self._connections >= self.settings.max_connections
                    if not full:
                        self._connections += 1
                if full:
                    sock.close()
                    continue
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                processor = self.processors[rr % len(self.processors)]
                rr += 1
                if not processor.accept(sock):
                    sock.close()
                    self.connection_closed()
        finally:
            self._sock.close()

    def _handle_loop(self, index: int) -> None:
        # Bounded by shutdown: the channel yields None to each handler then.
        idle = self.handler_idle
        while True:
            idle.idle(index)
            item = self.channel.get()
            idle.busy(index)
            if item is None or self.stopped.is_set():
                return
            conn, request, slot = item
            try:
                if self.gate is None:
                    answer = self.handler(request)
                else:
                    if conn.session is None:
                        conn.session = self.gate.new_session(conn.host, conn.principal)
                    answer = self.gate(conn.session, request, self.handler)
            except CloseConnection as e:
                _log.debug("kafka_connection_refused", connection=conn.id, reason=str(e))
                conn.processor.respond(conn, slot, None, close=True)
                continue
            except Exception as e:  # noqa: BLE001 - a bug in a handler: this connection only
                self._failed(conn, slot, request.spec.name, e)
                continue
            if isinstance(answer, Deferred):
                if not answer.in_order:  # else muted until its answer (deferred.py)
                    conn.processor.started(conn)
                # Bounded: a full pool of waits blocks this handler (back-pressure).
                while not self.stopped.is_set():
                    try:
                        self.delayed.put((conn, slot, answer), timeout=0.2)
                        break
                    except queue.Full:
                        continue
                continue
            conn.processor.respond(conn, slot, answer)

    def _delayed_loop(self) -> None:
        # Bounded by shutdown: the queue yields None to each delayed thread then.
        while True:
            item = self.delayed.get()
            if item is None or self.stopped.is_set():
                return
            conn, slot, deferred = item
            try:
                parts = deferred.wait()
            except Exception as e:  # noqa: BLE001 - a bug in a handler: this connection only
                self._failed(conn, slot, "delayed", e)
                continue
            conn.processor.respond(conn, slot, parts)

    def _failed(self, conn: Connection, slot: Slot, api: str, e: Exception) -> None:
        _log.error("kafka_handler_failed", api=api, error=f"{type(e).__name__}: {e}")
        conn.processor.respond(conn, slot, None, close=True)
