"""The compose target's delay proxy (chaos/delay_proxy.py): where a redirected connection
was headed, read from SO_ORIGINAL_DST's sockaddr; the link it names (this node to the
node at that address, the kind by port); bytes passed untouched while no rule holds and
each direction held by its own rule, on connections already open; the harness's line
protocol. As root, the real thing in a throw-away network namespace: the iptables
redirect of chaos/netfilter.py puts the proxy in the path and resets a connection
opened before it."""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from seglog.chaos.delay_proxy import (
    NamespaceProxy,
    TransparentProxy,
    parse_original_dst,
    rules_from_json,
    rules_to_json,
    serve,
)
from seglog.chaos.link_faults import LinkFault, NetworkFaults, delay, healthy


class DoublingServer:
    """Answers each read with the bytes twice, so a count of bytes tells the request
    (n) from the answer (2n)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.sock.getsockname()[1])
        self.sock.settimeout(0.2)
        self._stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data * 2)

    def close(self) -> None:
        self._stop.set()
        self.sock.close()


# Node 2 "at" 127.0.0.1; the server's port is its replication port.
NODE2 = "127.0.0.1"


@pytest.fixture
def server() -> Iterator[DoublingServer]:
    s = DoublingServer()
    yield s
    s.close()


@pytest.fixture
def proxy(server: DoublingServer) -> Iterator[TransparentProxy]:
    """Node 1's proxy; every connection "was headed" for node 2's replication port."""
    p = TransparentProxy(
        1,
        random.Random(1),
        original=lambda _sock: (NODE2, server.port),
        mark=None,
        kinds={server.port: "replication"},
    )
    p.set_peers({1: "10.0.0.1", 2: NODE2})
    p.start()
    yield p
    p.close()


def _sockaddr_in(ip: str, port: int) -> bytes:
    return (
        struct.pack("=H", socket.AF_INET)
        + struct.pack("!H", port)
        + socket.inet_aton(ip)
        + bytes(8)
    )


def test_the_original_destination_is_read_from_a_sockaddr_in() -> None:
    assert parse_original_dst(_sockaddr_in("172.30.0.3", 9392)) == ("172.30.0.3", 9392)
    # What the kernel returned for a REDIRECTed connection to 10.9.9.9:9292.
    raw = bytes.fromhex("0200244c0a0909090000000000000000")
    assert parse_original_dst(raw) == ("10.9.9.9", 9292)
    with pytest.raises(ValueError, match="AF_INET"):
        parse_original_dst(struct.pack("=H", socket.AF_INET6) + bytes(14))


def test_a_connection_is_routed_by_address_and_port() -> None:
    p = TransparentProxy(1, random.Random(1), original=lambda s: ("172.30.0.3", 9392), mark=None)
    try:
        p.set_peers({1: "172.30.0.2", 2: "172.30.0.3", 3: "172.30.0.4"})
        sock = socket.socket()
        assert p.route(sock) == ((1, 2, "replication"), ("172.30.0.3", 9392))
        p._original = lambda s: ("172.30.0.4", 9292)
        assert p.route(sock) == ((1, 3, "controller"), ("172.30.0.4", 9292))
        # an address no node has (now): a link no rule names, passed untouched
        p._original = lambda s: ("172.30.0.9", 9292)
        assert p.route(sock) == ((1, 0, "controller"), ("172.30.0.9", 9292))
        # a connection made to the proxy itself would loop: refused
        p._original = lambda s: ("127.0.0.1", p.port)
        assert p.route(sock) is None
        sock.close()
    finally:
        p.close()


def test_rules_cross_the_pipe_unchanged() -> None:
    slow = delay([1, 2, 3], 250.0, 125.0)
    assert rules_from_json(json.loads(json.dumps(rules_to_json(slow)))) == slow
    assert rules_to_json(healthy()) == []


def _ask(conn: socket.socket, data: bytes) -> tuple[bytes, float]:
    start = time.monotonic()
    conn.sendall(data)
    got = b""
    while len(got) < 2 * len(data):
        got += conn.recv(65536)
    return got, time.monotonic() - start


def _forwarded(proxy: TransparentProxy, n: int) -> bool:
    """Whether `n` bytes were counted: the proxy counts a send after the client may have
    read it, so wait a little."""
    deadline = time.monotonic() + 5
    while proxy.counts().forwarded_bytes < n and time.monotonic() < deadline:
        time.sleep(0.01)
    return proxy.counts().forwarded_bytes == n


def test_without_a_rule_bytes_pass_untouched(proxy: TransparentProxy) -> None:
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as c:
        got, _ = _ask(c, b"hello")
        assert got == b"hellohello"
    assert _forwarded(proxy, 15) and proxy.counts().delayed_bytes == 0


@pytest.mark.parametrize(
    ("rule", "held"),
    [((1, 2, "replication"), 4), ((2, 1, "replication"), 8)],
    ids=["what node 1 sends", "what node 2 answers"],
)
def test_a_rule_holds_its_direction_on_an_open_connection(
    proxy: TransparentProxy, rule: tuple[int, int, str], held: int
) -> None:
    """The connection is open before the rule, as the nodes' are: it takes effect at
    once, on the direction it names (the request is 4 bytes, the answer 8)."""
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as c:
        _, fast_s = _ask(c, b"warm")
        proxy.set_faults(NetworkFaults({rule: LinkFault(delay_ms=300.0)}))
        got, slow_s = _ask(c, b"ping")
        assert got == b"pingping" and slow_s >= 0.3 > fast_s
        proxy.set_faults(healthy())
        assert _ask(c, b"done")[1] < 0.3
    counts = proxy.counts()
    assert counts.delayed_bytes == held and counts.delayed_reads == 1
    assert counts.held_ms >= 299.0


def test_the_line_protocol_sets_rules_and_counts_since(proxy: TransparentProxy) -> None:
    slow = NetworkFaults({(1, 2, "replication"): LinkFault(delay_ms=50.0, jitter_ms=10.0)})
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=5) as c:
        _ask(c, b"before")  # before the set: not counted in the stats
        assert _forwarded(proxy, 18)

        def lines() -> Iterator[str]:
            yield json.dumps({"op": "set", "ips": {"2": NODE2}, "rules": rules_to_json(slow)})
            yield json.dumps({"op": "set", "ips": {}, "rules": [[1, 2, "replication", 5, 9]]})
            yield json.dumps({"op": "bogus"})
            _ask(c, b"after")  # under the rules set
            assert _forwarded(proxy, 18 + 15)
            yield json.dumps({"op": "stats"})

        out = io.StringIO()
        serve(proxy, lines(), out)
    ok, bad_rule, bogus, stats = (json.loads(line) for line in out.getvalue().splitlines())
    assert ok == {"ok": True} and proxy.faults == slow  # the bad rule set changed nothing
    assert "jitter_ms" in bad_rule["error"] and "bogus" in bogus["error"]
    assert stats["forwarded_bytes"] == 5 + 10 and stats["delayed_bytes"] == 5
    assert stats["delayed_reads"] == 1 and stats["connections"] == 1


# --- in a throw-away network namespace (root) ---------------------------------------------

_TOOLS = all(shutil.which(t) for t in ("unshare", "nsenter", "iptables", "ip"))
_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def _namespaces() -> str | None:
    if not (_ROOT and _TOOLS):
        return "needs root, unshare, nsenter, iptables and ip"
    r = subprocess.run(["unshare", "-n", "true"], capture_output=True, timeout=30)
    return None if r.returncode == 0 else f"unshare -n fails: {r.stderr.decode()[:200]}"


_NO_NS = _namespaces()

# Node 1 at 10.9.0.1 and node 2 at 10.9.0.2 on one namespace's loopback: node 2's
# replication port answers each read doubled.
_IN_NAMESPACE = """
import json, random, socket, subprocess, threading, time
from seglog.chaos import netfilter
from seglog.chaos.delay_proxy import TransparentProxy
from seglog.chaos.link_faults import LinkFault, NetworkFaults

def sh(argv):
    subprocess.run(argv, check=True, capture_output=True)

IPS = {1: "10.9.0.1", 2: "10.9.0.2"}
sh(["ip", "link", "set", "lo", "up"])
for ip in IPS.values():
    sh(["ip", "addr", "add", ip + "/32", "dev", "lo"])
server = socket.create_server((IPS[2], 9392))

def answer(conn):
    while data := conn.recv(65536):
        conn.sendall(data * 2)

def accept():
    while True:
        threading.Thread(target=answer, args=(server.accept()[0],), daemon=True).start()

threading.Thread(target=accept, daemon=True).start()

def dial():
    return socket.create_connection((IPS[2], 9392), timeout=5, source_address=(IPS[1], 0))

def ask(conn, data):
    start = time.monotonic()
    conn.sendall(data)
    got = b""
    while len(got) < 2 * len(data):
        got += conn.recv(65536)
    return got.decode(), time.monotonic() - start

out = {}
before = dial()  # opened before the redirect: reset at its next packet
out["before"] = ask(before, b"a")[0]
proxy = TransparentProxy(1, random.Random(1))
proxy.set_peers(IPS)
proxy.start()
for table in ("nat", "filter"):
    create, check = netfilter.iptables_setup(table, netfilter.PROXY_CHAIN)
    sh(create)
    sh(netfilter.iptables_jump(table, netfilter.PROXY_CHAIN))
for argv in netfilter.redirect_rules(1, IPS, proxy.port):
    sh(argv)
try:
    out["before_after"] = ask(before, b"b")[0]
except OSError as e:
    out["before_after"] = type(e).__name__
after = dial()
out["after"] = ask(after, b"hi")[0]
proxy.set_faults(NetworkFaults({(2, 1, "replication"): LinkFault(delay_ms=300.0)}))
out["slow"], out["slow_s"] = ask(after, b"yo")
deadline = time.monotonic() + 5  # a send is counted after the client may read it
while proxy.counts().forwarded_bytes < 12 and time.monotonic() < deadline:
    time.sleep(0.01)
counts = proxy.counts()
out["forwarded"], out["delayed"] = counts.forwarded_bytes, counts.delayed_bytes
print(json.dumps(out))
"""


@pytest.mark.skipif(_NO_NS is not None, reason=f"{_NO_NS}")
@pytest.mark.timeout(120)
def test_the_redirect_puts_the_proxy_in_the_path_of_node_connections() -> None:
    r = subprocess.run(
        ["unshare", "-n", sys.executable, "-c", _IN_NAMESPACE],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["before"] == "aa"
    assert out["before_after"] == "ConnectionResetError"  # bypassed the proxy: reset
    assert out["after"] == "hihi"  # through the proxy, to where it was headed
    assert out["slow"] == "yoyo" and out["slow_s"] >= 0.3  # node 2's answer held
    assert out["forwarded"] == 2 + 4 + 2 + 4 and out["delayed"] == 4


@pytest.mark.skipif(_NO_NS is not None, reason=f"{_NO_NS}")
@pytest.mark.timeout(120)
def test_the_harness_drives_a_proxy_entered_into_a_namespace(tmp_path: Path) -> None:
    holder = subprocess.Popen(["unshare", "-n", "sleep", "100"])
    try:
        time.sleep(0.2)  # unshare has made the namespace and become sleep
        proxy = NamespaceProxy(1, holder.pid, 7, tmp_path / "proxy.log")
        assert proxy.port > 0 and proxy.alive()
        proxy.set(delay([1, 2], 20.0, 10.0), {1: "10.9.0.1", 2: "10.9.0.2"})
        stats = proxy.stats()
        assert stats["forwarded_bytes"] == 0 and stats["connections"] == 0
        with pytest.raises(RuntimeError, match="jitter_ms"):  # its error, as the harness's
            proxy._request({"op": "set", "ips": {}, "rules": [[1, 2, "controller", 5.0, 9.0]]})
        proxy.close()
        assert not proxy.alive()
    finally:
        holder.kill()
        holder.wait()
