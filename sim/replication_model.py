"""The replication simulator's model: its parameters, nodes, producers and what the
checks record (the committed prefix, acknowledgements). The simulation
(`replication_sim`), its faults (`sim_faults`) and its checks (`replication_checks`)
share these types; none of them imports another."""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from seglog.replication.alter_partition_batcher import AlterPartitionBatcher
from seglog.replication.partition_replica import PartitionReplica, ReplicaConfig
from seglog.sim.disk_log import DiskLog
from seglog.sim.memory_log import MemoryLog
from seglog.sim.sim_controller import SimController
from seglog.storage.record_batch import BatchHeader, NewRecord, build_batch

CONTROLLER = 0
PRODUCER_BASE = 1000
SAFE = "safe"
WILD = "wild"
DISK = "disk"  # production's Log on tmpfs files, crashes applied to the files
MEMORY = "memory"  # MemoryLog: the fast mode (same validation, same state, no files)
FSYNC_FAILURE = 0.002  # share of flushes that fail (disk storage only)
_TMPFS = "/dev/shm" if os.path.isdir("/dev/shm") else None
SimLog = MemoryLog | DiskLog
ALTER_PARTITION_TIMEOUT_MS = 500  # a node gives up on an unanswered AlterPartition
ALTER_PARTITION_BACKOFF_MS = (50, 1000)  # then retries after a backoff, doubling


class SimulationFailure(AssertionError):
    def __init__(
        self, seed: int, mode: str, message: str, trace: Sequence[str], options: str = ""
    ) -> None:
        tail = "\n".join(trace)
        super().__init__(
            f"seed {seed} ({mode}): {message}\n"
            f"replay: python -m seglog.sim.replication_sim --seed {seed}{options} "
            f"--verbose\n"
            f"--- trace tail ---\n{tail}"
        )
        self.seed = seed
        self.message = message


@dataclass(frozen=True, slots=True)
class SimParams:
    mode: str
    nodes: int
    partitions: int
    replication_factor: int
    min_insync: int
    unclean: bool
    lag_ms: int
    session_timeout_ms: int
    drop: float
    duplicate: float
    max_delay_ms: int
    fault_gap_ms: tuple[int, int]
    producers_per_partition: int
    batches_per_producer: int
    acks1_share: float
    flush_probability: float
    active_ms: int
    max_quiesce_ms: int
    # A slow controller: each request waits [lo, hi] ms and they are served one after
    # another, so ISR changes queue up behind each other (0, 0: answered on arrival).
    controller_delay_ms: tuple[int, int] = (0, 0)


def draw_many_partitions_params(rng: random.Random, mode: str | None = None) -> SimParams:
    """Many partitions and a slow controller: ISR changes, elections and fencing of
    dozens of partitions queue at a controller that answers each request late."""
    base = draw_params(rng, mode)
    return replace(
        base,
        partitions=rng.choice((16, 32, 48)),
        producers_per_partition=1,
        batches_per_producer=rng.randint(3, 6),
        controller_delay_ms=rng.choice(((20, 80), (50, 250), (200, 600))),
    )


def draw_params(rng: random.Random, mode: str | None = None) -> SimParams:
    mode = mode or (WILD if rng.random() < 0.25 else SAFE)
    return SimParams(
        mode=mode,
        nodes=rng.choice((3, 3, 4)),
        partitions=rng.choice((1, 2)),
        replication_factor=3,
        min_insync=2,
        unclean=mode == WILD and rng.random() < 0.5,
        lag_ms=1000,
        session_timeout_ms=600,
        drop=rng.choice((0.0, 0.01, 0.05)),
        duplicate=rng.choice((0.0, 0.01, 0.03)),
        max_delay_ms=rng.choice((3, 15, 40, 100)),
        fault_gap_ms=rng.choice(((20, 300), (150, 600), (300, 1500), (800, 3000))),
        producers_per_partition=rng.choice((1, 2)),
        batches_per_producer=rng.randint(8, 25),
        acks1_share=rng.choice((0.0, 0.3, 0.5)),
        flush_probability=rng.choice((0.05, 0.2, 0.6)),
        active_ms=rng.randint(4000, 7000),
        max_quiesce_ms=30_000,
    )


# --- nodes and producers ----------------------------------------------------------------


class SimNode:
    def __init__(
        self,
        node_id: int,
        hosted: Sequence[int],
        config: ReplicaConfig,
        broker_epoch: int,
        logs: dict[int, SimLog],
        clock: Callable[[], int] | None = None,
    ) -> None:
        self.id = node_id
        # The node's wall clock: the simulated time plus the steps --clock-step-ms gave
        # it (an NTP step); the log's times come from it, the timers from `now`.
        self._clock = clock
        self.wall_offset_ms = 0
        self.hosted = tuple(hosted)
        self.config = config
        self.up = True
        self.paused = False
        self.recovering = False  # since a power failure or pause, until whole again
        self.incarnation = 0
        self.broker_epoch = broker_epoch
        self.registered = True
        self.alive_epochs: dict[int, int] = {}
        self.logs = logs
        self.replicas: dict[int, PartitionReplica] = {}
        self.inbox: list[tuple[int, tuple[Any, ...]]] = []
        # ISR changes travel as in production: batched, one request in flight.
        self.alter: AlterPartitionBatcher[int] = AlterPartitionBatcher()
        self.alter_sent_ms = 0
        self.alter_batch_id = 0
        self.alter_backoff_ms = ALTER_PARTITION_BACKOFF_MS[0]
        self.alter_retry_at = 0
        self.make_replicas()

    def make_replicas(self) -> None:
        self.replicas = {
            p: PartitionReplica(
                self.id,
                self.logs[p],
                self.config,
                broker_epoch=self.broker_epoch,
                is_replica_eligible=self._eligible,
            )
            for p in self.hosted
        }
        if self._clock is not None:
            for rep in self.replicas.values():
                rep.log_clock = self.wall_ms

    def wall_ms(self) -> int:
        assert self._clock is not None
        return self._clock() + self.wall_offset_ms

    def _eligible(self, replica_id: int, broker_epoch: int) -> bool:
        return broker_epoch >= 0 and self.alive_epochs.get(replica_id) == broker_epoch


@dataclass(slots=True)
class _Batch:
    msgs: list[int]
    epoch: int
    seq: int
    data: bytes
    attempts: set[int] = field(default_factory=set)
    in_flight: int | None = None
    sent_ms: int = 0
    backoff_until_ms: int = 0


@dataclass(slots=True)
class SimProducer:
    id: int
    pid: int
    partition: int
    acks: int
    total: int
    epoch: int = 0
    next_seq: int = 0
    next_msg: int = 0
    bumped: bool = False
    batch: _Batch | None = None

    @property
    def done(self) -> bool:
        return self.batch is None and self.next_msg >= self.total

    def build(self, msgs: list[int], now_ms: int) -> _Batch:
        records = [NewRecord(f"P{self.id}:{m}".encode(), None, now_ms) for m in msgs]
        data = build_batch(
            records,
            producer_id=self.pid,
            producer_epoch=self.epoch,
            base_sequence=self.next_seq,
            now_ms=now_ms,
        )
        return _Batch(msgs, self.epoch, self.next_seq, data)


# --- what the checks record ---------------------------------------------------------


@dataclass(slots=True)
class _Committed:
    """What has been below some leader's HW: bytes, end offset, and derived indexes."""

    data: bytes = b""
    end: int = 0
    batches: dict[int, BatchHeader] = field(default_factory=dict)
    sequences: set[tuple[int, int, int]] = field(default_factory=set)
    messages: set[bytes] = field(default_factory=set)


@dataclass(slots=True)
class _Ack:
    partition: int
    offset: int
    pid: int
    epoch: int
    seq: int
    count: int


# --- the state the simulation's parts share ---------------------------------------------


class SimulationState:
    """What `Simulation` holds and its faults (`SimFaults`) and checks
    (`ReplicationChecks`) read and change: each part declares only what is its own."""

    params: SimParams
    nodes: dict[int, SimNode]
    controller: SimController
    producers: dict[int, SimProducer]
    now: int
    structure: int
    stats: dict[str, int]
    committed: dict[int, _Committed]

    def at(self, t: int, kind: str, *args: object) -> None:
        raise NotImplementedError

    def trace(self, line: str) -> None:
        raise NotImplementedError

    def fail(self, message: str) -> None:
        raise NotImplementedError

    def prepare_log(self, log: SimLog) -> SimLog:
        raise NotImplementedError
