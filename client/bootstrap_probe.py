"""What answers at a bootstrap address, when a client has never reached the cluster:
nothing (connection refused: fail at once, not after request_timeout_ms), a Kafka
listener (seglog's gRPC clients were pointed at the wrong port: say so), or something
else (a gRPC server, a TLS listener, a proxy: the normal retries apply).

The classification of replies is pure; `probe` is the thin socket shell. Detection:
an HTTP/2 client preface, which a gRPC server answers with a SETTINGS frame; when that
gets no such answer, a Kafka ApiVersions v0 request on a fresh connection, which only
a Kafka listener answers with its correlation id."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Sequence
from dataclasses import dataclass

HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
# An empty SETTINGS frame: length 0, type 4, no flags, stream 0.
HTTP2_SETTINGS = struct.pack(">I", 0)[1:] + bytes([4, 0]) + struct.pack(">I", 0)
HTTP2_FRAME_SETTINGS = 4
KAFKA_API_VERSIONS = 18
PROBE_CORRELATION_ID = 0x5E6106  # arbitrary; echoed only by a Kafka listener
CLIENT_ID = b"seglog-probe"

REFUSED = "refused"  # nothing listens there
UNREACHABLE = "unreachable"  # no route, a timeout, a name that does not resolve
KAFKA = "kafka"  # a Kafka-protocol listener
HTTP2 = "http2"  # a gRPC (HTTP/2) server: maybe seglog
# A listener that speaks neither: a TLS listener, or a proxy in front of a node that
# does not listen yet (docker's published ports): the normal retries apply.
OTHER = "other"


@dataclass(frozen=True, slots=True)
class Probe:
    host: str
    port: int
    outcome: str
    detail: str = ""

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def nothing_listens(self) -> bool:
        return self.outcome in (REFUSED, UNREACHABLE)

    def sentence(self) -> str:
        """What this address is, for an error message."""
        if self.outcome == REFUSED:
            return f"{self.address}: connection refused (nothing listens there)"
        if self.outcome == UNREACHABLE:
            return f"{self.address}: unreachable ({self.detail})"
        if self.outcome == KAFKA:
            return (
                f"{self.address}: this is a Kafka-protocol port (it answered Kafka's "
                "ApiVersions request); seglog's tools and Python clients use a node's gRPC "
                "listener (GRPC:// in its listeners; with 'seglog local up' the Kafka port "
                f"+ 100, here {self.host}:{self.port + 100}), Kafka clients such as kcat "
                "this one"
            )
        return f"{self.address}: something listens there ({self.outcome})"


def api_versions_v0() -> bytes:
    """A Kafka ApiVersions v0 request, size-prefixed (request header v1)."""
    header = struct.pack(">hhih", KAFKA_API_VERSIONS, 0, PROBE_CORRELATION_ID, len(CLIENT_ID))
    body = header + CLIENT_ID
    return struct.pack(">i", len(body)) + body


def is_http2_settings(reply: bytes) -> bool:
    """The reply starts with an HTTP/2 SETTINGS frame on stream 0 (a server's preface)."""
    return (
        len(reply) >= 9
        and reply[3] == HTTP2_FRAME_SETTINGS
        and struct.unpack(">I", reply[5:9])[0] & 0x7FFFFFFF == 0
    )


def is_kafka_reply(reply: bytes) -> bool:
    """A size-prefixed response carrying the probe's correlation id."""
    if len(reply) < 8:
        return False
    size, correlation_id = struct.unpack(">ii", reply[:8])
    return correlation_id == PROBE_CORRELATION_ID and 4 <= size < 1 << 20


def _exchange(host: str, port: int, request: bytes, need: int, timeout_s: float) -> bytes:
    """Connect, send, and read up to `need` bytes until the peer closes or the time is up."""
    deadline = time.monotonic() + timeout_s
    with socket.create_connection((host, port), timeout=timeout_s) as s:
        s.sendall(request)
        reply = b""
        while len(reply) < need:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            s.settimeout(remaining)
            try:
                chunk = s.recv(need - len(reply))
            except (TimeoutError, OSError):
                break
            if not chunk:
                break
            reply += chunk
        return reply


def probe(host: str, port: int, timeout_s: float = 1.0, plaintext: bool = True) -> Probe:
    """What listens at host:port. With TLS (`plaintext=False`) only whether the connection
    is accepted: the protocol inside cannot be told without a handshake."""
    try:
        if not plaintext:
            socket.create_connection((host, port), timeout=timeout_s).close()
            return Probe(host, port, HTTP2)
        if is_http2_settings(_exchange(host, port, HTTP2_PREFACE + HTTP2_SETTINGS, 9, timeout_s)):
            return Probe(host, port, HTTP2)
        if is_kafka_reply(_exchange(host, port, api_versions_v0(), 8, timeout_s)):
            return Probe(host, port, KAFKA)
        return Probe(host, port, OTHER)
    except ConnectionRefusedError:
        return Probe(host, port, REFUSED)
    except TimeoutError:
        return Probe(host, port, UNREACHABLE, f"no answer within {timeout_s:.1f}s")
    except OSError as e:
        return Probe(host, port, UNREACHABLE, e.strerror or str(e))


def unreachable_reason(probes: Sequence[Probe]) -> str | None:
    """None when some address may be a seglog node (a gRPC server answered, or something
    that may stand in front of one); else why none can be, one sentence per address."""
    if not probes or any(p.outcome in (HTTP2, OTHER) for p in probes):
        return None
    if len(probes) == 1:
        return f"cannot reach {probes[0].sentence()}"
    return "cannot reach any bootstrap server: " + "; ".join(p.sentence() for p in probes)


def diagnose(
    addresses: Sequence[tuple[str, int]], timeout_s: float = 1.0, plaintext: bool = True
) -> tuple[str, bool] | None:
    """`unreachable_reason` of probing every address (each within timeout_s), and
    whether nothing listens at any of them (a cluster that may yet start) rather than
    something that is not a seglog node (waiting will not help)."""
    probes = [probe(h, p, timeout_s, plaintext) for h, p in addresses]
    reason = unreachable_reason(probes)
    if reason is None:
        return None
    return reason, all(p.nothing_listens for p in probes)
