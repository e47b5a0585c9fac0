"""The compose target's delays: a transparent TCP proxy in each node's network namespace,
holding bytes as the local target's link proxies do (the same loop, chaos/link_proxy.py),
on kernels without sch_netem.

The node's connections to the other nodes' controller and replication ports reach it
through an iptables REDIRECT (chaos/netfilter.py `redirect_rules`); it reads where each
was headed with `SO_ORIGINAL_DST`, names the link from the address (which node) and the
port (which kind), and connects there itself with `PROXY_MARK` on its socket, which the
redirect excludes. One proxy carries both directions of the connections its node opens:
what the node sends is held by the rule on (node, dst), what it receives by (dst, node).
The connections the other nodes open to this one go through theirs, so every direction
of every connection is held by the rule on it, once.

It is there from the cluster's start, holding nothing while no rule is in force, so a
rule takes effect on the long-lived connections at once (`set` swaps the rules the loop
reads on every pass).

Run as `python -m seglog.chaos.delay_proxy --node N` inside the namespace
(`nsenter -t PID -n`, from the host: the node image needs nothing). It prints
`{"port": P}`, then answers one JSON line per line it reads on stdin: `{"op": "set",
"ips": {node: ip}, "rules": [...]}` puts rules in force (and starts the counts afresh)
and `{"op": "stats"}` returns the counts since; end of input stops it, so it does not
outlive the harness. `NamespaceProxy` is the harness's side.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import select
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from .link_faults import LinkFault, NetworkFaults
from .link_proxy import Address, Counts, Link, ProxyLoop
from .netfilter import KIND_PORTS, PROXY_MARK

SO_ORIGINAL_DST = 80  # linux/netfilter_ipv4.h, read at level SOL_IP
SO_MARK = getattr(socket, "SO_MARK", 36)
KIND_OF_PORT = {port: kind for kind, port in KIND_PORTS.items()}
MODULE = "seglog.chaos.delay_proxy"
REPLY_TIMEOUT_S = 30.0
MAX_REPLY_BYTES = 1 << 20  # a reply is a line of counts: more is a broken proxy
STOP_TIMEOUT_S = 5.0


def parse_original_dst(raw: bytes) -> Address:
    """The (ip, port) of a `struct sockaddr_in` as SO_ORIGINAL_DST returns it."""
    if len(raw) < 8 or struct.unpack_from("=H", raw)[0] != socket.AF_INET:
        raise ValueError(f"not an AF_INET sockaddr: {raw.hex()}")
    port, ip = struct.unpack_from("!2xH4s", raw)
    return socket.inet_ntoa(ip), int(port)


def original_dst(sock: socket.socket) -> Address:
    """Where a redirected connection was headed (fails on one that was not redirected)."""
    return parse_original_dst(sock.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16))


def rules_to_json(faults: NetworkFaults) -> list[list[Any]]:
    """A delay-only rule set (netfilter.proxy_faults) as JSON: [src, dst, kind, ms, jitter]."""
    return [[s, d, k, f.delay_ms, f.jitter_ms] for (s, d, k), f in sorted(faults.rules.items())]


def rules_from_json(rules: list[list[Any]]) -> NetworkFaults:
    return NetworkFaults(
        {(int(s), int(d), str(k)): LinkFault(delay_ms=ms, jitter_ms=j) for s, d, k, ms, j in rules}
    )


class TransparentProxy(ProxyLoop):
    """Serves connections redirected to 127.0.0.1:`port` in `node`'s namespace, each
    forwarded to where it was headed. `original` reads that and `kinds` names the kind
    of traffic by port (tests pass their own); `mark` is put on upstream sockets (None:
    unmarked, for tests without CAP_NET_ADMIN)."""

    def __init__(
        self,
        node: int,
        rng: random.Random,
        original: Callable[[socket.socket], Address] = original_dst,
        mark: int | None = PROXY_MARK,
        port: int = 0,
        kinds: Mapping[int, str] = KIND_OF_PORT,
    ) -> None:
        super().__init__(rng, upstream_socket=self._upstream)
        self.node = node
        self._original = original
        self._kinds = dict(kinds)
        self._mark = mark
        self._nodes: dict[str, int] = {}  # the other nodes by IP
        listener = socket.create_server(("127.0.0.1", port), backlog=64)
        self.port = int(listener.getsockname()[1])
        self.listen(listener, self.route)

    def set_peers(self, ips: Mapping[int, str]) -> None:
        self._nodes = {ip: n for n, ip in ips.items()}

    def route(self, sock: socket.socket) -> tuple[Link, Address] | None:
        """This node's link to where `sock` was headed. A destination that is no node's
        port of a kind (a stale address after a restart) gets a link no rule names:
        its bytes pass untouched. A connection made to the proxy's own port, not
        redirected, has no original destination: refused (OSError), no loop."""
        ip, port = self._original(sock)
        if (ip, port) == ("127.0.0.1", self.port):
            return None
        dst = self._nodes.get(ip, 0)
        return (self.node, dst, self._kinds.get(port, "other")), (ip, port)

    def _upstream(self) -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if self._mark is not None:
            s.setsockopt(socket.SOL_SOCKET, SO_MARK, self._mark)
        return s


def stats(proxy: ProxyLoop, since: Counts) -> dict[str, Any]:
    counts = proxy.counts().minus(since)
    return {
        **asdict(counts),
        "connections": proxy.open_connections(),
        "refused_connections": proxy.refused,
    }


def serve(proxy: TransparentProxy, lines: Any, out: Any) -> None:
    """Answer each request line until end of input (the module docstring's protocol)."""
    since = proxy.counts()
    for line in lines:
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
            if msg["op"] == "set":
                faults = rules_from_json(msg["rules"])  # a bad rule set changes nothing
                proxy.set_peers({int(n): ip for n, ip in msg["ips"].items()})
                proxy.set_faults(faults)
                since = proxy.counts()
                reply: dict[str, Any] = {"ok": True}
            elif msg["op"] == "stats":
                reply = stats(proxy, since)
            else:
                reply = {"error": f"unknown op {msg['op']!r}"}
        except (ValueError, KeyError, TypeError) as e:
            reply = {"error": repr(e)}
        out.write(json.dumps(reply) + "\n")
        out.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m seglog.chaos.delay_proxy")
    parser.add_argument("--node", type=int, required=True, help="the node whose namespace")
    parser.add_argument("--seed", type=int, default=0, help="for the jitter")
    args = parser.parse_args(argv)
    proxy = TransparentProxy(args.node, random.Random(f"delay-proxy-{args.seed}-{args.node}"))
    proxy.start()
    print(json.dumps({"port": proxy.port}), flush=True)
    try:
        serve(proxy, sys.stdin, sys.stdout)
    finally:
        proxy.close()
    return 0


# --- the harness's side ------------------------------------------------------------------


class NamespaceProxy:
    """A delay proxy process entered into the network namespace of the process `pid`
    (a container's first process), driven over its stdin and stdout."""

    def __init__(self, node: int, pid: int, seed: int, log: Path) -> None:
        self.node = node
        self.pid = pid  # the namespace's holder: a restarted container has another
        self.redirected: dict[int, str] = {}  # the node IPs the redirect rules name
        with log.open("ab") as err:
            self.proc = subprocess.Popen(
                ["nsenter", "-t", str(pid), "-n", "--", sys.executable, "-m", MODULE]
                + ["--node", str(node), "--seed", str(seed)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
            )
        self._buffer = b""
        try:
            self.port = int(self._reply()["port"])
        except Exception:
            self.close()
            raise

    def alive(self) -> bool:
        return self.proc.poll() is None

    def set(self, faults: NetworkFaults, ips: Mapping[int, str]) -> None:
        self._request({"op": "set", "ips": dict(ips), "rules": rules_to_json(faults)})

    def stats(self) -> dict[str, Any]:
        return self._request({"op": "stats"})

    def close(self) -> None:
        """End of input stops it; killed if it does not go in time."""
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(STOP_TIMEOUT_S)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def _request(self, msg: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(msg).encode() + b"\n")
            self.proc.stdin.flush()
        except OSError as e:
            raise RuntimeError(f"node{self.node}'s delay proxy is gone: {e}") from e
        reply = self._reply()
        if "error" in reply:
            raise RuntimeError(f"node{self.node}'s delay proxy: {reply['error']}")
        return reply

    def _reply(self) -> dict[str, Any]:
        """One line from its stdout, within REPLY_TIMEOUT_S (a hung proxy is an error,
        not a hung harness)."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + REPLY_TIMEOUT_S
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise RuntimeError(f"node{self.node}'s delay proxy did not answer in time")
            chunk = os.read(fd, 65536)
            if not chunk:
                raise RuntimeError(
                    f"node{self.node}'s delay proxy exited ({self.proc.poll()}): see its log"
                )
            self._buffer += chunk
            if len(self._buffer) > MAX_REPLY_BYTES:
                raise RuntimeError(f"node{self.node}'s delay proxy wrote no line in 1 MiB")
        line, _, self._buffer = self._buffer.partition(b"\n")
        return dict(json.loads(line))


if __name__ == "__main__":
    sys.exit(main())
