"""The replication simulator's checker: the invariants of docs/simulators.md, tested after
every event (committed prefix never lost, followers prefixes of their leader, HW never
back, no duplicates, acknowledged writes present) and at the end (convergence). A part of
`Simulation`, kept in its own class so each stays one idea."""

from __future__ import annotations

from seglog.replication.partition_replica import PartitionReplica
from seglog.sim.disk_log import DiskLog
from seglog.sim.memory_log import MemoryLog
from seglog.sim.replication_model import SAFE, SimNode, SimulationState, _Ack, _Committed
from seglog.storage.log import MAX_MAPPED_INACTIVE
from seglog.storage.record_batch import (
    BatchHeader,
    decode_records,
    increment_sequence,
    iter_batches,
)


class ReplicationChecks(SimulationState):
    # The simulation's state only the checks use besides the shared one.
    _committed_key: dict[int, object]
    _follower_key: dict[tuple[int, int], object]
    hw_seen: dict[tuple[int, int, int, int], int]
    _checked: tuple[int, int]
    pending_acks: list[_Ack]
    acked_msgs: dict[int, list[bytes]]
    steps: int
    finished: bool

    def _on_converged(self) -> None:
        if not self._is_converged():
            self.at(self.now + 250, "converged")
            return
        self.final_checks()
        self.finished = True
        self.trace(f"converged after {self.steps} steps; stats {self.stats}")

    def _leader_replica(self, p: int) -> PartitionReplica | None:
        st = self.controller.partitions[p]
        if st.leader < 0:
            return None
        node = self.nodes[st.leader]
        rep = node.replicas.get(p)
        if node.up and rep is not None and rep.is_leader and rep.leader_epoch == st.leader_epoch:
            return rep
        return None

    def check(self) -> None:
        # Only logs (data, HW) and roles/membership matter; skip steps that changed neither.
        signature = (MemoryLog.mutations, self.structure)
        if signature == self._checked:
            return
        self._checked = signature
        for p in self.committed:
            for node in self.nodes.values():
                rep = node.replicas.get(p)
                if rep is None or not node.up or not rep.is_leader:
                    continue
                key = (node.id, node.incarnation, p, rep.leader_epoch)
                hw = rep.log.high_watermark
                if hw < self.hw_seen.get(key, -1):
                    self.fail(f"leader n{node.id} p{p} HW went back {self.hw_seen[key]} -> {hw}")
                self.hw_seen[key] = hw
            leader = self._leader_replica(p)
            if leader is None:
                continue
            self._check_committed(p, leader)
            self._check_followers(p, leader)
        self._check_mapped_indexes()

    def _check_mapped_indexes(self) -> None:
        """Every disk log keeps the indexes of at most MAX_MAPPED_INACTIVE inactive
        segments mapped: a mapped index holds a file descriptor, and a node whose logs
        kept every index mapped ran out of descriptors in a chaos soak."""
        for node in self.nodes.values():
            if not node.up:
                continue
            for p, rep in node.replicas.items():
                log = rep.log
                if not isinstance(log, DiskLog):
                    continue
                segments = log.log.segments
                mapped = sum(1 for s in segments[:-1] if s.indexes_loaded)
                if mapped > MAX_MAPPED_INACTIVE:
                    self.fail(
                        f"n{node.id} p{p} keeps the indexes of {mapped} of its "
                        f"{len(segments) - 1} inactive segments mapped "
                        f"(at most {MAX_MAPPED_INACTIVE})"
                    )

    def _check_committed(self, p: int, leader: PartitionReplica) -> None:
        log = leader.log
        assert isinstance(log, MemoryLog | DiskLog)
        key = (leader.node_id, id(log), log.version, log.high_watermark)
        if self._committed_key.get(p) == key:
            return
        self._committed_key[p] = key
        c = self.committed[p]
        if log.log_end_offset < c.end or log.prefix(c.end) != c.data:
            if self.params.mode == SAFE:
                self.fail(
                    f"committed data lost: leader n{leader.node_id} p{p} {log!r} does not start "
                    f"with the committed prefix ending at {c.end}"
                )
            self.trace(f"p{p} committed history replaced by n{leader.node_id} (wild mode)")
            c = self.committed[p] = _Committed()
        hw = log.high_watermark
        if hw <= c.end:
            return
        new = bytes(log.prefix(hw))
        for _pos, h in iter_batches(new, len(c.data)):
            self._commit_batch(p, c, h, new, _pos)
        c.data = new
        c.end = hw
        self._verify_acks()

    def _commit_batch(self, p: int, c: _Committed, h: BatchHeader, buf: bytes, pos: int) -> None:
        c.batches[h.base_offset] = h
        if h.producer_id < 0:
            return
        seq = h.base_sequence
        for _ in range(h.records_count):
            k = (h.producer_id, h.producer_epoch, seq)
            if k in c.sequences:
                self.fail(f"p{p} duplicate producer sequence {k} at offset {h.base_offset}")
            c.sequences.add(k)
            seq = increment_sequence(seq, 1)
        for r in decode_records(buf, pos, h):
            assert r.value is not None
            owner = int(r.value.split(b":")[0][1:])
            if r.value in c.messages and not self.producers[owner].bumped:
                self.fail(f"p{p} message {r.value!r} committed twice (offset {r.offset})")
            c.messages.add(r.value)

    def _verify_acks(self) -> None:
        if self.params.mode != SAFE:
            return
        keep = []
        for a in self.pending_acks:
            c = self.committed[a.partition]
            if a.offset >= c.end:
                keep.append(a)
                continue
            h = c.batches.get(a.offset)
            if h is None or (h.producer_id, h.producer_epoch, h.base_sequence, h.records_count) != (
                a.pid,
                a.epoch,
                a.seq,
                a.count,
            ):
                self.fail(
                    f"acknowledged acks=-1 write lost: p{a.partition} offset {a.offset} "
                    f"pid {a.pid} seq {a.seq} is {h!r} in the committed log"
                )
        self.pending_acks = keep

    def _check_followers(self, p: int, leader: PartitionReplica) -> None:
        llog = leader.log
        assert isinstance(llog, MemoryLog | DiskLog)
        for node in self.nodes.values():
            rep = node.replicas.get(p)
            if (
                rep is None
                or not node.up
                or not rep.is_synced_follower()
                or rep.leader_epoch != leader.leader_epoch
            ):
                continue
            flog = rep.log
            assert isinstance(flog, MemoryLog | DiskLog)
            key = (id(flog), flog.version, id(llog), llog.version)
            if self._follower_key.get((node.id, p)) == key:
                continue
            self._follower_key[(node.id, p)] = key
            n = flog.log_end_offset
            if n > llog.log_end_offset or flog.prefix(n) != llog.prefix(n):
                self.fail(
                    f"p{p} follower n{node.id} {flog!r} is not a prefix of leader "
                    f"n{leader.node_id} {llog!r}"
                )

    def _is_converged(self) -> bool:
        if any(not n.up or n.paused or self._faulty_registration(n) for n in self.nodes.values()):
            return False
        if not all(pr.done for pr in self.producers.values()):
            return False
        for p, st in self.controller.partitions.items():
            leader = self._leader_replica(p)
            if leader is None or set(st.isr) != set(st.replicas) or set(leader.isr) != set(st.isr):
                return False
            llog = leader.log
            assert isinstance(llog, MemoryLog | DiskLog)
            if llog.high_watermark != llog.log_end_offset:
                return False
            for r in st.replicas:
                flog = self.nodes[r].logs[p]
                if (
                    flog.log_end_offset != llog.log_end_offset
                    or flog.high_watermark != flog.log_end_offset
                    or flog.prefix(flog.log_end_offset) != llog.prefix(llog.log_end_offset)
                ):
                    return False
        return True

    def _faulty_registration(self, node: SimNode) -> bool:
        return (
            not node.registered
            or node.id in self.controller.fenced
            or self.controller.broker_epochs[node.id] != node.broker_epoch
        )

    def final_checks(self) -> None:
        if self.params.mode != SAFE:
            return
        if self.pending_acks:
            self.fail(f"acknowledged writes never committed: {self.pending_acks[:5]}")
        for pr in self.producers.values():
            if pr.acks != -1:
                continue
            c = self.committed[pr.partition]
            missing = [m for m in self.acked_msgs[pr.id] if m not in c.messages]
            if missing or len(self.acked_msgs[pr.id]) != pr.total:
                self.fail(
                    f"producer P{pr.id}: acked {len(self.acked_msgs[pr.id])}/{pr.total}, "
                    f"missing from the log {missing[:5]}"
                )
