"""The chaos scenarios: faults against a `Target`, combined.

`SCENARIOS`: kill-leader, chase-leader (SIGKILL) and chase-leader-term (SIGTERM),
pause-leader, partition-leader, corrupt-follower-disk, kill-during-roll, storm,
many-partitions (a flooded 1,000-partition topic and a killed node; the cluster must
recover by itself). Each writes "fault" events into the history and leaves the
cluster for `heal()`.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from seglog.client.errors import KafkaError
from seglog.client.producer import Producer

from .cluster_view import ClusterView
from .disk_damage import CORRUPTION_MODES
from .targets import REPLICA_LAG_TIME_MAX_S, Target
from .workload import History


@dataclass
class FaultContext:
    target: Target
    view: ClusterView
    history: History
    rng: random.Random
    partitions: int
    deadline: float  # monotonic: when the fault phase should end
    log: Callable[[str], None] = print
    faults: list[dict[str, Any]] = field(default_factory=list)

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    def fault(self, name: str, phase: str, node: int | None = None, **detail: Any) -> None:
        event = {"type": "fault", "name": name, "phase": phase, "node": node, **detail}
        self.history.append(event)
        self.faults.append({**event, "t": time.time()})
        where = f" node {node}" if node is not None else ""
        extra = f" {detail}" if detail else ""
        self.log(f"[chaos] {name} {phase}{where}{extra}")

    def leader(self, partition: int | None = None) -> tuple[int, int]:
        """(partition, its leader) for the given or a random partition; waits a bit
        for a leader to exist."""
        p = self.rng.randrange(self.partitions) if partition is None else partition
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                leader = self.view.leader_of(p)
                if leader >= 0:
                    return p, leader
            except KafkaError:
                pass
            time.sleep(0.3)
        return p, -1

    def settle(self, timeout_s: float = 20.0) -> bool:
        """Wait until every partition is led with a full ISR (bounded)."""
        return self.view.wait_converged(self.partitions, timeout_s)


def _kill_and_restart(
    ctx: FaultContext, name: str, sig: str, partition: int | None, down_s: float
) -> None:
    p, leader = ctx.leader(partition)
    if leader < 0:
        ctx.fault(name, "info", None, partition=p, detail="no leader to kill")
        return
    ctx.fault(name, "start", leader, partition=p, signal=sig)
    ctx.target.kill(leader, sig)
    new = ctx.view.wait_new_leader(p, leader, 20)
    ctx.fault(name, "info", leader, partition=p, new_leader=new)
    ctx.sleep(down_s)
    ctx.target.start(leader)
    ctx.fault(name, "end", leader, partition=p)


def kill_leader(ctx: FaultContext) -> None:
    """SIGKILL the leader of partition 0 once; restart it after a while."""
    _kill_and_restart(ctx, "kill-leader", "KILL", 0, min(8.0, max(2.0, ctx.remaining() / 3)))


def _chase(ctx: FaultContext, sig: str) -> None:
    """Five times in a row: kill the current leader of one partition, wait for the
    next leader, bring the old one back, and kill the new leader as soon as the
    ISR is whole again (or after a bounded wait)."""
    name = "chase-leader" if sig == "KILL" else "chase-leader-term"
    p = ctx.rng.randrange(ctx.partitions)
    for i in range(5):
        _kill_and_restart(ctx, name, sig, p, 1.0)
        ctx.fault(name, "info", None, round=i + 1, converged=ctx.settle(15))


def chase_leader(ctx: FaultContext) -> None:
    """SIGKILL the leader of one partition five times in a row, chasing each new leader."""
    _chase(ctx, "KILL")


def chase_leader_term(ctx: FaultContext) -> None:
    """SIGTERM (a clean shutdown) the leader of one partition five times in a row."""
    _chase(ctx, "TERM")


def _pause(ctx: FaultContext, seconds: float, partition: int | None = None) -> None:
    p, leader = ctx.leader(partition)
    if leader < 0:
        return
    ctx.fault("pause-leader", "start", leader, partition=p, seconds=round(seconds, 1))
    ctx.target.pause(leader)
    ctx.sleep(seconds)
    ctx.target.resume(leader)
    ctx.fault("pause-leader", "end", leader, partition=p)


def pause_leader(ctx: FaultContext) -> None:
    """Freeze the leader for longer than replica.lag.time.max.ms, repeatedly."""
    while True:
        _pause(ctx, REPLICA_LAG_TIME_MAX_S * 1.6)
        ctx.settle(20)
        if ctx.remaining() < REPLICA_LAG_TIME_MAX_S * 2:
            return
        ctx.sleep(3)


def _isolate(ctx: FaultContext, seconds: float, partition: int | None = None) -> None:
    p, leader = ctx.leader(partition)
    if leader < 0:
        return
    how = "network disconnect" if ctx.target.name == "compose" else "SIGSTOP (loopback)"
    ctx.fault("partition-leader", "start", leader, partition=p, seconds=round(seconds, 1), how=how)
    ctx.target.isolate(leader)
    ctx.sleep(seconds)
    ctx.target.reconnect(leader)
    ctx.fault("partition-leader", "end", leader, partition=p)


def partition_leader(ctx: FaultContext) -> None:
    """Cut the leader off from the other nodes (and clients) for ~10 s, repeatedly."""
    while True:
        _isolate(ctx, 10.0)
        ctx.settle(30)
        if ctx.remaining() < 15:
            return
        ctx.sleep(3)


def _corrupt_follower(ctx: FaultContext) -> None:
    states = ctx.view.partitions()
    nodes = [n for n in ctx.target.node_ids if any(p.leader not in (n, -1) for p in states)]
    if not nodes:
        return
    follower = ctx.rng.choice(nodes)
    followed = [p.partition for p in states if p.leader != follower and follower in p.replicas]
    ctx.rng.shuffle(followed)
    mode = ctx.rng.choice(CORRUPTION_MODES)
    seed = ctx.rng.randrange(2**31)
    ctx.fault("corrupt-follower-disk", "start", follower, mode=mode, candidates=followed)
    # SIGKILL: an unclean stop, so start-up runs recovery from the recovery point.
    ctx.target.kill(follower, "KILL")
    what = ctx.target.corrupt(follower, ctx.view.topic, followed, mode, seed)
    ctx.fault("corrupt-follower-disk", "info", follower, corruption=what)
    ctx.target.start(follower)
    ctx.fault("corrupt-follower-disk", "end", follower)


def corrupt_follower_disk(ctx: FaultContext) -> None:
    """While a follower is down, damage a closed segment or index of one of its
    partitions; on restart recovery must repair it (truncate and refetch)."""
    ctx.sleep(min(8.0, ctx.remaining() / 3))  # let some segments close first
    while True:
        _corrupt_follower(ctx)
        ctx.settle(30)
        if ctx.remaining() < 10:
            return
        ctx.sleep(3)


def kill_during_roll(ctx: FaultContext) -> None:
    """Small segments roll every few hundred records: SIGKILL a node (a random
    one, leader of some partitions) under load, restart it, repeat."""
    while True:
        node = ctx.rng.choice(ctx.target.node_ids)
        ctx.fault("kill-during-roll", "start", node, signal="KILL")
        ctx.target.kill(node, "KILL")
        ctx.sleep(ctx.rng.uniform(1.0, 4.0))
        ctx.target.start(node)
        ctx.fault("kill-during-roll", "end", node)
        ctx.settle(20)
        if ctx.remaining() < 8:
            return
        ctx.sleep(ctx.rng.uniform(1.0, 4.0))


def _restart_node(ctx: FaultContext) -> None:
    node = ctx.rng.choice(ctx.target.node_ids)
    ctx.fault("restart-node", "start", node)
    ctx.target.restart(node)
    ctx.fault("restart-node", "end", node)


def storm(ctx: FaultContext) -> None:
    """A seeded mix of every fault, one at a time, with short pauses between."""
    actions: list[tuple[str, Callable[[], None]]] = [
        (
            "kill-leader",
            lambda: _kill_and_restart(ctx, "kill-leader", "KILL", None, ctx.rng.uniform(0.5, 6)),
        ),
        (
            "term-leader",
            lambda: _kill_and_restart(ctx, "term-leader", "TERM", None, ctx.rng.uniform(0.5, 4)),
        ),
        ("pause-leader", lambda: _pause(ctx, ctx.rng.uniform(2, REPLICA_LAG_TIME_MAX_S * 2))),
        ("partition-leader", lambda: _isolate(ctx, ctx.rng.uniform(3, 12))),
        ("corrupt-follower-disk", lambda: _corrupt_follower(ctx)),
        ("restart-node", lambda: _restart_node(ctx)),
    ]
    ctx.sleep(min(3.0, ctx.remaining() / 4))
    while ctx.remaining() > 5:
        name, action = ctx.rng.choice(actions)
        action()
        if ctx.rng.random() < 0.6:
            ctx.settle(ctx.rng.uniform(3, 15))  # sometimes strike again before the ISR heals
        ctx.sleep(ctx.rng.uniform(0.5, 4))


WIDE_TOPIC = "chaos-wide"
WIDE_PARTITIONS = 1000


def _flood(target: Target, stop: threading.Event, sent: list[int]) -> None:
    """Keyed acks=all records to the wide topic as fast as one Producer sends them,
    with short delivery timeouts: beyond what the cluster serves, so records pile up
    and time out; none of them is checked (the workload's topic is)."""
    p = Producer(
        target.bootstrap,
        acks="all",
        linger_ms=0,
        delivery_timeout_ms=5_000,
        request_timeout_ms=3_000,
        **target.security,
    )
    n = 0
    try:
        while not stop.is_set():
            try:
                p.send(WIDE_TOPIC, key=b"%d" % n, value=b"w" * 300)
                n += 1
            except KafkaError:
                time.sleep(0.01)  # a full buffer: keep pushing
    finally:
        sent.append(n)
        p.close(0)


def many_partitions(ctx: FaultContext) -> None:
    """Thousands of partitions and overload: a second topic of 1,000 partitions (RF=3)
    beside the workload's, flooded by two producers beyond what the cluster serves,
    while a node is SIGKILLed and restarted (its leaderships move, hundreds of ISRs
    shrink and grow again). Then the flood stops, and the cluster must come back by
    itself: every partition of both topics led, with a full ISR, agreed by every node."""
    wide = ClusterView(ctx.target, WIDE_TOPIC)
    try:
        wide.create_topic(WIDE_PARTITIONS, {"min.insync.replicas": "2"}, 120)
        ctx.fault(
            "many-partitions",
            "info",
            None,
            partitions=WIDE_PARTITIONS,
            converged=wide.wait_converged(WIDE_PARTITIONS, 120),
        )
        stop = threading.Event()
        sent: list[int] = []
        floods = [
            threading.Thread(target=_flood, args=(ctx.target, stop, sent), daemon=True)
            for _ in range(2)
        ]
        ctx.fault("many-partitions", "start", None, producers=len(floods))
        for t in floods:
            t.start()
        ctx.sleep(min(10.0, max(2.0, ctx.remaining() / 4)))
        victim = ctx.rng.choice(ctx.target.node_ids)
        ctx.fault("many-partitions", "info", victim, kill="KILL")
        ctx.target.kill(victim, "KILL")
        ctx.sleep(3.0)
        ctx.target.start(victim)
        ctx.sleep(min(10.0, max(2.0, ctx.remaining() / 3)))
        stop.set()
        for t in floods:
            t.join(30)
        recovered = wide.wait_converged(WIDE_PARTITIONS, 90) and ctx.settle(60)
        # Recorded, not raised: the run still heals and reads everything back, and the
        # report (and the test) judge the recovery.
        ctx.fault("many-partitions", "end", None, flooded=sum(sent), recovered=recovered)
    finally:
        wide.close()


@dataclass(frozen=True)
class Scenario:
    name: str
    run: Callable[[FaultContext], None]
    # Topic-level overrides: small segments where rolls or closed segments matter.
    topic_configs: dict[str, str]


_SMALL = {"segment.bytes": "32768"}
SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("kill-leader", kill_leader, {}),
        Scenario("chase-leader", chase_leader, {}),
        Scenario("chase-leader-term", chase_leader_term, {}),
        Scenario("pause-leader", pause_leader, {}),
        Scenario("partition-leader", partition_leader, {}),
        Scenario("corrupt-follower-disk", corrupt_follower_disk, {"segment.bytes": "16384"}),
        Scenario("kill-during-roll", kill_during_roll, {"segment.bytes": "16384"}),
        Scenario("storm", storm, _SMALL),
        Scenario("many-partitions", many_partitions, {}),
    )
}
