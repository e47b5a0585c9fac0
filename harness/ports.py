"""Where nodes listen: the one helper for ports. Free loopback ports for the nodes that
tests, bench and chaos start (`free_ports`, `free_port`, `consecutive_free_ports`), and
the fixed layout of `seglog local up` (each listener's block above --base-port, one
port per node, and what each is for). Imported by `seglog --help`: nothing heavy."""

from __future__ import annotations

import os
import random
import socket
import tempfile
from collections.abc import Iterable
from pathlib import Path

from .processes import pid_alive

# Each listener's ports start this far above --base-port (node 1 at the start, node 2
# one above, ...): the Kafka protocol at the base itself, as clients expect 9092.
PORT_OFFSETS = {"PLAINTEXT": 0, "GRPC": 100, "CONTROLLER": 200, "METRICS": 300}
# What each listener is for, as `local up --help` and its output say.
LISTENER_ROLES = {
    "PLAINTEXT": "Kafka's wire protocol: kcat, confluent-kafka, kafka-python, ...",
    "GRPC": "seglog's gRPC API: seglog's tools (--bootstrap-server) and Python clients",
    "CONTROLLER": "the Raft controller quorum (node to node)",
    "METRICS": "Prometheus metrics, http://HOST:PORT/metrics",
}


# The web console (`seglog console`, started by `local up` unless --no-console): one
# port for the cluster, this far above --base-port.
CONSOLE_OFFSET = 400


def console_port(base_port: int) -> int:
    return base_port + CONSOLE_OFFSET


def listener_port(base_port: int, node_id: int, name: str) -> int:
    return base_port + PORT_OFFSETS[name] + node_id - 1


def bootstrap_servers(base_port: int, nodes: int, name: str = "GRPC") -> str:
    return ",".join(f"127.0.0.1:{listener_port(base_port, i, name)}" for i in range(1, nodes + 1))


def port_layout(base_port: int, nodes: int) -> list[str]:
    """One line per listener: its ports (node 1 first) and what it is for."""
    lines = []
    for name, offset in PORT_OFFSETS.items():
        first = base_port + offset
        ports = f"{first}-{first + nodes - 1}" if nodes > 1 else str(first)
        lines.append(f"  {name:<10} 127.0.0.1:{ports:<12} {LISTENER_ROLES[name]}")
    console = f"127.0.0.1:{console_port(base_port)}"
    lines.append(f"  {'CONSOLE':<10} {console:<22} the web console (unless --no-console)")
    return lines


def layout_help(default_base: int = 9092, default_nodes: int = 3) -> str:
    """The port layout for `seglog local --help`."""
    offsets = ", ".join(f"{name} base+{offset}" for name, offset in PORT_OFFSETS.items())
    offsets += f"; the console alone on base+{CONSOLE_OFFSET}"
    return (
        f"Ports: node N listens on base+offset+N-1 ({offsets}); with the default "
        f"--base-port {default_base} and {default_nodes} nodes:\n"
        + "\n".join(port_layout(default_base, default_nodes))
    )


# --- free ports --------------------------------------------------------------------------

# Listeners' ports come from below the kernel's ephemeral range: a port from bind(0)
# lies in that range, and so does the local port of every outgoing connection, which
# can take it before the node it was given to binds it ("Address already in use" at
# start, seen in CI). Above the compose files' published ports (19090-19194) and
# `seglog local up`'s defaults (9092-9394, its console 9492).
PORTS_LOWEST = 21000
_handed_out: set[int] = set()  # never the same port twice in one process (TIME_WAIT)
_any_ports = random.Random()  # seeded by the OS: concurrent processes pick apart


def ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (Linux's default if unreadable)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _below_ephemeral(span: int) -> tuple[int, int] | None:
    """[low, high) for a port p with p + span still below the ephemeral range, or None
    when that leaves fewer than 2000 to choose from."""
    high = min(ephemeral_low(), 32768) - span
    return (PORTS_LOWEST, high) if high - PORTS_LOWEST >= 2000 else None


# Ports handed out are claimed machine-wide for the life of the process that took them:
# a node that a test or chaos run has stopped for a while leaves its ports unbound, and
# another process (a parallel run, a second checkout's tests) must not take them before
# it starts again ("Address already in use" at the restart). A claim is a file named
# after the port holding the claimer's pid; a dead claimer's claim is taken over.
CLAIMS_DIR = Path(tempfile.gettempdir()) / "seglog-port-claims"


def _claim(port: int) -> bool:
    """Claim `port` for this process; False when a live other process holds it."""
    mine = str(os.getpid())
    path = CLAIMS_DIR / str(port)
    try:
        CLAIMS_DIR.mkdir(exist_ok=True)
        try:
            holder = path.read_text().strip()
        except FileNotFoundError:
            holder = ""
        if holder and holder != mine and holder.isdigit() and pid_alive(int(holder)):
            return False
        fresh = CLAIMS_DIR / f".{port}.{mine}"
        fresh.write_text(mine)
        os.replace(fresh, path)
        return path.read_text().strip() == mine  # a racing claimer may have won
    except OSError:
        return True  # no claims on this machine (read-only tmp): the bind check stays


def _any_free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_ports(n: int) -> list[int]:
    """n distinct loopback ports, free now, below the ephemeral range and not handed
    out before by this process; bind(0) ports when the range leaves no room below."""
    below = _below_ephemeral(0)
    draw = (lambda: _any_ports.randrange(*below)) if below else _any_free_port
    ports: list[int] = []
    for _ in range(1000 * n):
        port = draw()
        if port not in _handed_out and _bindable(port) and _claim(port):
            _handed_out.add(port)
            ports.append(port)
            if len(ports) == n:
                return ports
    raise RuntimeError(f"no {n} free loopback ports found")


def free_port() -> int:
    """One port of `free_ports`."""
    return free_ports(1)[0]


def quorum_ports(node_ids: Iterable[int]) -> tuple[dict[int, int], dict[int, int], str]:
    """For nodes that are each a broker and a Raft voter: a free port per node for its
    gRPC listener, another for its CONTROLLER listener, and the
    controller.quorum.voters that names the latter."""
    ids = list(node_ids)
    ports = {i: free_port() for i in ids}
    controller_ports = {i: free_port() for i in ids}
    voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in controller_ports.items())
    return ports, controller_ports, voters


def ephemeral_high() -> int:
    """The last port of the kernel's ephemeral range (Linux's default if unreadable)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[1])
    except (OSError, ValueError, IndexError):
        return 60999


def consecutive_free_ports(n: int, rng: random.Random, above_ephemeral: bool = False) -> int:
    """A base port with n free consecutive ports after it and after each of the other
    listeners' offsets (local up wants a base, `PORT_OFFSETS`), all below the
    ephemeral range when it leaves room. `above_ephemeral`: above it instead, where
    free_ports never looks, for a long-lived cluster whose nodes stop and start
    again (a chaos run) while other processes take ports below."""
    span = max(PORT_OFFSETS.values()) + n
    low, high = _below_ephemeral(span) or (20000, 40000)
    if above_ephemeral and 65535 - span - (ephemeral_high() + 1) >= 500:
        low, high = ephemeral_high() + 1, 65535 - span
    for _ in range(200):
        base = rng.randrange(low, high)
        socks = []
        try:
            for offset in PORT_OFFSETS.values():
                for i in range(n):
                    s = socket.socket()
                    socks.append(s)
                    s.bind(("127.0.0.1", base + offset + i))
            if all(_claim(base + offset + i) for offset in PORT_OFFSETS.values() for i in range(n)):
                return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free range of ports")
