"""One TCP proxy per link of a local cluster, so the chaos harness can cut, delay or
one-way-drop what one node sends another while clients still reach every node.

Each node's server.properties names, for every other node, a proxy port instead of
that node's own: `controller.quorum.voters` for Raft and controller RPCs, and
`seglog.inter.broker.address.overrides` for follower fetches (node/config.py). A proxy
listens for one (src, dst, kind) and forwards to dst's real port. What it does to the
bytes each way is read from the current `NetworkFaults` (chaos/link_faults.py) on
every pass, so a rule takes effect on open connections at once:

* drop — bytes are held, not passed on, and a new connection is not opened upstream,
  as a firewall DROP: the sender sees a stalled connection, not a reset, until its own
  timeouts give up on it or the rule is lifted and the held bytes flow;
* delay ± jitter — each read waits its hold time, in order.

All connections are served by one thread with a selector. Buffers are bounded
(`MAX_HELD_BYTES` per direction): past it the proxy stops reading that side and TCP's
own flow control pushes back on the sender.
"""

from __future__ import annotations

import contextlib
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


@dataclass
class _Flow:
    """Bytes one side of a connection sent, waiting to go to the other side."""

    src: int  # the node whose bytes these are
    dst: int
    chunks: deque[tuple[float, bytes]] = field(default_factory=deque)
    held: int = 0
    last_due: float = 0.0
    eof: bool = False  # the sending side closed its half: pass the close on once drained

    def add(self, data: bytes, due: float) -> None:
        due = max(due, self.last_due)  # TCP keeps the order whatever the jitter
        self.last_due = due
        self.chunks.append((due, data))
        self.held += len(data)
        assert self.held <= MAX_HELD_BYTES + READ_BYTES, "a flow outgrew its bound"


@dataclass
class _Connection:
    link: Link
    down: socket.socket  # accepted from link src
    up: socket.socket | None  # to link dst, opened once the src->dst direction passes
    outbound: _Flow  # src -> dst
    inbound: _Flow  # dst -> src
    closed: bool = False


class LinkProxies:
    """Listening sockets for every (src, dst, kind) of `targets` and the thread that
    serves them. `targets[(node, kind)]` is the node's real port for that kind."""

    def __init__(
        self,
        targets: dict[tuple[int, str], int],
        rng: random.Random,
        clock: Callable[[], float] = time.monotonic,
        host: str = "127.0.0.1",
    ) -> None:
        self._targets = dict(targets)
        self._rng = rng
        self._clock = clock
        self._host = host
        self._faults = healthy()
        self._selector = selectors.DefaultSelector()
        self._listeners: dict[Link, socket.socket] = {}
        self._connections: list[_Connection] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.refused = 0  # connections dropped because MAX_CONNECTIONS were open
        self._forwarded: dict[Link, int] = {}  # bytes passed on per link, both ways
        nodes = sorted({n for n, _ in targets})
        for src in nodes:
            for dst in nodes:
                for kind in KINDS:
                    if src != dst and (dst, kind) in targets:
                        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                        s.bind((host, 0))
                        s.listen(64)
                        s.setblocking(False)
                        self._listeners[(src, dst, kind)] = s
                        self._selector.register(s, selectors.EVENT_READ, (src, dst, kind))

    def port(self, src: int, dst: int, kind: str) -> int:
        """Where `src` dials `dst` for `kind`."""
        return int(self._listeners[(src, dst, kind)].getsockname()[1])

    def set_faults(self, faults: NetworkFaults) -> None:
        for (src, dst, kind), f in faults.rules.items():
            if f.packet_level:
                raise ValueError(
                    f"{src}->{dst} {kind}: packet loss, duplication and reordering need "
                    "packets (the compose target's netem); a TCP proxy passes a byte stream"
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
        for s in self._listeners.values():
            s.close()
        self._selector.close()

    def forwarded(self) -> dict[Link, int]:
        """Bytes passed on per link (both directions) since the start, for the report."""
        return dict(self._forwarded)

    # --- the loop ------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            faults = self._faults
            now = self._clock()
            for c in list(self._connections):
                self._pump(c, faults, now)
            self._connections = [c for c in self._connections if not c.closed]
            self._register(faults)
            timeout = TICK_S if any(self._waiting(c) for c in self._connections) else 0.05
            for key, _events in self._selector.select(timeout):
                if isinstance(key.data, tuple):
                    self._accept(key.fileobj, key.data)  # type: ignore[arg-type]
                else:
                    self._read(key.data, key.fileobj, faults)  # type: ignore[arg-type]

    def _waiting(self, c: _Connection) -> bool:
        return bool(c.outbound.chunks or c.inbound.chunks or c.up is None)

    def _register(self, faults: NetworkFaults) -> None:
        """Read interest only where the flow a socket feeds has room."""
        for c in self._connections:
            pairs = [(c.down, c.outbound), (c.up, c.inbound)]
            for sock, flow in pairs:
                if sock is None:
                    continue
                want = flow.held < MAX_HELD_BYTES and not flow.eof
                registered = sock in self._selector.get_map()
                if want and not registered:
                    self._selector.register(sock, selectors.EVENT_READ, c)
                elif not want and registered:
                    self._selector.unregister(sock)

    def _accept(self, listener: socket.socket, link: Link) -> None:
        try:
            down, _ = listener.accept()
        except OSError:
            return
        if len(self._connections) >= MAX_CONNECTIONS:
            self.refused += 1
            down.close()
            return
        down.setblocking(False)
        src, dst, _ = link
        self._connections.append(_Connection(link, down, None, _Flow(src, dst), _Flow(dst, src)))

    def _connect_upstream(self, c: _Connection) -> bool:
        _, dst, kind = c.link
        try:
            up = socket.create_connection(
                (self._host, self._targets[(dst, kind)]), timeout=CONNECT_TIMEOUT_S
            )
        except OSError:
            self._close(c)  # dst is down: its port refuses, as without the proxy
            return False
        up.setblocking(False)
        up.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        c.up = up
        return True

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
        hold = faults.fault(flow.src, flow.dst, c.link[2]).hold_s(self._rng)
        flow.add(data, self._clock() + hold)

    def _pump(self, c: _Connection, faults: NetworkFaults, now: float) -> None:
        """Pass on what is due in each direction the rules let through."""
        kind = c.link[2]
        if c.up is None:
            if faults.fault(c.link[0], c.link[1], kind).drop:
                return  # a dropped SYN: src waits
            if not self._connect_upstream(c):
                return
        assert c.up is not None
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
