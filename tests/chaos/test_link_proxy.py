"""The local target's link proxies (chaos/link_proxy.py) over real sockets, and the
rules they apply (chaos/link_faults.py): a dropped direction holds bytes and a new
connection until healed, a one-way drop passes the other direction, a delay holds
each read for its time, and the rule builders name the directions Jepsen's
partitions cut."""

from __future__ import annotations

import random
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from seglog.chaos.link_faults import (
    LinkFault,
    NetworkFaults,
    bridge,
    delay,
    healthy,
    one_way,
    partition,
)
from seglog.chaos.link_proxy import LinkProxies


class EchoServer:
    """Answers each line with the same line, uppercased."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self._stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    def _echo(self, conn: socket.socket) -> None:
        with conn:
            while True:
                data = conn.recv(65536)
                if not data:
                    return
                conn.sendall(data.upper())

    def close(self) -> None:
        self._stop.set()
        self.sock.close()


@pytest.fixture
def proxies() -> Iterator[LinkProxies]:
    servers = {n: EchoServer() for n in (1, 2)}
    p = LinkProxies({(n, "replication"): s.port for n, s in servers.items()}, random.Random(1))
    p.start()
    yield p
    p.close()
    for s in servers.values():
        s.close()


def _ask(conn: socket.socket, text: bytes, timeout_s: float) -> bytes | None:
    conn.settimeout(timeout_s)
    conn.sendall(text)
    try:
        return conn.recv(65536)
    except TimeoutError:
        return None


def test_a_healthy_link_passes_bytes_both_ways(proxies: LinkProxies) -> None:
    with socket.create_connection(("127.0.0.1", proxies.port(1, 2, "replication"))) as c:
        assert _ask(c, b"hello", 5) == b"HELLO"
    deadline = time.monotonic() + 5  # counted just after the send the client saw
    while proxies.forwarded().get((1, 2, "replication"), 0) < 10 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proxies.forwarded()[(1, 2, "replication")] == 10


def test_a_dropped_link_holds_bytes_until_healed(proxies: LinkProxies) -> None:
    with socket.create_connection(("127.0.0.1", proxies.port(1, 2, "replication"))) as c:
        assert _ask(c, b"one", 5) == b"ONE"
        proxies.set_faults(partition([[1], [2]]))
        assert _ask(c, b"two", 0.5) is None  # held, not reset
        proxies.set_faults(healthy())
        c.settimeout(5)
        assert c.recv(65536) == b"TWO"  # the held bytes flow once healed


def test_a_new_connection_on_a_dropped_link_waits(proxies: LinkProxies) -> None:
    proxies.set_faults(partition([[1], [2]]))
    with socket.create_connection(("127.0.0.1", proxies.port(2, 1, "replication"))) as c:
        assert _ask(c, b"x", 0.5) is None
        proxies.set_faults(healthy())
        c.settimeout(5)
        assert c.recv(65536) == b"X"


def test_one_way_drop_loses_only_the_answers(proxies: LinkProxies) -> None:
    """2 -> 1 dropped: 1's request reaches 2 (and is answered there), but the answer,
    bytes 2 sends 1, is held."""
    proxies.set_faults(one_way(2, 1))
    with socket.create_connection(("127.0.0.1", proxies.port(1, 2, "replication"))) as c:
        assert _ask(c, b"ping", 0.5) is None
        assert proxies.forwarded().get((1, 2, "replication")) == 4  # the request went
        proxies.set_faults(healthy())
        c.settimeout(5)
        assert c.recv(65536) == b"PING"


def test_a_delay_holds_each_read(proxies: LinkProxies) -> None:
    proxies.set_faults(NetworkFaults({(1, 2, "replication"): LinkFault(delay_ms=300.0)}))
    with socket.create_connection(("127.0.0.1", proxies.port(1, 2, "replication"))) as c:
        start = time.monotonic()
        assert _ask(c, b"slow", 5) == b"SLOW"
        assert time.monotonic() - start >= 0.3


def test_rules_name_the_directions_of_jepsen_partitions() -> None:
    p = partition([[1], [2, 3]])
    assert sorted((s, d) for s, d, k in p.rules if k == "controller") == [
        (1, 2),
        (1, 3),
        (2, 1),
        (3, 1),
    ]
    b = bridge(1, 2, 3, kinds=("replication",))
    assert set(b.rules) == {(1, 3, "replication"), (3, 1, "replication")}
    assert b.fault(1, 2, "replication") == LinkFault()
    assert set(one_way(1, 2).rules) == {(1, 2, "controller"), (1, 2, "replication")}
    d = delay([1, 2], 50.0, 10.0)
    assert all(f.delay_ms == 50.0 and not f.drop for f in d.rules.values())
    assert len(d.rules) == 4


def test_bad_rules_are_refused_naming_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="jitter_ms"):
        LinkFault(delay_ms=10.0, jitter_ms=20.0)
    with pytest.raises(ValueError, match="disjoint"):
        partition([[1, 2], [2, 3]])
    with pytest.raises(ValueError, match="kind"):
        NetworkFaults({(1, 2, "gossip"): LinkFault(drop=True)})
    with pytest.raises(ValueError, match="two nodes"):
        NetworkFaults({(1, 1, "controller"): LinkFault(drop=True)})


def test_the_proxy_refuses_packet_level_faults(proxies: LinkProxies) -> None:
    with pytest.raises(ValueError, match="packet loss"):
        proxies.set_faults(delay([1, 2], 10.0, 0.0, loss_pct=5.0))
    with pytest.raises(ValueError, match="reorder_pct needs a delay_ms"):
        LinkFault(reorder_pct=5.0)
