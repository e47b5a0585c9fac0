"""TCP proxies that hold what one node sends another by the rules in force: the core
loop (`ProxyLoop`), shared by the local target's per-link proxies (`LinkProxies`, here)
and the compose target's transparent proxies in each node's network namespace
(chaos/delay_proxy.py), so both targets delay bytes the same way.

Local target: one proxy per link. Each node's server.properties names, for every other
node, a proxy port instead of that node's own: `controller.quorum.voters` for Raft and
controller RPCs, and `seglog.inter.broker.address.overrides` for follower fetches
(node/config.py). A proxy listens for one (src, dst, kind) and forwards to dst's real
port.

What a proxy does to the bytes each way is read from the current `NetworkFaults`
(chaos/link_faults.py) on every pass, so a rule takes effect on open connections at
once:

* drop — bytes are held, not passed on, and a new connection is not opened upstream,
  as a firewall DROP: the sender sees a stalled connection, not a reset, until its own
  timeouts give up on it or the rule is lifted and the held bytes flow;
* delay ± jitter — each read waits its hold time, in order.

All connections are served by one thread with a selector; upstream connections are
opened without blocking it (a peer that does not answer stalls only its own
connection). Buffers are bounded (`MAX_HELD_BYTES` per direction): past it the proxy
stops reading that side and TCP's own flow control pushes back on the sender.
"""

from __future__ import annotations

import contextlib
import errno
import random
import selectors
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from .link_faults import KINDS, NetworkFaults, healthy

MAX_HELD_BYTES = 4 << 20
READ_BYTES = 64 << 10
MAX_CONNECTIONS = 512  # per proxy set; node-to-node channels are a handful per link
TICK_S = 0.005  # how late a delayed chunk may leave, at most
CONNECT_TIMEOUT_S = 2.0

Link = tuple[int, int, str]
Address = tuple[str, int]
# What an accepted connection is: its link and where to forward it, or None to refuse it.
Route = Callable[[socket.socket], tuple[Link, Address] | None]


@dataclass
class _Flow:
    """Bytes one side of a connection sent, waiting to go to the other side."""

    src: int  # the node whose bytes these are
    dst: int
    chunks: deque[tuple[float, bytes]] = field(default_factory=deque)
    held: int = 0
    last_due: float = 0.0
    eof: bool = False  # the sending side closed its half: pass the close on once drained

    def add(self, data: bytes, due: float) -> float:
        """Queue `data` to leave at `due` or later; when it will leave."""
        due = max(due, self.last_due)  # TCP keeps the order whatever the jitter
        self.last_due = due
        self.chunks.append((due, data))
        self.held += len(data)
        assert self.held <= MAX_HELD_BYTES + READ_BYTES, "a flow outgrew its bound"
        return due


@dataclass
class _Connection:
    link: Link
    down: socket.socket  # accepted from link src
    upstream: Address  # where link dst listens
    outbound: _Flow  # src -> dst
    inbound: _Flow  # dst -> src
    up: socket.socket | None = None  # to link dst, opened once the src->dst direction passes
    connect_deadline: float | None = None  # set while the connect to `upstream` is under way
    closed: bool = False


@dataclass
class Counts:
    """What the proxies did, for the report: additive, so deltas and sums make sense."""

    forwarded_bytes: int = 0  # passed on, both directions
    delayed_bytes: int = 0  # read while a delay held their direction
    delayed_reads: int = 0
    held_ms: float = 0.0  # the delayed reads' hold times, summed

    def minus(self, other: Counts) -> Counts:
        return Counts(
            self.forwarded_bytes - other.forwarded_bytes,
            self.delayed_bytes - other.delayed_bytes,
            self.delayed_reads - other.delayed_reads,
            self.held_ms - other.held_ms,
        )


class ProxyLoop:
    """Connections accepted on listeners (`listen`), each forwarded to the address its
    route names, every direction held by the rules in force (`set_faults`)."""

    def __init__(
        self,
        rng: random.Random,
        clock: Callable[[], float] = time.monotonic,
        upstream_socket: Callable[[], socket.socket] | None = None,
    ) -> None:
        self._rng = rng
        self._clock = clock
        self._upstream_socket = upstream_socket or (
            lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        )
        self._faults = healthy()
        self._selector = selectors.DefaultSelector()
        self._listeners: list[socket.socket] = []
        self._connections: list[_Connection] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.refused = 0  # connections dropped because MAX_CONNECTIONS were open
        self._forwarded: dict[Link, int] = {}  # bytes passed on per link, both ways
        self._counts = Counts()

    def listen(self, sock: socket.socket, route: Route) -> None:
        """Serve connections accepted on the listening `sock` (call before start)."""
        sock.setblocking(False)
        self._listeners.append(sock)
        self._selector.register(sock, selectors.EVENT_READ, route)

    def set_faults(self, faults: NetworkFaults) -> None:
        for (src, dst, kind), f in faults.rules.items():
            if f.packet_level:
                raise ValueError(
                    f"{src}->{dst} {kind}: packet loss, duplication and reordering need "
                    "packets (the compose target's iptables and netem); a TCP proxy passes "
                    "a byte stream"
                )
        self._faults = faults  # one reference swap: the loop reads it once per pass

    @property
    def faults(self) -> NetworkFaults:
        return self._faults

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="link-proxies", daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        for c in self._connections:
            self._close(c)
        for s in self._listeners:
            s.close()
        self._selector.close()

    def forwarded(self) -> dict[Link, int]:
        """Bytes passed on per link (both directions) since the start, for the report."""
        return dict(self._forwarded)

    def counts(self) -> Counts:
        """Totals since the start (a copy: the loop goes on counting)."""
        c = self._counts
        return Counts(c.forwarded_bytes, c.delayed_bytes, c.delayed_reads, c.held_ms)

    def open_connections(self) -> int:
        return len(self._connections)

    # --- the loop ------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            faults = self._faults
            now = self._clock()
            for c in list(self._connections):
                self._pump(c, faults, now)
            self._connections = [c for c in self._connections if not c.closed]
            self._register()
            timeout = TICK_S if any(self._waiting(c) for c in self._connections) else 0.05
            for key, _events in self._selector.select(timeout):
                if isinstance(key.data, _Connection):
                    # The rules now, not at the pass's start: a read that waited in select
                    # across a set_faults is held by the new rules.
                    self._ready(key.data, key.fileobj, self._faults)  # type: ignore[arg-type]
                else:
                    self._accept(key.fileobj, key.data)  # type: ignore[arg-type]

    def _waiting(self, c: _Connection) -> bool:
        return bool(c.outbound.chunks or c.inbound.chunks or c.up is None)

    def _register(self) -> None:
        """Read interest only where the flow a socket feeds has room."""
        for c in self._connections:
            pairs = [(c.down, c.outbound), (c.up, c.inbound)]
            for sock, flow in pairs:
                if sock is None or (sock is c.up and c.connect_deadline is not None):
                    continue  # a connect under way waits for writability instead
                want = flow.held < MAX_HELD_BYTES and not flow.eof
                registered = sock in self._selector.get_map()
                if want and not registered:
                    self._selector.register(sock, selectors.EVENT_READ, c)
                elif not want and registered:
                    self._selector.unregister(sock)

    def _accept(self, listener: socket.socket, route: Route) -> None:
        try:
            down, _ = listener.accept()
        except OSError:
            return
        if len(self._connections) >= MAX_CONNECTIONS:
            self.refused += 1
            down.close()
            return
        try:
            where = route(down)
        except OSError:
            where = None
        if where is None:
            down.close()
            return
        link, upstream = where
        down.setblocking(False)
        src, dst, _ = link
        self._connections.append(
            _Connection(link, down, upstream, _Flow(src, dst), _Flow(dst, src))
        )

    def _connect_upstream(self, c: _Connection, now: float) -> None:
        """Start a connect to link dst without waiting for it (`_ready` finishes it)."""
        try:
            up = self._upstream_socket()
        except OSError:
            self._close(c)
            return
        up.setblocking(False)
        err = up.connect_ex(c.upstream)
        if err not in (0, errno.EINPROGRESS):
            up.close()
            self._close(c)  # dst is down: its port refuses, as without the proxy
            return
        c.up = up
        c.connect_deadline = now + CONNECT_TIMEOUT_S
        self._selector.register(up, selectors.EVENT_WRITE, c)

    def _ready(self, c: _Connection, sock: socket.socket, faults: NetworkFaults) -> None:
        if c.closed:
            return
        if sock is c.up and c.connect_deadline is not None:
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(sock)
            if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                self._close(c)  # refused or unreachable, as without the proxy
                return
            c.connect_deadline = None
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            return
        self._read(c, sock, faults)

    def _read(self, c: _Connection, sock: socket.socket, faults: NetworkFaults) -> None:
        flow = c.outbound if sock is c.down else c.inbound
        try:
            data = sock.recv(READ_BYTES)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            flow.eof = True
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(sock)
            return
        now = self._clock()
        hold = faults.fault(flow.src, flow.dst, c.link[2]).hold_s(self._rng)
        due = flow.add(data, now + hold)
        if hold > 0:
            self._counts.delayed_bytes += len(data)
            self._counts.delayed_reads += 1
            self._counts.held_ms += (due - now) * 1000.0

    def _pump(self, c: _Connection, faults: NetworkFaults, now: float) -> None:
        """Pass on what is due in each direction the rules let through."""
        kind = c.link[2]
        if c.up is None:
            if faults.fault(c.link[0], c.link[1], kind).drop:
                return  # a dropped SYN: src waits
            self._connect_upstream(c, now)
            return
        if c.connect_deadline is not None:
            if now > c.connect_deadline:
                self._close(c)  # no answer from dst: src sees its connection end
            return
        for flow, out in ((c.outbound, c.up), (c.inbound, c.down)):
            if faults.fault(flow.src, flow.dst, kind).drop:
                continue
            while flow.chunks and flow.chunks[0][0] <= now:
                due, data = flow.chunks[0]
                try:
                    sent = out.send(data)
                except BlockingIOError:
                    break
                except OSError:
                    self._close(c)
                    return
                self._forwarded[c.link] = self._forwarded.get(c.link, 0) + sent
                self._counts.forwarded_bytes += sent
                flow.held -= sent
                if sent < len(data):
                    flow.chunks[0] = (due, data[sent:])
                    break
                flow.chunks.popleft()
            if flow.eof and not flow.chunks:
                self._close(c)  # one side is gone and all it sent was delivered
                return

    def _close(self, c: _Connection) -> None:
        if c.closed:
            return
        c.closed = True
        for sock in (c.down, c.up):
            if sock is None:
                continue
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(sock)
            sock.close()


class LinkProxies(ProxyLoop):
    """Listening sockets for every (src, dst, kind) of `targets` and the thread that
    serves them. `targets[(node, kind)]` is the node's real port for that kind."""

    def __init__(
        self,
        targets: dict[tuple[int, str], int],
        rng: random.Random,
        clock: Callable[[], float] = time.monotonic,
        host: str = "127.0.0.1",
    ) -> None:
        super().__init__(rng, clock)
        self._ports: dict[Link, int] = {}
        nodes = sorted({n for n, _ in targets})
        for src in nodes:
            for dst in nodes:
                for kind in KINDS:
                    if src != dst and (dst, kind) in targets:
                        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                        s.bind((host, 0))
                        s.listen(64)
                        link = (src, dst, kind)
                        self._ports[link] = int(s.getsockname()[1])
                        self.listen(s, _fixed_route(link, (host, targets[(dst, kind)])))

    def port(self, src: int, dst: int, kind: str) -> int:
        """Where `src` dials `dst` for `kind`."""
        return self._ports[(src, dst, kind)]


def _fixed_route(link: Link, upstream: Address) -> Route:
    return lambda _sock: (link, upstream)
