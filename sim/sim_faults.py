"""The replication simulator's faults: which node may fail when (the safe mode's budget),
power failures, failed fsyncs' halts, pauses, network cuts, restarts with a new
registration, and the quiet end. A part of `Simulation`, kept in its own class so each
stays one idea."""

from __future__ import annotations

import random
from typing import Any

from seglog.sim.disk_log import DiskLog
from seglog.sim.replication_model import CONTROLLER, WILD, SimNode, SimulationState


class SimFaults(SimulationState):
    # The simulation's state only the faults use besides the shared one.
    rng: random.Random
    cuts: set[frozenset[int]]
    faults_active: bool
    quiescing: bool

    def _node_receive(self, node: SimNode, src: int, payload: tuple[Any, ...]) -> None:
        raise NotImplementedError

    def _faulty(self, node: SimNode) -> bool:
        """Down, paused, not (re-)registered, or - after a power failure or pause - not yet
        holding the committed prefix again. A node merely cut off is not faulty."""
        if not node.up or node.paused or not node.registered:
            return True
        if node.id in self.controller.fenced:
            return True
        if self.controller.broker_epochs[node.id] != node.broker_epoch:
            return True
        if node.recovering:
            if not all(self._holds_committed(node, p) for p in node.hosted):
                return True
            node.recovering = False
        return False

    def _holds_committed(self, node: SimNode, p: int) -> bool:
        c = self.committed[p]
        log = node.logs[p]
        return log.log_end_offset >= c.end and log.prefix(c.end) == c.data

    def _may_fail(self, node: SimNode, power: bool) -> bool:
        others = [n for n in self.nodes.values() if n is not node]
        if self.params.mode == WILD:
            # Keep at least one node running.
            down = sum(1 for n in others if not n.up or n.paused)
            return node.up and not node.paused and down < len(others)
        if not node.up or node.paused or any(self._faulty(n) for n in others):
            return False
        if power:
            # Another ISR member must survive with the committed prefix: in the ISR the
            # controller holds, and in the one the node's AlterPartition still in flight
            # may install after the failure (a shrink to the node alone, accepted while
            # its session lasts, would leave only the lost tail in the ISR).
            for p in node.hosted:
                isrs = [self.controller.partitions[p].isr]
                pending = node.replicas[p].pending_isr_change
                if pending is not None:
                    isrs.append(pending.new_isr)
                for isr in isrs:
                    if node.id in isr and not any(
                        r != node.id
                        and not self._faulty(self.nodes[r])
                        and self._holds_committed(self.nodes[r], p)
                        for r in isr
                    ):
                        return False
        return True

    def _on_fault(self) -> None:
        if not self.faults_active:
            return
        self.at(self.now + self.rng.randint(*self.params.fault_gap_ms), "fault")
        roll = self.rng.random()
        node = self.nodes[self.rng.choice(sorted(self.nodes))]
        leader = self.controller.partitions[self.rng.randrange(self.params.partitions)].leader
        if leader >= 0 and self.rng.random() < 0.6:
            node = self.nodes[leader]  # leader failures exercise elections and truncation
        if roll < 0.3:
            if self._may_fail(node, power=True):
                self.crash(node)
        elif roll < 0.5:
            if self._may_fail(node, power=False):
                long = self.rng.random() < 0.6
                lag = self.params.lag_ms
                span = (
                    self.rng.randint(lag + 200, 2 * lag + 500)
                    if long
                    else self.rng.randint(50, 400)
                )
                node.paused = True
                node.recovering = True
                self.structure += 1
                self.stats["pauses"] += 1
                self.trace(f"FAULT pause n{node.id} for {span} ms")
                self.at(self.now + span, "resume", node.id)
        elif roll < 0.8:
            self.stats["cuts"] += 1
            if self.rng.random() < 0.5:
                pairs = [frozenset((node.id, o)) for o in self.nodes if o != node.id]
            else:
                other = self.rng.choice([o for o in sorted(self.nodes) if o != node.id])
                pairs = [frozenset((node.id, other))]
            span = self.rng.randint(200, 3000)
            self.cuts.update(pairs)
            self.trace(f"FAULT cut {[sorted(x) for x in pairs]} for {span} ms")
            self.at(self.now + span, "heal", pairs)

    def crash(self, node: SimNode) -> None:
        self.structure += 1
        self.stats["crashes"] += 1
        lost = {p: (log.log_end_offset, log.recovery_point) for p, log in node.logs.items()}
        self.trace(f"FAULT power failure n{node.id} (LEO, flushed) {lost}")
        node.up = False
        node.paused = False
        node.recovering = True
        node.inbox.clear()
        node.registered = False
        node.logs = {p: self.prepare_log(log.crash()) for p, log in node.logs.items()}
        for log in node.logs.values():
            if isinstance(log, DiskLog) and log.recovered_torn_write:
                self.stats["torn_writes"] += 1
        node.replicas = {}
        node.alter.reset()
        self.at(self.now + self.rng.randint(100, 2000), "restart", node.id)

    def _on_restart(self, b: int) -> None:
        self.structure += 1
        node = self.nodes[b]
        node.up = True
        node.incarnation += 1
        node.broker_epoch = -1
        node.alive_epochs = {}
        node.make_replicas()
        self.trace(f"restart n{b}: " + " ".join(f"p{p}:{log!r}" for p, log in node.logs.items()))
        self.at(
            self.now + self.rng.randint(5, 100),
            "msg",
            b,
            CONTROLLER,
            ("register", node.incarnation),
        )

    def _on_resume(self, b: int) -> None:
        self.structure += 1
        node = self.nodes[b]
        node.paused = False
        self.trace(f"resume n{b} with {len(node.inbox)} queued messages")
        inbox, node.inbox = node.inbox, []
        for src, payload in inbox:
            if not node.up or node.paused:
                break
            self._node_receive(node, src, payload)

    def _on_heal(self, pairs: list[frozenset[int]]) -> None:
        self.cuts.difference_update(pairs)
        self.trace(f"heal {[sorted(x) for x in pairs]}")

    def _on_quiesce(self) -> None:
        self.faults_active = False
        self.quiescing = True
        self.cuts.clear()
        self.trace("quiesce: faults stop, partitions healed")
        self.at(self.now + 250, "converged")
