"""The chaos scenarios: faults against a `Target`, combined.

`SCENARIOS`: kill-leader, chase-leader (SIGKILL) and chase-leader-term (SIGTERM),
pause-leader, partition-leader, corrupt-follower-disk, kill-during-roll, storm,
many-partitions (a flooded 1,000-partition topic and a killed node; the cluster must
recover by itself), the disk and clock faults of the fault-injection file: disk-full,
fsync-failure, slow-disk, clock-jump, clock-skew (docs/disk-and-clock-faults.md; on
compose the file is mounted into every container), on the local target the network
faults of its per-link proxies:
leader-cut-off, leader-cut-from-followers, majority-minority, bridge, one-way,
slow-links, and on compose lossy-links (docs/network-faults.md), and the gray failures
of issue 39: broker-frozen, controller-frozen, slow-node, blocked-disk and
frozen-clock-jump (both targets). Each writes "fault"
events into the history and leaves the cluster for `heal()`.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from seglog.client.errors import KafkaError
from seglog.client.producer import Producer

from .cluster_view import ClusterView
from .disk_damage import CORRUPTION_MODES
from .link_faults import NetworkFaults, bridge, delay, healthy, one_way, partition
from .targets import NODE_IDS, REPLICA_LAG_TIME_MAX_S, Target
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

    def victim(self, leader_share: float = 1.0) -> tuple[int, int]:
        """(a random partition, a node to strike): the partition's leader (with a
        probability of `leader_share`) when it has one, else a random node."""
        p, leader = self.leader()
        if leader >= 0 and (leader_share >= 1.0 or self.rng.random() < leader_share):
            return p, leader
        return p, self.rng.choice(self.target.node_ids)

    def hold(
        self,
        name: str,
        node: int | None,
        seconds: float,
        begin: Callable[[], object],
        undo: Callable[[], object],
        start: dict[str, Any] | None = None,
        **detail: Any,
    ) -> None:
        """One fault for `seconds`: recorded as started (with `detail`, the seconds and
        `start`), begun, undone after the seconds, recorded as ended (with `detail`)."""
        self.fault(name, "start", node, **detail, seconds=round(seconds, 1), **(start or {}))
        begin()
        self.sleep(seconds)
        undo()
        self.fault(name, "end", node, **detail)


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
    pause, resume = partial(ctx.target.pause, leader), partial(ctx.target.resume, leader)
    ctx.hold("pause-leader", leader, seconds, pause, resume, partition=p)


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
    isolate, reconnect = partial(ctx.target.isolate, leader), partial(ctx.target.reconnect, leader)
    ctx.hold("partition-leader", leader, seconds, isolate, reconnect, {"how": how}, partition=p)


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


# --- disk and clock faults (the fault-injection file) -----------------------------------


def _faults_on(ctx: FaultContext, name: str, node: int, seconds: float, **faults: Any) -> None:
    """Give `node` these faults for `seconds`, then clear them."""
    inject = partial(ctx.target.inject, {"node_ids": [node], **faults})
    ctx.hold(name, node, seconds, inject, partial(ctx.target.inject, {}), faults)


def _leaders(ctx: FaultContext, min_left_s: float) -> Iterator[tuple[int, int]]:
    """After a short warm-up, a random partition and its leader, again each time the
    caller is done with one, while the run has more than `min_left_s` left (none once
    a partition has no leader)."""
    ctx.sleep(min(3.0, ctx.remaining() / 4))
    while ctx.remaining() > min_left_s:
        p, leader = ctx.leader()
        if leader < 0:
            return
        yield p, leader


def disk_full(ctx: FaultContext) -> None:
    """The leader's disk fills up (ENOSPC, the write that crosses the limit partial):
    its produces fail with KAFKA_STORAGE_ERROR and nothing of them stays, its reads go
    on, it stays up; when space returns it takes writes again. Repeatedly."""
    for p, leader in _leaders(ctx, 12):
        free = ctx.rng.choice([0, 1_000, 20_000, 200_000])
        _faults_on(ctx, "disk-full", leader, ctx.rng.uniform(5, 12), disk_free_bytes=free)
        ctx.fault("disk-full", "info", leader, partition=p, still_up=not ctx.target.is_down(leader))
        ctx.settle(20)
        ctx.sleep(ctx.rng.uniform(1, 3))


def fsync_failure(ctx: FaultContext) -> None:
    """An fsync on the leader fails (EIO): its log dir goes offline and, having one,
    the node halts with exit code 1 (Kafka's log.dir failure handling); leaders move,
    no acknowledged record is lost. The disk is replaced (faults cleared), the node
    restarts and recovers its log. Repeatedly."""
    for p, leader in _leaders(ctx, 20):
        ctx.fault("fsync-failure", "start", leader, partition=p)
        ctx.target.inject({"node_ids": [leader], "fsync_failure": True})
        deadline = time.monotonic() + 30
        while not ctx.target.is_down(leader) and time.monotonic() < deadline:
            time.sleep(0.2)
        halted = ctx.target.is_down(leader)
        tail = [line for line in ctx.target.node_log_tail(leader, 400) if "log_dir_failed" in line]
        ctx.fault(
            "fsync-failure",
            "info",
            leader,
            halted=halted,
            new_leader=ctx.view.wait_new_leader(p, leader, 20) if halted else leader,
            log_dir_failed=tail[-1][:300] if tail else None,
        )
        ctx.target.inject({})
        if halted:
            ctx.target.start(leader)
        ctx.fault("fsync-failure", "end", leader)
        ctx.settle(30)
        ctx.sleep(ctx.rng.uniform(1, 3))


def slow_disk(ctx: FaultContext) -> None:
    """Every segment write and fsync of one node (then another) waits 20-200 ms."""
    while ctx.remaining() > 8:
        node = ctx.rng.choice(ctx.target.node_ids)
        delay = ctx.rng.choice([20, 50, 100, 200])
        _faults_on(ctx, "slow-disk", node, ctx.rng.uniform(6, 15), write_delay_ms=delay)
        ctx.settle(20)


def clock_jump(ctx: FaultContext) -> None:
    """A node's wall clock steps back, then forward (NTP steps of minutes to hours),
    with a leader among the victims: replication timers run on the monotonic clock,
    so fetches go on and no ISR shrinks for it."""
    steps = [-120_000, 120_000, -3_600_000, 3_600_000]
    while ctx.remaining() > 8:
        _p, node = ctx.victim(leader_share=0.6)
        step = ctx.rng.choice(steps)
        _faults_on(ctx, "clock-jump", node, ctx.rng.uniform(5, 12), clock_offset_ms=step)
        ctx.fault("clock-jump", "info", None, converged=ctx.settle(15))


def clock_skew(ctx: FaultContext) -> None:
    """Two nodes' clocks (wall and monotonic) run fast and slow for the whole run."""
    fast, slow = ctx.rng.sample(list(ctx.target.node_ids), 2)
    ctx.fault("clock-skew", "start", None, fast=fast, slow=slow)
    ctx.target.inject(
        {"node_ids": [fast], "clock_skew": 0.5}
    )  # one file for all nodes: one skewed node at a time
    half = max(4.0, ctx.remaining() / 2 - 2)
    ctx.sleep(half)
    ctx.target.inject({"node_ids": [slow], "clock_skew": -0.3})
    ctx.sleep(max(0.0, ctx.remaining() - 3))
    ctx.target.inject({})
    ctx.fault("clock-skew", "end", None, converged=ctx.settle(20))


# --- gray failures (issue 39): a node that hangs rather than dies ------------------------


def _freeze_process(ctx: FaultContext, name: str, role: str, seconds: float) -> None:
    """Freeze one process of a node (the leader's, mostly), the other running on."""
    p, node = ctx.victim(leader_share=0.7)
    freeze = partial(ctx.target.pause_process, node, role)
    thaw = partial(ctx.target.resume_process, node, role)
    ctx.hold(name, node, seconds, freeze, thaw, partition=p, process=role)


def broker_frozen(ctx: FaultContext) -> None:
    """The broker process of a node (the leader's, mostly) freezes while its controller
    process runs on, as a deadlock or a wedged loop looks from outside: the controller
    process stops relaying its heartbeats, it is fenced within a session and its
    partitions fail over; thawed, it catches up and rejoins. Repeatedly."""
    while ctx.remaining() > 12:
        _freeze_process(ctx, "broker-frozen", "broker", ctx.rng.uniform(3, 8))
        ctx.fault("broker-frozen", "info", None, converged=ctx.settle(30))
        ctx.sleep(ctx.rng.uniform(1, 3))


def controller_frozen(ctx: FaultContext) -> None:
    """A node's controller process freezes while its broker serves: the broker's
    heartbeats stop (fenced, its leaderships move) and its metadata stops coming; the
    Raft quorum goes on with the other two voters (a new active controller when it was
    the active one). Thawed, it catches up and its broker rejoins. Repeatedly."""
    while ctx.remaining() > 12:
        _freeze_process(ctx, "controller-frozen", "controller", ctx.rng.uniform(3, 8))
        ctx.fault("controller-frozen", "info", None, converged=ctx.settle(30))
        ctx.sleep(ctx.rng.uniform(1, 3))


def slow_node(ctx: FaultContext) -> None:
    """A node that runs in fits and starts (CPU starved, swapping): its whole process
    group is stopped and continued in duty cycles (stopped 100-400 ms of every
    500-800 ms) for a while, then runs freely. Some of its sessions may run out (fenced,
    then back); nothing acknowledged may be lost."""
    while ctx.remaining() > 10:
        p, node = ctx.victim()
        stopped_ms = ctx.rng.choice([100, 200, 300, 400])
        period_ms = stopped_ms + ctx.rng.choice([400, 600])
        seconds = ctx.rng.uniform(6, 12)
        ctx.fault(
            "slow-node",
            "start",
            node,
            partition=p,
            seconds=round(seconds, 1),
            stopped_ms=stopped_ms,
            period_ms=period_ms,
        )
        until = time.monotonic() + seconds
        cycles = 0
        # Bounded by `seconds`.
        while time.monotonic() < until:
            ctx.target.pause(node)
            time.sleep(stopped_ms / 1000)
            ctx.target.resume(node)
            time.sleep((period_ms - stopped_ms) / 1000)
            cycles += 1
        ctx.fault("slow-node", "end", node, partition=p, cycles=cycles)
        ctx.fault("slow-node", "info", None, converged=ctx.settle(30))
        ctx.sleep(ctx.rng.uniform(1, 3))


def blocked_disk(ctx: FaultContext) -> None:
    """The leader's disk stops answering: its segment writes and fsyncs block, neither
    failing nor progressing (the fault file's write_block). Past its stall bound the
    broker says so and is fenced, so its leaderships move; when the disk answers again
    it is unfenced and rejoins. Repeatedly."""
    for _p, leader in _leaders(ctx, 20):
        _faults_on(ctx, "blocked-disk", leader, ctx.rng.uniform(7, 12), write_block=True)
        ctx.fault("blocked-disk", "info", None, converged=ctx.settle(30))
        ctx.sleep(ctx.rng.uniform(1, 3))


def frozen_clock_jump(ctx: FaultContext) -> None:
    """A node freezes (both processes, a suspended VM) and its wall clock steps while it
    is frozen (NTP correcting the resumed VM's clock by minutes, either way): its
    monotonic timers see the pause itself, its logs' times the step. Nothing may act on
    the step as if time had passed (sessions, lag, retention run on the monotonic
    clock). Repeatedly, a leader among the victims."""
    while ctx.remaining() > 12:
        p, node = ctx.victim()
        seconds = ctx.rng.uniform(2, 5)
        step_ms = ctx.rng.choice([-300_000, -30_000, 30_000, 300_000])
        ctx.fault(
            "frozen-clock-jump",
            "start",
            node,
            partition=p,
            seconds=round(seconds, 1),
            clock_offset_ms=step_ms,
        )
        ctx.target.pause(node)
        ctx.sleep(seconds)
        ctx.target.inject({"node_ids": [node], "clock_offset_ms": step_ms})
        ctx.target.resume(node)
        ctx.sleep(ctx.rng.uniform(4, 8))
        ctx.target.inject({})
        ctx.fault("frozen-clock-jump", "end", node, partition=p)
        ctx.fault("frozen-clock-jump", "info", None, converged=ctx.settle(30))


# --- network faults (docs/network-faults.md: proxies locally, iptables and proxies on compose)


def _others(leader: int) -> list[int]:
    return [n for n in NODE_IDS if n != leader]


def _links_for(
    ctx: FaultContext,
    name: str,
    seconds: float,
    faults: NetworkFaults,
    node: int | None = None,
    **detail: Any,
) -> None:
    """Put `faults` on the links for `seconds`, then heal them; recorded as one fault
    (on `node`, the one the cut is about, when there is one)."""
    ctx.fault(name, "start", node, seconds=round(seconds, 1), links=faults.describe(), **detail)
    ctx.target.cut(faults)
    ctx.sleep(seconds)
    stats = ctx.target.link_stats()  # before healing flushes the rules' counters
    ctx.target.cut(healthy())
    ctx.fault(name, "end", node, **stats)


def _repeat(ctx: FaultContext, one: Callable[[], None], min_left_s: float) -> None:
    """`one` fault, let the cluster settle, again while the run has time for another."""
    while ctx.remaining() > min_left_s:
        one()
        ctx.settle(30)
        ctx.sleep(ctx.rng.uniform(1, 3))


def leader_cut_off(ctx: FaultContext) -> None:
    """Jepsen's partition of the leader: it hears nothing from the other nodes (Raft,
    controller RPCs, fetches) while clients still reach it — the stale leader that keeps
    taking produces on its side of the cut must not get any acknowledged (min ISR 2),
    and its log is truncated to the new leader's when the cut heals."""

    def one() -> None:
        p, leader = ctx.leader()
        if leader >= 0:
            cut = partition([[leader], _others(leader)])
            _links_for(
                ctx,
                "leader-cut-off",
                ctx.rng.uniform(6, 12),
                cut,
                leader,
                partition=p,
                leader=leader,
            )

    _repeat(ctx, one, 15)


def leader_cut_from_followers(ctx: FaultContext) -> None:
    """Only replication is cut: the leader still talks to the controller, so it stays
    leader, its followers stop fetching, the ISR shrinks to the leader and acks=all
    produces fail with NOT_ENOUGH_REPLICAS until the cut heals and the ISR grows back."""

    def one() -> None:
        p, leader = ctx.leader()
        if leader >= 0:
            cut = partition([[leader], _others(leader)], kinds=("replication",))
            seconds = REPLICA_LAG_TIME_MAX_S * ctx.rng.uniform(1.5, 2.5)
            _links_for(
                ctx, "leader-cut-from-followers", seconds, cut, leader, partition=p, leader=leader
            )

    _repeat(ctx, one, 20)


def majority_minority(ctx: FaultContext) -> None:
    """Random majority/minority splits (one node against two), every node in turn."""

    def one() -> None:
        alone = ctx.rng.choice(NODE_IDS)
        cut = partition([[alone], _others(alone)])
        _links_for(ctx, "majority-minority", ctx.rng.uniform(5, 10), cut, alone, minority=[alone])

    _repeat(ctx, one, 12)


def bridge_partition(ctx: FaultContext) -> None:
    """Jepsen's bridge: two nodes cannot hear each other, the third hears both. With the
    leader at one end, the controller quorum and the ISR must still agree on one leader."""

    def one() -> None:
        p, leader = ctx.leader()
        if leader >= 0:
            middle = ctx.rng.choice(_others(leader))
            (right,) = [n for n in _others(leader) if n != middle]
            cut = bridge(leader, middle, right)
            _links_for(
                ctx, "bridge", ctx.rng.uniform(6, 12), cut, leader, partition=p, middle=middle
            )

    _repeat(ctx, one, 15)


def one_way_drop(ctx: FaultContext) -> None:
    """Asymmetric: what one node sends another is lost, the other way is delivered —
    the leader's answers to a follower, or a follower's fetches, or the leader's Raft
    messages to a voter."""

    def one() -> None:
        p, leader = ctx.leader()
        if leader >= 0:
            other = ctx.rng.choice(_others(leader))
            src, dst = (leader, other) if ctx.rng.random() < 0.5 else (other, leader)
            cut = one_way(src, dst)
            _links_for(
                ctx, "one-way", ctx.rng.uniform(6, 12), cut, leader, partition=p, src=src, dst=dst
            )

    _repeat(ctx, one, 15)


def slow_links(ctx: FaultContext) -> None:
    """netem-like delay with jitter on every link (each way), in bursts of growing
    delay, then one link much slower than the rest: replication and the quorum slow
    down but nothing acknowledged is lost and the ISR recovers."""
    for delay_ms in (20.0, 80.0, 250.0):
        if ctx.remaining() < 12:
            return
        cut = delay(NODE_IDS, delay_ms, delay_ms / 2)
        _links_for(ctx, "slow-links", min(10.0, ctx.remaining() / 3), cut, delay_ms=delay_ms)
        ctx.settle(30)
    p, leader = ctx.leader()
    if leader >= 0 and ctx.remaining() > 12:
        other = ctx.rng.choice(_others(leader))
        cut = delay([leader, other], 1000.0, 500.0)
        _links_for(ctx, "slow-links", 8.0, cut, partition=p, slow_pair=[leader, other])


def lossy_links(ctx: FaultContext) -> None:
    """Every link loses and duplicates packets at growing rates (iptables' random
    `statistic` match: DROP, and TEE for a clone): TCP retransmits and discards, the
    cluster slows down, nothing acknowledged is lost (compose: packets exist only there)."""
    for loss, dup in ((1.0, 1.0), (5.0, 2.0), (15.0, 5.0)):
        if ctx.remaining() < 12:
            return
        cut = delay(NODE_IDS, 0.0, 0.0, loss_pct=loss, duplicate_pct=dup)
        _links_for(ctx, "lossy-links", min(12.0, ctx.remaining() / 3), cut)
        ctx.settle(30)


def calm(ctx: FaultContext) -> None:
    """No fault: the baseline (`python -m seglog.chaos calibrate` measures the maximum
    acknowledged rate with it, the load the other scenarios are run at a share of)."""
    ctx.sleep(ctx.remaining())


@dataclass(frozen=True)
class Scenario:
    name: str
    run: Callable[[FaultContext], None]
    # Topic-level overrides: small segments where rolls or closed segments matter.
    topic_configs: dict[str, str]
    # Network faults: the local target's per-link proxies, or compose's iptables/netem.
    links: bool = False
    # The targets it runs on (lossy-links needs packets: compose).
    targets: tuple[str, ...] = ("local", "compose")
    # It delays links: on compose the delay proxies are in each node's path from the
    # cluster's start (chaos/delay_proxy.py).
    delays: bool = False
    # It reorders packets: on compose that needs the kernel's sch_netem
    # (chaos/compose_target.py netem_available).
    netem: bool = False


_SMALL = {"segment.bytes": "32768"}
SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("calm", calm, {}),
        Scenario("kill-leader", kill_leader, {}),
        Scenario("chase-leader", chase_leader, {}),
        Scenario("chase-leader-term", chase_leader_term, {}),
        Scenario("pause-leader", pause_leader, {}),
        Scenario("partition-leader", partition_leader, {}),
        Scenario("corrupt-follower-disk", corrupt_follower_disk, {"segment.bytes": "16384"}),
        Scenario("kill-during-roll", kill_during_roll, {"segment.bytes": "16384"}),
        Scenario("storm", storm, _SMALL),
        Scenario("many-partitions", many_partitions, {}),
        # Small segments: rolls (and their deferred fsyncs) happen within the run.
        Scenario("disk-full", disk_full, {"segment.bytes": "16384"}),
        Scenario("fsync-failure", fsync_failure, {"segment.bytes": "16384"}),
        Scenario("slow-disk", slow_disk, {}),
        Scenario("clock-jump", clock_jump, {}),
        Scenario("clock-skew", clock_skew, {}),
        # Gray failures (issue 39): one process frozen, fits and starts, a hung disk.
        Scenario("broker-frozen", broker_frozen, {}),
        Scenario("controller-frozen", controller_frozen, {}),
        Scenario("slow-node", slow_node, {}),
        Scenario("blocked-disk", blocked_disk, {}),
        Scenario("frozen-clock-jump", frozen_clock_jump, {}),
        Scenario("leader-cut-off", leader_cut_off, {}, links=True),
        Scenario("leader-cut-from-followers", leader_cut_from_followers, {}, links=True),
        Scenario("majority-minority", majority_minority, {}, links=True),
        Scenario("bridge", bridge_partition, {}, links=True),
        Scenario("one-way", one_way_drop, {}, links=True),
        Scenario("slow-links", slow_links, {}, links=True, delays=True),
        Scenario("lossy-links", lossy_links, {}, links=True, targets=("compose",)),
    )
}
