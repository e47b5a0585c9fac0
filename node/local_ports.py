"""The ports of `seglog local up`: each listener's block above --base-port, one port
per node, and what each is for (imported by `seglog --help`, so nothing heavy)."""

from __future__ import annotations

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
