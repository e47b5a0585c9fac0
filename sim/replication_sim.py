"""A seeded, deterministic simulator of Kafka-style partition replication.

One `random.Random(seed)` drives everything (TigerBeetle's VOPR idea): the simulated
clock, the cluster shape, a network between nodes (delays, drops, duplicates, reordering,
partitions that heal), power failures, failed fsyncs, process pauses longer than
replica.lag.time.max.ms, and idempotent producers (acks=-1, some acks=1) that retry with
the same sequence numbers. What runs is production's code: the controller's decisions
(`cluster_control`, through `SimController` and the metadata-log codec), one
`PartitionReplica` per hosted partition, the `AlterPartitionBatcher`, and — with the
default `--storage disk` — production's `storage.log.Log` over tmpfs files, whose
crashes keep only what was fsynced (plus, maybe, a written-back prefix of the rest,
torn last batch included) and reopen through `Log`'s own recovery (`DiskLog`).
`--storage memory` runs `MemoryLog` instead: faster, the same append validation, held
to `Log`'s behaviour by tests/replication/test_log_equivalence.py. docs/simulators.md
says what is shared and what is simulated. So one seed replays any failure exactly:

    python -m seglog.sim.replication_sim --seed 42 --verbose

Checked after every event (docs/replication-rules.md, sections 6-7):
* synced followers are byte-identical prefixes of their leader (6.4-6.5): every follower
  that has fetched successfully in the current leader epoch has
  log[:its LEO] == leader log[:its LEO] (so in particular below the HW);
* a leader's HW never goes back during one leadership (7.4);
* no producer sequence appears twice in the committed log (leader log below its HW), and
  no message appears twice for a producer that never bumped its epoch (5.5);
* "safe" mode only: nothing ever below a leader's HW is lost - the committed prefix only
  grows, every new leader's log starts with it - and every acknowledged acks=-1 write is
  in it at its acknowledged offset.
At the end every fault is healed; the cluster must converge (all producers done, full
ISRs, identical logs, HW = LEO everywhere) and, in safe mode, every acks=-1 message is in
the log exactly once.

The safety claim ("safe" mode; RF=3, min.insync.replicas=2, clean elections) covers:
* any message drops, duplicates, delays/reordering, and network partitions between nodes
  of any length and number (the controller's channel is never cut: heartbeats are
  perfect, metadata is reliable and ordered but delayed, AlterPartition requests and
  answers may be dropped or delayed like other messages);
* at most RF - min.insync = 1 faulty node at a time, where a node is faulty from a power
  failure (losing its unflushed tail) or a pause (of up to 2.5 x replica.lag.time.max.ms)
  until it is up, re-registered and unfenced, and holds the whole committed prefix again;
* a power failure only while, for every partition whose ISR holds the node - the ISR at
  the controller, or the one an AlterPartition the node has in flight would install -
  another member of it is non-faulty and holds the committed prefix. This condition is
  needed: a node cut off by a partition is not faulty, yet it leaves the ISR, which may
  thus shrink to {A} (even after A's power failure, while its session lasts); a power
  failure of A then loses committed data in Kafka too (Kafka's promise is "as long as one
  in-sync replica survives", and an fsync-less power failure is not survival; KIP-966's
  eligible leader replicas are Kafka's later answer).
"Wild" mode drops these limits (up to all but one node down or paused at once, optional
unclean election): committed data may then be lost, so only convergence, prefix
identity, HW monotonicity and duplicate checks apply.
"""

from __future__ import annotations

import argparse
import heapq
import random
import shutil
import sys
import tempfile
from collections import deque
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from seglog.controller.cluster_control import ControlError
from seglog.replication.partition_replica import (
    NONE,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    Action,
    FetchRequest,
    FetchResponse,
    FlushLog,
    FollowerResponse,
    ListOffsetsRequest,
    OffsetsForLeaderEpochRequest,
    ProduceCompleted,
    ReplicaConfig,
    SendAlterPartition,
)
from seglog.replication.replica_messages import UNKNOWN_PRODUCER_ID
from seglog.sim.disk_log import SIM_LOG_CONFIG, DiskLog
from seglog.sim.memory_log import MemoryLog
from seglog.sim.replication_checks import ReplicationChecks
from seglog.sim.replication_model import (
    _TMPFS,
    ALTER_PARTITION_BACKOFF_MS,
    ALTER_PARTITION_TIMEOUT_MS,
    CONTROLLER,
    DISK,
    FSYNC_FAILURE,
    MEMORY,
    PRODUCER_BASE,
    SAFE,
    WILD,
    SimLog,
    SimNode,
    SimParams,
    SimProducer,
    SimulationFailure,
    _Ack,
    _Committed,
    draw_many_partitions_params,
    draw_params,
)
from seglog.sim.sim_controller import SimController
from seglog.sim.sim_faults import SimFaults
from seglog.sim.sim_flushes import SimFlushes
from seglog.storage.record_batch import (
    increment_sequence,
)

# --- the simulation -------------------------------------------------------------------


class Simulation(SimFaults, SimFlushes, ReplicationChecks):
    def __init__(
        self,
        seed: int,
        *,
        mode: str | None = None,
        verbose: bool = False,
        params: SimParams | None = None,
        many_partitions: bool = False,
        storage: str = DISK,
        clock_step_ms: int = 0,
        timers_on_wall_clock: bool = False,
        segment_bytes: int = SIM_LOG_CONFIG.segment_bytes,
        flush_messages: int = 0,
    ) -> None:
        self.seed = seed
        # Smaller segments: more rolls, and logs of dozens of segments (disk storage).
        self.log_config = replace(SIM_LOG_CONFIG, segment_bytes=segment_bytes)
        self.flush_messages = flush_messages  # SimFlushes
        if flush_messages:
            self.log_config = replace(self.log_config, flush_messages=flush_messages)
        self.flush_rng = random.Random(seed * 104729 + 3)
        # Wall-clock steps of +-clock_step_ms on random nodes (0: none); with
        # timers_on_wall_clock the replicas' timers read the stepped wall clock, as the
        # node's did before they moved to the monotonic clock (a step back stalled
        # fetch backoffs and ISR checks).
        self.clock_step_ms = clock_step_ms
        self.timers_on_wall_clock = timers_on_wall_clock
        self.storage = storage
        self.rng = random.Random(seed)
        draw = draw_many_partitions_params if many_partitions else draw_params
        self.params = params or draw(self.rng, mode)
        # A slow controller's queue, served one request at a time.
        self._controller_queue: deque[tuple[int, tuple[Any, ...]]] = deque()
        self._controller_busy = False
        self.verbose = verbose
        self.trace_tail: deque[str] = deque(maxlen=300)
        self.now = 0
        self.steps = 0
        self._queue: list[tuple[int, int, str, tuple[Any, ...]]] = []
        self._seq = 0
        prm = self.params
        self.config = ReplicaConfig(
            min_insync_replicas=prm.min_insync,
            replica_lag_time_max_ms=prm.lag_ms,
            replica_fetch_backoff_ms=100,
            replica_fetch_max_bytes=self.rng.choice((200, 1000, 1 << 20)),
            replica_request_timeout_ms=500,
            alter_partition_retry_ms=400,
        )
        node_ids = list(range(1, prm.nodes + 1))
        self.controller = SimController(
            node_ids, prm.partitions, prm.replication_factor, prm.unclean, self.rng
        )
        self.nodes: dict[int, SimNode] = {}
        # The disk logs' own seeded generator (crash write-back, segment jitter), so
        # storage's draws do not shift the simulation's.
        self._storage_rng = random.Random(seed * 7919 + 1)
        self._dir: Path | None = None
        if storage == DISK:
            self._dir = Path(tempfile.mkdtemp(prefix=f"seglog-sim-{seed}-", dir=_TMPFS))
        for b in node_ids:
            hosted = [p for p, st in self.controller.partitions.items() if b in st.replicas]
            logs = {p: self._new_log(b, p) for p in hosted}
            self.nodes[b] = SimNode(
                b, hosted, self.config, self.controller.broker_epochs[b], logs, self._clock
            )
        self.last_heartbeat = {b: 0 for b in node_ids}
        self.cuts: set[frozenset[int]] = set()
        self._meta_last: dict[int, int] = {b: 0 for b in node_ids}
        self.producers: dict[int, SimProducer] = {}
        pid = 5000
        for p in range(prm.partitions):
            for _ in range(prm.producers_per_partition):
                pr_id = PRODUCER_BASE + len(self.producers)
                acks = 1 if self.rng.random() < prm.acks1_share else -1
                self.producers[pr_id] = SimProducer(pr_id, pid, p, acks, prm.batches_per_producer)
                pid += 1
        self._next_request_id = 1
        self._request_owner: dict[int, tuple[int, int]] = {}
        self.faults_active = True
        self.quiescing = False
        self.finished = False
        # Checker state.
        self.committed = {p: _Committed() for p in range(prm.partitions)}
        self._committed_key: dict[int, object] = {}
        self._follower_key: dict[tuple[int, int], object] = {}
        self.hw_seen: dict[tuple[int, int, int, int], int] = {}
        self.structure = 0  # bumped by every change of roles, membership or liveness
        self._checked: tuple[int, int] = (-1, -1)
        self.pending_acks: list[_Ack] = []
        self.acked_msgs: dict[int, list[bytes]] = {pr: [] for pr in self.producers}
        self.stats = {
            "crashes": 0,
            "pauses": 0,
            "cuts": 0,
            "acks": 0,
            "alter_batches": 0,
            "fsync_failures": 0,
            "torn_writes": 0,
            "clock_steps": 0,
            "deferred_flushes": 0,
        }
        self.trace(f"params {prm}")

    # ------------------------------------------------------------------ plumbing

    def _new_log(self, node_id: int, p: int) -> SimLog:
        if self._dir is None:
            return MemoryLog(f"n{node_id}-p{p}")
        return self.prepare_log(
            DiskLog(
                self._dir / f"n{node_id}" / f"sim-{p}",
                self._clock,
                self._storage_rng,
                self.log_config,
            )
        )

    def _clock(self) -> int:
        return self.now

    def close(self) -> None:
        """Release the disk logs' files and remove their directory."""
        for node in self.nodes.values():
            for log in node.logs.values():
                if isinstance(log, DiskLog):
                    log.close()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def trace(self, line: str) -> None:
        text = f"{self.now:>7} {line}"
        self.trace_tail.append(text)
        if self.verbose:
            print(text)

    def fail(self, message: str) -> None:
        self.trace(f"FAILURE {message}")
        options = ""
        if self.clock_step_ms:
            options += f" --clock-step-ms {self.clock_step_ms}"
        if self.timers_on_wall_clock:
            options += " --timers-on-wall-clock"
        if self.storage != DISK:
            options += f" --storage {self.storage}"
        if self.flush_messages:
            options += f" --flush-messages {self.flush_messages}"
        raise SimulationFailure(
            self.seed, self.params.mode, message, list(self.trace_tail), options
        )

    def at(self, t: int, kind: str, *args: object) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (t, self._seq, kind, args))

    def send(self, src: int, dst: int, payload: tuple[Any, ...]) -> None:
        prm = self.params
        if self._cut(src, dst) or self.rng.random() < prm.drop:
            return
        self.at(self.now + self.rng.randint(1, prm.max_delay_ms), "msg", src, dst, payload)
        if self.rng.random() < prm.duplicate:
            self.at(self.now + self.rng.randint(1, prm.max_delay_ms * 3), "msg", src, dst, payload)

    def send_metadata(self, dst: int, payload: tuple[Any, ...]) -> None:
        """The metadata log: reliable, in order per node, delayed."""
        t = max(self.now + self.rng.randint(1, self.params.max_delay_ms), self._meta_last[dst] + 1)
        self._meta_last[dst] = t
        self.at(t, "msg", CONTROLLER, dst, payload)

    def _cut(self, a: int, b: int) -> bool:
        return frozenset((a, b)) in self.cuts

    def publish(self) -> None:
        self.structure += 1
        image = self.controller.partitions
        alive = self.controller.alive_epochs()
        self.trace(
            "metadata "
            + " ".join(
                f"p{p}:L{s.leader}/e{s.leader_epoch}/pe{s.partition_epoch}/isr{list(s.isr)}"
                for p, s in image.items()
            )
            + f" fenced={sorted(self.controller.fenced)}"
        )
        for b in self.nodes:
            self.send_metadata(b, ("metadata", image, alive))

    # ------------------------------------------------------------------ running

    def run(self) -> Simulation:
        try:
            return self._run()
        finally:
            self.close()

    def _run(self) -> Simulation:
        prm = self.params
        for b in self.nodes:
            self.at(self.rng.randint(0, 50), "tick", b)
        for pr in self.producers:
            self.at(self.rng.randint(0, 50), "produce_tick", pr)
        self.at(0, "controller_tick")
        self.at(self.rng.randint(*prm.fault_gap_ms), "fault")
        if self.clock_step_ms:
            self.at(self.rng.randint(200, 2000), "clock_step")
        self.at(prm.active_ms, "quiesce")
        self.publish()
        deadline = prm.active_ms + prm.max_quiesce_ms
        while self._queue and not self.finished:
            t, _, kind, args = heapq.heappop(self._queue)
            if t > deadline:
                self.now = deadline
                self.fail(f"no convergence {prm.max_quiesce_ms} ms after healing: {self._state()}")
            self.now = t
            self.steps += 1
            getattr(self, "_on_" + kind)(*args)
            self.check()
        if not self.finished:
            self.fail("event queue ran dry")
        return self

    # ------------------------------------------------------------------ events

    def timer_now(self, node: SimNode) -> int:
        """What the node's timers read: the simulated (monotonic) time, or its stepped
        wall clock with timers_on_wall_clock."""
        return node.wall_ms() if self.timers_on_wall_clock else self.now

    def _on_clock_step(self) -> None:
        if not self.faults_active:
            return
        self.at(self.now + self.rng.randint(500, 3000), "clock_step")
        node = self.nodes[self.rng.choice(sorted(self.nodes))]
        step = self.rng.choice((-1, 1)) * self.clock_step_ms
        node.wall_offset_ms += step
        self.stats["clock_steps"] += 1
        self.trace(f"FAULT n{node.id}'s wall clock steps {step:+d} ms to {node.wall_ms()}")

    def _on_tick(self, b: int) -> None:
        node = self.nodes[b]
        self.at(self.now + self.rng.randint(40, 60), "tick", b)
        if not node.up or node.paused:
            return
        for p, rep in node.replicas.items():
            self.apply(node, p, rep.tick(self.timer_now(node)))
            self.poll_fetcher(node, p)
        if node.alter.in_flight and self.now - node.alter_sent_ms > ALTER_PARTITION_TIMEOUT_MS:
            self._alter_retry_later(node)  # no answer: its changes go again after a backoff
        self.send_alter(node)
        if self.rng.random() < self.params.flush_probability:
            if (
                self.storage == DISK
                and self.faults_active
                and self.rng.random() < FSYNC_FAILURE
                and self._may_fail(node, power=True)
            ):
                # Kafka takes a log dir whose fsync failed offline, and a broker with
                # no log dir left halts: what was not yet durable is gone.
                self.stats["fsync_failures"] += 1
                self.trace(f"FAULT fsync failed on n{node.id}: its log dir goes offline")
                self.crash(node)
                return
            for log in node.logs.values():
                log.flush()
        if self.rng.random() < 0.3:
            for log in node.logs.values():
                log.checkpoint_high_watermark()

    def poll_fetcher(self, node: SimNode, p: int) -> None:
        out = node.replicas[p].next_request(self.timer_now(node))
        if out is not None:
            self.send(node.id, out.destination, ("fetch", p, out.request, node.incarnation))

    def apply(self, node: SimNode, p: int, actions: list[Action]) -> None:
        for a in actions:
            if isinstance(a, ProduceCompleted):
                self.check_durable_ack(node, p, a)
                # The node's own request id maps back to the client and its request id.
                owner = self._request_owner.pop(a.request_id, None)
                if owner is not None:
                    self.send(node.id, owner[0], ("produce_resp", replace(a, request_id=owner[1])))
            elif isinstance(a, SendAlterPartition):
                self.trace(f"n{node.id} p{p} AlterPartition {a}")
                node.alter.submit(p, a)
                self.send_alter(node)
            elif isinstance(a, FlushLog):
                self.flush_requested(node, p)

    def _alter_retry_later(self, node: SimNode) -> None:
        node.alter.failed()
        node.alter_retry_at = self.now + node.alter_backoff_ms
        node.alter_backoff_ms = min(node.alter_backoff_ms * 2, ALTER_PARTITION_BACKOFF_MS[1])

    def send_alter(self, node: SimNode) -> None:
        """The node's pending ISR changes in one request, unless one is in flight."""
        if self.now < node.alter_retry_at:
            return  # backing off after a request that got no answer
        batch = node.alter.next_batch()
        if batch is None:
            return
        node.alter_sent_ms = self.now
        node.alter_batch_id += 1
        self.stats["alter_batches"] += 1
        # The deadline travels with the request, as gRPC's does: a controller that
        # reaches it late drops it instead of doing work nobody waits for.
        deadline = self.now + ALTER_PARTITION_TIMEOUT_MS
        payload = (
            "alter",
            tuple(batch),
            node.incarnation,
            node.alter_batch_id,
            deadline,
            node.broker_epoch,
        )
        self.send(node.id, CONTROLLER, payload)

    def _on_msg(self, src: int, dst: int, payload: tuple[Any, ...]) -> None:
        if dst == CONTROLLER:
            if self.params.controller_delay_ms[1] > 0:
                self._controller_queue.append((src, payload))
                self._controller_next()
            else:
                self._controller_receive(src, payload)
            return
        if dst >= PRODUCER_BASE:
            self._producer_receive(self.producers[dst], payload)
            return
        if src != CONTROLLER and src < PRODUCER_BASE and self._cut(src, dst):
            return  # in flight when the partition began
        node = self.nodes[dst]
        if not node.up:
            return
        if node.paused:
            node.inbox.append((src, payload))
            return
        self._node_receive(node, src, payload)

    def _node_receive(self, node: SimNode, src: int, payload: tuple[Any, ...]) -> None:
        kind = payload[0]
        if kind not in ("fetch", "fetch_resp", "produce"):
            self.structure += 1  # roles, ISR or registration may change
        if kind == "fetch":
            _, p, req, src_inc = payload
            rep = node.replicas[p]
            resp: FollowerResponse
            if isinstance(req, FetchRequest):
                resp, actions = rep.handle_fetch(req, self.timer_now(node))
                self.apply(node, p, actions)
            elif isinstance(req, OffsetsForLeaderEpochRequest):
                resp = rep.handle_offsets_for_leader_epoch(req)
            else:
                assert isinstance(req, ListOffsetsRequest)
                resp = rep.handle_list_offsets(req)
            self.send(node.id, src, ("fetch_resp", p, resp, src_inc))
        elif kind == "fetch_resp":
            _, p, resp, inc = payload
            if inc != node.incarnation:
                return  # the connection died with the old process
            rep = node.replicas[p]
            before = rep.log.log_end_offset
            synced = rep.fetcher.synced_epoch
            self.apply(node, p, rep.handle_response(resp, self.timer_now(node)))
            if rep.fetcher.synced_epoch != synced:
                self.structure += 1
            if rep.log.log_end_offset < before:
                self.trace(f"n{node.id} p{p} truncated {before}->{rep.log.log_end_offset}")
            if not isinstance(resp, FetchResponse) or resp.records:
                self.poll_fetcher(node, p)
        elif kind == "produce":
            _, p, client_rid, data, acks, timeout = payload
            rid = self._next_request_id  # unique per request the node accepts
            self._next_request_id += 1
            self._request_owner[rid] = (src, client_rid)
            rep = node.replicas[p]
            now = self.timer_now(node)
            self.apply(node, p, rep.produce(rid, data, acks, timeout, now))
        elif kind == "alter_resp":
            _, answers, inc, batch_id = payload
            if inc != node.incarnation:
                return
            if node.alter.in_flight and batch_id == node.alter_batch_id:
                node.alter.answered()
                node.alter_backoff_ms = ALTER_PARTITION_BACKOFF_MS[0]
            # A late answer (its request timed out and went again) still counts: each
            # replica matches it against the change it waits for, by request id.
            for p, answer in answers:
                node.alter.resolved(p, answer.request_id)
                rep = node.replicas[p]
                now = self.timer_now(node)
                self.apply(node, p, rep.on_alter_partition_response(answer, now))
            self.send_alter(node)
        elif kind == "alter_failed":
            _, inc, batch_id, _error = payload
            if inc == node.incarnation and node.alter.in_flight and batch_id == node.alter_batch_id:
                self._alter_retry_later(node)  # as the node shell retries a refused request
        elif kind == "registered":
            _, inc, epoch = payload
            if inc == node.incarnation:
                node.broker_epoch = epoch
                node.registered = True
                for rep in node.replicas.values():
                    rep.broker_epoch = epoch
        elif kind == "metadata":
            _, image, alive = payload
            if not node.registered or alive.get(node.id, node.broker_epoch) != node.broker_epoch:
                return  # written before this incarnation registered
            node.alive_epochs = alive
            for p, rep in node.replicas.items():
                self.apply(node, p, rep.apply_metadata(image[p], self.timer_now(node)))

    def _controller_next(self) -> None:
        """A slow controller serves its queue one request at a time; a request whose
        deadline passed while it queued is dropped without work (gRPC's deadline)."""
        while self._controller_queue and not self._controller_busy:
            src, payload = self._controller_queue.popleft()
            if payload[0] == "alter" and self.now > payload[4]:
                self.trace(f"controller drops n{src}'s AlterPartition: its deadline passed")
                continue
            self._controller_busy = True
            lo, hi = self.params.controller_delay_ms
            self.at(self.now + self.rng.randint(lo, hi), "controller_msg", src, payload)

    def _on_controller_msg(self, src: int, payload: tuple[Any, ...]) -> None:
        self._controller_busy = False
        self._controller_receive(src, payload)
        self._controller_next()

    def _controller_receive(self, src: int, payload: tuple[Any, ...]) -> None:
        kind = payload[0]
        if kind == "alter":
            _, batch, inc, batch_id, _deadline, broker_epoch = payload
            try:
                answers = self.controller.alter_partitions(src, broker_epoch, batch)
            except ControlError as e:
                self.trace(f"controller refuses n{src}'s AlterPartition: {e.error_name} {e}")
                self.send(CONTROLLER, src, ("alter_failed", inc, batch_id, e.error_name))
                return
            for p, resp in answers:
                self.trace(f"controller p{p} AlterPartition from n{src}: {resp.error}")
            self.send(CONTROLLER, src, ("alter_resp", tuple(answers), inc, batch_id))
            if any(resp.error == NONE for _p, resp in answers):
                self.publish()
        elif kind == "register":
            _, inc = payload
            node = self.nodes[src]
            if inc != node.incarnation or not node.up:
                return
            epoch = self.controller.register(src)
            self.trace(f"controller registered n{src} with broker epoch {epoch}")
            self.last_heartbeat[src] = self.now
            self.send_metadata(src, ("registered", inc, epoch))
            self.publish()

    def _on_controller_tick(self) -> None:
        """Heartbeats over a perfect channel: a node is alive while it runs unpaused with
        the registration the controller holds; fenced after session_timeout_ms."""
        self.at(self.now + 100, "controller_tick")
        changed = False
        for b, node in self.nodes.items():
            alive = (
                node.up
                and not node.paused
                and node.registered
                and self.controller.broker_epochs[b] == node.broker_epoch
            )
            if alive:
                self.last_heartbeat[b] = self.now
                if self.controller.unfence(b):
                    self.trace(f"controller unfenced n{b}")
                    changed = True
            elif self.now - self.last_heartbeat[b] > self.params.session_timeout_ms:
                if self.controller.fence(b):
                    self.trace(f"controller fenced n{b}")
                    changed = True
        if changed:
            self.publish()

    # ------------------------------------------------------------------ producers

    def _on_produce_tick(self, pr_id: int) -> None:
        pr = self.producers[pr_id]
        self.at(self.now + self.rng.randint(15, 60), "produce_tick", pr_id)
        if pr.batch is None:
            if pr.next_msg >= pr.total:
                return
            n = min(self.rng.randint(1, 3), pr.total - pr.next_msg)
            pr.batch = pr.build(list(range(pr.next_msg, pr.next_msg + n)), self.now)
            pr.next_msg += n
        b = pr.batch
        if b.in_flight is not None:
            if self.now - b.sent_ms < 1500:
                return
            self.trace(f"P{pr.id} request {b.in_flight} timed out")
            b.in_flight = None
            b.backoff_until_ms = self.now + 50
        if self.now < b.backoff_until_ms:
            return
        leader = self.controller.partitions[pr.partition].leader  # a metadata refresh
        if leader < 0:
            b.backoff_until_ms = self.now + 100
            return
        rid = self._next_request_id
        self._next_request_id += 1
        b.attempts.add(rid)
        b.in_flight = rid
        b.sent_ms = self.now
        self.trace(
            f"P{pr.id} sends req {rid} seq {b.seq}+{len(b.msgs)} epoch {b.epoch} acks={pr.acks} "
            f"to n{leader}"
        )
        self.send(pr.id, leader, ("produce", pr.partition, rid, b.data, pr.acks, 1000))

    def _producer_receive(self, pr: SimProducer, payload: tuple[Any, ...]) -> None:
        done = payload[1]
        assert isinstance(done, ProduceCompleted)
        b = pr.batch
        if b is None or done.request_id not in b.attempts:
            return  # an answer to an older batch or epoch
        if done.error != NONE and done.request_id != b.in_flight:
            return  # a newer attempt is under way
        b.in_flight = None
        self.trace(f"P{pr.id} req {done.request_id}: {done.error} offset {done.base_offset}")
        if done.error == NONE:
            self.stats["acks"] += 1
            if pr.acks == -1:
                ack = _Ack(pr.partition, done.base_offset, pr.pid, b.epoch, b.seq, len(b.msgs))
                self.pending_acks.append(ack)
                self._verify_acks()
                self.acked_msgs[pr.id].extend(f"P{pr.id}:{m}".encode() for m in b.msgs)
            pr.next_seq = increment_sequence(b.seq, len(b.msgs))
            pr.batch = None
        elif done.error in (OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID):
            if self.params.mode == SAFE and pr.acks == -1:
                self.fail(f"acks=-1 producer P{pr.id} got {done.error}")
            # The earlier batch was lost (acks=1 or beyond the fault budget), or with it
            # the leader's whole state of this producer: bump the epoch and restart the
            # sequence at 0 (KIP-360), resending this batch.
            pr.epoch += 1
            pr.next_seq = 0
            pr.bumped = True
            pr.batch = pr.build(b.msgs, self.now)
        else:
            b.backoff_until_ms = self.now + 50

    def _state(self) -> str:
        parts = []
        for b, n in self.nodes.items():
            parts.append(
                f"n{b}(up={n.up} paused={n.paused} reg={n.registered} be={n.broker_epoch}) "
                + " ".join(repr(r) for r in n.replicas.values())
            )
        parts.append(f"controller {self.controller.partitions} fenced={self.controller.fenced}")
        parts.append(
            "producers "
            + " ".join(
                f"P{p.id}:{p.next_msg}/{p.total}{'' if p.done else '+'}"
                for p in self.producers.values()
            )
        )
        return "\n".join(parts)


def simulate(
    seed: int,
    *,
    mode: str | None = None,
    verbose: bool = False,
    many_partitions: bool = False,
    storage: str = DISK,
    clock_step_ms: int = 0,
    timers_on_wall_clock: bool = False,
    segment_bytes: int = SIM_LOG_CONFIG.segment_bytes,
    flush_messages: int = 0,
) -> Simulation:
    """Run one seed; raises SimulationFailure (naming the seed) on any violation."""
    return Simulation(
        seed,
        mode=mode,
        verbose=verbose,
        many_partitions=many_partitions,
        storage=storage,
        clock_step_ms=clock_step_ms,
        timers_on_wall_clock=timers_on_wall_clock,
        segment_bytes=segment_bytes,
        flush_messages=flush_messages,
    ).run()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--count", type=int, default=1, help="run seeds seed..seed+count-1")
    parser.add_argument("--mode", choices=(SAFE, WILD), default=None)
    parser.add_argument("--verbose", action="store_true", help="print the whole trace")
    parser.add_argument(
        "--many-partitions",
        action="store_true",
        help="16-48 partitions and a slow controller that serves requests one at a time",
    )
    parser.add_argument(
        "--storage",
        choices=(DISK, MEMORY),
        default=DISK,
        help="production's Log on tmpfs files (default) or the in-memory log (faster)",
    )
    parser.add_argument(
        "--clock-step-ms",
        type=int,
        default=0,
        help="step random nodes' wall clocks by +-this many ms every 0.5-3 s of faults",
    )
    parser.add_argument(
        "--timers-on-wall-clock",
        action="store_true",
        help="the replicas' timers read the stepped wall clock (the old node's bug)",
    )
    parser.add_argument(
        "--segment-bytes",
        type=int,
        default=SIM_LOG_CONFIG.segment_bytes,
        help="the disk logs' segment.bytes (smaller: more segments per log)",
    )
    parser.add_argument(
        "--flush-messages",
        type=int,
        default=0,
        help="the disk logs' flush.messages, deferred to a simulated flush pool (0: off)",
    )
    args = parser.parse_args(argv)
    if args.flush_messages < 0 or (args.flush_messages and args.storage != DISK):
        parser.error(f"--flush-messages needs disk storage and >= 0, got {args.flush_messages}")
    if args.segment_bytes < 128:
        parser.error(f"--segment-bytes must be >= 128, got {args.segment_bytes}")
    if args.clock_step_ms < 0:
        parser.error(f"--clock-step-ms must be >= 0, got {args.clock_step_ms}")
    if args.timers_on_wall_clock and not args.clock_step_ms:
        parser.error("--timers-on-wall-clock needs --clock-step-ms (no steps, no difference)")
    for seed in range(args.seed, args.seed + args.count):
        try:
            sim = simulate(
                seed,
                mode=args.mode,
                verbose=args.verbose,
                many_partitions=args.many_partitions,
                storage=args.storage,
                clock_step_ms=args.clock_step_ms,
                timers_on_wall_clock=args.timers_on_wall_clock,
                segment_bytes=args.segment_bytes,
                flush_messages=args.flush_messages,
            )
        except SimulationFailure as exc:
            print(exc, file=sys.stderr)
            return 1
        print(
            f"seed {seed} ({sim.params.mode}, {sim.storage}): ok, {sim.steps} steps, "
            f"{sim.now} ms, {sim.stats}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
