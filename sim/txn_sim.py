"""A seeded, deterministic simulator of the transaction coordinator.

One `random.Random(seed)` drives everything: three nodes that each run the production
`TransactionCoordinator` (node/transactions/, the objects a node runs) for one
`__transaction_state` partition, a model of that replicated partition (appends under a
leader epoch, acknowledged or refused; a failover moves the leadership to another node,
which loads what was acknowledged), marker writes that succeed or fail, the clock, and
producers sharing a few transactional ids (so zombies fence each other) that
initialise, add partitions, commit, abort or stall past their transaction timeout. So
one seed replays any failure:

    python -m seglog.sim.txn_sim --seed 42 --verbose
    python -m seglog.sim.txn_sim --seeds 2000

Checked while it runs:
* every acknowledged `__transaction_state` record of a transactional id follows the
  one before it by Kafka's table of valid transitions (txn_metadata.VALID_PREVIOUS);
* markers go out only for a decided transaction: the id's last acknowledged record
  is PrepareCommit (for COMMIT markers) or PrepareAbort (for ABORT), with the same
  producer id and epoch;
* an EndTxn(commit) answered NONE is followed by no ABORT decision for that
  transaction, and an EndTxn(abort) answered NONE by no COMMIT;
* fencing: once InitProducerId answered epoch e for an id, no AddPartitionsToTxn or
  EndTxn with an older epoch of that id is answered NONE.
At the end the faults stop and the clock runs on: every transaction must end in
Empty, CompleteCommit or CompleteAbort, its markers written.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass, field
from itertools import count

from seglog.node.transactions import txn_records as rec
from seglog.node.transactions.transaction_coordinator import TransactionCoordinator
from seglog.node.transactions.txn_config import TxnConfig
from seglog.node.transactions.txn_metadata import VALID_PREVIOUS
from seglog.node.transactions.txn_records import TxnLogValue, TxnState
from seglog.node.transactions.txn_shard import Action, Append, Respond, SendMarkers, TxnResult
from seglog.sim.seed_runs import SimInvariantError, seeds_main

S = TxnState
NODES = (1, 2, 3)
IDS = ("tx-a", "tx-b")
PARTITIONS = [("orders", p) for p in range(3)]
TIMEOUT_MS = 3_000
STEPS = 400
DONE_STATES = (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)


@dataclass
class Producer:
    """A client with a transactional id; several may share one (zombies)."""

    tid: str
    producer_id: int = -1
    epoch: int = -1
    in_txn: bool = False
    waiting: int | None = None  # request id outstanding
    asked: tuple[str, ...] = ()  # what the outstanding request was


@dataclass
class Node:
    coordinator: TransactionCoordinator
    epoch: int = -1  # the leader epoch it loaded at; -1: not leading


@dataclass
class TxnSim:
    seed: int
    verbose: bool = False
    rng: random.Random = field(init=False)
    now: int = 0
    step: int = 0
    log: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    leader: int = 1
    leader_epoch: int = 0
    faults: bool = True

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        pids = count(1000)
        config = TxnConfig(transaction_state_log_num_partitions=1)
        self.nodes = {n: Node(TransactionCoordinator(config, lambda: next(pids))) for n in NODES}
        self.producers = [Producer(IDS[i % len(IDS)]) for i in range(4)]
        self.rids = count(1)
        self.inflight: list[tuple[int, int, Action]] = []  # (node, epoch, action) to carry out
        self.latest_init: dict[str, int] = {}
        self.promised: dict[tuple[str, int, int], bool] = {}  # (tid, pid, epoch) -> commit
        self._load(self.leader)

    # --- the replicated partition ------------------------------------------------------

    def _say(self, text: str) -> None:
        if self.verbose:
            print(f"[{self.step} t={self.now}] {text}")

    def _fail(self, text: str) -> None:
        raise SimInvariantError(f"seed {self.seed}, step {self.step}: {text}")

    def _load(self, node: int) -> None:
        coordinator = self.nodes[node].coordinator
        shard, out = coordinator.begin_loading(0, self.leader_epoch)
        self._queue(node, out)
        for key, value in self.log:
            shard.replay(key, value)
        self.nodes[node].epoch = self.leader_epoch
        self._queue(node, coordinator.finish_loading(shard))

    def _failover(self) -> None:
        old = self.leader
        self.leader = self.rng.choice([n for n in NODES if n != old])
        self.leader_epoch += 1
        self._say(f"failover {old} -> {self.leader} at epoch {self.leader_epoch}")
        self._queue(old, self.nodes[old].coordinator.unload(0))
        self.nodes[old].epoch = -1
        self._load(self.leader)

    def _last_value(self, tid: str) -> TxnLogValue | None:
        key = rec.encode_key(tid)
        for k, v in reversed(self.log):
            if k == key:
                return rec.decode_value(v)
        return None

    def _acknowledge(self, key: bytes, value: bytes | None) -> None:
        tid = rec.decode_key(key)
        before, after = self._last_value(tid), rec.decode_value(value)
        if after is not None:
            previous = before.state if before is not None else S.EMPTY
            if previous not in VALID_PREVIOUS[after.state]:
                self._fail(f"{tid}: logged {previous.kafka_name} -> {after.state.kafka_name}")
            self._check_promises(tid, after)
            if after.state is S.ONGOING and (before is None or before.state is not S.ONGOING):
                # A new transaction: what was promised of the last one is settled.
                self.promised = {k: v for k, v in self.promised.items() if k[0] != tid}
        self.log.append((key, value))

    def _check_promises(self, tid: str, value: TxnLogValue) -> None:
        # The decision of the transaction an EndTxn was answered for, whatever epoch it
        # is written under (an abort that fences bumps it).
        decided = {S.PREPARE_COMMIT: True, S.PREPARE_ABORT: False}.get(value.state)
        for (t, _pid, _epoch), commit in self.promised.items():
            if t == tid and decided is not None and decided != commit:
                self._fail(f"{tid}: EndTxn answered commit={commit}, then decided {decided}")

    # --- carrying out actions ---------------------------------------------------------

    def _queue(self, node: int, actions: list[Action]) -> None:
        """Actions to carry out later; answers are judged now, in the order the
        coordinator gives them."""
        epoch = self.nodes[node].epoch
        for a in actions:
            if isinstance(a, Respond):
                self._judge(a.request_id, a.result)
        self.inflight += [(node, epoch, a) for a in actions]

    def _carry_out_one(self) -> None:
        i = self.rng.randrange(len(self.inflight))
        node, epoch, a = self.inflight.pop(i)
        coordinator = self.nodes[node].coordinator
        if isinstance(a, Respond):
            self._answer(a.request_id, a.result)
        elif isinstance(a, Append):
            ok = a.leader_epoch == self.leader_epoch and node == self.leader
            if ok and self.faults and self.rng.random() < 0.05:
                ok = False
            error = "NONE" if ok else "NOT_LEADER_OR_FOLLOWER"
            if ok:
                self._acknowledge(a.key, a.value)
            self._queue(
                node, coordinator.on_write_done(0, a.leader_epoch, a.write_id, error, self.now)
            )
        elif isinstance(a, SendMarkers):
            last = self._last_value(a.transactional_id)
            wanted = S.PREPARE_COMMIT if a.commit else S.PREPARE_ABORT
            if a.coordinator_epoch == self.leader_epoch and (
                last is None
                or last.state is not wanted
                or (last.producer_id, last.producer_epoch) != (a.producer_id, a.producer_epoch)
            ):
                self._fail(f"markers commit={a.commit} for {a.transactional_id} after {last}")
            error = "NONE" if not self.faults or self.rng.random() < 0.8 else "REQUEST_TIMED_OUT"
            self._queue(
                node,
                coordinator.on_markers_done(
                    0, a.coordinator_epoch, a.transactional_id, a.producer_id,
                    a.producer_epoch, error, self.now,
                ),
            )  # fmt: skip

    # --- producers --------------------------------------------------------------------

    def _answer(self, request_id: int, result: TxnResult) -> None:
        for p in self.producers:
            if p.waiting != request_id:
                continue
            p.waiting = None
            kind = p.asked[0]
            self._say(f"{p.tid} {kind} -> {result}")
            if result.error != "NONE":
                if result.error in ("PRODUCER_FENCED", "INVALID_PRODUCER_ID_MAPPING"):
                    p.producer_id, p.epoch, p.in_txn = -1, -1, False
                return
            if kind == "init":
                p.producer_id, p.epoch, p.in_txn = result.producer_id, result.producer_epoch, False
            elif kind == "add":
                p.in_txn = True
            elif kind == "end":
                p.in_txn = False
            return

    def _check_fenced(self, tid: str, kind: str, epoch: int, result_error: str) -> None:
        if result_error == "NONE" and epoch < self.latest_init.get(tid, -1):
            self._fail(f"{tid}: {kind} with epoch {epoch} answered NONE after a newer init")

    def _client_step(self) -> None:
        p = self.rng.choice(self.producers)
        if p.waiting is not None:
            return
        node = self.rng.choice(NODES)  # clients may ask a node that is no longer leader
        coordinator = self.nodes[node].coordinator
        rid = next(self.rids)
        if p.producer_id < 0 or self.rng.random() < 0.05:
            p.asked = ("init",)
            p.waiting = rid
            out = coordinator.init_producer_id(rid, p.tid, TIMEOUT_MS, -1, -1, self.now)
        elif not p.in_txn or self.rng.random() < 0.3:
            parts = self.rng.sample(PARTITIONS, self.rng.randint(1, len(PARTITIONS)))
            p.asked = ("add",)
            p.waiting = rid
            out = coordinator.add_partitions(rid, p.tid, p.producer_id, p.epoch, parts, self.now)
        elif self.rng.random() < 0.15:
            return  # stalls: the timeout may abort its transaction
        else:
            commit = self.rng.random() < 0.6
            p.asked = ("end", str(commit))
            p.waiting = rid
            out = coordinator.end_txn(rid, p.tid, p.producer_id, p.epoch, commit, self.now)
        self._queue(node, out)

    def _judge(self, request_id: int, result: TxnResult) -> None:
        waiting = [p for p in self.producers if p.waiting == request_id]
        if not waiting:
            return
        p = waiting[0]
        kind = p.asked[0]
        if kind == "init" and result.error == "NONE":
            self.latest_init[p.tid] = max(self.latest_init.get(p.tid, -1), result.producer_epoch)
        elif kind in ("add", "end"):
            self._check_fenced(p.tid, kind, p.epoch, result.error)
        if kind == "end" and result.error == "NONE":
            self.promised[(p.tid, p.producer_id, p.epoch)] = p.asked[1] == "True"

    # --- the run ----------------------------------------------------------------------

    def run(self) -> None:
        for self.step in range(STEPS):
            self.now += self.rng.randint(1, 60)
            roll = self.rng.random()
            if roll < 0.02:
                self._failover()
            elif roll < 0.45 and self.inflight:
                self._carry_out_one()
            elif roll < 0.5:
                self._queue(self.leader, self.nodes[self.leader].coordinator.tick(self.now))
            else:
                self._client_step()
        self._settle()

    def _settle(self) -> None:
        """Faults stop; answers, writes and markers are carried out and the clock runs
        past every timeout: every transaction must end."""
        self.faults = False
        for _ in range(200):
            while self.inflight:
                self._carry_out_one()
            self.now += TIMEOUT_MS
            self._queue(self.leader, self.nodes[self.leader].coordinator.tick(self.now))
        shard = self.nodes[self.leader].coordinator.shards[0]
        for tid, meta in shard.txns.items():
            if meta.state not in DONE_STATES or meta.pending is not None:
                self._fail(f"{tid} still {meta.state.kafka_name} after the faults stopped")


def run_seed(seed: int, verbose: bool = False) -> TxnSim:
    sim = TxnSim(seed, verbose)
    sim.run()
    return sim


def main(argv: list[str] | None = None) -> int:
    return seeds_main("python -m seglog.sim.txn_sim", run_seed, argv)


if __name__ == "__main__":
    sys.exit(main())
