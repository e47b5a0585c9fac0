"""What the shells of the group coordinator (node/groups/offsets_topic.py) and the
transaction coordinator (node/transactions/txn_runtime.py) share: following the
leadership of their internal topic's partitions (a shard per led partition, loaded
under the leader epoch it was led at, unloaded when led elsewhere), waiting until a
new leader may load (its high watermark reached the log end it found, so everything a
previous leader acknowledged is below it), reading the partition, and one waiter
thread per partition that awaits its appends in order."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Generic, Protocol, TypeVar

from seglog.controller.metadata_image import MetadataImage

# The plain clocks, not the faulted ones: the coordinators' timers, stamps and load
# times stay off the node's clock faults (docs/disk-and-clock-faults.md, Clocks).
from seglog.storage.disk_and_clock import plain_monotonic_s
from seglog.storage.disk_and_clock import plain_wall_ms as now_ms
from seglog.storage.record_batch import BatchHeader, iter_batches
from seglog.storage.txn_verification import VerificationGuard

from .event_log import EventLogger
from .partition_requests import FetchResult, FetchSpec
from .replica_manager import ReplicaManager

LOAD_POLL_S = 0.05
LOAD_READ_BYTES = 1 << 20

S = TypeVar("S")


class Shard(Protocol):
    partition: int
    leader_epoch: int


class Coordinator(Protocol[S]):
    shards: dict[int, S]

    def unload(self, partition: int) -> list[Any]: ...
    def begin_loading(self, partition: int, leader_epoch: int) -> tuple[S, list[Any]]: ...


def led_partitions(image: MetadataImage, topic: str, node_id: int) -> dict[int, int] | None:
    """Partition -> leader epoch of `topic`'s partitions `node_id` leads; None while the
    metadata has no such topic."""
    t = image.topics.get(topic)
    if t is None:
        return None
    return {p: s.leader_epoch for p, s in t.partitions.items() if s.leader == node_id}


def follow_leadership(
    coordinator: Coordinator[S], led: dict[int, int], on_unload: Callable[[int], None]
) -> tuple[list[Any], list[S]]:
    """Unload the shards of partitions no longer led; start a shard (loading) for each
    partition led at an epoch without one. Returns (actions, shards to load)."""
    out: list[Any] = []
    for p in [p for p in coordinator.shards if p not in led]:
        on_unload(p)
        out += coordinator.unload(p)
    to_load = []
    for p, epoch in led.items():
        shard: Any = coordinator.shards.get(p)
        if shard is None or shard.leader_epoch != epoch:
            shard, unloaded = coordinator.begin_loading(p, epoch)
            out += unloaded
            to_load.append(shard)
    return out, to_load


def loadable_range(
    replica_manager: ReplicaManager,
    tp: tuple[str, int],
    leader_epoch: int,
    current: Callable[[], bool],
    stopped: threading.Event,
) -> tuple[int, int] | None:
    """(log start, the log end found) once this node leads `tp` at `leader_epoch` and
    its high watermark reached that end; None if the shard stopped being `current`
    (replaced or unloaded) or the node stops first."""
    end = -1
    # Bounded by the shard being replaced or unloaded (each pass checks it).
    while not stopped.is_set():
        if not current():
            return None
        hp = replica_manager.hosted(tp)
        if hp is not None and hp.replica.is_leader and hp.leader_epoch == leader_epoch:
            with hp.plog.lock:
                end = hp.plog.log.log_end_offset if end < 0 else end
                hw, start = hp.plog.log.high_watermark, hp.plog.log.log_start_offset
            if hw >= end:
                return start, end
        time.sleep(LOAD_POLL_S)
    return None


def read_at(
    replica_manager: ReplicaManager, tp: tuple[str, int], leader_epoch: int, offset: int
) -> FetchResult:
    """A loader's read of `tp` from `offset` (below the high watermark)."""
    spec = FetchSpec(tp[0], tp[1], offset, leader_epoch, LOAD_READ_BYTES)
    return replica_manager.fetch(
        [spec], replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=LOAD_READ_BYTES
    )[0]


class PartitionWaiters:
    """One thread per partition awaiting its appends, in the order they were made (so
    their outcomes are applied in log order, as a replay after a failover would)."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._waiters: dict[int, ThreadPoolExecutor] = {}

    def submit(self, partition: int, wait: Callable[[], None]) -> None:
        waiter = self._waiters.get(partition)
        if waiter is None:
            waiter = ThreadPoolExecutor(1, thread_name_prefix=f"{self._name}-{partition}")
            self._waiters[partition] = waiter
        try:
            waiter.submit(wait)
        except RuntimeError:  # shut down: the append is never acknowledged
            pass

    def shutdown(self) -> None:
        for waiter in list(self._waiters.values()):
            waiter.shutdown(wait=False, cancel_futures=True)


R = TypeVar("R")
MAX_WAITING = 50_000  # requests awaiting an answer; beyond: COORDINATOR_NOT_AVAILABLE


class CoordinatorShell(Generic[R]):
    """The threads and bookkeeping around a coordinator's core: one lock, the answers
    awaited (request id -> Future), a ticker thread and the per-partition waiters.
    A subclass has `coordinator` (with `shards` and `unload`), `replica_manager` and
    its `topic`, and gives `_tick` (the timers' actions), `_carry_out` (under the
    lock), and `_replay` and `_loaded` (what loading a shard does with its records)."""

    coordinator: Any
    replica_manager: ReplicaManager
    topic: str  # the internal topic whose partitions the shards load
    events: EventLogger
    load_failed_event: str

    def __init__(self, name: str, tick_s: float) -> None:
        self._name = name
        self._tick_s = tick_s
        self._lock = threading.Lock()
        self._answers: dict[int, Future[R]] = {}
        self._next_request = 0
        self._waiters = PartitionWaiters(f"{name}-writes")
        self._stopped = threading.Event()
        self._ticker: threading.Thread | None = None

    def _tick(self) -> list[Any]:
        raise NotImplementedError

    def _load(self, shard: Any) -> None:
        """Replay the shard's partition of `topic` (runs on a thread of its own): once
        loadable_range says it may, a read at a time from the log start to the end it
        found, each read's batches not yet replayed going to `_replay`; then `_loaded`.
        A failed read (logged as `load_failed_event`) or a shard no longer current
        leaves the shard loading: a newer leadership loads again (or unloads)."""
        tp = (self.topic, shard.partition)
        started = plain_monotonic_s()

        def current() -> bool:
            with self._lock:
                return self._current(shard)

        found = loadable_range(self.replica_manager, tp, shard.leader_epoch, current, self._stopped)
        if found is None:
            return
        offset, end = found
        records = 0
        while offset < end:
            result = read_at(self.replica_manager, tp, shard.leader_epoch, offset)
            if result.error_name != "NONE":
                self.events.warning(
                    self.load_failed_event, partition=shard.partition, error=result.error_name
                )
                return
            data = bytes(result.records)
            if not data:
                break
            batches = []
            for position, header in iter_batches(data):
                if header.last_offset >= offset:
                    batches.append((position, header))
                    offset = header.last_offset + 1
            replayed = self._replay(shard, data, batches)
            if replayed is None:
                return
            records += replayed
        self._loaded(shard, records, round((plain_monotonic_s() - started) * 1000))

    def _replay(
        self, shard: Any, data: bytes, batches: Sequence[tuple[int, BatchHeader]]
    ) -> int | None:
        """Replay one read's batches (position in `data`, header) into the shard: the
        records replayed, None if the shard is no longer current (a subclass's)."""
        raise NotImplementedError

    def _loaded(self, shard: Any, records: int, ms: int) -> None:
        """The whole partition is replayed (`records` records in `ms`): the shard may
        serve (a subclass's)."""
        raise NotImplementedError

    def _start_loads(self, shards: list[Any]) -> None:
        """One loading thread per shard that follow_leadership says to load."""
        for shard in shards:
            threading.Thread(
                target=self._load,
                args=(shard,),
                name=f"{self._name}-load-{shard.partition}",
                daemon=True,
            ).start()

    def _current(self, shard: Any) -> bool:
        """Whether the shard is still the coordinator's for its partition (not
        unloaded or replaced by a newer leadership's meanwhile)."""
        return self.coordinator.shards.get(shard.partition) is shard

    def _carry_out(self, actions: list[Any]) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self._ticker = threading.Thread(
            target=self._tick_loop, name=f"{self._name}-ticks", daemon=True
        )
        self._ticker.start()

    def _tick_loop(self) -> None:
        while not self._stopped.wait(self._tick_s):
            with self._lock:
                self._carry_out(self._tick())

    def shutdown(self) -> None:
        """Stop the timers and unload every shard (their waiting requests are answered)."""
        self._stopped.set()
        with self._lock:
            out: list[Any] = []
            for p in list(self.coordinator.shards):
                out += self.coordinator.unload(p)
            self._carry_out(out)
        if self._ticker is not None:
            self._ticker.join(timeout=5)
        self._waiters.shutdown()

    def _park(self, answer: Future[R]) -> int | None:
        """Under the lock: a request id for `answer`, None when too many wait."""
        if len(self._answers) >= MAX_WAITING:
            return None
        self._next_request += 1
        self._answers[self._next_request] = answer
        return self._next_request

    def _resolve(self, request_id: int, result: R) -> None:
        future = self._answers.pop(request_id, None)
        if future is not None and not future.done():
            future.set_result(result)

    def _append_and_report(
        self,
        replica_manager: ReplicaManager,
        tp: tuple[str, int],
        leader_epoch: int,
        write_id: int,
        data: bytes,
        timeout_ms: int,
        guard: VerificationGuard | None = None,
    ) -> None:
        """Append a coordinator's batch as leader of `leader_epoch` only, acks=all
        (with `guard`: a transactional batch verified with its transaction coordinator,
        KIP-890); its outcome goes to the coordinator's on_write_done in append order
        (the partition's waiter), under the lock."""
        started = replica_manager.start_produce_all(
            [(tp, data)],
            -1,
            timeout_ms,
            leader_epoch=leader_epoch,
            verification_guards={tp: guard} if guard is not None else None,
        )
        log = EventLogger(f"{self._name}_coordinator")

        def wait() -> None:
            try:
                error = replica_manager.await_produced(started)[0].error_name
            except Exception:  # noqa: BLE001 - reported to the coordinator as a failure
                log.error(f"{self._name}_write_failed", exc=True, partition=tp[1])
                error = "UNKNOWN_SERVER_ERROR"
            if error != "NONE":
                log.info(
                    f"{self._name}_write_not_acknowledged",
                    partition=tp[1],
                    leader_epoch=leader_epoch,
                    error=error,
                )
            with self._lock:
                self._carry_out(
                    self.coordinator.on_write_done(tp[1], leader_epoch, write_id, error, now_ms())
                )

        self._waiters.submit(tp[1], wait)
