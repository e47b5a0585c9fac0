"""A seeded, deterministic simulator of a Raft quorum keeping the cluster metadata.

One `random.Random(seed)` drives everything (TigerBeetle's VOPR idea): the clock
(steps, each node ticking with some drift), the network (drops, delays, duplicates,
reordering, partitions that heal), crashes that lose whatever a node had not yet
persisted, client proposals of metadata records, and each node's periodic
snapshot. So one seed replays any failure exactly:

    python -m seglog.sim.raft_sim --seed 42 --voters 5 --verbose

Safety is checked after every event; liveness once at the end, after healing
every fault and letting the cluster run quietly.
"""

from __future__ import annotations

import argparse
import heapq
import random
import sys
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace

from seglog.controller.cluster_control import (
    ControlError,
    IsrChange,
    allocate_producer_ids,
    alter_config_records,
    alter_partitions_records,
    create_topic_records,
    delete_topic_records,
    fence_broker_records,
    register_broker_records,
)
from seglog.controller.metadata_image import MetadataImage
from seglog.controller.metadata_records import (
    BrokerFenceRecord,
    ConfigRecord,
    MetadataRecord,
    RegisterBrokerRecord,
    encode_entry,
)
from seglog.controller.raft import (
    AppendRequest,
    AppendResponse,
    Entry,
    InstallSnapshotRequest,
    InstallSnapshotResponse,
    Message,
    NotLeaderError,
    RaftNode,
    Ready,
    Role,
    VoteRequest,
    VoteResponse,
)
from seglog.sim.raft_node_state import SimDisk, apply_batch, image_from_snapshot
from seglog.storage.log_config import LogConfig


@dataclass(frozen=True, slots=True)
class FaultProfile:
    """Per-step chances (or per-message, for the network) and ranges in steps."""

    drop: float = 0.05
    duplicate: float = 0.03
    max_delay: int = 3  # delays are uniform in [1, max_delay]: that is the reordering
    partition: float = 0.025  # chance a partition starts while none is in place
    partition_steps: tuple[int, int] = (10, 60)
    crash: float = 0.015
    crash_mid_ready: float = 0.5  # a crash inside a Ready loses it (or part of its effects)
    down_steps: tuple[int, int] = (3, 40)
    max_down: int = 2
    skip_tick: float = 0.05  # clock drift: a node misses a tick
    propose: float = 0.35
    snapshot_every: tuple[int, int] = (8, 30)  # applied entries between a node's snapshots


PROFILES: dict[str, FaultProfile] = {
    "default": FaultProfile(),
    "calm": FaultProfile(
        drop=0.0, duplicate=0.0, max_delay=1, partition=0.0, crash=0.0, skip_tick=0.0
    ),
    "harsh": FaultProfile(
        drop=0.15, duplicate=0.08, max_delay=5, partition=0.03, crash=0.02, max_down=3
    ),
}

ELECTION_TICKS = 10
HEARTBEAT_TICKS = 3
DEFAULT_STEPS = 300
_TRACE_TAIL = 40


@dataclass(frozen=True, slots=True)
class SimResult:
    seed: int
    steps: int
    max_term: int
    terms_with_leader: int
    commit_index: int
    proposals: int
    snapshots_taken: int
    snapshots_installed: int
    crashes: int
    partitions: int
    messages_sent: int
    messages_dropped: int
    final_leader: int


class SimulationFailure(AssertionError):
    def __init__(self, seed: int, reason: str, trace_tail: Sequence[str], replay: str) -> None:
        tail = "\n".join(trace_tail)
        super().__init__(f"seed {seed}: {reason}\nreplay: {replay}\ntrace tail:\n{tail}")
        self.seed = seed
        self.reason = reason
        self.trace_tail = list(trace_tail)


# ---- simulated nodes ---------------------------------------------------------------------


@dataclass(slots=True)
class _Node:
    id: int
    disk: SimDisk
    raft: RaftNode | None = None
    image: MetadataImage = field(default_factory=MetadataImage)
    applied: int = 0
    down_until: int = 0
    crash_point: str | None = None  # crash inside the next Ready, at this point
    snapshot_after: int = 0  # take a snapshot once this many entries are applied past it


_CRASH_POINTS = ("before_persist", "after_persist", "after_send")


def _fmt(m: Message) -> str:
    head = f"{m.src}->{m.dst} t{m.term}"
    match m:
        case VoteRequest():
            kind = "PreVote" if m.pre_vote else "Vote"
            return f"{kind}Req {head} last={m.last_index}/{m.last_term}"
        case VoteResponse():
            kind = "PreVote" if m.pre_vote else "Vote"
            return f"{kind}Resp {head} {'granted' if m.granted else 'refused'}"
        case AppendRequest():
            what = f"n={len(m.entries)}" if m.entries else "heartbeat"
            return f"AppendReq {head} prev={m.prev_index}/{m.prev_term} {what} c={m.leader_commit}"
        case AppendResponse():
            if m.success:
                return f"AppendResp {head} ok match={m.match_index}"
            return f"AppendResp {head} reject {m.reject_index} hint={m.hint_index}/{m.hint_term}"
        case InstallSnapshotRequest():
            return f"SnapshotReq {head} at {m.snapshot_index}/{m.snapshot_term}"
        case InstallSnapshotResponse():
            return f"SnapshotResp {head} match={m.match_index}"
    return repr(m)


class _Failure(Exception):
    pass


class _Sim:
    def __init__(
        self,
        seed: int,
        voters: int,
        observers: int,
        steps: int,
        faults: FaultProfile,
        verbose: bool,
    ) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.steps = steps
        self.faults = faults
        self.verbose = verbose
        self.voter_ids = tuple(range(1, voters + 1))
        self.observer_ids = tuple(range(voters + 1, voters + observers + 1))
        self.nodes = {i: _Node(i, SimDisk()) for i in self.voter_ids + self.observer_ids}
        self.now = 0
        self.trace: deque[tuple[int, object]] = deque(maxlen=_TRACE_TAIL)
        self.replay = _replay_command(seed, voters, observers, steps, faults)

        self.net: list[tuple[int, float, int, Message]] = []
        self.net_seq = 0
        self.blocked: set[tuple[int, int]] = set()
        self.heal_at = -1

        # What the checks remember across the whole run.
        self.leaders: dict[int, int] = {}  # term -> the one leader elected in it
        self.checked_leader: dict[int, int] = {}  # node -> the term its log was last checked
        self.votes: dict[tuple[int, int], int] = {}  # (voter, term) -> candidate
        self.committed: list[tuple[int, bytes]] = []  # the one global committed sequence
        self.seen: dict[tuple[int, int], tuple[bytes, int | None]] = {}  # (index, term) ->
        self.images: dict[int, tuple[object, ...]] = {}  # applied index -> canonical image

        # Client-side counters, so proposals are realistic and unique.
        self.broker_epoch = 0
        self.topic_seq = 0
        self.broker_defaults = LogConfig.defaults()

        self.stats = dict.fromkeys(
            (
                "proposals",
                "snapshots_taken",
                "snapshots_installed",
                "crashes",
                "partitions",
                "messages_sent",
                "messages_dropped",
            ),
            0,
        )
        for node in self.nodes.values():
            self._start(node)

    # ---- the run ----

    def run(self) -> SimResult:
        try:
            for _ in range(self.steps):
                self._step(faulty=True)
            return self._finish()
        except SimulationFailure:
            raise
        except _Failure as e:
            raise self._failure(str(e)) from None
        except AssertionError as e:  # an invariant asserted inside the Raft core
            raise self._failure(f"invariant: {e}") from e
        except Exception as e:  # a crash of the code under test is a failure with a seed too
            raise self._failure(f"{type(e).__name__}: {e}") from e

    def _failure(self, reason: str) -> SimulationFailure:
        return SimulationFailure(self.seed, reason, self._tail(), self.replay)

    def _tail(self) -> list[str]:
        return [self._format_trace(step, item) for step, item in self.trace]

    @staticmethod
    def _format_trace(step: int, item: object) -> str:
        if isinstance(item, tuple):
            verb, m = item
            return f"[{step:5}] {verb} {_fmt(m)}"
        return f"[{step:5}] {item}"

    def _log(self, item: object) -> None:
        self.trace.append((self.now, item))
        if self.verbose:
            print(self._format_trace(self.now, item))

    def _step(self, *, faulty: bool) -> None:
        self.now += 1
        if faulty:
            self._faults()
        self._restart_due()
        self._deliver()
        for node in self.nodes.values():
            if node.raft is not None and self.rng.random() >= self.faults.skip_tick * faulty:
                node.raft.tick()
                self._after_event(node)
        if faulty and self.rng.random() < self.faults.propose:
            self._propose()

    def _finish(self) -> SimResult:
        """Heal everything, run quietly, then demand one leader and converged nodes."""
        self._log("heal all faults; quiet from here")
        self.blocked.clear()
        self.faults = replace(self.faults, drop=0.0, duplicate=0.0)
        for node in self.nodes.values():
            node.crash_point = None
            if node.raft is None:
                node.down_until = self.now
        quiet_limit = 40 * ELECTION_TICKS
        marker: tuple[int, int] | None = None  # (index, term) of the final proposal
        for _ in range(quiet_limit):
            self._step(faulty=False)
            leader = self._sole_leader()
            if leader is None:
                continue
            assert leader.raft is not None
            if marker is None or marker[1] != leader.raft.term:
                # A marker of an earlier leader may have been overwritten: propose anew.
                data = encode_entry([ConfigRecord("__sim__", "marker", str(self.seed))])
                marker = (leader.raft.propose(data), leader.raft.term)
                self._log(f"node {leader.id} proposes the final marker at {marker[0]}")
                self._after_event(leader)
                continue
            if self._converged(leader, marker[0]):
                return self._result(leader)
        states = ", ".join(
            f"{n.id}: {n.raft.role.value} t{n.raft.term} c{n.raft.commit_index} a{n.applied}"
            for n in self.nodes.values()
            if n.raft is not None
        )
        raise self._failure(f"liveness: no convergence {quiet_limit} quiet steps ({states})")

    def _sole_leader(self) -> _Node | None:
        live = [n for n in self.nodes.values() if n.raft is not None]
        top = max(n.raft.term for n in live)  # type: ignore[union-attr]
        leaders = [n for n in live if n.raft.role is Role.LEADER and n.raft.term == top]  # type: ignore[union-attr]
        return leaders[0] if len(leaders) == 1 else None

    def _converged(self, leader: _Node, marker: int) -> bool:
        lr = leader.raft
        assert lr is not None
        if lr.commit_index < marker or leader.applied != lr.commit_index:
            return False
        for n in self.nodes.values():
            r = n.raft
            if r is None or r.commit_index != lr.commit_index or n.applied != lr.commit_index:
                return False
            if r.leader_id != leader.id:
                return False
        want = leader.image.canonical()
        for n in self.nodes.values():
            if n.image.canonical() != want:
                raise _Failure(f"node {n.id} converged to a different image than {leader.id}")
        return True

    def _result(self, leader: _Node) -> SimResult:
        assert leader.raft is not None
        return SimResult(
            seed=self.seed,
            steps=self.now,
            max_term=max(self.leaders),
            terms_with_leader=len(self.leaders),
            commit_index=leader.raft.commit_index,
            final_leader=leader.id,
            **self.stats,
        )

    # ---- faults ----

    def _faults(self) -> None:
        f, rng = self.faults, self.rng
        if self.heal_at >= 0 and self.now >= self.heal_at:
            self.blocked.clear()
            self.heal_at = -1
            self._log("partition heals")
        elif self.heal_at < 0 and rng.random() < f.partition:
            self._partition()
        if rng.random() < f.crash:
            live = [n for n in self.nodes.values() if n.raft is not None and not n.crash_point]
            down = len(self.nodes) - len(live)
            if live and down < f.max_down:
                node = rng.choice(live)
                if rng.random() < f.crash_mid_ready:
                    node.crash_point = rng.choice(_CRASH_POINTS)
                else:
                    self._crash(node, "between events")

    def _partition(self) -> None:
        rng = self.rng
        ids = sorted(self.nodes)
        kind = rng.choice(("split", "isolate", "one-way"))
        if kind == "split":
            side = set(rng.sample(ids, rng.randint(1, len(ids) // 2)))
            self.blocked = {(a, b) for a in ids for b in ids if (a in side) != (b in side)}
        elif kind == "isolate":
            x = rng.choice(ids)
            self.blocked = {(a, b) for a in ids for b in ids if a != b and x in (a, b)}
            side = {x}
        else:  # x can send but hears nothing, or the other way round
            x = rng.choice(ids)
            inbound = rng.random() < 0.5
            self.blocked = {(a, x) if inbound else (x, a) for a in ids if a != x}
            side = {x}
        self.heal_at = self.now + rng.randint(*self.faults.partition_steps)
        self.stats["partitions"] += 1
        self._log(f"partition {kind} {sorted(side)} until step {self.heal_at}")

    def _crash(self, node: _Node, where: str) -> None:
        node.raft = None
        node.crash_point = None
        node.down_until = self.now + self.rng.randint(*self.faults.down_steps)
        self.stats["crashes"] += 1
        self._log(f"node {node.id} crashes ({where}); restarts at step {node.down_until}")

    def _restart_due(self) -> None:
        for node in self.nodes.values():
            if node.raft is None and node.down_until <= self.now:
                self._start(node)

    def _start(self, node: _Node) -> None:
        node.raft = RaftNode(
            node.id,
            self.voter_ids,
            self.observer_ids,
            persisted=node.disk.load(),
            election_ticks=ELECTION_TICKS,
            heartbeat_ticks=HEARTBEAT_TICKS,
            rng=random.Random(self.rng.getrandbits(64)),
            max_append_entries=self.rng.choice((1, 4, 64)),
            max_inflight=self.rng.choice((1, 4)),
        )
        snap = node.disk.snapshot
        node.image = image_from_snapshot(snap.data) if snap else MetadataImage()
        node.applied = snap.index if snap else 0
        node.snapshot_after = self.rng.randint(*self.faults.snapshot_every)
        if self.now:
            self._log(f"node {node.id} restarts: t{node.disk.term} log to {node.raft.last_index}")

    # ---- network ----

    def _send(self, m: Message) -> None:
        f, rng = self.faults, self.rng
        self.stats["messages_sent"] += 1
        if isinstance(m, VoteResponse) and m.granted and not m.pre_vote:
            voted = self.votes.setdefault((m.src, m.term), m.dst)
            if voted != m.dst:
                raise _Failure(f"node {m.src} voted for {voted} and {m.dst} in term {m.term}")
        copies = 1 + (rng.random() < f.duplicate)
        for _ in range(copies):
            if rng.random() < f.drop:
                self.stats["messages_dropped"] += 1
                self._log(("drop", m))
                continue
            self.net_seq += 1
            at = self.now + rng.randint(1, f.max_delay)
            heapq.heappush(self.net, (at, rng.random(), self.net_seq, m))

    def _deliver(self) -> None:
        while self.net and self.net[0][0] <= self.now:
            m = heapq.heappop(self.net)[3]
            node = self.nodes[m.dst]
            if node.raft is None or (m.src, m.dst) in self.blocked:
                self.stats["messages_dropped"] += 1
                self._log(("lost" if node.raft is None else "cut", m))
                continue
            self._log(("recv", m))
            node.raft.step(m)
            self._after_event(node)

    # ---- clients ----

    def _propose(self) -> None:
        live = [n for n in self.nodes.values() if n.raft is not None]
        if not live:
            return
        node = self.rng.choice(live)
        assert node.raft is not None
        if node.raft.role is not Role.LEADER:
            role = node.raft.role.value
            try:
                node.raft.propose(b"?")
            except NotLeaderError as e:
                target = self.nodes.get(e.leader_id) if e.leader_id is not None else None
                if target is None or target.raft is None:
                    return
                node = target  # a client follows the leader hint
            else:
                raise _Failure(f"node {node.id} ({role}) accepted a proposal")
        assert node.raft is not None
        records = self._records(node.image)
        if not records:
            return
        try:
            index = node.raft.propose(encode_entry(records))
        except NotLeaderError:
            return
        self.stats["proposals"] += 1
        self._log(f"node {node.id} proposes {records[0].kind}x{len(records)} at {index}")
        self._after_event(node)

    def _records(self, image: MetadataImage) -> list[MetadataRecord]:
        """A realistic controller request, decided on the proposer's applied image."""
        rng = self.rng
        choice = rng.random()
        topics = sorted(image.topics)
        try:
            if choice < 0.2 or not image.unfenced_brokers():
                self.broker_epoch += 1
                b = rng.randint(1, 5)
                record = RegisterBrokerRecord(b, self.broker_epoch, f"broker{b}", 9092, None)
                return [
                    *register_broker_records(image, record, self.broker_defaults),
                    BrokerFenceRecord(b, self.broker_epoch, False),
                ]
            if choice < 0.5 or not topics:
                self.topic_seq += 1
                configs = rng.choice(({}, {"retention.ms": "60000"}, {"cleanup.policy": "compact"}))
                return create_topic_records(
                    image,
                    f"topic-{self.topic_seq}",
                    rng.randint(1, 3),
                    rng.randint(1, min(3, len(image.unfenced_brokers()))),
                    configs,
                    broker_defaults=self.broker_defaults,
                    new_topic_id=lambda: f"id-{self.topic_seq}",
                    rng=rng,
                )
            if choice < 0.7:
                change = rng.choice(
                    (
                        {"retention.ms": str(rng.randint(1000, 10**6))},
                        {"cleanup.policy": rng.choice(("compact", "delete"))},
                        {"retention.ms": None},
                    )
                )
                return alter_config_records(
                    image, rng.choice(topics), change, broker_defaults=self.broker_defaults
                )
            if choice < 0.8:
                return delete_topic_records(image, rng.choice(topics))
            if choice < 0.85:
                fenced = rng.choice(image.unfenced_brokers())
                return fence_broker_records(image, fenced, self.broker_defaults)
            if choice < 0.93:
                return self._alter_partition(image, rng.choice(topics))
            broker = image.brokers[rng.choice(image.unfenced_brokers())]
            return allocate_producer_ids(image, broker.broker_id, broker.broker_epoch)[1]
        except ControlError:
            return []

    def _alter_partition(self, image: MetadataImage, topic: str) -> list[MetadataRecord]:
        """A leader's AlterPartition as a broker sends it: a shrink or an expansion of
        one partition's ISR, each member with the broker epoch the leader saw (now and
        then a stale one, which the controller must refuse: KIP-903)."""
        rng = self.rng
        partitions = image.topics[topic].partitions
        if not partitions:
            return []
        p = rng.choice(sorted(partitions))
        state = partitions[p]
        if state.leader < 0:
            return []
        others = [r for r in state.replicas if r != state.leader]
        isr = [state.leader, *rng.sample(others, rng.randint(0, len(others)))]
        epochs = []
        for r in isr:
            broker = image.brokers.get(r)
            epoch = broker.broker_epoch if broker is not None else -1
            epochs.append(epoch - 1 if rng.random() < 0.1 else epoch)
        leader = image.brokers.get(state.leader)
        change = IsrChange(
            topic, p, state.leader_epoch, state.partition_epoch, tuple(isr), tuple(epochs)
        )
        records, answers = alter_partitions_records(
            image, state.leader, leader.broker_epoch if leader else -1, [change]
        )
        stale = any(
            (b := image.brokers.get(r)) is not None and 0 <= e != b.broker_epoch
            for r, e in zip(isr, epochs, strict=True)
        )
        if stale and answers[0][0] != "INELIGIBLE_REPLICA":
            raise _Failure(f"AlterPartition naming a stale broker epoch answered {answers[0]}")
        return records

    # ---- a node's Ready, and the checks ----

    def _after_event(self, node: _Node) -> None:
        raft = node.raft
        assert raft is not None
        if raft.role is Role.LEADER:
            self._check_new_leader(node)
        if not raft.has_ready():
            return
        rd = raft.ready()
        if node.crash_point == "before_persist":
            self._crash(node, "before persisting a Ready")
            return
        self._check_log_matching(raft, rd.entries)
        node.disk.persist(rd)
        self._observe_commit(raft)
        if node.crash_point == "after_persist":
            self._crash(node, "after persisting, before sending")
            return
        for m in rd.messages:
            self._send(m)
        if node.crash_point == "after_send":
            self._crash(node, "after sending, before applying")
            return
        self._apply(node, rd)
        raft.advance(rd)
        if node.applied - raft.snapshot_index >= node.snapshot_after:
            self._take_snapshot(node)

    def _check_new_leader(self, node: _Node) -> None:
        raft = node.raft
        assert raft is not None
        first = self.leaders.setdefault(raft.term, node.id)
        if first != node.id:
            raise _Failure(f"two leaders in term {raft.term}: {first} and {node.id}")
        if self.checked_leader.get(node.id) == raft.term:
            return
        self.checked_leader[node.id] = raft.term
        self._log(f"node {node.id} is leader of term {raft.term} (log to {raft.last_index})")
        # Leader completeness: every committed entry is in the new leader's log.
        for index in range(raft.snapshot_index + 1, len(self.committed) + 1):
            term, data = self.committed[index - 1]
            if raft.term_at(index) != term or raft.entries(index, index + 1)[0].data != data:
                raise _Failure(
                    f"leader {node.id} of term {raft.term} lacks committed entry {index}/{term}"
                )
        snap_index = raft.snapshot_index
        if snap_index and self.committed[snap_index - 1][0] != raft.term_at(snap_index):
            raise _Failure(f"leader {node.id}'s snapshot at {snap_index} is not the committed one")

    def _check_log_matching(self, raft: RaftNode, entries: Sequence[Entry]) -> None:
        """Same index and term means same data and same predecessor, hence same prefix."""
        for e in entries:
            prev = raft.term_at(e.index - 1)
            known = self.seen.setdefault((e.index, e.term), (e.data, prev))
            if known[0] != e.data or (prev is not None and known[1] not in (None, prev)):
                raise _Failure(f"log matching: two different entries {e.index}/{e.term}")

    def _observe_commit(self, raft: RaftNode) -> None:
        """Extend the global committed sequence with what this node now knows committed
        (its whole log is persisted at this point, so the commit is durable)."""
        start = len(self.committed) + 1
        if raft.commit_index < start:
            return
        if start <= raft.snapshot_index:
            raise _Failure(f"node {raft.id} committed past {start} with no entries for it")
        for e in raft.entries(start, raft.commit_index + 1):
            self.committed.append((e.term, e.data))

    def _apply(self, node: _Node, rd: Ready) -> None:
        if rd.snapshot is not None:
            snap = rd.snapshot
            self.stats["snapshots_installed"] += 1
            self._log(f"node {node.id} installs snapshot at {snap.index}/{snap.term}")
            if snap.index > len(self.committed) or self.committed[snap.index - 1][0] != snap.term:
                raise _Failure(f"node {node.id} installed an uncommitted snapshot {snap.index}")
            node.image = image_from_snapshot(snap.data)
            node.applied = snap.index
            self._check_image(node)
        for e in rd.committed_entries:
            if e.index != node.applied + 1:
                raise _Failure(f"node {node.id} applies {e.index} after {node.applied}")
            if e.index > len(self.committed) or self.committed[e.index - 1] != (e.term, e.data):
                raise _Failure(
                    f"state machine safety: node {node.id} applies {e.index}/{e.term}, "
                    f"which is not the committed entry"
                )
            if e.data:
                apply_batch(node.image, e.data)
            node.applied = e.index
        if rd.committed_entries:
            self._check_image(node)

    def _check_image(self, node: _Node) -> None:
        image = node.image.canonical()
        known = self.images.setdefault(node.applied, image)
        if known != image:
            raise _Failure(f"node {node.id}'s image at {node.applied} differs from another's")

    def _take_snapshot(self, node: _Node) -> None:
        raft = node.raft
        assert raft is not None
        raft.compact(node.applied, encode_entry(node.image.to_records()))
        snap = raft.snapshot
        assert snap is not None
        node.disk.compact(snap)
        node.snapshot_after = self.rng.randint(*self.faults.snapshot_every)
        self.stats["snapshots_taken"] += 1
        self._check_image(node)


def _replay_command(
    seed: int, voters: int, observers: int, steps: int, faults: FaultProfile
) -> str:
    cmd = f"python -m seglog.sim.raft_sim --seed {seed} --voters {voters}"
    cmd += f" --observers {observers} --steps {steps}"
    for name, profile in PROFILES.items():
        if profile == faults:
            return cmd + f" --profile {name} --verbose"
    return cmd + f" --verbose  # with faults={faults}"


def simulate(
    seed: int,
    voters: int = 3,
    observers: int = 0,
    steps: int = DEFAULT_STEPS,
    faults: FaultProfile = PROFILES["default"],
    *,
    verbose: bool = False,
) -> SimResult:
    """Run one seeded simulation; raise SimulationFailure naming the seed if any check fails."""
    return _Sim(seed, voters, observers, steps, faults, verbose).run()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--voters", type=int, default=3)
    p.add_argument("--observers", type=int, default=0)
    p.add_argument("--steps", type=int, default=DEFAULT_STEPS)
    p.add_argument("--profile", choices=sorted(PROFILES), default="default")
    p.add_argument("--verbose", action="store_true", help="print the whole trace")
    args = p.parse_args(argv)
    try:
        result = simulate(
            args.seed,
            args.voters,
            args.observers,
            args.steps,
            PROFILES[args.profile],
            verbose=args.verbose,
        )
    except SimulationFailure as e:
        print(f"FAILED {e}", file=sys.stderr)
        return 1
    print(", ".join(f"{f.name}={getattr(result, f.name)}" for f in fields(result)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
