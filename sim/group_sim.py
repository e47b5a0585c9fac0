"""A seeded, deterministic simulator of the group coordinator.

One `random.Random(seed)` drives everything: the clock, three nodes that each run the
production `GroupCoordinator` (group_coordinator.py, the objects a node runs), a model
of the replicated `__consumer_offsets` partitions (appends under a leader epoch,
acknowledged once the high watermark passes them, an unreplicated tail that a
failover may keep or lose), metadata that reaches each node late, coordinator
failovers and crashes (a crashed node forgets everything and answers nothing),
network delays, and consumers that follow the classic protocol (JoinGroup with
MEMBER_ID_REQUIRED, SyncGroup with a range assignment by the leader, heartbeats,
commits, offset fetches, leaves, crashes without a leave, static members that
restart). So one seed replays any failure:

    python -m seglog.sim.group_sim --seed 42 --verbose
    python -m seglog.sim.group_sim --seeds 10000        # many seeds

Checked while it runs:
* a shard (one coordinator epoch of one partition) never answers a JoinGroup with a
  generation below an earlier one, and its completed generations only increase;
* SyncGroup hands an assignment only to a member of the group's current generation,
  in a Stable group; within a shard, no partition goes to two members of one
  generation (a restarted static member takes over its fenced old id's share) and no
  assignment of an older generation follows one of a newer;
* no acknowledged commit is lost and no committed offset goes back: every OffsetFetch
  answered by the partition's current leader, and every load after a failover, holds
  at least the last acknowledged offset of each partition (consumers commit offsets
  that only grow, as positions do);
* a loaded group's generation is at least that of the last acknowledged SyncGroup;
* the group objects' own invariants (group_state.ClassicGroup.check).
At the end the faults stop; every live consumer must then be in one Stable generation
whose assignments cover every partition exactly once.

A deposed coordinator that has not yet learnt of its demotion may answer reads from
its old state (as in Kafka); those answers are not checked against newer commits.
"""

from __future__ import annotations

import heapq
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from seglog.node.groups.coordinator_actions import Action, Append, Respond
from seglog.node.groups.group_config import GroupConfig
from seglog.node.groups.group_coordinator import GroupCoordinator
from seglog.node.groups.group_coordinator_shard import CoordinatorShard
from seglog.node.groups.group_errors import NONE
from seglog.node.groups.group_messages import (
    CommitPartition,
    CommitResult,
    ErrorResult,
    JoinRequest,
    JoinResult,
    OffsetFetchResult,
    SyncRequest,
    SyncResult,
)
from seglog.node.groups.group_state import GroupState
from seglog.sim.seed_runs import SimInvariantError, seeds_main

NODES = (1, 2, 3)
TOPIC = "t"
REQUEST_TIMEOUT_MS = 5_000
SESSION_MS = 6_000
REBALANCE_MS = 8_000
HEARTBEAT_MS = 2_000
FAULT_MS = 60_000  # faults stop after this much simulated time
SETTLE_MS = 90_000  # then every live consumer must settle within this


@dataclass
class SimLog:
    """One `__consumer_offsets` partition as its current leader sees it."""

    leader: int
    epoch: int = 0
    entries: list[tuple[int, bytes, bytes | None]] = field(default_factory=list)
    hw: int = 0
    # Appends waiting for the high watermark: (end offset, node, epoch, write id).
    waiting: list[tuple[int, int, int, int]] = field(default_factory=list)


@dataclass
class Consumer:
    cid: int
    group: str
    instance: str | None
    alive: bool = True
    member_id: str = ""
    generation: int = -1
    state: str = "idle"  # idle, joining, syncing, stable
    coordinator: int | None = None
    inflight: int | None = None  # request id of the one request in flight
    inflight_deadline: int = 0
    assignment: tuple[int, ...] = ()
    next_heartbeat: int = 0
    next_commit: int = 0
    leaving: bool = False


class GroupSim:
    def __init__(self, seed: int, verbose: bool = False) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.verbose = verbose
        rng = self.rng
        self.now = 0
        self.events: list[tuple[int, int, Callable[[], None]]] = []
        self.seq = 0
        self.partitions = rng.choice((6, 12))
        self.config = GroupConfig(
            group_min_session_timeout_ms=SESSION_MS,
            group_initial_rebalance_delay_ms=rng.choice((0, 100, 500)),
            offsets_topic_num_partitions=2,
            offsets_retention_check_interval_ms=10_000,
        )
        self.coordinators = {
            n: GroupCoordinator(self.config, random.Random(rng.random())) for n in NODES
        }
        self.logs = {p: SimLog(leader=rng.choice(NODES)) for p in range(2)}
        self.known_leader = {n: {p: -1 for p in self.logs} for n in NODES}
        self.groups = [f"group-{i}" for i in range(rng.choice((1, 2)))]
        self.consumers: list[Consumer] = []
        for i in range(rng.randint(2, 5)):
            group = self.groups[i % len(self.groups)]
            static = rng.random() < 0.3
            self.consumers.append(Consumer(i, group, f"instance-{i}" if static else None))
        self.rid = 0
        self.pending: dict[int, tuple[Consumer, str, object]] = {}
        # Checks' memory.
        self.position: dict[tuple[str, int], int] = {}
        self.acked: dict[tuple[str, int], int] = {}
        self.acked_generation: dict[str, int] = {}
        self.shard_generation: dict[tuple[int, int, int, str], int] = {}
        self.handed: dict[tuple[int, int, int, str, int], dict[str, set[int]]] = {}
        self.latest_delivered: dict[tuple[int, int, int, str], int] = {}
        self.commits: dict[int, list[tuple[str, int, int]]] = {}
        self.sent_as: dict[int, str] = {}
        self.steps = 0

    # --- events -------------------------------------------------------------------

    def at(self, delay: int, fn: Callable[[], None]) -> None:
        self.seq += 1
        heapq.heappush(self.events, (self.now + max(0, delay), self.seq, fn))

    def net(self) -> int:
        return self.rng.choice((0, 1, 2, 5, 10, 30, 100))

    def log(self, text: str) -> None:
        if self.verbose:
            print(f"{self.now:>7} {text}")

    # --- nodes --------------------------------------------------------------------

    def carry_out(self, node: int, actions: list[Action]) -> None:
        for a in actions:
            if isinstance(a, Respond):
                self.check_response(node, a)
                if isinstance(a.result, CommitResult):
                    for group, p, offset in self.commits.pop(a.request_id, []):
                        if (TOPIC, p, NONE) in a.result.errors:
                            self.acked[(group, p)] = max(self.acked.get((group, p), -1), offset)
                entry = self.pending.pop(a.request_id, None)
                if entry is not None:
                    consumer, kind, ctx = entry
                    self.at(
                        self.net(),
                        partial(self.on_answer, consumer, kind, ctx, a),
                    )
            else:
                self.append(node, a)

    def append(self, node: int, a: Append) -> None:
        slog = self.logs[a.partition]
        if slog.leader != node or slog.epoch != a.leader_epoch:
            self.at(self.net(), lambda: self.write_done(node, a, "NOT_LEADER_OR_FOLLOWER"))
            return
        for key, value in a.records:
            slog.entries.append((a.leader_epoch, key, value))
        slog.waiting.append((len(slog.entries), node, a.leader_epoch, a.write_id))
        self.at(
            self.rng.choice((1, 5, 20, 100, 400)), lambda: self.replicate(a.partition, slog.epoch)
        )

    def replicate(self, partition: int, epoch: int) -> None:
        """Followers caught up with the leader of `epoch`: the HW reaches its LEO and
        the appends below it are acknowledged, in log order."""
        slog = self.logs[partition]
        if slog.epoch != epoch:
            return
        slog.hw = len(slog.entries)
        done = [w for w in slog.waiting if w[0] <= slog.hw]
        slog.waiting = [w for w in slog.waiting if w[0] > slog.hw]
        for _end, node, ep, write_id in done:
            self.at(0, partial(self.write_done_id, node, partition, ep, write_id, NONE))

    def write_done(self, node: int, a: Append, error: str) -> None:
        self.write_done_id(node, a.partition, a.leader_epoch, a.write_id, error)

    def write_done_id(
        self, node: int, partition: int, epoch: int, write_id: int, error: str
    ) -> None:
        self.carry_out(
            node, self.coordinators[node].on_write_done(partition, epoch, write_id, error, self.now)
        )

    def failover(self, partition: int, crash: bool) -> None:
        """A new leader for the partition (for every partition its leader led, when
        that leader's process crashes: a restarted node leads nothing until elected
        again, at a new epoch); each keeps the committed prefix and maybe part of the
        unreplicated tail. The old leader's waiting appends fail."""
        old = self.logs[partition].leader
        moved = [p for p, log in self.logs.items() if log.leader == old] if crash else [partition]
        for p in moved:
            self.move_leader(p, crash)
        if crash:
            # The old leader's process dies: all its state, answered or not, is gone.
            self.coordinators[old] = GroupCoordinator(self.config, random.Random(self.rng.random()))
            self.known_leader[old] = {p: -1 for p in self.logs}
            for rid, (_c, _k, ctx) in list(self.pending.items()):
                if ctx == old:
                    del self.pending[rid]
            self.at(self.rng.choice((100, 1000, 3000)), lambda: self.learn_all(old))
        for p in moved:
            for n in NODES:
                if n != old or not crash:
                    self.at(self.rng.choice((1, 50, 500, 2000)), partial(self.learn, n, p))

    def move_leader(self, partition: int, crash: bool) -> None:
        slog = self.logs[partition]
        old = slog.leader
        new = self.rng.choice([n for n in NODES if n != old])
        keep = self.rng.randint(slog.hw, len(slog.entries))
        failed = slog.waiting
        slog.entries = slog.entries[:keep]
        slog.waiting = []
        slog.leader = new
        slog.epoch += 1
        self.log(f"failover p{partition} {old}->{new} epoch {slog.epoch} crash={crash} kept {keep}")
        for _end, node, ep, write_id in failed:
            self.at(
                self.net(),
                partial(
                    self.write_done_id, node, partition, ep, write_id, "NOT_LEADER_OR_FOLLOWER"
                ),
            )
        self.at(self.rng.choice((10, 100, 1000)), lambda: self.replicate(partition, slog.epoch))

    def learn_all(self, node: int) -> None:
        for p in self.logs:
            self.learn(node, p)

    def learn(self, node: int, partition: int) -> None:
        """Metadata reaches `node`: it loads or unloads the partition's groups."""
        slog = self.logs[partition]
        coordinator = self.coordinators[node]
        if slog.leader == node:
            if self.known_leader[node][partition] == slog.epoch:
                return
            self.known_leader[node][partition] = slog.epoch
            shard, out = coordinator.begin_loading(partition, slog.epoch)
            self.carry_out(node, out)
            self.at(
                self.rng.choice((0, 10, 200)),
                lambda: self.load(node, partition, shard.leader_epoch),
            )
        else:
            self.known_leader[node][partition] = -1
            self.carry_out(node, coordinator.unload(partition))

    def load(self, node: int, partition: int, epoch: int) -> None:
        """The shard loads once the new leader's HW covers its whole log."""
        slog = self.logs[partition]
        shard = self.coordinators[node].shards.get(partition)
        if shard is None or shard.leader_epoch != epoch or shard.loading is None:
            return
        if slog.epoch != epoch or slog.hw < len(slog.entries):
            self.at(50, lambda: self.load(node, partition, epoch))
            return
        for _ep, key, value in slog.entries:
            shard.replay(key, value)
        shard.finish_loading(self.now)
        self.log(f"node {node} loaded p{partition} epoch {epoch}: {len(slog.entries)} records")
        for (group, tp), offset in self.acked.items():
            if self.coordinators[node].partition_for(group) != partition:
                continue
            got = shard.offsets.get(group, {}).get((TOPIC, tp))
            if got is None or got.offset < offset:
                raise SimInvariantError(
                    f"load lost the acknowledged commit {group} p{tp}={offset}: {got}"
                )
        for group, generation in self.acked_generation.items():
            if self.coordinators[node].partition_for(group) != partition:
                continue
            g = shard.groups.get(group)
            if g is None or g.generation < generation:
                raise SimInvariantError(f"load of {group} went back before generation {generation}")

    def tick(self) -> None:
        for n in NODES:
            self.carry_out(n, self.coordinators[n].tick(self.now))
        self.at(100, self.tick)

    # --- checks on the coordinator's answers --------------------------------------

    def shard_key(self, node: int, group: str) -> tuple[int, int, int, str] | None:
        c = self.coordinators[node]
        p = c.partition_for(group)
        shard = c.shards.get(p)
        if shard is None:
            return None
        return (node, p, shard.leader_epoch, group)

    def check_response(self, node: int, a: Respond) -> None:
        entry = self.pending.get(a.request_id)
        if entry is None:
            return
        consumer, kind, _ctx = entry
        r = a.result
        key = self.shard_key(node, consumer.group)
        if isinstance(r, JoinResult) and r.error == NONE and key is not None:
            last = self.shard_generation.get(key, -1)
            if r.generation < last:
                raise SimInvariantError(f"{key}: JoinGroup generation {r.generation} after {last}")
            self.shard_generation[key] = r.generation
        if isinstance(r, SyncResult) and r.error == NONE and key is not None:
            shard = self.coordinators[node].shards[key[1]]
            g = shard.groups.get(consumer.group)
            member = self.sent_as.get(a.request_id, "")
            if g is None or g.state is not GroupState.STABLE or member not in g.members:
                raise SimInvariantError(f"{key}: assignment to {member} outside the Stable group")
            gen = g.generation
            latest = self.latest_delivered.get(key, -1)
            if gen < latest:
                raise SimInvariantError(f"{key}: assignment of generation {gen} after {latest}")
            self.latest_delivered[key] = gen
            # Within one generation, no partition goes to two members of the group (a
            # restarted static member takes over the fenced old member id's share).
            handed = self.handed.setdefault((*key, gen), {})
            parts = set(decode_assignment(r.assignment))
            for other, theirs in handed.items():
                if other != member and other in g.members and parts & theirs:
                    raise SimInvariantError(
                        f"{key}: generation {gen} assigns {sorted(parts & theirs)} to "
                        f"{member} and {other}"
                    )
            handed[member] = parts
        if isinstance(r, OffsetFetchResult) and r.error == NONE and key is not None:
            slog = self.logs[key[1]]
            if slog.leader == node and slog.epoch == key[2]:
                for f in r.offsets:
                    acked = self.acked.get((consumer.group, f.partition), -1)
                    if f.offset < acked:
                        raise SimInvariantError(
                            f"OffsetFetch of {consumer.group} p{f.partition} = {f.offset}, "
                            f"acknowledged {acked}"
                        )

    # --- consumers ----------------------------------------------------------------

    def send(
        self, c: Consumer, kind: str, call: Callable[[GroupCoordinator, int], list[Action]]
    ) -> None:
        if c.coordinator is None:
            self.find_coordinator(c)
        node = c.coordinator
        assert node is not None
        self.rid += 1
        rid = self.rid
        c.inflight = rid
        c.inflight_deadline = self.now + REQUEST_TIMEOUT_MS
        self.pending[rid] = (c, kind, node)
        self.sent_as[rid] = c.member_id  # the member id the request carries

        def arrive() -> None:
            if rid not in self.pending:
                return
            coordinator = self.coordinators[node]
            self.carry_out(node, call(coordinator, rid))

        self.at(self.net(), arrive)

    def route(
        self,
        coordinator: GroupCoordinator,
        rid: int,
        c: Consumer,
        fn: Callable[[CoordinatorShard], list[Action]],
    ) -> list[Action]:
        shard, error = coordinator.shard_for(c.group)
        if shard is None:
            return [Respond(rid, ErrorResult(error))]
        return fn(shard)

    def find_coordinator(self, c: Consumer) -> None:
        p = self.coordinators[1].partition_for(c.group)
        # Mostly the current leader; sometimes a stale answer.
        c.coordinator = self.logs[p].leader if self.rng.random() < 0.8 else self.rng.choice(NODES)

    def join(self, c: Consumer) -> None:
        if c.coordinator is None:
            self.find_coordinator(c)
        c.state = "joining"
        meta = TOPIC.encode()
        req = JoinRequest(
            c.group,
            c.member_id,
            c.instance,
            SESSION_MS,
            REBALANCE_MS,
            "consumer",
            (("range", meta),),
            True,
            f"c{c.cid}",
            supports_skip_assignment=self.rng.random() < 0.5,  # JoinGroup v9+ or older
        )
        self.send(
            c, "join", lambda co, rid: self.route(co, rid, c, lambda s: s.join(rid, req, self.now))
        )

    def on_answer(self, c: Consumer, kind: str, _ctx: object, a: Respond) -> None:
        if not c.alive or c.inflight != a.request_id:
            return
        c.inflight = None
        r = a.result
        error = getattr(r, "error", NONE)
        if isinstance(r, CommitResult):
            error = r.errors[0][2] if r.errors else NONE
        if error in (
            "NOT_COORDINATOR",
            "COORDINATOR_LOAD_IN_PROGRESS",
            "COORDINATOR_NOT_AVAILABLE",
        ):
            c.coordinator = None
            self.at(self.rng.choice((10, 100, 500)), lambda: self.resume(c, kind))
            return
        if kind == "join":
            assert isinstance(r, JoinResult | ErrorResult)
            if isinstance(r, JoinResult) and r.error in (NONE, "MEMBER_ID_REQUIRED"):
                c.member_id = r.member_id
            if error == "MEMBER_ID_REQUIRED":
                self.join(c)
            elif error == NONE:
                assert isinstance(r, JoinResult)
                c.generation = r.generation
                assignments: tuple[tuple[str, bytes], ...] = ()
                if r.leader == c.member_id and not r.skip_assignment:
                    ids = sorted(m.member_id for m in r.members)
                    assignments = tuple(
                        (
                            m,
                            encode_assignment(
                                range_assign(ids.index(m), len(ids), self.partitions)
                            ),
                        )
                        for m in ids
                    )
                req = SyncRequest(
                    c.group, c.generation, c.member_id, c.instance, "consumer", "range", assignments
                )
                c.state = "syncing"
                self.send(
                    c,
                    "sync",
                    lambda co, rid: self.route(co, rid, c, lambda s: s.sync(rid, req, self.now)),
                )
            else:
                self.rejoin(c, error)
        elif kind == "sync":
            if error == NONE:
                assert isinstance(r, SyncResult)
                c.state = "stable"
                c.assignment = decode_assignment(r.assignment)
                self.acked_generation[c.group] = max(
                    self.acked_generation.get(c.group, -1), c.generation
                )
                c.next_heartbeat = self.now + HEARTBEAT_MS
                c.next_commit = self.now + self.rng.randint(100, 2000)
                self.at(0, lambda: self.fetch_offsets(c))
            else:
                self.rejoin(c, error)
        elif kind in ("heartbeat", "commit", "fetch"):
            if error != NONE:
                self.rejoin(c, error)
        elif kind == "leave":
            c.alive = False

    def heartbeat_call(
        self, c: Consumer, gen: int, member: str, co: GroupCoordinator, rid: int
    ) -> list[Action]:
        return self.route(
            co, rid, c, lambda s: s.heartbeat(rid, c.group, gen, member, c.instance, self.now)
        )

    def resume_as_state_says(self, c: Consumer) -> None:
        # The kind is read when the event runs: the consumer's state may change before.
        self.resume(c, "join" if c.state != "stable" else "heartbeat")

    def resume(self, c: Consumer, kind: str) -> None:
        if not c.alive or c.inflight is not None:
            return
        if kind in ("join", "sync") or c.state != "stable":
            self.join(c)

    def rejoin(self, c: Consumer, error: str) -> None:
        if error in ("UNKNOWN_MEMBER_ID", "FENCED_INSTANCE_ID"):
            c.member_id = ""
        c.state = "idle"
        c.assignment = ()
        self.at(self.rng.choice((0, 10, 100)), lambda: self.resume(c, "join"))

    def commit(self, c: Consumer) -> None:
        parts = []
        for p in c.assignment:
            pos = self.position.get((c.group, p), 0) + self.rng.randint(1, 10)
            self.position[(c.group, p)] = pos
            parts.append(CommitPartition(TOPIC, p, pos))
        if not parts:
            return
        group, gen, member = c.group, c.generation, c.member_id

        self.send(
            c,
            "commit",
            lambda co, rid: self.route(
                co, rid, c, lambda s: s.commit(rid, group, gen, member, c.instance, parts, self.now)
            ),
        )
        self.commits[self.rid] = [(group, p.partition, p.offset) for p in parts]

    def fetch_offsets(self, c: Consumer) -> None:
        if not c.alive or c.inflight is not None or c.state != "stable":
            return
        parts = [(TOPIC, p) for p in range(self.partitions)]
        self.send(
            c,
            "fetch",
            lambda co, rid: self.route(co, rid, c, lambda s: s.fetch_offsets(rid, c.group, parts)),
        )

    def consumer_step(self) -> None:
        """Each live consumer's next move: a heartbeat, a commit, a fetch, or a timeout."""
        for c in self.consumers:
            if not c.alive:
                continue
            if c.inflight is not None:
                if self.now >= c.inflight_deadline:
                    self.pending.pop(c.inflight, None)
                    c.inflight = None
                    c.coordinator = None
                    self.at(
                        0,
                        partial(self.resume_as_state_says, c),
                    )
                continue
            if c.state == "idle":
                self.join(c)
            elif c.state == "stable":
                if self.now >= c.next_commit:
                    c.next_commit = self.now + self.rng.randint(200, 3000)
                    self.commit(c)
                elif self.now >= c.next_heartbeat:
                    c.next_heartbeat = self.now + HEARTBEAT_MS
                    gen, member = c.generation, c.member_id
                    self.send(
                        c,
                        "heartbeat",
                        partial(self.heartbeat_call, c, gen, member),
                    )
                elif self.rng.random() < 0.01:
                    self.fetch_offsets(c)
        self.at(50, self.consumer_step)

    def consumer_fault(self) -> None:
        if self.now >= FAULT_MS:
            return
        c = self.rng.choice(self.consumers)
        choice = self.rng.random()
        if c.alive and choice < 0.4:
            self.log(f"consumer {c.cid} crashes")
            c.alive = False
            self.at(self.rng.choice((1000, 5000, 10_000)), lambda: self.restart(c))
        elif (
            c.alive
            and choice < 0.6
            and c.member_id
            and c.inflight is None
            and c.coordinator is not None
        ):
            self.log(f"consumer {c.cid} leaves")
            member, instance = c.member_id, c.instance
            self.send(
                c,
                "leave",
                lambda co, rid: self.route(
                    co, rid, c, lambda s: s.leave(rid, c.group, [(member, instance)], self.now)
                ),
            )
            c.leaving = True
            self.at(self.rng.choice((1000, 5000)), lambda: self.restart(c))
        self.at(self.rng.randint(2000, 15_000), self.consumer_fault)

    def restart(self, c: Consumer) -> None:
        if self.now >= FAULT_MS + 5_000 and c.alive:
            return
        self.log(f"consumer {c.cid} restarts")
        c.alive = True
        c.leaving = False
        c.member_id = ""
        c.generation = -1
        c.state = "idle"
        c.inflight = None
        c.assignment = ()
        c.coordinator = None

    def coordinator_fault(self) -> None:
        if self.now >= FAULT_MS:
            return
        self.failover(self.rng.choice(list(self.logs)), crash=self.rng.random() < 0.5)
        self.at(self.rng.randint(3_000, 30_000), self.coordinator_fault)

    # --- the run ------------------------------------------------------------------

    def run(self) -> None:
        for n in NODES:
            self.learn_all(n)
        self.at(0, self.tick)
        self.at(0, self.consumer_step)
        self.at(self.rng.randint(1000, 10_000), self.consumer_fault)
        self.at(self.rng.randint(3000, 20_000), self.coordinator_fault)
        end = FAULT_MS + SETTLE_MS
        while self.events and self.now <= end:
            t, _seq, fn = heapq.heappop(self.events)
            self.now = t
            fn()
            self.steps += 1
            if self.now > FAULT_MS + 10_000 and self.settled():
                return
        raise SimInvariantError(
            f"seed {self.seed}: the consumers did not settle: {self.describe()}"
        )

    def settled(self) -> bool:
        live = [c for c in self.consumers if c.alive]
        for group in self.groups:
            members = [c for c in live if c.group == group]
            if not members:
                continue
            if any(c.state != "stable" or c.inflight is not None for c in members):
                return False
            if len({c.generation for c in members}) != 1:
                return False
            p = self.coordinators[1].partition_for(group)
            slog = self.logs[p]
            shard = self.coordinators[slog.leader].shards.get(p)
            if shard is None or shard.loading is not None:
                return False
            g = shard.groups.get(group)
            if g is None or g.state is not GroupState.STABLE or len(g.members) != len(members):
                return False
            if g.generation != members[0].generation:
                return False
            owned = sorted(p for c in members for p in c.assignment)
            if owned != list(range(self.partitions)):
                raise SimInvariantError(f"{group} settled with partitions {owned}")
        return True

    def describe(self) -> str:
        return "; ".join(
            f"c{c.cid} {c.group} alive={c.alive} {c.state} gen={c.generation} {c.assignment}"
            for c in self.consumers
        )


def range_assign(index: int, members: int, partitions: int) -> tuple[int, ...]:
    per, extra = divmod(partitions, members)
    start = index * per + min(index, extra)
    return tuple(range(start, start + per + (1 if index < extra else 0)))


def encode_assignment(parts: tuple[int, ...]) -> bytes:
    return ",".join(str(p) for p in parts).encode()


def decode_assignment(data: bytes) -> tuple[int, ...]:
    return tuple(int(x) for x in data.decode().split(",") if x)


def run_seed(seed: int, verbose: bool = False) -> GroupSim:
    sim = GroupSim(seed, verbose)
    try:
        sim.run()
    except AssertionError as e:
        raise SimInvariantError(f"seed {seed}: {e}") from e
    return sim


def main(argv: list[str] | None = None) -> int:
    return seeds_main("python -m seglog.sim.group_sim", run_seed, argv)


if __name__ == "__main__":
    sys.exit(main())
