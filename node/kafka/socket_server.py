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
"""

from __future__ import annotations

import contextlib
import os
import queue
import selectors
import socket
import ssl
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from seglog.storage.file_slice import FileSlice

from ..event_log import EventLogger
from ..idle_meter import IdleMeter
from ..security.kafka_gate import CloseConnection, KafkaGate, KafkaSession
from ..security.kafka_tls import ListenerTls
from ..security.principal import ANONYMOUS, KafkaPrincipal, certificate_principal
from ..security.tls_records import RecordReader
from .codec import InvalidRequestError, KafkaRequest, Part, parse_request

_log = EventLogger("kafka")
_SIZE = struct.Struct(">i")
RECV_CHUNK = 64 * 1024
SELECT_TIMEOUT_S = 0.3
MAX_NEW_CONNECTIONS = 20  # a processor's queue of accepted, not yet registered sockets

MAX_IN_FLIGHT = 5  # requests of one connection being handled or awaiting their turn
HANDSHAKE_TIMEOUT_S = 10.0  # a TLS client that has not finished its handshake by then
TLS_CHUNK = 256 * 1024  # plaintext bytes encrypted at a time on a TLS connection
TLS_RECV_CHUNK = 256 * 1024  # ciphertext bytes taken per recv on a TLS connection
# The most a TLS socket waits for before it is readable: Linux clamps a socket's receive
# window to its SO_RCVLOWAT when that needs more buffer than the socket has (at first
# tcp_rmem's default, 128 KiB, for twice the window), which would cap the flow; 32 KiB
# stays under it and still wakes the loop once per 32 KiB instead of once per record.
MAX_RCVLOWAT = 32 * 1024
TLS_MAX_RECORD = 5 + 2**14 + 2048  # a TLS record's header and longest ciphertext (RFC 5246)


class Deferred:
    """A handler's answer for a request it has started but not finished: wait() (on
    the handler thread) returns the response parts (None: no response)."""

    def __init__(self, wait: Callable[[], list[Part] | None]) -> None:
        self.wait = wait


# Told a request's API name and the seconds its response took to be written out.
SentObserver = Callable[[str, float], None]

# A handler: request → the parts of its response frame, None for no response (a
# Produce with acks=0), or a Deferred for one that continues after it started.
Handler = Callable[[KafkaRequest], "list[Part] | None | Deferred"]


class Slot:
    """A request's place in its connection's response order."""

    __slots__ = ("api", "close", "done", "parts")

    def __init__(self, api: str = "") -> None:
        self.done = False
        self.parts: list[Part] | None = None
        self.close = False
        self.api = api


@dataclass(frozen=True)
class SocketSettings:
    """Kafka's names and defaults (socket.request.max.bytes: 100 MiB)."""

    num_network_threads: int = 3
    num_io_threads: int = 8
    queued_max_requests: int = 500
    socket_request_max_bytes: int = 104_857_600
    max_connections: int = 1000
    connections_max_idle_ms: int = 600_000
    # Threads that wait out delayed requests (acks=all produces, long-polling
    # fetches), so that waits never hold the num.io.threads handlers: seglog's
    # stand-in for Kafka's purgatory. 0: 4 per io thread.
    num_delayed_threads: int = 0

    @property
    def delayed_threads(self) -> int:
        return self.num_delayed_threads or 4 * self.num_io_threads


class Connection:
    """One client connection, owned by one processor."""

    def __init__(self, sock: socket.socket, conn_id: str, processor: Processor) -> None:
        self.sock = sock
        self.id = conn_id
        self.processor = processor
        self.inbuf = bytearray()
        self.outq: deque[Part] = deque()
        self.out_pos = 0  # bytes of outq[0] already sent
        self.slots: deque[Slot] = deque()  # requests in flight, in arrival order
        self.unstarted: Slot | None = None  # dispatched, its handler not yet started
        self.events = 0  # what the processor's selector watches for (0: not registered)
        self.closed = False
        self.last_active = time.monotonic()
        self.tls: ssl.SSLObject | None = None  # TLS over memory buffers (see set_tls)
        self.tls_in = ssl.MemoryBIO()  # ciphertext received, not yet decrypted
        self.tls_out = ssl.MemoryBIO()  # ciphertext from the TLS object, not yet taken
        self.cipher_out = bytearray()  # ciphertext taken, not yet sent
        self.handshaking = False
        self.rcvlowat = 1  # the socket's SO_RCVLOWAT (see Processor._watermark)
        self.handshake_wants = selectors.EVENT_READ  # a server first awaits the ClientHello
        self.principal: KafkaPrincipal = ANONYMOUS  # a TLS client's certificate subject
        self.host = conn_id.rsplit("-", 2)[0].rpartition(":")[0]
        self.session: KafkaSession | None = None  # the security gate's, from the first request
        # Response send times: parts queued and sent so far, and per response in
        # outq (the parts count that completes it, its API, when it was queued).
        self.parts_queued = 0
        self.parts_sent = 0
        self.sending: deque[tuple[int, str, float]] = deque()

    def set_tls(self, context: ssl.SSLContext) -> None:
        self.tls = context.wrap_bio(self.tls_in, self.tls_out, server_side=True)
        self.handshaking = True

    def take_ciphertext(self) -> None:
        """Move what the TLS object has written (records, alerts) to the send buffer."""
        if self.tls_out.pending:
            self.cipher_out += self.tls_out.read()

    @property
    def has_output(self) -> bool:
        return bool(self.outq or self.cipher_out)


Work = tuple[Connection, KafkaRequest, Slot]


class RequestChannel:
    """The bounded queue between the processors and the handlers."""

    def __init__(self, capacity: int) -> None:
        self._queue: queue.Queue[Work | None] = queue.Queue(capacity)

    def put(self, work: Work, stopped: threading.Event) -> bool:
        # Bounded by `stopped`: a full channel is retried until there is room or shutdown.
        while not stopped.is_set():
            try:
                self._queue.put(work, timeout=0.2)
                return True
            except queue.Full:
                continue
        return False

    def get(self) -> Work | None:
        return self._queue.get()

    def close(self, handlers: int) -> None:
        for _ in range(handlers):
            try:
                self._queue.put_nowait(None)
            except queue.Full:
                break

    def size(self) -> int:
        return self._queue.qsize()


class Processor(threading.Thread):
    def __init__(
        self, index: int, channel: RequestChannel, settings: SocketSettings, server: SocketServer
    ) -> None:
        super().__init__(name=f"kafka-network-{index}", daemon=True)
        self.index = index
        self.channel = channel
        self.settings = settings
        self.server = server
        self.selector = selectors.DefaultSelector()
        self._new: queue.Queue[socket.socket] = queue.Queue(MAX_NEW_CONNECTIONS)
        # (connection, slot, parts, close); slot None: the connection's unstarted
        # request has started (its next request may come in).
        self._responses: deque[tuple[Connection, Slot | None, list[Part] | None, bool]] = deque()
        self._responses_lock = threading.Lock()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self.selector.register(self._wake_r, selectors.EVENT_READ, None)
        self.connections: dict[str, Connection] = {}
        self._next_id = 0
        self._records = RecordReader(RECV_CHUNK)  # decrypts a TLS connection's records

    # called by other threads

    def accept(self, sock: socket.socket) -> bool:
        try:
            self._new.put(sock, timeout=1)
        except queue.Full:
            return False
        self._wake()
        return True

    def respond(
        self, conn: Connection, slot: Slot, parts: list[Part] | None, close: bool = False
    ) -> None:
        """From a handler: the request's response (None: none is sent); `close`: close
        the connection instead."""
        with self._responses_lock:
            self._responses.append((conn, slot, parts, close))
        self._wake()

    def started(self, conn: Connection) -> None:
        """From a handler: the connection's request has started (its effects are
        applied); the next request may be read while this one waits."""
        with self._responses_lock:
            self._responses.append((conn, None, None, False))
        self._wake()

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except (BlockingIOError, OSError):
            pass  # already woken (the pipe is full) or shutting down

    # the loop

    def run(self) -> None:
        stopped = self.server.stopped
        idle = self.server.network_idle
        try:
            while not stopped.is_set():
                self._register_new()
                self._send_responses()
                idle.idle(self.index)
                ready = self.selector.select(SELECT_TIMEOUT_S)
                idle.busy(self.index)
                for key, events in ready:
                    conn = key.data
                    if conn is None:
                        with contextlib.suppress(BlockingIOError):
                            self._wake_r.recv(4096)
                        continue
                    if conn.handshaking:
                        self._handshake(conn)
                        continue
                    if events & selectors.EVENT_WRITE and not conn.closed:
                        self._write(conn)
                    if events & selectors.EVENT_READ and not conn.closed:
                        self._read(conn)
                self._close_idle()
        finally:
            for conn in list(self.connections.values()):
                self._close(conn, "shutdown")
            self.selector.close()
            self._wake_r.close()
            self._wake_w.close()

    def _register_new(self) -> None:
        # Bounded by the queue's capacity.
        while True:
            try:
                sock = self._new.get_nowait()
            except queue.Empty:
                return
            sock.setblocking(False)
            self._next_id += 1
            peer = sock.getpeername() if sock.family != socket.AF_UNIX else ("unix", 0)
            conn = Connection(sock, f"{peer[0]}:{peer[1]}-{self.index}-{self._next_id}", self)
            if self.server.tls is not None:
                conn.set_tls(self.server.tls.context())
            self.connections[conn.id] = conn
            self._interest(conn)

    def _handshake(self, conn: Connection) -> None:
        """Advance a TLS handshake as far as the bytes at hand allow; a failure (a
        plaintext client, an untrusted or expired certificate, no common protocol) is
        logged once and closes, after a best-effort send of the TLS alert."""
        tls = conn.tls
        assert tls is not None
        # Bounded: each pass takes a recv's bytes or returns.
        while True:
            if conn.cipher_out and not self._send_ciphertext(conn):
                return  # closed, or the socket is full: wait until writable
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                pass
            except ssl.SSLError as e:
                self._handshake_failed(conn, getattr(e, "reason", None) or str(e))
                return
            conn.take_ciphertext()
            if conn.cipher_out:
                continue  # our flight first (the ServerHello...)
            try:
                data = conn.sock.recv(TLS_RECV_CHUNK)
            except BlockingIOError:
                conn.handshake_wants = selectors.EVENT_READ
                self._interest(conn)
                return
            except OSError as e:
                self._handshake_failed(conn, str(e))
                return
            if not data:
                self._handshake_failed(conn, "closed by the client during the handshake")
                return
            conn.tls_in.write(data)
        conn.take_ciphertext()  # the server's last flight (TLS 1.3: session tickets)
        conn.handshaking = False
        conn.principal = certificate_principal(tls.getpeercert(binary_form=True))
        conn.last_active = time.monotonic()
        if conn.cipher_out:
            self._write(conn)
        self._interest(conn)
        # The client's first request may have come with its last handshake message.
        self._decrypt(conn)
        self._next_request(conn)

    def _handshake_failed(self, conn: Connection, reason: str) -> None:
        _log.warning(
            "kafka_ssl_handshake_failed",
            listener=self.server.listener_name,
            address=conn.id.rsplit("-", 2)[0],
            reason=reason,
        )
        conn.take_ciphertext()  # the alert, if any: one non-blocking try
        if conn.cipher_out:
            with contextlib.suppress(OSError):
                conn.sock.send(conn.cipher_out)
        self._close(conn, "ssl handshake failed")

    def _send_ciphertext(self, conn: Connection) -> bool:
        """Send what the socket takes of the ciphertext buffer: True once it is empty;
        False when the socket is full (EVENT_WRITE is selected) or the send failed."""
        # Bounded by the buffer: each pass sends some bytes or returns.
        while conn.cipher_out:
            try:
                n = conn.sock.send(conn.cipher_out)
            except BlockingIOError:
                if conn.handshaking:
                    conn.handshake_wants = selectors.EVENT_WRITE
                self._interest(conn)
                return False
            except OSError as e:
                self._close(conn, f"write failed: {e}")
                return False
            del conn.cipher_out[:n]
        return True

    def _send_responses(self) -> None:
        with self._responses_lock:
            pending = list(self._responses)
            self._responses.clear()
        for conn, slot, parts, close in pending:
            if conn.closed or close:
                _close_parts(parts or [])
                self._close(conn, "handler failed")
                continue
            if slot is None:
                conn.unstarted = None
            else:
                if conn.unstarted is slot:
                    conn.unstarted = None
                slot.done, slot.parts = True, parts
                # Bounded by the connection's slots (at most MAX_IN_FLIGHT).
                while conn.slots and conn.slots[0].done:
                    head = conn.slots.popleft()
                    if head.parts:  # None: no response (acks=0)
                        conn.outq.extend(head.parts)
                        if self.server.on_sent is not None:
                            conn.parts_queued += len(head.parts)
                            conn.sending.append((conn.parts_queued, head.api, time.perf_counter()))
            if conn.outq:
                self._write(conn)
            else:
                self._interest(conn)
                self._next_request(conn)

    def _muted(self, conn: Connection) -> bool:
        return conn.unstarted is not None or len(conn.slots) >= MAX_IN_FLIGHT

    def _interest(self, conn: Connection) -> None:
        """Select on what the connection can do now: write its queued output, read
        when not muted. Nothing (muted, no output): off the selector until a handler
        answers, so waiting bytes in its socket do not wake the loop again and again."""
        events = selectors.EVENT_WRITE if conn.has_output else 0
        if not self._muted(conn):
            events |= selectors.EVENT_READ
        if conn.handshaking:
            events = conn.handshake_wants
        if events == conn.events or conn.closed:
            return
        if conn.events == 0:
            self.selector.register(conn.sock, events, conn)
        elif events == 0:
            self.selector.unregister(conn.sock)
        else:
            self.selector.modify(conn.sock, events, conn)
        conn.events = events

    def _read(self, conn: Connection) -> None:
        if self._muted(conn):
            self._interest(conn)
            return
        try:
            data = conn.sock.recv(TLS_RECV_CHUNK if conn.tls else RECV_CHUNK)
        except BlockingIOError:
            return
        except OSError as e:
            self._close(conn, f"read failed: {e}")
            return
        if not data:
            self._close(conn, "closed by client")
            return
        conn.last_active = time.monotonic()
        if conn.tls:
            conn.tls_in.write(data)
            self._decrypt(conn)
        else:
            conn.inbuf += data
        self._next_request(conn)

    def _decrypt(self, conn: Connection) -> None:
        """Decrypt every whole TLS record received into the connection's buffer (a
        partial one waits for its rest); an alert or a bad record closes."""
        tls = conn.tls
        assert tls is not None
        if conn.closed:
            return
        try:
            still_open = self._records.read_into(tls, conn.inbuf)
        except ssl.SSLError as e:
            _log.warning(
                "kafka_ssl_read_failed",
                listener=self.server.listener_name,
                connection=conn.id,
                reason=getattr(e, "reason", None) or str(e),
            )
            self._close(conn, "ssl read failed")
            return
        if not still_open:  # the client's close_notify
            self._close(conn, "closed by client")
            return
        # Reading may have made TLS write (a TLS 1.3 KeyUpdate's answer).
        conn.take_ciphertext()
        if conn.cipher_out:
            self._write(conn)

    def _next_request(self, conn: Connection) -> None:
        self._take_request(conn)
        if conn.tls is not None and not conn.closed:
            self._watermark(conn)

    def _watermark(self, conn: Connection) -> None:
        """Have a TLS socket raise its readable event only once it holds enough to
        possibly complete the frame in progress (SO_RCVLOWAT): clients such as
        librdkafka send a TLS record, so a TCP segment, per buffer segment (a few
        bytes, then 1 KiB, ...), and waking for each costs two GIL hand-offs (select,
        recv) and a pass of this loop per KiB where plaintext takes one per 64 KiB.
        Safe: each plaintext byte the frame still needs comes in at least one byte of
        ciphertext, but for those of the received part of a record (TLS holds at
        most one, unseen: hence TLS_MAX_RECORD) and of what waits in tls_in."""
        have = len(conn.inbuf)
        need = 4 + _SIZE.unpack_from(conn.inbuf)[0] if have >= 4 else 4
        want = need - have - conn.tls_in.pending - TLS_MAX_RECORD
        want = max(1, min(want, MAX_RCVLOWAT))
        if want != conn.rcvlowat:
            try:
                conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, want)
            except OSError:
                return
            conn.rcvlowat = want

    def _take_request(self, conn: Connection) -> None:
        """Take one whole frame off the connection's buffer, if there is one."""
        if self._muted(conn) or conn.closed or len(conn.inbuf) < 4:
            return
        (size,) = _SIZE.unpack_from(conn.inbuf)
        if size < 0 or size > self.settings.socket_request_max_bytes:
            _log.warning(
                "kafka_frame_refused",
                connection=conn.id,
                size=size,
                max=self.settings.socket_request_max_bytes,
            )
            self._close(conn, "frame size out of range")
            return
        if len(conn.inbuf) < 4 + size:
            return
        with memoryview(conn.inbuf) as view:  # one copy, released before the del
            frame = bytes(view[4 : 4 + size])
        del conn.inbuf[: 4 + size]
        try:
            request = parse_request(frame)
            request.client_host = conn.id.rpartition(":")[0].strip("[]")
            request.received_s = time.perf_counter()
        except InvalidRequestError as e:
            _log.warning("kafka_request_refused", connection=conn.id, reason=str(e))
            self._close(conn, "invalid request")
            return
        slot = Slot(request.spec.name)
        conn.slots.append(slot)
        conn.unstarted = slot
        self._interest(conn)
        if not self.channel.put((conn, request, slot), self.server.stopped):
            self._close(conn, "shutdown")

    def _write(self, conn: Connection) -> None:
        if conn.tls is not None:
            self._write_tls(conn)
            return
        # Bounded by the queued parts: each pass sends some bytes or returns.
        while conn.outq:
            part = conn.outq[0]
            try:
                if isinstance(part, FileSlice):
                    left = part.size - conn.out_pos
                    n = os.sendfile(conn.sock.fileno(), part.fd, part.position + conn.out_pos, left)
                    if n == 0 and left > 0:
                        self._close(conn, "segment file truncated during a fetch response")
                        return
                else:
                    n = conn.sock.send(memoryview(part)[conn.out_pos :])
            except BlockingIOError:
                self._interest(conn)
                return
            except OSError as e:
                self._close(conn, f"write failed: {e}")
                return
            self._advance(conn, part, n)
        self._interest(conn)
        self._next_request(conn)

    def _advance(self, conn: Connection, part: Part, n: int) -> None:
        """`n` more bytes of the queue's first part are on their way: past its end, the
        part is done (its file closed, its send time recorded)."""
        conn.out_pos += n
        conn.last_active = time.monotonic()
        if conn.out_pos >= len(part):
            conn.outq.popleft()
            conn.out_pos = 0
            if isinstance(part, FileSlice):
                part.close()
            if conn.sending:
                self._sent_part(conn)

    def _write_tls(self, conn: Connection) -> None:
        """Encrypt the queued parts a chunk at a time, each once the ciphertext of the
        one before has been sent (so a large fetch response is not held encrypted)."""
        tls = conn.tls
        assert tls is not None
        # Bounded by the queued parts: each pass encrypts a chunk or returns.
        while True:
            if not self._send_ciphertext(conn):
                return
            if not conn.outq:
                break
            part = conn.outq[0]
            if isinstance(part, FileSlice):
                left = part.size - conn.out_pos
                try:
                    chunk: bytes | memoryview = os.pread(
                        part.fd, min(left, TLS_CHUNK), part.position + conn.out_pos
                    )
                except OSError as e:
                    self._close(conn, f"write failed: {e}")
                    return
                if not chunk and left > 0:
                    self._close(conn, "segment file truncated during a fetch response")
                    return
            else:
                chunk = memoryview(part)[conn.out_pos : conn.out_pos + TLS_CHUNK]
            try:
                n = tls.write(chunk) if chunk else 0
            except ssl.SSLError as e:
                self._close(conn, f"write failed: {e}")
                return
            conn.take_ciphertext()
            self._advance(conn, part, n)
        self._interest(conn)
        self._next_request(conn)

    def _sent_part(self, conn: Connection) -> None:
        conn.parts_sent += 1
        on_sent = self.server.on_sent
        # Bounded by the responses queued on the connection.
        while conn.sending and conn.sending[0][0] <= conn.parts_sent:
            _, api, queued = conn.sending.popleft()
            if on_sent is not None:
                on_sent(api, time.perf_counter() - queued)

    def _close_idle(self) -> None:
        limit = self.settings.connections_max_idle_ms / 1000
        now = time.monotonic()
        for conn in list(self.connections.values()):
            if conn.handshaking and now - conn.last_active > HANDSHAKE_TIMEOUT_S:
                _log.warning(
                    "kafka_ssl_handshake_failed",
                    listener=self.server.listener_name,
                    address=conn.id.rsplit("-", 2)[0],
                    reason=f"no handshake within {HANDSHAKE_TIMEOUT_S:.0f}s",
                )
                self._close(conn, "ssl handshake timed out")
            elif not conn.slots and not conn.has_output and now - conn.last_active > limit:
                self._close(conn, "idle")

    def _close(self, conn: Connection, reason: str) -> None:
        if conn.closed:
            return
        conn.closed = True
        self.connections.pop(conn.id, None)
        if conn.events:
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(conn.sock)
            conn.events = 0
        conn.sock.close()
        _close_parts(list(conn.outq))
        conn.outq.clear()
        for slot in conn.slots:
            _close_parts(slot.parts or [])
        conn.slots.clear()
        self.server.connection_closed()
        _log.debug("kafka_connection_closed", connection=conn.id, reason=reason)


def _close_parts(parts: list[Part]) -> None:
    for part in parts:
        if isinstance(part, FileSlice):
            part.close()


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
