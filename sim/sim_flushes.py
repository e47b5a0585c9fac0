"""flush.messages deferred in the replication simulator, as a node on an event loop
defers it (storage/log_flushing.py, node/message_flusher.py): an append that reaches
the partition's flush.messages yields a FlushLog action, the replica holds the answers
(or, on a follower, the next fetch) that must wait for it, and the node's flush pool
runs the fsync. Here the pool's run is an event 1-40 ms later, drawn from a generator
of its own so that the seed's other draws stay what they were without the option."""

from __future__ import annotations

import random

from seglog.replication.partition_replica import NONE, Action, ProduceCompleted
from seglog.sim.disk_log import DiskLog
from seglog.sim.replication_model import SimLog, SimNode, SimulationState


class SimFlushes(SimulationState):
    flush_messages: int  # the disk logs' flush.messages; 0: not set (never deferred)
    flush_rng: random.Random

    def apply(self, node: SimNode, p: int, actions: list[Action]) -> None:
        raise NotImplementedError

    def poll_fetcher(self, node: SimNode, p: int) -> None:
        raise NotImplementedError

    def prepare_log(self, log: SimLog) -> SimLog:
        """A disk log as the node opens it: flush.messages deferred when it is set."""
        if self.flush_messages and isinstance(log, DiskLog):
            log.log.defer_message_flushes = True
        return log

    def check_durable_ack(self, node: SimNode, p: int, done: ProduceCompleted) -> None:
        """With flush.messages=1 every acknowledged batch is fsynced on the leader
        before its answer leaves (acks=1 and acks=all alike; a retry answered as a
        duplicate too): a power failure right after the answer keeps it."""
        if self.flush_messages != 1 or done.error != NONE or done.base_offset < 0:
            return
        durable = node.logs[p].durable_offset
        if durable <= done.base_offset:
            self.fail(
                f"n{node.id} p{p} answered a produce at offset {done.base_offset} "
                f"(acks={done.acks}) with only {durable} fsynced, flush.messages=1"
            )

    def flush_requested(self, node: SimNode, p: int) -> None:
        """A FlushLog action: the node's flush pool takes the job."""
        delay = self.flush_rng.randint(1, 40)
        self.at(self.now + delay, "flushed", node.id, p, node.incarnation)

    def _on_flushed(self, b: int, p: int, incarnation: int) -> None:
        """The pool's run (MessageFlusher._run): the log's demanded flush, then the
        replica's on_flushed (held answers go; a follower fetches on)."""
        node = self.nodes[b]
        if not node.up or incarnation != node.incarnation:
            return  # the process that asked is gone, and its pool with it
        if node.paused:
            self.at(self.now + 10, "flushed", b, p, incarnation)  # its pool is paused too
            return
        log = node.logs[p]
        assert isinstance(log, DiskLog)
        job = log.log.begin_demanded_flush(time_ms=self.now)
        if job is not None:
            job.run()
            log.log.end_flush(job)
            self.stats["deferred_flushes"] += 1
        replica = node.replicas.get(p)
        if replica is not None:
            self.trace(f"n{b} p{p} flushed to {log.recovery_point}")
            self.apply(node, p, replica.on_flushed())
            self.poll_fetcher(node, p)
