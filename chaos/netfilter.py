"""The compose target's network faults as commands: `NetworkFaults` (chaos/link_faults.py)
turned into iptables and tc argv lists for each node's network namespace, without
running anything (chaos/compose_target.py runs them with `nsenter -t PID -n` from the host, so
the node image needs neither the tools nor NET_ADMIN).

A rule on (src, dst, kind) is applied in src's namespace to the packets src sends dst
for that kind: to dst's port of the kind (connections src opened) and from src's own
port of the kind (answers on connections dst opened); every node uses the same
container ports, so both are the kind's port.

* drop and loss: the filter table's chain `SEGLOG-CHAOS` (jumped to from OUTPUT,
  flushed and refilled at each change): DROP, or DROP with the `statistic` match's
  random probability for a loss percentage;
* duplication: the mangle table's chain of the same name, `TEE --gateway dst` with the
  random probability: the kernel sends dst a clone of the packet;
* delay, jitter and reordering: tc netem leaves under an HTB root on eth0 (HTB rather
  than prio: some kernels, this project's CI machine among them, lack sch_prio), one
  class per distinct delay, chosen by u32 filters on destination address and port;
  unfiltered traffic goes to the default class. A kernel without sch_netem cannot
  delay: the tc command fails and the harness reports it.

Clients reach the nodes through published ports from the bridge's gateway, which no
rule names: they keep reaching every node.
"""

from __future__ import annotations

from collections.abc import Mapping

from .link_faults import LinkFault, NetworkFaults

CHAIN = "SEGLOG-CHAOS"
DEVICE = "eth0"
# Container ports of compose/node.properties' listeners.
KIND_PORTS = {"controller": 9292, "replication": 9392}
MAX_CLASSES = 64  # distinct delays on one node; a chaos rule set has a handful
RATE = "10gbit"  # HTB classes only sort packets: no shaping

Argv = list[str]


def iptables_setup(table: str) -> list[Argv]:
    """The chain in `table` (the caller ignores a failure: it existed) and whether
    OUTPUT already jumps to it (a failure: add the jump)."""
    return [
        ["iptables", "-w", "-t", table, "-N", CHAIN],
        ["iptables", "-w", "-t", table, "-C", "OUTPUT", "-j", CHAIN],
    ]


def iptables_jump(table: str) -> Argv:
    return ["iptables", "-w", "-t", table, "-I", "OUTPUT", "1", "-j", CHAIN]


def _matches(dst_ip: str, kind: str) -> list[list[str]]:
    port = str(KIND_PORTS[kind])
    return [["-d", dst_ip, "-p", "tcp", m, port] for m in ("--dport", "--sport")]


def _random(pct: float) -> list[str]:
    return ["-m", "statistic", "--mode", "random", "--probability", f"{pct / 100:.4f}"]


def iptables_rules(src: int, faults: NetworkFaults, ips: Mapping[int, str]) -> list[Argv]:
    """Flush both chains, then src's drops and losses (filter) and duplications
    (mangle)."""
    base = ["iptables", "-w", "-t"]
    out: list[Argv] = [base + ["filter", "-F", CHAIN], base + ["mangle", "-F", CHAIN]]
    for (s, dst, kind), f in sorted(faults.rules.items()):
        if s != src:
            continue
        for match in _matches(ips[dst], kind):
            if f.drop:
                out.append(base + ["filter", "-A", CHAIN, *match, "-j", "DROP"])
                continue
            if f.loss_pct:
                out.append(
                    base + ["filter", "-A", CHAIN, *match, *_random(f.loss_pct), "-j", "DROP"]
                )
            if f.duplicate_pct:
                out.append(
                    base
                    + ["mangle", "-A", CHAIN, *match, *_random(f.duplicate_pct)]
                    + ["-j", "TEE", "--gateway", ips[dst]]
                )
    return out


def _delayed(fault: LinkFault) -> bool:
    return not fault.drop and (fault.delay_ms > 0 or fault.reorder_pct > 0)


def tc_commands(src: int, faults: NetworkFaults, ips: Mapping[int, str]) -> list[Argv]:
    """Replace eth0's root qdisc: none when src delays nothing, else HTB with a
    default class 1:1 and one class with a netem leaf per distinct delay. The caller
    ignores a failure of the first command (no root qdisc of ours yet)."""
    out: list[Argv] = [["tc", "qdisc", "del", "dev", DEVICE, "root"]]
    delayed = {
        (dst, kind): f
        for (s, dst, kind), f in sorted(faults.rules.items())
        if s == src and _delayed(f)
    }
    if not delayed:
        return out
    classes: dict[LinkFault, int] = {}
    for f in delayed.values():
        classes.setdefault(f, len(classes) + 2)
    if len(classes) > MAX_CLASSES:
        raise ValueError(f"node {src}: {len(classes)} distinct delays, at most {MAX_CLASSES}")
    dev = ["dev", DEVICE]
    out.append(["tc", "qdisc", "add", *dev, "root", "handle", "1:", "htb", "default", "1"])
    for classid in (1, *classes.values()):
        out.append(
            ["tc", "class", "add", *dev, "parent", "1:", "classid", f"1:{classid}"]
            + ["htb", "rate", RATE]
        )
    for f, classid in classes.items():
        netem = ["delay", f"{f.delay_ms:g}ms"]
        if f.jitter_ms:
            netem += [f"{f.jitter_ms:g}ms", "distribution", "normal"]
        if f.reorder_pct:
            netem += ["reorder", f"{f.reorder_pct:g}%"]
        out.append(
            ["tc", "qdisc", "add", *dev, "parent", f"1:{classid}", "handle", f"{classid}0:"]
            + ["netem", *netem]
        )
    for (dst, kind), f in delayed.items():
        port = str(KIND_PORTS[kind])
        for field in ("dport", "sport"):
            out.append(
                ["tc", "filter", "add", *dev, "parent", "1:", "protocol", "ip", "prio", "1"]
                + ["u32", "match", "ip", "dst", f"{ips[dst]}/32"]
                + ["match", "ip", field, port, "0xffff", "flowid", f"1:{classes[f]}"]
            )
    return out


def packets_matched(listing: str) -> int:
    """The packets every rule of an `iptables -L CHAIN -v -n -x` listing matched."""
    total = 0
    for line in listing.splitlines():
        fields = line.split()
        if fields and fields[0].isdigit():
            total += int(fields[0])
    return total
