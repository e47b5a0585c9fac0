"""Decrypting a memory-buffered TLS connection's records into a bytearray.

The Kafka listener reads a whole `recv` of ciphertext into the connection's incoming
`MemoryBIO` and decrypts every whole record in it here, with one reusable buffer
(docs/perf/tls.md: `SSLSocket` made two `recv` calls per TLS record, and librdkafka
sends about two records per 1 KiB record value).

`ssl.SSLObject.read` lets go of the GIL around each `SSL_read`, one record per call.
Calling `SSL_read` through ctypes with the GIL held was tried (it needs the `SSL *`,
which CPython keeps in a private struct): its gain was within the noise of the shared
machine, and a wrong guess about that layout would crash a node, so it is not done.
"""

from __future__ import annotations

import ssl


class RecordReader:
    """Decrypts what a connection's incoming MemoryBIO holds into a bytearray."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._buf = bytearray(size)
        self._view = memoryview(self._buf)

    def read_into(self, tls: ssl.SSLObject, out: bytearray) -> bool:
        """Append every whole record's plaintext to `out`: False when the peer has
        closed (close_notify); raises `ssl.SSLError` for a bad record or an alert."""
        # Bounded by the ciphertext held: each call consumes a record of it.
        while True:
            try:
                n = tls.read(self.size, self._buf)
            except ssl.SSLWantReadError:
                return True
            except ssl.SSLZeroReturnError:
                return False
            if n == 0:
                return False
            out += self._view[:n]
