"""What the network does to the bytes one node sends another: the rules of the local
target's link proxies (chaos/link_proxy.py), without I/O.

A rule is per direction and per kind of traffic: `LinkFault` says what happens to the
bytes node `src` sends node `dst` on `kind` ("controller": Raft and the brokers'
controller RPCs; "replication": follower fetches on the inter-broker listener). A TCP
connection carries both directions, so a one-way drop (src → dst lost, dst → src
delivered) stalls the requests src makes of dst and the answers src gives dst's
requests, as a one-way packet drop does to request/response traffic.

Jepsen's partitions are sets of dropped directions: `partition(sides)` drops every
direction between different sides, `bridge` keeps one node talking to both halves,
`one_way` drops a single direction. Delay and jitter (netem's) hold bytes back by a
fixed time plus a uniform jitter, keeping their order as TCP does.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

KINDS = ("controller", "replication")
# Bounds a netem-like rule to what a chaos run needs; a larger value is a typo.
MAX_DELAY_MS = 10_000.0


@dataclass(frozen=True)
class LinkFault:
    """What happens to bytes going one way on one link."""

    drop: bool = False
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    # Packet-level, in percent (iptables' random loss and TEE duplicates, netem's
    # reordering): only the compose target has packets; a TCP proxy sees a byte
    # stream and refuses these.
    loss_pct: float = 0.0
    duplicate_pct: float = 0.0
    reorder_pct: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.delay_ms <= MAX_DELAY_MS:
            raise ValueError(f"delay_ms must be within 0..{MAX_DELAY_MS}, got {self.delay_ms}")
        if not 0.0 <= self.jitter_ms <= self.delay_ms:
            raise ValueError(
                f"jitter_ms must be within 0..delay_ms ({self.delay_ms}), got {self.jitter_ms}"
            )
        for name in ("loss_pct", "duplicate_pct", "reorder_pct"):
            value = getattr(self, name)
            if not 0.0 <= value <= 100.0:
                raise ValueError(f"{name} must be within 0..100, got {value}")
        if self.reorder_pct and not self.delay_ms:
            raise ValueError("reorder_pct needs a delay_ms (netem reorders by not delaying)")

    @property
    def packet_level(self) -> bool:
        return bool(self.loss_pct or self.duplicate_pct or self.reorder_pct)

    def hold_s(self, rng: random.Random) -> float:
        """How long bytes read now wait before they are passed on."""
        if self.delay_ms == 0.0:
            return 0.0
        return (self.delay_ms + rng.uniform(-self.jitter_ms, self.jitter_ms)) / 1000.0


HEALTHY = LinkFault()
Direction = tuple[int, int, str]  # (src, dst, kind)


@dataclass(frozen=True)
class NetworkFaults:
    """Every rule in force; directions not named are healthy. Immutable, so the proxy
    thread reads a consistent set while the scenario swaps in the next one."""

    rules: Mapping[Direction, LinkFault]

    def __post_init__(self) -> None:
        for src, dst, kind in self.rules:
            if src == dst:
                raise ValueError(f"a link joins two nodes, got {src} -> {dst}")
            if kind not in KINDS:
                raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")

    def fault(self, src: int, dst: int, kind: str) -> LinkFault:
        return self.rules.get((src, dst, kind), HEALTHY)

    def describe(self) -> list[str]:
        """One line per rule, for the chaos history."""
        out = []
        for (src, dst, kind), f in sorted(self.rules.items()):
            parts = ["drop"] if f.drop else []
            if f.delay_ms:
                parts.append(f"delay {f.delay_ms:g}±{f.jitter_ms:g} ms")
            for name, pct in (
                ("loss", f.loss_pct),
                ("duplicate", f.duplicate_pct),
                ("reorder", f.reorder_pct),
            ):
                if pct:
                    parts.append(f"{name} {pct:g}%")
            out.append(f"{src}->{dst} {kind}: {', '.join(parts) or 'healthy'}")
        return out


def healthy() -> NetworkFaults:
    return NetworkFaults({})


def _directions(
    pairs: Iterable[tuple[int, int]], kinds: Iterable[str], fault: LinkFault
) -> dict[Direction, LinkFault]:
    return {(s, d, k): fault for s, d in pairs for k in kinds}


def partition(sides: Iterable[Iterable[int]], kinds: Iterable[str] = KINDS) -> NetworkFaults:
    """Nodes on different sides hear nothing from each other (both directions)."""
    groups = [frozenset(s) for s in sides]
    seen: set[int] = set()
    for g in groups:
        if not g or g & seen:
            raise ValueError(f"sides must be non-empty and disjoint, got {groups}")
        seen |= g
    pairs = [(a, b) for g in groups for h in groups if g is not h for a in g for b in h]
    return NetworkFaults(_directions(pairs, tuple(kinds), LinkFault(drop=True)))


def bridge(left: int, middle: int, right: int, kinds: Iterable[str] = KINDS) -> NetworkFaults:
    """`left` and `right` are cut from each other; `middle` still talks to both."""
    if len({left, middle, right}) != 3:
        raise ValueError(f"a bridge needs three nodes, got {left}, {middle}, {right}")
    return NetworkFaults(
        _directions([(left, right), (right, left)], tuple(kinds), LinkFault(drop=True))
    )


def one_way(src: int, dst: int, kinds: Iterable[str] = KINDS) -> NetworkFaults:
    """What `src` sends `dst` is lost; the other direction is delivered."""
    return NetworkFaults(_directions([(src, dst)], tuple(kinds), LinkFault(drop=True)))


def delay(
    nodes: Iterable[int],
    delay_ms: float,
    jitter_ms: float,
    kinds: Iterable[str] = KINDS,
    **packet: float,
) -> NetworkFaults:
    """Every direction between `nodes` delayed by delay_ms ± jitter_ms, with
    `loss_pct`/`duplicate_pct`/`reorder_pct` when given (compose only)."""
    ns = sorted(set(nodes))
    pairs = [(a, b) for a in ns for b in ns if a != b]
    fault = LinkFault(False, delay_ms, jitter_ms, **packet)
    return NetworkFaults(_directions(pairs, tuple(kinds), fault))
