"""The compose target's network faults as iptables and tc commands (chaos/netfilter.py):
each dropped direction becomes DROP rules on the kind's port both ways in the sending
node's namespace, a loss a random DROP, a duplication a random TEE to the destination,
a delay the delay proxy's (redirected to it, reset when it bypassed it), each distinct
reordering an HTB class with a netem leaf picked by address and port."""

from __future__ import annotations

from seglog.chaos import netfilter
from seglog.chaos.link_faults import (
    LinkFault,
    NetworkFaults,
    delay,
    healthy,
    one_way,
    partition,
)

IPS = {1: "172.30.0.2", 2: "172.30.0.3", 3: "172.30.0.4"}
FLUSH = [
    ["iptables", "-w", "-t", "filter", "-F", "SEGLOG-CHAOS"],
    ["iptables", "-w", "-t", "mangle", "-F", "SEGLOG-CHAOS"],
]


def _drops(argvs: list[list[str]]) -> list[tuple[str, str, str]]:
    return [
        (a[a.index("-d") + 1], a[a.index("-p") + 2], a[a.index("-p") + 3])
        for a in argvs[2:]
        if a[-1] == "DROP"
    ]


def test_a_partition_drops_both_ports_of_every_cut_direction() -> None:
    cut = partition([[1], [2, 3]])
    rules = netfilter.iptables_rules(1, cut, IPS)
    assert rules[:2] == FLUSH
    assert sorted(_drops(rules)) == sorted(
        (IPS[d], m, p) for d in (2, 3) for m in ("--dport", "--sport") for p in ("9292", "9392")
    )
    assert len(rules) == 2 + 8 and all("statistic" not in a for a in rules)
    # node 2 drops only what it sends node 1
    assert {d for d, _, _ in _drops(netfilter.iptables_rules(2, cut, IPS))} == {IPS[1]}


def test_one_way_cuts_only_the_sender() -> None:
    cut = one_way(2, 3, kinds=("replication",))
    assert _drops(netfilter.iptables_rules(3, cut, IPS)) == []
    assert sorted(_drops(netfilter.iptables_rules(2, cut, IPS))) == [
        (IPS[3], "--dport", "9392"),
        (IPS[3], "--sport", "9392"),
    ]


def test_healthy_flushes_and_removes_the_qdisc() -> None:
    assert netfilter.iptables_rules(1, healthy(), IPS) == FLUSH
    assert netfilter.tc_commands(1, healthy(), IPS) == [
        ["tc", "qdisc", "del", "dev", "eth0", "root"]
    ]


def test_loss_is_a_random_drop_and_duplication_a_random_tee() -> None:
    cut = delay([1, 2], 0.0, 0.0, loss_pct=5.0, duplicate_pct=2.0, kinds=("controller",))
    rules = netfilter.iptables_rules(1, cut, IPS)[2:]
    losses = [a for a in rules if a[-1] == "DROP"]
    tees = [a for a in rules if "TEE" in a]
    assert len(losses) == 2 and len(tees) == 2 and len(rules) == 4
    assert all(a[3] == "filter" and a[a.index("--probability") + 1] == "0.0500" for a in losses)
    assert all(a[3] == "mangle" and a[a.index("--probability") + 1] == "0.0200" for a in tees)
    assert all(a[-2:] == ["--gateway", IPS[2]] for a in tees)
    assert netfilter.tc_commands(1, cut, IPS)[1:] == []  # no delay: no qdisc


def test_reorderings_become_htb_classes_with_netem_leaves() -> None:
    cmds = netfilter.tc_commands(1, delay([1, 2, 3], 80.0, 40.0, reorder_pct=10.0), IPS)
    assert cmds[1] == ["tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:"] + [
        "htb",
        "default",
        "1",
    ]
    classes = [c[c.index("classid") + 1] for c in cmds if c[:2] == ["tc", "class"]]
    assert classes == ["1:1", "1:2"]  # the default and one delay
    (netem,) = [c for c in cmds if "netem" in c]
    assert netem[netem.index("netem") + 1 :] == [
        "delay", "80ms", "40ms", "distribution", "normal", "reorder", "10%",
    ]  # fmt: skip
    filters = [c for c in cmds if c[:2] == ["tc", "filter"]]
    assert len(filters) == 2 * 2 * 2  # to nodes 2 and 3, both kinds, both ports
    assert {c[c.index("dst") + 1] for c in filters} == {f"{IPS[2]}/32", f"{IPS[3]}/32"}
    assert all(c[-1] == "1:2" for c in filters)


def test_distinct_reorderings_get_distinct_classes() -> None:
    faults = NetworkFaults(
        {
            **delay([1, 2], 10.0, 0.0, reorder_pct=5.0).rules,
            **delay([1, 3], 500.0, 0.0, reorder_pct=5.0).rules,
        }
    )
    cmds = netfilter.tc_commands(1, faults, IPS)
    assert {c[-1] for c in cmds if c[:2] == ["tc", "filter"]} == {"1:2", "1:3"}


def test_plain_delays_are_the_proxies_not_netems() -> None:
    """A delay without reordering needs no qdisc (kernels without sch_netem run it):
    the proxies get its delay and jitter, not its drops, losses or reorderings."""
    slow = delay([1, 2, 3], 250.0, 125.0)
    assert netfilter.tc_commands(1, slow, IPS) == [["tc", "qdisc", "del", "dev", "eth0", "root"]]
    assert netfilter.proxy_faults(slow) == slow
    mixed = NetworkFaults(
        {
            (1, 2, "replication"): LinkFault(delay_ms=80.0, jitter_ms=40.0, loss_pct=5.0),
            (2, 1, "replication"): LinkFault(drop=True),
            (1, 3, "controller"): LinkFault(delay_ms=80.0, reorder_pct=10.0),  # netem's
            (3, 1, "controller"): LinkFault(loss_pct=5.0),
        }
    )
    assert netfilter.proxy_faults(mixed).rules == {
        (1, 2, "replication"): LinkFault(delay_ms=80.0, jitter_ms=40.0)
    }
    assert netfilter.proxy_faults(healthy()) == healthy()


def test_the_redirect_names_every_peer_and_spares_the_proxy() -> None:
    rules = netfilter.redirect_rules(1, IPS, 40123)
    assert rules[:2] == [
        ["iptables", "-w", "-t", "nat", "-F", "SEGLOG-PROXY"],
        ["iptables", "-w", "-t", "filter", "-F", "SEGLOG-PROXY"],
    ]
    nat = [a for a in rules[2:] if a[3] == "nat"]
    resets = [a for a in rules[2:] if a[3] == "filter"]
    assert [a[a.index("-d") + 1] for a in nat] == [IPS[2], IPS[3]]  # not node 1 itself
    assert [a[a.index("-d") + 1] for a in resets] == [IPS[2], IPS[3]]
    for a in nat + resets:
        assert a[a.index("--dports") + 1] == "9292,9392"
        assert a[a.index("mark") + 1 : a.index("mark") + 4] == ["!", "--mark", "0x5e91"]
    assert all(a[-4:] == ["-j", "REDIRECT", "--to-ports", "40123"] for a in nat)
    assert all(a[-4:] == ["-j", "REJECT", "--reject-with", "tcp-reset"] for a in resets)


def test_packets_matched_sums_a_chain_listing() -> None:
    listing = """Chain SEGLOG-CHAOS (1 references)
    pkts      bytes target     prot opt in     out     source               destination
      12     3400 DROP       6    --  *      *       0.0.0.0/0            172.30.0.3  tcp dpt:9292
       5      300 DROP       6    --  *      *       0.0.0.0/0            172.30.0.3  tcp spt:9292
"""
    assert netfilter.packets_matched(listing) == 17
    assert netfilter.packets_matched("") == 0
