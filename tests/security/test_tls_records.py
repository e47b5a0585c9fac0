"""Decrypting a memory-buffered TLS connection (node/security/tls_records.py), with two
real `ssl.SSLObject`s over memory BIOs: the records a client wrote come out whole and
in order, fed in any pieces; a close_notify ends the stream and a tampered record is an
`ssl.SSLError`, as on a socket."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from seglog.node.security.certificates import CertificateAuthority
from seglog.node.security.tls_records import RecordReader


def _pair(tmp_path: Path) -> tuple[ssl.SSLObject, ssl.SSLObject, ssl.MemoryBIO, ssl.MemoryBIO]:
    """(server, client, server's incoming BIO, client's outgoing BIO), handshaken."""
    ca = CertificateAuthority()
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(ca.issue("node", ["127.0.0.1"]).write(tmp_path / "node.pem"))
    client_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    client_ctx.load_verify_locations(ca.write(tmp_path / "ca.pem"))
    s_in, s_out, c_in, c_out = (ssl.MemoryBIO() for _ in range(4))
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname="127.0.0.1")
    for _ in range(10):  # a handshake is a few flights
        for side in (client, server):
            try:
                side.do_handshake()
            except ssl.SSLWantReadError:
                pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
    server.do_handshake()
    return server, client, s_in, c_out


def _records(client: ssl.SSLObject) -> bytes:
    """As librdkafka writes: a TLS record per buffer segment, a few bytes then 1 KiB."""
    sent = b""
    for i in range(300):
        for part in (i.to_bytes(4, "big") + b"hdr", bytes([i % 251]) * 1024):
            client.write(part)
            sent += part
    return sent


def test_every_record_comes_out_in_order_until_close_notify(tmp_path):
    server, client, s_in, c_out = _pair(tmp_path)
    reader = RecordReader(64 * 1024)
    sent = _records(client)
    ciphertext = c_out.read()
    out = bytearray()
    # Fed in odd pieces: a record cut anywhere waits for its rest.
    for start in range(0, len(ciphertext), 7001):
        s_in.write(ciphertext[start : start + 7001])
        assert reader.read_into(server, out)
    assert bytes(out) == sent
    with pytest.raises(ssl.SSLWantReadError):
        client.unwrap()  # sends close_notify, then wants the server's
    s_in.write(c_out.read())
    assert not reader.read_into(server, out)


def test_a_tampered_record_is_an_ssl_error(tmp_path):
    server, client, s_in, c_out = _pair(tmp_path)
    reader = RecordReader(64 * 1024)
    client.write(b"x" * 2000)
    ciphertext = bytearray(c_out.read())
    ciphertext[-20] ^= 1  # inside the record's encrypted body
    s_in.write(bytes(ciphertext))
    with pytest.raises(ssl.SSLError):
        reader.read_into(server, bytearray())
