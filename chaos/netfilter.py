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
* delay and jitter: the delaying proxy in each node's namespace (chaos/delay_proxy.py,
  the local target's delaying code), not netem, which many kernels lack (this project's
  machine among them). `redirect_rules` put it in the path of every connection a node
  opens to another's controller or replication port, from the start: the nat table's
  chain `SEGLOG-PROXY` REDIRECTs them to the proxy's port, the filter table's chain of
  that name resets (RST) any such connection that bypassed it (opened before the rules
  were in place), and the proxy's own upstream connections carry `PROXY_MARK`, which
  both rules exclude. The proxy then holds what the node sends by (node, dst) and what
  it receives by (dst, node), so each direction is delayed as on the local target;
  `proxy_faults` is the part of the rules it applies;
* reordering (packets only): tc netem leaves under an HTB root on eth0 (HTB rather
  than prio: some kernels lack sch_prio), one class per distinct rule, chosen by u32
  filters on destination address and port; unfiltered traffic goes to the default
  class. netem also delays those directions (the proxy passes them untouched). A
  kernel without sch_netem cannot reorder: the tc command fails and the harness
  reports it.

Clients reach the nodes through published ports from the bridge's gateway, which no
rule names: they keep reaching every node.
"""

from __future__ import annotations

from collections.abc import Mapping

from .link_faults import LinkFault, NetworkFaults

CHAIN = "SEGLOG-CHAOS"
PROXY_CHAIN = "SEGLOG-PROXY"
# On the delaying proxy's own upstream sockets (SO_MARK): the redirect and the reset
# rules let them through. Any value no other rule in a node's namespace uses.
PROXY_MARK = 0x5E91
DEVICE = "eth0"
# Container ports of compose/node.properties' listeners.
KIND_PORTS = {"controller": 9292, "replication": 9392}
MAX_CLASSES = 64  # distinct delays on one node; a chaos rule set has a handful
RATE = "10gbit"  # HTB classes only sort packets: no shaping

Argv = list[str]


def iptables_setup(table: str, chain: str = CHAIN) -> list[Argv]:
    """The chain in `table` (the caller ignores a failure: it existed) and whether
    OUTPUT already jumps to it (a failure: add the jump)."""
    return [
        ["iptables", "-w", "-t", table, "-N", chain],
        ["iptables", "-w", "-t", table, "-C", "OUTPUT", "-j", chain],
    ]


def iptables_jump(table: str, chain: str = CHAIN) -> Argv:
    return ["iptables", "-w", "-t", table, "-I", "OUTPUT", "1", "-j", chain]


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


def proxied(fault: LinkFault) -> bool:
    """Whether the delaying proxy holds this direction (netem does when it reorders)."""
    return not fault.drop and fault.delay_ms > 0 and not fault.reorder_pct


def _netem(fault: LinkFault) -> bool:
    return not fault.drop and fault.reorder_pct > 0


def proxy_faults(faults: NetworkFaults) -> NetworkFaults:
    """What the delaying proxies apply: each proxied direction's delay and jitter; its
    drops, losses and duplications are the kernel's (iptables_rules)."""
    return NetworkFaults(
        {
            d: LinkFault(delay_ms=f.delay_ms, jitter_ms=f.jitter_ms)
            for d, f in faults.rules.items()
            if proxied(f)
        }
    )


def redirect_rules(src: int, ips: Mapping[int, str], port: int) -> list[Argv]:
    """Put the delaying proxy listening on 127.0.0.1:`port` of src's namespace in the
    path of every connection src opens to another node's controller or replication
    port (flush, then per peer): REDIRECT in nat, and RST in filter for one that
    bypassed it (opened before the redirect: the node reconnects through the proxy).
    The caller makes both chains and their jumps first (iptables_setup)."""
    base = ["iptables", "-w", "-t"]
    ports = ",".join(str(p) for p in sorted(KIND_PORTS.values()))
    out: list[Argv] = [base + ["nat", "-F", PROXY_CHAIN], base + ["filter", "-F", PROXY_CHAIN]]
    for dst, ip in sorted(ips.items()):
        if dst == src:
            continue
        match = ["-p", "tcp", "-d", ip, "-m", "multiport", "--dports", ports]
        not_proxy = ["-m", "mark", "!", "--mark", hex(PROXY_MARK)]
        out.append(
            base
            + ["nat", "-A", PROXY_CHAIN, *match, *not_proxy]
            + ["-j", "REDIRECT", "--to-ports", str(port)]
        )
        out.append(
            base
            + ["filter", "-A", PROXY_CHAIN, *match, *not_proxy]
            + ["-j", "REJECT", "--reject-with", "tcp-reset"]
        )
    return out


def tc_commands(src: int, faults: NetworkFaults, ips: Mapping[int, str]) -> list[Argv]:
    """Replace eth0's root qdisc: none when src reorders nothing, else HTB with a
    default class 1:1 and one class with a netem leaf per distinct reordering rule. The
    caller ignores a failure of the first command (no root qdisc of ours yet)."""
    out: list[Argv] = [["tc", "qdisc", "del", "dev", DEVICE, "root"]]
    delayed = {
        (dst, kind): f
        for (s, dst, kind), f in sorted(faults.rules.items())
        if s == src and _netem(f)
    }
    if not delayed:
        return out
    classes: dict[LinkFault, int] = {}
    for f in delayed.values():
        classes.setdefault(f, len(classes) + 2)
    if len(classes) > MAX_CLASSES:
        raise ValueError(f"node {src}: {len(classes)} distinct rules, at most {MAX_CLASSES}")
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
