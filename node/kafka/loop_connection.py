"""A Kafka client connection on the node's event loop (an asyncio Protocol over a
uvloop TCP transport): it reads 4-byte-length frames, refuses any over
`socket.request.max.bytes` by closing, has its server handle each request (on the
loop, or in the bounded handler pool for those that may block) and writes the
responses back in request order.

Muting, as Kafka's processor does it: reading pauses while a request waits for the
handler pool (so a connection's requests are applied in order), while
MAX_IN_FLIGHT requests are unanswered, and while the transport's write buffer is
above its high-water mark (a client that does not read its answers stops being
read).

TLS runs over memory buffers (an `ssl.SSLObject` between two `ssl.MemoryBIO`s) on
the plain transport, as the threaded processor did: the node sees a failed handshake
(and logs it), takes the client's certificate subject as its principal, and decrypts
every whole TLS record a read brought at once.

FileSlices (a consumer's records) go out with `os.sendfile` on the socket when the
transport has nothing buffered (uvloop implements no loop.sendfile); what the socket
does not take then, and every slice on a TLS connection, is read and written in
WRITE_CHUNK pieces as the transport drains."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import ssl
from collections import deque
from typing import Protocol, cast

from seglog.storage.disk_and_clock import plain_monotonic_s
from seglog.storage.file_slice import FileSlice

from ..event_log import EventLogger
from ..security.kafka_gate import KafkaSession
from ..security.kafka_tls import ListenerTls
from ..security.principal import ANONYMOUS, KafkaPrincipal, certificate_principal
from ..security.tls_records import RecordReader
from .codec import KafkaRequest, Part
from .connection import (
    FrameRefused,
    SendFailed,
    SendTimes,
    SentObserver,
    Slot,
    advance,
    close_parts,
    slice_chunk,
    take_request,
)
from .socket_settings import SocketSettings

_log = EventLogger("kafka")
MAX_IN_FLIGHT = 5  # requests of one connection being handled or awaiting their turn
WRITE_HIGH = 1 << 20  # the transport's write buffer above which reading pauses
WRITE_CHUNK = 256 * 1024  # bytes of a FileSlice read (or encrypted) at a time
# A FileSlice up to this size is copied into one write with the parts around it (a
# pread from the page cache is cheaper than the sends it saves); larger ones go out
# by sendfile.
COPY_SLICE = 64 * 1024


class ConnectionServer(Protocol):
    """What a connection needs of its listener (node/kafka/loop_server.py)."""

    settings: SocketSettings
    tls: ListenerTls | None
    listener_name: str
    records: RecordReader
    on_sent: SentObserver | None

    def next_id(self) -> int: ...
    def admit(self, conn: KafkaConnection) -> bool: ...
    def closed(self, conn: KafkaConnection) -> None: ...
    def enter(self) -> None: ...
    def leave(self) -> None: ...
    def dispatch(self, conn: KafkaConnection, request: KafkaRequest, slot: Slot) -> None: ...


class KafkaConnection(asyncio.Protocol):
    def __init__(self, server: ConnectionServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.id = ""
        self.host = ""
        self.inbuf = bytearray()
        self.slots: deque[Slot] = deque()  # requests in flight, in arrival order
        self.unstarted: Slot | None = None  # waiting for the handler pool to start it
        self.outq: deque[Part] = deque()
        self.out_pos = 0  # bytes of outq[0] already written
        self.send_times = SendTimes()
        self.write_paused = False
        self.taking = False  # in take_requests: an answer given inline does not re-enter
        self.reading = True
        self.throttled = False  # muted for a client quota (Kafka's ThrottledChannel)
        self.unthrottle_at: asyncio.TimerHandle | None = None
        self.closed = False
        self.last_active = plain_monotonic_s()
        self.principal: KafkaPrincipal = ANONYMOUS
        self.session: KafkaSession | None = None  # the security gate's, from the first request
        self.tls: ssl.SSLObject | None = None
        self.tls_in = ssl.MemoryBIO()
        self.tls_out = ssl.MemoryBIO()
        self.handshaking = False

    # --- asyncio's callbacks --------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop's does not subclass it
        self.transport = transport
        peer = transport.get_extra_info("peername") or ("unix", 0)
        self.id = f"{peer[0]}:{peer[1]}-0-{self.server.next_id()}"
        self.host = str(peer[0])
        transport.set_write_buffer_limits(high=WRITE_HIGH)
        if not self.server.admit(self):
            self.closed = True  # over max.connections
            transport.abort()
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        tls = self.server.tls
        if tls is not None:
            self.tls = tls.context().wrap_bio(self.tls_in, self.tls_out, server_side=True)
            self.handshaking = True

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed_now("closed by client" if exc is None else f"connection lost: {exc}")

    def data_received(self, data: bytes) -> None:
        server = self.server
        server.enter()
        try:
            self.last_active = plain_monotonic_s()
            if self.tls is not None:
                self.tls_in.write(data)
                if self.handshaking and not self._handshake():
                    return
                self._decrypt()
            else:
                self.inbuf += data
            self.take_requests()
        finally:
            server.leave()

    def pause_writing(self) -> None:
        self.write_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self.write_paused = False
        self.server.enter()
        try:
            self._pump()
            self._update_reading()
            self.take_requests()
        finally:
            self.server.leave()

    # --- requests ------------------------------------------------------------------------

    def muted(self) -> bool:
        return (
            self.unstarted is not None
            or len(self.slots) >= MAX_IN_FLIGHT
            or self.write_paused
            or self.throttled
        )

    def throttle(self, ms: int) -> None:
        """KIP-219: the answer went out with its throttle time; the channel is muted
        that long (a longer throttle already running is kept)."""
        if self.closed or self.transport is None:
            return
        self.throttled = True
        handle = asyncio.get_running_loop().call_later(ms / 1000, self._unthrottle)
        if self.unthrottle_at is None or handle.when() > self.unthrottle_at.when():
            if self.unthrottle_at is not None:
                self.unthrottle_at.cancel()
            self.unthrottle_at = handle
        else:
            handle.cancel()

    def _unthrottle(self) -> None:
        self.throttled, self.unthrottle_at = False, None
        self._update_reading()
        self.take_requests()

    def _update_reading(self) -> None:
        if self.closed or self.transport is None:
            return
        want = not self.muted()
        if want == self.reading:
            return
        self.reading = want
        if want:
            self.transport.resume_reading()
        else:
            self.transport.pause_reading()

    def take_requests(self) -> None:
        """Take whole frames off the buffer while the connection is not muted."""
        if self.taking:
            return  # an inline answer inside the loop below: it goes on by itself
        self.taking = True
        try:
            self._take_frames()
        finally:
            self.taking = False
        self._update_reading()

    def _take_frames(self) -> None:
        # Bounded by the buffer: each pass takes a frame or returns.
        while not self.closed and not self.muted() and len(self.inbuf) >= 4:
            try:
                request = take_request(
                    self.inbuf, self.server.settings.socket_request_max_bytes, self.id, self.host
                )
            except FrameRefused as e:
                self.close(str(e))
                return
            if request is None:
                break
            slot = Slot(request.spec.name, request)
            self.slots.append(slot)
            self.server.dispatch(self, request, slot)

    def started(self, slot: Slot) -> None:
        """The pool has started the request (its effects applied): the next may come."""
        if self.unstarted is slot:
            self.unstarted = None
            self._update_reading()
            self.take_requests()

    def respond(self, slot: Slot, parts: list[Part] | None, close: bool = False) -> None:
        """On the loop: the request's response (None: none is sent); `close`: close
        the connection instead."""
        if self.closed or close:
            close_parts(parts or [])
            self.close("handler failed")
            return
        slot.done, slot.parts = True, parts
        # Bounded by the connection's slots (at most MAX_IN_FLIGHT).
        while self.slots and self.slots[0].done:
            head = self.slots.popleft()
            if head.request is not None and head.request.throttle_ms > 0:
                self.throttle(head.request.throttle_ms)
            if head.parts:  # None: no response (acks=0)
                self.outq.extend(head.parts)
                self.send_times.queued(head.api, len(head.parts))
        self._pump()
        self._update_reading()
        self.take_requests()

    # --- writing -------------------------------------------------------------------------

    def _pump(self) -> None:
        """Hand queued parts to the transport until it is above its high-water mark."""
        transport = self.transport
        if transport is None:
            return
        # Bounded by the queued parts: each pass writes some bytes or returns.
        while self.outq and not self.write_paused and not self.closed:
            part = self.outq[0]
            if isinstance(part, FileSlice) and part.size - self.out_pos > COPY_SLICE:
                n = self._write_slice(part)
                if n < 0:
                    return
                advance(self, part, n, self.server.on_sent)
            elif not self._write_run():
                return

    def _write_run(self) -> bool:
        """One write of the queue's leading run of bytes and small FileSlices (False:
        closed). A consumer's fetch answer from the page cache is frame, records, frame
        tail: three sends (and up to three wake-ups of the reader) as write, sendfile,
        write; one as a copy."""
        pieces: list[bytes | memoryview] = []
        sizes: list[int] = []
        total = 0
        pos = self.out_pos
        # Bounded by the queue, and by WRITE_CHUNK bytes per run.
        for part in self.outq:
            want = len(part) - pos
            if isinstance(part, FileSlice):
                if want > COPY_SLICE:
                    break  # not the first part: _pump sends a large one by sendfile
                try:
                    piece: bytes | memoryview = slice_chunk(part, pos, want)
                except SendFailed as e:
                    self.close(str(e))
                    return False
            else:
                piece = memoryview(part)[pos:] if pos else part
            pieces.append(piece)
            sizes.append(len(piece))
            total += len(piece)
            pos = 0
            if total >= WRITE_CHUNK or len(piece) < want:
                break  # a short read ends the run where the file did
        self._write(pieces[0] if len(pieces) == 1 else b"".join(pieces))
        if self.closed:
            return False
        on_sent = self.server.on_sent
        for n in sizes:
            advance(self, self.outq[0], n, on_sent)
        return not self.closed

    def _write_slice(self, part: FileSlice) -> int:
        """Bytes of the slice handed on now (-1: closed): sendfile straight to the
        socket when nothing is buffered, else (and on TLS) a chunk read and written."""
        transport = self.transport
        assert transport is not None
        left = part.size - self.out_pos
        at = part.position + self.out_pos
        if self.tls is None and transport.get_write_buffer_size() == 0:
            sock = transport.get_extra_info("socket")
            try:
                n = os.sendfile(sock.fileno(), part.fd, at, left)
            except BlockingIOError:
                n = 0
            except OSError as e:
                self.close(f"write failed: {e}")
                return -1
            if n > 0:
                return n
        try:
            chunk = slice_chunk(part, self.out_pos, WRITE_CHUNK)
        except SendFailed as failed:  # a name of its own: mypyc types `e` once per function
            self.close(str(failed))
            return -1
        self._write(chunk)
        return len(chunk)

    def _write(self, data: bytes | memoryview) -> None:
        assert self.transport is not None
        if self.tls is None:
            self.transport.write(data)
            return
        # Bounded by the data: each pass encrypts some of it.
        while data:
            try:
                n = self.tls.write(data[:WRITE_CHUNK])
            except ssl.SSLError as e:
                self.close(f"write failed: {e}")
                return
            data = data[n:]
            self._flush_tls()

    def _flush_tls(self) -> None:
        if self.tls_out.pending and self.transport is not None:
            self.transport.write(self.tls_out.read())

    # --- TLS -----------------------------------------------------------------------------

    def _handshake(self) -> bool:
        """Advance the handshake with what has arrived: True once it is done."""
        tls = self.tls
        assert tls is not None
        try:
            tls.do_handshake()
        except ssl.SSLWantReadError:
            self._flush_tls()
            return False
        except ssl.SSLError as e:
            self.handshake_failed(getattr(e, "reason", None) or str(e))
            return False
        self._flush_tls()  # the server's last flight (TLS 1.3: session tickets)
        self.handshaking = False
        self.principal = certificate_principal(tls.getpeercert(binary_form=True))
        return True

    def handshake_failed(self, reason: str) -> None:
        _log.warning(
            "kafka_ssl_handshake_failed",
            listener=self.server.listener_name,
            address=self.id.rsplit("-", 2)[0],
            reason=reason,
        )
        self._flush_tls()  # the alert, if any
        self.close("ssl handshake failed")

    def _decrypt(self) -> None:
        assert self.tls is not None
        try:
            still_open = self.server.records.read_into(self.tls, self.inbuf)
        except ssl.SSLError as e:
            _log.warning(
                "kafka_ssl_read_failed",
                listener=self.server.listener_name,
                connection=self.id,
                reason=getattr(e, "reason", None) or str(e),
            )
            self.close("ssl read failed")
            return
        if not still_open:  # the client's close_notify
            self.close("closed by client")
            return
        self._flush_tls()  # reading may have made TLS write (a KeyUpdate's answer)

    # --- closing -------------------------------------------------------------------------

    def idle_for(self, now: float) -> float | None:
        """Seconds idle, if nothing is in flight or queued (None: busy)."""
        if self.slots or self.outq:
            return None
        return now - self.last_active

    def close(self, reason: str) -> None:
        if self.closed:
            return
        if self.transport is not None:
            self.transport.close()  # what is buffered still goes (an alert, an answer)
        self._closed_now(reason)

    def _closed_now(self, reason: str) -> None:
        self.server.closed(self)  # idempotent
        if self.closed:
            return
        self.closed = True
        close_parts(list(self.outq))
        self.outq.clear()
        for slot in self.slots:
            close_parts(slot.parts or [])
        self.slots.clear()
        _log.debug("kafka_connection_closed", connection=self.id, reason=reason)
