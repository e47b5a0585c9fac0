"""Decrypting a memory-buffered TLS connection's records without letting go of the GIL.

`ssl.SSLObject.read` releases the GIL around every `SSL_read`, and `SSL_read` returns
one TLS record at most: a Kafka network thread decrypting a client's stream hands the
GIL to another thread hundreds of times per MiB (librdkafka sends about two records
per 1 KiB record value) and waits up to the switch interval each time to get it back
(docs/perf/tls.md). Over memory BIOs `SSL_read` never blocks, so it is called here
through `ctypes.PyDLL`, which keeps the GIL: a whole `recv` of ciphertext is decrypted
in one hold.

This needs the connection's `SSL *`, which CPython's `_ssl` does not expose: it is
read from the `_ssl._SSLSocket` object, at the place CPython 3.11 to 3.13 keep it, and
used only when checks that read no memory outside the objects confirm it (the
context pointer beside it is the object's context, whose `SSL_CTX *` OpenSSL returns
for it) and `_ssl` uses the very libssl loaded here. Otherwise, or for anything but a
record or "want read", `ssl.SSLObject.read` does the work, as its errors are Python's.
"""

from __future__ import annotations

import ctypes
import ssl
import sys
from pathlib import Path

_WANT_READ = 2  # SSL_ERROR_WANT_READ
_PTR = ctypes.sizeof(ctypes.c_void_p)


def _load_libssl() -> ctypes.PyDLL | None:
    """The libssl `_ssl` is linked with, as already mapped into this process."""
    if sys.implementation.name != "cpython" or not (3, 11) <= sys.version_info[:2] <= (3, 13):
        return None
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    paths = {line.split()[-1] for line in maps.splitlines() if "/libssl.so" in line}
    if len(paths) != 1:
        return None  # _ssl linked statically, or two libssl: not ours to guess
    try:
        lib = ctypes.PyDLL(paths.pop())
        version = lib.OpenSSL_version_num
        version.restype = ctypes.c_ulong
        if version() != ssl.OPENSSL_VERSION_NUMBER:
            return None
        lib.SSL_read.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
        lib.SSL_read.restype = ctypes.c_int
        lib.SSL_get_error.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.SSL_get_error.restype = ctypes.c_int
        lib.SSL_get_SSL_CTX.argtypes = [ctypes.c_void_p]
        lib.SSL_get_SSL_CTX.restype = ctypes.c_void_p
        lib.ERR_clear_error.argtypes = []
        lib.ERR_clear_error.restype = None
    except (OSError, AttributeError):
        return None
    return lib


_LIB = _load_libssl()


def _ssl_pointer(tls: ssl.SSLObject) -> int | None:
    """The connection's `SSL *`, or None when it cannot be confirmed.

    CPython's PySSLSocket: PyObject_HEAD, PyObject *Socket, SSL *ssl, PySSLContext *ctx;
    PySSLContext: PyObject_HEAD, SSL_CTX *ctx."""
    if _LIB is None:
        return None
    sslobj = getattr(tls, "_sslobj", None)
    context = getattr(sslobj, "context", None)
    if sslobj is None or context is None:
        return None
    head = object.__basicsize__  # PyObject_HEAD
    if type(sslobj).__basicsize__ < head + 3 * _PTR or type(context).__basicsize__ < head + _PTR:
        return None
    if ctypes.c_void_p.from_address(id(sslobj) + head + 2 * _PTR).value != id(context):
        return None
    ssl_ptr = ctypes.c_void_p.from_address(id(sslobj) + head + _PTR).value
    ctx_ptr = ctypes.c_void_p.from_address(id(context) + head).value
    if not ssl_ptr or not ctx_ptr or _LIB.SSL_get_SSL_CTX(ssl_ptr) != ctx_ptr:
        return None
    return ssl_ptr


class RecordReader:
    """Decrypts what a connection's incoming MemoryBIO holds into a bytearray."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._buf = bytearray(size)
        self._view = memoryview(self._buf)
        self._cbuf = (ctypes.c_char * size).from_buffer(self._buf)  # holds it unresized
        self._addr = ctypes.addressof(self._cbuf)

    def pointer(self, tls: ssl.SSLObject) -> int | None:
        """What `read_into` takes for this connection (None: the `ssl` module's way)."""
        return _ssl_pointer(tls)

    def read_into(self, tls: ssl.SSLObject, ssl_ptr: int | None, out: bytearray) -> bool:
        """Append every whole record's plaintext to `out`: False when the peer has
        closed (close_notify); raises `ssl.SSLError` for a bad record or an alert."""
        if ssl_ptr is not None and _LIB is not None:
            read, view, addr, size = _LIB.SSL_read, self._view, self._addr, self.size
            _LIB.ERR_clear_error()  # SSL_get_error reads this thread's error queue
            # Bounded by the ciphertext held: each call consumes a record of it.
            while (n := read(ssl_ptr, addr, size)) > 0:
                out += view[:n]
            if _LIB.SSL_get_error(ssl_ptr, n) == _WANT_READ:
                return True
            # Anything else (close_notify, an alert, a bad record): Python's own read
            # gives it again, as its result or its exception.
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
