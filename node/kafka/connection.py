"""A client connection of a Kafka listener, as its processor holds it: its buffers
(and TLS over memory buffers), and the slots that keep its responses in request
order."""

from __future__ import annotations

import os
import selectors
import socket
import ssl
import struct
from collections import deque
from collections.abc import Callable
from typing import Protocol

from seglog.storage.disk_and_clock import plain_monotonic_s, plain_perf_s
from seglog.storage.file_slice import FileSlice

from ..event_log import EventLogger
from ..security.kafka_gate import KafkaSession
from ..security.principal import ANONYMOUS, KafkaPrincipal
from .codec import InvalidRequestError, KafkaRequest, Part, parse_request

_log = EventLogger("kafka")
_SIZE = struct.Struct(">i")


class Outgoing(Protocol):
    """A connection's queue of response parts, as both listener models keep it."""

    outq: deque[Part]
    out_pos: int  # bytes of outq[0] already sent
    last_active: float
    send_times: SendTimes


def advance(conn: Outgoing, part: Part, n: int, on_sent: SentObserver | None) -> None:
    """`n` more bytes of the queue's first part are on their way: past its end, the
    part is done (its file closed, its send time recorded)."""
    conn.out_pos += n
    conn.last_active = plain_monotonic_s()
    if conn.out_pos >= len(part):
        conn.outq.popleft()
        conn.out_pos = 0
        if isinstance(part, FileSlice):
            part.close()
        if conn.send_times.pending:  # else every part queued is sent (or none is timed)
            conn.send_times.part_sent(on_sent)


class SendFailed(Exception):
    """A response part that cannot be sent: the connection closes; says why."""


def slice_chunk(part: FileSlice, pos: int, limit: int) -> bytes:
    """Up to `limit` bytes of a FileSlice from `pos` on, read from its segment file (for
    TLS to encrypt, or a transport to buffer). SendFailed if the file does not give them."""
    left = part.size - pos
    try:
        chunk = os.pread(part.fd, min(left, limit), part.position + pos)
    except OSError as e:
        raise SendFailed(f"write failed: {e}") from None
    if not chunk and left > 0:
        raise SendFailed("segment file truncated during a fetch response")
    return chunk


class FrameRefused(Exception):
    """A frame the connection must be closed for (logged already); says why."""


def take_request(inbuf: bytearray, limit: int, conn_id: str, host: str) -> KafkaRequest | None:
    """The request of the buffer's first whole 4-byte-length frame, taken off it (None
    while the frame is incomplete). A frame over `limit` (socket.request.max.bytes), or
    one that does not parse, raises FrameRefused."""
    (size,) = _SIZE.unpack_from(inbuf)
    if size < 0 or size > limit:
        _log.warning("kafka_frame_refused", connection=conn_id, size=size, max=limit)
        raise FrameRefused("frame size out of range")
    if len(inbuf) < 4 + size:
        return None
    with memoryview(inbuf) as view:  # one copy, released before the del
        frame = bytes(view[4 : 4 + size])
    del inbuf[: 4 + size]
    try:
        request = parse_request(frame)
    except InvalidRequestError as e:
        _log.warning("kafka_request_refused", connection=conn_id, reason=str(e))
        raise FrameRefused("invalid request") from None
    request.client_host = host.strip("[]")
    request.received_s = plain_perf_s()
    return request


class Responder(Protocol):
    """The processor that owns a connection, as the handler threads answer through it."""

    def respond(
        self, conn: Connection, slot: Slot, parts: list[Part] | None, close: bool = False
    ) -> None: ...
    def started(self, conn: Connection) -> None: ...


# Told a request's API name and the seconds its response took to be written out.
SentObserver = Callable[[str, float], None]


class SendTimes:
    """When a connection's responses went out: the parts queued and sent so far, and per
    queued response the parts count that completes it, its API and when it was queued."""

    __slots__ = ("parts_queued", "parts_sent", "pending")

    def __init__(self) -> None:
        self.parts_queued = 0
        self.parts_sent = 0
        self.pending: deque[tuple[int, str, float]] = deque()

    def queued(self, api: str, parts: int) -> None:
        self.parts_queued += parts
        self.pending.append((self.parts_queued, api, plain_perf_s()))

    def part_sent(self, on_sent: SentObserver | None) -> None:
        """One more part written out: each response it completes is told to `on_sent`."""
        self.parts_sent += 1
        pending = self.pending
        # Bounded by the responses queued on the connection.
        while pending and pending[0][0] <= self.parts_sent:
            _, api, queued = pending.popleft()
            if on_sent is not None:
                on_sent(api, plain_perf_s() - queued)


class Slot:
    """A request's place in its connection's response order."""

    __slots__ = ("api", "close", "done", "parts", "request")

    def __init__(self, api: str = "", request: KafkaRequest | None = None) -> None:
        # Its request: a client quota's throttle (request.throttle_ms, set by its handler
        # up to the answer) mutes the connection once it is answered.
        self.request = request
        self.done = False
        self.parts: list[Part] | None = None
        self.close = False
        self.api = api


class Connection:
    """One client connection, owned by one processor."""

    def __init__(self, sock: socket.socket, conn_id: str, processor: Responder) -> None:
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
        self.last_active = plain_monotonic_s()
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
        self.send_times = SendTimes()

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


def close_parts(parts: list[Part]) -> None:
    for part in parts:
        if isinstance(part, FileSlice):
            part.close()
