"""The compose target's network faults as commands: `NetworkFaults` (chaos/link_faults.py)
turned into iptables and tc-netem argv lists for each node's network namespace, without
running anything (chaos/targets.py runs them with `nsenter --net` from the host, so the
node image needs neither the tools nor NET_ADMIN).

A rule on (src, dst, kind) is applied in src's namespace to the packets src sends dst
for that kind: to dst's port of the kind (connections src opened) and from src's own
port of the kind (answers on connections dst opened); every node uses the same
container ports, so both are the kind's port. Drops go into a chain of our own
(`SEGLOG-CHAOS`, jumped to from OUTPUT) that each cut flushes and refills; delays are
netem qdiscs on eth0, one prio band per distinct delay, chosen by u32 filters on the
destination address and port. Clients reach the nodes through published ports from
the bridge's gateway, which no rule names: they keep reaching every node.
"""

from __future__ import annotations

from collections.abc import Mapping

from .link_faults import LinkFault, NetworkFaults

CHAIN = "SEGLOG-CHAOS"
DEVICE = "eth0"
# Container ports of compose/node.properties' listeners.
KIND_PORTS = {"controller": 9292, "replication": 9392}
MAX_BANDS = 16  # tc prio's limit; band 1 carries everything no filter picks

Argv = list[str]


def iptables_setup() -> list[Argv]:
    """Idempotent: the chain exists and OUTPUT jumps to it once (the caller ignores a
    failure of the first, which means it existed)."""
    return [
        ["iptables", "-w", "-N", CHAIN],
        ["iptables", "-w", "-C", "OUTPUT", "-j", CHAIN],
    ]


def iptables_jump() -> Argv:
    return ["iptables", "-w", "-I", "OUTPUT", "1", "-j", CHAIN]


def iptables_rules(src: int, faults: NetworkFaults, ips: Mapping[int, str]) -> list[Argv]:
    """Flush the chain, then one DROP per direction and port for src's dropped links."""
    out: list[Argv] = [["iptables", "-w", "-F", CHAIN]]
    for (s, dst, kind), fault in sorted(faults.rules.items()):
        if s != src or not fault.drop:
            continue
        port = str(KIND_PORTS[kind])
        for match in ("--dport", "--sport"):
            out.append(
                ["iptables", "-w", "-A", CHAIN, "-d", ips[dst], "-p", "tcp", match, port]
                + ["-j", "DROP"]
            )
    return out


def netem_commands(src: int, faults: NetworkFaults, ips: Mapping[int, str]) -> list[Argv]:
    """Replace eth0's root qdisc: none when src has no delayed link, else a prio qdisc
    whose band 1 is the default and one netem band per distinct delay. The caller
    ignores a failure of the first command (no root qdisc of ours yet)."""
    out: list[Argv] = [["tc", "qdisc", "del", "dev", DEVICE, "root"]]
    delayed = {
        (dst, kind): f
        for (s, dst, kind), f in sorted(faults.rules.items())
        if s == src and not f.drop and (f.delay_ms > 0 or f.packet_level)
    }
    if not delayed:
        return out
    bands: dict[LinkFault, int] = {}
    for f in delayed.values():
        bands.setdefault(f, len(bands) + 2)
    if len(bands) + 1 > MAX_BANDS:
        raise ValueError(f"node {src}: {len(bands)} distinct delays, tc prio has {MAX_BANDS} bands")
    n = len(bands) + 1
    out.append(
        ["tc", "qdisc", "add", "dev", DEVICE, "root", "handle", "1:", "prio", "bands", str(n)]
        + ["priomap"]
        + ["0"] * 16
    )
    for f, band in bands.items():
        netem = ["delay", f"{f.delay_ms:g}ms"]
        if f.jitter_ms:
            netem += [f"{f.jitter_ms:g}ms", "distribution", "normal"]
        if f.loss_pct:
            netem += ["loss", f"{f.loss_pct:g}%"]
        if f.duplicate_pct:
            netem += ["duplicate", f"{f.duplicate_pct:g}%"]
        if f.reorder_pct:
            netem += ["reorder", f"{f.reorder_pct:g}%"]
        out.append(
            ["tc", "qdisc", "add", "dev", DEVICE, "parent", f"1:{band}"]
            + ["handle", f"{band}0:", "netem"]
            + netem
        )
    for (dst, kind), f in delayed.items():
        port = str(KIND_PORTS[kind])
        for field in ("dport", "sport"):
            out.append(
                ["tc", "filter", "add", "dev", DEVICE, "parent", "1:", "protocol", "ip"]
                + ["prio", "1", "u32", "match", "ip", "dst", f"{ips[dst]}/32"]
                + ["match", "ip", field, port, "0xffff", "flowid", f"1:{bands[f]}"]
            )
    return out
