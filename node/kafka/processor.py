"""A Kafka listener's network thread (Kafka's Processor): it owns its connections'
sockets (non-blocking, one selector), reads 4-byte-length frames, refuses any over
`socket.request.max.bytes` by closing the connection, decodes requests into the
request channel and writes the responses back in request order (FileSlices with
sendfile, TLS over memory buffers: see node/kafka/socket_server.py)."""

from __future__ import annotations

import contextlib
import os
import queue
import selectors
import socket
import ssl
import struct
import threading
from collections import deque
from typing import Protocol

from seglog.storage.disk_and_clock import plain_monotonic_s
from seglog.storage.file_slice import FileSlice

from ..event_log import EventLogger
from ..idle_meter import IdleMeter
from ..security.kafka_tls import ListenerTls
from ..security.principal import certificate_principal
from ..security.tls_records import RecordReader
from .codec import Part
from .connection import (
    Connection,
    FrameRefused,
    SendFailed,
    SentObserver,
    Slot,
    advance,
    close_parts,
    slice_chunk,
    take_request,
)
from .request_channel import RequestChannel
from .socket_settings import SocketSettings

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


class NetworkServer(Protocol):
    """What a processor needs of its socket server."""

    stopped: threading.Event
    network_idle: IdleMeter
    tls: ListenerTls | None  # None: plaintext
    listener_name: str
    on_sent: SentObserver | None

    def connection_closed(self) -> None: ...


class Processor(threading.Thread):
    def __init__(
        self, index: int, channel: RequestChannel, settings: SocketSettings, server: NetworkServer
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
        conn.last_active = plain_monotonic_s()
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
                close_parts(parts or [])
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
                            conn.send_times.queued(head.api, len(head.parts))
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
        conn.last_active = plain_monotonic_s()
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
        try:
            request = take_request(
                conn.inbuf,
                self.settings.socket_request_max_bytes,
                conn.id,
                conn.id.rpartition(":")[0],
            )
        except FrameRefused as e:
            self._close(conn, str(e))
            return
        if request is None:
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
            advance(conn, part, n, self.server.on_sent)
        self._interest(conn)
        self._next_request(conn)

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
                try:
                    chunk: bytes | memoryview = slice_chunk(part, conn.out_pos, TLS_CHUNK)
                except SendFailed as e:
                    self._close(conn, str(e))
                    return
            else:
                chunk = memoryview(part)[conn.out_pos : conn.out_pos + TLS_CHUNK]
            try:
                n = tls.write(chunk) if chunk else 0
            except ssl.SSLError as e:
                self._close(conn, f"write failed: {e}")
                return
            conn.take_ciphertext()
            advance(conn, part, n, self.server.on_sent)
        self._interest(conn)
        self._next_request(conn)

    def _close_idle(self) -> None:
        limit = self.settings.connections_max_idle_ms / 1000
        now = plain_monotonic_s()
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
        close_parts(list(conn.outq))
        conn.outq.clear()
        for slot in conn.slots:
            close_parts(slot.parts or [])
        conn.slots.clear()
        self.server.connection_closed()
        _log.debug("kafka_connection_closed", connection=conn.id, reason=reason)
