"""The compose target's network faults as iptables and tc commands (chaos/netfilter.py):
each dropped direction becomes DROP rules on the kind's port both ways in the sending
node's namespace, each distinct delay a netem band picked by address and port."""

from __future__ import annotations

from seglog.chaos import netfilter
from seglog.chaos.link_faults import NetworkFaults, delay, healthy, one_way, partition

IPS = {1: "172.30.0.2", 2: "172.30.0.3", 3: "172.30.0.4"}


def _drops(argvs: list[list[str]]) -> list[tuple[str, str, str]]:
    return [(a[a.index("-d") + 1], a[a.index("-p") + 2], a[a.index("-p") + 3]) for a in argvs[1:]]


def test_a_partition_drops_both_ports_of_every_cut_direction() -> None:
    cut = partition([[1], [2, 3]])
    rules = netfilter.iptables_rules(1, cut, IPS)
    assert rules[0] == ["iptables", "-w", "-F", netfilter.CHAIN]
    assert sorted(_drops(rules)) == sorted(
        (IPS[d], m, p) for d in (2, 3) for m in ("--dport", "--sport") for p in ("9292", "9392")
    )
    assert all(a[-2:] == ["-j", "DROP"] for a in rules[1:])
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
    assert netfilter.iptables_rules(1, healthy(), IPS) == [["iptables", "-w", "-F", "SEGLOG-CHAOS"]]
    assert netfilter.netem_commands(1, healthy(), IPS) == [
        ["tc", "qdisc", "del", "dev", "eth0", "root"]
    ]


def test_delays_become_netem_bands_chosen_by_filters() -> None:
    cmds = netfilter.netem_commands(1, delay([1, 2, 3], 80.0, 40.0), IPS)
    prio = cmds[1]
    assert prio[:8] == ["tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:"]
    assert prio[prio.index("bands") + 1] == "2"  # the default band and one netem band
    netem = [c for c in cmds if "netem" in c]
    assert len(netem) == 1 and netem[0][-5:] == ["delay", "80ms", "40ms", "distribution", "normal"]
    filters = [c for c in cmds if c[:2] == ["tc", "filter"]]
    # to nodes 2 and 3, both kinds, both ports
    assert len(filters) == 2 * 2 * 2
    assert {c[c.index("dst") + 1] for c in filters} == {f"{IPS[2]}/32", f"{IPS[3]}/32"}
    assert all(c[-1] == "1:2" for c in filters)


def test_distinct_delays_get_distinct_bands() -> None:
    faults = NetworkFaults(
        {
            **delay([1, 2], 10.0, 0.0).rules,
            **{k: v for k, v in delay([1, 3], 500.0, 0.0).rules.items()},
        }
    )
    cmds = netfilter.netem_commands(1, faults, IPS)
    bands = {c[-1] for c in cmds if c[:2] == ["tc", "filter"]}
    assert bands == {"1:2", "1:3"}


def test_packet_faults_become_netem_loss_duplicate_reorder() -> None:
    cut = delay([1, 2], 20.0, 10.0, loss_pct=5.0, duplicate_pct=2.0, reorder_pct=10.0)
    (netem,) = [c for c in netfilter.netem_commands(1, cut, IPS) if "netem" in c]
    tail = netem[netem.index("netem") + 1 :]
    assert tail == [
        "delay", "20ms", "10ms", "distribution", "normal",
        "loss", "5%", "duplicate", "2%", "reorder", "10%",
    ]  # fmt: skip
